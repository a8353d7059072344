//! The accept loop shared by the public and admin listeners: binding, hyper HTTP/1 connections
//! under hyper-util's graceful shutdown, and a bounded drain.

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

/// What a listener serves: requests in, responses out, never an error.
pub trait Service: Send + Sync + 'static {
    /// Answers one request (its body is not read: nothing here needs one).
    fn call(&self, request: Parts, peer: SocketAddr) -> impl Future<Output = Response<Full<Bytes>>> + Send;

    /// Told about a request hyper answered itself (400/431) because it could not parse it.
    fn rejected(&self, _peer: SocketAddr, _status: u16) {}

    /// Told about each connection accepted.
    fn accepted(&self) {}
}

/// At shutdown, how long connections still in use may go on, each next response telling the
/// client to close, before idle ones are closed under it.
const LAME_DUCK: Duration = Duration::from_secs(1);

/// Serves `service` on `listener` until `shutdown` completes, then stops accepting and gives
/// in-flight connections up to `drain` to finish.
///
/// Closing an idle keep-alive connection races with a client sending on it, and that request
/// would fail. So the listener closes first (new connections are refused, which clients handle),
/// then for up to [`LAME_DUCK`] every response carries `Connection: close` and connections end
/// after their current request; only then are the idle ones closed. Connections the kernel had
/// already completed when the listener closes are accepted and answered too: closing a listener
/// resets whatever waits in its queue.
pub async fn run<S: Service>(
    listener: TcpListener,
    service: Arc<S>,
    shutdown: impl Future<Output = ()>,
    drain: Duration,
) {
    let connections =
        Connections { service, graceful: GracefulShutdown::new(), closing: Arc::new(AtomicBool::new(false)) };
    tokio::pin!(shutdown);
    let mut failing = false;
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    if std::mem::take(&mut failing) {
                        tracing::info!("accepting connections again");
                    }
                    connections.serve(stream, peer)
                }
                Err(e) => {
                    // Out of file descriptors and the like: say so once, and back off instead
                    // of spinning.
                    if !std::mem::replace(&mut failing, true) {
                        tracing::error!("cannot accept connections: {e}; retrying every 50 ms");
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            _ = &mut shutdown => break,
        }
    }
    connections.closing.store(true, Ordering::Relaxed);
    // Empty the accept queue with plain non-blocking accepts (tokio's readiness may lag behind
    // the kernel's queue), then close the listener.
    if let Ok(listener) = listener.into_std() {
        while let Ok((stream, peer)) = listener.accept() {
            match stream.set_nonblocking(true).and_then(|()| tokio::net::TcpStream::from_std(stream)) {
                Ok(stream) => connections.serve(stream, peer),
                Err(e) => tracing::error!(%peer, "cannot serve a queued connection: {e}"),
            }
        }
    }
    let lame_duck_ends = tokio::time::Instant::now() + LAME_DUCK.min(drain);
    while connections.graceful.count() > 0 && tokio::time::Instant::now() < lame_duck_ends {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::select! {
        _ = connections.graceful.shutdown() => {}
        _ = tokio::time::sleep(drain) => tracing::warn!("drain timed out after {drain:?}; closing the remaining connections"),
    }
}

/// Everything a connection needs: the service, the shutdown watcher, and whether responses
/// should now tell clients to close.
struct Connections<S> {
    service: Arc<S>,
    graceful: GracefulShutdown,
    closing: Arc<AtomicBool>,
}

impl<S: Service> Connections<S> {
    /// Serves one accepted connection on its own task.
    fn serve(&self, stream: tokio::net::TcpStream, peer: SocketAddr) {
        self.service.accepted();
        let _ = stream.set_nodelay(true);
        let (service, closing) = (self.service.clone(), self.closing.clone());
        let svc = service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
            let (service, closing) = (service.clone(), closing.clone());
            async move {
                let (parts, _body) = request.into_parts();
                let mut response = service.call(parts, peer).await;
                if closing.load(Ordering::Relaxed) {
                    response.headers_mut().insert(CONNECTION, HeaderValue::from_static("close"));
                }
                Ok::<_, Infallible>(response)
            }
        });
        let connection = http1::Builder::new()
            .timer(TokioTimer::new())
            // A client that sends its headers slower than this is dropped.
            .header_read_timeout(Duration::from_secs(30))
            .serve_connection(TokioIo::new(stream), svc);
        let connection = self.graceful.watch(connection);
        let service = self.service.clone();
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                if e.is_parse_too_large() {
                    service.rejected(peer, 431);
                } else if e.is_parse() {
                    service.rejected(peer, 400);
                } else {
                    tracing::debug!(%peer, "connection ended with an error: {e}");
                }
            }
        });
    }
}
