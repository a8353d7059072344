//! couchlink serving on port 0 with its own database and log directory, configured through the
//! real argument parser, and the assertions tests make on it.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use clap::Parser;
use couchlink::cmd::serve::{ServeArgs, StartError};
use couchlink::cmd::{Cli, Command};
use tempfile::TempDir;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::couch::{couch, http, TestDb, READER};

/// `couchlink serve` flags, parsed exactly as the binary parses them: `overrides` (flag, value)
/// replace the defaults given here, so a test names only what it changes and a new flag is
/// added in one place, `ServeArgs`.
pub fn serve_args(defaults: &[(&str, String)], overrides: &[(&str, String)]) -> ServeArgs {
    let mut flags: BTreeMap<&str, String> = BTreeMap::new();
    for (flag, value) in defaults.iter().chain(overrides) {
        flags.insert(flag, value.clone());
    }
    let mut argv = vec!["couchlink".to_owned(), "serve".to_owned()];
    for (flag, value) in flags {
        argv.push(flag.to_owned());
        argv.push(value);
    }
    match Cli::try_parse_from(&argv).unwrap_or_else(|e| panic!("{argv:?}: {e}")).command {
        Command::Serve(args) => args,
        other => panic!("parsed as {other:?}"),
    }
}

/// How a test wants couchlink configured.
#[derive(Default)]
pub struct AppOptions {
    /// Flags to set, as `couchlink serve` takes them: `("--public-url", "https://0x1f.ie")`.
    pub args: Vec<(&'static str, String)>,
    /// Use a database without couchlink's validation (see [`TestDb::bare`]).
    pub bare_db: bool,
}

impl AppOptions {
    /// Options that set these flags.
    pub fn args(args: &[(&'static str, &str)]) -> AppOptions {
        AppOptions { args: args.iter().map(|(f, v)| (*f, v.to_string())).collect(), ..Default::default() }
    }
}

/// couchlink serving on a port-0 listener of its own, with its own log directory.
pub struct TestApp {
    pub addr: SocketAddr,
    /// The admin listener (`/healthz`, `/metrics`).
    pub admin_addr: SocketAddr,
    pub base: String,
    pub db: TestDb,
    pub log_dir: TempDir,
    pub http: reqwest::Client,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), StartError>>>,
}

pub async fn spawn_app() -> TestApp {
    spawn_app_with(AppOptions::default()).await
}

pub async fn spawn_app_with(options: AppOptions) -> TestApp {
    let db = if options.bare_db { TestDb::bare().await } else { TestDb::new().await };
    spawn_app_on(db, options.args).await
}

/// couchlink serving `db` as the read-only account, with `overrides` to its flags.
pub async fn spawn_app_on(db: TestDb, overrides: Vec<(&'static str, String)>) -> TestApp {
    // As `couchlink serve` binds it: extra workers get SO_REUSEPORT siblings of it.
    let listener = couchlink::accept::bind_shareable("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = listener.local_addr().unwrap();
    let admin_listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let admin_addr = admin_listener.local_addr().unwrap();
    let log_dir = tempfile::tempdir().unwrap();
    let defaults = [
        ("--couchdb-url", db.couch.url.clone()),
        ("--couchdb-user", READER.0.to_owned()),
        ("--couchdb-password", READER.1.to_owned()),
        ("--db", db.name.clone()),
        ("--public-url", format!("http://{addr}")),
        ("--log-dir", log_dir.path().display().to_string()),
        ("--cache-capacity", "10000".to_owned()),
        ("--workers", "1".to_owned()),
        ("--drain-secs", "10".to_owned()),
        ("--trusted-proxies", String::new()),
        ("--cookie-name", "tid".to_owned()),
        ("--reader-role", super::couch::READER_ROLE.to_owned()),
        ("--editor-role", super::couch::EDITOR_ROLE.to_owned()),
    ];
    let args = serve_args(&defaults, &overrides);
    let (tx, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(couchlink::cmd::serve::run(args, listener, admin_listener, async {
        let _ = rx.await;
    }));
    TestApp {
        addr,
        admin_addr,
        base: format!("http://{addr}"),
        db,
        log_dir,
        http: http(),
        shutdown: Some(tx),
        task: Some(task),
    }
}

/// Starts `couchlink serve` with `args` (the whole CouchDB configuration among them) and stops
/// it at once; how start-up ended.
pub async fn start_and_stop(args: &[(&str, String)]) -> Result<(), StartError> {
    let listener = couchlink::accept::bind_shareable("127.0.0.1:0".parse().unwrap()).unwrap();
    let admin = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let defaults = [("--public-url", "http://127.0.0.1".to_owned()), ("--workers", "1".to_owned())];
    couchlink::cmd::serve::run(serve_args(&defaults, args), listener, admin, async {}).await
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
        let mut files: Vec<_> = std::fs::read_dir(self.log_dir.path())
            .unwrap()
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

    /// Waits until the log holds at least `n` lines (it is written off-thread).
    pub async fn wait_for_log_lines(&self, n: usize) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let lines = self.log_lines();
            if lines.len() >= n || Instant::now() > deadline {
                return lines;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
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

    /// Waits (at most 5 s) until `/healthz` says the `_changes` feed is live.
    pub async fn wait_until_feed_is_live(&self) {
        let started = Instant::now();
        while self.admin_get("/healthz").await.status() != 200 {
            assert!(started.elapsed() < Duration::from_secs(5), "the feed never came up");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Waits (at most 5 s) until `sample` in `/metrics` reaches `at_least`.
    pub async fn wait_for_metric(&self, sample: &str, at_least: f64) {
        let started = Instant::now();
        while self.metric(sample).await < at_least {
            assert!(started.elapsed() < Duration::from_secs(5), "{sample} never reached {at_least}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Polls `path` until it answers `status` (and `location`, for a 302); how long it took.
    /// Panics after 5 s.
    pub async fn wait_until_served(&self, path: &str, status: u16, location: Option<&str>) -> Duration {
        let started = Instant::now();
        loop {
            let r = self.get(path).await;
            let got_location = r.headers().get("location").map(|v| v.to_str().unwrap().to_owned());
            if r.status() == status && got_location.as_deref() == location {
                return started.elapsed();
            }
            assert!(started.elapsed() < Duration::from_secs(5), "{path} still answers {} {got_location:?}", r.status());
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
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
