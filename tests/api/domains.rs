//! Several short domains on one proxy: the `Host` picks the domain, each its own database,
//! cache, feed, public URL and log folder; one database gone leaves the others serving.

use std::time::{Duration, Instant};

use couchlink::domain::{Domain, Host, PublicUrl};
use reqwest::Method;
use serde_json::json;

use crate::support::*;

/// `n` domains `d0.test`, `d1.test`..., each on a database of its own (the first is the app's
/// `db`), public URLs `https://dN.test`; `default` names the default domain.
async fn spawn_domains(n: usize, default: Option<&'static str>) -> (TestApp, Vec<TestDb>) {
    let mut dbs = Vec::new();
    for _ in 0..n {
        dbs.push(TestDb::new().await);
    }
    let domains: Vec<Domain> = dbs
        .iter()
        .enumerate()
        .map(|(k, db)| Domain {
            host: Host::parse(&format!("d{k}.test")).unwrap(),
            db: db.name.clone(),
            public_url: PublicUrl::parse(&format!("https://d{k}.test")).unwrap(),
        })
        .collect();
    let first = TestDb { name: dbs[0].name.clone(), couch: dbs[0].couch.clone() };
    let app = spawn_app_on(first, move |c| {
        c.domains = domains;
        c.default_domain = default.map(|d| Host::parse(d).unwrap());
    })
    .await;
    (app, dbs)
}

async fn get_on(app: &TestApp, host: &str, path: &str) -> reqwest::Response {
    app.http.get(format!("{}{path}", app.base)).header("Host", host).send().await.expect("couchlink answers")
}

/// Every line of the access logs under `dir`.
fn lines_in(dir: &std::path::Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut lines = Vec::new();
    for entry in entries {
        let path = entry.unwrap().path();
        if path.file_name().unwrap().to_string_lossy().starts_with("access") {
            lines.extend(std::fs::read_to_string(path).unwrap().lines().map(str::to_owned));
        }
    }
    lines
}

/// Waits (at most 10 s) until `dir`'s access log holds at least `n` lines: those lines.
async fn wait_for_lines(dir: &std::path::Path, n: usize) -> Vec<String> {
    let what = format!("{n} lines in {}", dir.display());
    eventually(&what, Duration::from_secs(10), || async {
        let lines = lines_in(dir);
        if lines.len() >= n {
            Ok(lines)
        } else {
            Err(lines)
        }
    })
    .await
}

#[tokio::test]
async fn the_host_picks_the_domain_and_each_has_its_links_url_and_log() {
    let (app, dbs) = spawn_domains(2, None).await;
    dbs[0].put_link("Same1", json!({"url": "https://zero.example/"})).await;
    dbs[1].put_link("Same1", json!({"url": "https://one.example/"})).await;
    dbs[1].put_link("Only1", json!({"url": "https://one.example/only"})).await;

    // Port ignored, case-insensitive, IDNA: all name d1.test.
    for host in ["d1.test", "D1.TEST:8080", "d1.test."] {
        let r = get_on(&app, host, "/Same1").await;
        assert_redirects_to(&r, "https://one.example/");
        assert_eq!(r.headers()["link"], "<https://d1.test/Same1>; rel=\"shortlink\"", "{host}");
        assert!(r.headers()["set-cookie"].to_str().unwrap().ends_with("; Secure"));
    }
    assert_redirects_to(&get_on(&app, "d0.test", "/Same1").await, "https://zero.example/");
    // A link of one domain is no link of another.
    assert_eq!(get_on(&app, "d0.test", "/Only1").await.status(), 404);
    // An unknown host: a 404 with a cookie, whatever the ID.
    let r = get_on(&app, "elsewhere.example", "/Same1").await;
    assert_eq!(r.status(), 404);
    assert!(r.headers().contains_key("set-cookie"));
    // A missing Host on HTTP/1.1 is the protocol's 400.
    assert!(app.raw(b"GET /Same1 HTTP/1.1\r\nConnection: close\r\n\r\n").await.starts_with("HTTP/1.1 400"));
    // Absolute form: the target's host wins over the Host header (RFC 9112).
    let raw = app.raw(b"GET http://d1.test/Only1 HTTP/1.1\r\nHost: d0.test\r\nConnection: close\r\n\r\n").await;
    assert!(raw.starts_with("HTTP/1.1 302") && raw.contains("location: https://one.example/only"), "{raw}");

    // One folder per domain, the line format unchanged; unknown hosts and refusals apart.
    let root = app.log_dir.path();
    let zero = wait_for_lines(&root.join("d0.test"), 2).await;
    let one = wait_for_lines(&root.join("d1.test"), 4).await;
    let unknown = wait_for_lines(&root.join("_unknown"), 2).await;
    assert_eq!((zero.len(), one.len(), unknown.len()), (2, 4, 2), "{zero:?} {one:?} {unknown:?}");
    assert!(one.iter().all(|l| l.split(' ').count() == 7 && l.split(' ').nth(5) == Some("302")), "{one:?}");
    assert!(zero.iter().any(|l| l.split(' ').nth(4) == Some("/Only1") && l.split(' ').nth(5) == Some("404")));

    // /metrics by configured domain only; /healthz each.
    let metrics = app.admin_get("/metrics").await.text().await.unwrap();
    assert!(metrics.contains("couchlink_responses_total{domain=\"d1.test\",status=\"302\"} 4"), "{metrics}");
    assert!(metrics.contains("couchlink_responses_total{domain=\"_unknown\",status=\"400\"} 1"), "{metrics}");
    assert!(!metrics.contains("elsewhere"));
    let health = eventually("both domains ok and ready", Duration::from_secs(5), || async {
        let health: serde_json::Value = app.admin_get("/healthz").await.json().await.unwrap();
        let ready = |d: &str| health["domains"][d]["status"] == "ok" && health["domains"][d]["cache"] == "ready";
        if ready("d0.test") && ready("d1.test") {
            Ok(health)
        } else {
            Err(health)
        }
    })
    .await;
    assert_eq!(health["domains"]["d0.test"]["couchdb"], "reachable", "{health}");
}

