//! The recorder: follows the links database's `_changes` and writes each new revision's entry
//! to the history database, within a second of the write while it runs.
//!
//! Every proxy runs one, and one of them records: the one holding the checkpoint (`~recorder`
//! in the history database: where recording stands in the links' changes, and which recorder
//! records). The others stand by and watch it; the first to see it unchanged for the lease
//! ([`Timing::lease`]; the holder rewrites it more often than that) takes over from where it
//! stands, and a holder that stops hands it over at once. Two that both record a while (a
//! take-over while the other still ran) meet conflicts, never duplicates: an entry's ID is its
//! link and revision ([`super::entry::entry_id`]), so each revision is recorded exactly once.
//!
//! The checkpoint is an ordinary document, so the history's validation function decides who
//! writes it: the recorder role (and an admin), never a reader or an editor, who could
//! otherwise move it past writes to leave them unrecorded. A checkpoint CouchDB cannot resume
//! from (written by hand, a restored backup) is said in `/healthz` and `/metrics`, and
//! recording starts over from the beginning of the links' changes: what was recorded meets
//! conflicts, the rest is recorded late, and revisions CouchDB no longer holds become gaps.
//!
//! What was written while none ran is recorded from the checkpoint: each link's unrecorded
//! revisions are walked back through its ancestry to the newest one recorded, and those
//! CouchDB no longer holds become a gap ([`super::entry`]). The first recorder of a new history
//! records every link as it is (a baseline), since what came before history began is not a gap.
//!
//! No document stops it: every entry is made to be one the history takes
//! ([`super::entry::entries`]), a page is split where CouchDB finds it too large, and an entry
//! CouchDB still refuses is recorded as a gap with CouchDB's reason while the rest go on.
//!
//! The follower that keeps the cache current reads nothing of this: recording costs the
//! redirect path nothing but a share of a core when links change.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;
use tokio::sync::watch;

use super::entry::{
    ancestry, entries, entry_id, json_len, refused_gap, rev_number, shrunk, Prior, Recording, Revision, Start,
};
use crate::couch::{BulkOutcome, CouchClient, CouchError, Created, IdState};
use crate::domain::{is_stated_time, LinkId};
use crate::errors::Causes;

pub use super::status::RecorderStatus;

/// The checkpoint's document in the history database (`~` sorts after every link's entries).
pub const CHECKPOINT: &str = "~recorder";
/// Where couchlink before 0.1 kept its place: a local document, which any member could write.
/// Read only for when history began.
const LEGACY_CHECKPOINT: &str = "recorder";
/// Changes read per request, and entries written per request at most.
const PAGE: usize = 500;
/// Entries written per request, in bytes of JSON at most (CouchDB's `max_http_request_size`
/// is 4 GiB by default; a page this size is one CouchDB takes in well under a second).
const PAGE_BYTES: usize = 4 * 1024 * 1024;
/// Waits after a failure, doubling up to the last.
const BACKOFF: [Duration; 4] =
    [Duration::from_millis(500), Duration::from_secs(2), Duration::from_secs(10), Duration::from_secs(60)];

/// How the recorders share the work, and when one counts as behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// A checkpoint unchanged this long, as a standby sees it, is taken over.
    pub lease: Duration,
    /// The holder rewrites the checkpoint at least this often (well within the lease).
    pub renew: Duration,
    /// How long a long poll waits for a change.
    pub wait: Duration,
    /// The checkpoint is written at most this often while changes stream in: a restart or a
    /// take-over redoes at most this much, each entry then meeting a conflict.
    pub checkpoint_every: Duration,
    /// How often a standby looks at the checkpoint.
    pub standby_poll: Duration,
    /// Changes waiting this long to be recorded (or failing rounds) make the recorder behind.
    pub behind: Duration,
    /// While catching up (history beginning, or writes made while no recorder ran), after each
    /// page the recorder waits this many times as long as the page took: catching up takes
    /// longer, and leaves CouchDB (which often shares the proxies' cores) to the redirects.
    pub catch_up_pause: u32,
    /// The pause's factor instead, after a page during which the proxy served requests (see
    /// [`Recorder::yielding_to`]): CouchDB's work for a page (its validation in JavaScript,
    /// its writes and their fsync) holds a core for tens of milliseconds at a time, and those
    /// are the redirects' p99 where they share the cores (#77, 2 cores: 4 left the p99 at 9x,
    /// 24 at 3x, 48 within 1.4x; the pause is capped at `renew`, so a page of 500 then takes
    /// about 10 s while the proxy is busy, against about 1.7 s while it is not).
    pub busy_pause: u32,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            lease: Duration::from_secs(30),
            renew: Duration::from_secs(10),
            wait: Duration::from_secs(30),
            checkpoint_every: Duration::from_secs(5),
            standby_poll: Duration::from_secs(5),
            behind: Duration::from_secs(60),
            catch_up_pause: 4,
            busy_pause: 48,
        }
    }
}

