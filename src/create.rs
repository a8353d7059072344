//! `couchlink create`: stores a link under a fresh random ID and gives its short URL.

use serde_json::{json, Value};

use crate::couch::{CouchClient, CouchError, Created};
use crate::domain::LinkId;

/// How many random IDs to try before giving up (each collision is a 1 in 62^5/n event).
pub const MAX_ATTEMPTS: usize = 20;

/// Why no link was created.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    /// CouchDB refused the document; `reason` is its own words (the VDU's, for a bad URL).
    #[error("CouchDB refused the link: {reason}")]
    Refused { status: u16, reason: String },
    #[error(transparent)]
    Couch(CouchError),
    #[error("no free ID found after {MAX_ATTEMPTS} attempts")]
    NoFreeId,
}

/// Stores `{url, inactive: false, expires?}` under the first ID from `ids` that has never been
/// used, and returns it. An existing ID is never overwritten (a `PUT` without `_rev` gets 409),
/// and a deleted one is skipped: its short URL may be printed somewhere.
pub async fn run(
    editor: &CouchClient,
    url: &str,
    expires: Option<&str>,
    ids: impl IntoIterator<Item = LinkId>,
) -> Result<LinkId, CreateError> {
    let mut doc = json!({"url": url, "inactive": false});
    if let Some(expires) = expires {
        doc["expires"] = json!(expires);
    }
    for id in ids.into_iter().take(MAX_ATTEMPTS) {
        if ever_used(editor, &id).await? {
            continue;
        }
        match editor.create_doc(id.as_str(), &doc).await {
            Ok(Created::Stored(_)) => return Ok(id),
            Ok(Created::Conflict) => continue,
            Err(CouchError::Refused { status, reason, .. }) => return Err(CreateError::Refused { status, reason }),
            Err(e) => return Err(CreateError::Couch(e)),
        }
    }
    Err(CreateError::NoFreeId)
}

/// Whether `id` exists or existed: `_all_docs` lists deleted documents with `deleted: true`
/// where a plain GET says only "not found" (docs.couchdb.org, `/{db}/_all_docs` with `keys`).
async fn ever_used(editor: &CouchClient, id: &LinkId) -> Result<bool, CreateError> {
    let path = editor.db_relative(&format!("_all_docs?keys=[%22{id}%22]"));
    let listing = editor.get_json(&path).await.map_err(|e| match e {
        CouchError::Refused { status, reason, .. } => CreateError::Refused { status, reason },
        e => CreateError::Couch(e),
    })?;
    let row = listing.as_ref().and_then(|l| l["rows"].get(0)).cloned().unwrap_or(Value::Null);
    Ok(row.get("value").is_some())
}
