//! A bulk change (docs/reference.md, "Bulk changes"): one change applied to many links at once,
//! previewed before anything is written, written through `_bulk_docs` so that CouchDB checks
//! each document, reported link by link, and undone as one from the history.
//!
//! The change itself is plain ([`Change::apply`]: a document in, the document it becomes out);
//! CouchDB does the rest: each write carries the revision it was computed from, so a link
//! edited meanwhile is a conflict, never written over.

use serde_json::{json, Map, Value};

use crate::couch::{BulkOutcome, CouchClient, CouchError, IdState};

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

    /// What `doc` becomes (its `_id`, `_rev` and other fields kept), or `None` when the change
    /// leaves it as it is.
    pub fn apply(&self, doc: &Value) -> Option<Value> {
        let mut out = doc.as_object()?.clone();
        if let Some(url) = &self.url {
            out.insert("url".into(), json!(url));
        }
        if !self.add_tags.is_empty() || !self.remove_tags.is_empty() {
            let mut tags: Vec<Value> = out.get("tags").and_then(Value::as_array).cloned().unwrap_or_default();
            for tag in &self.add_tags {
                if !tags.iter().any(|t| t == tag) {
                    tags.push(json!(tag));
                }
            }
            tags.retain(|t| !self.remove_tags.iter().any(|r| t == r));
            if tags.is_empty() {
                out.remove("tags");
            } else {
                out.insert("tags".into(), Value::Array(tags));
            }
        }
        if let Some(inactive) = self.inactive {
            out.insert("inactive".into(), json!(inactive));
        }
        for (name, value) in
            [("expires", &self.expires), ("valid_from", &self.valid_from), ("password", &self.password)]
        {
            match value {
                Some(Some(t)) => {
                    out.insert(name.into(), json!(t));
                }
                Some(None) => {
                    out.remove(name);
                }
                None => {}
            }
        }
        match self.max_visits {
            Some(Some(max)) => {
                out.insert("max_visits".into(), json!(max));
            }
            Some(None) => {
                out.remove("max_visits");
                out.remove("max_visits_bots");
            }
            None => {}
        }
        if let Some(rules) = &self.replace_rules {
            if rules.is_empty() {
                out.remove("targets");
            } else {
                out.insert("targets".into(), Value::Array(rules.clone()));
            }
        }
        if let Some(rule) = &self.add_rule {
            let mut rules: Vec<Value> = out.get("targets").and_then(Value::as_array).cloned().unwrap_or_default();
            rules.push(rule.clone());
            out.insert("targets".into(), Value::Array(rules));
        }
        let out = Value::Object(out);
        (without_edit(&out) != without_edit(doc)).then_some(out)
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
    /// Written.
    Applied,
    /// Left alone: the change changes nothing.
    Unchanged,
    /// Someone edited it since it was read: nothing written over.
    Conflict,
    /// CouchDB refused it, in its words.
    Refused(String),
    /// There is no such link.
    Missing,
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

/// Writes the planned changes as batch `batch`, each stating `writer` (CouchDB refuses another
/// name), in pages of 500 through `_bulk_docs`: each link's outcome, in the plan's order.
pub async fn write(
    links: &CouchClient,
    planned: &[Planned],
    writer: &str,
    batch: &str,
) -> Result<Vec<Outcome>, BulkError> {
    let edit = crate::history::edit(writer, Some(batch));
    let mut outcomes: Vec<Option<Outcome>> = planned
        .iter()
        .map(|p| match (&p.before, &p.after) {
            (Value::Null, _) => Some(Outcome::Missing),
            (_, None) => Some(Outcome::Unchanged),
            _ => None,
        })
        .collect();
    let to_write: Vec<(usize, Value)> = planned
        .iter()
        .enumerate()
        .filter_map(|(i, p)| {
            let mut doc = p.after.clone()?;
            if let Some(edit) = &edit {
                doc["edit"] = edit.clone();
            }
            Some((i, doc))
        })
        .collect();
    for page in to_write.chunks(500) {
        let docs: Vec<Value> = page.iter().map(|(_, d)| d.clone()).collect();
        for ((i, _), outcome) in page.iter().zip(links.bulk_create(&docs).await?) {
            outcomes[*i] = Some(match outcome {
                BulkOutcome::Stored(_) => Outcome::Applied,
                BulkOutcome::Conflict => Outcome::Conflict,
                BulkOutcome::Refused { reason, .. } => Outcome::Refused(reason),
            });
        }
    }
    Ok(outcomes.into_iter().map(|o| o.expect("every link has an outcome")).collect())
}

/// What undoing batch `batch` would do, from its history entries (`entries`: each link's entry
/// of the batch): each link put back as it was before the batch, unless edited since (its
/// current revision is not the batch's), which is left alone and said.
pub fn plan_undo(entries: &[Value], current: &[IdState]) -> Vec<(Planned, bool)> {
    entries
        .iter()
        .zip(current)
        .map(|(entry, state)| {
            let id = entry["link"].as_str().unwrap_or("").to_owned();
            let before_batch = entry["before"].as_object();
            match state {
                IdState::Taken(doc) if doc["_rev"] == entry["rev"] => {
                    let restored = before_batch.map(|fields| {
                        let mut out = fields.clone();
                        out.remove("edit");
                        out.insert("_id".into(), json!(id));
                        out.insert("_rev".into(), doc["_rev"].clone());
                        Value::Object(out)
                    });
                    (Planned { id, before: doc.clone(), after: restored }, false)
                }
                IdState::Taken(doc) => (Planned { id, before: doc.clone(), after: None }, true),
                _ => (Planned { id, before: Value::Null, after: None }, false),
            }
        })
        .collect()
}

/// The entries of batch `batch` in history database `history`, one per link (its `by_batch`
/// view): the revision each link got in the batch, with what it was before.
pub async fn batch_entries(history: &CouchClient, batch: &str) -> Result<Vec<Value>, BulkError> {
    let rows = history.view_docs(crate::history::DESIGN_DOC, "by_batch", &json!([batch]), &json!([batch, {}])).await?;
    Ok(rows)
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

    /// The cases the console's model is held to as well (console/test/model.test.js).
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

    #[test]
    fn an_undo_puts_back_what_the_batch_found_and_spares_links_edited_since() {
        let entries = [
            json!({"link": "Aaaaa", "rev": "2-b", "before": {"url": "https://old.example/", "edit": {"by": "x"}}}),
            json!({"link": "Bbbbb", "rev": "2-b", "before": {"url": "https://old.example/"}}),
        ];
        let current = [
            IdState::Taken(json!({"_id": "Aaaaa", "_rev": "2-b", "url": "https://new.example/"})),
            IdState::Taken(json!({"_id": "Bbbbb", "_rev": "3-c", "url": "https://edited.example/"})),
        ];
        let plan = plan_undo(&entries, &current);
        assert_eq!(plan[0].0.after, Some(json!({"_id": "Aaaaa", "_rev": "2-b", "url": "https://old.example/"})));
        assert!(!plan[0].1);
        assert_eq!(plan[1].0.after, None);
        assert!(plan[1].1, "edited since: left alone, and said");
    }
}
