//! A link's revisions turned into history entries: the plain rules, with no CouchDB in them
//! (the recorder fetches, this decides). docs/reference.md, "History".
//!
//! An entry is one revision: the document before and after (every field but `_id` and
//! `_rev`), who wrote it where the writer stated it in `edit` at that revision, and when it was
//! recorded. Revisions CouchDB no longer holds (compacted before any recorder saw them) become
//! one gap entry per run of them, with the span they were written in; never guessed.
//!
//! Whatever a document holds, its entry is one the history's validation function accepts and
//! CouchDB stores: any revision string CouchDB takes (a replicated `1-ABCDEF`, `1-a/b c`) has
//! an ID ([`entry_id`]), a stated field is kept only in a form both validation functions accept
//! ([`Stated`]), and a field too long to keep is kept as its size and digest ([`FIELD_LIMIT`],
//! [`ENTRY_LIMIT`]): the revision itself stays in the links database until compaction.

use blake2::digest::consts::{U16, U32};
use blake2::{Blake2b, Digest};
use serde_json::{json, Map, Value};

use crate::domain::Stated;

/// A field of `before` or `after` longer than this as JSON is kept as its size and digest (a
/// link's fields are a few hundred bytes; a note pasted from a file is not history's to keep).
pub const FIELD_LIMIT: usize = 64 * 1024;
/// An entry's `before` and `after` together are kept under this as JSON, the longest fields
/// kept as their size and digest first: far under CouchDB's `max_document_size` (8,000,000 bytes
/// by default), which refuses a whole `_bulk_docs` for one document over it.
pub const ENTRY_LIMIT: usize = 1024 * 1024;

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
    /// The fields of `after` the entry kept as their size and digest (its `large.after`).
    pub large: Map<String, Value>,
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
/// revision is recorded exactly once. CouchDB takes any text after a revision's number from a
/// replicating client (`1-ABCDEF`, `1-a/b c`, `1-`): such a revision's ID ends in `~` and a
/// digest of it instead (`H83if/0000000001-~5d41...`), which the history's validation function
/// checks by its form.
pub fn entry_id(link: &str, rev: &str) -> String {
    match rev.split_once('-') {
        Some((number, hash)) if (1..=20).contains(&number.len()) && number.bytes().all(|b| b.is_ascii_digit()) => {
            let number = number.trim_start_matches('0');
            let number = if number.is_empty() { "0" } else { number };
            if is_plain_hash(hash) {
                format!("{link}/{number:0>10}-{hash}")
            } else {
                format!("{link}/{number:0>10}-~{}", hex(&Blake2b::<U16>::digest(rev.as_bytes())))
            }
        }
        _ => format!("{link}/0000000000-~{}", hex(&Blake2b::<U16>::digest(rev.as_bytes()))),
    }
}

/// A revision's hash as CouchDB makes them (32 hex digits) or one as plain: kept in an ID as it is.
fn is_plain_hash(hash: &str) -> bool {
    (1..=64).contains(&hash.len()) && hash.bytes().all(|b| b.is_ascii_digit() || b.is_ascii_lowercase())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A revision's number: 3 for `3-a1b2` (0 for text that has none).
pub fn rev_number(rev: &str) -> u64 {
    rev.split_once('-').and_then(|(n, _)| n.parse().ok()).unwrap_or(0)
}

/// A document's ancestry from its `_revisions`, newest (itself) first.
pub fn ancestry(body: &Value) -> Vec<String> {
    let start = body["_revisions"]["start"].as_u64().unwrap_or(0);
    let ids = body["_revisions"]["ids"].as_array().map(Vec::as_slice).unwrap_or_default();
    ids.iter()
        .enumerate()
        .filter_map(|(i, h)| Some(format!("{}-{}", start.checked_sub(i as u64)?, h.as_str()?)))
        .collect()
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
    let mut previous_large = match start {
        Start::After(prior) => prior.large.clone(),
        _ => Map::new(),
    };
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
            previous_large.clear();
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
        let before_large = if before.is_some() { &previous_large } else { &Map::new() };
        out.push(change(link, revision, before, before_large, kind, &stated, recording));
        previous = fields(body);
        previous_large.clear();
        known = true;
    }
    out
}

/// What this revision states in its `edit`, when it differs from the one before (an `edit`
/// carried over unchanged states nothing; the validation function lets a client carry it over
/// only unchanged). Unknowable when the revision before is not known.
fn stated(body: &Value, before: Option<&Value>, before_known: bool) -> Stated {
    let Some(edit) = body.get("edit").filter(|e| e.is_object()) else { return Stated::default() };
    if !before_known {
        return Stated::default();
    }
    match before.and_then(|b| b.get("edit")) {
        Some(old) if old == edit => Stated::default(),
        _ => Stated::of(edit),
    }
}

