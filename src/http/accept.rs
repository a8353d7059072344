//! The accept loop every listener shares (binding, the connection cap, a bounded drain), and
//! hyper HTTP/1 connections under hyper-util's graceful shutdown for the admin and agent
//! listeners (the redirect listener has its own, [`super::conn`]).

use std::convert::Infallible;
use std::future::Future;
use std::io::ErrorKind;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderValue, CONNECTION};
use hyper::http::request::Parts;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::Response;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use socket2::{Domain, Protocol, Socket, Type};
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Binds a listener for `addr` that further sockets may share with [`bind_alongside`]
/// (`SO_REUSEPORT`), so that each serving thread gets its own queue and the kernel spreads
/// connections evenly (one shared socket left one thread at 100% and the other at 33%).
///
/// `SO_REUSEPORT` would also let any other process of the same user join the group and take
/// a share of the traffic (a second couchlink started by mistake took 12 of 20 requests). So
/// the port is first bound alone, without it: that fails if anyone listens there, with or
/// without `SO_REUSEPORT`, and the port is refused rather than shared.
pub fn bind_shareable(addr: SocketAddr) -> std::io::Result<std::net::TcpListener> {
    if addr.port() != 0 {
        let probe = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
        // SO_REUSEADDR only passes over connections of an earlier run still in TIME_WAIT; on
        // Linux it never lets two sockets listen on one port.
        probe.set_reuse_address(true)?;
        probe.bind(&addr.into()).map_err(|e| match e.kind() {
            ErrorKind::AddrInUse => std::io::Error::new(
                ErrorKind::AddrInUse,
                "the port is in use by another program (or another couchlink); couchlink does not share its port",
            ),
            _ => e,
        })?;
    }
    reuse_port_listener(addr)
}

/// Another listener on `listener`'s address: a `SO_REUSEPORT` sibling when `listener` was made
/// by [`bind_shareable`], or else a clone of the same socket (one queue, shared).
pub fn bind_alongside(listener: &std::net::TcpListener) -> std::io::Result<std::net::TcpListener> {
    reuse_port_listener(listener.local_addr()?).or_else(|_| listener.try_clone())
}

fn reuse_port_listener(addr: SocketAddr) -> std::io::Result<std::net::TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(1024)?;
    Ok(socket.into())
}

/// What a hyper listener (admin, agent) serves: requests in, responses out, never an error.
pub trait Service: Send + Sync + 'static {
    /// Answers one request (its body is not read: nothing here needs one).
    fn call(&self, request: Parts, peer: SocketAddr) -> impl Future<Output = Response<Full<Bytes>>> + Send;

    /// Answers one request whose body the service may read: by default, [`Service::call`]
    /// with the body left unread (the admin listener needs none; the DIDComm agent reads its
    /// messages here).
    fn call_with_body(
        &self,
        request: hyper::Request<hyper::body::Incoming>,
        peer: SocketAddr,
    ) -> impl Future<Output = Response<Full<Bytes>>> + Send {
        let (parts, _body) = request.into_parts();
        self.call(parts, peer)
    }
}

/// Whether an accept loop takes the next connection now, from its own connections open and all
/// open on the listener's permits: whoever dealt the sockets decides (several threads sharing
/// one socket take turns: `startup`'s `shared_turn`).
pub type Turn = Arc<dyn Fn(usize, usize) -> bool + Send + Sync>;

/// What a listener allows its clients: how many connections at once, and how long a request
/// head may take to arrive.
#[derive(Clone)]
pub struct Limits {
    /// One permit per connection served, shared by every thread accepting on the listener. At
    /// none left, each thread keeps the one connection it has just accepted waiting, accepts no
    /// more (waiting, not spinning), and the kernel's backlog holds the rest until one closes.
    pub connections: Arc<Semaphore>,
    /// The most connections, as configured (for messages).
    pub max_connections: usize,
    /// How long a connection may take to deliver a complete request head, counted from its
    /// opening or from its previous response. One timer serves both, so this is the
    /// idle keep-alive timeout and the slow-header (slowloris) timeout at once.
    pub header_timeout: Duration,
    /// When to accept: always, unless set.
    pub turn: Option<Turn>,
}

impl std::fmt::Debug for Limits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Limits")
            .field("max_connections", &self.max_connections)
            .field("header_timeout", &self.header_timeout)
            .field("turn", &self.turn.is_some())
            .finish()
    }
}

impl Limits {
    /// `max_connections` open at once, request heads within `header_timeout`.
    pub fn new(max_connections: usize, header_timeout: Duration) -> Limits {
        Limits { connections: Arc::new(Semaphore::new(max_connections)), max_connections, header_timeout, turn: None }
    }

    /// Connections open on these permits, every loop's.
    fn open(&self) -> usize {
        self.max_connections - self.connections.available_permits()
    }

    fn my_turn(&self, own: usize) -> bool {
        self.turn.as_ref().is_none_or(|turn| turn(own, self.open()))
    }
}

/// How long a loop whose [`Turn`] it is not leaves accepting to the others.
const SHARED_PAUSE: Duration = Duration::from_millis(1);

