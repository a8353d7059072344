//! The link lookup seam: an in-memory cache of link documents in front of CouchDB.
//!
//! Hits are answered from memory. Misses go to CouchDB, concurrent misses for one ID sharing one
//! request. The `_changes` follower ([`crate::follower`]) keeps cached entries current; entries
//! are kept only while that feed guarantees it will report every later change, so a cached link
//! is never more stale than the feed.

use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasher;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Release};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::{watch, Semaphore};

use crate::couch::{CouchClient, CouchError};
use crate::domain::{Link, LinkDoc, LinkId};
use crate::metrics::Metrics;

/// A link the store does not know could not be read (shared by every request that waited on
/// the same read): a 503 with `Retry-After`, never a 404.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Unavailable {
    /// CouchDB did not answer, or answered an error.
    #[error("CouchDB could not be asked")]
    Couch(#[source] Arc<CouchError>),
    /// As many reads as allowed were already in flight, for longer than a request waits.
    #[error("{0} reads of links not in memory already in flight (COUCHLINK_COLD_READS)")]
    Busy(usize),
}

/// How long a request waits for one of the [`LinkStore`]'s cold-read permits before it is
/// answered 503: long enough to ride out a burst, short enough that the client can retry.
const COLD_READ_WAIT: Duration = Duration::from_millis(500);

/// What a lookup found: the link, or that there is none (missing, deleted or unusable).
pub type Found = Option<Arc<Link>>;

/// A fill in progress: waiters receive its result.
type Pending = watch::Receiver<Option<Result<Found, Unavailable>>>;

/// foldhash: a few nanoseconds per 5-byte key where SipHash takes tens, randomly seeded per
/// process so that clients cannot aim IDs at one bucket.
type Map<V> = HashMap<LinkId, V, foldhash::fast::RandomState>;

/// Shards keep the serving threads (one per core) off each other's lock cache line: at least
/// this many (see [`shard_count`]).
const SHARDS: usize = 32;

/// One part of the cache. Entries being filled live apart from ready ones, so that the big map
/// holds 8-byte values (1M links: 16 MB less than one enum slot per entry).
#[derive(Default)]
struct Shard {
    ready: Map<Found>,
    loading: Map<Pending>,
    /// `ready` keys in insertion order, for first-in-first-out eviction.
    order: VecDeque<LinkId>,
}

/// Reads link documents, from memory when it can.
pub struct LinkStore {
    couch: CouchClient,
    metrics: Arc<Metrics>,
    shards: Box<[RwLock<Shard>]>,
    pick: foldhash::fast::RandomState,
    shard_capacity: usize,
    /// Even while no feed vouches for the cache (fills are then not kept), odd while one does.
    /// Bumped at every change of state, so a fill that straddles one is not kept either.
    epoch: AtomicU64,
    /// One permit per read of an unknown ID in flight: what CouchDB is asked at once, whatever
    /// arrives (a restart under load, a flood of random IDs). Coalesced waiters take none.
    cold_reads: Semaphore,
    cold_read_limit: usize,
    /// Set while a warm-up ([`crate::warm`]) fills the cache: the feed then stores every change,
    /// known ID or not, so that a page read before a change cannot be stored after it.
    warming: AtomicBool,
    /// Set while the feed catches up from a snapshot's sequence: it then stores every change
    /// too, so that links made while the proxy was down are in memory once it has caught up.
    catching_up: AtomicBool,
    capacity: usize,
    /// The last revision of each unusable document warned about, so that each is warned about
    /// once however often it is read (emptied when it grows large; a warning then repeats).
    warned: Mutex<Map<Option<Box<str>>>>,
}

/// How many unusable documents [`LinkStore`] remembers having warned about.
const WARNED_LIMIT: usize = 10_000;

impl LinkStore {
    /// A store reading through `couch`, holding at most `capacity` entries, with at most
    /// `cold_reads` reads of unknown IDs in flight.
    pub fn new(couch: CouchClient, metrics: Arc<Metrics>, capacity: usize, cold_reads: usize) -> Self {
        // A small cache in few shards, so that the bound stays exact.
        let shards = if capacity >= 64 * SHARDS { shard_count(capacity) } else { 1 };
        LinkStore {
            couch,
            metrics,
            shards: (0..shards).map(|_| RwLock::default()).collect(),
            pick: foldhash::fast::RandomState::default(),
            shard_capacity: (capacity / shards).max(1),
            epoch: AtomicU64::new(0),
            cold_reads: Semaphore::new(cold_reads),
            cold_read_limit: cold_reads,
            warming: AtomicBool::new(false),
            catching_up: AtomicBool::new(false),
            capacity,
            warned: Mutex::default(),
        }
    }

