//! Storing a new link under a fresh short ID, as `couchlink create` and the DIDComm agent do:
//! through CouchDB's HTTP API, as an editor account, never overwriting or reusing an ID.

use crate::couch::{CouchClient, CouchError, Created};
use crate::domain::{LinkId, LinkWrite};

/// How many random IDs to try before giving up (each collision is a 1 in 62^5/n event).
pub const MAX_ATTEMPTS: usize = 20;

/// Why no link was stored.
#[derive(Debug, thiserror::Error)]
pub enum NewLinkError {
    /// CouchDB refused the document; `reason` is its own words (the validation's, for a bad URL,
    /// said with the field it names).
    #[error("CouchDB refused the link: {}", crate::domain::Refusal::parse(.reason))]
    Refused {
        /// The HTTP status.
        status: u16,
        /// CouchDB's reason, meant for people.
        reason: String,
    },
    /// CouchDB could not be asked, or answered something unreadable.
    #[error("cannot store the link")]
    Couch(#[source] CouchError),
    /// Every ID tried was taken.
    #[error("no free ID found after {MAX_ATTEMPTS} attempts")]
    NoFreeId,
}

impl From<CouchError> for NewLinkError {
    fn from(e: CouchError) -> Self {
        match e {
            CouchError::Refused { status, reason, .. } => NewLinkError::Refused { status, reason },
            e => NewLinkError::Couch(e),
        }
    }
}

/// Stores `link` under the first ID from `ids` that has never been used, and returns it. An
/// existing ID is never overwritten (a `PUT` without `_rev` gets 409), and a deleted one is
/// skipped: its short URL may be printed somewhere.
pub async fn store_new(
    editor: &CouchClient,
    link: &LinkWrite,
    ids: impl IntoIterator<Item = LinkId>,
) -> Result<LinkId, NewLinkError> {
    // The writer stated for the history; CouchDB refuses another name than the account's.
    let mut link = link.clone();
    if let Some(edit) = crate::history::edit(editor.account_name().unwrap_or(""), None) {
        link.edit = Some(edit);
    }
    let doc = &link.to_doc();
    for id in ids.into_iter().take(MAX_ATTEMPTS) {
        if editor.ever_used(&id).await? {
            continue;
        }
        match editor.create_doc(&id, doc).await? {
            Created::Stored(_) => return Ok(id),
            Created::Conflict => continue,
        }
    }
    Err(NewLinkError::NoFreeId)
}
