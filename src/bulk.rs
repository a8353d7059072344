//! A bulk change (docs/reference.md, "Bulk changes"): one change applied to many links at once,
//! previewed before anything is written, written through `_bulk_docs` so that CouchDB checks
//! each document, reported link by link, and undone as one.
//!
//! The change itself is plain ([`Change::apply`]: a document in, the document it becomes out);
//! CouchDB does the rest: each write carries the revision it was computed from, so a link
//! edited meanwhile is a conflict, never written over.
//!
//! Undo reads the change's own record, written to the history database by its writer as the
//! change is made ([`write`]): each link, the revision it had and what it was, written before
//! the link is, then the revision the change gave it. So an undo made at once puts back every
//! link (it waits for no recorder), and what a later write states (an `edit.batch` naming
//! someone else's change) makes nothing part of a change: a link is put back only while it is
//! still at the revision the change gave it ([`plan_undo`]).

use serde_json::{json, Map, Value};

use crate::couch::{BulkOutcome, CouchClient, CouchError, IdState};
use crate::domain::{EditStamp, LinkEdit, LinkField, LinkWrite};

/// One field change applied to every link picked.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Change {
    /// A new `url`.
    pub url: Option<String>,
    /// Tags added (kept once each, in order).
    pub add_tags: Vec<String>,
    /// Tags removed.
    pub remove_tags: Vec<String>,
    /// `Some(true)`: deactivate; `Some(false)`: reactivate.
    pub inactive: Option<bool>,
    /// `Some(Some(t))`: set `expires`; `Some(None)`: remove it.
    pub expires: Option<Option<String>>,
    /// `Some(Some(t))`: set `valid_from`; `Some(None)`: remove it.
    pub valid_from: Option<Option<String>>,
    /// A rule added after the others.
    pub add_rule: Option<Value>,
    /// The rules replaced by these.
    pub replace_rules: Option<Vec<Value>>,
    /// `Some(Some(hash))`: set the password (its hash, one for every link); `Some(None)`:
    /// remove it.
    pub password: Option<Option<String>>,
    /// `Some(Some(n))`: set `max_visits`; `Some(None)`: remove it.
    pub max_visits: Option<Option<u32>>,
}

impl Change {
    /// Whether it changes anything at all.
    pub fn is_empty(&self) -> bool {
        *self == Change::default()
    }

    /// What `doc` becomes (its `_id`, `_rev` and every field the change does not change kept
    /// exactly as read), or `None` when the change leaves it as it is.
    pub fn apply(&self, doc: &Value) -> Option<Value> {
        let stored = doc.as_object()?;
        let out = Value::Object(self.edit_of(stored).onto(stored.clone()));
        (without_edit(&out) != without_edit(doc)).then_some(out)
    }

    /// What the change writes to, and removes from, the document `stored`.
    fn edit_of(&self, stored: &Map<String, Value>) -> LinkEdit {
        let mut edit = LinkEdit {
            set: LinkWrite { url: self.url.clone(), inactive: self.inactive, ..LinkWrite::default() },
            remove: Vec::new(),
        };
        let list = |name: &str| stored.get(name).and_then(Value::as_array).cloned().unwrap_or_default();
        if !self.add_tags.is_empty() || !self.remove_tags.is_empty() {
            let mut tags = list("tags");
            for tag in &self.add_tags {
                if !tags.iter().any(|t| t == tag) {
                    tags.push(json!(tag));
                }
            }
            tags.retain(|t| !self.remove_tags.iter().any(|r| t == r));
            if tags.is_empty() {
                edit.remove.push(LinkField::Tags);
            } else {
                edit.set.tags = Some(tags);
            }
        }
        for (field, value, set) in [
            (LinkField::Expires, &self.expires, &mut edit.set.expires),
            (LinkField::ValidFrom, &self.valid_from, &mut edit.set.valid_from),
            (LinkField::Password, &self.password, &mut edit.set.password),
        ] {
            match value {
                Some(Some(t)) => *set = Some(t.clone()),
                Some(None) => edit.remove.push(field),
                None => {}
            }
        }
        match self.max_visits {
            Some(Some(max)) => edit.set.max_visits = Some(max.into()),
            Some(None) => edit.remove.extend([LinkField::MaxVisits, LinkField::MaxVisitsBots]),
            None => {}
        }
        // `None`: the rules as they are; `Some(None)`: none.
        let mut targets = self.replace_rules.as_ref().map(|rules| Some(rules.clone()).filter(|r| !r.is_empty()));
        if let Some(rule) = &self.add_rule {
            let mut rules = match targets {
                Some(replaced) => replaced.unwrap_or_default(),
                None => list("targets"),
            };
            rules.push(rule.clone());
            targets = Some(Some(rules));
        }
        match targets {
            Some(Some(rules)) => edit.set.targets = Some(rules),
            Some(None) => edit.remove.push(LinkField::Targets),
            None => {}
        }
        edit
    }
}

