//! The console lends nothing: it holds no account, refuses one, and passes each request with
//! the visitor's own credentials only, so that a visitor with none is anonymous to CouchDB. Its
//! own answers (QR tags, print sheets, its list of databases) are for visitors CouchDB lets read
//! the database. The browser's side is `tests/console`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use couchlink::console::logins::{FAILURES, WINDOW};
use couchlink::console::{Console, ConsoleError, ConsoleSite};
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::support::{ensure_user, http, spawn_app_on, TestDb, EDITOR, EDITOR_ROLE, READER};

/// CouchDB's URL of `db` without the account the tests' URL may carry.
pub(crate) fn bare_url(db: &TestDb) -> url::Url {
    let mut url = url::Url::parse(&db.couch.url).unwrap();
    url.set_username("").unwrap();
    url.set_password(None).unwrap();
    url
}

async fn start_console(db: &TestDb) -> String {
    start_console_with(db, |console| console).await
}

async fn start_console_with(db: &TestDb, configure: impl FnOnce(Console) -> Console) -> String {
    let site = ConsoleSite {
        db: db.name.clone(),
        public_url: couchlink::domain::PublicUrl::parse("http://0x1f.ie").unwrap(),
        clicks_db: None,
        history_db: None,
        editor_role: EDITOR_ROLE.into(),
    };
    serve_console(configure(Console::new(vec![site], bare_url(db), false).unwrap())).await
}

/// `console` served on a loopback port of its own: its base URL.
pub(crate) async fn serve_console(console: Console) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    tokio::spawn(couchlink::http::accept::run(
        listener,
        Arc::new(console),
        couchlink::http::accept::Limits::new(16, Duration::from_secs(10)),
        std::future::pending::<()>(),
        Duration::from_secs(1),
    ));
    format!("http://{addr}")
}

#[test]
fn a_console_with_an_account_in_its_couchdb_url_is_refused_and_the_password_never_shown() {
    let with = url::Url::parse("http://admin:s3cr%3Ft@127.0.0.1:5984/").unwrap();
    let refused = Console::new(Vec::new(), with, false).err().expect("refused");
    let ConsoleError::AccountInUrl(said) = &refused;
    assert!(said.contains("\"admin\"") && !refused.to_string().contains("s3cr"), "{refused}");

    // The command: the URL, or an account setting from the environment, named; no secret shown.
    let run = |envs: &[(&str, &str)]| {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_couchlink"));
        command.arg("console").env("COUCHLINK_CONSOLE_LISTEN", "127.0.0.1:0");
        for var in couchlink::cmd::console::ACCOUNT_SETTINGS {
            command.env_remove(var);
        }
        command.envs(envs.iter().copied());
        let output = command.output().unwrap();
        let said = String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "the console started: {said}");
        assert!(!said.contains("s3cr"), "a secret shown: {said}");
        said
    };
    let said = run(&[("COUCHLINK_COUCHDB_URL", "http://admin:s3cr3t@127.0.0.1:1/")]);
    assert!(said.contains("COUCHLINK_COUCHDB_URL") && said.contains("holds none"), "{said}");
    for setting in couchlink::cmd::console::ACCOUNT_SETTINGS {
        let said = run(&[("COUCHLINK_COUCHDB_URL", "http://127.0.0.1:1/"), (setting, "s3cr3t")]);
        assert!(said.contains(&format!("{setting} is set")), "{said}");
    }
}