/// How often reaching the connection cap is said on stderr, at most.
const CAP_WARNING_INTERVAL: Duration = Duration::from_secs(60);

/// At shutdown, how long connections still in use may go on, each next response telling the
/// client to close, before idle ones are closed under it.
pub const LAME_DUCK: Duration = Duration::from_secs(1);

/// How a listener stops accepting: why is the process's business (`crate::lifecycle`), this is
/// only what the loop does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stop {
    /// Accept and answer the connections the kernel already completed before the listener
    /// closes (this process alone holds the socket, and closing it resets them), or leave them
    /// to the socket's other holder.
    pub answer_queue: bool,
    /// How long connections still in use go on, each told to close after its next response,
    /// before the idle ones are closed (at most the drain).
    pub lame_duck: Duration,
}

/// A shutdown future that says nothing more: the queue answered, the lame-duck second.
impl From<()> for Stop {
    fn from((): ()) -> Stop {
        Stop { answer_queue: true, lame_duck: LAME_DUCK }
    }
}

/// How a listener serves the connections it accepts, and stops them.
pub trait Connections {
    /// Serves one accepted connection on its own task, holding `permit` until it closes.
    fn serve(&self, stream: tokio::net::TcpStream, peer: SocketAddr, permit: Option<OwnedSemaphorePermit>);

    /// From now on, every response tells its client to close, and its connection ends after it.
    fn start_closing(&self);

    /// Connections still open.
    fn open(&self) -> usize;

    /// Closes the idle connections, lets the others finish their request, and completes once
    /// all have closed.
    fn close_idle_and_wait(self) -> impl Future<Output = ()>;
}

/// Serves `service` with hyper on `listener`, as [`run_connections`] does.
pub async fn run<S: Service, E: Into<Stop>>(
    listener: TcpListener,
    service: Arc<S>,
    limits: Limits,
    shutdown: impl Future<Output = E>,
    drain: Duration,
) {
    let connections = HyperConnections {
        service,
        graceful: GracefulShutdown::new(),
        closing: Arc::new(AtomicBool::new(false)),
        header_timeout: limits.header_timeout,
    };
    run_connections(listener, connections, limits, shutdown, drain).await;
}

/// Accepts on `listener` until `shutdown` completes, then stops accepting and gives in-flight
/// connections up to `drain` to finish. Unless the [`Stop`] answers the queue, what waits in it
/// is left to the process that holds the socket on.
///
/// Closing an idle keep-alive connection races with a client sending on it, and that request
/// would fail. So the listener closes first (new connections are refused, which clients handle),
/// then for the lame-duck time (one second, or the drain when a successor serves) every response carries `Connection: close` and connections end
/// after their current request; only then are the idle ones closed. Connections the kernel had
/// already completed when the listener closes are accepted and answered too: closing a listener
/// resets whatever waits in its queue.
pub async fn run_connections<E: Into<Stop>>(
    listener: TcpListener,
    connections: impl Connections,
    limits: Limits,
    shutdown: impl Future<Output = E>,
    drain: Duration,
) {
    tokio::pin!(shutdown);
    let ending: Stop;
    let mut backoff = Backoff::default();
    let mut last_warned = None;
    loop {
        if !limits.my_turn(connections.open()) {
            // Another thread takes this one; looked at again shortly in case none does.
            tokio::select! {
                () = tokio::time::sleep(SHARED_PAUSE) => {}
                how = &mut shutdown => {
                    ending = how.into();
                    break;
                }
            }
            // Then it accepts anyway: at most one pause per connection, so that a busy thread
            // elsewhere never stalls the accepts.
        }
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors and the like: say so once, and back off instead
                    // of spinning.
                    let (say, pause) = backoff.failed();
                    if say {
                        tracing::error!("cannot accept connections: {e}; trying again, backing off up to 1 s");
                    }
                    tokio::time::sleep(pause).await;
                    continue;
                }
            },
            how = &mut shutdown => {
                ending = how.into();
                break;
            }
        };
        if backoff.succeeded() {
            tracing::info!("accepting connections again");
        }
        // The permit comes after the accept: a thread waiting in `accept` holds none, so with
        // several threads (each on its own `SO_REUSEPORT` queue) a freed permit goes to a
        // thread that has a connection to serve, never to one with an empty queue.
        let permit = match limits.connections.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                // Said at most once a minute: under a flood the cap is hit on every accept.
                if last_warned.is_none_or(|at: tokio::time::Instant| at.elapsed() >= CAP_WARNING_INTERVAL) {
                    last_warned = Some(tokio::time::Instant::now());
                    tracing::warn!(
                        "{} connections open (COUCHLINK_MAX_CONNECTIONS): new ones wait in the kernel's queue until some close",
                        limits.max_connections
                    );
                }
                // At the limit: this one connection waits, unread, and no more are accepted
                // (the kernel queues them) until a permit is free.
                tokio::select! {
                    permit = limits.connections.clone().acquire_owned() => permit.expect("the connection semaphore is never closed"),
                    how = &mut shutdown => {
                        // Answered with those still in the queue, past the limit if need be.
                        ending = how.into();
                        connections.serve(stream, peer, None);
                        break;
                    }
                }
            }
        };
        connections.serve(stream, peer, Some(permit));
    }
    connections.start_closing();
    // Empty the accept queue with plain non-blocking accepts (tokio's readiness may lag behind
    // the kernel's queue), then close the listener; or leave the queue to the socket's other
    // holder.
    if !ending.answer_queue {
        drop(listener);
    } else if let Ok(listener) = listener.into_std() {
        while let Ok((stream, peer)) = listener.accept() {
            match stream.set_nonblocking(true).and_then(|()| tokio::net::TcpStream::from_std(stream)) {
                // Past the limit if need be: these are answered, then closed with the rest.
                Ok(stream) => connections.serve(stream, peer, None),
                Err(e) => tracing::error!(%peer, "cannot serve a queued connection: {e}"),
            }
        }
    }
    let started = tokio::time::Instant::now();
    // Then idle connections are closed (each given a moment for a request already on its way).
    let patience = ending.lame_duck.min(drain);
    while connections.open() > 0 && started.elapsed() < patience {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let cap = drain.saturating_sub(started.elapsed()).max(LAME_DUCK);
    tokio::select! {
        _ = connections.close_idle_and_wait() => {}
        _ = tokio::time::sleep(cap) => tracing::warn!("drain timed out after {drain:?}; closing the remaining connections"),
    }
}

