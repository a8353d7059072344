//! The proxy's CouchDB password changed while it serves: it says so once, naming the account and
//! CouchDB's reason; links it knows keep redirecting and unknown ones get 503 without CouchDB
//! being asked again (CouchDB 3 locks an account out after more than 5 failures in 5 minutes);
//! SIGHUP reads the password file again, and all is served as before.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;
use tempfile::TempDir;

use crate::support::process::ServeProcess;
use crate::support::*;

/// `couchlink serve` on `db` as `user`, its password read from a file holding `password`, once it
/// follows CouchDB and is warm (what it knows from then on stays in memory), and serves
/// `Known`. The folder holding the password file goes with the returned guard.
async fn serving_as(name: &str, db: &TestDb, user: &str, password: &str) -> (ServeProcess, PathBuf, TempDir) {
    let secrets = tempfile::tempdir().unwrap();
    let password_file = secrets.path().join("couchdb-password");
    std::fs::write(&password_file, format!("{password}\n")).unwrap();
    db.put_link("Known", json!({"url": "https://known.example/"})).await;
    let file = password_file.display().to_string();
    let env = [
        ("COUCHLINK_COUCHDB_URL", db.couch.url.as_str()),
        ("COUCHLINK_COUCHDB_USER", user),
        ("COUCHLINK_COUCHDB_PASSWORD_FILE", file.as_str()),
        ("COUCHLINK_DB", db.name.as_str()),
    ];
    let proxy = ServeProcess::start(name, &env);
    let health_url = format!("http://{}/healthz", proxy.admin_addr);
    eventually("CouchDB reachable, the cache warm and the feed live", LIMIT, || async {
        let health: serde_json::Value = reqwest::get(&health_url).await.unwrap().json().await.unwrap();
        // Whatever the history says: the test database has none, so the recorder's rounds fail
        // once it starts (after the warm-up), which makes the whole proxy "degraded" sooner or
        // later.
        holds(
            health["couchdb"] == "reachable" && health["cache"] == "ready" && health["feed"]["state"] == "live",
            health,
        )
    })
    .await;
    proxy.wait_until_served("/Known", 302, Some("https://known.example/"), LIMIT).await;
    (proxy, password_file, secrets)
}

/// How long anything here may take.
const LIMIT: Duration = Duration::from_secs(10);

#[tokio::test]
async fn a_changed_password_is_said_once_and_sighup_reads_the_new_one() {
    let db = TestDb::new().await;
    let user = format!("couchlink-test-rotate-{}", random_lowercase(8));
    ensure_user(couch(), (&user, "first-pw"), READER_ROLE).await;
    let (mut proxy, password_file, _secrets) = serving_as("rotation", &db, &user, "first-pw").await;
    let health_url = format!("http://{}/healthz", proxy.admin_addr);

    // The operator rotates the password in CouchDB first. CouchDB 3 takes a moment to stop
    // accepting the old one (its cache of `_users` follows that database's changes).
    set_password(couch(), &user, "second-pw").await;
    eventually("CouchDB refuses the old password", LIMIT, || async {
        let old = db.request_as(Some((&user, "first-pw")), reqwest::Method::GET, "", None).await;
        holds(old.status() == 401, old.status())
    })
    .await;
    let said = refused_yet_serving(&proxy).await;
    assert!(said[0].contains(&user) && said[0].contains("unauthorized"), "the account and CouchDB's reason: {said:?}");
    let health = reqwest::get(&health_url).await.unwrap();
    assert_eq!(health.status(), 503);
    let health: serde_json::Value = health.json().await.unwrap();
    assert!(health["couchdb"].as_str().unwrap().contains(&format!("refused the account {user}")), "{health}");

    // Then the new password in the file, and SIGHUP.
    std::fs::write(&password_file, "second-pw\n").unwrap();
    proxy.hang_up();
    proxy.wait_until_served("/Unkn1", 404, None, LIMIT).await;
    db.put_link("Newer", json!({"url": "https://newer.example/"})).await;
    proxy.wait_until_served("/Newer", 302, Some("https://newer.example/"), LIMIT).await;
    db.put_link("Known", json!({"url": "https://moved.example/"})).await;
    proxy.wait_until_served("/Known", 302, Some("https://moved.example/"), LIMIT).await;
    proxy.said_eventually("read the CouchDB password again").await;
    assert_eq!(reqwest::get(&health_url).await.unwrap().status(), 200);
    assert!(proxy.terminate().success());
    // Said once, in all it said.
    assert_eq!(proxy.said_in_all("read the CouchDB password again").len(), 1);
    assert_said_once_refused(&mut proxy);
}

