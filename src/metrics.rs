//! Counters for `/metrics`, in the Prometheus text exposition format.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::time::Duration;

/// The statuses the proxy answers with; anything else is counted as "other".
const STATUSES: [u16; 10] = [200, 302, 400, 401, 404, 414, 429, 431, 501, 503];
/// Serving threads counted apart; any beyond these share the last count.
const WORKER_SLOTS: usize = 32;
/// Upper bounds (seconds) of the CouchDB latency histogram's buckets.
const LATENCY_BUCKETS: [f64; 10] = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1.0, 5.0];

/// Process-wide counters, shared by the handler, the link store and the feed follower; other
/// modules count through its methods.
#[derive(Default)]
pub struct Metrics {
    responses: [AtomicU64; STATUSES.len() + 1],
    cache_hits: AtomicU64,
    cache_misses: AtomicU64,
    cold_reads_refused: AtomicU64,
    couch_errors: AtomicU64,
    couch_latency_buckets: [AtomicU64; LATENCY_BUCKETS.len()],
    couch_latency_count: AtomicU64,
    couch_latency_micros: AtomicU64,
    feed_reconnects: AtomicU64,
    feed_changes: AtomicU64,
    unusable_documents: AtomicU64,
    country_without_geoip: AtomicU64,
    passwords: [AtomicU64; PasswordAnswer::ALL.len()],
    password_hashes: AtomicU64,
    workers: AtomicUsize,
    connections: [AtomicU64; WORKER_SLOTS],
}

/// What a request for a protected link presented, as `/metrics` counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PasswordAnswer {
    /// The right password.
    Right,
    /// A wrong one.
    Wrong,
    /// None (or not as Basic credentials).
    Missing,
    /// Any, from an address that has used its wrong guesses (429).
    Limited,
}

impl PasswordAnswer {
    /// Every answer, in exposition order.
    pub const ALL: [PasswordAnswer; 4] =
        [PasswordAnswer::Right, PasswordAnswer::Wrong, PasswordAnswer::Missing, PasswordAnswer::Limited];

    fn label(self) -> &'static str {
        match self {
            PasswordAnswer::Right => "right",
            PasswordAnswer::Wrong => "wrong",
            PasswordAnswer::Missing => "missing",
            PasswordAnswer::Limited => "limited",
        }
    }
}

/// Values read elsewhere at render time (gauges owned by other parts).
#[derive(Default)]
pub struct Gauges {
    /// Entries in the link cache.
    pub cache_entries: usize,
    /// Whether the `_changes` feed is connected.
    pub feed_up: bool,
    /// The access log's state.
    pub log: crate::access_log::LogHealth,
    /// Whether the cache was filled from a snapshot at start.
    pub cache_from_snapshot: bool,
    /// While the feed catches up from a snapshot: about how many changes are still to come.
    pub feed_behind: Option<u64>,
    /// Cache snapshots written since start.
    pub snapshots_written: u64,
    /// Cache snapshots that could not be written.
    pub snapshot_failures: u64,
    /// When the last snapshot was written (Unix seconds).
    pub snapshot_written_at: Option<i64>,
    /// Live counts: documents written, documents and bytes waiting, responses whose counts were
    /// lost, whether writes fail (all 0 with counting off).
    pub clicks: ClicksGauges,
    /// The history recorder's.
    pub history: HistoryGauges,
}

/// The live counts' state, for `/metrics`.
#[derive(Debug, Default, Clone, Copy)]
pub struct ClicksGauges {
    /// Documents written to the clicks database.
    pub written: u64,
    /// Documents waiting for CouchDB.
    pub pending: u64,
    /// Their bytes.
    pub pending_bytes: u64,
    /// Responses whose counts were lost.
    pub lost: u64,
    /// Documents CouchDB refused for good, set aside.
    pub set_aside: u64,
    /// Whether writing fails now.
    pub failing: bool,
}

/// The history recorder's state, for `/metrics`.
#[derive(Debug, Default, Clone, Copy)]
pub struct HistoryGauges {
    /// Entries this proxy's recorder wrote.
    pub entries: u64,
    /// Gap entries it wrote: revisions compacted away before any recorder saw them.
    pub gaps: u64,
    /// The revisions those gaps stand for.
    pub missing: u64,
    /// Whether recording fails now.
    pub failing: bool,
    /// Entries CouchDB refused for good, recorded as gaps with its reason.
    pub refused: u64,
    /// Times the checkpoint named a place CouchDB could not resume from (recorded again from
    /// the beginning).
    pub checkpoint_resets: u64,
    /// Whether this proxy's recorder is the one that records.
    pub recording: bool,
    /// Whether changes wait longer than they should to be recorded.
    pub behind: bool,
}