/// A document's fields as history keeps them: all but `_id`, `_rev` and CouchDB's metadata;
/// `None` for a deletion.
fn fields(body: &Value) -> Option<Value> {
    if body.get("_deleted").and_then(Value::as_bool).unwrap_or(false) || !body.is_object() {
        return None;
    }
    Some(own_fields(body))
}

/// A document's own fields: all but CouchDB's (`_id`, `_rev`, `_revisions`...); an empty
/// object for what is no object.
pub fn own_fields(doc: &Value) -> Value {
    let kept: Map<String, Value> = doc
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| !k.starts_with('_'))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    Value::Object(kept)
}

/// `before` and `after` as an entry keeps them, and what it keeps of the fields too long to
/// keep (`{"before": {"notes": {"bytes": 4200000, "blake2b": "..."}}, "after": {...}}`, empty
/// when none is): every field over `field_limit`, then the longest others until both fit in
/// `limit`. A field's name longer than [`NAME_LIMIT`] is kept as `~` and its digest (with
/// `name_bytes`); and where so many fields are kept as digests that those are over `limit`
/// too, each side is kept whole as one digest, under `*`.
pub fn bounded(
    before: Option<&Value>,
    after: Option<&Value>,
    field_limit: usize,
    limit: usize,
) -> (Option<Value>, Option<Value>, Map<String, Value>) {
    let originals = [before, after];
    let mut sides = [before.cloned(), after.cloned()];
    let mut sizes: Vec<(usize, usize, String)> = Vec::new();
    for (side, doc) in sides.iter().enumerate() {
        if let Some(Value::Object(fields)) = doc {
            for (name, value) in fields {
                sizes.push((json_len(value) + name.len() + 4, side, name.clone()));
            }
        }
    }
    let mut total: usize = sizes.iter().map(|(n, _, _)| n).sum();
    // Longest first: over the field limit, then while the whole is over its limit.
    sizes.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.2.cmp(&b.2)));
    let mut large = Map::new();
    let mut large_size = 0;
    for (size, side, name) in sizes {
        // Done once it fits, or once a digest would be no shorter than what it stands for.
        if size <= field_limit && total + large_size <= limit || size <= DIGEST_BYTES {
            break;
        }
        let Some(Value::Object(fields)) = &mut sides[side] else { continue };
        let Some(value) = fields.remove(&name) else { continue };
        let mut kept = digest_of(&value);
        let key = if name.len() <= NAME_LIMIT {
            name
        } else {
            kept["name_bytes"] = json!(name.len());
            format!("~{}", hex(&Blake2b::<U16>::digest(name.as_bytes())))
        };
        large_size += key.len() + DIGEST_BYTES;
        large.entry(SIDES[side]).or_insert_with(|| json!({}))[&key] = kept;
        total -= size;
    }
    if total + large_size > limit {
        // Too many fields to keep even as digests: each side as one.
        large = Map::new();
        for (side, original) in originals.iter().enumerate() {
            if let Some(doc @ Value::Object(_)) = original {
                large.insert(SIDES[side].to_owned(), json!({"*": digest_of(doc)}));
                sides[side] = Some(json!({}));
            }
        }
    }
    let [before, after] = sides;
    (before, after, large)
}

/// A field's name longer than this is kept in `large` as `~` and its digest.
pub const NAME_LIMIT: usize = 256;
/// About what a field kept as its size and digest takes in `large`, its name aside.
const DIGEST_BYTES: usize = 120;

const SIDES: [&str; 2] = ["before", "after"];

/// What an entry keeps of a value too long to keep: its size and digest as JSON.
fn digest_of(value: &Value) -> Value {
    let text = value.to_string();
    json!({"bytes": text.len(), "blake2b": hex(&Blake2b::<U32>::digest(text.as_bytes()))})
}

/// The length of `value` as compact JSON, without writing it out.
pub(crate) fn json_len(value: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    serde_json::to_writer(&mut count, value).expect("a value writes");
    count.0
}

