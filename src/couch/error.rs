//! What can go wrong talking to CouchDB: one error for every call of the client, CouchDB's own
//! words kept where it answered.

use std::time::Duration;

/// What went wrong talking to CouchDB.
#[derive(Debug, thiserror::Error)]
pub enum CouchError {
    /// The configured server URL cannot be used.
    #[error("bad CouchDB URL {url:?}")]
    BadUrl {
        /// The URL as configured.
        url: String,
        /// Why it does not parse.
        #[source]
        source: url::ParseError,
    },
    /// The HTTP client could not be built (TLS backend, say).
    #[error("cannot set up an HTTP client")]
    Client(#[source] reqwest::Error),
    /// No answer: connection refused, timed out, reset.
    #[error("cannot reach CouchDB at {url}")]
    Unreachable {
        /// The server asked.
        url: String,
        /// What the connection did.
        #[source]
        source: reqwest::Error,
    },
    /// CouchDB answered with an error status and its JSON `{"error","reason"}` body.
    #[error("CouchDB refused ({status}): {error}: {reason}")]
    Refused {
        /// The HTTP status.
        status: u16,
        /// CouchDB's `error` word (`not_found`, `forbidden`...).
        error: String,
        /// CouchDB's `reason`, meant for people.
        reason: String,
    },
    /// CouchDB's answer broke off while it was read.
    #[error("CouchDB's answer from {url} broke off")]
    Read {
        /// The resource read.
        url: String,
        /// What the connection did.
        #[source]
        source: reqwest::Error,
    },
    /// CouchDB answered something couchlink cannot read.
    #[error("unexpected answer from CouchDB at {url}: {body}")]
    Decode {
        /// The resource read.
        url: String,
        /// The start of what it said.
        body: String,
        /// Why it does not parse.
        #[source]
        source: serde_json::Error,
    },
    /// A feed sent nothing, not even a heartbeat, for this long.
    #[error("no data or heartbeat for {0:?}")]
    Stalled(Duration),
    /// Not asked: CouchDB refused this account's password, which has not changed since.
    #[error("CouchDB refused the account {user} ({said}); not asked again until its password changes (SIGHUP reads the password file again)")]
    AccountRefused {
        /// The account.
        user: String,
        /// What CouchDB said when it refused it.
        said: String,
    },
}

impl CouchError {
    /// The HTTP status CouchDB answered with, if it answered.
    pub fn status(&self) -> Option<u16> {
        match self {
            CouchError::Refused { status, .. } => Some(*status),
            CouchError::AccountRefused { .. } => Some(401),
            _ => None,
        }
    }

    /// CouchDB's `reason`, meant for people (a `validate_doc_update` refusal, say).
    pub fn reason(&self) -> Option<&str> {
        match self {
            CouchError::Refused { reason, .. } => Some(reason),
            _ => None,
        }
    }

    /// Whether CouchDB could not be asked at all (as opposed to saying no).
    pub fn is_unreachable(&self) -> bool {
        matches!(self, CouchError::Unreachable { .. } | CouchError::Stalled(_))
    }
}
