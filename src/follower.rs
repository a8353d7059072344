//! The `_changes` follower: keeps the link cache current, so an edit made in CouchDB is served
//! within milliseconds, and catches up by itself after an outage (contracts §6).

use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use time::OffsetDateTime;
use tokio::sync::watch;

use crate::couch::{CouchClient, CouchError, FeedEvent};
use crate::metrics::Metrics;
use crate::store::LinkStore;

/// How often CouchDB sends a blank line on an idle feed (one byte a second).
const HEARTBEAT: Duration = Duration::from_secs(1);
/// Silence longer than this (no headers, data or heartbeat) means the connection is dead even if
/// TCP has not noticed. Generous: a busy server delays heartbeats, and reconnecting then only
/// adds load (a CouchDB that restarts, or a closed connection, is noticed at once anyway).
const STALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Reconnection backoff: short, since every second without the feed is a second in which
/// edits are not served; capped so that a CouchDB back from an outage is noticed within 0.5 s.
const MIN_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_millis(500);

/// What the feed is doing, for `/healthz` and `/metrics`.
#[derive(Default)]
pub struct FeedStatus {
    live: AtomicBool,
    changes_applied: AtomicU64,
    detail: Mutex<FeedDetail>,
}

#[derive(Default, Clone)]
struct FeedDetail {
    last_seq: Option<Value>,
    last_change_at: Option<OffsetDateTime>,
    last_error: Option<String>,
}

impl FeedStatus {
    /// Whether the feed is connected now.
    pub fn is_live(&self) -> bool {
        self.live.load(Relaxed)
    }

    /// The status as JSON for `/healthz`.
    pub fn to_json(&self) -> Value {
        let d = self.detail.lock().expect("feed status lock").clone();
        serde_json::json!({
            "state": if self.is_live() { "live" } else { "down" },
            "last_seq": d.last_seq,
            "last_change_applied_at": d.last_change_at.and_then(|t| t.format(&time::format_description::well_known::Rfc3339).ok()),
            "changes_applied": self.changes_applied.load(Relaxed),
            "last_error": d.last_error,
        })
    }
}

/// Why a feed session ended.
#[derive(Debug, thiserror::Error)]
pub enum FeedError {
    #[error(transparent)]
    Couch(#[from] CouchError),
    #[error("the feed closed without a last_seq")]
    Cut,
}

/// Follows the links database's `_changes` into the [`LinkStore`].
pub struct Follower {
    couch: CouchClient,
    store: Arc<LinkStore>,
    metrics: Arc<Metrics>,
    status: Arc<FeedStatus>,
    /// Where to resume: an opaque sequence, handed back to CouchDB exactly as received.
    since: Option<Value>,
    /// Whether stderr was told the feed is down (and so must be told when it is back).
    reported_down: bool,
}

impl Follower {
    /// A follower for `store`'s database.
    pub fn new(store: Arc<LinkStore>, metrics: Arc<Metrics>, status: Arc<FeedStatus>) -> Self {
        Follower { couch: store.couch().clone(), store, metrics, status, since: None, reported_down: false }
    }

    /// One session: find the starting point if there is none yet, connect from it, and apply
    /// changes until the feed ends. `Ok` when CouchDB closed the feed cleanly (reconnect at once).
    pub async fn step(&mut self) -> Result<(), FeedError> {
        let since = match &self.since {
            Some(since) => since.clone(),
            None => {
                // Start at the current end: the cache is empty, so nothing older matters, and
                // every change after this point will be delivered (at least once).
                let since = self.couch.current_seq().await?;
                self.since = Some(since.clone());
                self.store.feed_synced();
                since
            }
        };
        // CouchDB 3 answers with headers at once; pouchdb-server only with the first heartbeat.
        let mut feed = tokio::time::timeout(STALL_TIMEOUT, self.couch.changes(&since, HEARTBEAT))
            .await
            .map_err(|_| CouchError::Stalled(STALL_TIMEOUT))??;
        self.status.live.store(true, Relaxed);
        if std::mem::take(&mut self.reported_down) {
            eprintln!("couchlink: CouchDB _changes feed is back; catching up from where it stopped");
        }
        loop {
            let event = feed.next(STALL_TIMEOUT).await?;
            match event {
                Some(FeedEvent::Change { seq, id, doc }) => {
                    self.store.apply_change(&id, doc);
                    self.metrics.feed_changes.fetch_add(1, Relaxed);
                    self.status.changes_applied.fetch_add(1, Relaxed);
                    let mut detail = self.status.detail.lock().expect("feed status lock");
                    detail.last_seq = Some(seq.clone());
                    detail.last_change_at = Some(OffsetDateTime::now_utc());
                    self.since = Some(seq);
                }
                Some(FeedEvent::End { last_seq }) => {
                    self.status.detail.lock().expect("feed status lock").last_seq = Some(last_seq.clone());
                    self.since = Some(last_seq);
                    return Ok(());
                }
                None => return Err(FeedError::Cut),
            }
        }
    }

    /// Runs sessions until `stop` turns true, reconnecting with backoff and saying on stderr
    /// when the feed goes down and when it is back.
    pub async fn run(mut self, mut stop: watch::Receiver<bool>) {
        let mut backoff = MIN_BACKOFF;
        while !*stop.borrow() {
            let result = tokio::select! {
                result = self.step() => result,
                _ = stop.changed() => break,
            };
            if self.status.live.swap(false, Relaxed) {
                backoff = MIN_BACKOFF;
            }
            let Err(error) = result else { continue };
            self.metrics.feed_reconnects.fetch_add(1, Relaxed);
            if let FeedError::Couch(CouchError::Refused { status: 404, .. }) = &error {
                // The database is gone: nothing cached can be trusted, and a re-created database
                // starts a new sequence.
                self.store.feed_lost();
                self.since = None;
            }
            if !self.reported_down {
                eprintln!("couchlink: CouchDB _changes feed is down ({error}); serving cached links, retrying");
                self.reported_down = true;
            }
            self.status.detail.lock().expect("feed status lock").last_error = Some(error.to_string());
            tokio::select! {
                _ = tokio::time::sleep(backoff) => {}
                _ = stop.changed() => break,
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }
}
