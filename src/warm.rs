//! Warm start: once the `_changes` follower vouches for the cache (at start, and again after it
//! lost its place), the cache is filled from CouchDB in pages in the background, up to its
//! capacity, while requests are served. A restart under load then sends CouchDB pages, not
//! every request.
//!
//! No change falls between the fill and the feed: the feed starts from the sequence read
//! before the first page, and while warming it stores every change it sees (not only those of
//! cached IDs), while a page never replaces what is already cached (see
//! [`LinkStore::warm_insert`]). Pages come from `_all_docs` with `include_docs`, which CouchDB
//! 3.5 reads faster than `_changes` from 0 (docs/reference.md, "Freshness and availability").

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::couch::{CouchClient, CouchError};
use crate::domain::LinkId;
use crate::errors::Causes;
use crate::store::LinkStore;

/// Documents per page: large enough that a million links take few round trips, small enough
/// that one page is a few megabytes.
pub const PAGE: usize = 2000;
/// How often the warmer looks whether the feed (re)started.
const POLL: Duration = Duration::from_millis(100);
/// Wait after a failed page before asking again.
const RETRY: Duration = Duration::from_millis(500);

/// What one [`Warmer::step`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WarmStep {
    /// A page was read and its links stored.
    Page {
        /// Documents in the page.
        docs: usize,
    },
    /// Every document was read, or the cache is full.
    Done,
    /// The feed lost its place mid-way: the warm-up starts over once it is back.
    Restart,
}

/// Fills a [`LinkStore`] from CouchDB, page by page.
pub struct Warmer {
    couch: CouchClient,
    store: Arc<LinkStore>,
    /// The epoch being filled for, and the ID to read from next.
    epoch: u64,
    from: Option<String>,
    /// The last page has been read.
    done: bool,
}

impl Warmer {
    /// A warm-up of `store` for `epoch` (see [`LinkStore::synced_epoch`]), from the first ID.
    pub fn new(couch: CouchClient, store: Arc<LinkStore>, epoch: u64) -> Warmer {
        Warmer { couch, store, epoch, from: None, done: false }
    }

    /// Reads and stores the next page.
    pub async fn step(&mut self) -> Result<WarmStep, CouchError> {
        if self.done || self.store.is_full() {
            return Ok(WarmStep::Done);
        }
        let mut page = self.couch.docs_page(self.from.as_deref(), PAGE + 1).await?;
        let more = page.len() > PAGE;
        // The first row is the last one of the previous page, unless it was deleted meanwhile.
        if self.from.is_some() && page.first().map(|(id, _)| id) == self.from.as_ref() {
            page.remove(0);
        }
        let docs = page.len();
        let last = page.last().map(|(id, _)| id.clone());
        for (id, doc) in page {
            if let Ok(link) = LinkId::parse(&id) {
                if !self.store.warm_insert(self.epoch, link, doc) {
                    return Ok(WarmStep::Restart);
                }
            }
        }
        match last {
            Some(id) if more => self.from = Some(id),
            _ => self.done = true,
        }
        Ok(WarmStep::Page { docs })
    }

    /// Warms the cache each time the feed starts vouching for it, until `stop` turns true;
    /// `warmed_for`: an epoch already warm (a snapshot's).
    pub async fn run(
        couch: CouchClient,
        store: Arc<LinkStore>,
        mut warmed_for: Option<u64>,
        mut stop: watch::Receiver<bool>,
    ) {
        while !*stop.borrow() {
            let epoch = match store.synced_epoch() {
                Some(epoch) if warmed_for != Some(epoch) => epoch,
                synced => {
                    // Not synced: the feed has not started, or lost its place and the cache
                    // was emptied; a warm-up follows once it is back.
                    if synced.is_none() {
                        store.set_warming(true);
                    }
                    tokio::select! {
                        _ = tokio::time::sleep(POLL) => continue,
                        _ = stop.changed() => break,
                    }
                }
            };
            store.set_warming(true);
            let started = std::time::Instant::now();
            let mut warmer = Warmer::new(couch.clone(), store.clone(), epoch);
            let mut docs = 0;
            let finished = loop {
                let step = tokio::select! {
                    step = warmer.step() => step,
                    _ = stop.changed() => break false,
                };
                match step {
                    Ok(WarmStep::Page { docs: n }) => docs += n,
                    Ok(WarmStep::Done) => break true,
                    Ok(WarmStep::Restart) => break false,
                    Err(e) => {
                        tracing::warn!("warming the link cache: {}; retrying", Causes(&e));
                        tokio::select! {
                            _ = tokio::time::sleep(RETRY) => {}
                            _ = stop.changed() => break false,
                        }
                    }
                }
            };
            if finished {
                store.set_warming(false);
                warmed_for = Some(epoch);
                tracing::info!(
                    "link cache warm: {} entries from {docs} documents in {:.1} s",
                    store.len(),
                    started.elapsed().as_secs_f64()
                );
            }
        }
    }
}
