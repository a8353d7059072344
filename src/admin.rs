//! The admin listener: `/healthz` and `/metrics`, kept off the public port.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::CONTENT_TYPE;
use hyper::http::request::Parts;
use hyper::{Method, Response, StatusCode};
use serde_json::json;

use crate::access_log::AccessLog;
use crate::couch::CouchClient;
use crate::errors::Causes;
use crate::follower::FeedStatus;
use crate::metrics::{Gauges, Metrics};
use crate::snapshot::SnapshotStatus;
use crate::store::LinkStore;

/// How long `/healthz` waits for CouchDB to answer.
const PING_TIMEOUT: Duration = Duration::from_secs(2);

/// What the admin endpoints report on.
pub struct Admin {
    /// CouchDB, pinged by `/healthz`.
    pub couch: CouchClient,
    /// The link cache, for its size.
    pub store: Arc<LinkStore>,
    /// The counters `/metrics` renders.
    pub metrics: Arc<Metrics>,
    /// The `_changes` feed's state.
    pub feed: Arc<FeedStatus>,
    /// The access log, for its line counts.
    pub log: AccessLog,
    /// Where the cache came from, and the snapshots written since.
    pub snapshots: Arc<SnapshotStatus>,
}

impl crate::http::accept::Service for Admin {
    async fn call(&self, request: Parts, _peer: SocketAddr) -> Response<Full<Bytes>> {
        match (&request.method, request.uri.path()) {
            (&Method::GET, "/healthz") => self.health().await,
            (&Method::GET, "/metrics") => {
                let (snapshots_written, snapshot_failures) = self.snapshots.counts();
                let gauges = Gauges {
                    cache_entries: self.store.len(),
                    feed_up: self.feed.is_live(),
                    log: self.log.health(),
                    cache_from_snapshot: self.snapshots.from_snapshot(self.store.synced_epoch()),
                    feed_behind: self.feed.behind(),
                    snapshots_written,
                    snapshot_failures,
                    snapshot_written_at: self.snapshots.last_written_at(),
                };
                respond(StatusCode::OK, "text/plain; version=0.0.4; charset=utf-8", self.metrics.render(&gauges))
            }
            _ => respond(StatusCode::NOT_FOUND, "text/plain; charset=utf-8", "try /healthz or /metrics\n".into()),
        }
    }
}

impl Admin {
    /// A JSON body on CouchDB, the `_changes` feed, the cache and the access log, `"status":
    /// "ok"` when all are well. The HTTP status says whether to send traffic here: 503 when
    /// CouchDB does not answer or the feed is down (new links would not be served); a failing
    /// access log alone leaves it 200, since redirects go on.
    async fn health(&self) -> Response<Full<Bytes>> {
        let couch = tokio::time::timeout(PING_TIMEOUT, self.couch.ping())
            .await
            .map_err(|_| "timed out".to_owned())
            .and_then(|r| r.map_err(|e| Causes(&e).to_string()));
        let serving = couch.is_ok() && self.feed.is_live();
        let log = self.log.health();
        let body = json!({
            "status": if serving && log.failing_since.is_none() { "ok" } else { "degraded" },
            "couchdb": match &couch { Ok(_) => "reachable".to_owned(), Err(e) => e.clone() },
            "feed": self.feed.to_json(),
            "cache_entries": self.store.len(),
            "cache": if self.store.is_warming() { "warming" } else { "ready" },
            "cache_source": self.snapshots.to_json(self.store.synced_epoch()),
            "access_log": {
                "status": if log.failing_since.is_some() { "degraded" } else { "ok" },
                "failing_since": log.failing_since.and_then(|t| t.format(&time::format_description::well_known::Rfc3339).ok()),
                "lines_lost": log.lines_lost,
                "queued_bytes": log.queued_bytes,
            },
        });
        let status = if serving { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
        respond(status, "application/json", format!("{body}\n"))
    }
}

fn respond(status: StatusCode, content_type: &'static str, body: String) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header(CONTENT_TYPE, content_type)
        .body(Full::new(Bytes::from(body)))
        .expect("static headers are valid")
}