fn without_edit(doc: &Value) -> Map<String, Value> {
    let mut fields = doc.as_object().cloned().unwrap_or_default();
    fields.remove("edit");
    fields
}

/// One link of a bulk change, as previewed.
#[derive(Debug, Clone, PartialEq)]
pub struct Planned {
    /// The link.
    pub id: String,
    /// As stored now (`_rev` included).
    pub before: Value,
    /// What it becomes; `None`: unchanged, not written.
    pub after: Option<Value>,
}

/// How one link's write ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Written, as this revision.
    Applied(String),
    /// Left alone: the change changes nothing.
    Unchanged,
    /// Someone edited it since it was read: nothing written over.
    Conflict,
    /// CouchDB refused it, in its words.
    Refused(String),
    /// There is no such link.
    Missing,
    /// Not written: the bulk change stopped before it (said in [`Written::stopped`]).
    NotWritten,
}

/// Why a bulk change could not run.
#[derive(Debug, thiserror::Error)]
pub enum BulkError {
    /// CouchDB refused or could not be reached.
    #[error("the bulk change failed")]
    Couch(#[from] CouchError),
}

/// Every link of `ids`, with what `change` makes of it. An ID with no live link is planned as
/// missing (`before` null).
pub async fn plan(links: &CouchClient, ids: &[String], change: &Change) -> Result<Vec<Planned>, BulkError> {
    let mut out = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(500) {
        let refs: Vec<&str> = chunk.iter().map(String::as_str).collect();
        for (id, state) in chunk.iter().zip(links.id_states(&refs).await?) {
            out.push(match state {
                IdState::Taken(doc) if doc.is_object() => {
                    Planned { id: id.clone(), after: change.apply(&doc), before: doc }
                }
                _ => Planned { id: id.clone(), before: Value::Null, after: None },
            });
        }
    }
    Ok(out)
}

/// Links recorded per part of a bulk change's record (and written per `_bulk_docs`).
pub const PART: usize = 500;
/// A part of a record holds about this many bytes of JSON at most (what one request through
/// the console may carry, with room to spare).
pub const PART_BYTES: usize = 512 * 1024;
/// A link whose fields are longer than this as JSON is recorded without them: undo reads its
/// revision back from CouchDB (which holds it until the links database is compacted).
pub const KEPT_BEFORE: usize = 64 * 1024;

/// The ID of part `part` of bulk change `batch`'s record (`~` sorts after every link's entries).
pub fn part_id(batch: &str, part: usize) -> String {
    format!("~batch:{batch}:{part:04}")
}

/// What a bulk change wrote, link by link, and whether it stopped before writing.
#[derive(Debug)]
pub struct Written {
    /// Each planned link's outcome, in the plan's order.
    pub outcomes: Vec<Outcome>,
    /// Why nothing was written (its record could not be: nothing is written that undo could
    /// not put back).
    pub stopped: Option<String>,
}

/// Writes the planned changes as batch `batch`, each stating `writer` (CouchDB refuses another
/// name), in parts of [`PART`] links through `_bulk_docs`: each link's outcome, in the plan's
/// order. With a history database, the change's record (each link, the revision it was read at
/// and what it was) is written there first, all of it in one request and in the writer's own
/// name: undo reads it, and never what the links' later writes state. `undoes`: the batch this
/// one undoes. `Ok(None)` when the name is taken (another change of that name was recorded):
/// nothing is written, and another name will do.
pub async fn write(
    links: &CouchClient,
    history: Option<&CouchClient>,
    planned: &[Planned],
    writer: &str,
    batch: &str,
    undoes: Option<&str>,
) -> Result<Option<Written>, BulkError> {
    let stamp = crate::history::edit(writer, Some(batch));
    let edit = stamp.as_ref().map_or(Value::Null, EditStamp::to_value);
    let mut outcomes: Vec<Outcome> = planned
        .iter()
        .map(|p| match (&p.before, &p.after) {
            (Value::Null, _) => Outcome::Missing,
            (_, None) => Outcome::Unchanged,
            _ => Outcome::NotWritten,
        })
        .collect();
    let to_write: Vec<usize> = (0..planned.len()).filter(|i| outcomes[*i] == Outcome::NotWritten).collect();
    let parts = record_parts(batch, writer, &edit, undoes, planned, &to_write);
    if let (Some(history), false) = (history, parts.is_empty()) {
        // All parts at once, before any link: nobody learns the name in time to write a part
        // of it first.
        let docs: Vec<Value> = parts.iter().map(|(_, doc)| doc.clone()).collect();
        let stopped = match history.bulk_create(&docs).await {
            Ok(answers) => match answers.iter().find(|a| !matches!(a, BulkOutcome::Stored(_))) {
                None => None,
                Some(BulkOutcome::Conflict) => return Ok(None),
                Some(BulkOutcome::Refused { error, reason }) => Some(format!("{error}: {reason}")),
                Some(BulkOutcome::Stored(_)) => unreachable!("found as not stored"),
            },
            Err(e) => Some(crate::errors::Causes(&e).to_string()),
        };
        if let Some(why) = stopped {
            return Ok(Some(Written {
                outcomes,
                stopped: Some(format!(
                    "the change's record could not be written to {} ({why}), so no link was written (undo reads \
                     the record)",
                    history.database()
                )),
            }));
        }
    }
    for (indices, _) in &parts {
        let docs: Vec<Value> = indices
            .iter()
            .map(|&i| match planned[i].after.clone().expect("only changed links are written") {
                // Written onto the document as planned: every other field as read.
                Value::Object(doc) => {
                    let stated =
                        LinkEdit { set: LinkWrite { edit: stamp.clone(), ..LinkWrite::default() }, remove: Vec::new() };
                    Value::Object(stated.onto(doc))
                }
                other => other,
            })
            .collect();
        for (&i, outcome) in indices.iter().zip(links.bulk_create(&docs).await?) {
            outcomes[i] = match outcome {
                BulkOutcome::Stored(rev) => Outcome::Applied(rev),
                BulkOutcome::Conflict => Outcome::Conflict,
                BulkOutcome::Refused { reason, .. } => Outcome::Refused(reason),
            };
        }
    }
    Ok(Some(Written { outcomes, stopped: None }))
}

/// The record of the links `to_write` of `planned`, in parts: each part's indices into
/// `planned` and its document.
fn record_parts(
    batch: &str,
    by: &str,
    edit: &Value,
    undoes: Option<&str>,
    planned: &[Planned],
    to_write: &[usize],
) -> Vec<(Vec<usize>, Value)> {
    let mut parts: Vec<(Vec<usize>, Vec<Value>, usize)> = Vec::new();
    for &i in to_write {
        let p = &planned[i];
        let fields = crate::history::entry::own_fields(&p.before);
        let size = crate::history::entry::json_len(&fields);
        let before = if size <= KEPT_BEFORE { fields } else { Value::Null };
        let member = json!({"id": p.id, "rev": p.before["_rev"], "before": before});
        let size = crate::history::entry::json_len(&member);
        match parts.last_mut() {
            Some((indices, members, bytes)) if indices.len() < PART && *bytes + size <= PART_BYTES => {
                indices.push(i);
                members.push(member);
                *bytes += size;
            }
            _ => parts.push((vec![i], vec![member], size)),
        }
    }
    let count = parts.len();
    parts
        .into_iter()
        .enumerate()
        .map(|(n, (indices, members, _))| {
            let doc = json!({"_id": part_id(batch, n + 1), "type": "batch", "batch": batch, "by": by,
                "at": edit["at"], "part": n + 1, "parts": count, "edit": edit, "undoes": undoes, "links": members});
            (indices, doc)
        })
        .collect()
}

/// A bulk change as its record says: who made it, what each link stated, and each link with
/// the revision it had before and what it was.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// The change's name.
    pub batch: String,
    /// Its writer.
    pub by: String,
    /// What each of its links stated (`edit`).
    pub edit: Value,
    /// The change it undid, if it was an undo.
    pub undoes: Option<String>,
    /// Its links, in the order written.
    pub members: Vec<Member>,
    /// Documents under its name that are not part of it as its first part says (another
    /// account's, a part past its last, one with a conflicting revision): never believed.
    pub ignored: Vec<String>,
}

