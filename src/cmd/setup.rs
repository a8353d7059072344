//! `couchlink setup`: makes a CouchDB server ready for couchlink, idempotently (README, "Who may
//! do what").

use std::fmt;

use clap::Args;
use serde_json::{json, Value};

use super::{BadCredentials, CouchArgs};
use crate::couch::{CouchClient, CouchError};

/// The design document's name in the links database (`_design/couchlink`).
pub const DESIGN_DOC: &str = "couchlink";
/// The validation function, reviewed as a plain file under `couchdb/`.
const VALIDATE_DOC_UPDATE: &str = include_str!("../../couchdb/validate_doc_update.js");
/// The links database's `_security` object, as a plain file under `couchdb/`.
const SECURITY: &str = include_str!("../../couchdb/security.json");
/// The role the proxy's account gets: read, never write (the validation refuses it).
pub const READER_ROLE: &str = "reader";

/// Flags of `couchlink setup`.
#[derive(Debug, Clone, Args)]
#[command(mut_arg("couchdb_user", |a| a.help("A CouchDB server admin account (setup creates databases and accounts)")))]
pub struct SetupArgs {
    #[command(flatten)]
    #[allow(missing_docs)]
    pub couch: CouchArgs,
    /// Name of the proxy's read-only account that setup creates or updates.
    #[arg(long, env = "COUCHLINK_READER_USER", default_value = "couchlink-reader")]
    pub reader_user: String,
    /// Password of that account (without it, the account is left alone). As a flag it is
    /// visible in the process list: prefer the environment variable or --reader-password-file.
    #[arg(long, env = "COUCHLINK_READER_PASSWORD", hide_env_values = true)]
    pub reader_password: Option<String>,
    /// A file holding that password; one trailing newline is ignored.
    #[arg(long, env = "COUCHLINK_READER_PASSWORD_FILE", value_parser = super::SecretFile::read, conflicts_with = "reader_password")]
    pub reader_password_file: Option<super::SecretFile>,
}

impl SetupArgs {
    /// Runs setup and prints what it did, one line per step.
    pub fn execute(self) -> Result<(), SetupError> {
        let admin = CouchClient::new(&self.couch.into())?;
        let password = self.reader_password.or(self.reader_password_file.map(|f| f.secret));
        let reader = password.map(|password| Reader { name: self.reader_user, password });
        let report = super::current_thread_runtime()
            .map_err(SetupError::Runtime)?
            .block_on(run(&admin, reader.as_ref()))
            .map_err(|e| match &e {
                SetupError::Couch(CouchError::Refused { status, reason, .. }) => {
                    BadCredentials::of(&admin, *status, reason).map_or(e, SetupError::Credentials)
                }
                _ => e,
            })?;
        println!("{report}");
        Ok(())
    }
}

/// What one setup step did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// It did not exist; now it does.
    Created,
    /// It existed but differed; now it is as couchlink wants it.
    Updated,
    /// It was already right; nothing was written.
    Unchanged,
    /// Not asked for (no reader password given).
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
    /// The links database.
    pub database: Step,
    /// Its `_security` object.
    pub security: Step,
    /// The design document holding the validation function.
    pub design: Step,
    /// The proxy's read-only account.
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
    /// Account name.
    pub name: String,
    /// Its password.
    pub password: String,
}

/// Why setup stopped.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// The credentials given are not a server admin's.
    #[error(
        "setup needs CouchDB admin credentials; CouchDB knows the given account as {0:?}, which is not a server admin"
    )]
    NotAdmin(String),
    /// CouchDB refused the account.
    #[error(transparent)]
    Credentials(BadCredentials),
    /// CouchDB refused or could not be reached.
    #[error("setup failed")]
    Couch(#[from] CouchError),
    /// The async runtime could not start.
    #[error("cannot start the async runtime")]
    Runtime(#[source] std::io::Error),
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
///
/// A database always has a `_security` object (CouchDB 3 gives a new one an admin-only
/// default, pouchdb-server an empty one), so on a database this run created, `_security` is
/// reported `created` with it; on an existing one, `updated` or `unchanged`.
pub async fn run(admin: &CouchClient, reader: Option<&Reader>) -> Result<Report, SetupError> {
    ensure_admin(admin).await?;
    // CouchDB 3 single-node creates _users itself; a bare cluster may not have it yet.
    admin.ensure_database("_users").await?;
    let created = admin.ensure_database(admin.database()).await?;
    let database = if created { Step::Created } else { Step::Unchanged };

    let current = admin.security().await?;
    let security = match reconcile(Some(&current), security_object()) {
        None => Step::Unchanged,
        Some(wanted) => {
            admin.put_security(&wanted).await?;
            if created {
                Step::Created
            } else {
                Step::Updated
            }
        }
    };

    let current = admin.design_doc(DESIGN_DOC).await?;
    let wanted = json!({"language": "javascript", "validate_doc_update": validate_doc_update_source()});
    let design = match reconcile(current.as_ref(), wanted) {
        None => Step::Unchanged,
        Some(wanted) => {
            admin.put_design_doc(DESIGN_DOC, &wanted).await?;
            if current.is_some() {
                Step::Updated
            } else {
                Step::Created
            }
        }
    };

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
    Err(SetupError::NotAdmin(session.name.unwrap_or_else(|| "anonymous".into())))
}

/// What to write so that `current` holds every field of `wanted` as wanted (`None`: nothing,
/// it already does), carrying `current`'s `_rev` so the write replaces it.
fn reconcile(current: Option<&Value>, mut wanted: Value) -> Option<Value> {
    let fields = wanted.as_object().expect("wanted documents are objects");
    if let Some(current) = current {
        if fields.iter().all(|(k, v)| current.get(k) == Some(v)) {
            return None;
        }
        if let Some(rev) = current.get("_rev") {
            wanted["_rev"] = rev.clone();
        }
    }
    Some(wanted)
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
    let existing = admin.user_doc(&reader.name).await?;
    let rev = existing.as_ref().and_then(|d| d.get("_rev"));
    admin.put_user(&reader.name, &reader.password, &[READER_ROLE], rev).await?;
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

    #[test]
    fn reconcile_writes_only_what_differs_and_keeps_the_revision() {
        let wanted = json!({"a": 1, "b": [2]});
        assert_eq!(reconcile(Some(&json!({"_rev": "1-x", "a": 1, "b": [2], "extra": true})), wanted.clone()), None);
        assert_eq!(
            reconcile(Some(&json!({"_rev": "1-x", "a": 9})), wanted.clone()),
            Some(json!({"_rev": "1-x", "a": 1, "b": [2]}))
        );
        assert_eq!(reconcile(None, wanted.clone()), Some(wanted));
    }
}
