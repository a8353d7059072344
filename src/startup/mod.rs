//! Assembly of the proxy (zero2prod's `startup.rs`): [`Application::build`] binds the
//! listeners, opens the access log and checks CouchDB (every misconfiguration is a
//! [`StartError`] here, before anything is served); [`Application::run_until_stopped`] starts
//! the link store, the `_changes` feed, the warm-up, log retention, the admin listener and the
//! serving threads, and shuts them down in order. `couchlink serve` only turns its flags into a
//! [`ServerConfig`]; tests build one directly.
//!
//! Its rooms: `config` (what the proxy is configured with, and what stops a start), `site` (one
//! short domain's parts started, the handler's state built from them, each finished at
//! shutdown), `workers` (the serving threads and the admin listener), `checks` (CouchDB before
//! serving, and the password read again on SIGHUP). This file holds the order they run in.

mod checks;
mod config;
mod site;
mod workers;

pub use config::{host_name, ClicksConfig, ServerConfig, StartError};
pub use workers::RedirectService;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch};

use crate::access_log::{AccessLog, Flusher, LogOptions};
use crate::admin::Admin;
use crate::clicks::doc::Writer as ClicksIdentity;
use crate::couch::CouchClient;
use crate::domain::{Companion, CompanionDb, PublicUrl, Roles, UNKNOWN_HOSTS};
use crate::handover::{self, Giver, Inherited};
use crate::http::accept::{self, Limits};
use crate::lifecycle::{self, Ending};
use crate::metrics::Metrics;
use crate::snapshot::Snapshots;

use checks::{check_database, reread_password};
use site::{finish_sites, handler_app, start_site, write_snapshots, RunningSite, SitePlan};
use workers::{deal, raise_fd_limit, serve_admin, serve_on_workers, shared_turn};

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
        // Nor the links database itself, nor both companions in one.
        let clicks_place = config.clicks.as_ref().map_or(CompanionDb::Off, |c| c.db.clone());
        let dbs: Vec<&str> = match config.domains.is_empty() {
            true => vec![config.couch.db.as_str()],
            false => config.domains.iter().map(|d| d.db.as_str()).collect(),
        };
        for db in dbs {
            crate::domain::companions(db, &clicks_place, &config.history_db)?;
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

/// This build's name: `COUCHLINK_BUILD` when it was compiled (say, a commit), else the
/// package version. Logged at start and stop, and in `/metrics`, so that an upgrade shows
/// which build serves.
pub const BUILD: &str = match option_env!("COUCHLINK_BUILD") {
    Some(build) => build,
    None => env!("CARGO_PKG_VERSION"),
};
