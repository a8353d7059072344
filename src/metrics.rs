//! Counters for `/metrics`, in the Prometheus text exposition format.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// The statuses the proxy answers with; anything else is counted as "other".
const STATUSES: [u16; 4] = [302, 404, 501, 503];
/// Upper bounds (seconds) of the CouchDB latency histogram's buckets.
const LATENCY_BUCKETS: [f64; 10] = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1.0, 5.0];

/// Process-wide counters, shared by the handler, the link store and the feed follower.
#[derive(Default)]
pub struct Metrics {
    responses: [AtomicU64; STATUSES.len() + 1],
    pub(crate) cache_hits: AtomicU64,
    pub(crate) cache_misses: AtomicU64,
    pub(crate) couch_errors: AtomicU64,
    couch_latency_buckets: [AtomicU64; LATENCY_BUCKETS.len()],
    couch_latency_count: AtomicU64,
    couch_latency_micros: AtomicU64,
    pub(crate) feed_reconnects: AtomicU64,
    pub(crate) feed_changes: AtomicU64,
}

/// Values read elsewhere at render time (gauges owned by other parts).
pub struct Gauges {
    /// Entries in the link cache.
    pub cache_entries: usize,
    /// Whether the `_changes` feed is connected.
    pub feed_up: bool,
    /// Access log lines written to disk.
    pub log_lines_written: u64,
    /// Access log lines that could not be written.
    pub log_lines_failed: u64,
}

impl Metrics {
    /// Counts one response.
    pub fn response(&self, status: u16) {
        let i = STATUSES.iter().position(|&s| s == status).unwrap_or(STATUSES.len());
        self.responses[i].fetch_add(1, Relaxed);
    }

    /// Records how long one CouchDB document request took.
    pub fn couch_latency(&self, took: Duration) {
        let secs = took.as_secs_f64();
        for (bound, bucket) in LATENCY_BUCKETS.iter().zip(&self.couch_latency_buckets) {
            if secs <= *bound {
                bucket.fetch_add(1, Relaxed);
            }
        }
        self.couch_latency_count.fetch_add(1, Relaxed);
        self.couch_latency_micros.fetch_add(took.as_micros() as u64, Relaxed);
    }

    /// The whole exposition.
    pub fn render(&self, gauges: &Gauges) -> String {
        let mut out = String::new();
        let mut metric = |name: &str, kind: &str, help: &str, samples: &[(String, String)]| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
            for (labels, value) in samples {
                let _ = writeln!(out, "{name}{labels} {value}");
            }
        };
        let plain = |v: u64| vec![(String::new(), v.to_string())];
        let mut responses: Vec<_> = STATUSES
            .iter()
            .zip(&self.responses)
            .map(|(s, c)| (format!("{{status=\"{s}\"}}"), c.load(Relaxed).to_string()))
            .collect();
        responses.push(("{status=\"other\"}".into(), self.responses[STATUSES.len()].load(Relaxed).to_string()));
        metric("couchlink_responses_total", "counter", "Responses sent, by status code.", &responses);
        metric(
            "couchlink_cache_hits_total",
            "counter",
            "Link lookups answered from memory.",
            &plain(self.cache_hits.load(Relaxed)),
        );
        metric(
            "couchlink_cache_misses_total",
            "counter",
            "Link lookups that went to CouchDB.",
            &plain(self.cache_misses.load(Relaxed)),
        );
        metric(
            "couchlink_cache_entries",
            "gauge",
            "Links (and known-missing IDs) held in memory.",
            &plain(gauges.cache_entries as u64),
        );
        metric(
            "couchlink_couchdb_errors_total",
            "counter",
            "CouchDB document requests that failed.",
            &plain(self.couch_errors.load(Relaxed)),
        );
        let mut latency: Vec<_> = LATENCY_BUCKETS
            .iter()
            .zip(&self.couch_latency_buckets)
            .map(|(b, c)| (format!("_bucket{{le=\"{b}\"}}"), c.load(Relaxed).to_string()))
            .collect();
        let count = self.couch_latency_count.load(Relaxed);
        latency.push(("_bucket{le=\"+Inf\"}".into(), count.to_string()));
        latency.push(("_sum".into(), format!("{}", self.couch_latency_micros.load(Relaxed) as f64 / 1e6)));
        latency.push(("_count".into(), count.to_string()));
        metric(
            "couchlink_couchdb_request_duration_seconds",
            "histogram",
            "CouchDB document request latency.",
            &latency,
        );
        metric("couchlink_feed_up", "gauge", "1 while the _changes feed is connected.", &plain(gauges.feed_up as u64));
        metric(
            "couchlink_feed_reconnects_total",
            "counter",
            "Times the _changes feed was reopened after a failure.",
            &plain(self.feed_reconnects.load(Relaxed)),
        );
        metric(
            "couchlink_feed_changes_total",
            "counter",
            "Changes applied from the _changes feed.",
            &plain(self.feed_changes.load(Relaxed)),
        );
        metric(
            "couchlink_access_log_lines_total",
            "counter",
            "Access log lines written to disk.",
            &plain(gauges.log_lines_written),
        );
        metric(
            "couchlink_access_log_lines_failed_total",
            "counter",
            "Access log lines the disk refused.",
            &plain(gauges.log_lines_failed),
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_and_histogram() {
        let m = Metrics::default();
        m.response(302);
        m.response(302);
        m.response(418);
        m.couch_latency(Duration::from_millis(3));
        let text = m.render(&Gauges { cache_entries: 7, feed_up: true, log_lines_written: 3, log_lines_failed: 0 });
        assert!(text.contains("couchlink_responses_total{status=\"302\"} 2\n"), "{text}");
        assert!(text.contains("couchlink_responses_total{status=\"other\"} 1\n"));
        assert!(text.contains("couchlink_couchdb_request_duration_seconds_bucket{le=\"0.002\"} 0\n"));
        assert!(text.contains("couchlink_couchdb_request_duration_seconds_bucket{le=\"0.005\"} 1\n"));
        assert!(text.contains("couchlink_couchdb_request_duration_seconds_count 1\n"));
        assert!(text.contains("couchlink_cache_entries 7\n"));
        assert!(text.contains("couchlink_feed_up 1\n"));
    }
}
