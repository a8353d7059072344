//! Assembly of the proxy (zero2prod's `startup.rs`): [`Application::build`] binds the
//! listeners, opens the access log and checks CouchDB (every misconfiguration is a
//! [`StartError`] here, before anything is served); [`Application::run_until_stopped`] starts
//! the link store, the `_changes` feed, the warm-up, log retention, the admin listener and the
//! serving threads, and shuts them down in order. `couchlink serve` only turns its flags into a
//! [`ServerConfig`]; tests build one directly.

use std::future::Future;
use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch};

use crate::access_log::{AccessLog, Flusher, LogOptions, OpenError};
use crate::admin::{Admin, AdminSite};
use crate::clicks::doc::Writer as ClicksIdentity;
use crate::clicks::limits::Limits as VisitLimits;
use crate::clicks::writer::{ClicksStatus, ClicksWriter};
use crate::clicks::Tally;
use crate::client_ip::TrustedProxies;
use crate::couch::{CouchClient, CouchConfig, CouchError};
use crate::domain::{Companion, CompanionDb, Domain, Host, PublicUrl, Roles};
use crate::errors::Causes;
use crate::follower::{FeedStatus, Follower};
use crate::handler::{App, Location, Settings, Site, Sites};
use crate::handover::{self, Giver, Inherited, Upgrade};
use crate::http::accept::{self, Limits};
use crate::http::limits::Refusal;
use crate::http::{Connections, Respond, Shape};
use crate::lifecycle::{self, Ending};
use crate::log_retention::Retention;
use crate::message::{Reply, Request};
use crate::metrics::Metrics;
use crate::snapshot::{self, SnapshotFile, SnapshotStatus, Snapshots};
use crate::store::LinkStore;

/// How long the access log may take to write its backlog at shutdown.
const LOG_FLUSH_TIMEOUT: Duration = Duration::from_secs(30);
/// Connections the admin listener (health checks, metrics scrapers) takes at once.
const ADMIN_CONNECTIONS: usize = 64;
/// File descriptors kept for everything but client connections: the access log, CouchDB
/// connections, the listeners.
const SPARE_FDS: u64 = 256;

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

/// The proxy, built and ready to serve: its listeners bound, its access logs open, CouchDB
/// checked.
pub struct Application {
    config: ServerConfig,
    /// The redirect listener's sockets, one or more per serving thread (see
    /// [`Application::build_inheriting`]).
    listeners: Vec<Vec<std::net::TcpListener>>,
    admin_listener: TcpListener,
    /// Who passed the listeners, if anyone.
    giver: Option<Giver>,
    /// Whether the admin listener was passed too.
    admin_inherited: bool,
    /// Whether serving threads share a socket (fewer passed than threads).
    sockets_shared: bool,
    address: SocketAddr,
    admin_address: SocketAddr,
    /// One per short domain (one, unnamed, without `domains`).
    sites: Vec<SitePlan>,
    /// With `domains`: the access log of requests for no configured domain (and no default).
    unknown: Option<(AccessLog, Flusher, PathBuf)>,
    /// Held while serving: see [`Application::build`].
    _file_size_limit: Option<tokio::signal::unix::Signal>,
    /// SIGHUP, caught from the start (its default is to end the process).
    hangups: Option<tokio::signal::unix::Signal>,
    /// SIGUSR2 (an upgrade), caught from the start for the same reason.
    upgrades: Option<tokio::signal::unix::Signal>,
    /// The country database, read.
    geoip: Option<Arc<crate::visitor::geoip::GeoIp>>,
}

/// One short domain, checked and with its log open, before it serves.
struct SitePlan {
    /// Its host; `None` with one domain configured as before domains (every host).
    host: Option<Host>,
    couch: CouchClient,
    public_url: PublicUrl,
    log: AccessLog,
    flusher: Flusher,
    log_dir: PathBuf,
    state_dir: Option<PathBuf>,
}

