//! Which ID each row gets, and which rows an earlier run already stored: decided from what the
//! database holds, before anything is written.
//!
//! A code that is already a couchlink ID (5 of `[A-Za-z0-9]`) and was never used keeps it: a
//! printed tag goes on working once DNS points at couchlink. Any other gets a fresh ID, written
//! to the mapping file: the first free one of a sequence derived from the source system and the
//! row's key ([`candidate`]), so that two imports of the same file offer each row the same IDs
//! and meet at CouchDB's conflict instead of storing it twice. A row is already imported when
//! the database holds a document with the same `imported_from` system and key ([`Entry::key`]);
//! a restore (`jsonl`), when its ID holds the same document.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::entry::{stored_key, Entry, Invalid, System};
use crate::couch::IdState;
use crate::domain::{stable_hash, EditStamp, LinkEdit, LinkId, LinkWrite};

/// What becomes of one row.
#[derive(Debug, Clone, PartialEq)]
pub enum Fate {
    /// Stored under its own code.
    Keep(LinkId),
    /// Stored under a fresh ID, to be drawn.
    Fresh,
    /// Already in the database under this ID (an earlier run, or the same document).
    Already(LinkId),
}

/// Why a restore (`jsonl`) cannot put a row back under its own ID.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotRestorable {
    /// Its `_id` is no couchlink ID (as written; empty when there is none).
    #[error("{0:?} is not a couchlink ID (5 of A-Z, a-z, 0-9)")]
    NotAnId(String),
    /// The ID was deleted here, and IDs are never used twice.
    #[error("{0} was deleted in this database, and is never used again")]
    Deleted(LinkId),
    /// The ID holds another document here.
    #[error("{0} holds a different link in this database")]
    Different(LinkId),
}

/// Rows read once, with duplicates of one key (one link twice in the files) turned down.
pub fn without_duplicates(entries: Vec<Entry>, invalid: &mut Vec<Invalid>) -> Vec<Entry> {
    let mut first = HashMap::new();
    let mut kept = Vec::with_capacity(entries.len());
    for entry in entries {
        match first.get(entry.key()) {
            Some(place) => invalid.push(Invalid {
                place: entry.place.clone(),
                reason: format!("{} is also on {place}: each link is imported once", entry.key()),
            }),
            None => {
                first.insert(entry.key().to_owned(), entry.place.clone());
                kept.push(entry);
            }
        }
    }
    kept
}

/// The ID a row asks to keep: its code, when that is a couchlink ID.
pub fn wanted_id(entry: &Entry) -> Option<LinkId> {
    entry.code.as_deref().and_then(|c| LinkId::parse(c).ok())
}

/// The fate of `entry` given what the database holds under its code (`None` when it has no
/// code couchlink could keep).
pub fn fate(system: System, entry: &Entry, state: Option<&IdState>) -> Result<Fate, NotRestorable> {
    let id = wanted_id(entry);
    match (id, state) {
        (Some(id), Some(IdState::Free)) => Ok(Fate::Keep(id)),
        (Some(id), Some(IdState::Taken(doc))) if is_stored(system, entry, doc) => Ok(Fate::Already(id)),
        // A restore puts each document back under its own ID, or not at all.
        _ if system == System::Jsonl => Err(match (id, state) {
            (None, _) => NotRestorable::NotAnId(entry.code.clone().unwrap_or_default()),
            (Some(id), Some(IdState::Deleted)) => NotRestorable::Deleted(id),
            (Some(id), _) => NotRestorable::Different(id),
        }),
        _ => Ok(Fate::Fresh),
    }
}

/// Whether `doc`, stored in the database, is `entry` imported before.
fn is_stored(system: System, entry: &Entry, doc: &Value) -> bool {
    if system == System::Jsonl {
        let Value::Object(stored) = doc else { return false };
        // Who wrote it (`edit`) is not what the link is: each restore states its own writer.
        let mut stored = stored.clone();
        let mut fields = entry.fields.clone();
        for meta in ["_id", "_rev", "edit"] {
            stored.remove(meta);
            fields.remove(meta);
        }
        return stored == fields;
    }
    stored_key(system, doc) == Some(entry.key())
}

/// The document stored for `entry` under `id`: its fields, and where it came from (a restore
/// keeps the document as it was), stating `edit` when there is one.
pub fn document(system: System, entry: &Entry, id: &LinkId, edit: Option<&EditStamp>) -> Value {
    let mut doc = Map::with_capacity(entry.fields.len() + 3);
    doc.insert("_id".into(), Value::String(id.as_str().to_owned()));
    doc.extend(entry.fields.iter().map(|(k, v)| (k.clone(), v.clone())));
    let imported_from = (system != System::Jsonl).then(|| entry.imported_from(system));
    let stated =
        LinkEdit { set: LinkWrite { imported_from, edit: edit.cloned(), ..LinkWrite::default() }, remove: Vec::new() };
    Value::Object(stated.onto(doc))
}