/// The entry of one held revision; `before_large`: what the entry before kept of `before` as
/// sizes and digests (the prior entry's `large.after`).
fn change(
    link: &str,
    revision: &Revision,
    before: Option<&Value>,
    before_large: &Map<String, Value>,
    kind: &str,
    stated: &Stated,
    recording: &Recording,
) -> Value {
    let body = revision.body.as_ref().expect("a change entry is of a held revision");
    let after = fields(body);
    let (before, after, mut large) = bounded(before, after.as_ref(), FIELD_LIMIT, ENTRY_LIMIT);
    if !before_large.is_empty() && large.get("before").and_then(|b| b.get("*")).is_none() {
        let kept = large.entry("before").or_insert_with(|| json!({}));
        for (name, value) in before_large {
            if before.as_ref().is_some_and(|b| b.get(name).is_none()) && kept.get(name).is_none() {
                kept[name] = value.clone();
            }
        }
    }
    let mut entry = json!({
        "_id": entry_id(link, &revision.rev),
        "type": "change",
        "link": link,
        "rev": revision.rev,
        "parent": ancestry(body).into_iter().nth(1),
        "kind": kind,
        "before": before,
        "after": after,
        "by": stated.by,
        "at": stated.at,
        "batch": stated.batch,
        "recorded_at": recording.now,
        "late": recording.late,
    });
    if !large.is_empty() {
        entry["large"] = Value::Object(large);
    }
    entry
}

