//! `couchlink serve`: wires the access log, CouchDB, the link store, the feed and the listeners
//! together, and shuts them down in order.

use std::future::Future;
use std::net::SocketAddr;
use std::num::{NonZeroU32, NonZeroUsize};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::CouchArgs;
use crate::accept::Limits;
use crate::access_log::{AccessLog, OpenError};
use crate::admin::Admin;
use crate::client_ip::{ForwardedHeader, TrustedProxies};
use crate::couch::{CouchClient, CouchError};
use crate::domain::PublicUrl;
use crate::errors::Causes;
use crate::follower::{FeedStatus, Follower};
use crate::handler::{App, Settings};
use crate::http1::{Persistence, Request};
use crate::log_retention::Retention;
use crate::metrics::Metrics;
use crate::store::LinkStore;

/// How long the access log may take to write its backlog at shutdown.
const LOG_FLUSH_TIMEOUT: Duration = Duration::from_secs(30);
/// Connections the admin listener (health checks, metrics scrapers) takes at once.
const ADMIN_CONNECTIONS: usize = 64;
/// File descriptors kept for everything but client connections: the access log, CouchDB
/// connections, the listeners.
const SPARE_FDS: u64 = 256;

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
}

/// A cookie name is an RFC 6265 token.
fn parse_cookie_name(s: &str) -> Result<String, String> {
    let token = !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
    token.then(|| s.to_owned()).ok_or_else(|| "a cookie name is letters, digits and !#$%&'*+-.^_`|~".into())
}

impl ServeArgs {
    /// Binds both listeners and serves until SIGTERM or SIGINT, on a single-threaded runtime
    /// of its own (plus one more such thread per extra worker).
    pub fn execute(self) -> Result<(), StartError> {
        let runtime = super::current_thread_runtime().map_err(StartError::Runtime)?;
        runtime.block_on(async {
            let listener = crate::accept::bind_shareable(self.listen).map_err(|source| StartError::Bind {
                addr: self.listen,
                what: "redirects",
                source,
            })?;
            let admin_listener = TcpListener::bind(self.admin_listen).await.map_err(|source| StartError::Bind {
                addr: self.admin_listen,
                what: "health and metrics",
                source,
            })?;
            run(self, listener, admin_listener, shutdown_signal()).await
        })
    }