/// One short domain serving: what the handler, the admin listener and shutdown need of it.
struct RunningSite {
    host: Option<Host>,
    public_url: PublicUrl,
    couch: CouchClient,
    store: Arc<LinkStore>,
    /// Its live counts, and their state, when counting is on.
    clicks: Option<(Arc<Tally>, Arc<ClicksStatus>)>,
    /// Its links' visit limits.
    limits: Arc<VisitLimits>,
    /// Its history recorder's state, when it records.
    history: Option<Arc<crate::history::recorder::RecorderStatus>>,
    metrics: Arc<Metrics>,
    feed: Arc<FeedStatus>,
    snapshot_status: Arc<SnapshotStatus>,
    snapshots: Option<Arc<Snapshots>>,
    log: AccessLog,
    flusher: Flusher,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Application {
    /// Binds both listeners, opens the access logs and checks CouchDB. A CouchDB that does not
    /// answer is not an error (the proxy serves what it can and catches up); one that refuses
    /// the account or lacks a database is.
    pub async fn build(config: ServerConfig) -> Result<Application, StartError> {
        Application::build_inheriting(config, None).await
    }

    /// As [`Application::build`], serving on listeners passed by systemd or by the process
    /// this one upgrades, where `inherited` has them (the rest are bound as configured).
    ///
    /// Each serving thread accepts on sockets of its own: bound here, one `SO_REUSEPORT`
    /// sibling per thread (see [`accept::bind_shareable`]); passed by a predecessor, its
    /// sockets dealt out among the threads; from systemd, its one socket shared by all (a
    /// sibling bound here would close with this process, resetting what waits in its queue).
    pub async fn build_inheriting(
        config: ServerConfig,
        inherited: Option<Inherited>,
    ) -> Result<Application, StartError> {
        let workers = config.workers.max(1);
        // One named companion database cannot be every domain's.
        let clicks_db = config.clicks.as_ref().map(|c| (Companion::Clicks, &c.db));
        for (companion, place) in clicks_db.into_iter().chain([(Companion::History, &config.history_db)]) {
            place
                .clone()
                .for_domains(companion, config.domains.len())
                .map_err(|e| StartError::Domains(e.to_string()))?;
        }
        // Read before anything is bound: a file missing or damaged is a misconfiguration.
        let geoip = match &config.geoip {
            Some(path) => Some(Arc::new(crate::visitor::geoip::GeoIp::open(path).map_err(StartError::GeoIp)?)),
            None => None,
        };
        let (sockets, admin, giver) = match inherited {
            Some(Inherited { redirect, admin, giver }) => (redirect, admin, Some(giver)),
            None => {
                let first = accept::bind_shareable(config.listen).map_err(|source| StartError::Bind {
                    addr: config.listen,
                    what: "redirects",
                    source,
                })?;
                let mut sockets = vec![first];
                for n in 1..workers {
                    sockets.push(accept::bind_alongside(&sockets[0]).map_err(|e| StartError::Worker(n, e))?);
                }
                (sockets, None, None)
            }
        };
        let sockets_shared = sockets.len() < workers;
        let listeners = deal(sockets, workers).map_err(StartError::Runtime)?;
        let admin_inherited = admin.is_some();
        let admin_listener = match admin {
            Some(admin) => TcpListener::from_std(admin).map_err(StartError::Runtime)?,
            None => TcpListener::bind(config.admin_listen).await.map_err(|source| StartError::Bind {
                addr: config.admin_listen,
                what: "health and metrics",
                source,
            })?,
        };
        let address = listeners[0][0].local_addr().map_err(StartError::Runtime)?;
        if matches!(giver, Some(Giver::Predecessor(_))) && config.listen.port() != 0 && config.listen != address {
            // The sockets are what makes the upgrade seamless; a new address needs a restart.
            tracing::warn!(
                "COUCHLINK_LISTEN is {} but the sockets taken over listen on {address}: a new address takes effect at a restart",
                config.listen
            );
        }
        let admin_address = admin_listener.local_addr().map_err(StartError::Runtime)?;
        raise_fd_limit(config.max_connections);
        // Each domain's CouchDB database first: a start refused for its account or database
        // leaves no empty log folder.
        let mut checked = Vec::new();
        if config.domains.is_empty() {
            let public_url = match &config.public_url {
                Some(url) => url.clone(),
                None => {
                    let local = PublicUrl::from_listen(address);
                    if address.ip().is_unspecified() {
                        tracing::warn!(
                            "COUCHLINK_PUBLIC_URL is not set: Link headers name {local}; set it to the address people reach"
                        );
                    }
                    local
                }
            };
            let couch = CouchClient::new(&config.couch).map_err(|e| StartError::Client(Box::new(e)))?;
            check_database(&couch, &config.editor_role).await?;
            checked.push((None, couch, public_url, config.log_dir.clone(), config.state_dir.clone()));
        } else {
            // One client for all: one pool of connections, one account whose password SIGHUP
            // reads again for every domain.
            let server = CouchClient::new(&config.couch).map_err(|e| StartError::Client(Box::new(e)))?;
            for domain in &config.domains {
                let couch = server.for_database(&domain.db);
                let editor_role = Roles::of_database(&domain.db, None, None).map(|r| r.editor).unwrap_or_default();
                check_database(&couch, &editor_role).await?;
                let (log_dir, state_dir) = (config.log_dir.join(domain.host.as_str()), config.state_dir.clone());
                let state_dir = state_dir.map(|d| d.join(domain.host.as_str()));
                checked.push((Some(domain.host.clone()), couch, domain.public_url.clone(), log_dir, state_dir));
            }
        }
        let options =
            LogOptions { queue_bytes: config.log_queue_bytes, sync: config.log_sync, ..LogOptions::default() };
        let mut sites = Vec::with_capacity(checked.len());
        for (host, couch, public_url, log_dir, state_dir) in checked {
            let (log, flusher) = AccessLog::open(&log_dir, options)?;
            sites.push(SitePlan { host, couch, public_url, log, flusher, log_dir, state_dir });
        }
        let unknown = match config.domains.is_empty() || config.default_domain.is_some() {
            true => None,
            false => {
                let dir = config.log_dir.join(UNKNOWN_HOSTS);
                let (log, flusher) = AccessLog::open(&dir, options)?;
                Some((log, flusher, dir))
            }
        };
        // A file-size limit (RLIMIT_FSIZE) that the access log reaches must be a write error
        // the log reports and recovers from, not SIGXFSZ ending the process.
        let file_size_limit =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::from_raw(libc::SIGXFSZ)).ok();
        let hangups = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok();
        let upgrades = lifecycle::catch_upgrades();
        Ok(Application {
            config,
            listeners,
            admin_listener,
            giver,
            admin_inherited,
            sockets_shared,
            address,
            admin_address,
            sites,
            unknown,
            _file_size_limit: file_size_limit,
            hangups,
            upgrades,
            geoip,
        })
    }

