//! couchlink serving on port 0 with its own database and log directory, configured by a
//! `ServerConfig` built here (one test in `startup.rs` checks the flags that build it in the
//! binary), and the assertions tests make on it.

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use couchlink::couch::CouchConfig;
use couchlink::startup::{Application, ServerConfig, StartError};
use tempfile::TempDir;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::couch::{http, TestDb, EDITOR_ROLE, READER};
use super::eventually::{eventually, holds};

/// The configuration a test serves `db` with, as its read-only account, logging to `log_dir`:
/// loopback ports chosen by the kernel, one serving thread, a small cache.
pub fn test_config(db: &TestDb, log_dir: &Path) -> ServerConfig {
    let couch = CouchConfig {
        url: db.couch.url.clone(),
        user: Some(READER.0.to_owned()),
        password: Some(READER.1.to_owned()),
        password_file: None,
        db: db.name.clone(),
    };
    let mut config = ServerConfig::new(couch, "127.0.0.1:0".parse().unwrap());
    config.admin_listen = "127.0.0.1:0".parse().unwrap();
    config.editor_role = EDITOR_ROLE.to_owned();
    config.log_dir = log_dir.to_owned();
    config.cache_capacity = 10_000;
    config.workers = 1;
    // Never the default beside the logs: `spawn_app_on` gives each app a folder of its own.
    config.state_dir = None;
    // Off, as the test databases have no clicks database: the tests of live counts turn it on.
    config.clicks = None;
    // Off likewise: the tests of history turn it on.
    config.history = false;
    config
}

/// A change to a test's configuration.
type Configure = Box<dyn FnOnce(&mut ServerConfig) + Send>;

/// How a test wants couchlink configured.
#[derive(Default)]
pub struct AppOptions {
    /// Changes to [`test_config`].
    pub configure: Option<Configure>,
    /// Use a database without couchlink's validation (see [`TestDb::bare`]).
    pub bare_db: bool,
}

impl AppOptions {
    /// [`test_config`] changed by `configure`.
    pub fn with(configure: impl FnOnce(&mut ServerConfig) + Send + 'static) -> AppOptions {
        AppOptions { configure: Some(Box::new(configure)), bare_db: false }
    }
}

/// A running couchlink and what a test needs to talk to it.
pub struct TestApp {
    pub addr: SocketAddr,
    pub admin_addr: SocketAddr,
    pub base: String,
    pub db: TestDb,
    pub log_dir: TempDir,
    /// The cache snapshot's folder, unless the test named another.
    pub state_dir: TempDir,
    pub http: reqwest::Client,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), StartError>>>,
}

pub async fn spawn_app() -> TestApp {
    spawn_app_with(AppOptions::default()).await
}

pub async fn spawn_app_with(options: AppOptions) -> TestApp {
    let db = if options.bare_db { TestDb::bare().await } else { TestDb::new().await };
    spawn_app_on(db, options.configure.unwrap_or_else(|| Box::new(|_| {}))).await
}

