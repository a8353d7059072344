//! Instant restart: a stopped proxy leaves a snapshot of its cache in its state directory; the
//! next start serves from it at once and catches up with what changed in CouchDB meanwhile. A
//! snapshot that fails any check (cut short, of another database, of another format, its
//! sequence refused) is not served: the proxy fills its cache from CouchDB, saying why.

use std::path::Path;
use std::time::{Duration, Instant};

use couchlink::snapshot::{format, FILE_NAME};
use serde_json::{json, Value};

use crate::support::process::{reader_env, ServeProcess};
use crate::support::*;

/// A proxy on `db` keeping its snapshot in `state`.
async fn proxy(db: TestDb, state: &Path) -> TestApp {
    let state = state.to_owned();
    spawn_app_on(db, move |c| c.state_dir = Some(state)).await
}

async fn health(app: &TestApp) -> Value {
    app.admin_get("/healthz").await.json().await.unwrap()
}

/// Waits until the feed has caught up with what changed while the proxy was down.
async fn wait_until_caught_up(app: &TestApp) {
    eventually("the feed has caught up", Duration::from_secs(10), || async {
        let health = health(app).await;
        holds(health["feed"]["state"] == "live" && health["feed"]["catching_up"] == false, health)
    })
    .await
}

/// Waits (at most `limit`) until `/healthz` says the cache is `state` (`ready`, `warming`).
async fn wait_until_cache_is(app: &TestApp, state: &str, limit: Duration) {
    let what = format!("the cache is {state}");
    eventually(&what, limit, || async {
        let health = health(app).await;
        holds(health["cache"] == state, health)
    })
    .await
}

/// A proxy that served `ids` from a warm cache and stopped, leaving its snapshot in `state`.
async fn serve_and_stop(db: TestDb, state: &Path, ids: &[&str]) -> TestDb {
    let mut app = proxy(db, state).await;
    wait_until_cache_is(&app, "ready", Duration::from_secs(10)).await;
    app.wait_until_feed_is_live().await;
    for id in ids {
        app.get(&format!("/{id}")).await;
    }
    assert_eq!(health(&app).await["cache_source"]["origin"], "couchdb", "a first start has no snapshot");
    app.stop().await.unwrap();
    assert!(state.join(FILE_NAME).exists(), "a stopped proxy leaves its snapshot");
    app.db
}

#[tokio::test]
async fn a_restart_serves_from_the_snapshot_with_every_change_made_while_down() {
    let db = TestDb::new().await;
    let state = tempfile::tempdir().unwrap();
    db.put_link("Edit1", json!({"url": "https://before.example/"})).await;
    db.put_link("Gone1", json!({"url": "https://gone.example/"})).await;
    db.put_link("Same1", json!({"url": "https://same.example/"})).await;
    db.put_link("Off01", json!({"url": "https://off.example/"})).await;
    let db = serve_and_stop(db, state.path(), &["Edit1", "Gone1", "Same1", "Off01", "Late1"]).await;

    // While it is down: an edit, a deletion, a deactivation, a new link, and a link made under
    // an ID it knew as missing.
    db.put_link("Edit1", json!({"url": "https://after.example/"})).await;
    db.delete_link("Gone1").await;
    db.put_link("Off01", json!({"url": "https://off.example/", "inactive": true})).await;
    db.put_link("New01", json!({"url": "https://new.example/"})).await;
    db.put_link("Late1", json!({"url": "https://late.example/"})).await;

    let app = proxy(db, state.path()).await;
    let started = Instant::now();
    // Served from the snapshot before the feed has said anything.
    let health_now = health(&app).await;
    assert_eq!(health_now["cache_source"]["origin"], "snapshot", "{health_now}");
    assert_eq!(health_now["cache"], "ready", "no warm-up after a whole snapshot: {health_now}");
    assert_eq!(health_now["cache_source"]["snapshot_restored"]["entries"], 5, "{health_now}");
    app.wait_until_served("/Edit1", 302, Some("https://after.example/")).await;
    app.wait_until_served("/Gone1", 404, None).await;
    app.wait_until_served("/Off01", 404, None).await;
    app.wait_until_served("/Late1", 302, Some("https://late.example/")).await;
    assert!(started.elapsed() < Duration::from_secs(1), "changes made while down served after {:?}", started.elapsed());
    wait_until_caught_up(&app).await;
    assert_redirects_to(&app.get("/Same1").await, "https://same.example/");
    assert_redirects_to(&app.get("/New01").await, "https://new.example/");
    // Everything from memory: the snapshot and the catch-up, no read of a single link.
    assert_eq!(app.metric("couchlink_cache_misses_total").await, 0.0);
    assert_eq!(app.metric("couchlink_cache_from_snapshot").await, 1.0);
    assert_eq!(app.metric("couchlink_feed_catching_up").await, 0.0);
}

