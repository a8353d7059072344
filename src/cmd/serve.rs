//! `couchlink serve`: its flags, turned into a [`ServerConfig`] for [`Application`].

use std::net::SocketAddr;
use std::num::{NonZeroU32, NonZeroUsize};
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::CouchArgs;
use crate::client_ip::{ForwardedHeader, TrustedProxies};
use crate::domain::{Companion, CompanionDb, PublicUrl};
pub use crate::startup::StartError;
use crate::startup::{Application, ClicksConfig, ServerConfig};

/// Flags of `couchlink serve`.
#[derive(Debug, Clone, Args)]
#[command(mut_arg("couchdb_user", |a| a.help("The proxy's read-only CouchDB account (the one `couchlink setup` creates)")))]
pub struct ServeArgs {
    #[command(flatten)]
    #[allow(missing_docs)]
    pub couch: CouchArgs,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub roles: super::RoleArgs,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub domains: super::DomainArgs,
    /// With several domains: the one a request for any other host is served as (default: a 404).
    #[arg(long, env = "COUCHLINK_DEFAULT_DOMAIN")]
    pub default_domain: Option<String>,
    /// Address redirects are served on.
    #[arg(long, env = "COUCHLINK_LISTEN", default_value = "0.0.0.0:8080")]
    pub listen: SocketAddr,
    /// The short links' base URL (default: http://<listen address>), for `Link: rel=shortlink`
    /// and `Secure` cookies.
    #[arg(long, env = "COUCHLINK_PUBLIC_URL")]
    pub public_url: Option<PublicUrl>,
    /// Access log directory.
    #[arg(long, env = "COUCHLINK_LOG_DIR", default_value = "logs")]
    pub log_dir: PathBuf,
    /// Bytes of access log kept in memory while the disk refuses them (full, failing, gone);
    /// lines past it are lost, counted in /metrics and /healthz.
    #[arg(long, env = "COUCHLINK_LOG_QUEUE_BYTES", default_value_t = crate::access_log::DEFAULT_QUEUE_BYTES)]
    pub log_queue_bytes: usize,
    /// Write each access log line before its response is sent, not in 5 ms batches: nothing is
    /// lost when the process is killed, at a cost per request (docs/benchmarks.md).
    #[arg(long, env = "COUCHLINK_LOG_SYNC", default_value_t = false, action = clap::ArgAction::Set)]
    pub log_sync: bool,
    /// Days of access logs to keep, today included; older files are deleted (0: keep all).
    #[arg(long, env = "COUCHLINK_LOG_KEEP_DAYS", default_value_t = 0)]
    pub log_keep_days: u32,
    /// Gzip each day's access log once the day is over (`access.YYYY-MM-DD.log.gz`).
    #[arg(long, env = "COUCHLINK_LOG_COMPRESS", default_value_t = true, action = clap::ArgAction::Set)]
    pub log_compress: bool,
    /// Comma-separated IPs/CIDRs of proxies whose forwarding header is believed.
    #[arg(long, env = "COUCHLINK_TRUSTED_PROXIES", default_value = "")]
    pub trusted_proxies: TrustedProxies,
    /// The one header those proxies write, and the only one read: x-forwarded-for or forwarded.
    #[arg(long, env = "COUCHLINK_FORWARDED_HEADER", default_value = "x-forwarded-for")]
    pub forwarded_header: ForwardedHeader,
    /// Honour Global Privacy Control and Do Not Track: a request with `Sec-GPC: 1` or `DNT: 1`
    /// gets no tracking cookie, and its log line `-` as tracking ID.
    #[arg(long, env = "COUCHLINK_HONOR_PRIVACY_SIGNALS", default_value_t = false, action = clap::ArgAction::Set)]
    pub honor_privacy_signals: bool,
    /// Log client addresses without their host part (IPv4 /24, IPv6 /48).
    #[arg(long, env = "COUCHLINK_ANONYMIZE_IP", default_value_t = false, action = clap::ArgAction::Set)]
    pub anonymize_ip: bool,
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
    /// Threads serving redirects, at least 1 (default: one per CPU core).
    #[arg(long, env = "COUCHLINK_WORKERS")]
    pub workers: Option<NonZeroUsize>,
    /// Fill the link cache from CouchDB in the background at start (and after the feed lost its
    /// place), up to the cache capacity, while serving.
    #[arg(long, env = "COUCHLINK_WARM_START", default_value_t = true, action = clap::ArgAction::Set)]
    pub warm_start: bool,
    /// Where a link that does not work (inactive, expired, not yet started) and has no
    /// "fallback" of its own sends people, instead of a 404: written as a link's "url" is.
    #[arg(long, env = "COUCHLINK_FALLBACK_URL", value_parser = super::target_flag)]
    pub fallback_url: Option<String>,
    /// Directory of the link cache snapshot, written every COUCHLINK_SNAPSHOT_SECS and at
    /// shutdown, and read at start so that a restart serves from memory at once (default:
    /// beside the log directory, `<log dir>-state`).
    #[arg(long, env = "COUCHLINK_STATE_DIR")]
    pub state_dir: Option<PathBuf>,
    /// Seconds between cache snapshots while serving (0: no snapshots, every start a warm start).
    #[arg(long, env = "COUCHLINK_SNAPSHOT_SECS", default_value_t = 300)]
    pub snapshot_secs: u64,
    /// Most reads of links not in memory sent to CouchDB at once (concurrent requests for one ID
    /// share one read); a request waits up to 0.5 s for one, then gets 503 with Retry-After.
    #[arg(long, env = "COUCHLINK_COLD_READS", default_value_t = NonZeroUsize::new(32).expect("non-zero"))]
    pub cold_reads: NonZeroUsize,
    /// Most redirect connections open at once; past it, new ones wait in the kernel's queue.
    #[arg(long, env = "COUCHLINK_MAX_CONNECTIONS", default_value_t = NonZeroUsize::new(8192).expect("non-zero"))]
    pub max_connections: NonZeroUsize,
    /// Seconds a connection may take to send a complete request head, from its opening or its
    /// previous response (the idle keep-alive timeout and the slow-header timeout at once).
    #[arg(long, env = "COUCHLINK_HEADER_TIMEOUT_SECS", default_value_t = NonZeroU32::new(10).expect("non-zero"))]
    pub header_timeout_secs: NonZeroU32,
    /// Record every change to a link in the links database's history database (--history-db,
    /// made by `couchlink setup`); false: this proxy records nothing (others may).
    #[arg(long, env = "COUCHLINK_HISTORY", default_value_t = true, action = clap::ArgAction::Set)]
    pub history: bool,
    /// The clicks database, where live counts are written [default: <db>_clicks, each domain
    /// its own]; `off`: no counting.
    #[arg(long, env = "COUCHLINK_CLICKS_DB", value_parser = CompanionDb::parse)]
    pub clicks_db: Option<CompanionDb>,
    /// The history database, where this proxy records every change to a link [default:
    /// <db>_history, each domain its own]; `off`: nothing recorded.
    #[arg(long, env = "COUCHLINK_HISTORY_DB", value_parser = CompanionDb::parse)]
    pub history_db: Option<CompanionDb>,
    /// Seconds per interval of live counts: one document (or a few, for many links) per
    /// interval, none while idle.
    #[arg(long, env = "COUCHLINK_CLICKS_INTERVAL_SECS", default_value_t = crate::clicks::writer::DEFAULT_INTERVAL_SECS,
          value_parser = clap::value_parser!(u32).range(1..=3600))]
    pub clicks_interval_secs: u32,
    /// Bytes of live counts that may wait in memory while CouchDB does not take them; past it,
    /// counts are lost and counted.
    #[arg(long, env = "COUCHLINK_CLICKS_QUEUE_BYTES", default_value_t = crate::clicks::writer::DEFAULT_QUEUE_BYTES)]
    pub clicks_queue_bytes: usize,
    /// This proxy's name in its live counts [default: the host's name].
    #[arg(long, env = "COUCHLINK_PROXY_NAME")]
    pub proxy_name: Option<String>,
    /// Seconds the new process started by an upgrade (SIGUSR2, `systemctl reload`) has to
    /// serve; past it, it is stopped and this one goes on serving.
    #[arg(long, env = "COUCHLINK_UPGRADE_TIMEOUT_SECS", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub upgrade_timeout_secs: u64,
    /// A file to write the serving process's pid to (an upgrade's new process writes its own).
    #[arg(long, env = "COUCHLINK_PID_FILE")]
    pub pid_file: Option<PathBuf>,
    /// A MaxMind-format country or city database (GeoLite2, DB-IP Lite) for rules'
    /// `when.country`, read at start (a new file takes effect at an upgrade or restart).
    #[arg(long, env = "COUCHLINK_GEOIP")]
    pub geoip: Option<PathBuf>,
}

