//! One short domain's assembly: its link store (from its snapshot where one passes its
//! checks), its `_changes` feed, snapshots, log retention, warm-up, history recorder and live
//! counts started; the handler's state built from every domain; and each domain finished in
//! order at shutdown.

use std::future::Future;
use std::num::NonZeroU32;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::access_log::{AccessLog, Flusher};
use crate::admin::AdminSite;
use crate::clicks::doc::Writer as ClicksIdentity;
use crate::clicks::limits::Limits as VisitLimits;
use crate::clicks::writer::{ClicksStatus, ClicksWriter};
use crate::clicks::Tally;
use crate::couch::CouchClient;
use crate::domain::{Companion, Host, PublicUrl};
use crate::follower::{FeedStatus, Follower};
use crate::handler::{App, Settings, Site, Sites};
use crate::http::Shape;
use crate::log_retention::Retention;
use crate::metrics::Metrics;
use crate::snapshot::{self, SnapshotFile, SnapshotStatus, Snapshots};
use crate::store::LinkStore;

use super::config::{ClicksConfig, ServerConfig};

/// How long the access log may take to write its backlog at shutdown.
pub(super) const LOG_FLUSH_TIMEOUT: Duration = Duration::from_secs(30);

/// One short domain, checked and with its log open, before it serves.
pub(super) struct SitePlan {
    /// Its host; `None` with one domain configured as before domains (every host).
    pub(super) host: Option<Host>,
    pub(super) couch: CouchClient,
    pub(super) public_url: PublicUrl,
    pub(super) log: AccessLog,
    pub(super) flusher: Flusher,
    pub(super) log_dir: PathBuf,
    pub(super) state_dir: Option<PathBuf>,
}

