//! Test harness: a real CouchDB (the local pouchdb-server, or the one named by
//! `COUCHLINK_TEST_COUCHDB_URL`), a fresh database per test, and couchlink on port 0.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use couchlink::client_ip::TrustedProxies;
use couchlink::couch::CouchConfig;
use couchlink::serve::{ServeConfig, StartError};
use rand::Rng;
use serde_json::{json, Value};
use tempfile::TempDir;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// A CouchDB server the tests may create databases on.
pub struct Couch {
    pub url: String,
    pub admin_user: String,
    pub admin_password: String,
    /// Whether this is the pouchdb-server stand-in (some CouchDB 3 rules cannot be checked).
    pub is_pouchdb: bool,
}

/// The shared server: `COUCHLINK_TEST_COUCHDB_URL` (+ `_USER`/`_PASSWORD`, or credentials in
/// the URL), else the project's local pouchdb-server, started once per test run. Panics (so
/// the test fails) when neither can be had: a test never passes by skipping CouchDB.
pub fn couch() -> &'static Couch {
    static COUCH: OnceLock<Couch> = OnceLock::new();
    COUCH.get_or_init(|| match std::env::var("COUCHLINK_TEST_COUCHDB_URL") {
        Ok(url) => {
            let mut parsed = url::Url::parse(&url).expect("COUCHLINK_TEST_COUCHDB_URL is not a URL");
            let user = std::env::var("COUCHLINK_TEST_COUCHDB_USER").unwrap_or_else(|_| parsed.username().to_owned());
            let password = std::env::var("COUCHLINK_TEST_COUCHDB_PASSWORD")
                .unwrap_or_else(|_| parsed.password().unwrap_or_default().to_owned());
            parsed.set_username("").unwrap();
            parsed.set_password(None).unwrap();
            let url = parsed.as_str().trim_end_matches('/').to_owned();
            let vendor = blocking_get(&url).unwrap_or_else(|e| panic!("CouchDB at {url} does not answer: {e}"));
            Couch { url, admin_user: user, admin_password: password, is_pouchdb: vendor.contains("express-pouchdb") }
        }
        Err(_) => start_local_couchdb(),
    })
}