    /// Where redirects are served.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Where `/healthz` and `/metrics` are served.
    pub fn admin_address(&self) -> SocketAddr {
        self.admin_address
    }

    /// Serves until `shutdown` completes; then stops accepting, lets in-flight requests
    /// finish, stops the admin listener and the feeds, and writes every access log line before
    /// returning. A SIGUSR2 meanwhile starts the binary on disk with the listeners and, once it
    /// serves, ends this process the same way (its queue left to the successor).
    pub async fn run_until_stopped(self, shutdown: impl Future<Output = ()>) -> Result<(), StartError> {
        let Application { config, listeners, admin_listener, giver, sites, unknown, hangups, upgrades, geoip, .. } =
            self;
        let (address, admin_address, admin_inherited) = (self.address, self.admin_address, self.admin_inherited);
        let (predecessor, socket_activated) = match giver {
            Some(Giver::Predecessor(predecessor)) => (Some(predecessor), false),
            Some(Giver::Systemd) => (None, true),
            None => (None, false),
        };
        let handover_fds = lifecycle::copies_for_successor(
            config.upgrade.is_some() && upgrades.is_some(),
            listeners
                .iter()
                .flatten()
                .map(|l| (l.as_fd(), handover::REDIRECT))
                .chain([(admin_listener.as_fd(), handover::ADMIN)]),
        );
        let metrics = Arc::new(Metrics::default());
        let (stop, stopped) = watch::channel(false);
        let one = sites.len() == 1 && sites[0].host.is_none();
        let mut running = Vec::with_capacity(sites.len());
        // One identity for every domain's counts: this process.
        let clicks = config.clicks.as_ref().map(|c| (c, ClicksIdentity::new(&c.proxy_name)));
        // The history recorder's name in the checkpoint: the same across this proxy's restarts,
        // another for another proxy on the same host.
        let recorder = format!(
            "{}@{}",
            config.clicks.as_ref().map_or_else(host_name, |c| c.proxy_name.clone()),
            admin_listener.local_addr().map_or_else(|_| "?".to_owned(), |a| a.to_string())
        );
        for plan in sites {
            // With one domain its counters are the process's, unlabelled, as before domains.
            let site_metrics = if one { metrics.clone() } else { Arc::new(Metrics::default()) };
            let clicks = clicks.as_ref().map(|(settings, writer)| (*settings, writer));
            running.push(start_site(plan, site_metrics, &config, clicks, &recorder, stopped.clone()).await);
        }
        // Every domain's client shares the first one's account.
        let couch = running[0].couch.clone();
        let rereading = hangups
            .map(|h| tokio::spawn(reread_password(h, couch, config.couch.password_file.clone(), stopped.clone())));
        let unknown_metrics = Arc::new(Metrics::default());
        let draining = Arc::new(AtomicBool::new(false));
        let admin = Admin {
            process: metrics.clone(),
            sites: running.iter().map(RunningSite::admin).collect(),
            unknown: unknown.as_ref().map(|(log, _, _)| (log.clone(), unknown_metrics.clone())),
            draining: draining.clone(),
        };
        let (handed_over, admin_server) =
            serve_admin(admin_listener, admin, stopped.clone(), socket_activated && admin_inherited);
        let (app, shapes) = handler_app(&config, &running, unknown.as_ref(), geoip, metrics, unknown_metrics.clone());
        let workers = listeners.len();
        let mut limits = Limits::new(config.max_connections, config.header_timeout);
        if self.sockets_shared {
            limits.turn = Some(shared_turn(workers));
        }
        // The last snapshots are written before the listeners close: a restart waiting for this
        // process to exit then loses no time to them (the next process binds its port before it
        // reads them, so connections wait in the kernel's queue meanwhile).
        let snapshots: Vec<Arc<Snapshots>> = running.iter().filter_map(|s| s.snapshots.clone()).collect();
        let (upgraded, upgraded_rx) = oneshot::channel();
        let upgrading = upgrades.map(|signals| {
            let snapshots = snapshots.clone();
            let prepare = move || write_snapshots(snapshots.clone());
            tokio::spawn(lifecycle::upgrade_on_signal(signals, config.upgrade.clone(), handover_fds, prepare, upgraded))
        });
        let shutdown = async move {
            let successor = tokio::select! {
                () = shutdown => None,
                Ok(pid) = upgraded_rx => Some(pid),
            };
            if successor.is_some() {
                let _ = handed_over.send(true);
                return Ending::Upgrade;
            }
            // A stop during an upgrade abandons it (the new process is stopped), and lets go
            // of the copies of the sockets kept for it.
            if let Some(upgrading) = upgrading {
                upgrading.abort();
            }
            draining.store(true, Ordering::Relaxed);
            handover::notify(&[sd_notify::NotifyState::Stopping]);
            write_snapshots(snapshots).await;
            // systemd holds its sockets through a restart: their queues wait for the next process.
            Ending::stopping(socket_activated)
        };
        let public = running.iter().map(|s| s.public_url.to_string()).collect::<Vec<_>>().join(", ");
        let pid_file = config.pid_file.clone();
        let result = serve_on_workers(listeners, app, shapes, limits, shutdown, config.drain, || {
            let threads = if workers == 1 { "1 serving thread".to_owned() } else { format!("{workers} serving threads") };
            let how = match (&predecessor, socket_activated) {
                (Some(_), _) => ", sockets taken over from the process upgraded",
                (None, true) => ", sockets from systemd",
                (None, false) => "",
            };
            tracing::info!(
                "serving redirects on http://{address} (public URL {public}, {threads}; health and metrics on http://{admin_address}); build {BUILD}, pid {}{how}",
                std::process::id()
            );
            lifecycle::serving(pid_file.as_deref(), predecessor);
        })
        .await;
        let _ = stop.send(true);
        // Each domain counts its own responses (with one domain, the process's counters).
        let mut served: u64 = running.iter().map(|s| s.metrics.responses_total()).sum();
        if !one {
            served += unknown_metrics.responses_total();
        }
        let _ = admin_server.await;
        if let Some(rereading) = rereading {
            let _ = rereading.await;
        }
        finish_sites(running, unknown).await;
        lifecycle::stopped(config.pid_file.as_deref());
        if result.is_ok() {
            tracing::info!(
                "stopped: in-flight requests finished and the access log written; {served} requests served since start (build {BUILD}, pid {})",
                std::process::id()
            );
        }
        result
    }
}

