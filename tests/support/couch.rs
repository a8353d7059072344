//! A real CouchDB server for tests (the local pouchdb-server, or the one named by
//! `COUCHLINK_TEST_COUCHDB_URL`), and a fresh database per test on it.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use couchlink::couch::{CouchClient, CouchConfig};
use rand::Rng;
use serde_json::{json, Value};

/// A CouchDB server the tests may create databases on, with admin credentials.
#[derive(Debug, Clone)]
pub struct Couch {
    pub url: String,
    pub admin_user: String,
    pub admin_password: String,
    /// Whether this is the pouchdb-server stand-in (some CouchDB 3 rules cannot be checked).
    pub is_pouchdb: bool,
}

impl Couch {
    /// The server at `url` (credentials in the URL, or in `user`/`password`); panics when it
    /// does not answer.
    pub fn at(url: &str, user: Option<String>, password: Option<String>) -> Couch {
        let mut parsed = url::Url::parse(url).unwrap_or_else(|e| panic!("{url:?} is not a URL: {e}"));
        let user = user.unwrap_or_else(|| parsed.username().to_owned());
        let password = password.unwrap_or_else(|| parsed.password().unwrap_or_default().to_owned());
        parsed.set_username("").unwrap();
        parsed.set_password(None).unwrap();
        let url = parsed.as_str().trim_end_matches('/').to_owned();
        let welcome = blocking_get(&url).unwrap_or_else(|e| panic!("CouchDB at {url} does not answer: {e}"));
        Couch { url, admin_user: user, admin_password: password, is_pouchdb: welcome.contains("express-pouchdb") }
    }
}

/// The shared server: `COUCHLINK_TEST_COUCHDB_URL` (+ `_USER`/`_PASSWORD`, or credentials in
/// the URL), else the project's local pouchdb-server, started once per test run. Panics (so
/// the test fails) when neither can be had: a test never passes by skipping CouchDB.
pub fn couch() -> &'static Couch {
    static COUCH: OnceLock<Couch> = OnceLock::new();
    COUCH.get_or_init(|| match std::env::var("COUCHLINK_TEST_COUCHDB_URL") {
        Ok(url) => Couch::at(
            &url,
            std::env::var("COUCHLINK_TEST_COUCHDB_USER").ok(),
            std::env::var("COUCHLINK_TEST_COUCHDB_PASSWORD").ok(),
        ),
        Err(_) => start_local_couchdb(),
    })
}

/// The server of the tests that load one with thousands of links (bulk writes, warm-ups of
/// 5,000 to 200,000, proxies restarted on them): pouchdb-server answers one request at a time,
/// so on the shared one their writes and pages held every other test's requests for seconds
/// (seen: a snapshot test's proxy warm and its feed live, yet its `/healthz` 503 for 5 s with
/// CouchDB's ping "timed out", and another's one-link warm-up over 10 s, while the 20,000-link
/// test ran beside it). They get a local pouchdb-server of their own; a CouchDB named by
/// `COUCHLINK_TEST_COUCHDB_URL` serves them all, answering requests side by side.
pub fn heavy_couch() -> &'static Couch {
    static HEAVY: OnceLock<Couch> = OnceLock::new();
    if std::env::var_os("COUCHLINK_TEST_COUCHDB_URL").is_some() {
        return couch();
    }
    HEAVY.get_or_init(start_local_couchdb)
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
            super::dies_with_its_spawner(&mut command);
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

/// A plain blocking GET of a server's welcome, usable before any runtime exists.
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

/// The proxy's read-only account and an editor, shared by every test database: the test
/// databases are set up with the roles below in place of their own (`<db>:reader`), as an
/// operator may name them (COUCHLINK_READER_ROLE, COUCHLINK_EDITOR_ROLE), so that one account
/// of each serves them all. Tests of the per-database default make accounts of their own.
pub const READER: (&str, &str) = ("couchlink-test-reader", "reader-pw");
pub const EDITOR: (&str, &str) = ("couchlink-test-editor", "editor-pw");
pub const READER_ROLE: &str = "couchlink-test:reader";
pub const EDITOR_ROLE: &str = "couchlink-test:editor";
/// The proxies' role of every test database (its clicks database's writers).
pub const PROXY_ROLE: &str = "couchlink-test:proxy";
/// The recorders' role of every test database (its history database's writers).
pub const RECORDER_ROLE: &str = "couchlink-test:recorder";