/// With its account refused, the proxy answers unknown links 503 and known ones as before, and
/// says so: what it said.
async fn refused_yet_serving(proxy: &ServeProcess) -> Vec<String> {
    let status = |r: Option<reqwest::Response>| r.map_or(0, |r| r.status().as_u16());
    assert_eq!(status(proxy.get("/Unkn1").await), 503, "an unknown link cannot be looked up");
    assert_eq!(status(proxy.get("/Unkn2").await), 503);
    assert_eq!(status(proxy.get("/Known").await), 302, "a known link still redirects");
    let serving = proxy.said_eventually(SERVING_ON).await;
    let history: Vec<String> =
        proxy.said("refused the account").into_iter().filter(|line| !line.contains(SERVING_ON)).collect();
    assert!(history.len() <= 1 && history.iter().all(|l| l.contains("history not recorded for now")), "{history:?}");
    serving
}

/// What the proxy says when its account is refused and it serves what it knows.
const SERVING_ON: &str = "links already in memory are still served";

/// Once exited, the proxy said its account was refused once in all. (Its history recorder,
/// refused too, says that history waits: lines of its own, which CouchDB 3.5 answers in time to
/// be seen and pouchdb-server often not.)
fn assert_said_once_refused(proxy: &mut ServeProcess) {
    let said = proxy.said_in_all("refused the account");
    let (serving, history): (Vec<String>, Vec<String>) = said.into_iter().partition(|line| line.contains(SERVING_ON));
    assert_eq!(serving.len(), 1, "said once: {serving:?}");
    assert!(history.iter().all(|l| l.contains("history not recorded for now")), "{history:?}");
}

#[tokio::test]
async fn a_reader_role_taken_away_is_said_once_and_given_back_is_served_again() {
    let db = TestDb::new().await;
    let user = format!("couchlink-test-role-{}", random_lowercase(8));
    ensure_user(couch(), (&user, "the-pw"), READER_ROLE).await;
    let (mut proxy, _password_file, _secrets) = serving_as("role", &db, &user, "the-pw").await;
    // The account keeps its password but loses its reader role (once CouchDB says so itself:
    // an unknown ID the proxy read before that would be a 404 it remembers).
    ensure_user(couch(), (&user, "the-pw"), "someone-else").await;
    eventually("CouchDB no longer honours the role", LIMIT, || async {
        let status = db.request_as(Some((&user, "the-pw")), reqwest::Method::GET, "Unkn0", None).await.status();
        holds(status != 404, status)
    })
    .await;
    let said = refused_yet_serving(&proxy).await;
    // CouchDB 3 answers a missing role 403 `forbidden`; pouchdb-server answers 401, which
    // couchlink (as CouchDB documents 401) takes for a refused password.
    let (reason, advice) = if couch().is_pouchdb { ("unauthorized", "password") } else { ("forbidden", "reader role") };
    assert!(said[0].contains(&user) && said[0].contains(reason) && said[0].contains(advice), "{said:?}");
    // The role back: unknown links are looked up again (after SIGHUP, where the refusal was a
    // 401: the password is asked again only then, or by the feed's retry a minute later).
    ensure_user(couch(), (&user, "the-pw"), READER_ROLE).await;
    if couch().is_pouchdb {
        proxy.hang_up();
    }
    proxy.wait_until_served("/Unkn1", 404, None, LIMIT).await;
    assert!(proxy.terminate().success());
    assert_said_once_refused(&mut proxy);
}