impl RunningSite {
    /// What the admin listener reports of it.
    fn admin(&self) -> AdminSite {
        AdminSite {
            host: self.host.as_ref().map(|h| h.to_string()),
            couch: self.couch.clone(),
            store: self.store.clone(),
            metrics: self.metrics.clone(),
            feed: self.feed.clone(),
            log: self.log.clone(),
            snapshots: self.snapshot_status.clone(),
            clicks: self.clicks.as_ref().map(|(_, status)| status.clone()),
            history: self.history.clone(),
        }
    }

    /// What the handler serves of it.
    fn handler_site(&self) -> Site {
        Site {
            store: Some(self.store.clone()),
            log: self.log.clone(),
            metrics: self.metrics.clone(),
            clicks: self.clicks.as_ref().map(|(tally, _)| tally.clone()),
            limits: self.limits.clone(),
        }
    }
}

/// Serves `/healthz` and `/metrics` on `listener` until `stopped` (then it answers "draining"
/// until its own drain ends) or an upgrade's successor serves (which answers from then on):
/// the sender to say the latter, and the server's task. `held_elsewhere`: systemd holds the
/// socket.
fn serve_admin(
    listener: TcpListener,
    admin: Admin,
    mut stopped: watch::Receiver<bool>,
    held_elsewhere: bool,
) -> (watch::Sender<bool>, tokio::task::JoinHandle<()>) {
    let (handed_over, mut admin_handed_over) = watch::channel(false);
    let server = tokio::spawn(accept::run(
        listener,
        Arc::new(admin),
        // Scrapers and health checks: a few connections, never the public's.
        Limits::new(ADMIN_CONNECTIONS, Duration::from_secs(10)),
        async move {
            tokio::select! {
                // (An error: the sender is gone, there was no upgrade.)
                Ok(_) = admin_handed_over.wait_for(|handed| *handed) => Ending::Upgrade,
                _ = stopped.wait_for(|stop| *stop) => Ending::stopping(held_elsewhere),
            }
        },
        Duration::from_secs(1),
    ));
    (handed_over, server)
}