/// One short domain serving: what the handler, the admin listener and shutdown need of it.
pub(super) struct RunningSite {
    pub(super) host: Option<Host>,
    pub(super) public_url: PublicUrl,
    pub(super) couch: CouchClient,
    pub(super) store: Arc<LinkStore>,
    /// Its live counts, and their state, when counting is on.
    pub(super) clicks: Option<(Arc<Tally>, Arc<ClicksStatus>)>,
    /// Its links' visit limits.
    pub(super) limits: Arc<VisitLimits>,
    /// Its history recorder's state, when it records.
    pub(super) history: Option<Arc<crate::history::recorder::RecorderStatus>>,
    pub(super) metrics: Arc<Metrics>,
    pub(super) feed: Arc<FeedStatus>,
    pub(super) snapshot_status: Arc<SnapshotStatus>,
    pub(super) snapshots: Option<Arc<Snapshots>>,
    pub(super) log: AccessLog,
    pub(super) flusher: Flusher,
    pub(super) tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl RunningSite {
    /// What the admin listener reports of it.
    pub(super) fn admin(&self) -> AdminSite {
        AdminSite {
            host: self.host.as_ref().map(|h| h.to_string()),
            couch: self.couch.clone(),
            store: self.store.clone(),
            metrics: self.metrics.clone(),
            feed: self.feed.clone(),
            log: self.log.clone(),
            snapshots: self.snapshot_status.clone(),
            clicks: self.clicks.as_ref().map(|(_, status)| status.clone()),
            history: self.history.clone(),
        }
    }

    /// What the handler serves of it.
    fn handler_site(&self) -> Site {
        Site {
            store: Some(self.store.clone()),
            log: self.log.clone(),
            metrics: self.metrics.clone(),
            clicks: self.clicks.as_ref().map(|(tally, _)| tally.clone()),
            limits: self.limits.clone(),
        }
    }
}

/// The handler's state: the settings, each domain's site (and the sink for unknown hosts), and
/// the response shapes the writer needs, one per domain.
pub(super) fn handler_app(
    config: &ServerConfig,
    running: &[RunningSite],
    unknown: Option<&(AccessLog, Flusher, PathBuf)>,
    geoip: Option<Arc<crate::visitor::geoip::GeoIp>>,
    metrics: Arc<Metrics>,
    unknown_metrics: Arc<Metrics>,
) -> (Arc<App>, Arc<Vec<Shape>>) {
    let mut settings = Settings::new(&config.cookie_name, config.trusted_proxies.clone());
    settings.honor_privacy_signals = config.honor_privacy_signals;
    settings.anonymize_ip = config.anonymize_ip;
    settings.fallback = config.fallback_url.as_deref().map(Arc::from);
    if let Some(db) = &geoip {
        tracing::info!(
            "country rules use {} ({}, built {})",
            db.path().display(),
            db.database_type(),
            time::OffsetDateTime::from_unix_timestamp(db.build_epoch() as i64)
                .map(|t| t.date().to_string())
                .unwrap_or_default()
        );
    }
    settings.geoip = geoip;
    let mut shapes: Vec<Shape> =
        running.iter().map(|s| Shape::new(s.public_url.clone(), &config.cookie_name)).collect();
    let sites = if running.len() == 1 && running[0].host.is_none() {
        Sites::single(running[0].handler_site())
    } else {
        let default =
            config.default_domain.as_ref().and_then(|d| running.iter().position(|s| s.host.as_ref() == Some(d)));
        let hosts = running.iter().map(|s| (s.host.clone().expect("named domains"), s.handler_site())).collect();
        // Requests for no configured host: a 404 logged apart, written as the first
        // domain's (no shortlink is named; the cookie's Secure follows that domain).
        let log = unknown.map_or(&running[0].log, |(log, _, _)| log);
        let sink = Site {
            store: None,
            log: log.clone(),
            metrics: unknown_metrics,
            clicks: None,
            limits: Arc::new(VisitLimits::new(None)),
        };
        shapes.push(Shape::new(running[default.unwrap_or(0)].public_url.clone(), &config.cookie_name));
        Sites::new(hosts, default, sink)
    };
    (Arc::new(App { sites, metrics, settings }), Arc::new(shapes))
}

pub(super) async fn write_snapshots(snapshots: Vec<Arc<Snapshots>>) {
    for snapshots in snapshots {
        snapshots.write_once().await;
    }
}

/// Runs `task` on a thread `name` with a single-threaded runtime of its own; the handle ends
/// when it does. Where no thread or runtime can be had, it runs on this runtime, said.
pub(super) fn spawn_on_own_thread<F>(name: &str, task: F) -> tokio::task::JoinHandle<()>
where
    F: Future<Output = ()> + Send + 'static,
{
    let (done, ended) = tokio::sync::oneshot::channel::<()>();
    // The task is handed over once the thread runs: a thread that cannot start leaves it here.
    let (give, take) = std::sync::mpsc::sync_channel::<F>(1);
    let thread = tokio::runtime::Builder::new_current_thread().enable_all().build().and_then(|runtime| {
        std::thread::Builder::new().name(name.to_owned()).spawn(move || {
            if let Ok(task) = take.recv() {
                runtime.block_on(task);
                let _ = done.send(());
            }
        })
    });
    let refused = match thread {
        Ok(_) => match give.send(task) {
            Ok(()) => return tokio::spawn(async move { drop(ended.await) }),
            Err(std::sync::mpsc::SendError(task)) => (task, "its thread ended".to_owned()),
        },
        Err(e) => (task, e.to_string()),
    };
    tracing::warn!("{name} runs beside the serving: no thread of its own ({})", refused.1);
    tokio::spawn(refused.0)
}

/// Each domain's tasks awaited and its access log written, then the unknown hosts' log.
pub(super) async fn finish_sites(running: Vec<RunningSite>, unknown: Option<(AccessLog, Flusher, PathBuf)>) {
    for site in running {
        for task in site.tasks {
            let _ = task.await;
        }
        site.flusher.finish(LOG_FLUSH_TIMEOUT).await;
    }
    if let Some((_, flusher, _)) = unknown {
        flusher.finish(LOG_FLUSH_TIMEOUT).await;
    }
}

/// Starts one domain: its store, from its snapshot where one passes its checks, its `_changes`
/// feed, its snapshots, its log retention and its warm-up.
pub(super) async fn start_site(
    plan: SitePlan,
    metrics: Arc<Metrics>,
    config: &ServerConfig,
    clicks: Option<(&ClicksConfig, &ClicksIdentity)>,
    recorder: &str,
    stopped: watch::Receiver<bool>,
) -> RunningSite {
    let SitePlan { host, couch, public_url, log, flusher, log_dir, state_dir } = plan;
    let store = Arc::new(LinkStore::new(couch.clone(), metrics.clone(), config.cache_capacity, config.cold_reads));
    let feed = Arc::new(FeedStatus::default());
    let snapshot_status = Arc::new(SnapshotStatus::default());
    let mut follower = Follower::new(couch.clone(), store.clone(), metrics.clone(), feed.clone());
    // Before anything is served: from a snapshot that passes its checks, the cache is whole at
    // once; otherwise it fills from CouchDB while serving (a warm start).
    let restored = match &state_dir {
        Some(dir) => {
            let identity = couch.database_identity().await;
            let file = SnapshotFile::new(dir);
            snapshot::restore(&file, identity.as_deref(), couch.database(), &store, &snapshot_status).await
        }
        None => None,
    };
    // A warm-up unless the snapshot held a whole one.
    let warmed = restored.as_ref().is_some_and(|r| r.complete);
    // "warming" in /healthz from the start, until the first warm-up is done.
    store.set_warming(config.warm_start && !warmed);
    if let Some(restored) = restored {
        follower = follower.resume_from(restored.seq);
    }
    let mut tasks = vec![tokio::spawn(follower.run(stopped.clone()))];
    let snapshots = state_dir.as_ref().map(|dir| {
        Arc::new(Snapshots {
            file: SnapshotFile::new(dir),
            couch: couch.clone(),
            store: store.clone(),
            feed: feed.clone(),
            warm_start: config.warm_start,
            interval: config.snapshot_interval,
            status: snapshot_status.clone(),
            writing: Default::default(),
        })
    });
    tasks.extend(snapshots.clone().map(|s| tokio::spawn(s.run(stopped.clone()))));
    let retention =
        Retention { dir: log_dir, keep_days: NonZeroU32::new(config.log_keep_days), compress: config.log_compress };
    tasks.push(tokio::spawn(retention.run(stopped.clone())));
    let warmed_for = if warmed { store.synced_epoch() } else { None };
    if config.warm_start {
        tasks.push(tokio::spawn(crate::warm::Warmer::run(couch.clone(), store.clone(), warmed_for, stopped.clone())));
    }
    let history_db = config.history_db.database(Companion::History, couch.database()).filter(|_| config.history);
    let history = history_db.map(|history_db| {
        // The recorder reads and writes in pages of hundreds of documents: on a thread of its
        // own, with connections of its own, so that neither its work nor CouchDB's answers to
        // it ever wait on a serving thread (on one, it raised that thread's p99 during a first
        // pass: 122 ms against 9 ms beside it, #77).
        let own = couch.with_own_connections().unwrap_or_else(|_| couch.clone());
        let recorder = crate::history::recorder::Recorder::new(
            own.clone(),
            own.for_database(&history_db),
            recorder.to_owned(),
            config.history_timing,
        )
        .yielding_to({
            let metrics = metrics.clone();
            Arc::new(move || metrics.responses_total())
        });
        let status = recorder.status.clone();
        // After the warm-up: a start reads links first, history after.
        let store = store.clone();
        let warmed = async move {
            while store.is_warming() {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        };
        tasks.push(spawn_on_own_thread("couchlink-history", recorder.run(warmed, stopped.clone())));
        status
    });
    // Visit limits count from the live counts' view when they are on; else from this start.
    let mut limits = Arc::new(VisitLimits::new(None));
    let clicks = clicks.and_then(|(settings, writer)| {
        Some((settings.db.database(Companion::Clicks, couch.database())?, settings, writer))
    });
    let clicks = match clicks {
        Some((db, settings, writer)) => {
            limits = Arc::new(VisitLimits::new(Some(couch.for_database(&db))));
            let clicks = ClicksWriter {
                couch: couch.for_database(&db),
                tally: Arc::default(),
                writer: writer.clone(),
                interval_secs: settings.interval_secs,
                queue_bytes: settings.queue_bytes,
                status: Arc::default(),
                limits: limits.clone(),
            };
            let handles = (clicks.tally.clone(), clicks.status.clone());
            tasks.push(tokio::spawn(clicks.run(stopped)));
            Some(handles)
        }
        None => None,
    };
    RunningSite {
        host,
        public_url,
        couch,
        store,
        clicks,
        limits,
        history,
        metrics,
        feed,
        snapshot_status,
        snapshots,
        log,
        flusher,
        tasks,
    }
}
