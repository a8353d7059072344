//! `couchlink setup`: makes a CouchDB server ready for couchlink, idempotently (docs/reference.md, "Who
//! may do what").

use std::fmt;

use clap::Args;
use serde_json::{json, Value};

use super::{BadCredentials, CouchArgs, RoleArgs};
use crate::couch::{CouchClient, CouchError, DesignDoc};
use crate::domain::{Companion, CompanionDb, InvalidRole, Roles, SHARED_EDITOR, SHARED_READER};

pub use crate::design::{console_design, validate_doc_update_source, CONSOLE_DESIGN_DOC, DESIGN_DOC};
use crate::design::{import_design, IMPORT_DESIGN_DOC};

/// Flags of `couchlink setup`.
#[derive(Debug, Clone, Args)]
#[command(mut_arg("couchdb_user", |a| a.help("A CouchDB server admin account (setup creates databases and accounts)")))]
pub struct SetupArgs {
    #[command(flatten)]
    #[allow(missing_docs)]
    pub couch: CouchArgs,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub on: super::DomainChoice,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub roles: RoleArgs,
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
    /// Stop admitting the roles "reader" and "editor" that every database shared before roles
    /// belonged to one database (once every account has this database's own roles).
    #[arg(long)]
    pub drop_shared_roles: bool,
    /// Replace the database's _security outright instead of adding to it (drops members and
    /// admins other tools or people added).
    #[arg(long)]
    pub replace_security: bool,
    /// The clicks database, where proxies write live counts [default: <db>_clicks]; `off`: none.
    #[arg(long, env = "COUCHLINK_CLICKS_DB", value_parser = CompanionDb::parse)]
    pub clicks_db: Option<CompanionDb>,
    /// The history database, where proxies record every change to a link [default:
    /// <db>_history]; `off`: none.
    #[arg(long, env = "COUCHLINK_HISTORY_DB", value_parser = CompanionDb::parse)]
    pub history_db: Option<CompanionDb>,
}

impl SetupArgs {
    /// Runs setup and prints what it did, one line per step.
    pub fn execute(self) -> Result<(), SetupError> {
        let roles = self.roles.roles(&self.couch.db)?;
        let db = self.couch.db.clone();
        let admin = CouchClient::new(&self.couch.into())?;
        let password = self.reader_password.or(self.reader_password_file.map(|f| f.secret));
        let reader = password.map(|password| Reader { name: self.reader_user, password });
        let (clicks_db, history_db) =
            crate::domain::companions(&db, &self.clicks_db.unwrap_or_default(), &self.history_db.unwrap_or_default())?;
        let options = SetupOptions {
            roles,
            clicks_db,
            history_db,
            drop_shared_roles: self.drop_shared_roles,
            replace_security: self.replace_security,
        };
        let report = super::current_thread_runtime()
            .map_err(SetupError::Runtime)?
            .block_on(run(&admin, reader.as_ref(), &options))
            .map_err(|e| match &e {
                SetupError::Couch(CouchError::Refused { status, reason, .. }) => {
                    BadCredentials::of(&admin, *status, reason).map_or(e, SetupError::Credentials)
                }
                _ => e,
            })?;
        println!("{report}");
        if !report.shared_roles.is_empty() {
            tracing::warn!("{}", report.shared_roles_warning(admin.database()));
        }
        Ok(())
    }
}

/// How setup prepares a database.
#[derive(Debug, Clone)]
pub struct SetupOptions {
    /// The database's reader, editor and proxy roles.
    pub roles: Roles,
    /// The clicks database that goes with it (`None`: counting is off, none is made).
    pub clicks_db: Option<String>,
    /// The history database that goes with it (`None`: none is made, nothing is recorded).
    pub history_db: Option<String>,
    /// Remove the shared `reader`/`editor` roles from `_security` and the validation.
    pub drop_shared_roles: bool,
    /// Write `_security` as couchlink wants it, dropping everything else.
    pub replace_security: bool,
}