/// One link of a recorded bulk change.
#[derive(Debug, Clone, PartialEq)]
pub struct Member {
    /// The link.
    pub id: String,
    /// Its revision before the change.
    pub rev: String,
    /// What it was (its fields); `None` when too long to keep ([`KEPT_BEFORE`]).
    pub before: Option<Value>,
}

/// The record of bulk change `batch` from the documents under its name (`~batch:<batch>:`,
/// read with their conflicts), believing only the parts the first one says it has, of its
/// writer, with no conflicting revision; `None` when it has no first part.
pub fn read_record(batch: &str, docs: &[Value]) -> Option<Record> {
    let sound = |d: &&Value| d["type"] == "batch" && d["batch"] == batch && d.get("_conflicts").is_none();
    let head = docs.iter().filter(sound).find(|d| d["_id"] == part_id(batch, 1).as_str())?;
    let by = head["by"].as_str()?.to_owned();
    let parts = head["parts"].as_u64().unwrap_or(1) as usize;
    let believed = |d: &Value| {
        sound(&d)
            && d["by"] == by.as_str()
            && d["parts"] == head["parts"]
            && d["edit"] == head["edit"]
            && d["part"]
                .as_u64()
                .is_some_and(|p| (1..=parts as u64).contains(&p) && d["_id"] == part_id(batch, p as usize).as_str())
    };
    let mut members = Vec::new();
    for doc in docs.iter().filter(|d| believed(d)) {
        for member in doc["links"].as_array().into_iter().flatten() {
            let (Some(id), Some(rev)) = (member["id"].as_str(), member["rev"].as_str()) else { continue };
            let before = member["before"].as_object().map(|f| Value::Object(f.clone()));
            members.push(Member { id: id.to_owned(), rev: rev.to_owned(), before });
        }
    }
    let ignored = docs
        .iter()
        .filter(|d| d["batch"] == batch && !believed(d))
        .map(|d| d["_id"].as_str().unwrap_or_default().to_owned())
        .collect();
    Some(Record {
        batch: batch.to_owned(),
        by,
        edit: head["edit"].clone(),
        undoes: head["undoes"].as_str().map(str::to_owned),
        members,
        ignored,
    })
}

