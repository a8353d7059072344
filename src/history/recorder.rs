//! The recorder: follows the links database's `_changes` and writes each new revision's entry
//! to the history database, within a second of the write while it runs; every proxy runs one.
//!
//! Exactly once however many run: an entry's ID is its link and revision, so a second
//! recorder writing it meets a conflict and moves on. What was written while none ran is
//! recorded when one starts, from the checkpoint (`_local/recorder` in the history database,
//! the last sequence any recorder finished): each link's unrecorded revisions are walked back
//! through its ancestry to the newest one recorded, and those CouchDB no longer holds become
//! a gap ([`super::entry`]). The first recorder of a new history records every link as it is
//! (a baseline), since what came before history began is not a gap.
//!
//! The follower that keeps the cache current reads nothing of this: recording costs the
//! redirect path nothing but a share of a core when links change.

use std::collections::HashMap;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;
use tokio::sync::watch;

use super::entry::{entries, entry_id, rev_number, Prior, Recording, Revision, Start};
use crate::couch::{BulkOutcome, CouchClient, CouchError, IdState};
use crate::domain::LinkId;
use crate::errors::Causes;

/// The checkpoint's local document in the history database.
const CHECKPOINT: &str = "recorder";
/// Changes read per request.
const PAGE: usize = 500;
/// How long a long poll waits for a change.
const WAIT: Duration = Duration::from_secs(30);
/// The checkpoint is written at most this often while changes stream in (on every page while
/// catching up): a restart redoes at most this much, each entry then meeting a conflict.
const CHECKPOINT_EVERY: Duration = Duration::from_secs(5);
/// Waits after a failure, doubling up to the last.
const BACKOFF: [Duration; 4] =
    [Duration::from_millis(500), Duration::from_secs(2), Duration::from_secs(10), Duration::from_secs(60)];

/// Why a round of recording stopped.
#[derive(Debug, thiserror::Error)]
pub enum RecorderError {
    /// CouchDB refused or could not be reached.
    #[error("cannot record the history")]
    Couch(#[from] CouchError),
    /// The history database refused an entry (the account without the recorder role, say).
    #[error("the history database refused entry {id}: {reason}")]
    Refused {
        /// The entry.
        id: String,
        /// CouchDB's words.
        reason: String,
    },
}

/// What the recorder did, for `/metrics` and `/healthz`.
#[derive(Debug, Default)]
pub struct RecorderStatus {
    entries: AtomicU64,
    gaps: AtomicU64,
    missing: AtomicU64,
    live: AtomicBool,
    failing: Mutex<Option<String>>,
}

impl RecorderStatus {
    /// Entries this recorder wrote (others' are not counted).
    pub fn entries(&self) -> u64 {
        self.entries.load(Relaxed)
    }

    /// Gap entries this recorder wrote, and the revisions they stand for.
    pub fn gaps(&self) -> (u64, u64) {
        (self.gaps.load(Relaxed), self.missing.load(Relaxed))
    }

    /// Whether it has caught up and follows the changes as they come.
    pub fn is_live(&self) -> bool {
        self.live.load(Relaxed)
    }