#[tokio::test]
async fn a_visitor_without_credentials_is_anonymous_to_couchdb_and_gets_nothing_of_the_console_s_own() {
    let db = TestDb::new().await;
    db.put_link("H83if", json!({"url": "https://example.com/", "inactive": false})).await;
    let console = start_console(&db).await;
    let own = [("origin", console.as_str())];
    let get = |path: &str| http().get(format!("{console}{path}")).send();

    // CouchDB refuses the anonymous read the console passes on (pouchdb-server answers 401, as
    // CouchDB 3 does for a database with members).
    let read = get(&format!("/couch/{}/_all_docs?include_docs=true", db.name)).await.unwrap();
    assert_eq!(read.status(), StatusCode::UNAUTHORIZED);
    let body: Value = read.json().await.unwrap();
    assert!(body.get("rows").is_none(), "{body}");
    let session: Value = get("/couch/_session").await.unwrap().json().await.unwrap();
    assert_eq!(session["userCtx"]["name"], Value::Null, "{session}");

    // A write from the page's own origin, anonymous: CouchDB's to refuse; from another origin:
    // the console's, before CouchDB.
    let doc = json!({"url": "https://evil.example/", "inactive": false});
    let put = |origin: &str| {
        http().put(format!("{console}/couch/{}/Zz999", db.name)).header("origin", origin).json(&doc).send()
    };
    let anonymous = put(&console).await.unwrap().status();
    assert!(matches!(anonymous.as_u16(), 401 | 403), "{anonymous}");
    assert_eq!(put("http://evil.example").await.unwrap().status(), StatusCode::FORBIDDEN);
    assert_eq!(db.rev("Zz999").await, None, "written");

    // The console's own answers: nothing for a stranger.
    assert_eq!(get("/console.json").await.unwrap().status(), StatusCode::UNAUTHORIZED);
    assert_eq!(get(&format!("/qr/{}/H83if.svg", db.name)).await.unwrap().status(), StatusCode::UNAUTHORIZED);
    let sheet = json!({"tags": [{"id": "H83if"}], "paper": "a4", "size_mm": 30, "fg": "#000000", "bg": "#ffffff"});
    let post_sheet = || {
        let mut request = http().post(format!("{console}/qr/{}/sheet.pdf", db.name)).json(&sheet);
        for (name, value) in own {
            request = request.header(name, value);
        }
        request
    };
    assert_eq!(post_sheet().send().await.unwrap().status(), StatusCode::UNAUTHORIZED);
    // A password is hashed only for someone CouchDB knows, asking from the page itself.
    let hash = |origin: &str, who: Option<(&str, &str)>, password: &str| {
        let mut request =
            http().post(format!("{console}/password")).header("origin", origin).json(&json!({"password": password}));
        if let Some((user, pass)) = who {
            request = request.basic_auth(user, Some(pass));
        }
        request.send()
    };
    assert_eq!(hash(&console, None, "staff only").await.unwrap().status(), StatusCode::UNAUTHORIZED);
    assert_eq!(hash("http://evil.example", Some(EDITOR), "staff only").await.unwrap().status(), StatusCode::FORBIDDEN);
    let long = "x".repeat(couchlink::domain::MAX_PASSWORD_BYTES + 1);
    assert_eq!(hash(&console, Some(EDITOR), &long).await.unwrap().status(), StatusCode::BAD_REQUEST);
    let made: Value = hash(&console, Some(EDITOR), "staff only").await.unwrap().json().await.unwrap();
    let made = couchlink::domain::PasswordHash::parse(made["password"].as_str().unwrap()).unwrap();
    assert!(made.verify(b"staff only"));
    // The page's files stay open to anyone.
    assert_eq!(get("/").await.unwrap().status(), StatusCode::OK);

    // The editor, with their own credentials, gets all of it.
    let as_editor = |path: &str| http().get(format!("{console}{path}")).basic_auth(EDITOR.0, Some(EDITOR.1)).send();
    let sites: Value = as_editor("/console.json").await.unwrap().json().await.unwrap();
    assert_eq!(sites["sites"][0]["db"], json!(db.name), "{sites}");
    let tag = as_editor(&format!("/qr/{}/H83if.svg", db.name)).await.unwrap();
    assert_eq!(tag.status(), StatusCode::OK);
    let made = post_sheet().basic_auth(EDITOR.0, Some(EDITOR.1)).send().await.unwrap();
    assert_eq!(made.status(), StatusCode::OK);
    assert!(made.bytes().await.unwrap().starts_with(b"%PDF"));
    // A wrong password is CouchDB's refusal, passed on.
    let wrong = http().get(format!("{console}/console.json")).basic_auth(EDITOR.0, Some("wrong")).send().await.unwrap();
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn print_sheets_are_made_one_at_a_time_per_account_and_more_are_told_to_come_back() {
    let db = TestDb::new().await;
    let console = start_console(&db).await;
    // 1,000 tags: a sheet that takes a while (seconds in a debug build), asked three times at
    // once by one account.
    let ids: Vec<String> = (0..1000).map(|n| format!("T{n:04}")).collect();
    let sheet = json!({"tags": ids.iter().map(|id| json!({"id": id})).collect::<Vec<_>>(), "paper": "a4",
        "size_mm": 20, "fg": "#000000", "bg": "#ffffff"});
    let ask = || {
        http()
            .post(format!("{console}/qr/{}/sheet.pdf", db.name))
            .header("origin", console.as_str())
            .basic_auth(EDITOR.0, Some(EDITOR.1))
            .json(&sheet)
            .send()
    };
    let (a, b, c) = tokio::join!(ask(), ask(), ask());
    let answers = [a, b, c];
    let mut statuses: Vec<u16> = Vec::new();
    for answer in answers {
        let answer = answer.unwrap();
        statuses.push(answer.status().as_u16());
        if answer.status() == StatusCode::TOO_MANY_REQUESTS {
            assert_eq!(answer.headers()["retry-after"], "2");
            let body: Value = answer.json().await.unwrap();
            assert!(body["reason"].as_str().unwrap().contains("one per account"), "{body}");
        }
    }
    statuses.sort_unstable();
    assert_eq!(statuses, [200, 429, 429]);
    // Once it is made, the account's next one is.
    assert_eq!(ask().await.unwrap().status(), StatusCode::OK);
}

/// The page's own tests (its model, router, client and a view: `console/test/`), run by Node as the
/// README's test command runs everything; `console/install.sh && node --test console/` runs them
/// alone.
#[test]
fn the_pages_own_tests_pass_in_node() {
    let root = env!("CARGO_MANIFEST_DIR");
    // The views' tests render into linkedom, as console/package-lock.json pins it.
    let installed = std::process::Command::new(std::path::Path::new(root).join("console/install.sh")).status();
    assert!(installed.as_ref().is_ok_and(|s| s.success()), "console/install.sh: {installed:?}");
    let out = match std::process::Command::new("node").args(["--test", "console/"]).current_dir(root).output() {
        Ok(out) => out,
        Err(e) => panic!("node is missing ({e}): the console's tests need Node.js, as the quick start does"),
    };
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "node --test console/ failed:\n{said}\n{}", String::from_utf8_lossy(&out.stderr));
    let count = |what: &str| {
        said.lines().find_map(|l| l.strip_prefix(&format!("# {what} "))).and_then(|n| n.trim().parse::<u32>().ok())
    };
    assert_eq!(count("fail"), Some(0), "{said}");
    assert!(count("pass").is_some_and(|n| n >= 15), "{said}");
}

