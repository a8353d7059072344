//! A link's history (docs/reference.md, "History"; docs/architecture.md, "History"): every
//! revision of every link, whoever wrote it, recorded in the history database
//! (`{db}_history`) by one of the running proxies at a time, exactly once however many run.
//! The same database holds each bulk change's record, written by its writer ([`crate::bulk`]).
//!
//! - [`entry`]: the plain rules: a chain of revisions and what came before it in, entries out.
//! - [`recorder`]: the task that follows the links database's `_changes`, fetches what the
//!   rules need, and writes the entries; the proxies' hand-over of it.
//! - [`read`]: a link's entries and what changed in one, for the CLI's `history` and `restore`.

pub mod entry;
pub mod read;
pub mod recorder;
mod status;

use serde_json::{json, Map, Value};

use crate::design::{function, with_roles};
use crate::domain::{EditStamp, LinkEdit, LinkWrite};

/// The `edit` a write by account `by` states (docs/reference.md, "History"): the writer, the
/// time to the nanosecond (an `edit` equal to the revision before's states nothing, so two
/// quick writes must differ), and the bulk change it belongs to; `None` without an account.
pub fn edit(by: &str, batch: Option<&str>) -> Option<EditStamp> {
    if by.is_empty() {
        return None;
    }
    let stamp = EditStamp::new(by, &now());
    Some(match batch {
        Some(batch) => stamp.in_batch(batch),
        None => stamp,
    })
}

/// Now, as an `edit` states it (RFC 3339, UTC, to the nanosecond).
pub fn now() -> String {
    time::OffsetDateTime::now_utc().format(&time::format_description::well_known::Rfc3339).expect("a UTC time formats")
}

/// Link `id` as restored to a recorded version's `fields` (its `edit` dropped: the restore
/// states its own, `stamp`), over the current revision `rev`. Every other field of the version
/// is written as the history holds it, whatever couchlink knows of it.
pub fn restored(id: &str, rev: &Value, fields: &Map<String, Value>, stamp: EditStamp) -> Value {
    let mut doc = Map::with_capacity(fields.len() + 3);
    doc.insert("_id".into(), Value::String(id.to_owned()));
    doc.insert("_rev".into(), rev.clone());
    doc.extend(fields.iter().filter(|(k, _)| *k != "edit").map(|(k, v)| (k.clone(), v.clone())));
    let edit = LinkEdit { set: LinkWrite { edit: Some(stamp), ..LinkWrite::default() }, remove: Vec::new() };
    Value::Object(edit.onto(doc))
}

/// A fresh bulk change's name: `{kind}-20261128T090000-a1b2c3d4`.
pub fn batch_name(kind: &str) -> String {
    let now = time::OffsetDateTime::now_utc();
    let stamp = format!(
        "{:04}{:02}{:02}T{:02}{:02}{:02}",
        now.year(),
        u8::from(now.month()),
        now.day(),
        now.hour(),
        now.minute(),
        now.second()
    );
    format!("{kind}-{stamp}-{:08x}", rand::random::<u32>())
}

/// The history database's design document.
pub const DESIGN_DOC: &str = "history";

const VALIDATE_DOC_UPDATE: &str = include_str!("../../couchdb/history/validate_doc_update.js");
const GAPS: &str = include_str!("../../couchdb/history/gaps.js");

/// `_design/history` for recorders holding one of `writer_roles` and editors holding one of
/// `editor_roles`: the validation (only recorders write entries, each once, and their
/// checkpoint; an editor records their own bulk change) and the view of the gaps.
pub fn design(writer_roles: &[&str], editor_roles: &[&str]) -> Value {
    let validate =
        with_roles(&function(VALIDATE_DOC_UPDATE), &[("WRITER_ROLES", writer_roles), ("EDITOR_ROLES", editor_roles)]);
    json!({
        "language": "javascript",
        "validate_doc_update": validate,
        "views": {
            "gaps": {"map": function(GAPS), "reduce": "_sum"},
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restore_writes_the_versions_fields_as_recorded_with_its_own_edit() {
        // Numbers past what a couchlink type holds, and fields of other types than its own,
        // written back as the history read them.
        let version: Value = serde_json::from_str(
            r#"{"url":"https://a.example/","big":12345678901234567890,"small":-9223372036854775808,
                "tiny":5e-324,"tenth":0.1,"max_visits":500.0,"tags":"x","nested":{"z":[1,{"a":2.5}]},
                "edit":{"by":"ed","at":"2026-11-28T09:00:00Z"}}"#,
        )
        .unwrap();
        let stamp = EditStamp::new("maria", "2026-12-01T10:00:00Z").restoring("2-b");
        let doc = restored("H83if", &json!("5-e"), version.as_object().unwrap(), stamp);
        let mut wanted = version.clone();
        wanted["_id"] = json!("H83if");
        wanted["_rev"] = json!("5-e");
        wanted["edit"] = json!({"by": "maria", "at": "2026-12-01T10:00:00Z", "restores": "2-b"});
        assert_eq!(doc, wanted);
        let text = doc.to_string();
        for kept in [
            r#""big":12345678901234567890"#,
            r#""small":-9223372036854775808"#,
            r#""tiny":5e-324"#,
            r#""max_visits":500.0"#,
        ] {
            assert!(text.contains(kept), "{kept} in {text}");
        }
        assert!(text.starts_with(r#"{"_id":"H83if","_rev":"5-e","big":"#), "{text}");
    }

    #[test]
    fn an_edit_states_its_writer_and_batch() {
        assert_eq!(edit("", None), None);
        let stamp = edit("maria", Some("bulk-1")).unwrap();
        assert_eq!(
            (stamp.by.as_str(), stamp.batch.as_deref(), stamp.restores.as_deref()),
            ("maria", Some("bulk-1"), None)
        );
        assert!(crate::domain::is_stated_time(&stamp.at), "{}", stamp.at);
        let value = stamp.to_value();
        assert_eq!(value.as_object().unwrap().keys().collect::<Vec<_>>(), ["at", "batch", "by"]);
    }
}
