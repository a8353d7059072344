//! `couchlink console`: the console's page and its CouchDB passage on a listener of its own
//! (loopback by default), never on the redirect path (docs/console.md).

use std::net::SocketAddr;
use std::time::Duration;

use clap::Args;

use crate::console::{Console, ConsoleSite};
use crate::domain::{Companion, CompanionDb, PublicUrl};
use crate::handover::Upgrade;
use crate::lifecycle::OneListener;

/// How long the process an upgrade starts has to serve.
const UPGRADE_TIMEOUT: Duration = Duration::from_secs(30);

/// Flags of `couchlink console`.
#[derive(Debug, Clone, Args)]
pub struct ConsoleArgs {
    /// Address the console is served on; put it behind your TLS proxy to reach it from elsewhere.
    #[arg(long, env = "COUCHLINK_CONSOLE_LISTEN", default_value = "127.0.0.1:8092")]
    pub listen: SocketAddr,
    /// CouchDB server URL, without an account (the console holds none: each visitor logs in with
    /// their own, and one in the URL is refused).
    #[arg(long, env = "COUCHLINK_COUCHDB_URL", default_value = "http://127.0.0.1:5984")]
    pub couchdb_url: url::Url,
    /// The links database (one domain).
    #[arg(long, env = "COUCHLINK_DB", default_value = "links")]
    pub db: String,
    /// The short links' base URL (one domain), for short URLs and QR tags.
    #[arg(long, env = "COUCHLINK_PUBLIC_URL", default_value = "http://127.0.0.1:8080")]
    pub public_url: PublicUrl,
    /// The clicks database [default: <db>_clicks]; `off`: no clicks shown.
    #[arg(long, env = "COUCHLINK_CLICKS_DB", value_parser = CompanionDb::parse)]
    pub clicks_db: Option<CompanionDb>,
    /// The history database [default: <db>_history]; `off`: no history shown.
    #[arg(long, env = "COUCHLINK_HISTORY_DB", value_parser = CompanionDb::parse)]
    pub history_db: Option<CompanionDb>,
    /// Behind TLS: CouchDB's session cookie is passed on marked `Secure`.
    #[arg(long, env = "COUCHLINK_CONSOLE_SECURE_COOKIES", default_value_t = false, action = clap::ArgAction::Set)]
    pub secure_cookies: bool,
    /// The proxies' live counts interval, in seconds: an open page shows new counts once each.
    #[arg(long, env = "COUCHLINK_CLICKS_INTERVAL_SECS", default_value_t = crate::clicks::writer::DEFAULT_INTERVAL_SECS,
          value_parser = clap::value_parser!(u32).range(1..=3600))]
    pub clicks_interval_secs: u32,
    /// The proxies' CouchDB accounts (comma-separated; `setup`'s `COUCHLINK_READER_USER`): the
    /// console never passes a login as them on, so that nobody can make CouchDB lock the
    /// proxies out through it.
    #[arg(long, env = "COUCHLINK_READER_USER", default_value = "couchlink-reader", value_delimiter = ',')]
    pub reader_user: Vec<String>,
    /// Comma-separated IPs/CIDRs of proxies in front of the console whose forwarding header is
    /// believed (failed logins are counted per visitor address).
    #[arg(long, env = "COUCHLINK_TRUSTED_PROXIES", default_value = "")]
    pub trusted_proxies: crate::client_ip::TrustedProxies,
    /// The one header those proxies write: x-forwarded-for or forwarded.
    #[arg(long, env = "COUCHLINK_FORWARDED_HEADER", default_value = "x-forwarded-for")]
    pub forwarded_header: crate::client_ip::ForwardedHeader,
    /// A file to write the console's pid to (an upgrade's new process writes its own).
    #[arg(long, env = "COUCHLINK_CONSOLE_PID_FILE")]
    pub pid_file: Option<std::path::PathBuf>,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub roles: super::RoleArgs,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub domains: super::DomainArgs,
}