    /// Serving threads: as asked, or one per CPU core.
    fn worker_count(&self) -> usize {
        self.workers
            .map_or_else(|| std::thread::available_parallelism().map_or(1, NonZeroUsize::get), NonZeroUsize::get)
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
    /// A serving thread could not start.
    #[error("cannot start serving thread {0}")]
    Worker(usize, #[source] std::io::Error),
    /// The async runtime could not start.
    #[error("cannot start the async runtime")]
    Runtime(#[source] std::io::Error),
}

/// Serves redirects on `listener` (made by [`crate::accept::bind_shareable`]) and health and
/// metrics on `admin_listener` until `shutdown` completes; then stops accepting, lets in-flight
/// requests finish, stops the admin listener and the feed, and writes every access log line
/// before returning. Listeners are passed in so that tests can bind port 0.
pub async fn run(
    args: ServeArgs,
    listener: std::net::TcpListener,
    admin_listener: TcpListener,
    shutdown: impl Future<Output = ()>,
) -> Result<(), StartError> {
    let workers = args.worker_count();
    let bound = listener.local_addr().map_err(StartError::Runtime)?;
    raise_fd_limit(args.max_connections.get());
    let public_url = match args.public_url {
        Some(url) => url,
        None => {
            let local = PublicUrl::from_listen(bound);
            if bound.ip().is_unspecified() {
                tracing::warn!(
                    "COUCHLINK_PUBLIC_URL is not set: Link headers name {local}; set it to the address people reach"
                );
            }
            local
        }
    };
    let (log, flusher) = AccessLog::open(&args.log_dir)?;
    // Only for a warning: a role name CouchDB would refuse cannot be held either.
    let editor_role = args.roles.roles(&args.couch.db).map(|r| r.editor).unwrap_or_default();
    let couch = CouchClient::new(&args.couch.into()).map_err(|e| StartError::Client(Box::new(e)))?;
    check_database(&couch, &editor_role).await?;

    let metrics = Arc::new(Metrics::default());
    let store = Arc::new(LinkStore::new(couch.clone(), metrics.clone(), args.cache_capacity, args.cold_reads.get()));
    // "warming" in /healthz from the start, until the first warm-up is done.
    store.set_warming(args.warm_start);
    let feed = Arc::new(FeedStatus::default());
    let (stop, stopped) = watch::channel(false);
    let follower = Follower::new(couch.clone(), store.clone(), metrics.clone(), feed.clone());
    let follower = tokio::spawn(follower.run(stopped.clone()));
    let retention = Retention {
        dir: args.log_dir.clone(),
        keep_days: NonZeroU32::new(args.log_keep_days),
        compress: args.log_compress,
    };
    let retention = tokio::spawn(retention.run(stopped.clone()));
    let warmer =
        args.warm_start.then(|| tokio::spawn(crate::warm::Warmer::run(couch.clone(), store.clone(), stopped.clone())));
    let admin = Arc::new(Admin { couch, store: store.clone(), metrics: metrics.clone(), feed, log: log.clone() });
    let admin_addr = admin_listener.local_addr().map_err(StartError::Runtime)?;
    let mut admin_stop = stopped;
    let admin_server = tokio::spawn(crate::accept::run(
        admin_listener,
        admin,
        // Scrapers and health checks: a few connections, never the public's.
        Limits::new(ADMIN_CONNECTIONS, Duration::from_secs(10)),
        async move {
            let _ = admin_stop.wait_for(|stop| *stop).await;
        },
        Duration::from_secs(1),
    ));

    let mut settings =
        Settings::new(public_url.clone(), &args.cookie_name, args.trusted_proxies.reading(args.forwarded_header));
    settings.honor_privacy_signals = args.honor_privacy_signals;
    settings.anonymize_ip = args.anonymize_ip;
    let app = Arc::new(App { store, log, metrics, settings });
    let drain = Duration::from_secs(args.drain_secs);
    let limits = Limits::new(args.max_connections.get(), Duration::from_secs(args.header_timeout_secs.get().into()));
    let result = serve_on_workers(listener, app, limits, shutdown, drain, workers, || {
        let threads = if workers == 1 { "1 serving thread".to_owned() } else { format!("{workers} serving threads") };
        tracing::info!(
            "serving redirects on http://{bound} (public URL {public_url}, {threads}; health and metrics on http://{admin_addr})"
        );
    })
    .await;
    let _ = stop.send(true);
    let _ = tokio::join!(follower, admin_server, retention);
    if let Some(warmer) = warmer {
        let _ = warmer.await;
    }
    flusher.finish(LOG_FLUSH_TIMEOUT).await;
    result
}

/// Serves `app` on `listener` from `workers` threads until `shutdown` completes, calling
/// `serving` once every thread accepts.
///
/// Each extra thread runs its own single-threaded runtime accepting on its own `SO_REUSEPORT`
/// sibling of the socket (see [`crate::accept::bind_shareable`]), nginx-style: a connection
/// lives on one thread, so serving it never wakes another (on 2 cores that is worth about 15%
/// of throughput over one multi-threaded runtime). A thread that cannot start stops the whole
/// start-up at once.
async fn serve_on_workers(
    listener: std::net::TcpListener,
    app: Arc<App>,
    limits: Limits,
    shutdown: impl Future<Output = ()>,
    drain: Duration,
    workers: usize,
    serving: impl FnOnce(),
) -> Result<(), StartError> {
    let (close, closed) = watch::channel(false);
    let mut threads = Vec::new();
    let (ready_tx, mut ready_rx) = tokio::sync::mpsc::unbounded_channel::<(usize, std::io::Result<()>)>();
    app.metrics.set_workers(workers);
    for n in 1..workers {
        let (app, mut closed, ready, limits) =
            (Arc::new(Worker { app: app.clone(), index: n }), closed.clone(), ready_tx.clone(), limits.clone());
        let socket = crate::accept::bind_alongside(&listener);
        let thread = std::thread::Builder::new().name(format!("couchlink-worker-{n}")).spawn(move || {
            let started = socket.and_then(|socket| {
                let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
                let listener = runtime.block_on(async { TcpListener::from_std(socket) })?;
                Ok((runtime, listener))
            });
            let (runtime, listener) = match started {
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
            runtime.block_on(async move {
                let stop = async move {
                    let _ = closed.wait_for(|closed| *closed).await;
                };
                serve_redirects(listener, app, limits, stop, drain).await;
            });
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
    if let Some(error) = failed {
        let _ = close.send(true);
        join(threads).await;
        return Err(error);
    }
    let listener = TcpListener::from_std(listener).map_err(|e| StartError::Worker(0, e))?;
    serving();
    let shutdown = async move {
        shutdown.await;
        let _ = close.send(true);
    };
    serve_redirects(listener, Arc::new(Worker { app, index: 0 }), limits, shutdown, drain).await;
    join(threads).await;
    Ok(())
}

/// One serving thread's accept loop, with couchlink's own HTTP/1 connections.
async fn serve_redirects(
    listener: TcpListener,
    worker: Arc<Worker>,
    limits: Limits,
    shutdown: impl Future<Output = ()>,
    drain: Duration,
) {
    let connections = crate::http1::Connections::new(worker, limits.header_timeout);
    crate::accept::run_connections(listener, connections, limits, shutdown, drain).await;
}

/// The redirect service as one serving thread runs it: the same [`App`], with the thread's
/// connections counted apart (so that an uneven spread shows in `/metrics`).
struct Worker {
    app: Arc<App>,
    index: usize,
}

impl crate::http1::Respond for Worker {
    async fn respond(&self, request: &Request<'_>, peer: SocketAddr, persistence: Persistence, out: &mut Vec<u8>) {
        crate::handler::handle(&self.app, request, peer, persistence, out).await;
    }

    fn reject(&self, peer: SocketAddr, status: u16, out: &mut Vec<u8>) {
        crate::handler::reject(&self.app, peer, status, out);
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

/// Completes on SIGTERM or SIGINT.
pub(crate) async fn shutdown_signal() {
    let term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate());
    let Ok(mut term) = term else {
        // Without a SIGTERM handler, Ctrl-C still works.
        let _ = tokio::signal::ctrl_c().await;
        return;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
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
