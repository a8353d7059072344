//! `couchlink serve`: wires the access log, CouchDB, the link store and the listeners
//! together, and shuts them down in order.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;

use tokio::sync::watch;

use crate::access_log::{AccessLog, OpenError};
use crate::admin::Admin;
use crate::client_ip::TrustedProxies;
use crate::couch::{CouchClient, CouchConfig, CouchError};
use crate::follower::{FeedStatus, Follower};
use crate::handler::{App, Settings};
use crate::metrics::Metrics;
use crate::store::LinkStore;

/// How long the access log may take to write its backlog at shutdown.
const LOG_FLUSH_TIMEOUT: Duration = Duration::from_secs(30);

/// Everything `serve` needs besides its listeners.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// CouchDB, as the proxy's read-only account.
    pub couch: CouchConfig,
    /// The short links' base URL.
    pub public_url: String,
    /// Access log directory.
    pub log_dir: PathBuf,
    /// Peers whose forwarding headers are believed.
    pub trusted_proxies: TrustedProxies,
    /// The tracking cookie's name.
    pub cookie_name: String,
    /// How long in-flight requests get to finish at shutdown.
    pub drain_timeout: Duration,
    /// Most link entries held in memory.
    pub cache_capacity: usize,
    /// Threads accepting and serving redirects, each with its own single-threaded runtime.
    pub workers: usize,
}

/// A misconfiguration that stops `serve` before it answers anything.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The access log directory is not writable.
    #[error(transparent)]
    Log(#[from] OpenError),
    /// CouchDB answered, and refused (bad credentials, no such database...).
    #[error("{0}")]
    Couch(String),
    /// The listening socket could not be shared with the worker threads.
    #[error("cannot serve on the listener: {0}")]
    Listen(String),
}

/// Runs the proxy on `listener` (health and metrics on `admin_listener`) until `shutdown`
/// completes; then stops accepting, lets in-flight requests finish, stops the admin listener
/// and the feed, and writes every access log line before returning.
pub async fn run(
    config: ServeConfig,
    listener: TcpListener,
    admin_listener: TcpListener,
    shutdown: impl Future<Output = ()>,
) -> Result<(), StartError> {
    let (log, flusher) = AccessLog::open(&config.log_dir)?;
    let couch = CouchClient::new(&config.couch).map_err(|e| StartError::Couch(e.to_string()))?;
    check_database(&couch, &config.couch).await?;

    let metrics = Arc::new(Metrics::default());
    let store = Arc::new(LinkStore::new(couch, metrics.clone(), config.cache_capacity));
    let feed = Arc::new(FeedStatus::default());
    let (stop, stopped) = watch::channel(false);
    let follower = tokio::spawn(Follower::new(store.clone(), metrics.clone(), feed.clone()).run(stopped.clone()));
    let admin = Arc::new(Admin { store: store.clone(), metrics: metrics.clone(), feed, log: log.clone() });
    let mut admin_stop = stopped;
    let admin_server = tokio::spawn(crate::server::run(
        admin_listener,
        admin,
        async move {
            let _ = admin_stop.wait_for(|stop| *stop).await;
        },
        Duration::from_secs(1),
    ));

    let app = Arc::new(App {
        store,
        log,
        metrics,
        settings: Settings::new(&config.public_url, &config.cookie_name, config.trusted_proxies.clone()),
    });
    serve_on_workers(listener, app, shutdown, config.drain_timeout, config.workers).await?;
    let _ = stop.send(true);
    let _ = tokio::join!(follower, admin_server);
    flusher.finish(LOG_FLUSH_TIMEOUT).await;
    Ok(())
}

/// Serves `app` on `listener` from `workers` threads until `shutdown` completes.
///
/// Each extra thread runs its own single-threaded runtime accepting on its own `SO_REUSEPORT`
/// sibling of the socket (see [`crate::server::bind_shareable`]), nginx-style: a connection
/// lives on one thread, so serving it never wakes another (on 2 cores that is worth about 15%
/// of throughput over one multi-threaded runtime).
async fn serve_on_workers(
    listener: TcpListener,
    app: Arc<App>,
    shutdown: impl Future<Output = ()>,
    drain: Duration,
    workers: usize,
) -> Result<(), StartError> {
    let (close, closed) = watch::channel(false);
    let socket = listener.into_std().map_err(|e| StartError::Listen(e.to_string()))?;
    let mut threads = Vec::new();
    for n in 1..workers.max(1) {
        let socket = crate::server::bind_alongside(&socket).map_err(|e| StartError::Listen(e.to_string()))?;
        let (app, mut closed) = (app.clone(), closed.clone());
        let thread = std::thread::Builder::new().name(format!("couchlink-worker-{n}")).spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            runtime.block_on(async move {
                let listener = TcpListener::from_std(socket)?;
                let stop = async move {
                    let _ = closed.wait_for(|closed| *closed).await;
                };
                crate::server::run(listener, app, stop, drain).await;
                Ok::<_, std::io::Error>(())
            })
        });
        threads.push(thread.map_err(|e| StartError::Listen(e.to_string()))?);
    }
    let listener = TcpListener::from_std(socket).map_err(|e| StartError::Listen(e.to_string()))?;
    let shutdown = async move {
        shutdown.await;
        let _ = close.send(true);
    };
    crate::server::run(listener, app, shutdown, drain).await;
    let joined = tokio::task::spawn_blocking(move || threads.into_iter().map(|t| t.join()).collect::<Vec<_>>()).await;
    for result in joined.into_iter().flatten() {
        if let Ok(Err(e)) = result {
            tracing::error!("a worker thread failed: {e}");
        }
    }
    Ok(())
}

/// Fails on a CouchDB that answers "no" (credentials, database); only warns when it does not
/// answer at all, since the proxy can serve (503s, then cached links) and catch up later.
async fn check_database(couch: &CouchClient, config: &CouchConfig) -> Result<(), StartError> {
    let who = config.user.as_deref().unwrap_or("anonymous");
    match couch.get_json(&couch.db_relative("")).await {
        Ok(Some(_)) => {
            warn_if_writer(couch, who).await;
            Ok(())
        }
        Ok(None) => Err(StartError::Couch(format!(
            "database {:?} does not exist on {} (run `couchlink setup` with admin credentials)",
            config.db, config.url
        ))),
        Err(CouchError::Unreachable { source, .. }) => {
            eprintln!(
                "couchlink: CouchDB at {} is unreachable ({source}); serving anyway: 503 for links not known yet, until it answers",
                config.url
            );
            Ok(())
        }
        Err(e @ CouchError::Refused { status: 401 | 403, .. }) => Err(StartError::Couch(format!(
            "CouchDB at {} refused user {who:?} on database {:?}: {}",
            config.url,
            config.db,
            e.reason().unwrap_or_default()
        ))),
        Err(e) => Err(StartError::Couch(format!("CouchDB at {}: {e}", config.url))),
    }
}

/// The proxy needs only to read: running it as an account that can write links works, but
/// a leaked proxy credential should not be able to change where printed codes lead.
async fn warn_if_writer(couch: &CouchClient, who: &str) {
    if let Ok(session) = couch.session().await {
        if session.has_role("_admin") || session.has_role("editor") {
            eprintln!("couchlink: warning: serving as {who:?}, an account that can change links; use the read-only account `couchlink setup` creates");
        }
    }
}