/// One plain (unlabelled) sample: name, type, help, and where its value comes from.
type Plain = (&'static str, &'static str, &'static str, fn(&Metrics, &Gauges) -> u64);

/// Every unlabelled sample, in exposition order.
const PLAIN: [Plain; 34] = [
    ("couchlink_cache_hits_total", "counter", "Link lookups answered from memory.", |m, _| m.cache_hits.load(Relaxed)),
    ("couchlink_cache_misses_total", "counter", "Link lookups that went to CouchDB.", |m, _| {
        m.cache_misses.load(Relaxed)
    }),
    (
        "couchlink_cold_reads_refused_total",
        "counter",
        "Lookups answered 503 because COUCHLINK_COLD_READS reads of unknown links were in flight.",
        |m, _| m.cold_reads_refused.load(Relaxed),
    ),
    ("couchlink_cache_entries", "gauge", "Links (and known-missing IDs) held in memory.", |_, g| {
        g.cache_entries as u64
    }),
    ("couchlink_couchdb_errors_total", "counter", "CouchDB document requests that failed.", |m, _| {
        m.couch_errors.load(Relaxed)
    }),
    (
        "couchlink_cache_from_snapshot",
        "gauge",
        "1 when the cache was filled from a snapshot at start, 0 when from CouchDB (warm start).",
        |_, g| g.cache_from_snapshot.into(),
    ),
    ("couchlink_snapshots_written_total", "counter", "Cache snapshots written to the state directory.", |_, g| {
        g.snapshots_written
    }),
    ("couchlink_snapshot_failures_total", "counter", "Cache snapshots that could not be written.", |_, g| {
        g.snapshot_failures
    }),
    (
        "couchlink_snapshot_written_timestamp_seconds",
        "gauge",
        "When the last cache snapshot was written (Unix time; 0: none yet).",
        |_, g| g.snapshot_written_at.unwrap_or(0).max(0) as u64,
    ),
    ("couchlink_feed_up", "gauge", "1 while the _changes feed is connected.", |_, g| g.feed_up.into()),
    (
        "couchlink_feed_catching_up",
        "gauge",
        "1 while the _changes feed catches up with changes made since the cache snapshot.",
        |_, g| g.feed_behind.is_some().into(),
    ),
    (
        "couchlink_feed_changes_behind",
        "gauge",
        "While catching up from a snapshot, about how many changes are still to be applied (0 otherwise).",
        |_, g| g.feed_behind.unwrap_or(0),
    ),
    ("couchlink_feed_reconnects_total", "counter", "Times the _changes feed was reopened after a failure.", |m, _| {
        m.feed_reconnects.load(Relaxed)
    }),
    ("couchlink_feed_changes_total", "counter", "Changes applied from the _changes feed.", |m, _| {
        m.feed_changes.load(Relaxed)
    }),
    (
        "couchlink_unusable_documents_total",
        "counter",
        "Link documents read that cannot be served as written (wrong types: 404; a url not in canonical form: acts as inactive, its fallback or 404).",
        |m, _| m.unusable_documents.load(Relaxed),
    ),
    (
        "couchlink_country_rules_without_geoip_total",
        "counter",
        "Requests for links with a country condition while no GeoIP database is configured (COUCHLINK_GEOIP): served as if the condition never matched.",
        |m, _| m.country_without_geoip.load(Relaxed),
    ),
    ("couchlink_access_log_lines_total", "counter", "Access log lines written to disk.", |_, g| g.log.lines_written),
    ("couchlink_clicks_documents_written_total", "counter", "Live counts documents written to the clicks database.", |_, g| {
        g.clicks.written
    }),
    ("couchlink_clicks_pending_documents", "gauge", "Live counts documents waiting in memory for CouchDB.", |_, g| {
        g.clicks.pending
    }),
    ("couchlink_clicks_pending_bytes", "gauge", "Bytes of live counts waiting in memory for CouchDB.", |_, g| {
        g.clicks.pending_bytes
    }),
    (
        "couchlink_clicks_lost_total",
        "counter",
        "Responses whose live counts were lost: waiting past COUCHLINK_CLICKS_QUEUE_BYTES, at a stop CouchDB did not answer, or in a document CouchDB refused.",
        |_, g| g.clicks.lost,
    ),
    (
        "couchlink_clicks_refused_documents_total",
        "counter",
        "Live counts documents CouchDB refused for good (400, 403, 413), set aside so that later intervals are written.",
        |_, g| g.clicks.set_aside,
    ),
    ("couchlink_clicks_failing", "gauge", "1 while CouchDB does not take the live counts.", |_, g| {
        g.clicks.failing.into()
    }),
    ("couchlink_history_entries_total", "counter", "History entries this proxy recorded (others' not counted).", |_, g| {
        g.history.entries
    }),
    (
        "couchlink_history_gaps_total",
        "counter",
        "Gaps this proxy recorded in a link's history: revisions written while no recorder ran and compacted away before one started.",
        |_, g| g.history.gaps,
    ),
    ("couchlink_history_missing_revisions_total", "counter", "Revisions the recorded gaps stand for.", |_, g| {
        g.history.missing
    }),
    ("couchlink_history_failing", "gauge", "1 while the history cannot be recorded (CouchDB away, no history database, no recorder role).", |_, g| {
        g.history.failing.into()
    }),
    (
        "couchlink_history_refused_total",
        "counter",
        "History entries CouchDB refused for good, recorded as gaps with its reason.",
        |_, g| g.history.refused,
    ),
    (
        "couchlink_history_checkpoint_resets_total",
        "counter",
        "Times the recorders' checkpoint named no place CouchDB resumes from: recorded again from the beginning.",
        |_, g| g.history.checkpoint_resets,
    ),
    ("couchlink_history_recording", "gauge", "1 while this proxy's recorder is the one recording (the others stand by).", |_, g| {
        g.history.recording.into()
    }),
    ("couchlink_history_behind", "gauge", "1 while changes wait longer than they should to be recorded.", |_, g| {
        g.history.behind.into()
    }),
    (
        "couchlink_access_log_lines_lost_total",
        "counter",
        "Access log lines lost: the queue waiting for the disk was full, or shutdown ran out of time.",
        |_, g| g.log.lines_lost,
    ),
    ("couchlink_access_log_queue_bytes", "gauge", "Access log bytes waiting in memory for the disk.", |_, g| {
        g.log.queued_bytes
    }),
    ("couchlink_access_log_failing", "gauge", "1 while the disk refuses the access log.", |_, g| {
        g.log.failing_since.is_some().into()
    }),
];

impl Metrics {
    /// Counts one response.
    pub fn response(&self, status: u16) {
        let i = STATUSES.iter().position(|&s| s == status).unwrap_or(STATUSES.len());
        self.responses[i].fetch_add(1, Relaxed);
    }

    /// Counts a lookup answered from memory.
    pub fn cache_hit(&self) {
        self.cache_hits.fetch_add(1, Relaxed);
    }

    /// Counts a lookup that had to ask CouchDB.
    pub fn cache_miss(&self) {
        self.cache_misses.fetch_add(1, Relaxed);
    }

    /// Counts a lookup refused because the cold-read limit was reached.
    pub fn cold_read_refused(&self) {
        self.cold_reads_refused.fetch_add(1, Relaxed);
    }

    /// Records one CouchDB document request: how long it took, and whether it failed.
    pub fn couch_request(&self, took: Duration, failed: bool) {
        let secs = took.as_secs_f64();
        for (bound, bucket) in LATENCY_BUCKETS.iter().zip(&self.couch_latency_buckets) {
            if secs <= *bound {
                bucket.fetch_add(1, Relaxed);
            }
        }
        self.couch_latency_count.fetch_add(1, Relaxed);
        self.couch_latency_micros.fetch_add(took.as_micros() as u64, Relaxed);
        if failed {
            self.couch_errors.fetch_add(1, Relaxed);
        }
    }

    /// Counts a reopening of the `_changes` feed after a failure.
    pub fn feed_reconnect(&self) {
        self.feed_reconnects.fetch_add(1, Relaxed);
    }

    /// Counts one change applied from the feed.
    pub fn feed_change(&self) {
        self.feed_changes.fetch_add(1, Relaxed);
    }

    /// Responses sent so far, all statuses.
    pub fn responses_total(&self) -> u64 {
        self.responses.iter().map(|r| r.load(Relaxed)).sum()
    }

    /// Counts a link document read that cannot be served.
    pub fn unusable_document(&self) {
        self.unusable_documents.fetch_add(1, Relaxed);
    }

    /// Counts a request for a link with a country condition while no GeoIP database is set.
    pub fn country_without_geoip(&self) {
        self.country_without_geoip.fetch_add(1, Relaxed);
    }

    /// Counts a request for a protected link by what it presented.
    pub fn password(&self, answer: PasswordAnswer) {
        self.passwords[answer as usize].fetch_add(1, Relaxed);
    }

    /// Counts one password hash computed to check a credential.
    pub fn password_hash(&self) {
        self.password_hashes.fetch_add(1, Relaxed);
    }

    /// Password hashes computed so far.
    pub fn password_hashes(&self) -> u64 {
        self.password_hashes.load(Relaxed)
    }

    /// How many threads serve redirects (each gets its connection count).
    pub fn set_workers(&self, workers: usize) {
        self.workers.store(workers.min(WORKER_SLOTS), Relaxed);
    }

    /// Counts a connection accepted by serving thread `worker` (0-based).
    pub fn connection_accepted(&self, worker: usize) {
        self.connections[worker.min(WORKER_SLOTS - 1)].fetch_add(1, Relaxed);
    }

    /// The whole exposition, for one domain configured as before domains (no labels).
    pub fn render(&self, gauges: &Gauges) -> String {
        render(self, &[Labelled { domain: None, metrics: self, gauges }])
    }
}

/// One domain's counters and gauges, and the label they carry (`domain="0x1f.ie"`; `None`:
/// none, with one domain).
pub struct Labelled<'a> {
    /// The configured domain (never a host a client named: the label values are bounded).
    pub domain: Option<&'a str>,
    /// Its counters.
    pub metrics: &'a Metrics,
    /// Its gauges.
    pub gauges: &'a Gauges,
}

