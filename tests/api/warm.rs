//! Warm start: a restarted proxy fills its cache from CouchDB in pages while it serves, so the
//! links people ask for next cost CouchDB nothing. (The scale figures, a million links on
//! CouchDB 3.5, are the benchmark's; a test loads 200,000.)

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::*;

/// `n` link IDs: `W` and `i` in four base-62 digits, `W0000`, `W0001`, ...
pub fn ids(n: usize) -> Vec<String> {
    const DIGITS: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    (0..n)
        .map(|i| {
            let digit = |k: u32| DIGITS[i / 62usize.pow(k) % 62] as char;
            ['W', digit(3), digit(2), digit(1), digit(0)].iter().collect()
        })
        .collect()
}

/// Stores `ids` with `_bulk_docs`, 5,000 a request and two requests at a time (CouchDB runs
/// its validation function on each document: one request at a time leaves a core idle), each
/// pointing at `https://warm.example/{id}`.
/// A database on the heavy server holding a link `https://warm.example/ID` for each of `ids`
/// (stored before setup: [`TestDb::heavy_holding`]).
pub async fn holding_links(ids: &[String]) -> TestDb {
    TestDb::heavy_holding(|db| async move { bulk_links(&db, ids).await }).await
}

pub async fn bulk_links(db: &TestDb, ids: &[String]) {
    for pair in ids.chunks(10_000) {
        let (a, b) = pair.split_at(pair.len().min(5_000));
        tokio::join!(bulk_request(db, a), bulk_request(db, b));
    }
}

async fn bulk_request(db: &TestDb, ids: &[String]) {
    if ids.is_empty() {
        return;
    }
    let docs: Vec<Value> = ids
        .iter()
        .map(|id| json!({"_id": id, "url": format!("https://warm.example/{id}"), "inactive": false}))
        .collect();
    let r = db.admin(reqwest::Method::POST, "_bulk_docs", Some(&json!({ "docs": docs }))).await;
    assert!(r.status().is_success(), "{}", r.text().await.unwrap());
    // `_bulk_docs` answers 201 even when some documents failed: each must say ok.
    let results: Vec<Value> = r.json().await.unwrap();
    let failed = results.iter().find(|r| r["ok"] != true);
    assert!(failed.is_none(), "not stored: {failed:?}");
}

/// Waits (at most `limit`) until `/healthz` says the cache is warm.
async fn wait_until_warm(app: &TestApp, limit: Duration) {
    eventually("the cache is warm and the feed live", limit, || async {
        let health: Value = app.admin_get("/healthz").await.json().await.unwrap();
        holds(health["cache"] == "ready" && health["feed"]["state"] == "live", health)
    })
    .await;
}

#[tokio::test]
async fn links_are_cached_before_anyone_asks_and_then_cost_couchdb_nothing() {
    let ids = ids(200_000);
    let started = Instant::now();
    let db = holding_links(&ids).await;
    eprintln!("200,000 links stored in {:.1} s", started.elapsed().as_secs_f64());
    let loaded = Instant::now();
    let app = spawn_app_on(db, |c| c.cache_capacity = 250_000).await;
    wait_until_warm(&app, Duration::from_secs(300)).await;
    eprintln!("200,000 links warm in {:.1} s", loaded.elapsed().as_secs_f64());
    // Every link in memory, and not one request made for it.
    assert_eq!(app.metric("couchlink_cache_entries").await, 200_000.0);
    let misses = app.metric("couchlink_cache_misses_total").await;
    assert_eq!(misses, 0.0);
    // 2000 requests for random links: every one a redirect, none a CouchDB read.
    for i in 0..2000 {
        let id = &ids[(i * 7919) % ids.len()];
        assert_redirects_to(&app.get(&format!("/{id}")).await, &format!("https://warm.example/{id}"));
    }
    assert_eq!(app.metric("couchlink_cache_misses_total").await, misses, "a request went to CouchDB");
}

#[tokio::test]
async fn edits_made_while_warming_are_served() {
    let ids = ids(5000);
    let db = holding_links(&ids).await;
    // CouchDB slowed down (each request held 300 ms) so that the warm-up (three pages) takes
    // a while.
    let relay = Relay::start(&db.couch.url).await;
    relay.delay(300);
    let app = spawn_app_on(db, |c| c.couch.url = relay.url()).await;
    eventually("the cache is seen warming", Duration::from_secs(10), || async {
        let health: Value = app.admin_get("/healthz").await.json().await.unwrap();
        holds(health["cache"] == "warming", health)
    })
    .await;
    // One link in the first page (likely read already), one in the last (not yet).
    let (first, last) = (&ids[1], &ids[4999]);
    app.db.put_link(first, json!({"url": "https://edited.example/first", "inactive": false})).await;
    app.db.put_link(last, json!({"url": "https://edited.example/last", "inactive": false})).await;
    relay.delay(0);
    wait_until_warm(&app, Duration::from_secs(30)).await;
    app.wait_until_served(&format!("/{first}"), 302, Some("https://edited.example/first")).await;
    app.wait_until_served(&format!("/{last}"), 302, Some("https://edited.example/last")).await;
    // And without any lag: both are served from memory.
    let misses = app.metric("couchlink_cache_misses_total").await;
    assert_redirects_to(&app.get(&format!("/{last}")).await, "https://edited.example/last");
    assert_eq!(app.metric("couchlink_cache_misses_total").await, misses);
}

#[tokio::test]
async fn warming_stops_at_the_cache_capacity() {
    let db = holding_links(&ids(5000)).await;
    let app = spawn_app_on(db, |c| c.cache_capacity = 1000).await;
    wait_until_warm(&app, Duration::from_secs(30)).await;
    let entries = app.metric("couchlink_cache_entries").await;
    assert!((1.0..=1000.0).contains(&entries), "{entries} entries for a capacity of 1000");
}