/// The console writes links and nothing else: never a database's local documents (its identity,
/// `_local/couchlink`, which no validation function guards and a proxy's snapshot is checked
/// against), never a revision a client names itself (`new_edits: false`).
#[tokio::test]
async fn a_bulk_change_through_the_console_writes_links_and_nothing_else() {
    let db = TestDb::new().await;
    let console = start_console(&db).await;
    let identity: Value = db.admin(reqwest::Method::GET, "_local/couchlink", None).await.json().await.unwrap();
    assert!(identity["identity"].is_string(), "{identity}");
    let bulk = |body: Value| {
        http()
            .post(format!("{console}/couch/{}/_bulk_docs", db.name))
            .header("origin", console.as_str())
            .basic_auth(EDITOR.0, Some(EDITOR.1))
            .json(&body)
            .send()
    };
    for body in [
        json!({"docs": [{"_id": "_local/couchlink", "identity": "not-yours"}]}),
        json!({"docs": [{"_id": "Bulk1", "url": "https://a.example/"}, {"_id": "_local/x", "n": 1}]}),
        json!({"new_edits": false, "docs": [{"_id": "Bulk1", "_rev": "1-ABCDEF", "url": "https://a.example/"}]}),
    ] {
        let answer = bulk(body.clone()).await.unwrap();
        assert_eq!(answer.status(), StatusCode::BAD_REQUEST, "{body}");
        let said: Value = answer.json().await.unwrap();
        assert!(said["reason"].as_str().unwrap().starts_with("a bulk change through the console"), "{said}");
    }
    let put = http()
        .put(format!("{console}/couch/{}/_local/couchlink", db.name))
        .header("origin", console.as_str())
        .basic_auth(EDITOR.0, Some(EDITOR.1))
        .json(&json!({"identity": "not-yours"}))
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), StatusCode::NOT_FOUND);
    let after: Value = db.admin(reqwest::Method::GET, "_local/couchlink", None).await.json().await.unwrap();
    assert_eq!(after["identity"], identity["identity"], "the identity is as setup made it");
    assert_eq!(db.rev("Bulk1").await, None);
    let answer = bulk(json!({"docs": [{"_id": "Bulk1", "url": "https://a.example/"}]})).await.unwrap();
    assert_eq!(answer.status(), StatusCode::CREATED, "links are written");
    assert!(db.rev("Bulk1").await.is_some());
}

