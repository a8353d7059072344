//! A link with a password (docs/reference.md, "Passwords"): `401` with `WWW-Authenticate: Basic`
//! without the right one, the link's usual answer with it; the document holds only an Argon2id
//! hash, which CouchDB's validation function insists on; the old password stops at the revision
//! that changes it; wrong guesses from one address end in `429`; nothing of a credential reaches
//! the access log.

use std::time::Duration;

use base64::Engine as _;
use couchlink::domain::PasswordHash;
use reqwest::Method;
use serde_json::json;

use crate::support::*;

const TARGET: &str = "https://intranet.example/staff";

/// `path` asked with `password` (any user name), or without credentials.
async fn get_with(app: &TestApp, path: &str, password: Option<&str>) -> reqwest::Response {
    let request = http().get(format!("{}{path}", app.base));
    let request = match password {
        Some(password) => request.basic_auth("anyone", Some(password)),
        None => request,
    };
    request.send().await.expect("couchlink answers")
}

fn hash(password: &str) -> String {
    PasswordHash::create(password.as_bytes()).unwrap().as_str().to_owned()
}

/// Asserts a `401` for link `id` that shows nothing of where it leads.
async fn assert_asks(response: reqwest::Response, id: &str) {
    assert_eq!(response.status(), 401);
    assert_eq!(response.headers()["www-authenticate"], format!("Basic realm=\"{id}\", charset=\"UTF-8\"").as_str());
    assert!(response.headers().get("location").is_none());
    assert!(response.headers().get("set-cookie").is_some(), "every response carries the tracking cookie");
    let body = response.text().await.unwrap();
    assert!(!body.contains("intranet"), "{body}");
}

#[tokio::test]
async fn a_protected_link_asks_for_its_password_and_answers_as_usual_with_it() {
    let app = spawn_app().await;
    app.db.put_link("Staff", json!({"url": TARGET, "password": hash("staff only")})).await;
    app.db.put_link("Via01", json!({"url": "/Staff"})).await;

    assert_asks(get_with(&app, "/Staff", None).await, "Staff").await;
    assert_asks(get_with(&app, "/Staff", Some("wrong")).await, "Staff").await;
    assert_redirects_to(&get_with(&app, "/Staff", Some("staff only")).await, TARGET);
    let head = http().head(format!("{}/Staff", app.base)).basic_auth("", Some("staff only")).send().await.unwrap();
    assert_eq!(head.status(), 302);
    assert_eq!(head.headers()["location"], TARGET);
    // The rest of the path and the query, as for any link; behind the same gate.
    assert_asks(get_with(&app, "/Staff/rota?week=48", None).await, "Staff").await;
    assert_redirects_to(
        &get_with(&app, "/Staff/rota?week=48", Some("staff only")).await,
        &format!("{TARGET}/rota?week=48"),
    );
    // Never reached through another link's internal redirect, with or without the password.
    assert_eq!(get_with(&app, "/Via01", None).await.status(), 404);
    assert_eq!(get_with(&app, "/Via01", Some("staff only")).await.status(), 404);

    // One hash for the right password and one for the wrong: the right one's verdict was
    // remembered for the three requests after it.
    assert_eq!(app.metric("couchlink_password_hashes_total").await, 2.0);
    assert_eq!(app.metric("couchlink_password_answers_total{result=\"right\"}").await, 3.0);
    assert_eq!(app.metric("couchlink_password_answers_total{result=\"wrong\"}").await, 1.0);
    assert_eq!(app.metric("couchlink_password_answers_total{result=\"missing\"}").await, 2.0);
    assert_eq!(app.metric("couchlink_responses_total{status=\"401\"}").await, 3.0);

    // Logged like any answer, without a Location for a 401 (as a 404); nothing of a credential.
    let lines = app.wait_for_log_lines(8).await;
    let asked: Vec<_> = lines.iter().filter(|l| l.split(' ').nth(5) == Some("401")).collect();
    assert_eq!(asked.len(), 3, "{lines:?}");
    assert!(asked.iter().all(|l| l.split(' ').count() == 6), "{asked:?}");
    let credential = base64::engine::general_purpose::STANDARD.encode("anyone:staff only");
    for line in &lines {
        assert!(
            !line.contains("staff only") && !line.contains("staff%20only") && !line.contains(&credential),
            "{line}"
        );
        assert!(!line.to_ascii_lowercase().contains("basic"), "{line}");
    }
}