#[tokio::test]
async fn ten_domains_each_serve_their_edits_within_a_second() {
    let (app, dbs) = spawn_domains(10, Some("d3.test")).await;
    for (k, db) in dbs.iter().enumerate() {
        db.put_link("Edit1", json!({"url": format!("https://before.example/{k}")})).await;
    }
    for k in 0..10 {
        assert_redirects_to(
            &get_on(&app, &format!("d{k}.test"), "/Edit1").await,
            &format!("https://before.example/{k}"),
        );
    }
    for (k, db) in dbs.iter().enumerate() {
        db.put_link("Edit1", json!({"url": format!("https://after.example/{k}")})).await;
    }
    let edited = Instant::now();
    for k in 0..10 {
        let wanted = format!("https://after.example/{k}");
        // Within a second of the edits, for all ten together.
        let left = Duration::from_secs(1).saturating_sub(edited.elapsed());
        let what = format!("d{k}.test serves the new target");
        eventually(&what, left, || async {
            let r = get_on(&app, &format!("d{k}.test"), "/Edit1").await;
            let location = r.headers()["location"].to_str().unwrap().to_owned();
            holds(location == wanted, location)
        })
        .await;
    }
    // The default domain takes every other host.
    assert_redirects_to(&get_on(&app, "other.example", "/Edit1").await, "https://after.example/3");
}

#[tokio::test]
async fn one_domains_database_deleted_leaves_the_others_serving() {
    let (app, dbs) = spawn_domains(2, None).await;
    dbs[0].put_link("Keep1", json!({"url": "https://zero.example/"})).await;
    dbs[1].put_link("Keep1", json!({"url": "https://one.example/"})).await;
    assert_redirects_to(&get_on(&app, "d1.test", "/Keep1").await, "https://one.example/");
    let r = dbs[1].admin(Method::DELETE, "", None).await;
    assert!(r.status().is_success());
    // The other domain goes on, and learns of new links.
    dbs[0].put_link("New01", json!({"url": "https://zero.example/new"})).await;
    eventually("d0.test learns of new links", Duration::from_secs(2), || async {
        let status = get_on(&app, "d0.test", "/New01").await.status();
        holds(status == 302, status)
    })
    .await;
    // The gone database's domain: what it does not know is 503 or 404, never another domain's link.
    let r = get_on(&app, "d1.test", "/New01").await;
    assert!(matches!(r.status().as_u16(), 404 | 503), "{}", r.status());
    let health: serde_json::Value = app.admin_get("/healthz").await.json().await.unwrap();
    assert_eq!(health["domains"]["d0.test"]["status"], "ok", "{health}");
    assert_eq!(app.admin_get("/healthz").await.status(), 200, "one domain down is not the proxy down");
}