/// hyper's connections: the service, the shutdown watcher, and whether responses should now
/// tell clients to close.
struct HyperConnections<S> {
    service: Arc<S>,
    graceful: GracefulShutdown,
    closing: Arc<AtomicBool>,
    header_timeout: Duration,
}

impl<S: Service> Connections for HyperConnections<S> {
    fn start_closing(&self) {
        self.closing.store(true, Ordering::Relaxed);
    }

    fn open(&self) -> usize {
        self.graceful.count()
    }

    async fn close_idle_and_wait(self) {
        self.graceful.shutdown().await;
    }

    fn serve(&self, stream: tokio::net::TcpStream, peer: SocketAddr, permit: Option<OwnedSemaphorePermit>) {
        let _ = stream.set_nodelay(true);
        let (service, closing) = (self.service.clone(), self.closing.clone());
        let svc = service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
            let (service, closing) = (service.clone(), closing.clone());
            async move {
                let mut response = service.call_with_body(request, peer).await;
                if closing.load(Ordering::Relaxed) {
                    response.headers_mut().insert(CONNECTION, HeaderValue::from_static("close"));
                }
                Ok::<_, Infallible>(response)
            }
        });
        let connection = http1::Builder::new()
            .timer(TokioTimer::new())
            // Request heads are bounded as on the redirect listener.
            .max_buf_size(super::limits::MAX_HEAD_BYTES)
            // A client that sends no complete request head this long after connecting or after
            // its previous response (idle, or slowloris) is dropped.
            .header_read_timeout(self.header_timeout)
            .serve_connection(TokioIo::new(stream), svc);
        let connection = self.graceful.watch(connection);
        tokio::spawn(async move {
            let _permit = permit;
            if let Err(e) = connection.await {
                tracing::debug!(%peer, "connection ended with an error: {e}");
            }
        });
    }
}

/// The pauses of an accept loop that keeps failing (out of descriptors, say): a retry at once
/// would fail the same way on a spinning core, so each failure waits twice as long as the one
/// before, from 10 ms up to 1 s, and only the first of a run is said.
#[derive(Debug, Default)]
pub struct Backoff {
    failures: u32,
}

impl Backoff {
    const FIRST: Duration = Duration::from_millis(10);
    const MOST: Duration = Duration::from_secs(1);

    /// One more failure: whether to say so (the first of a run), and how long to wait.
    pub fn failed(&mut self) -> (bool, Duration) {
        let pause = Self::FIRST.saturating_mul(1 << self.failures.min(7)).min(Self::MOST);
        self.failures += 1;
        (self.failures == 1, pause)
    }

    /// A success: whether it ends a run of failures (to say so).
    pub fn succeeded(&mut self) -> bool {
        std::mem::take(&mut self.failures) > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failing_accept_backs_off_to_a_second_and_says_so_once_a_run() {
        let mut backoff = Backoff::default();
        let run: Vec<_> = (0..10).map(|_| backoff.failed()).collect();
        assert_eq!(run.iter().filter(|(say, _)| *say).count(), 1);
        assert!(run[0].0);
        let pauses: Vec<u64> = run.iter().map(|(_, p)| p.as_millis() as u64).collect();
        assert_eq!(pauses, [10, 20, 40, 80, 160, 320, 640, 1000, 1000, 1000]);
        assert!(backoff.succeeded(), "the end of a run is said");
        assert!(!backoff.succeeded());
        assert_eq!(backoff.failed(), (true, Duration::from_millis(10)), "a new run starts over");
    }
}