impl Timing {
    /// The pause after a page of catching up that took `took`, `busy` when the proxy served
    /// requests meanwhile: at most a renewal's worth, so the checkpoint, written before, stays
    /// this recorder's.
    pub fn catch_up_pause_after(&self, took: Duration, busy: bool) -> Duration {
        (took * if busy { self.busy_pause } else { self.catch_up_pause }).min(self.renew)
    }
}

/// Why a round of recording stopped.
#[derive(Debug, thiserror::Error)]
pub enum RecorderError {
    /// CouchDB refused or could not be reached.
    #[error("cannot record the history")]
    Couch(#[from] CouchError),
    /// The history database refused an entry and the gap that stands for it (the account
    /// without the recorder role, say).
    #[error("the history database refused entry {id}: {reason}")]
    Refused {
        /// The entry.
        id: String,
        /// CouchDB's words.
        reason: String,
    },
}

impl Default for RecorderStatus {
    fn default() -> Self {
        RecorderStatus::new(Timing::default().behind)
    }
}

/// Records the history of one links database.
pub struct Recorder {
    /// The links database, as the proxy reads it.
    pub links: CouchClient,
    /// Its history database.
    pub history: CouchClient,
    /// What it did.
    pub status: Arc<RecorderStatus>,
    /// How it shares the work.
    pub timing: Timing,
    /// Who it is, in the checkpoint: the proxy's name and where it answers, the same across
    /// its restarts (a proxy that stopped without handing over takes its own back at once).
    pub holder: String,
    /// The checkpoint as this recorder last wrote it: `(revision, sequence, began)`.
    held: Mutex<Option<(String, Value, String)>>,
    /// How many requests the proxy has served so far (never, when not told): catching up
    /// pauses longer while it serves.
    served: Arc<dyn Fn() -> u64 + Send + Sync>,
}

/// How a page of changes is recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pass {
    /// History begins: a link with nothing recorded gets a baseline.
    First,
    /// Catching up with what was written while no recorder ran.
    CatchUp,
    /// Following the changes as they come.
    Live,
}

/// The checkpoint, taken: where recording resumes.
struct Held {
    rev: String,
    since: Option<Value>,
    began: String,
    pass: Pass,
}

impl Recorder {
    /// A recorder of `links` into `history`, named `holder` in the checkpoint (the proxy's name
    /// and its admin address: two proxies of one name on one host are told apart).
    pub fn new(links: CouchClient, history: CouchClient, holder: String, timing: Timing) -> Self {
        Recorder {
            links,
            history,
            status: Arc::new(RecorderStatus::new(timing.behind)),
            timing,
            holder,
            held: Mutex::new(None),
            served: Arc::new(|| 0),
        }
    }

    /// This recorder, catching up with the longer pause after a page during which `served`
    /// (a count of the requests the proxy has answered) moved.
    pub fn yielding_to(self, served: Arc<dyn Fn() -> u64 + Send + Sync>) -> Self {
        Recorder { served, ..self }
    }

