//! Freshness and availability: edits served within a second, known links served through a
//! CouchDB outage, and a clean stop under load. CouchDB outages are made with a TCP relay (`Relay`) so that the
//! real server keeps its data while couchlink cannot reach it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::*;

const FRESH: Duration = Duration::from_secs(1);

#[tokio::test]
async fn edits_deactivations_deletions_and_new_links_are_served_without_restart() {
    let app = spawn_app().await;
    app.db.put_link("Edit1", json!({"url": "https://before.example/"})).await;
    app.db.put_link("Dele1", json!({"url": "https://deleted.example/"})).await;
    // Cache all three states, the missing one included.
    assert_redirects_to(&app.get("/Edit1").await, "https://before.example/");
    assert_redirects_to(&app.get("/Dele1").await, "https://deleted.example/");
    assert_eq!(app.get("/Newl1").await.status(), 404);
    assert_redirects_to(&app.get("/Edit1").await, "https://before.example/");
    assert!(app.metric("couchlink_cache_hits_total").await >= 1.0, "served from memory");

    app.db.put_link("Edit1", json!({"url": "https://after.example/"})).await;
    let took = app.wait_until_served("/Edit1", 302, Some("https://after.example/")).await;
    assert!(took < FRESH, "edit served after {took:?}");

    app.db.put_link("Edit1", json!({"url": "https://after.example/", "inactive": true})).await;
    let took = app.wait_until_served("/Edit1", 404, None).await;
    assert!(took < FRESH, "deactivation served after {took:?}");

    app.db.delete_link("Dele1").await;
    let took = app.wait_until_served("/Dele1", 404, None).await;
    assert!(took < FRESH, "deletion served after {took:?}");

    app.db.put_link("Newl1", json!({"url": "https://new.example/"})).await;
    let took = app.wait_until_served("/Newl1", 302, Some("https://new.example/")).await;
    assert!(took < FRESH, "new link served after {took:?}");
}

#[tokio::test]
async fn concurrent_misses_for_one_id_make_one_couchdb_request() {
    let relay = Relay::start(&couch().url).await;
    // No warm start: the link must be unknown to the proxy when the requests come.
    let app = spawn_app_with(AppOptions::with({
        let url = relay.url();
        move |c| {
            c.couch.url = url;
            c.warm_start = false;
        }
    }))
    .await;
    app.db.put_link("Coal1", json!({"url": "https://once.example/"})).await;
    app.wait_until_feed_is_live().await;
    let before = app.metric("couchlink_couchdb_request_duration_seconds_count").await;

    // Every request reaches couchlink while the first CouchDB read is still held in the relay.
    relay.delay(300);
    let mut tasks = Vec::new();
    for _ in 0..50 {
        let (client, url) = (app.http.clone(), format!("{}/Coal1", app.base));
        tasks.push(tokio::spawn(async move { client.get(url).send().await.unwrap() }));
    }
    for task in tasks {
        assert_redirects_to(&task.await.unwrap(), "https://once.example/");
    }
    relay.delay(0);
    let after = app.metric("couchlink_couchdb_request_duration_seconds_count").await;
    assert_eq!(after - before, 1.0, "50 concurrent misses, one CouchDB request");
    assert_eq!(app.metric("couchlink_cache_misses_total").await, 1.0);
}