impl SetupOptions {
    /// The default roles of `db`, nothing dropped or replaced.
    pub fn for_database(db: &str) -> SetupOptions {
        let roles = Roles::of_database(db, None, None).expect("derived roles are valid");
        SetupOptions {
            roles,
            clicks_db: Some(Companion::Clicks.beside(db)),
            history_db: Some(Companion::History.beside(db)),
            drop_shared_roles: false,
            replace_security: false,
        }
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
    /// What was added to or removed from `_security`, one entry each (`+members.roles "x"`).
    pub security_changes: Vec<String>,
    /// The shared role names `_security` still admits (see [`SetupOptions::drop_shared_roles`]).
    pub shared_roles: Vec<String>,
    /// The design document holding the validation function.
    pub design: Step,
    /// The console's design document (search and newest-first views).
    pub console: Step,
    /// The import's index (imported links by source).
    pub import: Step,
    /// The clicks database, its `_security` and its design document (validation and views),
    /// by name; `None` when counting is off.
    pub clicks: Option<(String, Step, Step, Step)>,
    /// The history database, its `_security` and its design document, when asked for.
    pub history: Option<(String, Step, Step, Step)>,
    /// The proxy's read-only account.
    pub reader: Step,
}

impl Report {
    /// What an admin should know while the shared roles are admitted, and how to stop it.
    pub fn shared_roles_warning(&self, db: &str) -> String {
        format!(
            "{db} still admits the shared roles {}: any account holding them on this CouchDB can read {db}{}; \
             once its accounts have {db}'s own roles, run `couchlink setup --drop-shared-roles`",
            self.shared_roles.iter().map(|r| format!("{r:?}")).collect::<Vec<_>>().join(" and "),
            if self.shared_roles.iter().any(|r| r == SHARED_EDITOR) { " and change its links" } else { "" },
        )
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "database: {}\n_security: {}", self.database, self.security)?;
        if !self.security_changes.is_empty() {
            write!(f, " ({})", self.security_changes.join(", "))?;
        }
        write!(
            f,
            "\ndesign document: {}\nconsole's views: {}\nimport's index: {}",
            self.design, self.console, self.import
        )?;
        if let Some((name, database, security, design)) = &self.clicks {
            write!(f, "\nclicks database {name}: {database}, _security: {security}, design document: {design}")?;
        }
        if let Some((name, database, security, design)) = &self.history {
            write!(f, "\nhistory database {name}: {database}, _security: {security}, design document: {design}")?;
        }
        write!(f, "\nreader account: {}", self.reader)
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
    /// A role name CouchDB would not take.
    #[error(transparent)]
    Role(#[from] InvalidRole),
    /// A companion database that cannot be one.
    #[error(transparent)]
    Companion(#[from] crate::domain::CompanionError),
    /// A database setup would make into what another already is: a links database into a
    /// companion, or a companion into a links database.
    #[error(
        "{db} is {is}; setup would make it {would} too (check COUCHLINK_DB, COUCHLINK_CLICKS_DB, COUCHLINK_HISTORY_DB)"
    )]
    Taken {
        /// The database.
        db: String,
        /// What it already is.
        is: &'static str,
        /// What setup would make it.
        would: &'static str,
    },
    /// CouchDB refused or could not be reached.
    #[error("setup failed")]
    Couch(#[from] CouchError),
    /// The async runtime could not start.
    #[error("cannot start the async runtime")]
    Runtime(#[source] std::io::Error),
}

/// The `_security` object couchlink asks for on a fresh database with `roles`.
pub fn security_object(roles: &Roles) -> Value {
    json!({"admins": {"names": [], "roles": []}, "members": {"names": [], "roles": [roles.reader, roles.editor]}})
}

/// What setup writes to `_security`: `current` with `roles` added as members (and the shared
/// roles taken out, when asked), everything else kept; or, to replace it, exactly
/// [`security_object`]. Also says what changed and which shared roles remain admitted.
pub fn plan_security(current: &Value, options: &SetupOptions) -> SecurityPlan {
    let wanted = if options.replace_security {
        security_object(&options.roles)
    } else {
        let mut merged = completed(current);
        let roles = merged["members"]["roles"].as_array_mut().expect("made an array above");
        if options.drop_shared_roles {
            roles.retain(|r| r != SHARED_READER && r != SHARED_EDITOR);
        }
        for role in [&options.roles.reader, &options.roles.editor] {
            if !roles.iter().any(|r| r == role) {
                roles.push(json!(role));
            }
        }
        merged
    };
    let mut changes = Vec::new();
    for part in ["admins", "members"] {
        for list in ["names", "roles"] {
            let items = |v: &Value| -> Vec<Value> { v[part][list].as_array().cloned().unwrap_or_default() };
            let (before, after) = (items(current), items(&wanted));
            changes.extend(after.iter().filter(|v| !before.contains(v)).map(|v| format!("added {part}.{list} {v}")));
            changes.extend(before.iter().filter(|v| !after.contains(v)).map(|v| format!("removed {part}.{list} {v}")));
        }
    }
    let admitted = wanted["members"]["roles"].as_array().cloned().unwrap_or_default();
    let shared_roles = [SHARED_READER, SHARED_EDITOR]
        .into_iter()
        .filter(|r| {
            admitted.iter().any(|a| a == r) && ![&options.roles.reader, &options.roles.editor].contains(&&r.to_string())
        })
        .map(str::to_owned)
        .collect();
    SecurityPlan { wanted, changes, shared_roles }
}

/// What [`plan_security`] decided.
#[derive(Debug, Clone, PartialEq)]
pub struct SecurityPlan {
    /// The object to write (unchanged: nothing to write).
    pub wanted: Value,
    /// What differs from the current object, one entry each.
    pub changes: Vec<String>,
    /// The shared roles still admitted.
    pub shared_roles: Vec<String>,
}

/// Creates what is missing and updates what differs; touches nothing that is already right,
/// so it is safe to run on every start. `admin` must hold server-admin credentials.
///
/// A database always has a `_security` object (CouchDB 3 gives a new one an admin-only
/// default, pouchdb-server an empty one), so on a database this run created, `_security` is
/// reported `created` with it; on an existing one, `updated` or `unchanged`.
pub async fn run(admin: &CouchClient, reader: Option<&Reader>, options: &SetupOptions) -> Result<Report, SetupError> {
    ensure_admin(admin).await?;
    refuse_taken(admin, options).await?;
    // CouchDB 3 single-node creates _users itself; a bare cluster may not have it yet.
    admin.ensure_database("_users").await?;
    let created = admin.ensure_database(admin.database()).await?;
    let database = if created { Step::Created } else { Step::Unchanged };
    // What tells this database from a later one of the same name: a proxy serves a cache
    // snapshot only of the database whose identity it recorded.
    admin.database_identity().await?;

    let current = admin.security().await?;
    let plan = plan_security(&current, options);
    let security = if plan.changes.is_empty() && current.is_object() {
        Step::Unchanged
    } else {
        admin.put_security(&plan.wanted).await?;
        if created {
            Step::Created
        } else {
            Step::Updated
        }
    };

    // Editors of this database, and holders of the shared role while it is still admitted.
    let mut editor_roles = vec![options.roles.editor.as_str()];
    if plan.shared_roles.iter().any(|r| r == SHARED_EDITOR) {
        editor_roles.push(SHARED_EDITOR);
    }
    let wanted = json!({"language": "javascript", "validate_doc_update": validate_doc_update_source(&editor_roles)});
    let design = ensure_design(admin, DESIGN_DOC, wanted).await?;
    let console = ensure_design(admin, CONSOLE_DESIGN_DOC, console_design()).await?;
    let import = ensure_design(admin, IMPORT_DESIGN_DOC, import_design()).await?;

    // Each companion admits the links database's readers and editors (and the shared roles
    // while it does) and its own writer role; only that role writes there (an editor also
    // records their own bulk change in the history).
    let roles = &options.roles;
    fn admitted<'a>(roles: &'a Roles, shared: &'a [String], writer: &'a str) -> Vec<&'a str> {
        let mut members = vec![roles.reader.as_str(), roles.editor.as_str(), writer];
        members.extend(shared.iter().map(String::as_str));
        members
    }
    let members = |writer| admitted(roles, &plan.shared_roles, writer);
    let clicks = match &options.clicks_db {
        Some(name) => Some(
            ensure_companion(
                &admin.for_database(name),
                &members(&roles.proxy),
                options.replace_security,
                (crate::clicks::doc::DESIGN_DOC, crate::clicks::doc::design(&[&roles.proxy])),
            )
            .await?,
        ),
        None => None,
    };
    let history = match &options.history_db {
        Some(name) => Some(
            ensure_companion(
                &admin.for_database(name),
                &members(&roles.recorder),
                options.replace_security,
                (crate::history::DESIGN_DOC, crate::history::design(&[&roles.recorder], &editor_roles)),
            )
            .await?,
        ),
        None => None,
    };

