//! Command-line flags, each also an environment variable (contracts §7).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::client_ip::TrustedProxies;
use crate::couch::CouchConfig;
use crate::serve::ServeConfig;

/// couchlink: short links from CouchDB documents, redirected fast, every request logged.
#[derive(Debug, Parser)]
#[command(name = "couchlink", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// couchlink's subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve redirects (with the proxy's read-only CouchDB account).
    Serve(ServeArgs),
    /// Prepare CouchDB (with admin credentials): database, _security, validation, reader account.
    Setup(SetupArgs),
    /// Store a link under a fresh random ID (with editor credentials) and print its short URL.
    Create(CreateArgs),
}

/// Where CouchDB is, and as whom to talk to it.
#[derive(Debug, Clone, Args)]
pub struct CouchArgs {
    /// CouchDB server URL.
    #[arg(long, env = "COUCHLINK_COUCHDB_URL", default_value = "http://127.0.0.1:5984")]
    pub couchdb_url: String,
    /// CouchDB account this command uses (for `serve`: the read-only proxy account).
    #[arg(long, env = "COUCHLINK_COUCHDB_USER")]
    pub couchdb_user: Option<String>,
    /// Password of that account.
    #[arg(long, env = "COUCHLINK_COUCHDB_PASSWORD", hide_env_values = true)]
    pub couchdb_password: Option<String>,
    /// The links database.
    #[arg(long, env = "COUCHLINK_DB", default_value = "links")]
    pub db: String,
}

impl From<CouchArgs> for CouchConfig {
    fn from(a: CouchArgs) -> Self {
        CouchConfig { url: a.couchdb_url, user: a.couchdb_user, password: a.couchdb_password, db: a.db }
    }
}

/// Flags of `couchlink serve`.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub couch: CouchArgs,
    /// Address redirects are served on.
    #[arg(long, env = "COUCHLINK_LISTEN", default_value = "0.0.0.0:8080")]
    pub listen: SocketAddr,
    /// The short links' base URL (default: http://<listen address>), for `Link: rel=shortlink`
    /// and `Secure` cookies.
    #[arg(long, env = "COUCHLINK_PUBLIC_URL", value_parser = parse_public_url)]
    pub public_url: Option<String>,
    /// Access log directory.
    #[arg(long, env = "COUCHLINK_LOG_DIR", default_value = "logs")]
    pub log_dir: PathBuf,
    /// Comma-separated IPs/CIDRs of proxies whose X-Forwarded-For/Forwarded is believed.
    #[arg(long, env = "COUCHLINK_TRUSTED_PROXIES", default_value = "")]
    pub trusted_proxies: TrustedProxies,
    /// Name of the tracking cookie.
    #[arg(long, env = "COUCHLINK_COOKIE_NAME", default_value = "tid", value_parser = parse_cookie_name)]
    pub cookie_name: String,
    /// Seconds in-flight requests get to finish on SIGTERM/SIGINT.
    #[arg(long, env = "COUCHLINK_DRAIN_SECS", default_value_t = 10)]
    pub drain_secs: u64,
    /// Where /healthz and /metrics are served (keep it off the public network).
    #[arg(long, env = "COUCHLINK_ADMIN_LISTEN", default_value = "127.0.0.1:9090")]
    pub admin_listen: SocketAddr,
    /// Most links (and known-missing IDs) kept in memory (roughly 100 to 300 bytes each).
    #[arg(long, env = "COUCHLINK_CACHE_CAPACITY", default_value_t = 1_000_000)]
    pub cache_capacity: usize,
    /// Threads serving redirects (default: one per CPU core).
    #[arg(long, env = "COUCHLINK_WORKERS")]
    pub workers: Option<usize>,
}

impl ServeArgs {
    /// The serve configuration, with the public URL defaulting to `http://<bound address>`.
    pub fn into_config(self, bound: SocketAddr) -> ServeConfig {
        ServeConfig {
            public_url: self.public_url.unwrap_or_else(|| format!("http://{bound}")),
            couch: self.couch.into(),
            log_dir: self.log_dir,
            trusted_proxies: self.trusted_proxies,
            cookie_name: self.cookie_name,
            drain_timeout: Duration::from_secs(self.drain_secs),
            cache_capacity: self.cache_capacity,
            workers: self.workers.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
        }
    }
}

/// Flags of `couchlink setup`.
#[derive(Debug, Clone, Args)]
pub struct SetupArgs {
    #[command(flatten)]
    pub couch: CouchArgs,
    /// Name of the proxy's read-only account that setup creates or updates.
    #[arg(long, env = "COUCHLINK_READER_USER", default_value = "couchlink-reader")]
    pub reader_user: String,
    /// Password of that account (without it, the account is left alone).
    #[arg(long, env = "COUCHLINK_READER_PASSWORD", hide_env_values = true)]
    pub reader_password: Option<String>,
}

/// Flags of `couchlink create`.
#[derive(Debug, Clone, Args)]
pub struct CreateArgs {
    #[command(flatten)]
    pub couch: CouchArgs,
    /// The target: an http(s) URL, or an internal redirect such as /H83if/spring.
    pub url: String,
    /// RFC 3339 instant from which the link answers 404, e.g. 2026-12-31T23:59:59Z.
    #[arg(long)]
    pub expires: Option<String>,
    /// Address redirects are served on (the default base of the printed URL).
    #[arg(long, env = "COUCHLINK_LISTEN", default_value = "0.0.0.0:8080")]
    pub listen: SocketAddr,
    /// The short links' base URL (default: http://<listen address>).
    #[arg(long, env = "COUCHLINK_PUBLIC_URL", value_parser = parse_public_url)]
    pub public_url: Option<String>,
}

/// An absolute http/https URL with a host, kept without its trailing `/`.
pub fn parse_public_url(s: &str) -> Result<String, String> {
    let url = url::Url::parse(s).map_err(|e| format!("not a URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err("must be an http:// or https:// URL with a host".into());
    }
    Ok(s.trim_end_matches('/').to_owned())
}

/// A cookie name is an RFC 6265 token.
fn parse_cookie_name(s: &str) -> Result<String, String> {
    let token = !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
    token.then(|| s.to_owned()).ok_or_else(|| "a cookie name is letters, digits and !#$%&'*+-.^_`|~".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_flag_has_help_and_the_cli_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }

    #[test]
    fn public_url_must_be_http_or_https() {
        assert_eq!(parse_public_url("https://0x1f.ie/").unwrap(), "https://0x1f.ie");
        assert!(parse_public_url("ftp://0x1f.ie").is_err());
        assert!(parse_public_url("0x1f.ie").is_err());
    }

    #[test]
    fn cookie_name_must_be_a_token() {
        assert!(parse_cookie_name("tid").is_ok());
        assert!(parse_cookie_name("t id").is_err());
        assert!(parse_cookie_name("t;id").is_err());
        assert!(parse_cookie_name("").is_err());
    }
}