#[tokio::test]
async fn a_changed_password_stops_the_old_one_with_the_revision_and_a_removed_one_opens_the_link() {
    let app = spawn_app().await;
    app.wait_until_feed_is_live().await;
    app.db.put_link("Badge", json!({"url": TARGET, "password": hash("autumn")})).await;
    assert_redirects_to(&get_with(&app, "/Badge", Some("autumn")).await, TARGET);

    app.db.put_link("Badge", json!({"url": TARGET, "password": hash("winter")})).await;
    eventually("the old password no longer opens the link", Duration::from_secs(5), || async {
        let status = get_with(&app, "/Badge", Some("autumn")).await.status();
        holds(status == 401, status)
    })
    .await;
    assert_redirects_to(&get_with(&app, "/Badge", Some("winter")).await, TARGET);

    app.db.put_link("Badge", json!({"url": TARGET})).await;
    app.wait_until_served("/Badge", 302, Some(TARGET)).await;
}

/// `path` asked with `password` as from `client` (a trusted proxy, loopback, names it).
async fn get_from(app: &TestApp, path: &str, password: &str, client: &str) -> reqwest::Response {
    let request = http().get(format!("{}{path}", app.base)).basic_auth("anyone", Some(password));
    request.header("x-forwarded-for", client).send().await.expect("couchlink answers")
}

async fn spawn_behind_a_proxy() -> TestApp {
    spawn_app_with(AppOptions::with(|c| c.trusted_proxies = "127.0.0.1/32".parse().unwrap())).await
}

#[tokio::test]
async fn wrong_guesses_from_one_address_end_in_429_for_every_password_it_presents() {
    let app = spawn_behind_a_proxy().await;
    app.db.put_link("Guess", json!({"url": TARGET, "password": hash("correct horse")})).await;
    // Its rightful visitor came first: the verdict is remembered.
    assert_redirects_to(&get_from(&app, "/Guess", "correct horse", "198.51.100.1").await, TARGET);
    let guesser = "203.0.113.7";
    for n in 0..couchlink::gate::GUESSES {
        assert_asks(get_from(&app, "/Guess", &format!("guess {n}"), guesser).await, "Guess").await;
    }
    // 199 more, then the right one: each answered 429, the right one too, remembered or not
    // (a 429 that let the right password through would tell it at memory speed).
    for n in 0..199 {
        assert_eq!(get_from(&app, "/Guess", &format!("more {n}"), guesser).await.status(), 429);
    }
    let waiting = get_from(&app, "/Guess", "correct horse", guesser).await;
    assert_eq!(waiting.status(), 429);
    let retry: u64 = waiting.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    assert!(retry > 0 && retry <= couchlink::gate::WINDOW.as_secs(), "{retry}");
    assert!(waiting.headers().get("location").is_none());
    // Not hashed for while it waits: the rightful visitor's one hash and the ten guesses'.
    assert_eq!(app.metric("couchlink_password_hashes_total").await, 1.0 + f64::from(couchlink::gate::GUESSES));
    assert_eq!(app.metric("couchlink_password_answers_total{result=\"limited\"}").await, 200.0);
    // Another address is not held back.
    assert_redirects_to(&get_from(&app, "/Guess", "correct horse", "198.51.100.1").await, TARGET);
    let lines = app.wait_for_log_lines(212).await;
    assert_eq!(lines.iter().filter(|l| l.split(' ').nth(5) == Some("429")).count(), 200);
}