/// A cookie name is an RFC 6265 token.
fn parse_cookie_name(s: &str) -> Result<String, String> {
    let token = !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
    token.then(|| s.to_owned()).ok_or_else(|| "a cookie name is letters, digits and !#$%&'*+-.^_`|~".into())
}

impl ServeArgs {
    /// Serves until SIGTERM or SIGINT, on a single-threaded runtime of its own (plus one more
    /// such thread per extra worker).
    ///
    /// Listeners passed by systemd (`LISTEN_FDS`) or by the process this one upgrades are
    /// served on instead of binding the addresses; SIGUSR2 starts the binary on disk in this
    /// process's place (docs/operations.md, "Restarts and upgrades").
    pub fn execute(self) -> Result<(), StartError> {
        // Before any thread starts: it reads and clears environment variables.
        let inherited = crate::handover::take_inherited()?;
        let upgrade_timeout = Duration::from_secs(self.upgrade_timeout_secs);
        let mut config = self.into_config()?;
        config.upgrade = crate::handover::Upgrade::of_this_process(upgrade_timeout, super::env_file::loaded());
        let runtime = super::current_thread_runtime().map_err(StartError::Runtime)?;
        runtime.block_on(async {
            Application::build_inheriting(config, inherited)
                .await?
                .run_until_stopped(crate::lifecycle::shutdown_signal())
                .await
        })
    }

