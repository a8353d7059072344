//! Start-up: misconfiguration is a clear error, an unreachable CouchDB is not.

use std::process::Stdio;
use std::time::Duration;

use couchlink::errors::Causes;
use couchlink::startup::ServerConfig;
use serde_json::json;

use crate::support::process::{reader_env, wait_within, ServeProcess};
use crate::support::*;

/// A configuration serving `db_name` on `db`'s server as its admin with `password`, logging to
/// `log_dir`.
fn admin_config(db: &TestDb, password: &str, db_name: &str, log_dir: &std::path::Path) -> ServerConfig {
    let mut config = test_config(db, log_dir);
    config.couch.user = Some(db.couch.admin_user.clone());
    config.couch.password = Some(password.to_owned());
    config.couch.db = db_name.to_owned();
    config
}

#[tokio::test]
async fn wrong_credentials_are_refused_with_a_clear_message() {
    let db = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let config = admin_config(&db, "wrong", &db.name, dir.path());
    let message = Causes(&start_and_stop(config).await.unwrap_err()).to_string();
    assert!(
        message.contains(&format!("refused user {:?}", db.couch.admin_user)) && message.contains("incorrect"),
        "{message}"
    );
}

#[tokio::test]
async fn a_missing_database_says_to_run_setup() {
    let db = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let config = admin_config(&db, &db.couch.admin_password, "no_such_db_here", dir.path());
    let message = start_and_stop(config).await.unwrap_err().to_string();
    assert!(message.contains("does not exist") && message.contains("couchlink setup"), "{message}");
}

#[tokio::test]
async fn an_unwritable_log_directory_is_refused() {
    let db = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("not-a-dir");
    std::fs::write(&file, b"").unwrap();
    let config = admin_config(&db, &db.couch.admin_password, &db.name, &file.join("logs"));
    let message = start_and_stop(config).await.unwrap_err().to_string();
    assert!(message.contains("cannot write the access log"), "{message}");
}

#[tokio::test]
async fn an_unreachable_couchdb_is_not_fatal_and_unknown_links_get_503() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut app = spawn_app_with(AppOptions::with(move |c| {
        c.couch.url = format!("http://127.0.0.1:{port}");
    }))
    .await;
    let response = app.get("/H83if").await;
    assert_eq!(response.status(), 503);
    assert!(response.headers().contains_key("retry-after"));
    assert!(response.headers().contains_key("set-cookie"));
    app.stop().await.unwrap();
    assert_eq!(app.log_lines().len(), 1);
}

/// Runs the `couchlink` binary with `args` and the environment variables `env`; its exit
/// status and stderr. Panics if it is still running after 20 s (a start that should have
/// failed and serves instead).
fn run_binary(args: &[&str], env: &[(&str, &str)]) -> (std::process::ExitStatus, String) {
    let (status, _stdout, stderr) = run_binary_output(args, env);
    (status, stderr)
}

