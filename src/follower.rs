//! The `_changes` follower: keeps the link cache current, so an edit made in CouchDB is served
//! within milliseconds, and catches up by itself after an outage.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use time::OffsetDateTime;
use tokio::sync::watch;

use crate::couch::{ChangesFeed, CouchClient, CouchError, FeedEvent};
use crate::errors::Causes;
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
/// How often an account CouchDB refused is tried again (or at once when its password changes):
/// CouchDB locks an account out after more than 5 failures in 5 minutes.
const REFUSED_RETRY: Duration = Duration::from_secs(60);

/// What the feed is doing, for `/healthz` and `/metrics`.
#[derive(Default)]
pub struct FeedStatus {
    live: AtomicBool,
    changes_applied: AtomicU64,
    /// Set while the feed catches up from a snapshot's sequence.
    catching_up: AtomicBool,
    /// While catching up, about how many changes are still to come.
    behind: AtomicU64,
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

    /// The sequence every cached entry is at least as new as (for a snapshot).
    pub fn last_seq(&self) -> Option<Value> {
        self.detail.lock().expect("feed status lock").last_seq.clone()
    }

    /// While catching up from a snapshot's sequence: about how many changes are still to come.
    pub fn behind(&self) -> Option<u64> {
        self.catching_up.load(Relaxed).then(|| self.behind.load(Relaxed))
    }

    /// The status as JSON for `/healthz`.
    pub fn to_json(&self) -> Value {
        let d = self.detail.lock().expect("feed status lock").clone();
        serde_json::json!({
            "state": if self.is_live() { "live" } else { "down" },
            "catching_up": self.catching_up.load(Relaxed),
            "changes_behind": self.behind().unwrap_or(0),
            "last_seq": d.last_seq,
            "last_change_applied_at": d.last_change_at.and_then(|t| t.format(&time::format_description::well_known::Rfc3339).ok()),
            "changes_applied": self.changes_applied.load(Relaxed),
            "last_error": d.last_error,
        })
    }
}

/// Why the feed is not being read.
#[derive(Debug, thiserror::Error)]
pub enum FeedError {
    /// CouchDB did not answer, refused, or sent something unreadable.
    #[error("the _changes feed failed")]
    Couch(#[from] CouchError),
    /// The connection closed without CouchDB's closing `last_seq` line.
    #[error("the _changes feed closed without a last_seq")]
    Cut,
    /// The sequence to resume from (a snapshot's) cannot be followed on from.
    #[error("CouchDB does not accept the sequence {since} ({why})")]
    SequenceRefused {
        /// The sequence.
        since: String,
        /// CouchDB's answer, or why couchlink did not ask.
        why: String,
    },
}

/// What one [`Follower::step`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// A feed was opened (from the current end of the database on the first step).
    Connected,
    /// One change was applied to the cache.
    Applied {
        /// The changed document's ID.
        id: String,
    },
    /// A heartbeat: the feed has sent every change so far.
    Idle,
    /// CouchDB closed the feed cleanly; the next step reopens it where it ended.
    Ended,
}

/// Follows the links database's `_changes` into the [`LinkStore`].
pub struct Follower {
    couch: CouchClient,
    store: Arc<LinkStore>,
    metrics: Arc<Metrics>,
    status: Arc<FeedStatus>,
    /// Where to resume: an opaque sequence, handed back to CouchDB exactly as received.
    since: Option<Value>,
    /// The open feed, between steps.
    feed: Option<ChangesFeed>,
    /// Set while catching up from a snapshot's sequence.
    catch_up: Option<CatchUp>,
}

/// A catch-up from a snapshot's sequence: over at the first heartbeat (CouchDB had nothing more
/// to send) or once the feed reaches where the database stood when the feed opened.
struct CatchUp {
    started: Instant,
    applied: u64,
    /// The database's sequence number when the feed opened (see [`seq_number`]).
    target: Option<u64>,
}

/// The number a sequence starts with: pouchdb-server's whole integer, or CouchDB 3's count
/// before the `-` (the sum of its shards' sequences). Only an estimate of progress, never used
/// to decide what to read: the opaque sequence itself is what goes back to CouchDB.
fn seq_number(seq: &Value) -> Option<u64> {
    match seq {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.split('-').next()?.parse().ok(),
        _ => None,
    }
}