fn start_local_couchdb() -> Couch {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("couchdb/local-couchdb.sh");
    for _attempt in 0..3 {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let (tx, rx) = std::sync::mpsc::channel();
        let script = script.clone();
        // The child is spawned from a thread that lives as long as it does, so the
        // parent-death signal fires only when the whole test process ends.
        std::thread::spawn(move || {
            let mut command = Command::new(&script);
            command
                .args(["--port", &port.to_string(), "--admin", "admin:admin"])
                .stdin(Stdio::null())
                .stdout(Stdio::null());
            // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
            unsafe {
                command.pre_exec(|| {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                    Ok(())
                });
            }
            let mut child = command.spawn().unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
            let status = child.wait();
            let _ = tx.send(status);
        });
        let url = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(120);
        while Instant::now() < deadline {
            if let Ok(status) = rx.try_recv() {
                eprintln!("local CouchDB exited early ({status:?}); retrying on another port");
                break;
            }
            if blocking_get(&url).is_ok() {
                return Couch { url, admin_user: "admin".into(), admin_password: "admin".into(), is_pouchdb: true };
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    panic!("could not start the local CouchDB (couchdb/local-couchdb.sh); these tests need a real CouchDB API");
}

/// A plain blocking GET, usable before any runtime exists.
fn blocking_get(url: &str) -> std::io::Result<String> {
    let addr = url.trim_start_matches("http://").split('/').next().unwrap_or_default().to_owned();
    let mut stream = TcpStream::connect(&addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(stream, "GET / HTTP/1.0\r\nHost: {addr}\r\nAccept: application/json\r\n\r\n")?;
    let mut body = String::new();
    stream.read_to_string(&mut body)?;
    if body.starts_with("HTTP/1.1 200") || body.starts_with("HTTP/1.0 200") {
        Ok(body)
    } else {
        Err(std::io::Error::other(body))
    }
}

/// An HTTP client that shows redirects instead of following them.
pub fn http() -> reqwest::Client {
    reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap()
}

/// The proxy's read-only account and an editor, shared by every test database.
pub const READER: (&str, &str) = ("couchlink-test-reader", "reader-pw");
pub const EDITOR: (&str, &str) = ("couchlink-test-editor", "editor-pw");

/// A fresh database on the shared server.
pub struct TestDb {
    pub name: String,
}

impl TestDb {
    /// A database prepared by `couchlink setup` (validation, `_security`, reader account), plus
    /// an editor account.
    pub async fn new() -> TestDb {
        let db = TestDb { name: format!("test_{}", random_lowercase(12)) };
        let reader = couchlink::setup::Reader { name: READER.0.into(), password: READER.1.into() };
        couchlink::setup::run(&db.client_as(None), Some(&reader)).await.expect("couchlink setup works");
        ensure_user(EDITOR, "editor").await;
        db
    }

    /// A database without couchlink's validation, holding whatever a test puts in it: the
    /// proxy must not trust documents from before validation existed, or replicated in.
    pub async fn bare() -> TestDb {
        let db = TestDb { name: format!("test_{}", random_lowercase(12)) };
        let created = db.admin(reqwest::Method::PUT, "", None).await;
        assert!(created.status().is_success(), "cannot create test database: {}", created.text().await.unwrap());
        let security =
            json!({"admins": {"names": [], "roles": []}, "members": {"names": [], "roles": ["reader", "editor"]}});
        let r = db.admin(reqwest::Method::PUT, "_security", Some(&security)).await;
        assert!(r.status().is_success(), "cannot set _security: {}", r.text().await.unwrap());
        db
    }

    /// A request to this database as the server admin.
    pub async fn admin(&self, method: reqwest::Method, path: &str, body: Option<&Value>) -> reqwest::Response {
        let c = couch();
        let url = if path.is_empty() {
            format!("{}/{}", c.url, self.name)
        } else {
            format!("{}/{}/{path}", c.url, self.name)
        };
        let mut req = http()
            .request(method, url)
            .basic_auth(&c.admin_user, Some(&c.admin_password))
            .header("Accept", "application/json");
        if let Some(body) = body {
            req = req.json(body);
        }
        req.send().await.expect("CouchDB answers")
    }

    /// Creates or replaces link `id` with `doc` (as admin); returns the new revision.
    pub async fn put_link(&self, id: &str, doc: Value) -> String {
        let mut doc = doc;
        if let Some(rev) = self.rev(id).await {
            doc["_rev"] = json!(rev);
        }
        let r = self.admin(reqwest::Method::PUT, id, Some(&doc)).await;
        let status = r.status();
        let body: Value = r.json().await.unwrap();
        assert!(status.is_success(), "PUT {id} failed: {body}");
        body["rev"].as_str().unwrap().to_owned()
    }

    /// Deletes link `id` (as admin).
    pub async fn delete_link(&self, id: &str) {
        let rev = self.rev(id).await.expect("document exists");
        let r = self.admin(reqwest::Method::DELETE, &format!("{id}?rev={rev}"), None).await;
        assert!(r.status().is_success(), "DELETE {id} failed: {}", r.text().await.unwrap());
    }

    pub async fn rev(&self, id: &str) -> Option<String> {
        let r = self.admin(reqwest::Method::GET, id, None).await;
        if !r.status().is_success() {
            return None;
        }
        let body: Value = r.json().await.unwrap();
        body["_rev"].as_str().map(str::to_owned)
    }

    /// The admin's configuration for this database.
    pub fn couch_config(&self) -> CouchConfig {
        let c = couch();
        CouchConfig {
            url: c.url.clone(),
            user: Some(c.admin_user.clone()),
            password: Some(c.admin_password.clone()),
            db: self.name.clone(),
        }
    }

    /// The proxy's read-only configuration for this database.
    pub fn reader_config(&self) -> CouchConfig {
        CouchConfig { user: Some(READER.0.into()), password: Some(READER.1.into()), ..self.couch_config() }
    }

    /// A couchlink CouchDB client as `who` (the admin when `None`).
    pub fn client_as(&self, who: Option<(&str, &str)>) -> couchlink::couch::CouchClient {
        let client = couchlink::couch::CouchClient::new(&self.couch_config()).unwrap();
        match who {
            Some((user, password)) => client.with_credentials(user, password),
            None => client,
        }
    }
}

/// Creates (once per server) a user with exactly one role.
pub async fn ensure_user(who: (&str, &str), role: &str) {
    let c = couch();
    let url = format!("{}/_users/org.couchdb.user:{}", c.url, who.0);
    let auth = |r: reqwest::RequestBuilder| {
        r.basic_auth(&c.admin_user, Some(&c.admin_password)).header("Accept", "application/json")
    };
    for _ in 0..3 {
        let existing: Value = auth(http().get(&url)).send().await.unwrap().json().await.unwrap();
        if existing["roles"] == json!([role]) {
            return;
        }
        let mut doc = json!({"name": who.0, "password": who.1, "roles": [role], "type": "user"});
        if let Some(rev) = existing.get("_rev") {
            doc["_rev"] = rev.clone();
        }
        if auth(http().put(&url)).json(&doc).send().await.unwrap().status().is_success() {
            return;
        }
    }
    panic!("cannot create user {}", who.0);
}

pub fn random_lowercase(n: usize) -> String {
    let mut rng = rand::rng();
    (0..n).map(|_| (b'a' + rng.random_range(0..26u8)) as char).collect()
}

/// How a test wants couchlink configured.
pub struct AppOptions {
    pub public_url: Option<String>,
    pub trusted_proxies: &'static str,
    pub couch: Option<CouchConfig>,
    /// Use a database without couchlink's validation (see [`TestDb::bare`]).
    pub bare_db: bool,
    pub cache_capacity: usize,
    /// Serving threads (more than one adds threads with their own runtimes).
    pub workers: usize,
    /// Reach CouchDB at this URL (a [`Relay`]) instead of directly.
    pub couch_url: Option<String>,
}

impl Default for AppOptions {
    fn default() -> Self {
        AppOptions {
            public_url: None,
            trusted_proxies: "",
            couch: None,
            bare_db: false,
            cache_capacity: 10_000,
            workers: 1,
            couch_url: None,
        }
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
    ensure_user(READER, "reader").await;
    // As `couchlink serve` binds it: extra workers get SO_REUSEPORT siblings of it.
    let listener = couchlink::server::bind_shareable("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = listener.local_addr().unwrap();
    let admin_listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let admin_addr = admin_listener.local_addr().unwrap();
    let log_dir = tempfile::tempdir().unwrap();
    let config = ServeConfig {
        couch: options.couch.unwrap_or_else(|| CouchConfig {
            url: options.couch_url.unwrap_or_else(|| couch().url.clone()),
            ..db.reader_config()
        }),
        public_url: options.public_url.unwrap_or_else(|| format!("http://{addr}")),
        log_dir: log_dir.path().to_owned(),
        trusted_proxies: options.trusted_proxies.parse::<TrustedProxies>().unwrap(),
        cookie_name: "tid".into(),
        drain_timeout: Duration::from_secs(10),
        cache_capacity: options.cache_capacity,
        workers: options.workers,
    };
    let (tx, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(couchlink::serve::run(config, listener, admin_listener, async {
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
}

/// Asserts a 302 to `target`, with the contract's headers.
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

impl TestApp {
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

/// A TCP relay between couchlink and CouchDB that a test can cut (every connection dropped,
/// new ones refused) and restore, or slow down: a network outage without stopping CouchDB.
pub struct Relay {
    pub addr: SocketAddr,
    up: std::sync::Arc<std::sync::atomic::AtomicBool>,
    delay_ms: std::sync::Arc<std::sync::atomic::AtomicU64>,
    pumps: std::sync::Arc<std::sync::Mutex<Vec<JoinHandle<()>>>>,
}

impl Relay {
    pub async fn start(upstream: &str) -> Relay {
        use std::sync::atomic::Ordering::Relaxed;
        let upstream = upstream.trim_start_matches("http://").to_owned();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let relay = Relay {
            addr: listener.local_addr().unwrap(),
            up: Default::default(),
            delay_ms: Default::default(),
            pumps: Default::default(),
        };
        relay.up.store(true, Relaxed);
        let (up, delay, pumps) = (relay.up.clone(), relay.delay_ms.clone(), relay.pumps.clone());
        tokio::spawn(async move {
            loop {
                let Ok((mut client, _)) = listener.accept().await else { return };
                if !up.load(Relaxed) {
                    continue; // dropped: the connection is reset
                }
                let upstream = upstream.clone();
                let delay = delay.clone();
                let pump = tokio::spawn(async move {
                    use tokio::io::{AsyncReadExt, AsyncWriteExt};
                    let Ok(server) = tokio::net::TcpStream::connect(&upstream).await else { return };
                    let (mut server_read, mut server_write) = server.into_split();
                    let (mut client_read, mut client_write) = client.split();
                    let upward = async {
                        let mut buf = vec![0u8; 16384];
                        loop {
                            let n = match client_read.read(&mut buf).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => n,
                            };
                            let ms = delay.load(Relaxed);
                            if ms > 0 {
                                tokio::time::sleep(Duration::from_millis(ms)).await;
                            }
                            if server_write.write_all(&buf[..n]).await.is_err() {
                                return;
                            }
                        }
                    };
                    let downward = tokio::io::copy(&mut server_read, &mut client_write);
                    tokio::select! {
                        _ = upward => {}
                        _ = downward => {}
                    }
                });
                pumps.lock().unwrap().push(pump);
            }
        });
        relay
    }

    /// The CouchDB URL through this relay.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Drops every connection and refuses new ones.
    pub fn cut(&self) {
        self.up.store(false, std::sync::atomic::Ordering::Relaxed);
        for pump in self.pumps.lock().unwrap().drain(..) {
            pump.abort();
        }
    }

    pub fn restore(&self) {
        self.up.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Holds each request chunk for `ms` before passing it on.
    pub fn delay(&self, ms: u64) {
        self.delay_ms.store(ms, std::sync::atomic::Ordering::Relaxed);
    }
}