/// The environment of `couchlink create` as the test editor on `db`.
fn editor_env(db: &TestDb) -> [(&'static str, &str); 4] {
    [
        ("COUCHLINK_COUCHDB_URL", db.couch.url.as_str()),
        ("COUCHLINK_COUCHDB_USER", EDITOR.0),
        ("COUCHLINK_COUCHDB_PASSWORD", EDITOR.1),
        ("COUCHLINK_DB", db.name.as_str()),
    ]
}

/// [`run_binary`], with standard output too.
fn run_binary_output(args: &[&str], env: &[(&str, &str)]) -> (std::process::ExitStatus, String, String) {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_couchlink"));
    command.args(args).envs(env.iter().copied()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = command.spawn().expect("the binary runs");
    let (stdout, stderr) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let stdout = std::thread::spawn(move || std::io::read_to_string(stdout).unwrap());
    let stderr = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap());
    let Ok(status) = wait_within(&mut child, Duration::from_secs(20)) else {
        panic!("couchlink {args:?} still runs after 20 s: {}", stderr.join().unwrap());
    };
    (status, stdout.join().unwrap(), stderr.join().unwrap())
}

/// [`run_binary`] for `couchlink serve` with `env`, off the async runtime.
async fn run_serve(env: Vec<(&'static str, String)>) -> (std::process::ExitStatus, String) {
    tokio::task::spawn_blocking(move || {
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        run_binary(&["serve"], &env)
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn a_second_couchlink_on_a_port_in_use_is_refused_and_every_request_stays_with_the_first() {
    let db = TestDb::new().await;
    db.put_link("Port1", json!({"url": "https://first.example/"})).await;
    let env = reader_env(&db);
    let first_env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut first = ServeProcess::start("first", &[&first_env[..], &[("COUCHLINK_WORKERS", "2")]].concat());
    let taken = first.addr.to_string();

    let second_logs = tempfile::tempdir().unwrap();
    let mut second = env.clone();
    second.push(("COUCHLINK_LISTEN", taken.clone()));
    second.push(("COUCHLINK_ADMIN_LISTEN", "127.0.0.1:0".into()));
    second.push(("COUCHLINK_LOG_DIR", second_logs.path().display().to_string()));
    let (status, stderr) = run_serve(second).await;
    assert!(!status.success(), "a second couchlink joined {taken}: {stderr}");
    assert!(stderr.contains(&taken) && stderr.contains("in use by another program"), "{stderr}");
    assert!(!stderr.contains("serving redirects"), "it said it serves: {stderr}");

    for _ in 0..20 {
        let r = first.get("/Port1").await.expect("the first couchlink answers");
        assert_eq!(r.status(), 302);
    }
    assert!(first.terminate().success());
    assert_eq!(first.log_line_count(), 20, "every request reached the first couchlink and its log");
    assert_eq!(std::fs::read_dir(second_logs.path()).unwrap().count(), 0, "the second logged nothing");
}

#[tokio::test]
async fn a_start_that_fails_never_says_it_serves() {
    let db = TestDb::new().await;
    let mut env = reader_env(&db);
    env.retain(|(k, _)| *k != "COUCHLINK_DB");
    env.push(("COUCHLINK_DB", "no_such_db_here".into()));
    let logs = tempfile::tempdir().unwrap();
    env.push(("COUCHLINK_LOG_DIR", logs.path().display().to_string()));
    env.push(("COUCHLINK_LISTEN", "127.0.0.1:0".into()));
    env.push(("COUCHLINK_ADMIN_LISTEN", "127.0.0.1:0".into()));
    let (status, stderr) = run_serve(env).await;
    assert!(!status.success());
    assert!(stderr.contains("does not exist"), "{stderr}");
    assert!(!stderr.contains("serving"), "said it serves before failing: {stderr}");
}

#[test]
fn a_public_url_that_would_break_headers_is_refused_at_start() {
    for (value, reason) in [
        ("https://0x1f.ie\n", "whitespace or control characters"),
        ("ftp://0x1f.ie", "http:// or https://"),
        ("https://0x1f.ie/?campaign=x", "query"),
    ] {
        let (status, stderr) = run_binary(&["serve"], &[("COUCHLINK_PUBLIC_URL", value)]);
        assert!(!status.success(), "{value:?} accepted");
        assert!(stderr.contains("--public-url") && stderr.contains(reason), "{value:?}: {stderr}");
    }
}

#[test]
fn zero_workers_is_refused_not_silently_one() {
    let (status, stderr) = run_binary(&["serve"], &[("COUCHLINK_WORKERS", "0")]);
    assert!(!status.success());
    assert!(stderr.contains("--workers"), "{stderr}");
}

#[tokio::test]
async fn connections_are_spread_over_every_serving_thread() {
    let app = spawn_app_with(AppOptions::with(move |c| {
        c.workers = 2;
    }))
    .await;
    app.db.put_link("Sprd1", json!({"url": "https://spread.example/"})).await;
    // A new connection for each request: the kernel picks a thread's socket per connection.
    for _ in 0..40 {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .pool_max_idle_per_host(0)
            .build()
            .unwrap();
        let r = client.get(format!("{}/Sprd1", app.base)).send().await.unwrap();
        assert_eq!(r.status(), 302);
    }
    let (first, second) = (
        app.metric("couchlink_connections_accepted_total{worker=\"0\"}").await,
        app.metric("couchlink_connections_accepted_total{worker=\"1\"}").await,
    );
    assert_eq!(first + second, 40.0);
    // Each thread's share of 40 connections hashed at random falls below 5 about once in ten
    // million runs; one thread taking all (one shared socket, or a stranger in the group) never.
    assert!(first >= 5.0 && second >= 5.0, "uneven: {first} and {second} of 40");
}

#[tokio::test]
async fn setup_and_create_with_a_wrong_password_name_the_server_and_the_account() {
    let db = TestDb::new().await;
    // The URL without credentials in it (CouchDB 3 runs take them from the URL).
    let url = reqwest::Url::parse(&db.couch.url).unwrap();
    let server = format!("{}://{}:{}", url.scheme(), url.host_str().unwrap(), url.port().unwrap());
    for (command, user) in
        [(&["setup"][..], "admin-or-not"), (&["create", "https://example.com/"][..], "editor-or-not")]
    {
        let env = [
            ("COUCHLINK_COUCHDB_URL", server.as_str()),
            ("COUCHLINK_COUCHDB_USER", user),
            ("COUCHLINK_COUCHDB_PASSWORD", "wrong"),
            ("COUCHLINK_DB", db.name.as_str()),
        ];
        let (status, stderr) = run_binary(command, &env);
        assert!(!status.success());
        assert!(stderr.contains(&format!("CouchDB at {server} refused user \"{user}\"")), "{command:?}: {stderr}");
    }
}

#[tokio::test]
async fn create_without_a_public_url_prints_one_a_person_can_open_and_says_how_to_set_it() {
    let db = TestDb::new().await;
    let env = [&editor_env(&db)[..], &[("COUCHLINK_LISTEN", "0.0.0.0:8080")]].concat();
    let (status, stdout, stderr) = run_binary_output(&["create", "https://example.com/wp/?p=14"], &env);
    assert!(status.success(), "{stderr}");
    let url = stdout.trim();
    assert!(url.starts_with("http://127.0.0.1:8080/") && url.len() == "http://127.0.0.1:8080/".len() + 5, "{url}");
    assert!(stderr.contains("COUCHLINK_PUBLIC_URL is not set"), "{stderr}");
    // stderr is a pipe here: plain text, no terminal colour codes.
    assert!(!stderr.contains('\x1b'), "colour codes in a pipe: {stderr:?}");
}

#[tokio::test]
async fn a_password_in_the_couchdb_url_is_used_but_never_shown() {
    let db = TestDb::new().await;
    let url = reqwest::Url::parse(&db.couch.url).unwrap();
    let hostport = format!("{}:{}", url.host_str().unwrap(), url.port().unwrap());
    let with = |user: &str, password: &str| format!("http://{user}:{password}@{hostport}");
    // Wrong credentials in the URL: refused, the account named, the password nowhere. (An
    // account of its own: CouchDB 3.5 locks an account out after a few failed logins, and the
    // admin's is everyone's here.)
    let secret = "Sup3rSecretInUrl";
    let nobody = "couchlink-test-nobody";
    let bad = with(nobody, secret);
    let dir = tempfile::tempdir().unwrap();
    for command in [&["setup"][..], &["create", "https://example.com/"], &["serve"]] {
        let env = [
            ("COUCHLINK_COUCHDB_URL", bad.as_str()),
            ("COUCHLINK_DB", db.name.as_str()),
            ("COUCHLINK_LISTEN", "127.0.0.1:0"),
            ("COUCHLINK_ADMIN_LISTEN", "127.0.0.1:0"),
            ("COUCHLINK_LOG_DIR", dir.path().to_str().unwrap()),
        ];
        let (status, stderr) = run_binary(command, &env);
        assert!(!status.success(), "{command:?}");
        assert!(stderr.contains(&format!("refused user {nobody:?}")), "{command:?}: {stderr}");
        assert!(!stderr.contains(secret), "{command:?} printed the password: {stderr}");
    }
    // Right credentials in the URL are the account's.
    let good = with(READER.0, READER.1);
    let app = spawn_app_on(TestDb { name: db.name.clone(), couch: db.couch.clone() }, |c| {
        c.couch.url = good;
        c.couch.user = None;
        c.couch.password = None;
    })
    .await;
    app.wait_until_feed_is_live().await;
    let health = app.admin_get("/healthz").await.text().await.unwrap();
    assert!(!health.contains(READER.1), "{health}");
    // Unreachable, with a password in the URL: /healthz and its errors show none of it.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let unreachable = format!("http://someone:{secret}@127.0.0.1:{port}");
    let app = spawn_app_with(AppOptions::with(move |c| {
        c.couch.url = unreachable.to_owned();
    }))
    .await;
    let health = eventually("/healthz names the feed's last error", Duration::from_secs(5), || async {
        let health = app.admin_get("/healthz").await.text().await.unwrap();
        if health.contains("last_error") && !health.contains("\"last_error\":null") {
            Ok(health)
        } else {
            Err(health)
        }
    })
    .await;
    assert!(health.contains(&format!("127.0.0.1:{port}")), "{health}");
    assert!(!health.contains(secret), "/healthz shows the password: {health}");
}

#[tokio::test]
async fn every_secret_can_be_read_from_a_file() {
    let db = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, secret: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, format!("{secret}\n")).unwrap();
        path.display().to_string()
    };
    let admin_file = file("admin", &db.couch.admin_password);
    let reader_file = file("reader", READER.1);
    let editor_file = file("editor", EDITOR.1);
    let base = [("COUCHLINK_COUCHDB_URL", db.couch.url.as_str()), ("COUCHLINK_DB", db.name.as_str())];
    let setup = [
        ("COUCHLINK_COUCHDB_USER", db.couch.admin_user.as_str()),
        ("COUCHLINK_COUCHDB_PASSWORD_FILE", admin_file.as_str()),
        ("COUCHLINK_READER_USER", READER.0),
        ("COUCHLINK_READER_PASSWORD_FILE", reader_file.as_str()),
        ("COUCHLINK_READER_ROLE", READER_ROLE),
        ("COUCHLINK_EDITOR_ROLE", EDITOR_ROLE),
    ];
    let (status, stderr) = run_binary(&["setup"], &[&base[..], &setup].concat());
    assert!(status.success(), "{stderr}");
    let create = [("COUCHLINK_COUCHDB_USER", EDITOR.0), ("COUCHLINK_COUCHDB_PASSWORD_FILE", editor_file.as_str())];
    let (status, stderr) = run_binary(&["create", "https://example.com/"], &[&base[..], &create].concat());
    assert!(status.success(), "{stderr}");
    // A file that cannot be read: one line naming it, before anything is asked of CouchDB.
    let missing = dir.path().join("nope").display().to_string();
    let create = [("COUCHLINK_COUCHDB_USER", EDITOR.0), ("COUCHLINK_COUCHDB_PASSWORD_FILE", missing.as_str())];
    let (status, stderr) = run_binary(&["create", "https://example.com/"], &[&base[..], &create].concat());
    assert!(!status.success());
    assert!(stderr.contains("cannot read the secret file") && stderr.contains(&missing), "{stderr}");
    // The help says the flag form is visible to others.
    let (_, help, _) = run_binary_output(&["serve", "--help"], &[]);
    assert!(help.contains("process list") && help.contains("--couchdb-password-file"), "{help}");
}

/// The one test of `couchlink serve`'s flags: each becomes its field of the configuration the
/// other tests build directly.
#[test]
fn serve_flags_become_the_configuration() {
    use clap::Parser;
    let argv = [
        "couchlink",
        "serve",
        "--listen",
        "127.0.0.1:8081",
        "--admin-listen",
        "127.0.0.1:9091",
        "--couchdb-url",
        "http://reader:pw@db.example:5984",
        "--db",
        "acme",
        "--public-url",
        "https://0x1f.ie",
        "--log-dir",
        "/var/log/couchlink",
        "--log-keep-days",
        "30",
        "--log-compress",
        "false",
        "--trusted-proxies",
        "10.0.0.0/8",
        "--forwarded-header",
        "forwarded",
        "--honor-privacy-signals",
        "true",
        "--anonymize-ip",
        "true",
        "--cookie-name",
        "vid",
        "--drain-secs",
        "3",
        "--cache-capacity",
        "5000",
        "--workers",
        "3",
        "--warm-start",
        "false",
        "--cold-reads",
        "7",
        "--max-connections",
        "99",
        "--header-timeout-secs",
        "4",
        "--state-dir",
        "/var/lib/couchlink",
        "--snapshot-secs",
        "60",
        "--fallback-url",
        "https://0x1f.ie/gone",
        "--clicks-interval-secs",
        "15",
        "--clicks-queue-bytes",
        "4096",
        "--proxy-name",
        "web-7",
    ];
    let couchlink::cmd::Command::Serve(args) = couchlink::cmd::Cli::try_parse_from(argv).unwrap().command else {
        panic!("parsed as another command")
    };
    let c = args.into_config().unwrap();
    assert_eq!((c.listen.port(), c.admin_listen.port()), (8081, 9091));
    assert_eq!((c.couch.url.as_str(), c.couch.db.as_str()), ("http://reader:pw@db.example:5984", "acme"));
    assert_eq!(c.editor_role, "acme:editor", "the database's own editor role by default");
    assert_eq!(c.public_url.unwrap().to_string(), "https://0x1f.ie");
    assert_eq!((c.log_dir.to_str().unwrap(), c.log_keep_days, c.log_compress), ("/var/log/couchlink", 30, false));
    let forwarded: couchlink::client_ip::TrustedProxies = "10.0.0.0/8".parse().unwrap();
    assert_eq!(c.trusted_proxies, forwarded.reading(couchlink::client_ip::ForwardedHeader::Forwarded));
    assert_eq!((c.honor_privacy_signals, c.anonymize_ip, c.cookie_name.as_str()), (true, true, "vid"));
    assert_eq!((c.drain, c.header_timeout), (Duration::from_secs(3), Duration::from_secs(4)));
    assert_eq!((c.cache_capacity, c.workers, c.warm_start, c.cold_reads, c.max_connections), (5000, 3, false, 7, 99));
    assert_eq!(c.state_dir.as_deref(), Some(std::path::Path::new("/var/lib/couchlink")));
    assert_eq!(c.snapshot_interval, Duration::from_secs(60));
    assert_eq!(c.fallback_url.as_deref(), Some("https://0x1f.ie/gone"));
    let clicks = c.clicks.expect("counting is on by default");
    let beside = couchlink::domain::CompanionDb::Beside;
    assert_eq!((clicks.db, clicks.interval_secs, clicks.queue_bytes), (beside, 15, 4096));
    assert_eq!(clicks.proxy_name, "web-7");
    let off = couchlink::cmd::Cli::try_parse_from(["couchlink", "serve", "--clicks-db", "off"]).unwrap();
    let couchlink::cmd::Command::Serve(off) = off.command else { panic!("parsed as another command") };
    assert!(off.into_config().unwrap().clicks.is_none(), "off: no counting");
    let too_often = couchlink::cmd::Cli::try_parse_from(["couchlink", "serve", "--clicks-interval-secs", "0"]);
    assert!(too_often.is_err(), "an interval is 1 to 3600 seconds");
    let named = ["couchlink", "serve", "--clicks-db", "counts", "--domains", "0x1f.ie=links,go.acme.example=acme"];
    let couchlink::cmd::Command::Serve(named) = couchlink::cmd::Cli::try_parse_from(named).unwrap().command else {
        panic!("parsed as another command")
    };
    assert!(named.into_config().is_err(), "one name for several domains' clicks databases is refused");
    let bad = couchlink::cmd::Cli::try_parse_from(["couchlink", "serve", "--fallback-url", "https://Gone.example/"]);
    assert!(bad.is_err(), "a fallback not in the form sent is refused");
    // By default beside the log directory.
    let beside =
        couchlink::cmd::Cli::try_parse_from(["couchlink", "serve", "--log-dir", "/var/log/couchlink"]).unwrap();
    let couchlink::cmd::Command::Serve(beside) = beside.command else { panic!("parsed as another command") };
    assert_eq!(
        beside.into_config().unwrap().state_dir.as_deref(),
        Some(std::path::Path::new("/var/log/couchlink-state"))
    );
    // 0: no snapshots at all, neither read nor written.
    let off = couchlink::cmd::Cli::try_parse_from(["couchlink", "serve", "--snapshot-secs", "0"]).unwrap();
    let couchlink::cmd::Command::Serve(off) = off.command else { panic!("parsed as another command") };
    assert_eq!(off.into_config().unwrap().state_dir, None);
}

#[tokio::test]
async fn create_takes_a_date_or_a_time_for_expires_and_refuses_one_already_past() {
    let db = TestDb::new().await;
    let env = [&editor_env(&db)[..], &[("COUCHLINK_PUBLIC_URL", "https://0x1f.ie")]].concat();
    let (status, stdout, stderr) =
        run_binary_output(&["create", "https://example.com/", "--expires", "2099-12-31"], &env);
    assert!(status.success(), "{stderr}");
    let id = stdout.trim().rsplit('/').next().unwrap().to_owned();
    let doc: serde_json::Value = db.admin(reqwest::Method::GET, &id, None).await.json().await.unwrap();
    assert_eq!(doc["expires"], "2100-01-01T00:00:00Z", "a date: the link works through that day");
    for past in ["2020-01-01", "2020-01-01T00:00:00Z"] {
        let (status, stderr) = run_binary(&["create", "https://example.com/", "--expires", past], &env);
        assert!(!status.success() && stderr.contains("already past"), "{past}: {stderr}");
    }
    let (status, stderr) = run_binary(&["create", "https://example.com/", "--expires", "soon"], &env);
    assert!(!status.success() && stderr.contains("neither a date"), "{stderr}");
}

#[tokio::test]
async fn create_takes_rules_a_fallback_and_a_start_as_flags() {
    let db = TestDb::new().await;
    let env = [&editor_env(&db)[..], &[("COUCHLINK_PUBLIC_URL", "https://0x1f.ie")]].concat();
    let args = [
        "create",
        "https://example.com/app",
        "--target",
        "os=ios=https://apps.apple.com/app/id1?mt=8",
        "--target",
        "device=desktop;lang=fr,de=https://example.com/eu/",
        "--target",
        "country=IE,GB;query.utm_source=flyer,poster=https://example.com/print",
        "--split",
        "70=https://example.com/a",
        "--split",
        "30=https://example.com/b",
        "--fallback",
        "https://example.com/ended",
        "--valid-from",
        "2026-12-01",
    ];
    let (status, stdout, stderr) = run_binary_output(&args, &env);
    assert!(status.success(), "{stderr}");
    let id = stdout.trim().rsplit('/').next().unwrap().to_owned();
    let doc: serde_json::Value = db.admin(reqwest::Method::GET, &id, None).await.json().await.unwrap();
    assert_eq!(
        doc["targets"],
        json!([
            {"when": {"os": ["ios"]}, "url": "https://apps.apple.com/app/id1?mt=8"},
            {"when": {"device": ["desktop"], "lang": ["fr", "de"]}, "url": "https://example.com/eu/"},
            {"when": {"country": ["IE", "GB"], "query": {"utm_source": ["flyer", "poster"]}}, "url": "https://example.com/print"},
            {"split": [{"weight": 70, "url": "https://example.com/a"}, {"weight": 30, "url": "https://example.com/b"}]}
        ])
    );
    assert_eq!(
        (doc["fallback"].as_str(), doc["valid_from"].as_str()),
        (Some("https://example.com/ended"), Some("2026-12-01T00:00:00Z"))
    );
    for (bad, says) in
        [("os=iOS=https://a.example/", "allowed: ios, android"), ("ios=https://a.example/", "CONDITIONS=URL")]
    {
        let (status, stderr) = run_binary(&["create", "https://example.com/", "--target", bad], &env);
        assert!(!status.success() && stderr.contains(says), "{bad}: {stderr}");
    }
    for (bad, says) in [
        (vec!["--split", "1=https://a.example/"], "--split: \"split\" must be a list of 2 to 16"),
        (vec!["--split", "x=https://a.example/"], "the weight is a whole number"),
        (vec!["--target", "country=ie=https://a.example/"], "ISO 3166-1 codes in upper case"),
    ] {
        let (status, stderr) = run_binary(&[&["create", "https://example.com/"][..], &bad].concat(), &env);
        assert!(!status.success() && stderr.contains(says), "{bad:?}: {stderr}");
    }
}

#[tokio::test]
async fn a_start_refused_by_couchdb_leaves_no_log_folder_behind() {
    let db = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    let env = [
        ("COUCHLINK_COUCHDB_URL", db.couch.url.as_str()),
        ("COUCHLINK_COUCHDB_USER", "couchlink-test-nobody"),
        ("COUCHLINK_COUCHDB_PASSWORD", "wrong"),
        ("COUCHLINK_DB", db.name.as_str()),
        ("COUCHLINK_LISTEN", "127.0.0.1:0"),
        ("COUCHLINK_ADMIN_LISTEN", "127.0.0.1:0"),
        ("COUCHLINK_LOG_DIR", logs.to_str().unwrap()),
    ];
    let (status, stderr) = run_binary(&["serve"], &env);
    assert!(!status.success(), "{stderr}");
    assert!(!logs.exists(), "a failed start left {}", logs.display());
}

#[test]
fn a_report_without_logs_says_where_it_looked_and_what_to_pass() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nowhere");
    let (status, stderr) = run_binary(&["report"], &[("COUCHLINK_LOG_DIR", missing.to_str().unwrap())]);
    assert!(!status.success());
    assert!(stderr.contains(missing.to_str().unwrap()) && stderr.contains("--log-dir"), "{stderr}");
}