impl Follower {
    /// A follower reading `couch`'s database into `store`.
    pub fn new(couch: CouchClient, store: Arc<LinkStore>, metrics: Arc<Metrics>, status: Arc<FeedStatus>) -> Self {
        Follower { couch, store, metrics, status, since: None, feed: None, catch_up: None }
    }

    /// Follows on from `seq`, a snapshot's, whose entries the store holds: the feed catches up
    /// with every change made since, storing new links too (see [`LinkStore::set_catching_up`]).
    pub fn resume_from(mut self, seq: Value) -> Self {
        self.status.detail.lock().expect("feed status lock").last_seq = Some(seq.clone());
        self.since = Some(seq);
        self.catch_up = Some(CatchUp { started: Instant::now(), applied: 0, target: None });
        self.status.catching_up.store(true, Relaxed);
        self.store.set_catching_up(true);
        self
    }

    /// Ends a catch-up, saying so.
    fn caught_up(&mut self) {
        if let Some(catch_up) = self.catch_up.take() {
            self.store.set_catching_up(false);
            self.status.catching_up.store(false, Relaxed);
            self.status.behind.store(0, Relaxed);
            tracing::info!(
                "caught up with CouchDB: {} changes made since the snapshot applied in {:.2} s",
                catch_up.applied,
                catch_up.started.elapsed().as_secs_f64()
            );
        }
    }

    /// One unit of work: open the feed if none is open, else apply its next change. After an
    /// error the feed is closed and the next step reopens it from the last change applied.
    pub async fn step(&mut self) -> Result<Step, FeedError> {
        let result = self.try_step().await;
        if !matches!(result, Ok(Step::Connected | Step::Applied { .. } | Step::Idle)) {
            self.feed = None;
            self.status.live.store(false, Relaxed);
        }
        match &result {
            Err(FeedError::Couch(CouchError::Refused { status: 404, .. })) => {
                // The database is gone: nothing cached can be trusted, and a re-created database
                // starts a new sequence.
                self.lose_place();
            }
            Err(error @ FeedError::SequenceRefused { .. }) => {
                // What is cached cannot be brought up to date: it is dropped and the cache
                // filled afresh.
                tracing::warn!("{error}: the link cache starts afresh from CouchDB");
                self.lose_place();
            }
            _ => {}
        }
        result
    }

    fn lose_place(&mut self) {
        self.caught_up();
        self.store.feed_lost();
        self.since = None;
    }

    async fn try_step(&mut self) -> Result<Step, FeedError> {
        let Some(feed) = &mut self.feed else {
            self.feed = Some(self.open().await?);
            self.status.live.store(true, Relaxed);
            return Ok(Step::Connected);
        };
        let mut event = feed.next(STALL_TIMEOUT).await?;
        // Heartbeats matter only to a catch-up (they end it); otherwise the next event counts.
        while self.catch_up.is_none() && event == Some(FeedEvent::Idle) {
            event = feed.next(STALL_TIMEOUT).await?;
        }
        match event {
            Some(FeedEvent::Change { seq, id, doc }) => {
                tracing::debug!(id, "change applied");
                let mut reached = false;
                if let Some(catch_up) = &mut self.catch_up {
                    catch_up.applied += 1;
                    if let (Some(now), Some(target)) = (seq_number(&seq), catch_up.target) {
                        self.status.behind.store(target.saturating_sub(now), Relaxed);
                        reached = now >= target;
                    }
                }
                self.store.apply_change(&id, doc);
                self.metrics.feed_change();
                self.status.changes_applied.fetch_add(1, Relaxed);
                {
                    let mut detail = self.status.detail.lock().expect("feed status lock");
                    detail.last_seq = Some(seq.clone());
                    detail.last_change_at = Some(OffsetDateTime::now_utc());
                }
                self.since = Some(seq);
                if reached {
                    self.caught_up();
                }
                Ok(Step::Applied { id })
            }
            Some(FeedEvent::Idle) => {
                self.caught_up();
                Ok(Step::Idle)
            }
            Some(FeedEvent::End { last_seq }) => {
                self.status.detail.lock().expect("feed status lock").last_seq = Some(last_seq.clone());
                self.since = Some(last_seq);
                Ok(Step::Ended)
            }
            None => Err(FeedError::Cut),
        }
    }