/// The handler's state: the settings, each domain's site (and the sink for unknown hosts), and
/// the response shapes the writer needs, one per domain.
fn handler_app(
    config: &ServerConfig,
    running: &[RunningSite],
    unknown: Option<&(AccessLog, Flusher, PathBuf)>,
    geoip: Option<Arc<crate::visitor::geoip::GeoIp>>,
    metrics: Arc<Metrics>,
    unknown_metrics: Arc<Metrics>,
) -> (Arc<App>, Arc<Vec<Shape>>) {
    let mut settings = Settings::new(&config.cookie_name, config.trusted_proxies.clone());
    settings.honor_privacy_signals = config.honor_privacy_signals;
    settings.anonymize_ip = config.anonymize_ip;
    settings.fallback = config.fallback_url.as_deref().map(Arc::from);
    if let Some(db) = &geoip {
        tracing::info!(
            "country rules use {} ({}, built {})",
            db.path().display(),
            db.database_type(),
            time::OffsetDateTime::from_unix_timestamp(db.build_epoch() as i64)
                .map(|t| t.date().to_string())
                .unwrap_or_default()
        );
    }
    settings.geoip = geoip;
    let mut shapes: Vec<Shape> =
        running.iter().map(|s| Shape::new(s.public_url.clone(), &config.cookie_name)).collect();
    let sites = if running.len() == 1 && running[0].host.is_none() {
        Sites::single(running[0].handler_site())
    } else {
        let default =
            config.default_domain.as_ref().and_then(|d| running.iter().position(|s| s.host.as_ref() == Some(d)));
        let hosts = running.iter().map(|s| (s.host.clone().expect("named domains"), s.handler_site())).collect();
        // Requests for no configured host: a 404 logged apart, written as the first
        // domain's (no shortlink is named; the cookie's Secure follows that domain).
        let log = unknown.map_or(&running[0].log, |(log, _, _)| log);
        let sink = Site {
            store: None,
            log: log.clone(),
            metrics: unknown_metrics,
            clicks: None,
            limits: Arc::new(VisitLimits::new(None)),
        };
        shapes.push(Shape::new(running[default.unwrap_or(0)].public_url.clone(), &config.cookie_name));
        Sites::new(hosts, default, sink)
    };
    (Arc::new(App { sites, metrics, settings }), Arc::new(shapes))
}

/// Whether a thread with `own` connections open should accept the next one from a socket
/// `sharers` threads share (systemd's one socket), with `open` open in all. Every thread's
/// epoll wakes for a new connection and the first to look takes it, so one thread could take
/// most of a burst of connections (measured: 0.62x the throughput of one socket per thread,
/// with one thread saturated). As nginx's `accept_disabled` does, a thread more than one
/// connection above the threads' average leaves the next one to the others.
fn shared_turn(sharers: usize) -> accept::Turn {
    Arc::new(move |own, open| sharers <= 1 || own * sharers <= open + sharers)
}

async fn write_snapshots(snapshots: Vec<Arc<Snapshots>>) {
    for snapshots in snapshots {
        snapshots.write_once().await;
    }
}

/// Runs `task` on a thread `name` with a single-threaded runtime of its own; the handle ends
/// when it does. Where no thread or runtime can be had, it runs on this runtime, said.
fn spawn_on_own_thread<F>(name: &str, task: F) -> tokio::task::JoinHandle<()>
where
    F: Future<Output = ()> + Send + 'static,
{
    let (done, ended) = tokio::sync::oneshot::channel::<()>();
    // The task is handed over once the thread runs: a thread that cannot start leaves it here.
    let (give, take) = std::sync::mpsc::sync_channel::<F>(1);
    let thread = tokio::runtime::Builder::new_current_thread().enable_all().build().and_then(|runtime| {
        std::thread::Builder::new().name(name.to_owned()).spawn(move || {
            if let Ok(task) = take.recv() {
                runtime.block_on(task);
                let _ = done.send(());
            }
        })
    });
    let refused = match thread {
        Ok(_) => match give.send(task) {
            Ok(()) => return tokio::spawn(async move { drop(ended.await) }),
            Err(std::sync::mpsc::SendError(task)) => (task, "its thread ended".to_owned()),
        },
        Err(e) => (task, e.to_string()),
    };
    tracing::warn!("{name} runs beside the serving: no thread of its own ({})", refused.1);
    tokio::spawn(refused.0)
}

/// Each domain's tasks awaited and its access log written, then the unknown hosts' log.
async fn finish_sites(running: Vec<RunningSite>, unknown: Option<(AccessLog, Flusher, PathBuf)>) {
    for site in running {
        for task in site.tasks {
            let _ = task.await;
        }
        site.flusher.finish(LOG_FLUSH_TIMEOUT).await;
    }
    if let Some((_, flusher, _)) = unknown {
        flusher.finish(LOG_FLUSH_TIMEOUT).await;
    }
}

/// The folder, beside the domains' own, of the access log of requests for no configured domain.
pub const UNKNOWN_HOSTS: &str = "_unknown";

