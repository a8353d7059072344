//! The admin listener: `/healthz` and `/metrics`, kept off the public port.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::CONTENT_TYPE;
use hyper::http::request::Parts;
use hyper::{Method, Response, StatusCode};
use serde_json::json;

use crate::access_log::AccessLog;
use crate::clicks::writer::ClicksStatus;
use crate::couch::CouchClient;
use crate::errors::Causes;
use crate::follower::FeedStatus;
use crate::history::recorder::RecorderStatus;
use crate::metrics::{render, Gauges, Labelled, Metrics};
use crate::snapshot::SnapshotStatus;
use crate::store::LinkStore;

/// How long `/healthz` waits for CouchDB to answer.
const PING_TIMEOUT: Duration = Duration::from_secs(2);

/// What the admin endpoints report on.
pub struct Admin {
    /// Process-wide counters (connections by serving thread).
    pub process: Arc<Metrics>,
    /// Each short domain (one, unnamed, with one domain configured as before domains).
    pub sites: Vec<AdminSite>,
    /// With several domains and no default: the access log and counters of requests for no
    /// configured domain.
    pub unknown: Option<(AccessLog, Arc<Metrics>)>,
    /// Set when the process stops (SIGTERM): `/healthz` then says "draining" with 503, so that
    /// a load balancer sends no more while in-flight requests finish.
    pub draining: Arc<AtomicBool>,
}

/// One short domain, as the admin endpoints see it.
pub struct AdminSite {
    /// Its host, the label of its samples; `None` with one domain (no labels).
    pub host: Option<String>,
    /// Its CouchDB database, pinged by `/healthz`.
    pub couch: CouchClient,
    /// Its link cache, for its size.
    pub store: Arc<LinkStore>,
    /// Its counters.
    pub metrics: Arc<Metrics>,
    /// Its `_changes` feed's state.
    pub feed: Arc<FeedStatus>,
    /// Its access log, for its line counts.
    pub log: AccessLog,
    /// Where its cache came from, and the snapshots written since.
    pub snapshots: Arc<SnapshotStatus>,
    /// Its live counts' state, when counting is on.
    pub clicks: Option<Arc<ClicksStatus>>,
    /// Its history recorder's state, when it records.
    pub history: Option<Arc<RecorderStatus>>,
}

impl AdminSite {
    fn gauges(&self) -> Gauges {
        let (snapshots_written, snapshot_failures) = self.snapshots.counts();
        Gauges {
            cache_entries: self.store.len(),
            feed_up: self.feed.is_live(),
            log: self.log.health(),
            cache_from_snapshot: self.snapshots.from_snapshot(self.store.synced_epoch()),
            feed_behind: self.feed.behind(),
            snapshots_written,
            snapshot_failures,
            snapshot_written_at: self.snapshots.last_written_at(),
            clicks: self.clicks.as_ref().map_or_else(Default::default, |c| {
                let (pending, pending_bytes) = c.pending();
                crate::metrics::ClicksGauges {
                    written: c.written(),
                    pending,
                    pending_bytes,
                    lost: c.lost(),
                    set_aside: c.set_aside(),
                    failing: c.failing().is_some(),
                }
            }),
            history: self.history.as_ref().map_or_else(Default::default, |h| {
                let (gaps, missing) = h.gaps();
                crate::metrics::HistoryGauges {
                    entries: h.entries(),
                    gaps,
                    missing,
                    failing: h.failing().is_some(),
                    refused: h.refused(),
                    checkpoint_resets: h.resets().0,
                    recording: h.is_recording(),
                    behind: h.is_behind(),
                }
            }),
        }
    }

