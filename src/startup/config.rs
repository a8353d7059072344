//! What the proxy is configured with ([`ServerConfig`], docs/reference.md, "Configuration"), and
//! what stops a start ([`StartError`]). `couchlink serve` turns its flags into one; tests build
//! one directly.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::access_log::OpenError;
use crate::client_ip::TrustedProxies;
use crate::couch::{CouchConfig, CouchError};
use crate::domain::{CompanionDb, Domain, Host, PublicUrl, Roles};
use crate::handover::{self, Upgrade};

/// Everything the proxy is configured with (docs/reference.md, "Configuration").
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Where redirects are served (port 0: any free port, see [`Application::address`]).
    pub listen: SocketAddr,
    /// Where `/healthz` and `/metrics` are served.
    pub admin_listen: SocketAddr,
    /// CouchDB, as the proxy's read-only account.
    pub couch: CouchConfig,
    /// The database's editor role: the proxy warns when its own account holds it.
    pub editor_role: String,
    /// The short links' base URL (default: `http://<listen address>`).
    pub public_url: Option<PublicUrl>,
    /// Access log directory.
    pub log_dir: PathBuf,
    /// How many bytes of access log may wait in memory while the disk refuses them.
    pub log_queue_bytes: usize,
    /// Each access log line written before its response is sent.
    pub log_sync: bool,
    /// Days of access logs kept, today included (0: all).
    pub log_keep_days: u32,
    /// Gzip each finished day's log.
    pub log_compress: bool,
    /// Proxies whose forwarding header is believed, and which header.
    pub trusted_proxies: TrustedProxies,
    /// Honour `Sec-GPC: 1` and `DNT: 1`.
    pub honor_privacy_signals: bool,
    /// Log addresses without their host part.
    pub anonymize_ip: bool,
    /// The tracking cookie's name.
    pub cookie_name: String,
    /// How long in-flight requests get to finish at shutdown.
    pub drain: Duration,
    /// Most links (and known-missing IDs) held in memory.
    pub cache_capacity: usize,
    /// Serving threads (at least 1).
    pub workers: usize,
    /// Fill the cache from CouchDB at start.
    pub warm_start: bool,
    /// Where the cache snapshot is kept (`None`: no snapshots, every start is a warm start).
    pub state_dir: Option<PathBuf>,
    /// How often the cache snapshot is written while serving (and once at shutdown).
    pub snapshot_interval: Duration,
    /// Where links that do not work (inactive, expired, not yet started) and name no
    /// `fallback` send people, instead of a 404 (checked as a link's `url` is).
    pub fallback_url: Option<String>,
    /// Most reads of links not in memory in flight.
    pub cold_reads: usize,
    /// Most redirect connections open at once.
    pub max_connections: usize,
    /// How long a connection may take to send a request head.
    pub header_timeout: Duration,
    /// Several short domains, each its own database, public URL, log folder (under `log_dir`)
    /// and snapshot (under `state_dir`); empty: one domain, `couch.db` at `public_url`, as
    /// before domains.
    pub domains: Vec<Domain>,
    /// With `domains`: where a request for another host goes (else a 404).
    pub default_domain: Option<Host>,
    /// Live counts (`None`: off).
    pub clicks: Option<ClicksConfig>,
    /// Record every link's history into the history database (docs/reference.md, "History");
    /// false: this proxy records nothing (others may).
    pub history: bool,
    /// Where each links database's history is kept (`COUCHLINK_HISTORY_DB`): `<db>_history`
    /// by default; `off`: nowhere, nothing recorded.
    pub history_db: CompanionDb,
    /// How the proxies' recorders share the recording: one records, the others take over
    /// from it within the lease (docs/reference.md, "History").
    pub history_timing: crate::history::recorder::Timing,
    /// What SIGUSR2 starts in this process's place (`None`: SIGUSR2 is refused with a
    /// warning; tests serving in their own process leave it so).
    pub upgrade: Option<Upgrade>,
    /// A file this process writes its pid to once it serves (and removes at exit, unless a
    /// successor wrote its own).
    pub pid_file: Option<PathBuf>,
    /// The country database `when.country` rules use (`COUCHLINK_GEOIP`), read once at start.
    pub geoip: Option<PathBuf>,
}

/// Where and how often a proxy writes its live counts (docs/reference.md, "Live counts").
#[derive(Debug, Clone)]
pub struct ClicksConfig {
    /// The clicks database (`COUCHLINK_CLICKS_DB`): each links database's `<db>_clicks` by
    /// default; `off`: no counting, as if the whole configuration were `None`.
    pub db: CompanionDb,
    /// Seconds per interval (1 to 3600).
    pub interval_secs: u32,
    /// Bytes of counts that may wait for CouchDB.
    pub queue_bytes: usize,
    /// The proxy's name in the documents (the host's name by default).
    pub proxy_name: String,
}

