//! A link's revisions turned into history entries: the plain rules, with no CouchDB in them
//! (the recorder fetches, this decides). docs/reference.md, "History".
//!
//! An entry is one revision: the document before and after (every field but `_id` and
//! `_rev`), who wrote it where the writer stated it in `edit` at that revision, and when it was
//! recorded. Revisions CouchDB no longer holds (compacted before any recorder saw them) become
//! one gap entry per run of them, with the span they were written in; never guessed.

use serde_json::{json, Map, Value};

/// A revision of a link as CouchDB gives it, oldest first in a chain.
#[derive(Debug, Clone, PartialEq)]
pub struct Revision {
    /// `3-a1b2...`.
    pub rev: String,
    /// The document at that revision; `None` when CouchDB no longer holds it (compacted).
    pub body: Option<Value>,
}

/// What the history already holds just before a chain: the newest recorded revision's
/// document (`None` when that entry is a gap, or the link was deleted), and when it was
/// recorded (the start of any gap that follows).
#[derive(Debug, Clone, PartialEq)]
pub struct Prior {
    /// The document after the recorded revision.
    pub after: Option<Value>,
    /// When it was recorded (UTC, RFC 3339).
    pub recorded_at: String,
}

/// How a chain begins.
#[derive(Debug, Clone, PartialEq)]
pub enum Start {
    /// After a recorded revision.
    After(Prior),
    /// At the link's creation (its first revision is the chain's first).
    Creation,
    /// History begins here (the first recorder's first pass) with the revisions CouchDB still
    /// holds: those it no longer holds came before history and are no gap; the first one held
    /// is the link's creation, or a baseline.
    Began,
    /// Somewhere after history began (`began`), with nothing of the link recorded: what
    /// CouchDB no longer holds is a gap from then.
    Unrecorded {
        /// When history began (UTC, RFC 3339).
        began: String,
        /// Revisions before the chain's first that CouchDB does not even name any more.
        forgotten: u64,
    },
}

/// When and how an entry is recorded.
#[derive(Debug, Clone, PartialEq)]
pub struct Recording {
    /// Now (UTC, RFC 3339).
    pub now: String,
    /// Recorded while catching up (the recorder was not running when it was written), so
    /// `recorded_at` is not the time it was written.
    pub late: bool,
}

/// The ID of the entry of revision `rev` of `link`: `H83if/0000000003-a1b2`, so that a link's
/// entries list in order, and two recorders writing the same entry meet a conflict: each
/// revision is recorded exactly once.
pub fn entry_id(link: &str, rev: &str) -> String {
    let (number, hash) = rev.split_once('-').unwrap_or((rev, ""));
    let number: u64 = number.parse().unwrap_or(0);
    format!("{link}/{number:010}-{hash}")
}

/// A revision's number: 3 for `3-a1b2`.
pub fn rev_number(rev: &str) -> u64 {
    rev.split_once('-').and_then(|(n, _)| n.parse().ok()).unwrap_or(0)
}