/// The whole exposition: each sample once per domain, labelled by it; connections by serving
/// thread from `process`.
pub fn render(process: &Metrics, sites: &[Labelled<'_>]) -> String {
    let mut out = String::new();
    let head = |out: &mut String, name: &str, kind: &str, help: &str| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    };
    // `{domain="x",` and the rest of a sample's labels, or `{`.
    let open = |site: &Labelled<'_>| site.domain.map_or("{".to_owned(), |d| format!("{{domain=\"{d}\","));
    let alone = |site: &Labelled<'_>| site.domain.map_or(String::new(), |d| format!("{{domain=\"{d}\"}}"));

    head(&mut out, "couchlink_responses_total", "counter", "Responses sent, by status code.");
    for site in sites {
        let labels = STATUSES.iter().map(|s| s.to_string()).chain(["other".to_owned()]);
        for (label, count) in labels.zip(&site.metrics.responses) {
            let _ =
                writeln!(out, "couchlink_responses_total{}status=\"{label}\"}} {}", open(site), count.load(Relaxed));
        }
    }

    for (name, kind, help, value) in PLAIN {
        head(&mut out, name, kind, help);
        for site in sites {
            let _ = writeln!(out, "{name}{} {}", alone(site), value(site.metrics, site.gauges));
        }
    }

    let name = "couchlink_password_answers_total";
    head(&mut out, name, "counter", "Requests for password-protected links, by what they presented.");
    for site in sites {
        for answer in PasswordAnswer::ALL {
            let count = site.metrics.passwords[answer as usize].load(Relaxed);
            let _ = writeln!(out, "{name}{}result=\"{}\"}} {count}", open(site), answer.label());
        }
    }
    let name = "couchlink_password_hashes_total";
    head(&mut out, name, "counter", "Password hashes computed to check a credential (once per credential and hash).");
    for site in sites {
        let _ = writeln!(out, "{name}{} {}", alone(site), site.metrics.password_hashes.load(Relaxed));
    }

    let name = "couchlink_connections_accepted_total";
    head(&mut out, name, "counter", "Connections accepted, by serving thread (the kernel spreads them).");
    for (worker, count) in process.connections.iter().take(process.workers.load(Relaxed)).enumerate() {
        let _ = writeln!(out, "{name}{{worker=\"{worker}\"}} {}", count.load(Relaxed));
    }

    let name = "couchlink_couchdb_request_duration_seconds";
    head(&mut out, name, "histogram", "CouchDB document request latency.");
    for site in sites {
        let m = site.metrics;
        for (bound, count) in LATENCY_BUCKETS.iter().zip(&m.couch_latency_buckets) {
            let _ = writeln!(out, "{name}_bucket{}le=\"{bound}\"}} {}", open(site), count.load(Relaxed));
        }
        let count = m.couch_latency_count.load(Relaxed);
        let _ = writeln!(out, "{name}_bucket{}le=\"+Inf\"}} {count}", open(site));
        let _ = writeln!(out, "{name}_sum{} {}", alone(site), m.couch_latency_micros.load(Relaxed) as f64 / 1e6);
        let _ = writeln!(out, "{name}_count{} {count}", alone(site));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access_log::LogHealth;

    #[test]
    fn renders_counters_and_histogram() {
        let m = Metrics::default();
        m.response(302);
        m.response(302);
        m.response(418);
        m.couch_request(Duration::from_millis(3), true);
        m.cache_hit();
        let log = LogHealth { lines_written: 3, lines_lost: 2, queued_bytes: 512, failing_since: None };
        let text = m.render(&Gauges {
            cache_entries: 7,
            feed_up: true,
            log,
            cache_from_snapshot: true,
            feed_behind: Some(12),
            snapshots_written: 4,
            snapshot_failures: 1,
            snapshot_written_at: Some(1_795_000_000),
            clicks: ClicksGauges { written: 5, pending: 2, pending_bytes: 900, lost: 3, set_aside: 1, failing: true },
            history: HistoryGauges { entries: 7, gaps: 1, missing: 2, refused: 3, ..HistoryGauges::default() },
        });
        assert!(text.contains("couchlink_responses_total{status=\"302\"} 2\n"), "{text}");
        assert!(text.contains("couchlink_responses_total{status=\"other\"} 1\n"));
        assert!(text.contains("couchlink_couchdb_request_duration_seconds_bucket{le=\"0.002\"} 0\n"));
        assert!(text.contains("couchlink_couchdb_request_duration_seconds_bucket{le=\"0.005\"} 1\n"));
        assert!(text.contains("couchlink_couchdb_request_duration_seconds_count 1\n"));
        assert!(text.contains("couchlink_couchdb_errors_total 1\n"));
        assert!(text.contains("couchlink_cache_hits_total 1\n"));
        assert!(text.contains("couchlink_password_answers_total{result=\"missing\"} 0\n"), "{text}");
        assert!(text.contains("couchlink_password_hashes_total 0\n"), "{text}");
        assert!(text.contains("couchlink_cache_entries 7\n"));
        assert!(text.contains("couchlink_feed_up 1\n"));
        assert!(text.contains("couchlink_access_log_lines_total 3\n"));
        assert!(text.contains("couchlink_access_log_lines_lost_total 2\n"));
        assert!(text.contains("couchlink_access_log_queue_bytes 512\n"));
        assert!(text.contains("couchlink_access_log_failing 0\n"));
        assert!(text.contains("couchlink_cache_from_snapshot 1\n"));
        assert!(text.contains("couchlink_feed_catching_up 1\n"));
        assert!(text.contains("couchlink_feed_changes_behind 12\n"));
        assert!(text.contains("couchlink_snapshots_written_total 4\n"));
        assert!(text.contains("couchlink_snapshot_failures_total 1\n"));
        assert!(text.contains("couchlink_snapshot_written_timestamp_seconds 1795000000\n"));
        assert!(text.contains("couchlink_clicks_documents_written_total 5\n"));
        assert!(text.contains("couchlink_clicks_pending_documents 2\n"));
        assert!(text.contains("couchlink_clicks_pending_bytes 900\n"));
        assert!(text.contains("couchlink_clicks_lost_total 3\n"));
        assert!(text.contains("couchlink_clicks_refused_documents_total 1\n"));
        assert!(text.contains("couchlink_clicks_failing 1\n"));
        assert!(text.contains("couchlink_history_entries_total 7\n"));
        assert!(text.contains("couchlink_history_gaps_total 1\n"));
        assert!(text.contains("couchlink_history_missing_revisions_total 2\n"));
        assert!(text.contains("couchlink_history_refused_total 3\n"));
    }

    #[test]
    fn every_sample_has_help_and_type() {
        let log = LogHealth { lines_written: 0, lines_lost: 0, queued_bytes: 0, failing_since: None };
        let text = Metrics::default().render(&Gauges {
            cache_entries: 0,
            feed_up: false,
            log,
            cache_from_snapshot: false,
            feed_behind: None,
            snapshots_written: 0,
            snapshot_failures: 0,
            snapshot_written_at: None,
            clicks: ClicksGauges::default(),
            history: HistoryGauges::default(),
        });
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let family = line.split(['{', ' ']).next().unwrap();
            let family = ["_bucket", "_sum", "_count"].iter().fold(family, |f, s| f.strip_suffix(s).unwrap_or(f));
            assert!(text.contains(&format!("# TYPE {family} ")), "{family} has no TYPE line");
            assert!(text.contains(&format!("# HELP {family} ")), "{family} has no HELP line");
        }
    }
}
