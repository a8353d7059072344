//! The subcommands, one file each, owning its flags and how it runs (its runtime included).
//! Every flag is also an environment variable.

use std::error::Error;

use clap::{Args, Parser, Subcommand};

use crate::couch::{CouchClient, CouchConfig};

#[cfg(feature = "agent")]
pub mod agent;
pub mod bulk;
pub mod clicks;
pub mod console;
pub mod create;
pub mod env_file;
pub mod export;
pub mod history;
pub mod import;
pub mod qr;
pub mod report;
pub mod serve;
pub mod setup;

/// couchlink: short links from CouchDB documents, redirected fast, every request logged.
#[derive(Debug, Parser)]
#[command(name = "couchlink", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// couchlink's subcommands.
// One value, parsed once at start: `serve`'s many flags make it the largest variant, and boxing
// it would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve redirects (with the proxy's read-only CouchDB account).
    Serve(serve::ServeArgs),
    /// Prepare CouchDB (with admin credentials): database, _security, validation, reader account.
    Setup(setup::SetupArgs),
    /// Store a link under a fresh random ID (with editor credentials) and print its short URL.
    Create(create::CreateArgs),
    /// Import links from another shortener's export, or restore couchlink's own (with editor
    /// credentials); safe to run again.
    Import(import::ImportArgs),
    /// Write every link, every field, as JSON lines or CSV (with any account that may read links).
    Export(export::ExportArgs),
    /// Make the smallest QR tag of each short link (PNG, SVG or text; offline unless --check).
    Qr(qr::QrArgs),
    /// Link analytics from the access log files: redirects, visitors, target versions, bots.
    Report(report::ReportArgs),
    /// Live counts per link, as every proxy wrote them to the clicks database (with any account
    /// that may read links).
    Clicks(clicks::ClicksArgs),
    /// Every recorded change to a link: who, when, what changed, and any gap (with any account
    /// that may read links).
    History(history::HistoryArgs),
    /// Put a link back as a recorded version was (with editor credentials), as a new revision.
    Restore(history::RestoreArgs),
    /// One change to many links (by ID, tag or search word), previewed, then written link by
    /// link (with editor credentials); exits 0 only when every link was applied.
    Bulk(bulk::BulkArgs),
    /// Put every link of a bulk change back as it was, sparing links edited since.
    Undo(bulk::UndoArgs),
    /// The console for links, targets, QR tags and clicks in the browser, each user with their
    /// own CouchDB account (no account of its own).
    Console(console::ConsoleArgs),
    /// The DIDComm v2 url-shortener agent ("Shorten URL" protocol) on a listener of its own.
    #[cfg(feature = "agent")]
    Agent(agent::AgentArgs),
}

/// A target given as a flag (`--fallback`, `COUCHLINK_FALLBACK_URL`): it obeys a link's `url`
/// rules.
pub fn target_flag(s: &str) -> Result<String, String> {
    crate::domain::check_target(s).map(|_| s.to_owned()).map_err(|e| e.to_string())
}

/// What any command can fail with, for `main` to print with its causes.
pub type CommandError = Box<dyn Error + Send + Sync + 'static>;