/// The entries that record `chain` (oldest first, at least one revision, the last one held)
/// of `link`, beginning as `start` says.
pub fn entries(link: &str, chain: &[Revision], start: &Start, recording: &Recording) -> Vec<Value> {
    let Some(last) = chain.last() else { return Vec::new() };
    if last.body.is_none() {
        return Vec::new();
    }
    let mut out = Vec::new();
    // The document before the next revision, where known; and since when revisions are missing.
    let (mut previous, mut known, gap_from) = match start {
        // A prior without a document (a gap, a deletion): what came before is not known.
        Start::After(prior) => (prior.after.clone(), prior.after.is_some(), prior.recorded_at.clone()),
        Start::Creation => (None, true, recording.now.clone()),
        Start::Unrecorded { began, .. } => (None, false, began.clone()),
        Start::Began => (None, false, recording.now.clone()),
    };
    // Before history began: the revisions no longer held are nobody's gap.
    let chain = match start {
        Start::Began => {
            let first_held = chain.iter().position(|r| r.body.is_some()).unwrap_or(chain.len());
            &chain[first_held..]
        }
        _ => chain,
    };
    let mut first = matches!(start, Start::Began);
    let mut missing: Vec<&Revision> = Vec::new();
    if let Start::Unrecorded { forgotten, .. } = start {
        if *forgotten > 0 {
            // Revisions older than CouchDB's revision limit: not even their names are left.
            let first = format!("{}-forgotten", rev_number(&chain[0].rev).saturating_sub(*forgotten).max(1));
            out.push(gap(link, &first, &first, *forgotten, &gap_from, &recording.now));
        }
    }
    for revision in chain {
        let Some(body) = &revision.body else {
            missing.push(revision);
            continue;
        };
        if let (Some(first), Some(last)) = (missing.first(), missing.last()) {
            out.push(gap(link, &first.rev, &last.rev, missing.len() as u64, &gap_from, &recording.now));
            missing.clear();
            known = false;
            previous = None;
        }
        let deleted = body.get("_deleted").and_then(Value::as_bool).unwrap_or(false);
        let kind = if deleted {
            "deleted"
        } else if revision.rev.starts_with("1-") {
            "created"
        } else if first {
            "baseline"
        } else {
            "changed"
        };
        first = false;
        let before = if known { previous.as_ref() } else { None };
        let stated = stated(body, before, known || kind == "created");
        out.push(change(link, revision, before, kind, stated, recording));
        previous = fields(body);
        known = true;
    }
    out
}

/// The writer and batch stated at this revision: its `edit`, when it differs from the one
/// before (an `edit` carried over unchanged states nothing; the validation function lets a
/// client carry it over only unchanged). Unknowable when the revision before is not known.
fn stated<'a>(body: &'a Value, before: Option<&Value>, before_known: bool) -> Option<&'a Value> {
    let edit = body.get("edit").filter(|e| e.is_object())?;
    if !before_known {
        return None;
    }
    match before.and_then(|b| b.get("edit")) {
        Some(old) if old == edit => None,
        _ => Some(edit),
    }
}

/// A document's fields as history keeps them: all but `_id`, `_rev` and CouchDB's metadata;
/// `None` for a deletion.
fn fields(body: &Value) -> Option<Value> {
    if body.get("_deleted").and_then(Value::as_bool).unwrap_or(false) {
        return None;
    }
    let kept: Map<String, Value> =
        body.as_object()?.iter().filter(|(k, _)| !k.starts_with('_')).map(|(k, v)| (k.clone(), v.clone())).collect();
    Some(Value::Object(kept))
}

fn change(
    link: &str,
    revision: &Revision,
    before: Option<&Value>,
    kind: &str,
    stated: Option<&Value>,
    recording: &Recording,
) -> Value {
    let body = revision.body.as_ref().expect("a change entry is of a held revision");
    let text = |field: &str| stated.and_then(|e| e.get(field)).and_then(Value::as_str).map(str::to_owned);
    let number = rev_number(&revision.rev);
    let parent = body
        .get("_revisions")
        .and_then(|r| r["ids"].get(1))
        .and_then(Value::as_str)
        .map(|hash| format!("{}-{hash}", number - 1));
    json!({
        "_id": entry_id(link, &revision.rev),
        "type": "change",
        "link": link,
        "rev": revision.rev,
        "parent": parent,
        "kind": kind,
        "before": before,
        "after": fields(body),
        "by": text("by"),
        "at": text("at").filter(|_| stated.is_some()),
        "batch": text("batch"),
        "recorded_at": recording.now,
        "late": recording.late,
    })
}