/// `couchlink serve` on `db` keeping its snapshot in `state`, with `more` variables.
fn serve_process(name: &str, db: &TestDb, state: &Path, more: &[(&str, &str)]) -> ServeProcess {
    let env = reader_env(db);
    let mut env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let dir = state.display().to_string();
    env.push(("COUCHLINK_STATE_DIR", &dir));
    env.extend_from_slice(more);
    ServeProcess::start(name, &env)
}

/// Starts a proxy on `db` whose snapshot in `state` must not be used; what it said about it.
async fn refused_snapshot(db: &TestDb, state: &Path) -> (ServeProcess, Vec<String>) {
    let proxy = serve_process("restart", db, state, &[]);
    let said = proxy.said_eventually("is not used").await;
    (proxy, said)
}

async fn cache_origin(proxy: &ServeProcess) -> Value {
    let url = format!("http://{}/healthz", proxy.admin_addr);
    let health: Value = http().get(url).send().await.unwrap().json().await.unwrap();
    health["cache_source"]["origin"].clone()
}

/// A proxy served link `id` and stopped, leaving a snapshot in which it points at
/// `https://before.example/`; then the link was pointed at `https://after.example/`.
async fn edited_after_a_snapshot(id: &str) -> (TestDb, tempfile::TempDir) {
    let db = TestDb::new().await;
    let state = tempfile::tempdir().unwrap();
    db.put_link(id, json!({"url": "https://before.example/"})).await;
    let db = serve_and_stop(db, state.path(), &[id]).await;
    db.put_link(id, json!({"url": "https://after.example/"})).await;
    (db, state)
}

/// Starts a proxy whose snapshot must not be used: it says `why` in one line, and serves `id`
/// as CouchDB has it; then stops it (so that all it said is known: the one line).
async fn assert_not_used(db: &TestDb, state: &Path, id: &str, why: &str) -> ServeProcess {
    let (mut proxy, said) = refused_snapshot(db, state).await;
    assert!(said[0].contains(why), "one line says why: {said:?}");
    assert_eq!(cache_origin(&proxy).await, "couchdb");
    proxy.wait_until_served(&format!("/{id}"), 302, Some("https://after.example/"), Duration::from_secs(5)).await;
    proxy.terminate();
    let said = proxy.said_in_all("is not used");
    assert_eq!(said.len(), 1, "one line says why: {said:?}");
    proxy
}

#[tokio::test]
async fn a_snapshot_cut_short_is_not_served() {
    let (db, state) = edited_after_a_snapshot("Trnc1").await;
    let path = state.path().join(FILE_NAME);
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 10]).unwrap();
    let proxy = assert_not_used(&db, state.path(), "Trnc1", "cut short").await;
    assert!(proxy.said(FILE_NAME).iter().any(|line| line.contains("cut short")), "the file is named");
}

#[tokio::test]
async fn a_damaged_snapshot_or_one_of_an_older_format_is_not_served() {
    let (db, state) = edited_after_a_snapshot("Frmt1").await;
    let path = state.path().join(FILE_NAME);
    let good = std::fs::read(&path).unwrap();

    // Written by an older format version: the version after the magic line, one lower (the
    // checksum covers the body only, so it still matches).
    let magic = b"couchlink cache snapshot\n".len();
    let mut older = good.clone();
    older[magic..magic + 4].copy_from_slice(&(format::FORMAT_VERSION - 1).to_le_bytes());
    std::fs::write(&path, &older).unwrap();
    let expected = format!("written in snapshot format {}", format::FORMAT_VERSION - 1);
    assert_not_used(&db, state.path(), "Frmt1", &expected).await;

    // One byte changed in a link's target.
    let mut damaged = good.clone();
    let at = damaged.windows(6).position(|w| w == b"before").expect("the target is in the file");
    damaged[at] = b'B';
    std::fs::write(&path, &damaged).unwrap();
    assert_not_used(&db, state.path(), "Frmt1", "checksum does not match").await;
}