/// Why the console did not start.
#[derive(Debug, thiserror::Error)]
pub enum ConsoleError {
    /// The flags do not make a console.
    #[error("{0}")]
    Config(String),
    /// The listener: passed (systemd, an upgrade) or bound.
    #[error(transparent)]
    Listen(#[from] crate::lifecycle::ListenError),
    /// The runtime.
    #[error("cannot start the runtime")]
    Runtime(#[source] std::io::Error),
    /// An account was given: the console would lend it to every visitor.
    #[error("COUCHLINK_COUCHDB_URL (--couchdb-url)")]
    Account(#[from] crate::console::ConsoleError),
    /// An account setting is set (a shared environment file, say).
    #[error(
        "{0} is set: the console holds no CouchDB account (it would lend it to anyone who reaches the console); \
         each visitor logs in with their own. Unset it for the console"
    )]
    AccountSetting(&'static str),
}

/// The settings that give the other commands a CouchDB account, which the console refuses.
pub const ACCOUNT_SETTINGS: [&str; 3] =
    ["COUCHLINK_COUCHDB_USER", "COUCHLINK_COUCHDB_PASSWORD", "COUCHLINK_COUCHDB_PASSWORD_FILE"];

impl ConsoleArgs {
    /// The databases the console offers: every domain's, or the one database.
    pub fn sites(&self) -> Result<Vec<ConsoleSite>, ConsoleError> {
        let domains = self.domains.list().map_err(|e| ConsoleError::Config(e.to_string()))?;
        let pairs: Vec<(String, PublicUrl)> = if domains.is_empty() {
            vec![(self.db.clone(), self.public_url.clone())]
        } else {
            domains.into_iter().map(|d| (d.db, d.public_url)).collect()
        };
        let place = |companion, setting: &Option<CompanionDb>| {
            setting.clone().unwrap_or_default().for_domains(companion, pairs.len())
        };
        let clicks = place(Companion::Clicks, &self.clicks_db).map_err(|e| ConsoleError::Config(e.to_string()))?;
        let history = place(Companion::History, &self.history_db).map_err(|e| ConsoleError::Config(e.to_string()))?;
        pairs
            .into_iter()
            .map(|(db, public_url)| {
                let roles = self.roles.roles(&db).map_err(|e| ConsoleError::Config(e.to_string()))?;
                let (clicks_db, history_db) = crate::domain::companions(&db, &clicks, &history)
                    .map_err(|e| ConsoleError::Config(e.to_string()))?;
                Ok(ConsoleSite { db, public_url, clicks_db, history_db, editor_role: roles.editor })
            })
            .collect()
    }

    /// Serves the console until SIGTERM or Ctrl-C, on the listener systemd or the process it
    /// upgrades passes, else on `--listen`; SIGUSR2 starts the binary on disk in its place.
    pub fn execute(self) -> Result<(), ConsoleError> {
        if let Some(setting) = ACCOUNT_SETTINGS.into_iter().find(|s| std::env::var_os(s).is_some_and(|v| !v.is_empty()))
        {
            return Err(ConsoleError::AccountSetting(setting));
        }
        let sites = self.sites()?;
        let proxies = self.reader_user.iter().map(|u| u.trim().to_owned()).filter(|u| !u.is_empty()).collect();
        let mut console =
            Console::new(sites, self.couchdb_url.clone(), self.secure_cookies)?.refusing_logins_as(proxies);
        console.clicks_interval_secs = self.clicks_interval_secs;
        console.trusted_proxies = self.trusted_proxies.clone().reading(self.forwarded_header);
        let upgrade = Upgrade::of_this_process(UPGRADE_TIMEOUT, super::env_file::loaded());
        // Before the runtime's threads: taking a passed listener changes the environment.
        let listener = OneListener::take_or_bind(self.listen, upgrade, self.pid_file.clone())?;
        let runtime = super::current_thread_runtime().map_err(ConsoleError::Runtime)?;
        runtime
            .block_on(crate::console::serve(console, listener, crate::lifecycle::shutdown_signal()))
            .map_err(ConsoleError::Runtime)
    }
}
