//! Accounts: who CouchDB takes a client's credentials for (`_session`), and the `_users`
//! documents `setup` writes.

use serde::Deserialize;
use serde_json::{json, Value};

use super::{CouchClient, CouchError};

/// Who CouchDB takes the client's credentials for (`GET /_session`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct Session {
    /// The account name; `None` for anonymous.
    pub name: Option<String>,
    /// Its roles; server admins have `_admin`.
    pub roles: Vec<String>,
}

impl Session {
    /// Whether the account has `role`.
    pub fn has_role(&self, role: &str) -> bool {
        self.roles.iter().any(|r| r == role)
    }
}

#[derive(Deserialize)]
struct SessionBody {
    #[serde(rename = "userCtx")]
    user_ctx: Session,
}

/// The `_users` document ID of an account.
pub(super) fn user_doc_id(name: &str) -> String {
    format!("org.couchdb.user:{name}")
}

/// What setup reads of an account's `_users` document: the revision to replace and the roles it
/// holds. Nothing else is written back: [`CouchClient::put_user`] writes the whole document.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct UserDoc {
    /// The revision, to replace it.
    #[serde(rename = "_rev")]
    pub rev: String,
    /// Its roles, for every database (CouchDB's `_users` validation keeps them strings).
    #[serde(default)]
    pub roles: Vec<String>,
}

impl CouchClient {
    /// Who CouchDB takes this client's credentials for (docs.couchdb.org, `GET /_session`).
    pub async fn session(&self) -> Result<Session, CouchError> {
        Ok(self.get::<SessionBody>(&self.server("_session")).await?.user_ctx)
    }

    /// The `_users` document of account `name`, if there is one (admin only).
    pub async fn user_doc(&self, name: &str) -> Result<Option<UserDoc>, CouchError> {
        self.get_optional(&self.user_url(name)).await
    }

    /// Creates or replaces (with `rev`) the account `name` with exactly `roles`.
    pub async fn put_user(
        &self,
        name: &str,
        password: &str,
        roles: &[&str],
        rev: Option<&str>,
    ) -> Result<(), CouchError> {
        let mut doc =
            json!({"_id": user_doc_id(name), "name": name, "type": "user", "roles": roles, "password": password});
        if let Some(rev) = rev {
            doc["_rev"] = Value::from(rev);
        }
        self.put(&self.user_url(name), &doc).await.map(drop)
    }
}