/// CouchDB 3 locks an account for the address its failed logins come from (at 5, for 5
/// minutes): through the console that is the console's address, the proxies' too on one host.
/// The console never passes a login as the proxies' account on, and passes on at most
/// `FAILURES` (2) failing logins per account and per visitor address, however many arrive at
/// once; a credential it cannot read as CouchDB would is refused, never passed on. (pouchdb-server
/// locks nobody out: there, what this shows is what the console passed on.)
#[tokio::test]
async fn no_stranger_can_make_couchdb_lock_an_account_through_the_console() {
    let app = spawn_app_on(TestDb::new().await, |_| {}).await;
    app.wait_until_feed_is_live().await;
    let db = &app.db;
    let console = start_console_with(db, |c| {
        let mut c = c.refusing_logins_as(vec![READER.0.to_owned()]);
        c.trusted_proxies = "127.0.0.1/32".parse().unwrap();
        c
    })
    .await;
    let sites = |who: (&str, &str), from: &str| {
        http()
            .get(format!("{console}/console.json"))
            .basic_auth(who.0, Some(who.1))
            .header("x-forwarded-for", from)
            .send()
    };

    // The sequence, twice over: the proxies' account is never passed on.
    for k in 0..6 {
        let refused = sites((READER.0, "x"), &format!("192.0.2.{k}")).await.unwrap();
        assert_eq!(refused.status(), StatusCode::FORBIDDEN);
        let said: Value = refused.json().await.unwrap();
        assert!(said["reason"].as_str().unwrap().contains("proxies' account"), "{said}");
    }
    let login = |who: (&str, &str), from: &str| {
        http()
            .post(format!("{console}/couch/_session"))
            .header("origin", console.as_str())
            .header("x-forwarded-for", from)
            .json(&json!({"name": who.0, "password": who.1}))
            .send()
    };
    assert_eq!(login((READER.0, "x"), "192.0.2.9").await.unwrap().status(), StatusCode::FORBIDDEN);
    // The stranger's pass: the proxies' name and a guess in base64 with a space inside, which
    // CouchDB reads past and the console did not: six of them locked the account.
    for _ in 0..6 {
        let odd = http()
            .get(format!("{console}/couch/_session"))
            .header("authorization", "Basic Y291 Y2hsaW5rLXRlc3QtcmVhZGVyOmd1ZXNz")
            .send()
            .await
            .unwrap();
        assert_eq!(odd.status(), StatusCode::BAD_REQUEST);
    }
    // The proxy still reads CouchDB as its account: an unknown ID is a 404, not a 503.
    assert_eq!(app.get("/Zz404").await.status(), StatusCode::NOT_FOUND);
    let health: Value = app.admin_get("/healthz").await.json().await.unwrap();
    assert_eq!(health["status"], "ok", "{health}");
    let direct = |who: (&str, &str)| {
        http()
            .get(format!("{}/_session", bare_url(db).as_str().trim_end_matches('/')))
            .basic_auth(who.0, Some(who.1))
            .send()
    };
    assert_eq!(direct(READER).await.unwrap().status(), StatusCode::OK);

    // Another account: 12 wrong passwords at once from 12 addresses, then 4 logins from a 13th.
    let maria = (&*format!("console-maria-{}", rand::random::<u32>()), "right-pw");
    ensure_user(&db.couch, (maria.0, maria.1), EDITOR_ROLE).await;
    // (Each another guess: requests with one credential at once wait for one try.)
    let guesses: Vec<String> = (0..16).map(|k| format!("guess{k}")).collect();
    let at_once: Vec<_> =
        (0..12).map(|k| tokio::spawn(sites((maria.0, &guesses[k]), &format!("198.51.100.{k}")))).collect();
    let mut answered = Vec::new();
    for request in at_once {
        answered.push(request.await.unwrap().unwrap().status().as_u16());
    }
    for guess in &guesses[12..] {
        answered.push(login((maria.0, guess), "198.51.100.200").await.unwrap().status().as_u16());
    }
    let passed = answered.iter().filter(|s| **s == 401).count();
    assert_eq!(passed, FAILURES, "failing logins passed on to CouchDB: {answered:?}");
    assert!(answered.iter().all(|s| matches!(s, 401 | 429)), "{answered:?}");
    // CouchDB still lets maria in from the console's host...
    assert_eq!(direct(maria).await.unwrap().status(), StatusCode::OK);
    // ...and the console makes her wait, saying how long, even with her right password (she
    // has not logged in through it yet).
    let waits = sites(maria, "198.51.100.201").await.unwrap();
    assert_eq!(waits.status(), StatusCode::TOO_MANY_REQUESTS);
    let retry: u64 = waits.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((WINDOW.as_secs() - 100..=WINDOW.as_secs()).contains(&retry), "{retry}");

    // One who logged in through the console before keeps doing so while strangers fail: her
    // session cookie is the browser's own (SameSite=Lax), and her password is known.
    let jo = (&*format!("console-jo-{}", rand::random::<u32>()), "jo-pw");
    ensure_user(&db.couch, (jo.0, jo.1), EDITOR_ROLE).await;
    let session = login(jo, "203.0.113.1").await.unwrap();
    assert_eq!(session.status(), StatusCode::OK);
    let cookie = session.headers()["set-cookie"].to_str().unwrap();
    assert!(cookie.contains("AuthSession=") && cookie.contains("SameSite=Lax"), "{cookie}");
    for k in 0..FAILURES {
        assert_eq!(login((jo.0, "guess"), &format!("203.0.113.{}", 10 + k)).await.unwrap().status(), 401);
    }
    assert_eq!(login((jo.0, "guess"), "203.0.113.20").await.unwrap().status(), 429);
    assert_eq!(login(jo, "203.0.113.21").await.unwrap().status(), StatusCode::OK);
    assert_eq!(direct(jo).await.unwrap().status(), StatusCode::OK);

    // A login the console cannot read as CouchDB would is refused, not passed on.
    let gzipped = http()
        .post(format!("{console}/couch/_session"))
        .header("origin", console.as_str())
        .header("content-type", "application/json")
        .header("content-encoding", "gzip")
        .body(vec![0x1f, 0x8b])
        .send()
        .await
        .unwrap();
    assert_eq!(gzipped.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);

    // Link passwords are hashed for an account 10 in a row, then one each 6 s.
    let hash = || {
        http()
            .post(format!("{console}/password"))
            .header("origin", console.as_str())
            .basic_auth(jo.0, Some(jo.1))
            .json(&json!({"password": "staff only"}))
            .send()
    };
    let mut statuses = Vec::new();
    for _ in 0..12 {
        let answer = hash().await.unwrap();
        if answer.status() == StatusCode::TOO_MANY_REQUESTS && answer.headers().contains_key("retry-after") {
            statuses.push(429);
        } else {
            statuses.push(answer.status().as_u16());
        }
    }
    assert_eq!(statuses.iter().filter(|s| **s == 200).count(), 10, "{statuses:?}");
    assert_eq!(statuses[10..], [429, 429], "{statuses:?}");
}