    /// Opens the feed where the last one stopped, or at the current end of the database.
    async fn open(&mut self) -> Result<ChangesFeed, FeedError> {
        let since = match &self.since {
            Some(since) => since.clone(),
            None => {
                // Start at the current end: the cache is empty, so nothing older matters, and
                // every change after this point will be delivered (at least once).
                let since = self.couch.current_seq().await?;
                self.since = Some(since.clone());
                // Recorded before the store is synced: a snapshot taken once it is synced must
                // name this sequence, not the one before the feed lost its place.
                self.status.detail.lock().expect("feed status lock").last_seq = Some(since.clone());
                self.store.feed_synced();
                since
            }
        };
        let refused = |why: String| FeedError::SequenceRefused { since: since.to_string(), why };
        if let Some(catch_up) = &mut self.catch_up {
            if catch_up.target.is_none() {
                let end = self.couch.current_seq().await?;
                // CouchDB 3's sequences are strings, pouchdb-server's numbers, and pouchdb-server
                // takes any `since` without a word (and then sends nothing): one of the other
                // kind was never this server's.
                if end.is_string() != since.is_string() {
                    return Err(refused(format!("this server's sequences look like {end}")));
                }
                let (end, now) = (seq_number(&end), seq_number(&since));
                catch_up.target = end;
                if let (Some(end), Some(now)) = (end, now) {
                    self.status.behind.store(end.saturating_sub(now), Relaxed);
                }
            }
        }
        tracing::debug!(%since, "opening the _changes feed");
        // CouchDB 3 answers with headers at once; pouchdb-server only with the first heartbeat.
        match tokio::time::timeout(STALL_TIMEOUT, self.couch.changes(&since, HEARTBEAT)).await {
            Err(_) => Err(CouchError::Stalled(STALL_TIMEOUT).into()),
            Ok(Err(error @ CouchError::Refused { status: 400, .. })) => Err(refused(Causes(&error).to_string())),
            Ok(opened) => Ok(opened?),
        }
    }

    /// Runs steps until `stop` turns true, reconnecting with backoff, and warning once when the
    /// feed goes down and once when it is back.
    pub async fn run(mut self, mut stop: watch::Receiver<bool>) {
        let mut backoff = MIN_BACKOFF;
        let mut down = false;
        while !*stop.borrow() {
            let result = tokio::select! {
                result = self.step() => result,
                _ = stop.changed() => break,
            };
            let error = match result {
                Ok(Step::Connected) => {
                    backoff = MIN_BACKOFF;
                    if std::mem::take(&mut down) {
                        tracing::info!("the CouchDB _changes feed is back; catching up from where it stopped");
                    }
                    continue;
                }
                Ok(_) => continue,
                // Said by `step`; the feed starts afresh at once.
                Err(FeedError::SequenceRefused { .. }) => continue,
                Err(error) => error,
            };
            self.metrics.feed_reconnect();
            let message = Causes(&error).to_string();
            let said = matches!(&error, FeedError::Couch(e) if self.store.say_if_refused(e));
            if !std::mem::replace(&mut down, true) && !said {
                tracing::warn!("{message}; serving cached links, retrying");
            }
            self.status.detail.lock().expect("feed status lock").last_error = Some(message);
            let wait = if self.couch.account_refused() { REFUSED_RETRY } else { backoff };
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = self.couch.password_changed() => {}
                _ = stop.changed() => break,
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_sequence_number_is_what_either_server_counts() {
        assert_eq!(seq_number(&json!(42)), Some(42), "pouchdb-server");
        assert_eq!(seq_number(&json!("1007-g1AAAACveJzLYWBgYMpgTmEQS84vTc5I")), Some(1007), "CouchDB 3");
        assert_eq!(seq_number(&json!("now")), None);
        assert_eq!(seq_number(&json!(null)), None);
    }
}