impl ClicksConfig {
    /// The documented defaults: `<db>_clicks`, a minute, 64 MiB, the host's name.
    pub fn new() -> ClicksConfig {
        ClicksConfig {
            db: CompanionDb::Beside,
            interval_secs: 60,
            queue_bytes: crate::clicks::writer::DEFAULT_QUEUE_BYTES,
            proxy_name: host_name(),
        }
    }
}

impl Default for ClicksConfig {
    fn default() -> Self {
        ClicksConfig::new()
    }
}

/// This machine's name, as the kernel knows it (`couchlink` where it cannot be read).
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|name| name.trim().to_owned())
        .ok()
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "couchlink".to_owned())
}

impl ServerConfig {
    /// One serving thread per CPU core (1 when the count cannot be read).
    pub fn default_workers() -> usize {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    }

    /// The default state directory: beside the access log directory, named after it
    /// (`logs` → `logs-state`, `/var/log/couchlink` → `/var/log/couchlink-state`).
    pub fn state_dir_beside(log_dir: &std::path::Path) -> PathBuf {
        match log_dir.file_name() {
            Some(name) => log_dir.with_file_name(format!("{}-state", name.to_string_lossy())),
            None => log_dir.join("state"),
        }
    }

    /// The documented defaults (docs/reference.md, "Configuration") for the proxy on `couch`, serving
    /// on `listen`, with one serving thread per CPU core.
    pub fn new(couch: CouchConfig, listen: SocketAddr) -> ServerConfig {
        let editor_role = Roles::of_database(&couch.db, None, None).map(|r| r.editor).unwrap_or_default();
        ServerConfig {
            listen,
            admin_listen: SocketAddr::from(([127, 0, 0, 1], 9090)),
            couch,
            editor_role,
            public_url: None,
            log_dir: PathBuf::from("logs"),
            log_queue_bytes: crate::access_log::DEFAULT_QUEUE_BYTES,
            log_sync: false,
            log_keep_days: 0,
            log_compress: true,
            trusted_proxies: TrustedProxies::default(),
            honor_privacy_signals: false,
            anonymize_ip: false,
            cookie_name: "tid".to_owned(),
            drain: Duration::from_secs(10),
            cache_capacity: 1_000_000,
            workers: ServerConfig::default_workers(),
            warm_start: true,
            state_dir: Some(ServerConfig::state_dir_beside(std::path::Path::new("logs"))),
            snapshot_interval: Duration::from_secs(300),
            fallback_url: None,
            cold_reads: 32,
            max_connections: 8192,
            header_timeout: Duration::from_secs(10),
            domains: Vec::new(),
            default_domain: None,
            clicks: Some(ClicksConfig::new()),
            history: true,
            history_db: CompanionDb::Beside,
            history_timing: crate::history::recorder::Timing::default(),
            upgrade: None,
            pid_file: None,
            geoip: None,
        }
    }
}

/// A misconfiguration that stops `serve` before it answers anything.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The access log directory is not writable.
    #[error(transparent)]
    Log(#[from] OpenError),
    /// A listener could not be bound.
    #[error("cannot listen on {addr} ({what})")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// Which listener.
        what: &'static str,
        /// Why not.
        #[source]
        source: std::io::Error,
    },
    /// The CouchDB client could not be set up (a bad URL, say).
    #[error("cannot use CouchDB")]
    Client(#[source] Box<CouchError>),
    /// The links database does not exist.
    #[error("database {db:?} does not exist on {url} (run `couchlink setup` with admin credentials)")]
    NoDatabase {
        /// The database.
        db: String,
        /// The server.
        url: String,
    },
    /// CouchDB refused the account.
    #[error("CouchDB at {url} refused user {user:?} on database {db:?}")]
    Refused {
        /// The server.
        url: String,
        /// The account.
        user: String,
        /// The database.
        db: String,
        /// CouchDB's answer.
        #[source]
        source: Box<CouchError>,
    },
    /// CouchDB answered, but not as expected.
    #[error("CouchDB at {url} answered unexpectedly")]
    Couch {
        /// The server.
        url: String,
        /// What it said.
        #[source]
        source: Box<CouchError>,
    },
    /// A companion database that cannot be one (the links database itself, say).
    #[error(transparent)]
    Companion(#[from] crate::domain::CompanionError),
    /// The list of domains cannot be used.
    #[error("bad domains: {0}")]
    Domains(String),
    /// A serving thread could not start.
    #[error("cannot start serving thread {0}")]
    Worker(usize, #[source] std::io::Error),
    /// The async runtime could not start.
    #[error("cannot start the async runtime")]
    Runtime(#[source] std::io::Error),
    /// The listeners passed by systemd or by the process being upgraded cannot be used.
    #[error(transparent)]
    Inherit(#[from] handover::InheritError),
    /// The GeoIP database (`COUCHLINK_GEOIP`) cannot be used.
    #[error("COUCHLINK_GEOIP: {0}")]
    GeoIp(#[source] crate::visitor::geoip::GeoIpError),
}