impl Command {
    /// Runs the command to its end.
    pub fn execute(self) -> Result<(), CommandError> {
        use crate::domain::Companion;
        let mut unused = None;
        match self {
            Command::Serve(args) => Ok(args.execute()?),
            Command::Setup(mut args) => {
                args.on.apply(&mut args.couch, &mut unused)?;
                args.on.check_companion(Companion::Clicks, args.clicks_db.as_ref())?;
                args.on.check_companion(Companion::History, args.history_db.as_ref())?;
                Ok(args.execute()?)
            }
            Command::Create(mut args) => {
                args.on.apply(&mut args.couch, &mut args.public_url)?;
                Ok(args.execute()?)
            }
            Command::Import(mut args) => {
                args.on.apply(&mut args.couch, &mut args.public_url)?;
                Ok(args.execute()?)
            }
            Command::Export(mut args) => {
                args.on.apply(&mut args.couch, &mut unused)?;
                Ok(args.execute()?)
            }
            Command::Qr(mut args) => {
                args.on.apply(&mut args.couch, &mut args.public_url)?;
                Ok(args.execute()?)
            }
            Command::Report(args) => Ok(args.execute()?),
            Command::Clicks(mut args) => {
                args.on.apply(&mut args.couch, &mut unused)?;
                args.on.check_companion(Companion::Clicks, args.clicks_db.as_ref())?;
                Ok(args.execute()?)
            }
            Command::History(mut args) => {
                args.on.apply(&mut args.couch, &mut unused)?;
                args.on.check_companion(Companion::History, args.history_db.as_ref())?;
                Ok(args.execute()?)
            }
            Command::Restore(mut args) => {
                args.on.apply(&mut args.couch, &mut unused)?;
                args.on.check_companion(Companion::History, args.history_db.as_ref())?;
                Ok(args.execute()?)
            }
            Command::Bulk(mut args) => {
                args.on.apply(&mut args.couch, &mut unused)?;
                args.on.check_companion(Companion::History, args.history_db.as_ref())?;
                Ok(args.execute()?)
            }
            Command::Undo(mut args) => {
                args.on.apply(&mut args.couch, &mut unused)?;
                args.on.check_companion(Companion::History, args.history_db.as_ref())?;
                Ok(args.execute()?)
            }
            Command::Console(args) => Ok(args.execute()?),
            #[cfg(feature = "agent")]
            Command::Agent(mut args) => {
                args.on.apply(&mut args.couch, &mut args.public_url)?;
                Ok(args.execute()?)
            }
        }
    }

    /// Whether the command runs for long (its log lines then carry timestamps).
    pub fn is_long_running(&self) -> bool {
        matches!(self, Command::Serve(_) | Command::Console(_))
    }
}

/// Where CouchDB is, and as whom to talk to it. Each command says in its own help which
/// account it needs (see their `mut_arg`s).
#[derive(Debug, Clone, Args)]
pub struct CouchArgs {
    /// CouchDB server URL.
    #[arg(long, env = "COUCHLINK_COUCHDB_URL", default_value = "http://127.0.0.1:5984")]
    pub couchdb_url: String,
    /// CouchDB account this command uses.
    #[arg(long, env = "COUCHLINK_COUCHDB_USER")]
    pub couchdb_user: Option<String>,
    /// Password of that account. As a flag it is visible to every local user in the process
    /// list: prefer the environment variable or --couchdb-password-file.
    #[arg(long, env = "COUCHLINK_COUCHDB_PASSWORD", hide_env_values = true)]
    pub couchdb_password: Option<String>,
    /// A file holding that password (a container secret, say); one trailing newline is ignored.
    #[arg(long, env = "COUCHLINK_COUCHDB_PASSWORD_FILE", value_parser = SecretFile::read, conflicts_with = "couchdb_password")]
    pub couchdb_password_file: Option<SecretFile>,
    /// The links database.
    #[arg(long, env = "COUCHLINK_DB", default_value = "links")]
    pub db: String,
}

/// Several short domains, each its own database and public URL (docs/reference.md, "Several
/// domains"); none: one domain, `COUCHLINK_DB` at `COUCHLINK_PUBLIC_URL`.
#[derive(Debug, Clone, Default, Args)]
pub struct DomainArgs {
    /// Several short domains, each its own links database: HOST=DB,HOST=DB (e.g.
    /// 0x1f.ie=links,go.acme.example=acme_links); the Host of a request picks one.
    #[arg(long, env = "COUCHLINK_DOMAINS")]
    pub domains: Option<String>,
    /// A file of domains for longer lists, a line each: HOST DATABASE [PUBLIC_URL] (# comments).
    #[arg(long, env = "COUCHLINK_DOMAINS_FILE")]
    pub domains_file: Option<std::path::PathBuf>,
    /// The domains' public URLs, where not http://HOST: HOST=URL,HOST=URL.
    #[arg(long, env = "COUCHLINK_PUBLIC_URLS")]
    pub public_urls: Option<String>,
}