#[tokio::test]
async fn an_outage_serves_known_links_503s_unknown_ones_and_catches_up_after() {
    let relay = Relay::start(&couch().url).await;
    let app = spawn_app_with(AppOptions::with({
        let url = relay.url();
        move |c| {
            c.couch.url = url;
        }
    }))
    .await;
    app.db.put_link("Known", json!({"url": "https://known.example/"})).await;
    app.wait_until_feed_is_live().await;
    assert_redirects_to(&app.get("/Known").await, "https://known.example/");
    assert_eq!(app.admin_get("/healthz").await.status(), 200);

    relay.cut();
    assert_redirects_to(&app.get("/Known").await, "https://known.example/");
    let unknown = app.get("/Unkno").await;
    assert_eq!(unknown.status(), 503, "never a 404 for a link CouchDB could not be asked about");
    assert_eq!(unknown.headers()["retry-after"], "5");
    let health = app.admin_get("/healthz").await;
    assert_eq!(health.status(), 503);
    let health: Value = health.json().await.unwrap();
    assert_eq!(health["feed"]["state"], "down", "{health}");

    // Edited in CouchDB while couchlink cannot see it: even after the feed tried again, the
    // old target is served.
    app.db.put_link("Known", json!({"url": "https://edited-meanwhile.example/"})).await;
    app.db.put_link("Unkno", json!({"url": "https://created-meanwhile.example/"})).await;
    let attempts = app.metric("couchlink_feed_reconnects_total").await;
    app.wait_for_metric("couchlink_feed_reconnects_total", attempts + 1.0).await;
    assert_redirects_to(&app.get("/Known").await, "https://known.example/");

    relay.restore();
    let took = app.wait_until_served("/Known", 302, Some("https://edited-meanwhile.example/")).await;
    assert!(took < FRESH, "caught up {took:?} after CouchDB came back");
    assert_redirects_to(&app.get("/Unkno").await, "https://created-meanwhile.example/");
    assert!(app.metric("couchlink_feed_reconnects_total").await >= 1.0);
    assert_eq!(app.admin_get("/healthz").await.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_under_load_fails_no_request_and_logs_every_response() {
    // Three serving threads: the shutdown must reach every one of them.
    let mut app = spawn_app_with(AppOptions::with(move |c| {
        c.workers = 3;
    }))
    .await;
    app.db.put_link("Load1", json!({"url": "https://load.example/"})).await;
    let answered = Arc::new(AtomicUsize::new(0));
    let mut clients = Vec::new();
    for _ in 0..8 {
        let (client, url, answered) = (app.http.clone(), format!("{}/Load1", app.base), answered.clone());
        clients.push(tokio::spawn(async move {
            loop {
                match client.get(&url).send().await {
                    Ok(r) => {
                        assert_redirects_to(&r, "https://load.example/");
                        answered.fetch_add(1, Ordering::Relaxed);
                    }
                    // After the stop, new connections are refused: that is the only failure allowed.
                    Err(e) if e.is_connect() => return,
                    Err(e) => panic!("a request failed during shutdown: {e:?}"),
                }
            }
        }));
    }
    eventually("300 requests answered under load", Duration::from_secs(30), || async {
        let n = answered.load(Ordering::Relaxed);
        holds(n >= 300, n)
    })
    .await;
    app.stop().await.unwrap();
    for client in clients {
        client.await.expect("no client saw a failed request");
    }
    let lines = app.log_lines();
    assert_eq!(lines.len(), answered.load(Ordering::Relaxed), "one log line per response");
}

#[tokio::test]
async fn health_and_metrics_report_on_the_admin_listener_only() {
    let app = spawn_app().await;
    app.wait_until_feed_is_live().await;
    app.get("/Nopee").await;
    let health: Value = app.admin_get("/healthz").await.json().await.unwrap();
    assert_eq!(health["status"], "ok", "{health}");
    assert_eq!(health["feed"]["state"], "live");
    assert_eq!(health["cache_entries"], 1, "the negative entry for Nopee");
    assert_eq!(app.metric("couchlink_responses_total{status=\"404\"}").await, 1.0);
    assert_eq!(app.get("/healthz").await.status(), 404, "not on the public listener");
    assert_eq!(app.get("/metrics").await.status(), 404);
}

#[tokio::test]
async fn the_cache_stays_within_its_capacity() {
    let app = spawn_app_with(AppOptions::with(move |c| {
        c.cache_capacity = 3;
    }))
    .await;
    app.wait_until_feed_is_live().await;
    app.db.put_link("Kept1", json!({"url": "https://kept.example/"})).await;
    for i in 0..10 {
        assert_eq!(app.get(&format!("/Miss{i}")).await.status(), 404);
    }
    assert_redirects_to(&app.get("/Kept1").await, "https://kept.example/");
    assert_eq!(app.metric("couchlink_cache_entries").await, 3.0);
    // The oldest entries went first; a link evicted and asked again is simply read again.
    assert_eq!(app.get("/Miss0").await.status(), 404);
    assert_redirects_to(&app.get("/Kept1").await, "https://kept.example/");
}

/// A flood of random unknown IDs (or a restart under load) cannot push CouchDB past
/// `COUCHLINK_COLD_READS` reads at once: the rest wait briefly, then get 503 with `Retry-After`,
/// never a 404 they have not earned.
#[tokio::test]
async fn a_burst_of_unknown_ids_asks_couchdb_at_most_the_cold_read_limit_at_once() {
    let relay = Relay::start(&couch().url).await;
    let app = spawn_app_with(AppOptions::with({
        let url = relay.url();
        move |c| {
            c.couch.url = url;
            c.cold_reads = 4;
        }
    }))
    .await;
    app.wait_until_feed_is_live().await;
    // Each CouchDB read now takes at least 100 ms, so the burst's reads overlap.
    relay.delay(100);
    relay.reset_max_open();
    let open_before = relay.open();
    let ids: Vec<String> = (0..200).map(|i| format!("Bu{i:03}")).collect();
    let tasks: Vec<_> = ids
        .iter()
        .map(|id| {
            let (client, url) = (app.http.clone(), format!("{}/{id}", app.base));
            tokio::spawn(async move { client.get(url).send().await.expect("answered") })
        })
        .collect();
    let mut responses = Vec::new();
    for task in tasks {
        responses.push(task.await.unwrap());
    }
    let (mut not_found, mut busy) = (0, 0);
    for r in &responses {
        match r.status().as_u16() {
            404 => not_found += 1,
            503 => {
                assert_eq!(r.headers()["retry-after"], "5");
                busy += 1;
            }
            other => panic!("a burst of unknown IDs got {other}"),
        }
    }
    // Pooled connections are reused first; at most 4 more were needed at once.
    let extra = relay.max_open() - open_before;
    assert!(extra <= 4, "{extra} connections to CouchDB at once past the {open_before} already open");
    assert!(not_found > 0 && busy > 0, "{not_found} answered 404, {busy} answered 503");
    assert_eq!(app.metric("couchlink_cold_reads_refused_total").await, busy as f64);
    // Once the burst is over, unknown IDs are read again.
    relay.delay(0);
    assert_eq!(app.get("/Bu199").await.status(), 404);
}