    fn shard(&self, id: &LinkId) -> &RwLock<Shard> {
        &self.shards[self.pick.hash_one(id) as usize % self.shards.len()]
    }

    /// The link stored under `id`; `Ok(None)` when there is none or its document is unusable.
    pub async fn get(&self, id: LinkId) -> Result<Found, Unavailable> {
        loop {
            let pending = {
                let shard = self.shard(&id).read().expect("cache lock");
                if let Some(found) = shard.ready.get(&id) {
                    self.metrics.cache_hit();
                    return Ok(found.clone());
                }
                shard.loading.get(&id).cloned()
            };
            // Boxed: a read from CouchDB is a large future, and every connection's task would
            // otherwise carry room for one.
            let outcome = match pending {
                Some(pending) => Box::pin(Self::wait(pending)).await,
                None => Box::pin(self.fill(id)).await,
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
            let mut shard = self.shard(&id).write().expect("cache lock");
            if let Some(found) = shard.ready.get(&id) {
                return Some(Ok(found.clone()));
            }
            match shard.loading.get(&id) {
                Some(pending) => Some(pending.clone()),
                None => {
                    shard.loading.insert(id, rx.clone());
                    None
                }
            }
        };
        if let Some(pending) = pending {
            return Self::wait(pending).await;
        }
        self.metrics.cache_miss();
        let epoch = self.epoch.load(Acquire);
        // If this future is dropped mid-request, the guard clears the slot so that waiters
        // retry instead of hanging.
        let mut guard = LoadingGuard { store: self, id, rx, armed: true };
        let result = self.fetch(id).await;
        let keep = result.is_ok() && epoch % 2 == 1 && self.epoch.load(Acquire) == epoch;
        // With RUST_LOG=couchlink=debug, fills and feed changes can be lined up in time (the
        // fields are only evaluated when that level is on).
        tracing::debug!(
            %id,
            keep,
            target = ?result.as_ref().ok().and_then(|found| found.as_deref().map(|link| &*link.url)),
            "read from CouchDB"
        );
        {
            let mut shard = self.shard(&id).write().expect("cache lock");
            // Not ours any more: the feed replaced it with a newer state, which wins.
            if shard.loading.get(&id).is_some_and(|p| p.same_channel(&guard.rx)) {
                shard.loading.remove(&id);
                if let (Ok(found), true) = (&result, keep) {
                    self.insert_ready(&mut shard, id, found.clone());
                }
            }
        }
        guard.armed = false;
        let _ = tx.send(Some(result.clone()));
        Some(result)
    }

    async fn fetch(&self, id: LinkId) -> Result<Found, Unavailable> {
        let Ok(Ok(_permit)) = tokio::time::timeout(COLD_READ_WAIT, self.cold_reads.acquire()).await else {
            self.metrics.cold_read_refused();
            return Err(Unavailable::Busy(self.cold_read_limit));
        };
        let started = Instant::now();
        let result = self.couch.get_link(&id).await;
        self.metrics.couch_request(started.elapsed(), result.is_err());
        if let Err(e) = &result {
            self.say_if_refused(e);
        }
        result.map(|doc| doc.and_then(|doc| self.parse(id, doc))).map_err(|e| Unavailable::Couch(Arc::new(e)))
    }

    /// Says, once until CouchDB accepts the account again, that it refused the proxy's account,
    /// naming it and CouchDB's reason, when `error` is that; whether it said so.
    pub fn say_if_refused(&self, error: &CouchError) -> bool {
        if !self.couch.first_refusal(error) {
            return false;
        }
        let advice = if error.status() == Some(403) {
            "give the account a reader role of the database again"
        } else {
            "CouchDB is not asked again with this password but by the _changes feed once a minute; fix \
             the account or its password (SIGHUP makes couchlink read its password file again)"
        };
        tracing::warn!(
            "CouchDB at {} refused the account {} on {} ({}): links already in memory are still served, \
             unknown ones get 503; {advice}",
            self.couch.server_url(),
            self.couch.user(),
            self.couch.database(),
            crate::errors::Causes(error)
        );
        true
    }

    fn insert_ready(&self, shard: &mut Shard, id: LinkId, found: Found) {
        if shard.ready.insert(id, found).is_some() {
            return; // already in `order`
        }
        shard.order.push_back(id);
        while shard.order.len() > self.shard_capacity {
            if let Some(old) = shard.order.pop_front() {
                shard.ready.remove(&old);
            }
        }
    }

    /// Applies one change from the `_changes` feed: the document's new state (`None` when
    /// deleted) replaces a cached or loading entry. IDs not in the cache are ignored: the next
    /// request reads them fresh. Idempotent, so replayed changes are harmless.
    pub fn apply_change(&self, id: &str, doc: Option<Value>) {
        let Some(id) = LinkId::parse_bytes(id.as_bytes()) else { return }; // design documents and the like
        let found = doc.and_then(|doc| self.parse_value(id, doc));
        let mut shard = self.shard(&id).write().expect("cache lock");
        let known = shard.loading.remove(&id).is_some() || shard.ready.contains_key(&id);
        if known || self.warming.load(Acquire) || self.catching_up.load(Acquire) {
            self.insert_ready(&mut shard, id, found);
        }
    }

    /// The epoch a warm-up may fill for: `Some` while the feed vouches for the cache.
    pub fn synced_epoch(&self) -> Option<u64> {
        Some(self.epoch.load(Acquire)).filter(|e| e % 2 == 1)
    }

    /// Whether a warm-up is filling the cache (for `/healthz`).
    pub fn is_warming(&self) -> bool {
        self.warming.load(Acquire)
    }

    /// Marks a warm-up as started or finished.
    pub fn set_warming(&self, warming: bool) {
        self.warming.store(warming, Release);
    }

    /// Marks a catch-up from a snapshot's sequence as started or finished.
    pub fn set_catching_up(&self, catching_up: bool) {
        self.catching_up.store(catching_up, Release);
    }

    /// Every entry, oldest first within each shard (for a snapshot). Each shard is read-locked
    /// only while its entries are copied (a pointer each).
    pub fn entries(&self) -> Vec<(LinkId, Found)> {
        let mut entries = Vec::with_capacity(self.len());
        for shard in self.shards.iter() {
            let shard = shard.read().expect("cache lock");
            entries.extend(shard.order.iter().filter_map(|id| Some((*id, shard.ready.get(id)?.clone()))));
        }
        entries
    }

    /// Fills an empty cache with `entries` (a snapshot's, oldest first), and declares it synced:
    /// the caller follows the feed from the snapshot's sequence, which reports every change since.
    pub fn restore(&self, entries: Vec<(LinkId, Found)>) {
        for (id, found) in entries {
            let mut shard = self.shard(&id).write().expect("cache lock");
            self.insert_ready(&mut shard, id, found);
        }
        self.feed_synced();
    }

    /// Whether the cache holds as many entries as it may.
    pub fn is_full(&self) -> bool {
        self.len() >= self.capacity
    }

    /// Stores a document a warm-up read, unless the ID is already cached or being read (what
    /// is there came from the feed or a request, and is at least as new) or the feed lost its
    /// place since `epoch` (then `false`: the warm-up must start over).
    pub fn warm_insert(&self, epoch: u64, id: LinkId, doc: Value) -> bool {
        let found = self.parse_value(id, doc);
        let mut shard = self.shard(&id).write().expect("cache lock");
        // Checked under the shard's lock: `feed_lost` bumps the epoch before it clears shards.
        if self.epoch.load(Acquire) != epoch {
            return false;
        }
        if !shard.ready.contains_key(&id) && !shard.loading.contains_key(&id) {
            self.insert_ready(&mut shard, id, found);
        }
        true
    }

    /// The feed now reports every change from a known point on: fills may be kept.
    pub fn feed_synced(&self) {
        let _ = self.epoch.fetch_update(AcqRel, Acquire, |e| (e % 2 == 0).then_some(e + 1));
    }

    /// The feed lost its place (the database was deleted, say): forget everything.
    pub fn feed_lost(&self) {
        let _ = self.epoch.fetch_update(AcqRel, Acquire, |e| (e % 2 == 1).then_some(e + 1));
        for shard in self.shards.iter() {
            let mut shard = shard.write().expect("cache lock");
            shard.ready.clear();
            shard.order.clear();
        }
    }

    /// A document as the store keeps it: the link, or `None` (a 404 until its next revision)
    /// when it cannot be served, counted and warned about once per revision.
    fn parse(&self, id: LinkId, doc: LinkDoc) -> Found {
        let rev: Option<Box<str>> = doc.revision().map(Into::into);
        match Link::from_doc(doc) {
            Ok(link) => {
                if let Some(reason) = link.unservable_url() {
                    self.unusable(id, rev, &format!("{reason}; it acts as inactive (its fallback, or 404)"));
                }
                Some(Arc::new(link))
            }
            Err(reason) => {
                self.unusable(id, rev, &format!("{reason}; it answers 404"));
                None
            }
        }
    }

    /// [`LinkStore::parse`] of a document as JSON (from the feed or a warm-up page).
    fn parse_value(&self, id: LinkId, doc: Value) -> Found {
        match serde_json::from_value::<LinkDoc>(doc) {
            Ok(doc) => self.parse(id, doc),
            Err(e) => {
                self.unusable(id, None, &e);
                None
            }
        }
    }

    /// Counts a document that cannot be served as written, and warns about it once per revision.
    fn unusable(&self, id: LinkId, rev: Option<Box<str>>, reason: &dyn std::fmt::Display) {
        self.metrics.unusable_document();
        let mut warned = self.warned.lock().expect("warned lock");
        if warned.get(&id).is_some_and(|last| *last == rev && rev.is_some()) {
            return;
        }
        if warned.len() >= WARNED_LIMIT {
            warned.clear();
        }
        let shown = rev.as_deref().unwrap_or("?").to_owned();
        warned.insert(id, rev);
        tracing::warn!("link document {id} (revision {shown}) cannot be served as written: {reason}");
    }

    /// Entries held (links and known-missing IDs).
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.read().expect("cache lock").order.len()).sum()
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// How many shards a cache of `capacity` gets: between [`SHARDS`] and twice that, the count at
/// which a full shard fills its hash table closest to the table's maximum load (7/8). Tables
/// double as they grow, so one just past a doubling is half empty: 1M links in 32 shards are
/// 31,250 entries in tables of 65,536 slots. Halving the links halves every shard, so a cache
/// at a power-of-two fraction of its capacity is as well packed.
fn shard_count(capacity: usize) -> usize {
    let load = |shards: usize| {
        let entries = capacity.div_ceil(shards);
        // hashbrown's table for `entries`: the next power of two slots holding them at 7/8.
        let slots = (entries * 8).div_ceil(7).next_power_of_two();
        entries as f64 / (slots * 7 / 8) as f64
    };
    (SHARDS..=2 * SHARDS).max_by(|a, b| load(*a).total_cmp(&load(*b))).unwrap_or(SHARDS)
}

/// Clears a loading entry whose fill was cancelled.
struct LoadingGuard<'a> {
    store: &'a LinkStore,
    id: LinkId,
    rx: Pending,
    armed: bool,
}

impl Drop for LoadingGuard<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let mut shard = self.store.shard(&self.id).write().expect("cache lock");
        if shard.loading.get(&self.id).is_some_and(|p| p.same_channel(&self.rx)) {
            shard.loading.remove(&self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The share of a hashbrown table's usable slots that `entries` fill.
    fn load(entries: usize) -> f64 {
        let mut map: HashMap<u64, ()> = HashMap::new();
        map.extend((0..entries as u64).map(|k| (k, ())));
        entries as f64 / map.capacity() as f64
    }

    #[test]
    fn full_shards_fill_their_tables() {
        for capacity in [1_000_000, 2_000_000, 300_000, 123_457] {
            let shards = shard_count(capacity);
            assert!((SHARDS..=2 * SHARDS).contains(&shards));
            let full = load(capacity.div_ceil(shards));
            assert!(full > 0.8, "capacity {capacity}: {shards} shards, tables {:.0}% full", full * 100.0);
            // At half the capacity the tables are as well packed (they are half the size).
            assert!(load(capacity.div_ceil(shards) / 2) > 0.79, "capacity {capacity} at half");
        }
        // 32 shards would leave a million links in half-empty tables.
        assert!(load(1_000_000usize.div_ceil(SHARDS)) < 0.6);
    }
}