impl DomainArgs {
    /// The domains named (empty: none).
    pub fn list(&self) -> Result<Vec<crate::domain::Domain>, DomainError> {
        let file = match &self.domains_file {
            Some(path) => {
                Some(std::fs::read_to_string(path).map_err(|why| DomainError::File { path: path.clone(), why })?)
            }
            None => None,
        };
        Ok(crate::domain::parse_domains(self.domains.as_deref(), file.as_deref(), self.public_urls.as_deref())?)
    }

    /// For a command on one domain (`--domain HOST`): its database and public URL, which
    /// replace `couch.db` and `public_url`; without `--domain`, those as given.
    pub fn pick(
        &self,
        domain: Option<&str>,
        couch: &mut CouchArgs,
        public_url: &mut Option<crate::domain::PublicUrl>,
    ) -> Result<(), DomainError> {
        let Some(domain) = domain else { return Ok(()) };
        let host = crate::domain::Host::parse(domain).map_err(DomainError::Host)?;
        let domains = self.list()?;
        let found = domains.into_iter().find(|d| d.host == host).ok_or(DomainError::Unknown(host))?;
        couch.db = found.db;
        *public_url = Some(found.public_url);
        Ok(())
    }
}

/// `--domain HOST`: a command on one of several short domains, with that domain's database and
/// public URL.
#[derive(Debug, Clone, Default, Args)]
pub struct DomainChoice {
    /// With several domains (COUCHLINK_DOMAINS): the one to work on (its database and public URL).
    #[arg(long = "domain", value_name = "HOST")]
    pub domain: Option<String>,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub domains: DomainArgs,
}

/// A `--domain` that names no configured domain, or a list that cannot be read. Each says
/// all in its message (no source): `main` prints it as it is.
#[derive(Debug, thiserror::Error)]
pub enum DomainError {
    /// The domains file cannot be read.
    #[error("cannot read the domains file {}: {why}", path.display())]
    File {
        /// The file's path.
        path: std::path::PathBuf,
        /// Why it cannot be read.
        why: std::io::Error,
    },
    /// The domains named cannot be used.
    #[error(transparent)]
    List(#[from] crate::domain::BadDomains),
    /// `--domain` is no host name.
    #[error(transparent)]
    Host(crate::domain::InvalidHost),
    /// `--domain` names none of the domains.
    #[error("{0} is not one of the domains (COUCHLINK_DOMAINS or COUCHLINK_DOMAINS_FILE)")]
    Unknown(crate::domain::Host),
    /// A companion database named outright while several domains are configured.
    #[error(transparent)]
    Companion(crate::domain::CompanionError),
}

impl DomainChoice {
    /// Refuses a companion database named outright while several domains are configured: one
    /// database cannot be every domain's (as `serve` and `console` refuse it).
    fn check_companion(
        &self,
        companion: crate::domain::Companion,
        setting: Option<&crate::domain::CompanionDb>,
    ) -> Result<(), DomainError> {
        let domains = self.domains.list()?;
        let place = setting.cloned().unwrap_or_default();
        place.for_domains(companion, domains.len()).map(drop).map_err(DomainError::Companion)
    }

