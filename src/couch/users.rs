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

impl CouchClient {
    /// Who CouchDB takes this client's credentials for (docs.couchdb.org, `GET /_session`).
    pub async fn session(&self) -> Result<Session, CouchError> {
        Ok(self.get::<SessionBody>(&self.server("_session")).await?.user_ctx)
    }

    /// The `_users` document of account `name`, if there is one (admin only).
    pub async fn user_doc(&self, name: &str) -> Result<Option<Value>, CouchError> {
        self.get_optional(&self.user_url(name)).await
    }

    /// Creates or replaces (with `rev`) the account `name` with exactly `roles`.
    pub async fn put_user(
        &self,
        name: &str,
        password: &str,
        roles: &[&str],
        rev: Option<&Value>,
    ) -> Result<(), CouchError> {
        let mut doc =
            json!({"_id": user_doc_id(name), "name": name, "type": "user", "roles": roles, "password": password});
        if let Some(rev) = rev {
            doc["_rev"] = rev.clone();
        }
        self.put(&self.user_url(name), &doc).await.map(drop)
    }
}
