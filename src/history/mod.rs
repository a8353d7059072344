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

use serde_json::{json, Value};

use crate::design::{function, with_roles};

/// The `edit` a write by account `by` states (docs/reference.md, "History"): the writer, the
/// time to the nanosecond (an `edit` equal to the revision before's states nothing, so two
/// quick writes must differ), and the bulk change it belongs to; `None` without an account.
pub fn edit(by: &str, batch: Option<&str>) -> Option<Value> {
    if by.is_empty() {
        return None;
    }
    let now = time::OffsetDateTime::now_utc();
    let at = now.format(&time::format_description::well_known::Rfc3339).expect("a UTC time formats");
    let mut edit = json!({"by": by, "at": at});
    if let Some(batch) = batch {
        edit["batch"] = json!(batch);
    }
    Some(edit)
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