#[tokio::test]
async fn a_snapshot_of_a_database_deleted_and_created_again_under_its_name_is_not_served() {
    let (db, state) = edited_after_a_snapshot("Frgn1").await;
    let deleted = db.admin(reqwest::Method::DELETE, "", None).await;
    assert!(deleted.status().is_success(), "{}", deleted.text().await.unwrap());
    let db = TestDb::named_on(&db.couch, &db.name).await;
    db.put_link("Frgn1", json!({"url": "https://after.example/"})).await;
    // Never the old database's target.
    assert_not_used(&db, state.path(), "Frgn1", "another database named").await;
}

/// A member may write local documents (CouchDB runs no validation for them): the old database's
/// identity written back into the new one does not make its snapshot the new one's, since
/// CouchDB 3 also says when it made the database. (pouchdb-server says nothing of when: there
/// the written-back identity is believed.)
#[tokio::test]
async fn an_old_identity_written_back_by_a_member_does_not_make_an_old_snapshot_served() {
    let (db, state) = edited_after_a_snapshot("Frgn2").await;
    if db.couch.is_pouchdb {
        return;
    }
    let old: Value = db.admin(reqwest::Method::GET, "_local/couchlink", None).await.json().await.unwrap();
    let deleted = db.admin(reqwest::Method::DELETE, "", None).await;
    assert!(deleted.status().is_success(), "{}", deleted.text().await.unwrap());
    // Time itself: CouchDB 3 says when it made a database to the second, and the new one must
    // be made in another second than the old.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let db = TestDb::named_on(&db.couch, &db.name).await;
    db.put_link("Frgn2", json!({"url": "https://after.example/"})).await;
    let current: Value = db.admin(reqwest::Method::GET, "_local/couchlink", None).await.json().await.unwrap();
    let written_back = json!({"_rev": current["_rev"], "identity": old["identity"]});
    let r = db
        .request_as(Some(crate::support::READER), reqwest::Method::PUT, "_local/couchlink", Some(&written_back))
        .await;
    assert!(r.status().is_success(), "CouchDB lets a member write it: {}", r.text().await.unwrap());
    assert_not_used(&db, state.path(), "Frgn2", "another database named").await;
}

#[tokio::test]
async fn a_sequence_couchdb_no_longer_accepts_starts_the_cache_afresh() {
    let (db, state) = edited_after_a_snapshot("Seq01").await;
    let path = state.path().join(FILE_NAME);
    let mut snapshot = format::decode(&std::fs::read(&path).unwrap()).unwrap();
    // The snapshot is sound, but its sequence is not one the server gave. CouchDB 3 answers
    // 400 "Malformed sequence supplied in 'since' parameter"; pouchdb-server takes any sequence
    // (and then sends nothing), so there it is one of the other kind, which couchlink refuses
    // before asking.
    snapshot.seq = if couch().is_pouchdb { json!("3-g1AAAAB") } else { json!("3-not-a-sequence") };
    std::fs::write(&path, format::encode(&snapshot)).unwrap();

    let mut proxy = serve_process("restart", &db, state.path(), &[]);
    proxy.wait_until_served("/Seq01", 302, Some("https://after.example/"), Duration::from_secs(5)).await;
    proxy.said_eventually("does not accept the sequence").await;
    assert_eq!(cache_origin(&proxy).await, "couchdb", "the snapshot's cache was dropped");
    proxy.terminate();
    let said = proxy.said_in_all("does not accept the sequence");
    assert_eq!(said.len(), 1, "one line says why: {said:?}");
}

