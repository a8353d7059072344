//! The threads and listeners that serve: one single-threaded runtime per serving thread, each
//! accepting on sockets of its own; the admin listener; the open-file limit they need.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::admin::Admin;
use crate::clicks::Tally;
use crate::handler::{App, Location};
use crate::http::accept::{self, Limits};
use crate::http::limits::Refusal;
use crate::http::{Connections, Respond, Shape};
use crate::lifecycle::Ending;
use crate::message::{Reply, Request};

use super::config::StartError;

/// Connections the admin listener (health checks, metrics scrapers) takes at once.
pub(super) const ADMIN_CONNECTIONS: usize = 64;

/// File descriptors kept for everything but client connections: the access log, CouchDB
/// connections, the listeners.
pub(super) const SPARE_FDS: u64 = 256;

/// Serves `/healthz` and `/metrics` on `listener` until `stopped` (then it answers "draining"
/// until its own drain ends) or an upgrade's successor serves (which answers from then on):
/// the sender to say the latter, and the server's task. `held_elsewhere`: systemd holds the
/// socket.
pub(super) fn serve_admin(
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

/// Whether a thread with `own` connections open should accept the next one from a socket
/// `sharers` threads share (systemd's one socket), with `open` open in all. Every thread's
/// epoll wakes for a new connection and the first to look takes it, so one thread could take
/// most of a burst of connections (measured: 0.62x the throughput of one socket per thread,
/// with one thread saturated). As nginx's `accept_disabled` does, a thread more than one
/// connection above the threads' average leaves the next one to the others.
pub(super) fn shared_turn(sharers: usize) -> accept::Turn {
    Arc::new(move |own, open| sharers <= 1 || own * sharers <= open + sharers)
}

/// Serves `app` from one thread per entry of `listeners` until `shutdown` completes, calling
/// `serving` once every thread accepts.
///
/// Each extra thread runs its own single-threaded runtime accepting on its own sockets
/// (nginx-style: a connection lives on one thread, so serving it never wakes another; on 2
/// cores that is worth about 15% of throughput over one multi-threaded runtime). A thread that
/// cannot start stops the whole start-up at once.
pub(super) async fn serve_on_workers(
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
pub(super) async fn serve_redirects(
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
pub(super) fn deal(
    sockets: Vec<std::net::TcpListener>,
    workers: usize,
) -> std::io::Result<Vec<Vec<std::net::TcpListener>>> {
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

pub(super) async fn join(threads: Vec<std::thread::JoinHandle<()>>) {
    let _ = tokio::task::spawn_blocking(move || threads.into_iter().for_each(|t| drop(t.join()))).await;
}

/// Raises this process's open-file limit to what the system allows (as nginx's
/// `worker_rlimit_nofile` does), and warns when that still cannot hold `max_connections`: past
/// it, accepting fails and is retried every 50 ms until connections close.
pub(super) fn raise_fd_limit(max_connections: usize) {
    let wanted = max_connections as u64 + SPARE_FDS;
    match rlimit::increase_nofile_limit(wanted) {
        Ok(limit) if limit < wanted => tracing::warn!(
            "only {limit} open files allowed (ulimit -n): fewer than COUCHLINK_MAX_CONNECTIONS ({max_connections}) plus {SPARE_FDS} spare"
        ),
        Ok(_) => {}
        Err(e) => tracing::warn!("cannot raise the open-file limit: {e}"),
    }
}