/// What undo does to one link of a bulk change.
#[derive(Debug, Clone, PartialEq)]
pub enum UndoStep {
    /// Write this document back (the link as the change found it, at its current revision).
    Restore(Value),
    /// The link as the change found it is not in the record (too long to keep): read revision
    /// `rev` from CouchDB, and write it back over the current revision `current`.
    ReadBack {
        /// The revision the change read.
        rev: String,
        /// The link's revision now.
        current: String,
    },
    /// Changed since the change read it, by another write than the change's (the change's
    /// write, and another after it; or another instead of it): left as it is.
    ChangedSince,
    /// Still at the revision the change read: the change wrote nothing of it.
    NotChanged,
    /// There is no such link any more.
    Missing,
    /// What the record says the link was could not be held to revision `.0` (CouchDB no longer
    /// holds it, and the history's entry of it says otherwise or is missing): left as it is.
    /// Never planned here: the caller decides it, reading CouchDB.
    Unverified(String),
}

/// Link `id` as `fields` say (a document or its own fields), written over revision `rev`:
/// without the `edit` it had (the write states its own).
pub fn put_back(id: &str, fields: &Value, rev: &str) -> Value {
    let mut back = crate::history::entry::own_fields(fields);
    let object = back.as_object_mut().expect("own_fields is an object");
    object.remove("edit");
    object.insert("_id".into(), json!(id));
    object.insert("_rev".into(), json!(rev));
    back
}