#[tokio::test]
async fn a_proxy_killed_while_writing_a_snapshot_restarts_from_the_one_before() {
    let ids = crate::warm::ids(20_000);
    let db = crate::warm::holding_links(&ids).await;
    let state = tempfile::tempdir().unwrap();
    let (path, temporary) = (state.path().join(FILE_NAME), state.path().join(format!("{FILE_NAME}.tmp")));
    let every_second = [("COUCHLINK_SNAPSHOT_SECS", "1")];

    // Killed with SIGKILL the moment a snapshot's temporary file appears, until one kill lands
    // before the rename (the file is still there afterwards).
    let mut caught = false;
    for _attempt in 0..5 {
        let mut proxy = serve_process("killed", &db, state.path(), &every_second);
        // A whole snapshot first (written once the warm-up is done), then an edit it lacks.
        eventually("a whole snapshot is written", Duration::from_secs(60), || async {
            let snapshot = std::fs::read(&path).ok().and_then(|b| format::decode(&b).ok());
            holds(snapshot.as_ref().is_some_and(|s| s.complete), snapshot.map(|s| (s.complete, s.entries.len())))
        })
        .await;
        db.put_link(&ids[7], json!({"url": "https://edited-before-the-kill.example/"})).await;
        let temporary = temporary.clone();
        let in_the_middle = tokio::task::spawn_blocking(move || {
            // Spun, not paused: the kill must land within the write, which takes milliseconds.
            let deadline = Instant::now() + Duration::from_secs(5);
            while !temporary.exists() {
                assert!(Instant::now() < deadline, "no snapshot write began");
                std::hint::spin_loop();
            }
            let exit = proxy.kill_hard();
            (exit, temporary.exists())
        });
        let (exit, left_behind) = in_the_middle.await.unwrap();
        assert_eq!(std::os::unix::process::ExitStatusExt::signal(&exit), Some(9));
        if left_behind {
            caught = true;
            break;
        }
    }
    assert!(caught, "five kills all came after the rename");

    // The snapshot in place is the one before, whole; the restart serves from it and catches up.
    let previous = format::decode(&std::fs::read(&path).unwrap()).expect("the previous snapshot is whole");
    assert!(previous.entries.len() >= 20_000, "{} entries", previous.entries.len());
    let proxy = serve_process("restarted", &db, state.path(), &every_second);
    assert_eq!(cache_origin(&proxy).await, "snapshot");
    assert!(proxy.said("is not used").is_empty());
    let edited = format!("/{}", ids[7]);
    proxy
        .wait_until_served(&edited, 302, Some("https://edited-before-the-kill.example/"), Duration::from_secs(5))
        .await;
    let other = proxy.get(&format!("/{}", ids[19_999])).await.unwrap();
    assert_eq!(other.headers()["location"], format!("https://warm.example/{}", ids[19_999]).as_str());
}

#[tokio::test]
async fn a_snapshot_written_before_the_warm_up_was_done_is_followed_by_one() {
    let ids = crate::warm::ids(5000);
    let db = crate::warm::holding_links(&ids).await;
    // CouchDB slowed down (each request held 1 s): the proxy stops while still warming.
    let relay = Relay::start(&db.couch.url).await;
    relay.delay(1000);
    let state = tempfile::tempdir().unwrap();
    let path = state.path().to_owned();
    let url = relay.url();
    let mut app = spawn_app_on(db, move |c| {
        c.state_dir = Some(path);
        c.couch.url = url;
    })
    .await;
    // Stopped once the feed vouches for the cache (a snapshot is written only then), with the
    // warm-up's first page stored and its last not yet read.
    eventually("a page is stored", Duration::from_secs(20), || async {
        let entries = app.metric("couchlink_cache_entries").await;
        holds(entries > 0.0, entries)
    })
    .await;
    assert_eq!(health(&app).await["cache"], "warming");
    app.stop().await.unwrap();
    let partial = format::decode(&std::fs::read(state.path().join(FILE_NAME)).unwrap()).unwrap();
    assert!(!partial.complete && partial.entries.len() < 5000, "{} entries", partial.entries.len());

    // Restarted: served from the partial snapshot, and warmed up to every link.
    relay.delay(0);
    let app = proxy(app.db, state.path()).await;
    assert_eq!(health(&app).await["cache_source"]["origin"], "snapshot");
    wait_until_cache_is(&app, "ready", Duration::from_secs(30)).await;
    assert_eq!(app.metric("couchlink_cache_entries").await, 5000.0);
    assert_redirects_to(&app.get(&format!("/{}", ids[4999])).await, &format!("https://warm.example/{}", ids[4999]));
    assert_eq!(app.metric("couchlink_cache_misses_total").await, 0.0);
}
