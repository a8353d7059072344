//! `couchlink setup`: makes a CouchDB server ready for couchlink, idempotently (contracts §2, §7).

use std::fmt;

use serde_json::{json, Value};

use crate::couch::{segment, CouchClient, CouchError};

/// The design document's ID in the links database.
pub const DESIGN_DOC_ID: &str = "_design/couchlink";
/// The validation function, reviewed as a plain file under `couchdb/`.
const VALIDATE_DOC_UPDATE: &str = include_str!("../couchdb/validate_doc_update.js");
/// The links database's `_security` object, as a plain file under `couchdb/`.
const SECURITY: &str = include_str!("../couchdb/security.json");
/// The role the proxy's account gets: read, never write (the VDU refuses it).
pub const READER_ROLE: &str = "reader";

/// What one setup step did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Created,
    Updated,
    Unchanged,
    Skipped,
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Step::Created => "created",
            Step::Updated => "updated",
            Step::Unchanged => "unchanged",
            Step::Skipped => "skipped",
        })
    }
}

/// What setup did, step by step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    pub database: Step,
    pub security: Step,
    pub design: Step,
    pub reader: Step,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "database: {}\n_security: {}\ndesign document: {}\nreader account: {}",
            self.database, self.security, self.design, self.reader
        )
    }
}

/// The proxy's read-only account, to create or update.
#[derive(Debug, Clone)]
pub struct Reader {
    pub name: String,
    pub password: String,
}

/// Why setup stopped.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("setup needs CouchDB admin credentials; {0}")]
    NotAdmin(String),
    #[error(transparent)]
    Couch(#[from] CouchError),
}

/// The validation function as stored: the file without its leading comment lines, since
/// CouchDB compiles the stored source as one function expression.
pub fn validate_doc_update_source() -> String {
    VALIDATE_DOC_UPDATE.lines().skip_while(|l| l.starts_with("//")).collect::<Vec<_>>().join("\n").trim().to_owned()
}

/// The `_security` object couchlink wants.
pub fn security_object() -> Value {
    serde_json::from_str(SECURITY).expect("couchdb/security.json is valid JSON")
}

/// Creates what is missing and updates what differs; touches nothing that is already right,
/// so it is safe to run on every start. `admin` must hold server-admin credentials.
pub async fn run(admin: &CouchClient, reader: Option<&Reader>) -> Result<Report, SetupError> {
    ensure_admin(admin).await?;
    // CouchDB 3 single-node creates _users itself; a bare cluster may not have it yet.
    put_if_missing(admin, "_users").await?;
    let database = put_if_missing(admin, &admin.db_relative("")).await?;
    let security = put_if_different(admin, &admin.db_relative("_security"), security_object()).await?;
    let design = put_if_different(
        admin,
        &admin.db_relative(DESIGN_DOC_ID),
        json!({"language": "javascript", "validate_doc_update": validate_doc_update_source()}),
    )
    .await?;
    let reader = match reader {
        Some(reader) => ensure_reader(admin, reader).await?,
        None => Step::Skipped,
    };
    Ok(Report { database, security, design, reader })
}

async fn ensure_admin(admin: &CouchClient) -> Result<(), SetupError> {
    let session = admin.session().await?;
    if session.has_role("_admin") {
        return Ok(());
    }
    let name = session.name.unwrap_or_else(|| "anonymous".into());
    Err(SetupError::NotAdmin(format!("CouchDB knows the given account as {name:?}, which is not a server admin")))
}

async fn put_if_missing(admin: &CouchClient, path: &str) -> Result<Step, SetupError> {
    if admin.get_json(path).await?.is_some() {
        return Ok(Step::Unchanged);
    }
    match admin.put_json(path, &json!({})).await {
        Ok(_) => Ok(Step::Created),
        // Created by someone else meanwhile.
        Err(CouchError::Refused { status: 412, .. }) => Ok(Step::Unchanged),
        Err(e) => Err(e.into()),
    }
}

/// Writes `wanted` at `path` unless every field of it is already there as wanted.
async fn put_if_different(admin: &CouchClient, path: &str, mut wanted: Value) -> Result<Step, SetupError> {
    let current = admin.get_json(path).await?;
    let step = match &current {
        Some(doc) if wanted.as_object().unwrap().iter().all(|(k, v)| doc.get(k) == Some(v)) => {
            return Ok(Step::Unchanged)
        }
        // A fresh database's `_security` reads as `{}`: that is "missing", not "different".
        Some(doc) if doc.as_object().is_some_and(|o| o.is_empty()) => Step::Created,
        Some(_) => Step::Updated,
        None => Step::Created,
    };
    if let Some(rev) = current.as_ref().and_then(|d| d.get("_rev")) {
        wanted["_rev"] = rev.clone();
    }
    admin.put_json(path, &wanted).await?;
    Ok(step)
}

/// Makes sure `reader` can log in with exactly the `reader` role. Two setups racing (two
/// proxies starting together) meet a 409 on the user document: the second one looks again.
async fn ensure_reader(admin: &CouchClient, reader: &Reader) -> Result<Step, SetupError> {
    match write_reader(admin, reader).await {
        Err(SetupError::Couch(CouchError::Refused { status: 409, .. })) => write_reader(admin, reader).await,
        other => other,
    }
}

async fn write_reader(admin: &CouchClient, reader: &Reader) -> Result<Step, SetupError> {
    let as_reader = admin.with_credentials(&reader.name, &reader.password);
    if let Ok(session) = as_reader.session().await {
        if session.name.as_deref() == Some(reader.name.as_str()) && session.roles == [READER_ROLE] {
            return Ok(Step::Unchanged);
        }
    }
    let path = format!("_users/{}", segment(&format!("org.couchdb.user:{}", reader.name)));
    let existing = admin.get_json(&path).await?;
    let mut doc = json!({"_id": format!("org.couchdb.user:{}", reader.name), "name": reader.name, "type": "user", "roles": [READER_ROLE], "password": reader.password});
    if let Some(rev) = existing.as_ref().and_then(|d| d.get("_rev")) {
        doc["_rev"] = rev.clone();
    }
    admin.put_json(&path, &doc).await?;
    Ok(if existing.is_some() { Step::Updated } else { Step::Created })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_function_is_the_file_without_its_header() {
        let source = validate_doc_update_source();
        assert!(source.starts_with("function (newDoc, oldDoc, userCtx, secObj) {"), "{source}");
        assert!(source.ends_with('}'));
    }

    #[test]
    fn security_gives_members_the_reader_and_editor_roles() {
        assert_eq!(security_object()["members"]["roles"], json!(["reader", "editor"]));
    }
}