    /// Records until `stopped`, once `ready` resolves (the cache's warm-up done: recording
    /// never competes with a start for CouchDB); a failure is said once, then retried with a
    /// growing pause. Stopped while it records, it hands the checkpoint over.
    pub async fn run(self, ready: impl std::future::Future<Output = ()>, mut stopped: watch::Receiver<bool>) {
        tokio::select! {
            _ = ready => {}
            _ = stopped.changed() => return,
        }
        let mut failures = 0usize;
        loop {
            // A fault of the recorder's own (a panic) is a failed round like any other: said,
            // counted as waiting, and tried again, never a recorder gone quiet.
            let follow = futures_util::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(self.follow()));
            let said = tokio::select! {
                result = follow => match result {
                    Ok(Ok(())) => return,
                    Ok(Err(e)) => Causes(&e).to_string(),
                    Err(panic) => format!(
                        "the recorder failed ({}); recording again from the checkpoint",
                        panic.downcast_ref::<&str>().copied().or(panic.downcast_ref::<String>().map(String::as_str)).unwrap_or("a panic")
                    ),
                },
                _ = stopped.changed() => break,
            };
            self.status.live.store(false, Relaxed);
            self.status.holding.store(false, Relaxed);
            {
                let mut failing = self.status.failing.lock().expect("recorder status lock");
                if failing.as_ref().map(|(s, _)| s.as_str()) != Some(said.as_str()) {
                    tracing::warn!("history not recorded for now in {}: {said}", self.history.database());
                }
                let since = failing.as_ref().map_or_else(Instant::now, |(_, since)| *since);
                *failing = Some((said, since));
            }
            let pause = BACKOFF[failures.min(BACKOFF.len() - 1)];
            failures += 1;
            tokio::select! {
                _ = tokio::time::sleep(pause) => {}
                _ = stopped.changed() => break,
            }
        }
        if tokio::time::timeout(Duration::from_secs(5), self.release()).await.is_err() {
            tracing::warn!(
                "history of {}: checkpoint not handed over within 5 s (the next proxy takes it after the lease)",
                self.links.database()
            );
        }
    }

    /// Takes the checkpoint (standing by while another recorder holds it), then records while
    /// it holds it; returns only on an error.
    async fn follow(&self) -> Result<(), RecorderError> {
        loop {
            let held = self.take().await?;
            self.status.standing_by.store(false, Relaxed);
            self.status.holding.store(true, Relaxed);
            self.status.caught_up();
            let lost = self.record_while_held(held).await;
            self.status.holding.store(false, Relaxed);
            self.status.live.store(false, Relaxed);
            lost?;
            tracing::info!("history of {}: another proxy records it now", self.links.database());
        }
    }

    /// The checkpoint, once this recorder holds it: made when there is none (history begins),
    /// taken at once when released or this recorder's own, else after it stayed unchanged for
    /// the lease.
    async fn take(&self) -> Result<Held, RecorderError> {
        let mut watched: Option<(String, Instant)> = None;
        loop {
            let Some(current) = self.history.doc(CHECKPOINT).await? else {
                let legacy = self.history.local_doc(LEGACY_CHECKPOINT).await?;
                let began = legacy
                    .as_ref()
                    .and_then(|d| d["began"].as_str())
                    .filter(|t| is_stated_time(t))
                    .map_or_else(|| now_text(OffsetDateTime::now_utc()), str::to_owned);
                let doc = self.checkpoint(None, &Value::Null, &began, Some(&self.holder));
                if let Created::Stored(rev) = self.history.create_doc_raw(CHECKPOINT, &doc).await? {
                    let pass = if legacy.is_some() || self.has_entries().await? { Pass::CatchUp } else { Pass::First };
                    *self.held.lock().expect("recorder lock") = Some((rev.clone(), Value::Null, began.clone()));
                    return Ok(Held { rev, since: None, began, pass });
                }
                continue; // Another recorder made it first.
            };
            let rev = current["_rev"].as_str().unwrap_or_default().to_owned();
            let holder = current["holder"].as_str();
            let stale = match &watched {
                Some((seen, since)) if *seen == rev => since.elapsed() >= self.timing.lease,
                _ => {
                    watched = Some((rev.clone(), Instant::now()));
                    false
                }
            };
            if stale || holder.is_none() || holder == Some(self.holder.as_str()) {
                let since = current.get("seq").filter(|s| !s.is_null()).cloned();
                let began = current["began"]
                    .as_str()
                    .filter(|t| is_stated_time(t))
                    .map_or_else(|| now_text(OffsetDateTime::now_utc()), str::to_owned);
                let doc =
                    self.checkpoint(Some(&rev), since.as_ref().unwrap_or(&Value::Null), &began, Some(&self.holder));
                if let Created::Stored(rev) = self.history.create_doc_raw(CHECKPOINT, &doc).await? {
                    if holder.is_some_and(|h| h != self.holder) {
                        tracing::info!(
                            "history of {}: taking over from {} (its checkpoint unchanged for {:?})",
                            self.links.database(),
                            holder.unwrap_or_default(),
                            self.timing.lease
                        );
                    }
                    let pass = if since.is_some() || self.has_entries().await? { Pass::CatchUp } else { Pass::First };
                    *self.held.lock().expect("recorder lock") =
                        Some((rev.clone(), since.clone().unwrap_or(Value::Null), began.clone()));
                    return Ok(Held { rev, since, began, pass });
                }
                watched = None; // Another recorder took it first.
                continue;
            }
            self.status.caught_up();
            self.status.standing_by.store(true, Relaxed);
            // Another recorder records: what failed this one's own round is no longer so.
            *self.status.failing.lock().expect("recorder status lock") = None;
            tokio::time::sleep(self.timing.standby_poll).await;
        }
    }

    /// Catches up from the checkpoint, then follows the changes, while it holds the checkpoint:
    /// `Ok` once another recorder took it over.
    async fn record_while_held(&self, held: Held) -> Result<(), RecorderError> {
        let Held { mut rev, mut since, began, mut pass } = held;
        let mut saved = Instant::now();
        self.status.first_pass.store(pass == Pass::First, Relaxed);
        loop {
            let began_page = Instant::now();
            let served_before = (self.served)();
            let wait = (pass == Pass::Live).then_some(self.timing.wait);
            // The checkpoint is renewed while the long poll waits, whatever the server makes of
            // its `timeout` (pouchdb-server ignores it and answers at the next change only).
            let polled = {
                let poll = self.links.change_revs(since.as_ref(), PAGE, wait);
                tokio::pin!(poll);
                loop {
                    tokio::select! {
                        polled = &mut poll => break polled,
                        _ = tokio::time::sleep_until((saved + self.timing.renew).into()) => {
                            let seq = since.clone().unwrap_or(Value::Null);
                            if !self.save(&mut rev, &seq, &began).await? {
                                return Ok(());
                            }
                            saved = Instant::now();
                        }
                    }
                }
            };
            let page = match polled {
                // The checkpoint names no place in these changes (CouchDB 3 answers 400
                // "Malformed sequence"): recorded again from the beginning.
                Err(CouchError::Refused { status: 400, error, reason }) if since.is_some() => {
                    let said = format!(
                        "the checkpoint's place {} is not one CouchDB resumes from ({error}: {reason}); recorded again \
                         from the beginning at {}",
                        since.as_ref().map(Value::to_string).unwrap_or_default().chars().take(80).collect::<String>(),
                        now_text(OffsetDateTime::now_utc()),
                    );
                    tracing::warn!("history of {}: {said}", self.links.database());
                    self.status.resets.fetch_add(1, Relaxed);
                    *self.status.reset.lock().expect("recorder status lock") = Some(said);
                    since = None;
                    pass = Pass::CatchUp;
                    self.status.live.store(false, Relaxed);
                    continue;
                }
                result => result?,
            };
            // A page holds up to PAGE documents, each with its leaves.
            let done = page.results.iter().filter(|(_, _, winning)| *winning).count() < PAGE;
            self.record(&page.results, pass, &began).await?;
            let moved = since.as_ref() != Some(&page.last_seq);
            since = Some(page.last_seq);
            let due = pass != Pass::Live || (moved && saved.elapsed() >= self.timing.checkpoint_every);
            if due {
                if !self.save(&mut rev, since.as_ref().expect("set above"), &began).await? {
                    return Ok(());
                }
                saved = Instant::now();
            }
            if done {
                self.status.caught_up();
                if pass != Pass::Live {
                    pass = Pass::Live;
                    self.status.live.store(true, Relaxed);
                    self.status.first_pass.store(false, Relaxed);
                    *self.status.failing.lock().expect("recorder status lock") = None;
                }
            } else if pass != Pass::Live {
                let busy = (self.served)() != served_before;
                tokio::time::sleep(self.timing.catch_up_pause_after(began_page.elapsed(), busy)).await;
            }
        }
    }

    /// Writes the checkpoint at `seq` over revision `rev` (then the new one): `false` when
    /// another recorder took it over meanwhile (this one was taken for gone).
    async fn save(&self, rev: &mut String, seq: &Value, began: &str) -> Result<bool, RecorderError> {
        let doc = self.checkpoint(Some(rev), seq, began, Some(&self.holder));
        match self.history.create_doc_raw(CHECKPOINT, &doc).await? {
            Created::Stored(new) => {
                *rev = new;
                *self.held.lock().expect("recorder lock") = Some((rev.clone(), seq.clone(), began.to_owned()));
                Ok(true)
            }
            Created::Conflict => {
                *self.held.lock().expect("recorder lock") = None;
                Ok(false)
            }
        }
    }

    /// Hands the checkpoint over at a stop: the next recorder takes it at once. Its last write
    /// may have reached CouchDB unanswered (the stop cut it short): then the checkpoint is read
    /// again, and handed over while it is still this recorder's.
    async fn release(&self) {
        let Some((mut rev, seq, began)) = self.held.lock().expect("recorder lock").take() else { return };
        for _ in 0..3 {
            let doc = self.checkpoint(Some(&rev), &seq, &began, None);
            match self.history.create_doc_raw(CHECKPOINT, &doc).await {
                Ok(Created::Stored(_)) => return,
                Ok(Created::Conflict) => match self.history.doc(CHECKPOINT).await {
                    Ok(Some(current)) if current["holder"] == self.holder.as_str() => {
                        rev = current["_rev"].as_str().unwrap_or_default().to_owned();
                    }
                    // Another recorder holds it: nothing to hand over.
                    Ok(_) => return,
                    Err(e) => return self.not_released(&e),
                },
                Err(e) => return self.not_released(&e),
            }
        }
    }

    fn not_released(&self, error: &CouchError) {
        tracing::warn!("history of {}: checkpoint not handed over: {}", self.links.database(), Causes(error));
    }

    /// The checkpoint document: where recording stands, since when history is kept, and who
    /// records (`None`: nobody, handed over).
    fn checkpoint(&self, rev: Option<&str>, seq: &Value, began: &str, holder: Option<&str>) -> Value {
        let mut doc = json!({"_id": CHECKPOINT, "type": "checkpoint", "seq": seq, "began": began, "holder": holder});
        if let Some(rev) = rev {
            doc["_rev"] = json!(rev);
        }
        doc
    }

    /// Whether any link has an entry: entries' IDs start with a link's (letters and digits),
    /// the design document's with `_`, the checkpoint's and bulk changes' with `~`.
    async fn has_entries(&self) -> Result<bool, CouchError> {
        Ok(self.history.any_id_between("0", "Z\u{fff0}").await?
            || self.history.any_id_between("a", "z\u{fff0}").await?)
    }

    /// Records one page of changes: `(ID, leaf revision, first listed)`. A leaf that does not
    /// win (a conflict: written beside another, by replication or by two nodes of a cluster at
    /// once) is recorded as well, as `conflict`; which one wins is asked of CouchDB, not taken
    /// from the order (pouchdb-server lists leaves in another).
    async fn record(&self, changes: &[(String, String, bool)], pass: Pass, began: &str) -> Result<(), RecorderError> {
        let mut leaves: HashMap<&str, usize> = HashMap::new();
        for (id, _, _) in changes {
            *leaves.entry(id.as_str()).or_default() += 1;
        }
        let contested: Vec<&str> = leaves.iter().filter(|(_, n)| **n > 1).map(|(id, _)| *id).collect();
        let winners: HashMap<&str, String> = if contested.is_empty() {
            HashMap::new()
        } else {
            contested
                .iter()
                .copied()
                .zip(self.links.id_states(&contested).await?)
                .filter_map(|(id, state)| match state {
                    IdState::Taken(doc) => Some((id, doc["_rev"].as_str()?.to_owned())),
                    _ => None,
                })
                .collect()
        };
        let losing: std::collections::HashSet<(String, String)> = changes
            .iter()
            .filter(|(id, rev, _)| winners.get(id.as_str()).is_some_and(|w| w != rev))
            .map(|(id, rev, _)| (id.clone(), rev.clone()))
            .collect();
        let changes: Vec<(String, String)> = changes
            .iter()
            .filter(|(id, _, _)| LinkId::parse(id).is_ok())
            .map(|(id, rev, _)| (id.clone(), rev.clone()))
            .collect();
        if changes.is_empty() {
            return Ok(());
        }
        let recording = Recording { now: now_text(OffsetDateTime::now_utc()), late: pass != Pass::Live };
        let bodies = self.links.revisions(&changes).await?;
        // Each change's entry and its parent's, asked at once: usually the parent is recorded
        // and nothing else is needed.
        let mut keys: Vec<String> = Vec::with_capacity(changes.len() * 2);
        for (id, rev) in &changes {
            keys.push(entry_id(id, rev));
        }
        let parents: Vec<Option<String>> =
            bodies.iter().map(|b| b.as_ref().and_then(|b| ancestry(b).into_iter().nth(1))).collect();
        for ((id, _), parent) in changes.iter().zip(&parents) {
            keys.extend(parent.as_ref().map(|p| entry_id(id, p)));
        }
        let key_refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        let states: HashMap<&str, IdState> =
            key_refs.iter().copied().zip(self.history.id_states(&key_refs).await?).collect();
        let mut out = Vec::new();
        for (((id, rev), body), parent) in changes.iter().zip(bodies).zip(parents) {
            // Superseded since the page was read, and compacted: the next change records it.
            let Some(body) = body else { continue };
            if matches!(states.get(entry_id(id, rev).as_str()), Some(IdState::Taken(_))) {
                continue;
            }
            let current = Revision { rev: rev.clone(), body: Some(body) };
            let parent_entry = parent.as_ref().and_then(|p| match states.get(entry_id(id, p).as_str()) {
                Some(IdState::Taken(doc)) => Some(doc.clone()),
                _ => None,
            });
            let (chain, start) = match (parent, parent_entry) {
                (None, _) => (vec![current], Start::Creation),
                (Some(_), Some(entry)) => (vec![current], Start::After(prior_of(&entry))),
                (Some(_), None) => self.walk_back(id, current, began, pass == Pass::First).await?,
            };
            let mut made = entries(id, &chain, &start, &recording);
            if losing.contains(&(id.clone(), rev.clone())) {
                if let Some(leaf) = made.last_mut().filter(|e| e["type"] == "change" && e["kind"] != "deleted") {
                    leaf["kind"] = json!("conflict");
                }
            }
            out.extend(made);
        }
        // Two leaves of one link share the revisions before they part: each entry once.
        let mut seen = std::collections::HashSet::new();
        out.retain(|e| seen.insert(e["_id"].as_str().unwrap_or_default().to_owned()));
        self.write(out, &recording.now).await
    }

    /// The revisions of `id` after the newest one recorded, oldest first, `current` last, and
    /// how they begin.
    async fn walk_back(
        &self,
        id: &str,
        current: Revision,
        began: &str,
        first: bool,
    ) -> Result<(Vec<Revision>, Start), RecorderError> {
        let ancestry = current.body.as_ref().map(ancestry).unwrap_or_default();
        let recorded = self.history.docs_with_prefix(&format!("{id}/")).await?;
        // Newest first: the first ancestor a recorded entry covers.
        let mut found = None;
        for (i, rev) in ancestry.iter().enumerate().skip(1) {
            let number = rev_number(rev);
            let covering = recorded.iter().rev().find(|e| match e["type"].as_str() {
                Some("change") => e["rev"].as_str() == Some(rev.as_str()),
                Some("gap") => {
                    let (first, last) = (e["first"].as_str().unwrap_or(""), e["last"].as_str().unwrap_or(""));
                    (rev_number(first)..=rev_number(last)).contains(&number)
                }
                _ => false,
            });
            if let Some(entry) = covering {
                found = Some((i, entry.clone()));
                break;
            }
        }
        let (unrecorded, start) = match found {
            Some((i, entry)) => (&ancestry[1..i], Start::After(prior_of(&entry))),
            // History begins: what CouchDB still holds of the link is recorded, the rest was
            // before it.
            None if first => (ancestry.get(1..).unwrap_or_default(), Start::Began),
            None => {
                let oldest = ancestry.last().map_or(1, |r| rev_number(r));
                (
                    ancestry.get(1..).unwrap_or_default(),
                    Start::Unrecorded { began: began.to_owned(), forgotten: oldest.saturating_sub(1) },
                )
            }
        };
        let wanted: Vec<(String, String)> = unrecorded.iter().rev().map(|r| (id.to_owned(), r.clone())).collect();
        let bodies = if wanted.is_empty() { Vec::new() } else { self.links.revisions(&wanted).await? };
        let mut chain: Vec<Revision> =
            wanted.into_iter().zip(bodies).map(|((_, rev), body)| Revision { rev, body }).collect();
        chain.push(current);
        Ok((chain, start))
    }

    /// Writes `out` in pages CouchDB takes. A page CouchDB finds too large is split, an entry
    /// too large alone is written with what it says of the document as sizes and digests, and
    /// an entry CouchDB refuses is recorded as a gap with its reason; only a gap it refuses too
    /// (the account's fault, not the document's) stops the round.
    async fn write(&self, out: Vec<Value>, now: &str) -> Result<(), RecorderError> {
        let mut queue: VecDeque<Vec<Value>> = pages(out).into();
        while let Some(page) = queue.pop_front() {
            let outcomes = match self.history.bulk_create(&page).await {
                Ok(outcomes) => outcomes,
                // One document over `max_document_size` refuses the whole request (413
                // `document_too_large`, naming it), as a request over `max_http_request_size`
                // does.
                Err(CouchError::Refused { status: 413, error, reason }) => {
                    if page.len() > 1 {
                        let mut first = page;
                        let second = first.split_off(first.len() / 2);
                        queue.push_front(second);
                        queue.push_front(first);
                    } else {
                        let entry = &page[0];
                        let small = shrunk(entry);
                        if entry["type"] == "change" && small != *entry {
                            queue.push_front(vec![small]);
                        } else if entry["reason"] == "refused" {
                            return Err(RecorderError::Refused {
                                id: entry["_id"].as_str().unwrap_or_default().to_owned(),
                                reason: format!("{error}: {reason}"),
                            });
                        } else {
                            queue.push_front(vec![refused_gap(entry, &format!("{error}: {reason}"), now)]);
                        }
                    }
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            let mut gaps = Vec::new();
            for (doc, outcome) in page.iter().zip(outcomes) {
                match outcome {
                    BulkOutcome::Stored(_) => self.stored(doc),
                    // Another recorder wrote it first.
                    BulkOutcome::Conflict => {}
                    BulkOutcome::Refused { error, reason } if doc["reason"] == "refused" => {
                        return Err(RecorderError::Refused {
                            id: doc["_id"].as_str().unwrap_or_default().to_owned(),
                            reason: format!("{error}: {reason}"),
                        })
                    }
                    BulkOutcome::Refused { error, reason } => {
                        gaps.push(refused_gap(doc, &format!("{error}: {reason}"), now));
                    }
                }
            }
            if !gaps.is_empty() {
                queue.push_front(gaps);
            }
        }
        Ok(())
    }

    /// Counts and says an entry written.
    fn stored(&self, doc: &Value) {
        self.status.entries.fetch_add(1, Relaxed);
        if doc["type"] != "gap" {
            return;
        }
        self.status.gaps.fetch_add(1, Relaxed);
        self.status.missing.fetch_add(doc["missing"].as_u64().unwrap_or(0), Relaxed);
        let link = doc["link"].as_str().unwrap_or("");
        if doc["reason"] == "refused" {
            self.status.refused.fetch_add(1, Relaxed);
            tracing::warn!(
                "history of {link}: CouchDB refused the entry of revision {}, recorded as a gap: {}",
                doc["first"].as_str().unwrap_or(""),
                doc["detail"].as_str().unwrap_or("")
            );
        } else {
            tracing::warn!(
                "history of {link}: {} revision(s) written while no recorder ran were compacted away before being \
                 recorded (between {} and {}); recorded as a gap",
                doc["missing"],
                doc["from"].as_str().unwrap_or(""),
                doc["to"].as_str().unwrap_or(""),
            );
        }
    }
}

/// `out` in pages of at most [`PAGE`] entries and about [`PAGE_BYTES`] of JSON (an entry
/// larger than that alone on its page).
fn pages(out: Vec<Value>) -> Vec<Vec<Value>> {
    let mut pages: Vec<Vec<Value>> = Vec::new();
    let mut bytes = 0;
    for entry in out {
        let size = json_len(&entry);
        match pages.last_mut() {
            Some(page) if page.len() < PAGE && bytes + size <= PAGE_BYTES => {
                bytes += size;
                page.push(entry);
            }
            _ => {
                bytes = size;
                pages.push(vec![entry]);
            }
        }
    }
    pages
}

/// What a recorded entry says came before the revisions after it.
fn prior_of(entry: &Value) -> Prior {
    Prior {
        after: if entry["type"] == "change" { entry.get("after").filter(|a| a.is_object()).cloned() } else { None },
        recorded_at: entry["recorded_at"].as_str().unwrap_or("").to_owned(),
        large: entry["large"]["after"].as_object().cloned().unwrap_or_default(),
    }
}

fn now_text(now: OffsetDateTime) -> String {
    now.format(&Rfc3339).expect("a UTC time formats")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catching_up_pauses_longer_while_the_proxy_serves_and_never_past_a_renewal() {
        let timing = Timing::default();
        let page = Duration::from_millis(100);
        assert_eq!(timing.catch_up_pause_after(page, false), page * timing.catch_up_pause);
        assert_eq!(timing.catch_up_pause_after(page, true), page * timing.busy_pause);
        assert!(timing.busy_pause > timing.catch_up_pause);
        assert_eq!(timing.catch_up_pause_after(Duration::from_secs(5), true), timing.renew);
    }

    #[test]
    fn the_ancestry_is_read_newest_first() {
        let body = json!({"_revisions": {"start": 3, "ids": ["c", "b", "a"]}});
        assert_eq!(ancestry(&body), ["3-c", "2-b", "1-a"]);
        assert_eq!(ancestry(&body).into_iter().nth(1).as_deref(), Some("2-b"));
        assert_eq!(ancestry(&json!({"_revisions": {"start": 0, "ids": ["x", "y"]}})), ["0-x"]);
    }

    #[test]
    fn entries_are_written_in_pages_of_a_bounded_count_and_size() {
        let small: Vec<Value> = (0..1200).map(|i| json!({"n": i})).collect();
        let sizes: Vec<usize> = pages(small).iter().map(Vec::len).collect();
        assert_eq!(sizes, [500, 500, 200]);
        let large: Vec<Value> = (0..10).map(|_| json!({"x": "y".repeat(PAGE_BYTES / 3)})).collect();
        let sizes: Vec<usize> = pages(large).iter().map(Vec::len).collect();
        assert_eq!(sizes, [2, 2, 2, 2, 2]);
        let huge = vec![json!({"x": "y".repeat(PAGE_BYTES * 2)}), json!({"n": 1})];
        assert_eq!(pages(huge).iter().map(Vec::len).collect::<Vec<_>>(), [1, 1]);
    }
}
