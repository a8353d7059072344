//! The link lookup seam: an in-memory cache of link documents in front of CouchDB.
//!
//! Hits are answered from memory. Misses go to CouchDB, concurrent misses for one ID sharing one
//! request. The `_changes` follower ([`crate::follower`]) keeps cached entries current; entries
//! are kept only while that feed guarantees it will report every later change, so a cached link
//! is never more stale than the feed.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed};
use std::sync::{Arc, RwLock};
use std::time::Instant;

use serde_json::Value;
use tokio::sync::watch;

use crate::couch::{CouchClient, CouchError};
use crate::domain::{Link, LinkDoc, LinkId};
use crate::metrics::Metrics;

/// CouchDB could not answer for a link the store does not know.
#[derive(Debug, Clone, thiserror::Error)]
#[error("CouchDB is unavailable: {0}")]
pub struct Unavailable(pub String);

/// What a lookup found: the link, or that there is none (missing, deleted or unusable).
pub type Found = Option<Arc<Link>>;

/// A fill in progress: waiters receive its result.
type Pending = watch::Receiver<Option<Result<Found, Unavailable>>>;

enum Slot {
    Ready(Found),
    Loading(Pending),
}

struct Cache {
    slots: HashMap<LinkId, Slot>,
    /// `Ready` keys in insertion order, for first-in-first-out eviction.
    order: VecDeque<LinkId>,
}

/// Reads link documents, from memory when it can.
pub struct LinkStore {
    couch: CouchClient,
    metrics: Arc<Metrics>,
    cache: RwLock<Cache>,
    capacity: usize,
    /// Even while no feed vouches for the cache (fills are then not kept), odd while one does.
    /// Bumped at every change of state, so a fill that straddles one is not kept either.
    epoch: AtomicU64,
}

impl LinkStore {
    /// A store reading through `couch`, holding at most `capacity` entries.
    pub fn new(couch: CouchClient, metrics: Arc<Metrics>, capacity: usize) -> Self {
        LinkStore {
            couch,
            metrics,
            cache: RwLock::new(Cache { slots: HashMap::new(), order: VecDeque::new() }),
            capacity: capacity.max(1),
            epoch: AtomicU64::new(0),
        }
    }

    /// The link stored under `id`; `Ok(None)` when there is none or its document is unusable.
    pub async fn get(&self, id: LinkId) -> Result<Found, Unavailable> {
        loop {
            let pending = {
                let cache = self.cache.read().expect("cache lock");
                match cache.slots.get(&id) {
                    Some(Slot::Ready(found)) => {
                        self.metrics.cache_hits.fetch_add(1, Relaxed);
                        return Ok(found.clone());
                    }
                    Some(Slot::Loading(pending)) => Some(pending.clone()),
                    None => None,
                }
            };
            let outcome = match pending {
                Some(pending) => Self::wait(pending).await,
                None => self.fill(id).await,
            };
            // `None`: the request filling this ID was cancelled (its client left); ask again.
            if let Some(result) = outcome {
                return result;
            }
        }
    }

    async fn wait(mut pending: Pending) -> Option<Result<Found, Unavailable>> {
        pending.wait_for(Option::is_some).await.ok().map(|result| result.clone().expect("waited for Some"))
    }

    /// Reads `id` from CouchDB, unless another request is already doing so.
    async fn fill(&self, id: LinkId) -> Option<Result<Found, Unavailable>> {
        let (tx, rx) = watch::channel(None);
        let pending = {
            let mut cache = self.cache.write().expect("cache lock");
            match cache.slots.get(&id) {
                Some(Slot::Ready(found)) => return Some(Ok(found.clone())),
                Some(Slot::Loading(pending)) => Some(pending.clone()),
                None => {
                    cache.slots.insert(id, Slot::Loading(rx.clone()));
                    None
                }
            }
        };
        if let Some(pending) = pending {
            return Self::wait(pending).await;
        }
        self.metrics.cache_misses.fetch_add(1, Relaxed);
        let epoch = self.epoch.load(Acquire);
        // If this future is dropped mid-request, the guard clears the slot so that waiters
        // retry instead of hanging.
        let mut guard = SlotGuard { store: self, id, rx, armed: true };
        let result = self.fetch(id).await;
        let keep = result.is_ok() && epoch % 2 == 1 && self.epoch.load(Acquire) == epoch;
        {
            let mut cache = self.cache.write().expect("cache lock");
            let ours = matches!(cache.slots.get(&id), Some(Slot::Loading(p)) if p.same_channel(&guard.rx));
            // Not ours any more: the feed replaced it with a newer state, which wins.
            if ours {
                match (&result, keep) {
                    (Ok(found), true) => self.insert_ready(&mut cache, id, found.clone()),
                    _ => {
                        cache.slots.remove(&id);
                    }
                }
            }
        }
        guard.armed = false;
        let _ = tx.send(Some(result.clone()));
        Some(result)
    }