/// The roles of every test database.
pub fn test_roles() -> couchlink::domain::Roles {
    couchlink::domain::Roles {
        reader: READER_ROLE.into(),
        editor: EDITOR_ROLE.into(),
        proxy: PROXY_ROLE.into(),
        recorder: RECORDER_ROLE.into(),
    }
}

/// `couchlink setup`'s options for a test database.
pub fn test_setup() -> couchlink::cmd::setup::SetupOptions {
    // Without a clicks database: the tests of live counts ask for one (`clicks_setup`).
    couchlink::cmd::setup::SetupOptions {
        roles: test_roles(),
        drop_shared_roles: false,
        replace_security: false,
        clicks_db: None,
        history_db: None,
    }
}

/// A fresh database on a test server.
pub struct TestDb {
    pub name: String,
    pub couch: Couch,
}

impl TestDb {
    /// A database on the shared server, prepared by `couchlink setup` (validation, `_security`,
    /// reader account), plus an editor account.
    pub async fn new() -> TestDb {
        TestDb::new_on(couch()).await
    }

    /// A database on [`heavy_couch`] (for a test that loads it with thousands of links), holding what `load` stores in it before setup installs couchlink's
    /// validation: pouchdb-server runs the validation functions in JavaScript for every document
    /// written, which made storing links 3.5 times as slow (50,000 links: 14.7 s against 4.1 s;
    /// the 200,000 of the warm-up test 64 s, the longest wait of the suite). CouchDB does not
    /// check a document already stored when validation arrives: what `load` stores must be
    /// links validation would take, as any link written by an editor is.
    pub async fn heavy_holding<F: std::future::Future<Output = ()>>(load: impl FnOnce(TestDb) -> F) -> TestDb {
        let db = TestDb { name: format!("test_{}", random_lowercase(12)), couch: heavy_couch().clone() };
        let created = db.admin(reqwest::Method::PUT, "", None).await;
        assert!(created.status().is_success(), "cannot create test database: {}", created.text().await.unwrap());
        load(TestDb { name: db.name.clone(), couch: db.couch.clone() }).await;
        TestDb::named_on(&db.couch, &db.name).await
    }

    /// [`TestDb::new`] on a server of the test's own.
    pub async fn new_on(couch: &Couch) -> TestDb {
        TestDb::named_on(couch, &format!("test_{}", random_lowercase(12))).await
    }

    /// [`TestDb::new_on`], named `name` (a server of the test's own can use the real name).
    pub async fn named_on(couch: &Couch, name: &str) -> TestDb {
        let db = TestDb { name: name.to_owned(), couch: couch.clone() };
        // The shared reader holds the proxy role from the start (the tests of live counts set up
        // databases that give it): setup then never rewrites the account while other tests'
        // proxies use it (CouchDB 3 can answer such a request 401 while the account changes).
        ensure_user_roles(couch, READER, &[READER_ROLE, PROXY_ROLE, RECORDER_ROLE]).await;
        let reader = couchlink::cmd::setup::Reader { name: READER.0.into(), password: READER.1.into() };
        couchlink::cmd::setup::run(&db.client_as(None), Some(&reader), &test_setup())
            .await
            .expect("couchlink setup works");
        ensure_user(couch, EDITOR, EDITOR_ROLE).await;
        db
    }