    /// Why the last round failed, while rounds fail.
    pub fn failing(&self) -> Option<String> {
        self.failing.lock().expect("recorder status lock").clone()
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

impl Recorder {
    /// Records until `stopped`, once `ready` resolves (the cache's warm-up done: recording
    /// never competes with a start for CouchDB); a failure is said once, then retried with a
    /// growing pause.
    pub async fn run(self, ready: impl std::future::Future<Output = ()>, mut stopped: watch::Receiver<bool>) {
        tokio::select! {
            _ = ready => {}
            _ = stopped.changed() => return,
        }
        let mut failures = 0usize;
        loop {
            let error = tokio::select! {
                result = self.follow() => match result {
                    Ok(()) => return,
                    Err(e) => e,
                },
                _ = stopped.changed() => return,
            };
            self.status.live.store(false, Relaxed);
            let said = Causes(&error).to_string();
            {
                let mut failing = self.status.failing.lock().expect("recorder status lock");
                if failing.as_deref() != Some(said.as_str()) {
                    tracing::warn!("history not recorded for now in {}: {said}", self.history.database());
                }
                *failing = Some(said);
            }
            let pause = BACKOFF[failures.min(BACKOFF.len() - 1)];
            failures += 1;
            tokio::select! {
                _ = tokio::time::sleep(pause) => {}
                _ = stopped.changed() => return,
            }
        }
    }

    /// Catches up from the checkpoint, then follows the changes (returns only on an error).
    async fn follow(&self) -> Result<(), RecorderError> {
        let checkpoint = self.history.local_doc(CHECKPOINT).await?;
        let mut since = checkpoint.as_ref().and_then(|c| c.get("seq")).cloned();
        let began = checkpoint
            .as_ref()
            .and_then(|c| c["began"].as_str().map(str::to_owned))
            .unwrap_or_else(|| now_text(OffsetDateTime::now_utc()));
        let mut pass = if checkpoint.is_some() { Pass::CatchUp } else { Pass::First };
        let mut saved = Instant::now();
        loop {
            let wait = (pass == Pass::Live).then_some(WAIT);
            let page = self.links.change_revs(since.as_ref(), PAGE, wait).await?;
            let done = page.results.len() < PAGE;
            self.record(&page.results, pass, &began).await?;
            let moved = since.as_ref() != Some(&page.last_seq);
            since = Some(page.last_seq);
            if pass != Pass::Live || (moved && saved.elapsed() >= CHECKPOINT_EVERY) || (done && moved) {
                self.save_checkpoint(since.as_ref().expect("set above"), &began).await?;
                saved = Instant::now();
            }
            if done && pass != Pass::Live {
                pass = Pass::Live;
                self.status.live.store(true, Relaxed);
                *self.status.failing.lock().expect("recorder status lock") = None;
            }
        }
    }

    /// The checkpoint written over whichever recorder wrote it last: any sequence a recorder
    /// finished is a safe place to resume, so the last writer may win.
    async fn save_checkpoint(&self, seq: &Value, began: &str) -> Result<(), RecorderError> {
        for _ in 0..3 {
            let mut doc = json!({"seq": seq, "began": began});
            if let Some(rev) = self.history.local_doc(CHECKPOINT).await?.and_then(|d| d.get("_rev").cloned()) {
                doc["_rev"] = rev;
            }
            match self.history.put_local_doc(CHECKPOINT, &doc).await {
                Ok(_) => return Ok(()),
                Err(CouchError::Refused { status: 409, .. }) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Ok(()) // Others keep writing it: theirs will do.
    }

    /// Records one page of changes: `(ID, latest revision)`.
    async fn record(&self, changes: &[(String, String)], pass: Pass, began: &str) -> Result<(), RecorderError> {
        let changes: Vec<(String, String)> =
            changes.iter().filter(|(id, _)| LinkId::parse(id).is_ok()).cloned().collect();
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
        let parents: Vec<Option<String>> = bodies.iter().map(|b| b.as_ref().and_then(parent_rev)).collect();
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
            out.extend(entries(id, &chain, &start, &recording));
        }
        self.write(&out).await
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
            None if first => (&ancestry[1..], Start::Began),
            None => {
                let oldest = ancestry.last().map_or(1, |r| rev_number(r));
                (&ancestry[1..], Start::Unrecorded { began: began.to_owned(), forgotten: oldest.saturating_sub(1) })
            }
        };
        let wanted: Vec<(String, String)> = unrecorded.iter().rev().map(|r| (id.to_owned(), r.clone())).collect();
        let bodies = if wanted.is_empty() { Vec::new() } else { self.links.revisions(&wanted).await? };
        let mut chain: Vec<Revision> =
            wanted.into_iter().zip(bodies).map(|((_, rev), body)| Revision { rev, body }).collect();
        chain.push(current);
        Ok((chain, start))
    }

    async fn write(&self, out: &[Value]) -> Result<(), RecorderError> {
        for page in out.chunks(PAGE) {
            for (doc, outcome) in page.iter().zip(self.history.bulk_create(page).await?) {
                match outcome {
                    BulkOutcome::Stored => {
                        self.status.entries.fetch_add(1, Relaxed);
                        if doc["type"] == "gap" {
                            self.status.gaps.fetch_add(1, Relaxed);
                            self.status.missing.fetch_add(doc["missing"].as_u64().unwrap_or(0), Relaxed);
                            tracing::warn!(
                                "history of {}: {} revision(s) written while no recorder ran were compacted away \
                                 before being recorded (between {} and {}); recorded as a gap",
                                doc["link"].as_str().unwrap_or(""),
                                doc["missing"],
                                doc["from"].as_str().unwrap_or(""),
                                doc["to"].as_str().unwrap_or(""),
                            );
                        }
                    }
                    // Another recorder wrote it first.
                    BulkOutcome::Conflict => {}
                    BulkOutcome::Refused { reason, .. } => {
                        return Err(RecorderError::Refused { id: doc["_id"].as_str().unwrap_or("").to_owned(), reason })
                    }
                }
            }
        }
        Ok(())
    }
}

/// What a recorded entry says came before the revisions after it.
fn prior_of(entry: &Value) -> Prior {
    Prior {
        after: if entry["type"] == "change" { entry.get("after").filter(|a| a.is_object()).cloned() } else { None },
        recorded_at: entry["recorded_at"].as_str().unwrap_or("").to_owned(),
    }
}

/// A document's ancestry from its `_revisions`, newest (itself) first.
fn ancestry(body: &Value) -> Vec<String> {
    let start = body["_revisions"]["start"].as_u64().unwrap_or(0);
    let ids = body["_revisions"]["ids"].as_array().cloned().unwrap_or_default();
    ids.iter()
        .enumerate()
        .filter_map(|(i, h)| Some(format!("{}-{}", start.checked_sub(i as u64)?, h.as_str()?)))
        .collect()
}

/// The revision a document's revision replaced, from its `_revisions`.
fn parent_rev(body: &Value) -> Option<String> {
    ancestry(body).into_iter().nth(1)
}

fn now_text(now: OffsetDateTime) -> String {
    now.format(&Rfc3339).expect("a UTC time formats")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ancestry_is_read_newest_first() {
        let body = json!({"_revisions": {"start": 3, "ids": ["c", "b", "a"]}});
        assert_eq!(ancestry(&body), ["3-c", "2-b", "1-a"]);
        assert_eq!(parent_rev(&body).as_deref(), Some("2-b"));
        assert_eq!(parent_rev(&json!({"_revisions": {"start": 1, "ids": ["a"]}})), None);
    }
}