#[tokio::test]
async fn the_report_reads_one_domain_or_several_apart() {
    let (app, dbs) = spawn_domains(2, None).await;
    dbs[0].put_link("Rep01", json!({"url": "https://zero.example/"})).await;
    dbs[1].put_link("Rep01", json!({"url": "https://one.example/"})).await;
    for _ in 0..3 {
        get_on(&app, "d0.test", "/Rep01").await;
    }
    get_on(&app, "d1.test", "/Rep01").await;
    let root = app.log_dir.path();
    wait_for_lines(&root.join("d0.test"), 3).await;
    wait_for_lines(&root.join("d1.test"), 1).await;
    let report = |args: &[&str]| {
        let out = crate::support::process::couchlink_command()
            .arg("report")
            .args(["--log-dir", root.to_str().unwrap(), "--format", "json"])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let redirects = |report: &serde_json::Value| {
        let links = report["links"].as_array().unwrap();
        assert_eq!(links.len(), 1, "{report}");
        assert_eq!(links[0]["id"], "Rep01");
        links[0]["redirects"].as_u64().unwrap()
    };
    assert_eq!(redirects(&report(&["--domain", "d0.test"])), 3);
    let both = report(&["--domain", "d0.test", "--domain", "D1.test"]);
    assert_eq!(redirects(&both["domains"]["d0.test"]), 3, "{both}");
    assert_eq!(redirects(&both["domains"]["d1.test"]), 1, "{both}");
}

/// `create`, `import` and `export` work on the domain `--domain` names: its database, its
/// public URL.
#[tokio::test]
async fn the_tools_work_on_the_domain_named() {
    let (_app, dbs) = spawn_domains(2, None).await;
    let domains = format!("d0.test={},d1.test={}", dbs[0].name, dbs[1].name);
    let run = |who: (&str, &str), args: &[&str]| {
        let out = crate::support::process::couchlink_command()
            .args(args)
            .env("COUCHLINK_COUCHDB_URL", &dbs[0].couch.url)
            .env("COUCHLINK_COUCHDB_USER", who.0)
            .env("COUCHLINK_COUCHDB_PASSWORD", who.1)
            .env("COUCHLINK_DOMAINS", &domains)
            .env("COUCHLINK_PUBLIC_URLS", "d1.test=https://go.d1.test")
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (ok, stdout, stderr) = run(EDITOR, &["create", "--domain", "D1.test", "https://made.example/"]);
    assert!(ok, "{stderr}");
    let id = stdout.trim().strip_prefix("https://go.d1.test/").unwrap_or_else(|| panic!("{stdout}"));
    let r = dbs[1].admin(Method::GET, id, None).await;
    assert_eq!(r.json::<serde_json::Value>().await.unwrap()["url"], "https://made.example/");
    assert_eq!(dbs[0].admin(Method::GET, id, None).await.status(), 404, "written to the other domain");

    let (ok, stdout, stderr) = run(READER, &["export", "--domain", "d1.test"]);
    assert!(ok, "{stderr}");
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    assert!(stdout.contains(id));

    let (ok, _, stderr) = run(EDITOR, &["create", "--domain", "nowhere.test", "https://made.example/"]);
    assert!(!ok);
    assert!(stderr.contains("nowhere.test is not one of the domains"), "{stderr}");
}

/// `setup --domain` prepares that domain's database, with its own roles.
#[tokio::test]
async fn setup_prepares_the_domain_named() {
    let couch = crate::support::couch::couch();
    let name = format!("test_{}", crate::support::couch::random_lowercase(12));
    let out = crate::support::process::couchlink_command()
        .args(["setup", "--domain", "new.test"])
        .env("COUCHLINK_COUCHDB_URL", &couch.url)
        .env("COUCHLINK_COUCHDB_USER", &couch.admin_user)
        .env("COUCHLINK_COUCHDB_PASSWORD", &couch.admin_password)
        .env("COUCHLINK_DOMAINS", format!("old.test=elsewhere,new.test={name}"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let db = TestDb { name: name.clone(), couch: couch.clone() };
    let security: serde_json::Value = db.admin(Method::GET, "_security", None).await.json().await.unwrap();
    assert!(security["members"]["roles"].as_array().unwrap().contains(&json!(format!("{name}:editor"))), "{security}");
    assert_eq!(db.admin(Method::GET, "_design/couchlink", None).await.status(), 200);
    assert_eq!(
        TestDb { name: "elsewhere".into(), couch: couch.clone() }.admin(Method::GET, "", None).await.status(),
        404
    );
}

/// Each domain's cache snapshot in a folder of its own under the state directory, written at
/// shutdown.
#[tokio::test]
async fn each_domain_keeps_its_own_snapshot() {
    let (mut app, dbs) = spawn_domains(2, None).await;
    for db in &dbs {
        db.put_link("Snap1", json!({"url": "https://snap.example/"})).await;
    }
    for host in ["d0.test", "d1.test"] {
        assert_redirects_to(&get_on(&app, host, "/Snap1").await, "https://snap.example/");
    }
    app.stop().await.unwrap();
    for host in ["d0.test", "d1.test"] {
        let file = app.state_dir.path().join(host).join("links.snapshot");
        assert!(file.metadata().is_ok_and(|m| m.len() > 0), "{} missing", file.display());
    }
}