    async fn fetch(&self, id: LinkId) -> Result<Found, Unavailable> {
        let started = Instant::now();
        let result = self.couch.get_link(&id).await;
        self.metrics.couch_latency(started.elapsed());
        result.map(|doc| doc.and_then(|doc| parse(id, doc))).map_err(|e: CouchError| {
            self.metrics.couch_errors.fetch_add(1, Relaxed);
            Unavailable(e.to_string())
        })
    }

    fn insert_ready(&self, cache: &mut Cache, id: LinkId, found: Found) {
        if let Some(Slot::Ready(_)) = cache.slots.insert(id, Slot::Ready(found)) {
            return; // already counted in `order`
        }
        cache.order.push_back(id);
        while cache.order.len() > self.capacity {
            if let Some(old) = cache.order.pop_front() {
                cache.slots.remove(&old);
            }
        }
    }

    /// Applies one change from the `_changes` feed: the document's new state (`None` when
    /// deleted) replaces a cached or loading entry. IDs not in the cache are ignored: the next
    /// request reads them fresh. Idempotent, so replayed changes are harmless.
    pub fn apply_change(&self, id: &str, doc: Option<Value>) {
        let Ok(id) = LinkId::parse(id) else { return }; // design documents and the like
        let found = doc.and_then(|doc| match serde_json::from_value::<LinkDoc>(doc) {
            Ok(doc) => parse(id, doc),
            Err(e) => {
                tracing::warn!(%id, "link document cannot be served: {e}");
                None
            }
        });
        let mut cache = self.cache.write().expect("cache lock");
        match cache.slots.get(&id) {
            Some(Slot::Ready(_)) | Some(Slot::Loading(_)) => self.insert_ready(&mut cache, id, found),
            None => {}
        }
    }

    /// The feed now reports every change from a known point on: fills may be kept.
    pub fn feed_synced(&self) {
        let _ = self.epoch.fetch_update(AcqRel, Acquire, |e| (e % 2 == 0).then_some(e + 1));
    }

    /// The feed lost its place (the database was deleted, say): forget everything.
    pub fn feed_lost(&self) {
        let _ = self.epoch.fetch_update(AcqRel, Acquire, |e| (e % 2 == 1).then_some(e + 1));
        let mut cache = self.cache.write().expect("cache lock");
        cache.slots.retain(|_, slot| matches!(slot, Slot::Loading(_)));
        cache.order.clear();
    }

    /// Entries held (links and known-missing IDs).
    pub fn len(&self) -> usize {
        self.cache.read().expect("cache lock").order.len()
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The CouchDB client the store reads through.
    pub fn couch(&self) -> &CouchClient {
        &self.couch
    }
}

fn parse(id: LinkId, doc: LinkDoc) -> Found {
    match Link::from_doc(doc) {
        Ok(link) => Some(Arc::new(link)),
        Err(reason) => {
            tracing::warn!(%id, "link document cannot be served: {reason}");
            None
        }
    }
}

/// Clears a `Loading` slot whose fill was cancelled.
struct SlotGuard<'a> {
    store: &'a LinkStore,
    id: LinkId,
    rx: Pending,
    armed: bool,
}

impl Drop for SlotGuard<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let mut cache = self.store.cache.write().expect("cache lock");
        if matches!(cache.slots.get(&self.id), Some(Slot::Loading(p)) if p.same_channel(&self.rx)) {
            cache.slots.remove(&self.id);
        }
    }
}