    /// Its part of `/healthz`, and whether it serves (CouchDB answers, the feed is live).
    async fn health(&self) -> (serde_json::Value, bool) {
        let couch = tokio::time::timeout(PING_TIMEOUT, self.couch.ping())
            .await
            .map_err(|_| "timed out".to_owned())
            .and_then(|r| r.map_err(|e| Causes(&e).to_string()));
        let serving = couch.is_ok() && self.feed.is_live();
        let log = self.log.health();
        // Counts waiting for CouchDB are not yet a fault (the feed says CouchDB is away); counts
        // lost are.
        let clicks_well = self.clicks.as_ref().is_none_or(|c| c.lost() == 0);
        let mut body = json!({
            "status": if serving && log.failing_since.is_none() && clicks_well { "ok" } else { "degraded" },
            "couchdb": match &couch { Ok(_) => "reachable".to_owned(), Err(e) => e.clone() },
            "feed": self.feed.to_json(),
            "cache_entries": self.store.len(),
            "cache": if self.store.is_warming() { "warming" } else { "ready" },
            "cache_source": self.snapshots.to_json(self.store.synced_epoch()),
            "access_log": log_json(&log),
        });
        if let Some(clicks) = &self.clicks {
            let (pending, pending_bytes) = clicks.pending();
            body["clicks"] = json!({
                "status": if clicks.lost() > 0 { "degraded" } else if clicks.failing().is_some() { "waiting" } else { "ok" },
                "documents_written": clicks.written(),
                "pending_documents": pending,
                "pending_bytes": pending_bytes,
                "lost": clicks.lost(),
                "documents_refused": clicks.set_aside(),
                "error": clicks.failing(),
            });
        }
        if let Some(history) = &self.history {
            let (gaps, missing) = history.gaps();
            let (resets, reset) = history.resets();
            if history.is_degraded() {
                body["status"] = json!("degraded");
            }
            body["history"] = json!({
                "status": history.state(),
                "recording": history.is_recording(),
                "refused": history.refused(),
                "checkpoint_resets": resets,
                "checkpoint_reset": reset,
                "entries_recorded": history.entries(),
                "gaps": gaps,
                "missing_revisions": missing,
                "error": history.failing(),
            });
        }
        (body, serving)
    }
}

fn log_json(log: &crate::access_log::LogHealth) -> serde_json::Value {
    json!({
        "status": if log.failing_since.is_some() { "degraded" } else { "ok" },
        "failing_since": log.failing_since.and_then(|t| t.format(&time::format_description::well_known::Rfc3339).ok()),
        "lines_lost": log.lines_lost,
        "queued_bytes": log.queued_bytes,
    })
}

impl crate::http::accept::Service for Admin {
    async fn call(&self, request: Parts, _peer: SocketAddr) -> Response<Full<Bytes>> {
        match (&request.method, request.uri.path()) {
            (&Method::GET, "/healthz") => self.health().await,
            (&Method::GET, "/metrics") => {
                let gauges: Vec<Gauges> = self.sites.iter().map(AdminSite::gauges).collect();
                let mut labelled: Vec<Labelled<'_>> = self
                    .sites
                    .iter()
                    .zip(&gauges)
                    .map(|(site, gauges)| Labelled { domain: site.host.as_deref(), metrics: &site.metrics, gauges })
                    .collect();
                let unknown_gauges =
                    self.unknown.as_ref().map(|(log, _)| Gauges { log: log.health(), ..Gauges::default() });
                if let (Some((_, metrics)), Some(gauges)) = (&self.unknown, &unknown_gauges) {
                    labelled.push(Labelled { domain: Some(crate::domain::UNKNOWN_HOSTS), metrics, gauges });
                }
                respond(StatusCode::OK, "text/plain; version=0.0.4; charset=utf-8", render(&self.process, &labelled))
            }
            _ => respond(StatusCode::NOT_FOUND, "text/plain; charset=utf-8", "try /healthz or /metrics\n".into()),
        }
    }
}

impl Admin {
    /// A JSON body on CouchDB, the `_changes` feed, the cache and the access log, `"status":
    /// "ok"` when all are well. The HTTP status says whether to send traffic here: 503 when
    /// CouchDB does not answer or the feed is down (new links would not be served); a failing
    /// access log alone leaves it 200, since redirects go on. With several domains, each is
    /// reported under `domains`, and 503 means that none serves: one domain's database gone
    /// is that domain's trouble ("degraded"), not the others'.
    async fn health(&self) -> Response<Full<Bytes>> {
        let mut reports = Vec::with_capacity(self.sites.len());
        for site in &self.sites {
            reports.push(site.health().await);
        }
        let (body, serving) = match (&self.sites[..], reports.as_slice()) {
            ([site], [(body, serving)]) if site.host.is_none() => (body.clone(), *serving),
            _ => {
                let all_ok = reports.iter().all(|(body, _)| body["status"] == "ok");
                let mut domains = serde_json::Map::new();
                for (site, (body, _)) in self.sites.iter().zip(&reports) {
                    domains.insert(site.host.clone().unwrap_or_default(), body.clone());
                }
                let mut body = json!({"status": if all_ok { "ok" } else { "degraded" }, "domains": domains});
                if let Some((log, _)) = &self.unknown {
                    body["unknown_hosts_access_log"] = log_json(&log.health());
                }
                (body, reports.iter().any(|(_, serving)| *serving))
            }
        };
        let mut body = body;
        let draining = self.draining.load(Ordering::Relaxed);
        if draining {
            body["status"] = json!("draining");
        }
        let status = if serving && !draining { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
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