    /// The configuration these flags describe.
    pub fn into_config(self) -> Result<ServerConfig, StartError> {
        let domains = self.domains.list().map_err(|e| StartError::Domains(e.to_string()))?;
        let default_domain = match &self.default_domain {
            None => None,
            Some(name) => {
                let host = crate::domain::Host::parse(name).map_err(|e| StartError::Domains(e.to_string()))?;
                if !domains.iter().any(|d| d.host == host) {
                    return Err(StartError::Domains(format!("the default domain {host} is not one of the domains")));
                }
                Some(host)
            }
        };
        // Only for a warning: a role name CouchDB would refuse cannot be held either.
        let editor_role = self.roles.roles(&self.couch.db).map(|r| r.editor).unwrap_or_default();
        let workers = self.workers.map_or_else(ServerConfig::default_workers, NonZeroUsize::get);
        let state_dir = self.state_dir.unwrap_or_else(|| ServerConfig::state_dir_beside(&self.log_dir));
        let place = |companion, setting: &Option<CompanionDb>| {
            let place = setting.clone().unwrap_or_default();
            place.for_domains(companion, domains.len()).map_err(|e| StartError::Domains(e.to_string()))
        };
        let clicks_db = place(Companion::Clicks, &self.clicks_db)?;
        let history_db = place(Companion::History, &self.history_db)?;
        let clicks = (clicks_db != CompanionDb::Off).then(|| ClicksConfig {
            db: clicks_db,
            interval_secs: self.clicks_interval_secs,
            queue_bytes: self.clicks_queue_bytes,
            proxy_name: self.proxy_name.clone().unwrap_or_else(crate::startup::host_name),
        });
        Ok(ServerConfig {
            listen: self.listen,
            admin_listen: self.admin_listen,
            couch: self.couch.into(),
            editor_role,
            public_url: self.public_url,
            log_dir: self.log_dir,
            log_queue_bytes: self.log_queue_bytes,
            log_sync: self.log_sync,
            log_keep_days: self.log_keep_days,
            log_compress: self.log_compress,
            trusted_proxies: self.trusted_proxies.reading(self.forwarded_header),
            honor_privacy_signals: self.honor_privacy_signals,
            anonymize_ip: self.anonymize_ip,
            cookie_name: self.cookie_name,
            drain: Duration::from_secs(self.drain_secs),
            cache_capacity: self.cache_capacity,
            workers,
            warm_start: self.warm_start,
            state_dir: (self.snapshot_secs > 0).then_some(state_dir),
            snapshot_interval: Duration::from_secs(self.snapshot_secs.max(1)),
            fallback_url: self.fallback_url,
            cold_reads: self.cold_reads.get(),
            max_connections: self.max_connections.get(),
            header_timeout: Duration::from_secs(self.header_timeout_secs.get().into()),
            domains,
            default_domain,
            clicks,
            history: self.history,
            history_db,
            history_timing: crate::history::recorder::Timing::default(),
            // Set by `execute`: only the process `couchlink serve` runs in can start itself anew.
            upgrade: None,
            pid_file: self.pid_file,
            geoip: self.geoip,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookie_name_must_be_a_token() {
        assert!(parse_cookie_name("tid").is_ok());
        assert!(parse_cookie_name("t id").is_err());
        assert!(parse_cookie_name("t;id").is_err());
        assert!(parse_cookie_name("").is_err());
    }
}