#[tokio::test]
async fn guesses_at_once_from_one_address_are_hashed_no_more_than_the_limit_and_others_still_open() {
    let app = spawn_behind_a_proxy().await;
    app.db.put_link("Flood", json!({"url": TARGET, "password": hash("correct horse")})).await;
    app.db.put_link("Other", json!({"url": TARGET, "password": hash("another")})).await;
    app.wait_until_served("/Other", 401, None).await;
    let flooder = "2001:db8:7::1";
    // 400 connections at once from one /64, each another wrong password.
    let flood: Vec<_> = (0..400)
        .map(|n| {
            let url = format!("{}/Flood", app.base);
            tokio::spawn(async move {
                let request = reqwest::Client::new().get(url).basic_auth("anyone", Some(format!("guess {n}")));
                request.header("x-forwarded-for", format!("2001:db8:7::{:x}", n + 2)).send().await.map(|r| r.status())
            })
        })
        .collect();
    // Meanwhile another link's first right password, from another address, opens.
    assert_redirects_to(&get_from(&app, "/Other", "another", "198.51.100.1").await, TARGET);
    let mut statuses = Vec::new();
    for answer in flood {
        statuses.push(answer.await.unwrap().expect("every connection answered").as_u16());
    }
    let asked = statuses.iter().filter(|s| **s == 401).count();
    assert_eq!(asked, couchlink::gate::GUESSES as usize, "as many answered 401 as there are guesses");
    assert_eq!(asked + statuses.iter().filter(|s| **s == 429).count(), 400, "{statuses:?}");
    // The limit's guesses hashed for the flood, and one for the other link.
    assert_eq!(app.metric("couchlink_password_hashes_total").await, 1.0 + f64::from(couchlink::gate::GUESSES));
    // The right password, once the flood is answered: 429 as well.
    assert_eq!(get_from(&app, "/Flood", "correct horse", flooder).await.status(), 429);
}

#[tokio::test]
async fn couchdb_keeps_a_password_out_of_the_document_and_takes_only_its_hash() {
    let db = TestDb::new().await;
    for password in [
        json!("staff only"),
        json!(42),
        json!("$argon2id$v=19$m=4194304,t=1,p=1$c29tZXNhbHRzb21lc2FsdA$Jd2VqXhN2y0m8y1aM7mGkU5s1bQmF0w0Lr0pQ8vYk2c"),
    ] {
        let doc = json!({"url": TARGET, "password": password});
        let r = db.request_as(Some(EDITOR), Method::PUT, "Clear", Some(&doc)).await;
        assert_eq!(r.status(), 403, "{password}");
        let body: serde_json::Value = r.json().await.unwrap();
        assert!(body["reason"].as_str().unwrap().starts_with("[password] "), "{body}");
    }
    let doc = json!({"url": TARGET, "password": hash("staff only")});
    let r = db.request_as(Some(EDITOR), Method::PUT, "Clear", Some(&doc)).await;
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
}

#[tokio::test]
async fn the_binary_stores_the_hash_of_a_password_read_from_a_file_and_the_proxy_asks_for_it() {
    let app = spawn_app().await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("password");
    std::fs::write(&file, "staff only\n").unwrap();
    let output = crate::admin_plane::create_with_the_binary(
        &app.db,
        &[TARGET, "--password-file", file.to_str().unwrap(), "--public-url", "https://0x1f.ie"],
    );
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let printed = String::from_utf8(output.stdout).unwrap();
    let id = printed.trim().strip_prefix("https://0x1f.ie/").unwrap().to_owned();
    let doc: serde_json::Value = app.db.admin(Method::GET, &id, None).await.json().await.unwrap();
    let stored = doc["password"].as_str().unwrap();
    assert!(stored.starts_with("$argon2id$v=19$m=19456,t=2,p=1$") && !stored.contains("staff only"), "{stored}");
    assert_asks(get_with(&app, &format!("/{id}"), None).await, &id).await;
    // The line end is not part of the password.
    assert_redirects_to(&get_with(&app, &format!("/{id}"), Some("staff only")).await, TARGET);

    std::fs::write(&file, "\n").unwrap();
    let empty =
        crate::admin_plane::create_with_the_binary(&app.db, &[TARGET, "--password-file", file.to_str().unwrap()]);
    assert!(!empty.status.success());
    let stderr = String::from_utf8(empty.stderr).unwrap();
    assert!(stderr.contains("--password-file") && stderr.contains("cannot be empty"), "{stderr}");
}