/// `entry` with what it says of the document before and after kept as one size and digest a
/// side: what is left when CouchDB refuses the entry as too large for its limits.
pub fn shrunk(entry: &Value) -> Value {
    let mut entry = entry.clone();
    let mut large = Map::new();
    for side in SIDES {
        let had_large = entry["large"][side].as_object().is_some_and(|l| !l.is_empty());
        if let Some(doc @ Value::Object(_)) = entry.get(side) {
            // What the entry says of this side, digests included: changed or not, as before.
            let whole = if had_large { json!({"kept": doc, "large": entry["large"][side]}) } else { doc.clone() };
            large.insert(side.to_owned(), json!({"*": digest_of(&whole)}));
            entry[side] = json!({});
        }
    }
    entry["large"] = Value::Object(large);
    entry
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

/// The gap that stands for an entry CouchDB refused for good: the revision is not recorded,
/// and the history says why, in CouchDB's words.
pub fn refused_gap(entry: &Value, reason: &str, now: &str) -> Value {
    let text = |field: &str| entry[field].as_str().unwrap_or_default();
    let (first, last, missing) = match entry["type"].as_str() {
        Some("gap") => (text("first"), text("last"), entry["missing"].as_u64().unwrap_or(1)),
        _ => (text("rev"), text("rev"), 1),
    };
    let mut gap = gap(text("link"), first, last, missing, now, now);
    gap["reason"] = json!("refused");
    gap["detail"] = json!(reason.chars().take(500).collect::<String>());
    gap
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transfer::validate::Validator;
    use proptest::prelude::*;

    /// The history database's validation function as setup installs it, run as the recorder.
    fn history_function() -> Validator {
        let design = crate::history::design(&["links:recorder"], &["links:editor"]);
        let source = design["validate_doc_update"].as_str().unwrap().to_owned();
        let user = json!({"db": "links_history", "name": "couchlink-reader", "roles": ["links:recorder"]});
        Validator::new(&[("_design/history".into(), source)], &user, &json!({})).unwrap()
    }

    fn one_entry(rev_: &str, body: Value) -> Value {
        let out = entries("H83if", &[rev(rev_, Some(body))], &Start::Creation, &now(false));
        assert_eq!(out.len(), 1);
        out.into_iter().next().unwrap()
    }

    /// What a write states, as the links' function and the recorder judge it (the same table):
    /// the history's function takes exactly what is kept.
    #[test]
    fn the_history_takes_what_the_links_take_as_the_shared_table_says() {
        let table: Value = serde_json::from_str(include_str!("../../tests/edit_cases.json")).unwrap();
        let function = history_function();
        for case in table["cases"].as_array().unwrap() {
            let field = case["field"].as_str().unwrap();
            if field == "restores" {
                continue; // An entry holds it only inside its document.
            }
            let mut entry = one_entry("1-a", json!({"_id": "H83if", "url": "https://a.example/"}));
            entry[field] = case["value"].clone();
            assert_eq!(function.check(&entry).is_ok(), case["valid"] == true, "{case}");
            let recorded = one_entry(
                "1-a",
                json!({"_id": "H83if", "url": "https://a.example/", "edit": {"by": "maria", field: case["value"]}}),
            );
            assert_eq!(!recorded[field].is_null(), case["valid"] == true, "kept as the table says: {case}");
            assert_eq!(function.check(&recorded), Ok(()), "{recorded}");
        }
    }

    #[test]
    fn any_revision_couchdb_takes_has_an_id_of_its_own() {
        // Seen on CouchDB 3.5 from `_bulk_docs` with `new_edits: false`: each revision as it
        // was written (a 32-digit hash only is turned into lower case).
        let revs = ["1-ABCDEF", "1-a/b c", "1-\u{e9}", "0-abc", "5-abc", "99999999999-a", "1-", "3-abcdef0123456789"];
        let ids: Vec<String> = revs.iter().map(|r| entry_id("H83if", r)).collect();
        assert_eq!(ids[7], "H83if/0000000003-abcdef0123456789");
        assert_eq!(ids[5], "H83if/99999999999-a");
        assert_eq!(ids[3], "H83if/0000000000-abc");
        assert!(
            ids[0].starts_with("H83if/0000000001-~") && ids[0].len() == "H83if/0000000001-~".len() + 32,
            "{}",
            ids[0]
        );
        let unique: std::collections::HashSet<&String> = ids.iter().collect();
        assert_eq!(unique.len(), ids.len(), "{ids:?}");
        let function = history_function();
        for r in revs {
            let entry = one_entry(r, json!({"_id": "H83if", "_rev": r, "url": "https://a.example/"}));
            assert_eq!(function.check(&entry), Ok(()), "{entry}");
        }
    }

    #[test]
    fn a_field_too_long_to_keep_is_kept_as_its_size_and_digest() {
        let notes = "n".repeat(FIELD_LIMIT + 1);
        let before = json!({"url": "https://a.example/", "notes": notes});
        let prior = Prior { after: Some(before), recorded_at: "2026-11-28T08:00:00Z".into(), large: Map::new() };
        let body = json!({"_id": "H83if", "_rev": "2-b", "url": "https://b.example/", "notes": notes,
            "_revisions": {"start": 2, "ids": ["b", "a"]}});
        let out = entries("H83if", &[rev("2-b", Some(body))], &Start::After(prior), &now(false));
        let entry = &out[0];
        assert_eq!(entry["after"], json!({"url": "https://b.example/"}));
        assert_eq!(entry["before"], json!({"url": "https://a.example/"}));
        let kept = &entry["large"]["after"]["notes"];
        assert_eq!(kept["bytes"], notes.len() + 2);
        assert_eq!(kept, &entry["large"]["before"]["notes"], "the same text, the same digest");
        assert_eq!(history_function().check(entry), Ok(()));
        // Many fields under the field limit, together over the entry's: the longest go first.
        let mut doc = json!({"_id": "H83if", "url": "https://a.example/"});
        for i in 0..40 {
            doc[format!("f{i:02}")] = json!("x".repeat(FIELD_LIMIT - 100 - i));
        }
        let entry = one_entry("1-a", doc);
        assert!(entry.to_string().len() < ENTRY_LIMIT + 10_000, "{}", entry.to_string().len());
        assert!(entry["large"]["after"]["f00"].is_object() && entry["after"]["f39"].is_string());
        let small = shrunk(&entry);
        assert!(small.to_string().len() < 10_000);
        assert_eq!(small["after"], json!({}));
        assert_eq!(small["large"]["after"].as_object().unwrap().keys().collect::<Vec<_>>(), ["*"]);
        assert_eq!(history_function().check(&small), Ok(()));
        // Long names, and so many fields that even their digests are too many.
        let mut doc = json!({"_id": "H83if", "url": "https://a.example/"});
        for i in 0..30 {
            doc[format!("{i:02}{}", "k".repeat(150_000))] = json!(i);
        }
        let entry = one_entry("1-a", doc);
        let kept = entry["large"]["after"].as_object().unwrap();
        assert!(entry.to_string().len() < ENTRY_LIMIT, "{}", entry.to_string().len());
        assert!(kept.keys().all(|k| k.starts_with('~') && k.len() == 33), "{:?}", kept.keys().next());
        assert_eq!(kept.values().next().unwrap()["name_bytes"], 150_002);
        let mut doc = json!({"_id": "H83if", "url": "https://a.example/"});
        for i in 0..20_000 {
            doc[format!("f{i:05}")] = json!("v".repeat(60));
        }
        let entry = one_entry("1-a", doc);
        assert!(entry.to_string().len() < ENTRY_LIMIT, "{}", entry.to_string().len());
        assert_eq!(entry["after"], json!({}));
        assert!(entry["large"]["after"]["*"]["bytes"].as_u64().unwrap() > 1_000_000);
        assert_eq!(history_function().check(&entry), Ok(()));
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(|f| json!(f)),
            ".{0,12}".prop_map(Value::String),
            "20[0-9]{2}-[01][0-9]-[0-3][0-9][Tt ][0-2][0-9]:[0-6][0-9]:[0-6][0-9](\\.[0-9]{0,3})?[Zz]?"
                .prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 24, 5, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map("_?[a-z]{0,6}|by|at|batch|restores", inner, 0..5)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    fn revision_text() -> impl Strategy<Value = String> {
        // CouchDB's own, a replicating client's (a number, a dash, any text), and text that is
        // no revision at all (never given by CouchDB: still an entry of its own).
        prop_oneof!["[1-9][0-9]{0,2}-[0-9a-f]{32}", "[0-9]{1,22}-.{0,40}", ".{1,20}",]
    }

    fn document() -> impl Strategy<Value = Value> {
        (prop::collection::btree_map("_?[a-z]{1,6}", json_value(), 0..6), json_value(), prop::option::of(0usize..3))
            .prop_map(|(fields, edit, big)| {
                let mut doc: Map<String, Value> = fields.into_iter().collect();
                doc.insert("_id".into(), json!("H83if"));
                doc.insert("edit".into(), edit);
                if let Some(n) = big {
                    doc.insert("notes".into(), json!("x".repeat(FIELD_LIMIT * n + 7)));
                }
                Value::Object(doc)
            })
    }

    proptest! {
            #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

            /// Whatever a document holds and whatever its revisions are called, every entry made of
            /// it is one the history's validation function takes, within the size CouchDB stores,
            /// under an ID of its revision's own.
            #[test]
            fn any_document_and_revision_make_entries_the_history_takes(
                docs in prop::collection::vec((revision_text(), prop::option::of(document())), 1..4),
                tail in (revision_text(), document()),
                start in 0usize..4,
                late in any::<bool>(),
                prior_large in any::<bool>(),
            ) {
                let function = history_function();
                let mut chain: Vec<Revision> = docs.into_iter().map(|(rev, body)| Revision { rev, body }).collect();
                let mut last = tail.1;
                last["_revisions"] = json!({"start": 3, "ids": ["c", "b", "a"]});
                chain.push(Revision { rev: tail.0, body: Some(last) });
    let mut prior = Prior { after: chain[0].body.as_ref().and_then(fields), recorded_at: "2026-11-28T08:00:00Z".into(), large: Map::new() };
                if prior_large {
                    prior.large.insert("notes".into(), json!({"bytes": 70000, "blake2b": "0".repeat(64)}));
                }
                let start = match start {
                    0 => Start::After(prior),
                    1 => Start::Creation,
                    2 => Start::Began,
                    _ => Start::Unrecorded { began: "2026-11-01T00:00:00Z".into(), forgotten: 2 },
                };
                let out = entries("H83if", &chain, &start, &now(late));
                prop_assert!(!out.is_empty());
                for entry in &out {
                    prop_assert_eq!(function.check(entry), Ok(()), "{}", entry);
                    prop_assert!(entry.to_string().len() <= ENTRY_LIMIT + 16 * 1024);
                    let rev = entry.get("rev").or(entry.get("first")).and_then(Value::as_str).unwrap();
                    prop_assert_eq!(entry["_id"].as_str().unwrap(), entry_id("H83if", rev));
                    prop_assert_eq!(function.check(&refused_gap(entry, "too large", "2026-11-28T10:00:00Z")), Ok(()));
                    prop_assert_eq!(function.check(&shrunk(entry)), Ok(()));
                }
            }
        }

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
            large: Map::new(),
        };
        let body = json!({"_id": "H83if", "_rev": "3-c", "url": "https://c.example/", "edit": {"by": "maria"}});
        let out = entries("H83if", &[rev("3-c", Some(body))], &Start::After(prior), &now(false));
        assert_eq!(out[0]["by"], Value::Null);
        assert_eq!(out[0]["kind"], "changed");
    }

    #[test]
    fn compacted_revisions_are_one_gap_with_its_span_and_the_next_is_not_diffed() {
        let prior = Prior {
            after: Some(json!({"url": "https://a.example/"})),
            recorded_at: "2026-11-28T08:00:00Z".into(),
            large: Map::new(),
        };
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
        let prior = Prior {
            after: Some(json!({"url": "https://a.example/"})),
            recorded_at: "2026-11-28T08:00:00Z".into(),
            large: Map::new(),
        };
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
        let prior = Prior {
            after: Some(json!({"url": "https://a.example/"})),
            recorded_at: "2026-11-28T08:00:00Z".into(),
            large: Map::new(),
        };
        let body = json!({"_id": "H83if", "_rev": "2-b", "_deleted": true});
        let out = entries("H83if", &[rev("2-b", Some(body))], &Start::After(prior), &now(false));
        assert_eq!((out[0]["kind"].as_str(), out[0]["after"].is_null()), (Some("deleted"), true));
    }
}