/// couchlink serving `db` as the read-only account, with [`test_config`] changed by
/// `configure`.
pub async fn spawn_app_on(db: TestDb, configure: impl FnOnce(&mut ServerConfig)) -> TestApp {
    let log_dir = tempfile::tempdir().unwrap();
    let state_dir = tempfile::tempdir().unwrap();
    let mut config = test_config(&db, log_dir.path());
    config.state_dir = Some(state_dir.path().to_owned());
    configure(&mut config);
    let app = Application::build(config).await.unwrap_or_else(|e| panic!("couchlink starts: {e}"));
    let (addr, admin_addr) = (app.address(), app.admin_address());
    let (tx, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(app.run_until_stopped(async {
        let _ = rx.await;
    }));
    TestApp {
        addr,
        admin_addr,
        base: format!("http://{addr}"),
        db,
        log_dir,
        state_dir,
        http: http(),
        shutdown: Some(tx),
        task: Some(task),
    }
}

/// Builds couchlink with `config` and stops it at once; how start-up ended.
pub async fn start_and_stop(config: ServerConfig) -> Result<(), StartError> {
    Application::build(config).await?.run_until_stopped(async {}).await
}

impl TestApp {
    pub async fn get(&self, path: &str) -> reqwest::Response {
        self.http.get(format!("{}{path}", self.base)).send().await.expect("couchlink answers")
    }

    pub async fn request(&self, method: reqwest::Method, path: &str) -> reqwest::Response {
        self.http.request(method, format!("{}{path}", self.base)).send().await.expect("couchlink answers")
    }

    /// Sends `raw` bytes as the whole request and returns the raw response.
    pub async fn raw(&self, raw: &[u8]) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(self.addr).await.unwrap();
        stream.write_all(raw).await.unwrap();
        let mut out = Vec::new();
        stream.read_to_end(&mut out).await.unwrap();
        String::from_utf8_lossy(&out).into_owned()
    }

    /// Stops couchlink as SIGTERM would and returns how `serve` ended.
    pub async fn stop(&mut self) -> Result<(), StartError> {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        self.task.take().expect("stopped once").await.expect("serve task did not panic")
    }

    /// Every access log line written so far, across rotated files, in file order.
    pub fn log_lines(&self) -> Vec<String> {
        // None yet where a test removed the folder and couchlink has not made it again.
        let Ok(entries) = std::fs::read_dir(self.log_dir.path()) else { return Vec::new() };
        let mut files: Vec<_> = entries
            .map(|e| e.unwrap().path())
            .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("access"))
            .collect();
        files.sort();
        let mut text = String::new();
        for file in files {
            text.push_str(&String::from_utf8(std::fs::read(file).unwrap()).expect("log lines are ASCII"));
        }
        assert!(text.is_empty() || text.ends_with('\n'), "every line ends with \\n");
        text.lines().map(str::to_owned).collect()
    }

    /// Waits (at most 10 s) until the log holds at least `n` lines (it is written off-thread);
    /// those lines.
    pub async fn wait_for_log_lines(&self, n: usize) -> Vec<String> {
        let what = format!("at least {n} access log lines");
        eventually(&what, Duration::from_secs(10), || async {
            let lines = self.log_lines();
            if lines.len() >= n {
                Ok(lines)
            } else {
                Err(lines)
            }
        })
        .await
    }

    /// `GET` on the admin listener.
    pub async fn admin_get(&self, path: &str) -> reqwest::Response {
        self.http.get(format!("http://{}{path}", self.admin_addr)).send().await.expect("admin listener answers")
    }

    /// One sample's value from `/metrics`, e.g. `couchlink_cache_misses_total`.
    pub async fn metric(&self, sample: &str) -> f64 {
        let text = self.admin_get("/metrics").await.text().await.unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix(sample).and_then(|rest| rest.strip_prefix(' ')))
            .unwrap_or_else(|| panic!("no sample {sample} in {text}"))
            .parse()
            .unwrap()
    }

    /// Waits (at most 5 s) until `/healthz` says the `_changes` feed is live. What it says of
    /// the feed, not its status: a 200 also needs CouchDB to answer a ping within 2 s, which the
    /// shared test server does not while another test's bulk write of 10,000 links holds
    /// pouchdb-server's one thread (seen: feed live, "couchdb": "timed out", 503 for 5 s).
    pub async fn wait_until_feed_is_live(&self) {
        eventually("/healthz says the feed is live", Duration::from_secs(5), || async {
            let health: serde_json::Value = self.admin_get("/healthz").await.json().await.unwrap();
            holds(health["feed"]["state"] == "live", health)
        })
        .await
    }

    /// Waits (at most 5 s) until `sample` in `/metrics` reaches `at_least`.
    pub async fn wait_for_metric(&self, sample: &str, at_least: f64) {
        let what = format!("{sample} reaches {at_least}");
        eventually(&what, Duration::from_secs(5), || async {
            let value = self.metric(sample).await;
            holds(value >= at_least, value)
        })
        .await
    }

    /// Polls `path` until it answers `status` (and `location`, for a 302); how long it took.
    /// Panics after 5 s.
    pub async fn wait_until_served(&self, path: &str, status: u16, location: Option<&str>) -> Duration {
        let started = Instant::now();
        let what = format!("{path} answers {status} {location:?}");
        eventually(&what, Duration::from_secs(5), || async {
            let r = self.get(path).await;
            let got_location = r.headers().get("location").map(|v| v.to_str().unwrap().to_owned());
            holds(r.status() == status && got_location.as_deref() == location, (r.status(), got_location))
        })
        .await;
        started.elapsed()
    }
}

/// Asserts a 302 to `target`, with the documented headers.
pub fn assert_redirects_to(response: &reqwest::Response, target: &str) {
    assert_eq!(response.status(), 302, "expected a redirect to {target}");
    assert_eq!(response.headers()["location"], target);
    assert_eq!(response.headers()["cache-control"], "no-store");
}

/// The tracking cookie a response set, checking its attributes.
pub fn tracking_cookie(response: &reqwest::Response) -> String {
    let set_cookie = response.headers()["set-cookie"].to_str().unwrap().to_owned();
    let (pair, attributes) = set_cookie.split_once("; ").expect("attributes present");
    assert_eq!(attributes.trim_end_matches("; Secure"), "Path=/; Max-Age=63072000; HttpOnly; SameSite=Lax");
    pair.strip_prefix("tid=").expect("cookie named tid").to_owned()
}

/// Whether `id` has the issued tracking ID form: 14 digits, 16 lowercase hex digits.
pub fn is_fresh_tracking_id(id: &str) -> bool {
    id.len() == 30
        && id[..14].bytes().all(|b| b.is_ascii_digit())
        && id[14..].bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Now in UTC as the 14 digits `yyyymmddhhmmss`, as tracking IDs and log lines stamp it.
pub fn utc_stamp_now() -> String {
    let now = time::OffsetDateTime::now_utc();
    format!(
        "{:04}{:02}{:02}{:02}{:02}{:02}",
        now.year(),
        u8::from(now.month()),
        now.day(),
        now.hour(),
        now.minute(),
        now.second()
    )
}