/// Starts one domain: its store, from its snapshot where one passes its checks, its `_changes`
/// feed, its snapshots, its log retention and its warm-up.
async fn start_site(
    plan: SitePlan,
    metrics: Arc<Metrics>,
    config: &ServerConfig,
    clicks: Option<(&ClicksConfig, &ClicksIdentity)>,
    recorder: &str,
    stopped: watch::Receiver<bool>,
) -> RunningSite {
    let SitePlan { host, couch, public_url, log, flusher, log_dir, state_dir } = plan;
    let store = Arc::new(LinkStore::new(couch.clone(), metrics.clone(), config.cache_capacity, config.cold_reads));
    let feed = Arc::new(FeedStatus::default());
    let snapshot_status = Arc::new(SnapshotStatus::default());
    let mut follower = Follower::new(couch.clone(), store.clone(), metrics.clone(), feed.clone());
    // Before anything is served: from a snapshot that passes its checks, the cache is whole at
    // once; otherwise it fills from CouchDB while serving (a warm start).
    let restored = match &state_dir {
        Some(dir) => {
            let identity = couch.database_identity().await.map_err(|e| Causes(&e).to_string());
            let file = SnapshotFile::new(dir);
            snapshot::restore(
                &file,
                identity.as_deref().map_err(Clone::clone),
                couch.database(),
                &store,
                &snapshot_status,
            )
            .await
        }
        None => None,
    };
    // A warm-up unless the snapshot held a whole one.
    let warmed = restored.as_ref().is_some_and(|r| r.complete);
    // "warming" in /healthz from the start, until the first warm-up is done.
    store.set_warming(config.warm_start && !warmed);
    if let Some(restored) = restored {
        follower = follower.resume_from(restored.seq);
    }
    let mut tasks = vec![tokio::spawn(follower.run(stopped.clone()))];
    let snapshots = state_dir.as_ref().map(|dir| {
        Arc::new(Snapshots {
            file: SnapshotFile::new(dir),
            couch: couch.clone(),
            store: store.clone(),
            feed: feed.clone(),
            warm_start: config.warm_start,
            interval: config.snapshot_interval,
            status: snapshot_status.clone(),
            writing: Default::default(),
        })
    });
    tasks.extend(snapshots.clone().map(|s| tokio::spawn(s.run(stopped.clone()))));
    let retention =
        Retention { dir: log_dir, keep_days: NonZeroU32::new(config.log_keep_days), compress: config.log_compress };
    tasks.push(tokio::spawn(retention.run(stopped.clone())));
    let warmed_for = if warmed { store.synced_epoch() } else { None };
    if config.warm_start {
        tasks.push(tokio::spawn(crate::warm::Warmer::run(couch.clone(), store.clone(), warmed_for, stopped.clone())));
    }
    let history_db = config.history_db.database(Companion::History, couch.database()).filter(|_| config.history);
    let history = history_db.map(|history_db| {
        // The recorder reads and writes in pages of hundreds of documents: on a thread of its
        // own, with connections of its own, so that neither its work nor CouchDB's answers to
        // it ever wait on a serving thread (on one, it raised that thread's p99 during a first
        // pass: 122 ms against 9 ms beside it, #77).
        let own = couch.with_own_connections().unwrap_or_else(|_| couch.clone());
        let recorder = crate::history::recorder::Recorder::new(
            own.clone(),
            own.for_database(&history_db),
            recorder.to_owned(),
            config.history_timing,
        )
        .yielding_to({
            let metrics = metrics.clone();
            Arc::new(move || metrics.responses_total())
        });
        let status = recorder.status.clone();
        // After the warm-up: a start reads links first, history after.
        let store = store.clone();
        let warmed = async move {
            while store.is_warming() {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        };
        tasks.push(spawn_on_own_thread("couchlink-history", recorder.run(warmed, stopped.clone())));
        status
    });
    // Visit limits count from the live counts' view when they are on; else from this start.
    let mut limits = Arc::new(VisitLimits::new(None));
    let clicks = clicks.and_then(|(settings, writer)| {
        Some((settings.db.database(Companion::Clicks, couch.database())?, settings, writer))
    });
    let clicks = match clicks {
        Some((db, settings, writer)) => {
            limits = Arc::new(VisitLimits::new(Some(couch.for_database(&db))));
            let clicks = ClicksWriter {
                couch: couch.for_database(&db),
                tally: Arc::default(),
                writer: writer.clone(),
                interval_secs: settings.interval_secs,
                queue_bytes: settings.queue_bytes,
                status: Arc::default(),
                limits: limits.clone(),
            };
            let handles = (clicks.tally.clone(), clicks.status.clone());
            tasks.push(tokio::spawn(clicks.run(stopped)));
            Some(handles)
        }
        None => None,
    };
    RunningSite {
        host,
        public_url,
        couch,
        store,
        clicks,
        limits,
        history,
        metrics,
        feed,
        snapshot_status,
        snapshots,
        log,
        flusher,
        tasks,
    }
}

/// Serves `app` from one thread per entry of `listeners` until `shutdown` completes, calling
/// `serving` once every thread accepts.
///
/// Each extra thread runs its own single-threaded runtime accepting on its own sockets
/// (nginx-style: a connection lives on one thread, so serving it never wakes another; on 2
/// cores that is worth about 15% of throughput over one multi-threaded runtime). A thread that
/// cannot start stops the whole start-up at once.
async fn serve_on_workers(
    listeners: Vec<Vec<std::net::TcpListener>>,
    app: Arc<App>,
    shapes: Arc<Vec<Shape>>,
    limits: Limits,
    shutdown: impl Future<Output = Ending>,
    drain: Duration,
    serving: impl FnOnce(),
) -> Result<(), StartError> {
    let workers = listeners.len();
    let (close, closed) = watch::channel(None::<Ending>);
    let mut threads = Vec::new();
    let (ready_tx, mut ready_rx) = tokio::sync::mpsc::unbounded_channel::<(usize, std::io::Result<()>)>();
    app.metrics.set_workers(workers);
    let mut listeners = listeners.into_iter();
    let first = listeners.next().expect("at least one serving thread");
    for (n, sockets) in (1..).zip(listeners) {
        let (service, closed, ready, limits) = (
            Arc::new(RedirectService::new(app.clone(), shapes.clone(), n)),
            closed.clone(),
            ready_tx.clone(),
            limits.clone(),
        );
        let thread = std::thread::Builder::new().name(format!("couchlink-worker-{n}")).spawn(move || {
            let started = tokio::runtime::Builder::new_current_thread().enable_all().build().and_then(|runtime| {
                let sockets = runtime.block_on(async {
                    sockets.into_iter().map(TcpListener::from_std).collect::<std::io::Result<Vec<_>>>()
                })?;
                Ok((runtime, sockets))
            });
            let (runtime, sockets) = match started {
                Ok(started) => {
                    let _ = ready.send((n, Ok(())));
                    started
                }
                Err(e) => {
                    let _ = ready.send((n, Err(e)));
                    return;
                }
            };
            // Dropped, so that the start-up waiting for every thread's report can go on.
            drop(ready);
            runtime.block_on(serve_redirects(sockets, service, limits, closed, drain));
        });
        match thread {
            Ok(thread) => threads.push(thread),
            Err(e) => {
                let _ = ready_tx.send((n, Err(e)));
            }
        }
    }
    drop(ready_tx);
    // Every thread reports once, started or not, before the proxy says it serves.
    let mut failed = None;
    while let Some((n, started)) = ready_rx.recv().await {
        if let Err(e) = started {
            failed.get_or_insert(StartError::Worker(n, e));
        }
    }
    let sockets = match failed {
        None => first.into_iter().map(TcpListener::from_std).collect::<std::io::Result<Vec<_>>>(),
        Some(error) => Err(std::io::Error::other(error.to_string())),
    };
    let sockets = match sockets {
        Ok(sockets) => sockets,
        Err(e) => {
            let _ = close.send(Some(Ending::Close));
            join(threads).await;
            return Err(StartError::Worker(0, e));
        }
    };
    serving();
    let shutdown = async move {
        let ending = shutdown.await;
        let _ = close.send(Some(ending));
    };
    let service = Arc::new(RedirectService::new(app, shapes, 0));
    tokio::join!(shutdown, serve_redirects(sockets, service, limits, closed, drain));
    join(threads).await;
    Ok(())
}

/// One serving thread's accept loops (one per socket it was dealt), with couchlink's own
/// HTTP/1 connections, until `closed` says how serving ends.
async fn serve_redirects(
    sockets: Vec<TcpListener>,
    worker: Arc<RedirectService>,
    limits: Limits,
    closed: watch::Receiver<Option<Ending>>,
    drain: Duration,
) {
    let loops = sockets.into_iter().map(|listener| {
        let mut closed = closed.clone();
        let ending = async move {
            match closed.wait_for(Option::is_some).await {
                Ok(ending) => ending.unwrap_or(Ending::Close),
                Err(_) => Ending::Close,
            }
        };
        let connections = Connections::new(worker.clone(), limits.header_timeout);
        accept::run_connections(listener, connections, limits.clone(), ending, drain)
    });
    // This thread's live counts, handed over when the writer asks, and once more at the end.
    let tallies: Vec<Tally> = worker.app.sites.iter().filter_map(|site| site.clicks.as_deref().cloned()).collect();
    let handing_over = async {
        futures_util::future::join_all(tallies.iter().cloned().map(Tally::hand_over_when_asked)).await;
        // None to hand over (no counting): serving alone decides when this thread ends.
        std::future::pending::<()>().await
    };
    tokio::select! {
        _ = futures_util::future::join_all(loops) => {}
        () = handing_over => {}
    }
    tallies.iter().for_each(Tally::hand_over);
}

/// `sockets` dealt out to `workers` serving threads, round-robin; a thread left without one
/// shares a copy of another's (one queue, two threads: see [`Limits::my_turn`]).
fn deal(sockets: Vec<std::net::TcpListener>, workers: usize) -> std::io::Result<Vec<Vec<std::net::TcpListener>>> {
    let mut dealt: Vec<Vec<std::net::TcpListener>> = (0..workers).map(|_| Vec::new()).collect();
    let count = sockets.len();
    for (i, socket) in sockets.into_iter().enumerate() {
        dealt[i % workers].push(socket);
    }
    for n in count..workers {
        let copy = dealt[n % count][0].try_clone()?;
        dealt[n].push(copy);
    }
    Ok(dealt)
}

/// This build's name: `COUCHLINK_BUILD` when it was compiled (say, a commit), else the
/// package version. Logged at start and stop, and in `/metrics`, so that an upgrade shows
/// which build serves.
pub const BUILD: &str = match option_env!("COUCHLINK_BUILD") {
    Some(build) => build,
    None => env!("CARGO_PKG_VERSION"),
};

/// The redirect service as one serving thread runs it: the handler's policy over the
/// protocol's connections, with the thread's connections counted apart (so that an uneven
/// spread shows in `/metrics`). Public so that the redirect path's instruction budget
/// (`benches/budget.rs`) drives exactly what a serving thread runs.
pub struct RedirectService {
    app: Arc<App>,
    /// One per site, in the order of the app's sites.
    shapes: Arc<Vec<Shape>>,
    index: usize,
}

impl RedirectService {
    /// Serving thread `index`'s service of `app`, whose sites' responses are written with
    /// `shapes` (one per site, in the same order).
    pub fn new(app: Arc<App>, shapes: Arc<Vec<Shape>>, index: usize) -> RedirectService {
        RedirectService { app, shapes, index }
    }
}

impl Respond for RedirectService {
    type Location = Location;

    async fn respond(&self, request: &Request<'_>, peer: SocketAddr) -> Reply<Location> {
        crate::handler::respond(&self.app, request, peer).await
    }

    fn refuse(&self, refusal: Refusal, request: Option<&Request<'_>>, peer: SocketAddr) -> Reply<Location> {
        crate::handler::refuse(&self.app, refusal.status(), request, peer)
    }

    fn shape(&self, site: usize) -> &Shape {
        &self.shapes[site]
    }

    fn accepted(&self) {
        self.app.metrics.connection_accepted(self.index);
    }
}

async fn join(threads: Vec<std::thread::JoinHandle<()>>) {
    let _ = tokio::task::spawn_blocking(move || threads.into_iter().for_each(|t| drop(t.join()))).await;
}

/// Raises this process's open-file limit to what the system allows (as nginx's
/// `worker_rlimit_nofile` does), and warns when that still cannot hold `max_connections`: past
/// it, accepting fails and is retried every 50 ms until connections close.
fn raise_fd_limit(max_connections: usize) {
    let wanted = max_connections as u64 + SPARE_FDS;
    match rlimit::increase_nofile_limit(wanted) {
        Ok(limit) if limit < wanted => tracing::warn!(
            "only {limit} open files allowed (ulimit -n): fewer than COUCHLINK_MAX_CONNECTIONS ({max_connections}) plus {SPARE_FDS} spare"
        ),
        Ok(_) => {}
        Err(e) => tracing::warn!("cannot raise the open-file limit: {e}"),
    }
}

/// Fails on a CouchDB that answers "no" (credentials, database); only warns when it does not
/// answer at all, since the proxy can serve (503s, then cached links) and catch up later.
async fn check_database(couch: &CouchClient, editor_role: &str) -> Result<(), StartError> {
    let (url, user, db) = (couch.server_url().to_owned(), couch.user().to_owned(), couch.database().to_owned());
    match couch.database_info().await {
        Ok(Some(_)) => {
            warn_if_writer(couch, editor_role).await;
            Ok(())
        }
        Ok(None) => Err(StartError::NoDatabase { db, url }),
        Err(e) if e.is_unreachable() => {
            tracing::warn!("{}; serving anyway: 503 for links not known yet, until it answers", Causes(&e));
            Ok(())
        }
        Err(source @ CouchError::Refused { status: 401 | 403, .. }) => {
            Err(StartError::Refused { url, user, db, source: Box::new(source) })
        }
        Err(source) => Err(StartError::Couch { url, source: Box::new(source) }),
    }
}

/// The proxy needs only to read: running it as an account that can write links works, but
/// a leaked proxy credential should not be able to change where printed codes lead.
async fn warn_if_writer(couch: &CouchClient, editor_role: &str) {
    if let Ok(session) = couch.session().await {
        let editor = [editor_role, crate::domain::SHARED_EDITOR].iter().any(|r| session.has_role(r));
        if session.has_role("_admin") || editor {
            tracing::warn!(
                "serving as {:?}, an account that can change links; use the read-only account `couchlink setup` creates",
                couch.user()
            );
        }
    }
}

/// On SIGHUP, reads the CouchDB password again from its file (`COUCHLINK_COUCHDB_PASSWORD_FILE`),
/// so that an operator rotates it without a restart; the `_changes` feed then tries at once.
async fn reread_password(
    mut hangups: tokio::signal::unix::Signal,
    couch: CouchClient,
    file: Option<PathBuf>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            got = hangups.recv() => if got.is_none() { return },
            _ = stop.wait_for(|stop| *stop) => return,
        }
        let Some(file) = &file else {
            tracing::info!("SIGHUP: no password file to read again (COUCHLINK_COUCHDB_PASSWORD_FILE)");
            continue;
        };
        match crate::couch::read_secret_file(file) {
            Ok(password) => {
                couch.set_password(password);
                tracing::info!("SIGHUP: read the CouchDB password again from {}", file.display());
            }
            Err(e) => tracing::warn!("SIGHUP: {e}; the password read before is still used"),
        }
    }
}