    /// Puts the chosen domain's database in `couch` and its public URL in `public_url`.
    fn apply(
        &self,
        couch: &mut CouchArgs,
        public_url: &mut Option<crate::domain::PublicUrl>,
    ) -> Result<(), DomainError> {
        self.domains.pick(self.domain.as_deref(), couch, public_url)
    }
}

/// The roles that read and edit the links database (docs/reference.md, "Who may do what").
#[derive(Debug, Clone, Args)]
pub struct RoleArgs {
    /// The role that may read the links database (the proxy's) [default: <db>:reader].
    #[arg(long, env = "COUCHLINK_READER_ROLE")]
    pub reader_role: Option<String>,
    /// The role that may create and edit links [default: <db>:editor].
    #[arg(long, env = "COUCHLINK_EDITOR_ROLE")]
    pub editor_role: Option<String>,
    /// The proxies' role, that alone may write counts to the clicks database [default: <db>:proxy].
    #[arg(long, env = "COUCHLINK_PROXY_ROLE")]
    pub proxy_role: Option<String>,
}

impl RoleArgs {
    /// The roles of database `db`.
    pub fn roles(&self, db: &str) -> Result<crate::domain::Roles, crate::domain::InvalidRole> {
        crate::domain::Roles::of_database(db, self.reader_role.as_deref(), self.editor_role.as_deref())?
            .with_proxy(self.proxy_role.as_deref())
    }
}

impl From<CouchArgs> for CouchConfig {
    fn from(a: CouchArgs) -> Self {
        let password_file = a.couchdb_password_file.as_ref().map(|f| f.path.clone());
        let password = a.couchdb_password.or(a.couchdb_password_file.map(|f| f.secret));
        CouchConfig { url: a.couchdb_url, user: a.couchdb_user, password, password_file, db: a.db }
    }
}

/// A secret read from a file when the command starts (the `..._FILE` form of a secret, as
/// containers and systemd's credentials hand them over), with the file's path.
#[derive(Clone)]
pub struct SecretFile {
    /// Where it was read.
    pub path: std::path::PathBuf,
    /// What it holds, less one trailing newline.
    pub secret: String,
}

impl SecretFile {
    /// Reads the secret at `path` (for clap: an unreadable file is a usage error naming it).
    pub fn read(path: &str) -> Result<SecretFile, crate::couch::SecretError> {
        let secret = crate::couch::read_secret_file(std::path::Path::new(path))?;
        Ok(SecretFile { path: path.into(), secret })
    }
}

impl std::fmt::Debug for SecretFile {
    /// The path, never the secret.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SecretFile({:?})", self.path)
    }
}

/// The history database of `links`, where its setting (`--history-db`) places it (`None`: off).
pub(crate) fn history_of(
    links: &crate::couch::CouchClient,
    history_db: Option<&crate::domain::CompanionDb>,
) -> Result<Option<crate::couch::CouchClient>, crate::domain::CompanionError> {
    let place = history_db.cloned().unwrap_or_default();
    let name = place.resolve(crate::domain::Companion::History, links.database())?;
    Ok(name.map(|name| links.for_database(&name)))
}

/// A single-threaded runtime, for the commands that wait on CouchDB one request at a time.
pub(crate) fn current_thread_runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread().enable_all().build()
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn every_flag_has_help_and_the_cli_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn each_command_names_the_account_it_needs() {
        let mut cli = Cli::command();
        for (command, account) in [
            ("serve", "read-only"),
            ("setup", "admin"),
            ("create", "editor"),
            ("import", "editor"),
            ("export", "read"),
            ("clicks", "read"),
        ] {
            let help = cli.find_subcommand_mut(command).unwrap().render_long_help().to_string();
            let line = help.lines().skip_while(|l| !l.contains("--couchdb-user")).nth(1).unwrap_or_default();
            assert!(line.contains(account), "{command}: {line:?}");
        }
    }
}

/// CouchDB turned the command's account away: a wrong name or password, said with the server
/// and the account, since a user may have more than one of each.
#[derive(Debug, thiserror::Error)]
#[error("CouchDB at {url} refused user {user:?}: {reason}")]
pub struct BadCredentials {
    /// The server.
    pub url: String,
    /// The account.
    pub user: String,
    /// CouchDB's words.
    pub reason: String,
}

impl BadCredentials {
    /// `Some` when `status` and `reason` are CouchDB's 401 to `couch`'s account.
    fn of(couch: &CouchClient, status: u16, reason: &str) -> Option<Self> {
        (status == 401).then(|| BadCredentials {
            url: couch.server_url().to_owned(),
            user: couch.user().to_owned(),
            reason: reason.to_owned(),
        })
    }
}
