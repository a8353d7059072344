//! The public listener: hyper's HTTP/1 connections under a graceful accept loop.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;

use crate::handler::{handle, log_rejected, App};

/// Serves redirects on `listener` until `shutdown` completes, then stops accepting and gives
/// in-flight connections up to `drain` to finish (keep-alive connections are told to close
/// after their current request).
pub async fn run(
    listener: TcpListener,
    app: Arc<App>,
    shutdown: impl Future<Output = ()>,
    drain: Duration,
) {
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(conn) => conn,
                    Err(e) => {
                        // Out of file descriptors and the like: back off instead of spinning.
                        tracing::error!("accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let service_app = app.clone();
                let service = service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                    let app = service_app.clone();
                    async move {
                        let (parts, _body) = request.into_parts();
                        Ok::<_, Infallible>(handle(&app, &parts, peer).await)
                    }
                });
                let connection = http1::Builder::new()
                    .timer(hyper_util::rt::TokioTimer::new())
                    // A client that sends its headers slower than this is dropped.
                    .header_read_timeout(Duration::from_secs(30))
                    .serve_connection(TokioIo::new(stream), service);
                let connection = graceful.watch(connection);
                let app = app.clone();
                tokio::spawn(async move {
                    if let Err(e) = connection.await {
                        // A request hyper could not parse (invalid UTF-8 in the target, say)
                        // was answered by hyper itself; it still gets its log line.
                        if e.is_parse_too_large() {
                            log_rejected(&app, peer, 431);
                        } else if e.is_parse() {
                            log_rejected(&app, peer, 400);
                        } else {
                            tracing::debug!(%peer, "connection ended with an error: {e}");
                        }
                    }
                });
            }
            _ = &mut shutdown => break,
        }
    }
    drop(listener);
    tokio::select! {
        _ = graceful.shutdown() => {}
        _ = tokio::time::sleep(drain) => tracing::warn!("drain timed out after {drain:?}; closing the remaining connections"),
    }
}