    /// A database without couchlink's validation, holding whatever a test puts in it: the
    /// proxy must not trust documents from before validation existed, or replicated in.
    pub async fn bare() -> TestDb {
        let db = TestDb { name: format!("test_{}", random_lowercase(12)), couch: couch().clone() };
        let created = db.admin(reqwest::Method::PUT, "", None).await;
        assert!(created.status().is_success(), "cannot create test database: {}", created.text().await.unwrap());
        let security = couchlink::cmd::setup::security_object(&test_roles());
        let r = db.admin(reqwest::Method::PUT, "_security", Some(&security)).await;
        assert!(r.status().is_success(), "cannot set _security: {}", r.text().await.unwrap());
        ensure_user_roles(couch(), READER, &[READER_ROLE, PROXY_ROLE, RECORDER_ROLE]).await;
        db
    }

    /// A request to this database as the server admin.
    pub async fn admin(&self, method: reqwest::Method, path: &str, body: Option<&Value>) -> reqwest::Response {
        self.request_as(Some((&self.couch.admin_user, &self.couch.admin_password)), method, path, body).await
    }

    /// A request to this database as `who` (anonymous when `None`).
    pub async fn request_as(
        &self,
        who: Option<(&str, &str)>,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> reqwest::Response {
        let url = if path.is_empty() {
            format!("{}/{}", self.couch.url, self.name)
        } else {
            format!("{}/{}/{path}", self.couch.url, self.name)
        };
        let mut req = http().request(method, url).header("Accept", "application/json");
        if let Some((user, password)) = who {
            req = req.basic_auth(user, Some(password));
        }
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

    /// The current revision of `id`, if it exists.
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
        CouchConfig {
            url: self.couch.url.clone(),
            user: Some(self.couch.admin_user.clone()),
            password: Some(self.couch.admin_password.clone()),
            password_file: None,
            db: self.name.clone(),
        }
    }

    /// A couchlink CouchDB client as `who` (the admin when `None`).
    pub fn client_as(&self, who: Option<(&str, &str)>) -> CouchClient {
        let client = CouchClient::new(&self.couch_config()).unwrap();
        match who {
            Some((user, password)) => client.with_credentials(user, password),
            None => client,
        }
    }
}

/// Creates (once per server) a user with exactly one role.
pub async fn ensure_user(couch: &Couch, who: (&str, &str), role: &str) {
    ensure_user_roles(couch, who, &[role]).await;
}

/// Creates (once per server) a user with exactly these roles.
pub async fn ensure_user_roles(couch: &Couch, who: (&str, &str), roles: &[&str]) {
    let url = format!("{}/_users/org.couchdb.user:{}", couch.url, who.0);
    let auth = |r: reqwest::RequestBuilder| {
        r.basic_auth(&couch.admin_user, Some(&couch.admin_password)).header("Accept", "application/json")
    };
    for _ in 0..3 {
        let existing: Value = auth(http().get(&url)).send().await.unwrap().json().await.unwrap();
        if existing["roles"] == json!(roles) {
            return;
        }
        let mut doc = json!({"name": who.0, "password": who.1, "roles": roles, "type": "user"});
        if let Some(rev) = existing.get("_rev") {
            doc["_rev"] = rev.clone();
        }
        if auth(http().put(&url)).json(&doc).send().await.unwrap().status().is_success() {
            return;
        }
    }
    panic!("cannot create user {}", who.0);
}

/// Gives the account `name` a new password (as the server admin).
pub async fn set_password(couch: &Couch, name: &str, password: &str) {
    let url = format!("{}/_users/org.couchdb.user:{name}", couch.url);
    let auth = |r: reqwest::RequestBuilder| {
        r.basic_auth(&couch.admin_user, Some(&couch.admin_password)).header("Accept", "application/json")
    };
    let mut doc: Value = auth(http().get(&url)).send().await.unwrap().json().await.unwrap();
    doc["password"] = json!(password);
    let put = auth(http().put(&url)).json(&doc).send().await.unwrap();
    assert!(put.status().is_success(), "cannot change {name}'s password: {}", put.text().await.unwrap());
}

pub fn random_lowercase(n: usize) -> String {
    let mut rng = rand::rng();
    (0..n).map(|_| (b'a' + rng.random_range(0..26u8)) as char).collect()
}