/// What undoing `record` does to each of its links, given each as it is now (`current`, in the
/// members' order, each with its `_revisions`; `None`: no such link). A link is put back only
/// while it is the change's own write: the child of the revision the change read, stating the
/// change's `edit` (which only its writer can state, and no later write carries over without
/// being that write's child). The console's model holds itself to the same cases
/// (tests/undo_cases.json).
pub fn plan_undo(record: &Record, current: &[Option<Value>]) -> Vec<(String, UndoStep)> {
    record
        .members
        .iter()
        .zip(current)
        .map(|(member, now)| {
            let step = match now {
                None => UndoStep::Missing,
                Some(doc) if doc.get("_deleted").and_then(Value::as_bool) == Some(true) => UndoStep::Missing,
                Some(doc) if doc["_rev"] == member.rev.as_str() => UndoStep::NotChanged,
                Some(doc)
                    if doc["edit"] == record.edit
                        && crate::history::entry::ancestry(doc).get(1).map(String::as_str) == Some(&member.rev) =>
                {
                    let rev = doc["_rev"].as_str().unwrap_or_default();
                    match &member.before {
                        Some(fields) => UndoStep::Restore(put_back(&member.id, fields, rev)),
                        None => UndoStep::ReadBack { rev: member.rev.clone(), current: rev.to_owned() },
                    }
                }
                Some(_) => UndoStep::ChangedSince,
            };
            (member.id.clone(), step)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The change as the shared table writes it.
    fn change_of(c: &Value) -> Change {
        let strings = |k: &str| -> Vec<String> {
            c[k].as_array().into_iter().flatten().filter_map(|v| v.as_str().map(str::to_owned)).collect()
        };
        let instant = |k: &str| c.get(k).map(|v| v.as_str().map(str::to_owned));
        Change {
            url: c["url"].as_str().map(str::to_owned),
            add_tags: strings("add_tags"),
            remove_tags: strings("remove_tags"),
            inactive: c["inactive"].as_bool(),
            expires: instant("expires"),
            valid_from: instant("valid_from"),
            add_rule: c.get("add_rule").cloned(),
            replace_rules: c["replace_rules"].as_array().cloned(),
            password: instant("password"),
            max_visits: c.get("max_visits").map(|v| v.as_u64().map(|n| n as u32)),
        }
    }

    /// The cases the console's model is held to as well (console/test/bulk.test.js).
    #[test]
    fn a_change_makes_each_link_what_the_shared_table_says() {
        let table: Value = serde_json::from_str(include_str!("../tests/bulk_cases.json")).unwrap();
        let cases = table["cases"].as_array().unwrap();
        assert!(cases.len() >= 6);
        for case in cases {
            let after = change_of(&case["change"]).apply(&case["doc"]);
            assert_eq!(after.unwrap_or(Value::Null), case["after"], "{case}");
        }
        assert!(Change::default().is_empty());
    }

    /// The cases the console's model is held to as well (console/test/bulk.test.js).
    #[test]
    fn an_undo_does_what_the_shared_table_says() {
        let table: Value = serde_json::from_str(include_str!("../tests/undo_cases.json")).unwrap();
        let cases = table["cases"].as_array().unwrap();
        assert!(cases.len() >= 6);
        for case in cases {
            let docs = case["record"].as_array().unwrap();
            let Some(record) = read_record(case["batch"].as_str().unwrap(), docs) else {
                assert_eq!(case["steps"], Value::Null, "{case}");
                continue;
            };
            let current: Vec<Option<Value>> =
                case["current"].as_array().unwrap().iter().map(|d| Some(d.clone()).filter(|d| !d.is_null())).collect();
            let steps: Vec<Value> = plan_undo(&record, &current)
                .into_iter()
                .map(|(id, step)| match step {
                    UndoStep::Restore(doc) => json!({"id": id, "step": "restore", "doc": doc}),
                    UndoStep::ReadBack { rev, current } => {
                        json!({"id": id, "step": "read back", "rev": rev, "current": current})
                    }
                    UndoStep::ChangedSince => json!({"id": id, "step": "changed since"}),
                    UndoStep::NotChanged => json!({"id": id, "step": "not changed"}),
                    UndoStep::Missing => json!({"id": id, "step": "missing"}),
                    UndoStep::Unverified(_) => panic!("plan_undo never plans an unverified step"),
                })
                .collect();
            assert_eq!(Value::Array(steps), case["steps"], "{}", case["why"]);
            assert_eq!(json!(record.ignored), case["ignored"], "{}", case["why"]);
        }
    }

    #[test]
    fn a_record_is_written_in_parts_bounded_in_links_and_bytes_with_long_links_read_back() {
        let planned: Vec<Planned> = (0..1200)
            .map(|i| {
                let mut before = json!({"_id": format!("L{i:04}"), "_rev": "1-a", "url": "https://a.example/"});
                if i == 3 {
                    before["notes"] = json!("n".repeat(KEPT_BEFORE));
                }
                Planned { id: format!("L{i:04}"), after: Some(json!({})), before }
            })
            .collect();
        let to_write: Vec<usize> = (0..planned.len()).collect();
        let edit = json!({"by": "ed", "at": "2026-12-01T10:00:00Z", "batch": "b"});
        let parts = record_parts("b", "ed", &edit, None, &planned, &to_write);
        assert_eq!(parts.iter().map(|(i, _)| i.len()).collect::<Vec<_>>(), [500, 500, 200]);
        let (_, first) = &parts[0];
        assert_eq!((first["part"].as_u64(), first["parts"].as_u64()), (Some(1), Some(3)));
        assert_eq!(first["links"][0], json!({"id": "L0000", "rev": "1-a", "before": {"url": "https://a.example/"}}));
        assert_eq!(first["links"][3]["before"], Value::Null, "too long to keep: read back at undo");
        assert_eq!(part_id("b", 2), "~batch:b:0002");
        let validate =
            crate::history::design(&["r"], &["links:editor"])["validate_doc_update"].as_str().unwrap().to_owned();
        let user = json!({"name": "ed", "roles": ["links:editor"]});
        let function =
            crate::transfer::validate::Validator::new(&[("_design/history".into(), validate)], &user, &json!({}))
                .unwrap();
        for (_, doc) in &parts {
            let mut doc = doc.clone();
            assert_eq!(function.check(&doc), Ok(()));
            doc["by"] = json!("someone-else");
            assert!(function.check(&doc).is_err(), "only in the writer's own name");
        }
        let big: Vec<Planned> = (0..40)
            .map(|i| Planned {
                id: format!("B{i:04}"),
                after: Some(json!({})),
                before: json!({"_rev": "1-a", "notes": "n".repeat(KEPT_BEFORE - 100)}),
            })
            .collect();
        let parts = record_parts("b", "ed", &edit, None, &big, &(0..40).collect::<Vec<_>>());
        assert!(parts.len() > 1 && parts.iter().all(|(_, d)| d.to_string().len() <= PART_BYTES + KEPT_BEFORE));
    }
}