fn gap(link: &str, first: &str, last: &str, missing: u64, from: &str, to: &str) -> Value {
    json!({
        "_id": entry_id(link, first),
        "type": "gap",
        "link": link,
        "first": first,
        "last": last,
        "missing": missing,
        "from": from,
        "to": to,
        "recorded_at": to,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rev(rev: &str, body: Option<Value>) -> Revision {
        Revision { rev: rev.into(), body }
    }

    fn now(late: bool) -> Recording {
        Recording { now: "2026-11-28T10:00:00Z".into(), late }
    }

    #[test]
    fn ids_sort_by_revision_number() {
        assert_eq!(entry_id("H83if", "3-a1b2"), "H83if/0000000003-a1b2");
        assert!(entry_id("H83if", "10-x") > entry_id("H83if", "9-x"));
        assert_eq!(rev_number("12-abc"), 12);
    }

    #[test]
    fn a_creation_then_an_edit_with_its_writer_stated() {
        let created = json!({"_id": "H83if", "_rev": "1-a", "url": "https://a.example/", "edit": {"by": "maria"}});
        let edited = json!({"_id": "H83if", "_rev": "2-b", "url": "https://b.example/",
            "edit": {"by": "ed", "at": "2026-11-28T09:59:59Z"}, "_revisions": {"start": 2, "ids": ["b", "a"]}});
        let out =
            entries("H83if", &[rev("1-a", Some(created)), rev("2-b", Some(edited))], &Start::Creation, &now(false));
        assert_eq!(out.len(), 2);
        assert_eq!(out[0]["kind"], "created");
        assert_eq!(out[0]["by"], "maria");
        assert_eq!(out[0]["before"], Value::Null);
        assert_eq!(out[1]["_id"], "H83if/0000000002-b");
        assert_eq!(out[1]["parent"], "1-a");
        assert_eq!(out[1]["before"]["url"], "https://a.example/");
        assert_eq!(
            out[1]["after"],
            json!({"url": "https://b.example/", "edit": {"by": "ed", "at": "2026-11-28T09:59:59Z"}})
        );
        assert_eq!((out[1]["by"].as_str(), out[1]["at"].as_str()), (Some("ed"), Some("2026-11-28T09:59:59Z")));
    }

    #[test]
    fn an_edit_carried_over_unchanged_states_nothing() {
        // Fauxton saves the document as it was, `edit` included: the writer is not stated.
        let prior = Prior {
            after: Some(json!({"url": "https://a.example/", "edit": {"by": "maria"}})),
            recorded_at: "2026-11-28T09:00:00Z".into(),
        };
        let body = json!({"_id": "H83if", "_rev": "3-c", "url": "https://c.example/", "edit": {"by": "maria"}});
        let out = entries("H83if", &[rev("3-c", Some(body))], &Start::After(prior), &now(false));
        assert_eq!(out[0]["by"], Value::Null);
        assert_eq!(out[0]["kind"], "changed");
    }

    #[test]
    fn compacted_revisions_are_one_gap_with_its_span_and_the_next_is_not_diffed() {
        let prior =
            Prior { after: Some(json!({"url": "https://a.example/"})), recorded_at: "2026-11-28T08:00:00Z".into() };
        let last = json!({"_id": "H83if", "_rev": "4-d", "url": "https://d.example/", "edit": {"by": "ed"}});
        let chain = [rev("2-b", None), rev("3-c", None), rev("4-d", Some(last))];
        let out = entries("H83if", &chain, &Start::After(prior), &now(true));
        assert_eq!(out.len(), 2);
        assert_eq!(out[0]["type"], "gap");
        assert_eq!(out[0]["_id"], "H83if/0000000002-b");
        assert_eq!(
            (out[0]["first"].as_str(), out[0]["last"].as_str(), out[0]["missing"].as_u64()),
            (Some("2-b"), Some("3-c"), Some(2))
        );
        assert_eq!(
            (out[0]["from"].as_str(), out[0]["to"].as_str()),
            (Some("2026-11-28T08:00:00Z"), Some("2026-11-28T10:00:00Z"))
        );
        assert_eq!(out[1]["before"], Value::Null, "what came before is not known");
        assert_eq!(out[1]["by"], Value::Null, "whether `edit` was stated here or in the gap is not known");
        assert_eq!(out[1]["late"], true);
    }

    #[test]
    fn revisions_still_held_after_a_stop_are_each_recorded() {
        let prior =
            Prior { after: Some(json!({"url": "https://a.example/"})), recorded_at: "2026-11-28T08:00:00Z".into() };
        let b = json!({"_id": "H83if", "_rev": "2-b", "url": "https://b.example/"});
        let c = json!({"_id": "H83if", "_rev": "3-c", "url": "https://c.example/"});
        let out = entries("H83if", &[rev("2-b", Some(b)), rev("3-c", Some(c))], &Start::After(prior), &now(true));
        assert_eq!(out.iter().map(|e| e["type"].as_str().unwrap()).collect::<Vec<_>>(), ["change", "change"]);
        assert_eq!(out[1]["before"]["url"], "https://b.example/");
    }

    #[test]
    fn a_baseline_is_the_link_as_it_is_and_no_gap() {
        let body = json!({"_id": "H83if", "_rev": "7-g", "url": "https://g.example/"});
        let chain = [rev("6-f", None), rev("7-g", Some(body))];
        let out = entries("H83if", &chain, &Start::Began, &now(false));
        assert_eq!(out.len(), 1);
        assert_eq!((out[0]["kind"].as_str(), out[0]["before"].is_null()), (Some("baseline"), true));
    }

    #[test]
    fn a_link_made_while_nobody_recorded_and_compacted_has_a_gap_from_the_start_of_history() {
        let body = json!({"_id": "H83if", "_rev": "2-b", "url": "https://b.example/"});
        let start = Start::Unrecorded { began: "2026-11-01T00:00:00Z".into(), forgotten: 0 };
        let out = entries("H83if", &[rev("1-a", None), rev("2-b", Some(body))], &start, &now(true));
        assert_eq!(out[0]["type"], "gap");
        assert_eq!(out[0]["from"], "2026-11-01T00:00:00Z");
        assert_eq!(out[1]["kind"], "changed");
    }

    #[test]
    fn when_history_begins_what_couchdb_still_holds_is_recorded_and_the_rest_is_no_gap() {
        let b = json!({"_id": "H83if", "_rev": "2-b", "url": "https://b.example/"});
        let c = json!({"_id": "H83if", "_rev": "3-c", "url": "https://c.example/", "edit": {"by": "ed"}});
        let chain = [rev("1-a", None), rev("2-b", Some(b)), rev("3-c", Some(c))];
        let out = entries("H83if", &chain, &Start::Began, &now(true));
        let kinds: Vec<&str> = out.iter().map(|e| e["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["baseline", "changed"], "{out:#?}");
        assert_eq!(out[1]["before"]["url"], "https://b.example/");
        assert_eq!(out[1]["by"], "ed");
        let a = json!({"_id": "H83if", "_rev": "1-a", "url": "https://a.example/"});
        let b = json!({"_id": "H83if", "_rev": "2-b", "url": "https://b.example/"});
        let whole = entries("H83if", &[rev("1-a", Some(a)), rev("2-b", Some(b))], &Start::Began, &now(false));
        let kinds: Vec<&str> = whole.iter().map(|e| e["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["created", "changed"], "held from its creation: no baseline");
    }

    #[test]
    fn a_deletion_has_no_after() {
        let prior =
            Prior { after: Some(json!({"url": "https://a.example/"})), recorded_at: "2026-11-28T08:00:00Z".into() };
        let body = json!({"_id": "H83if", "_rev": "2-b", "_deleted": true});
        let out = entries("H83if", &[rev("2-b", Some(body))], &Start::After(prior), &now(false));
        assert_eq!((out[0]["kind"].as_str(), out[0]["after"].is_null()), (Some("deleted"), true));
    }
}