    // The proxy's account writes counts and records history where those databases exist.
    let mut extra: Vec<&str> = Vec::new();
    extra.extend(options.clicks_db.as_ref().map(|_| options.roles.proxy.as_str()));
    extra.extend(options.history_db.as_ref().map(|_| options.roles.recorder.as_str()));
    let reader = match reader {
        Some(reader) => ensure_reader(admin, reader, &options.roles, &extra).await?,
        None => Step::Skipped,
    };
    Ok(Report {
        database,
        security,
        security_changes: plan.changes,
        shared_roles: plan.shared_roles,
        design,
        console,
        import,
        clicks,
        history,
        reader,
    })
}

/// A companion database (docs/reference.md, "Live counts" and "History"): made if missing; its
/// `_security` admits `members` (the links database's readers and editors, the shared roles
/// while the links database admits them, and the companion's own writers), keeping what admins
/// added; its design document `design` (`design_doc`: its validation, so that only the
/// companion's writers write, and its views) written where it differs.
async fn ensure_companion(
    companion: &CouchClient,
    members: &[&str],
    replace_security: bool,
    (design_doc, design): (&str, Value),
) -> Result<(String, Step, Step, Step), SetupError> {
    let created = companion.ensure_database(companion.database()).await?;
    let database = if created { Step::Created } else { Step::Unchanged };
    let current = companion.security().await?;
    let wanted = merge_member_roles(&current, members, replace_security);
    let security = if wanted == current {
        Step::Unchanged
    } else {
        companion.put_security(&wanted).await?;
        if created {
            Step::Created
        } else {
            Step::Updated
        }
    };
    let design = ensure_design(companion, design_doc, design).await?;
    Ok((companion.database().to_owned(), database, security, design))
}

/// Refuses to set up a database as what another setup made it: the links database where a
/// clicks or history database's design document is, a companion where a links database's
/// validation is. Each one's validation would refuse the other's writes (and a companion's
/// `_security` would let this database's readers read another's links).
async fn refuse_taken(admin: &CouchClient, options: &SetupOptions) -> Result<(), SetupError> {
    let taken = |db: &str, is, would| SetupError::Taken { db: db.to_owned(), is, would };
    for (design, is) in
        [(crate::clicks::doc::DESIGN_DOC, "a clicks database"), (crate::history::DESIGN_DOC, "a history database")]
    {
        if admin.design_doc(design).await?.is_some() {
            return Err(taken(admin.database(), is, "a links database"));
        }
    }
    for (name, would) in [(&options.clicks_db, "a clicks database"), (&options.history_db, "a history database")] {
        let Some(name) = name else { continue };
        if admin.for_database(name).design_doc(DESIGN_DOC).await?.is_some() {
            return Err(taken(name, "a links database", would));
        }
    }
    Ok(())
}

/// Design document `name` made `wanted` (its fields; others an admin added are kept), written
/// only when it differs.
async fn ensure_design(client: &CouchClient, name: &str, wanted: Value) -> Result<Step, SetupError> {
    let current = client.design_doc(name).await?;
    match reconcile(current.as_ref(), wanted) {
        None => Ok(Step::Unchanged),
        Some(wanted) => {
            client.put_design_doc(name, &wanted).await?;
            Ok(if current.is_some() { Step::Updated } else { Step::Created })
        }
    }
}

/// A `_security` object as it is, with `admins` and `members` and their `names` and `roles`
/// lists made where missing (so that roles can be added to them).
fn completed(current: &Value) -> Value {
    let mut merged = if current.is_object() { current.clone() } else { json!({}) };
    for part in ["admins", "members"] {
        if !merged[part].is_object() {
            merged[part] = json!({});
        }
        for list in ["names", "roles"] {
            if !merged[part][list].is_array() {
                merged[part][list] = json!([]);
            }
        }
    }
    merged
}

/// `current` with `roles` among its members' roles (and `admins`/`members` complete), everything
/// else kept; or, to replace, exactly those members and no admins.
fn merge_member_roles(current: &Value, roles: &[&str], replace: bool) -> Value {
    if replace {
        return json!({"admins": {"names": [], "roles": []}, "members": {"names": [], "roles": roles}});
    }
    let mut merged = completed(current);
    let held = merged["members"]["roles"].as_array_mut().expect("made an array above");
    for role in roles {
        if !held.iter().any(|r| r == role) {
            held.push(json!(role));
        }
    }
    merged
}

async fn ensure_admin(admin: &CouchClient) -> Result<(), SetupError> {
    let session = admin.session().await?;
    if session.has_role("_admin") {
        return Ok(());
    }
    Err(SetupError::NotAdmin(session.name.unwrap_or_else(|| "anonymous".into())))
}

/// What to write so that `current` holds every field of `wanted` as wanted (`None`: nothing,
/// it already does): `current` with those fields replaced and its other fields (an admin's
/// `filters`, say) kept, carrying its `_rev` so the write replaces it.
fn reconcile(current: Option<&DesignDoc>, wanted: Value) -> Option<Value> {
    let Some(current) = current else { return Some(wanted) };
    let Value::Object(fields) = wanted else { panic!("wanted documents are objects") };
    if fields.iter().all(|(k, v)| current.fields.get(k) == Some(v)) {
        return None;
    }
    let mut merged = current.fields.clone();
    merged.extend(fields);
    merged.insert("_rev".into(), Value::from(current.rev.as_str()));
    Some(Value::Object(merged))
}

/// Makes sure `reader` can log in and holds this database's reader role (and, with counting
/// on, the `proxy` role that writes counts) but not its editor role; roles it holds for other
/// databases are kept. Two setups racing (two proxies starting together) meet a 409 on the user
/// document: the second one looks again.
async fn ensure_reader(
    admin: &CouchClient,
    reader: &Reader,
    roles: &Roles,
    extra: &[&str],
) -> Result<Step, SetupError> {
    match write_reader(admin, reader, roles, extra).await {
        Err(SetupError::Couch(CouchError::Refused { status: 409, .. })) => {
            write_reader(admin, reader, roles, extra).await
        }
        other => other,
    }
}

/// The roles the reader account should hold, given those it holds: this database's reader role
/// (and `extra`: the proxy's and recorder's) added, its editor role taken away, the rest kept.
fn reader_roles(held: &[String], roles: &Roles, extra: &[&str]) -> Vec<String> {
    let mut wanted: Vec<String> = held.iter().filter(|r| **r != roles.editor).cloned().collect();
    for role in std::iter::once(roles.reader.as_str()).chain(extra.iter().copied()) {
        if !wanted.iter().any(|r| r == role) {
            wanted.push(role.to_owned());
        }
    }
    wanted
}

async fn write_reader(admin: &CouchClient, reader: &Reader, roles: &Roles, extra: &[&str]) -> Result<Step, SetupError> {
    let existing = admin.user_doc(&reader.name).await?;
    let held: Vec<String> = existing.as_ref().map(|d| d.roles.clone()).unwrap_or_default();
    let wanted = reader_roles(&held, roles, extra);
    if existing.is_some() && wanted == held {
        // The roles are right; the password too, if the account can log in with it.
        let as_reader = admin.with_credentials(&reader.name, &reader.password);
        if as_reader.session().await.is_ok_and(|s| s.name.as_deref() == Some(reader.name.as_str())) {
            return Ok(Step::Unchanged);
        }
    }
    let rev = existing.as_ref().map(|d| d.rev.as_str());
    let wanted: Vec<&str> = wanted.iter().map(String::as_str).collect();
    admin.put_user(&reader.name, &reader.password, &wanted, rev).await?;
    Ok(if existing.is_some() { Step::Updated } else { Step::Created })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(drop_shared_roles: bool, replace_security: bool) -> SetupOptions {
        SetupOptions { drop_shared_roles, replace_security, ..SetupOptions::for_database("links") }
    }

    #[test]
    fn stored_function_is_the_file_without_its_header_with_the_roles_written_in() {
        let source = validate_doc_update_source(&["acme:editor", "editor"]);
        assert!(source.starts_with("function (newDoc, oldDoc, userCtx, secObj) {"), "{source}");
        assert!(source.ends_with('}'));
        assert!(source.contains(r#"var EDITOR_ROLES = ["acme:editor","editor"];"#), "{source}");
        assert!(!source.contains("links:editor"));
    }

    #[test]
    fn security_is_merged_keeping_what_others_added() {
        let current = json!({"admins": {"names": ["ops"], "roles": []},
            "members": {"names": ["alice"], "roles": ["staff"]}, "note": "kept"});
        let plan = plan_security(&current, &options(false, false));
        assert_eq!(
            plan.wanted,
            json!({"admins": {"names": ["ops"], "roles": []},
                "members": {"names": ["alice"], "roles": ["staff", "links:reader", "links:editor"]}, "note": "kept"})
        );
        assert_eq!(plan.changes, [r#"added members.roles "links:reader""#, r#"added members.roles "links:editor""#]);
        assert!(plan.shared_roles.is_empty());
        // Run again on the result: nothing to change.
        assert!(plan_security(&plan.wanted, &options(false, false)).changes.is_empty());
    }

    #[test]
    fn shared_roles_stay_admitted_until_dropped_and_replacing_says_what_it_removed() {
        let old = json!({"admins": {"names": [], "roles": []}, "members": {"names": ["alice"], "roles": ["reader", "editor"]}});
        let kept = plan_security(&old, &options(false, false));
        assert_eq!(kept.shared_roles, ["reader", "editor"]);
        let dropped = plan_security(&old, &options(true, false));
        assert!(dropped.shared_roles.is_empty());
        assert_eq!(dropped.wanted["members"]["roles"], json!(["links:reader", "links:editor"]));
        assert!(dropped.changes.contains(&r#"removed members.roles "editor""#.to_owned()), "{:?}", dropped.changes);
        let replaced = plan_security(&old, &options(false, true));
        assert_eq!(replaced.wanted, security_object(&options(false, false).roles));
        assert!(replaced.changes.contains(&r#"removed members.names "alice""#.to_owned()), "{:?}", replaced.changes);
    }

    #[test]
    fn the_reader_keeps_other_databases_roles_but_never_this_ones_editor_role() {
        let roles = Roles::of_database("links", None, None).unwrap();
        let held = ["acme:reader".to_owned(), "links:editor".to_owned()];
        assert_eq!(reader_roles(&held, &roles, &[]), ["acme:reader", "links:reader"]);
        assert_eq!(reader_roles(&["links:reader".to_owned()], &roles, &[]), ["links:reader"]);
        assert_eq!(reader_roles(&held, &roles, &["links:proxy"]), ["acme:reader", "links:reader", "links:proxy"]);
    }

    #[test]
    fn reconcile_writes_only_what_differs_and_keeps_the_revision() {
        let stored = |doc: Value| serde_json::from_value::<DesignDoc>(doc).unwrap();
        let wanted = json!({"a": 1, "b": [2]});
        assert_eq!(
            reconcile(Some(&stored(json!({"_rev": "1-x", "a": 1, "b": [2], "extra": true}))), wanted.clone()),
            None
        );
        assert_eq!(
            reconcile(Some(&stored(json!({"_rev": "1-x", "a": 9}))), wanted.clone()),
            Some(json!({"_rev": "1-x", "a": 1, "b": [2]}))
        );
        assert_eq!(reconcile(None, wanted.clone()), Some(wanted.clone()));
        // What an admin added beside couchlink's fields stays when setup rewrites its own.
        assert_eq!(
            reconcile(Some(&stored(json!({"_rev": "2-y", "a": 9, "filters": {"f": "fn"}}))), wanted),
            Some(json!({"_rev": "2-y", "a": 1, "b": [2], "filters": {"f": "fn"}}))
        );
    }
}