/// The `n`th ID (from 0) offered to a row without a code of its own: derived from the source
/// system and the row's key, the same in every run, process and build.
pub fn candidate(system: System, key: &str, n: u32) -> LinkId {
    LinkId::from_number(stable_hash(&[system.as_str().as_bytes(), key.as_bytes(), &n.to_le_bytes()]))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::transfer::entry::Place;

    fn entry(code: &str, url: &str) -> Entry {
        let mut e = Entry::new(Place { file: "f.csv".into(), line: 2 }, url);
        e.code = Some(code.into());
        e
    }

    #[test]
    fn a_free_five_character_code_is_kept_and_any_other_drawn_afresh() {
        let e = entry("Ab3dE", "https://example.com/");
        assert_eq!(fate(System::Csv, &e, Some(&IdState::Free)), Ok(Fate::Keep(LinkId::parse("Ab3dE").unwrap())));
        assert_eq!(fate(System::Csv, &e, Some(&IdState::Deleted)), Ok(Fate::Fresh));
        assert_eq!(
            fate(System::Csv, &e, Some(&IdState::Taken(json!({"url": "https://other.example/"})))),
            Ok(Fate::Fresh)
        );
        assert_eq!(fate(System::Csv, &entry("spring-sale", "https://example.com/"), None), Ok(Fate::Fresh));
    }

    #[test]
    fn a_document_of_an_earlier_run_is_recognised_by_system_and_key() {
        let e = entry("Ab3dE", "https://example.com/");
        let id = LinkId::parse("Ab3dE").unwrap();
        let stored = document(System::Bitly, &e, &id, None);
        assert_eq!(fate(System::Bitly, &e, Some(&IdState::Taken(stored.clone()))), Ok(Fate::Already(id)));
        // The same code from another system is another link.
        assert_eq!(fate(System::Kutt, &e, Some(&IdState::Taken(stored))), Ok(Fate::Fresh));
    }

    #[test]
    fn a_restore_keeps_each_id_or_says_why_not() {
        let mut e = entry("Ab3dE", "https://example.com/");
        e.fields.insert("note".into(), json!("x"));
        let id = LinkId::parse("Ab3dE").unwrap();
        let mut same = document(System::Jsonl, &e, &id, None);
        same["_rev"] = json!("1-abc");
        assert_eq!(fate(System::Jsonl, &e, Some(&IdState::Taken(same))), Ok(Fate::Already(id)));
        let other = json!({"_id": "Ab3dE", "url": "https://example.com/", "inactive": false});
        assert_eq!(fate(System::Jsonl, &e, Some(&IdState::Taken(other))), Err(NotRestorable::Different(id)));
        assert_eq!(
            fate(System::Jsonl, &e, Some(&IdState::Deleted)).unwrap_err().to_string(),
            "Ab3dE was deleted in this database, and is never used again"
        );
        assert_eq!(
            fate(System::Jsonl, &entry("toolong", "https://example.com/"), None).unwrap_err().to_string(),
            "\"toolong\" is not a couchlink ID (5 of A-Z, a-z, 0-9)"
        );
    }

    #[test]
    fn fresh_ids_are_a_sequence_of_the_system_and_the_key() {
        let first = candidate(System::Shlink, "https://s.test/abc", 0);
        assert_eq!(first, candidate(System::Shlink, "https://s.test/abc", 0), "the same in every run");
        assert_ne!(first, candidate(System::Shlink, "https://s.test/abc", 1));
        assert_ne!(first, candidate(System::Bitly, "https://s.test/abc", 0), "another system's row is another link");
        assert_ne!(first, candidate(System::Shlink, "https://s.test/abd", 0));
        // Spread over the whole alphabet: 10,000 keys, next to no repeats (62^5 IDs).
        let ids: std::collections::HashSet<LinkId> =
            (0..10_000).map(|i| candidate(System::Csv, &format!("row-{i}"), 0)).collect();
        assert!(ids.len() >= 9_999, "{} distinct", ids.len());
    }

    #[test]
    fn a_second_row_of_one_link_is_refused_with_the_first_ones_place() {
        let mut invalid = Vec::new();
        let mut second = entry("abc", "https://b.example/");
        second.place.line = 7;
        let kept = without_duplicates(vec![entry("abc", "https://a.example/"), second], &mut invalid);
        assert_eq!(kept.len(), 1);
        assert_eq!(invalid[0].place.line, 7);
        assert!(invalid[0].reason.contains("also on f.csv:2"), "{}", invalid[0].reason);
    }
}
