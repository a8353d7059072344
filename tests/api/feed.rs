//! The `_changes` feed as couchlink reads it, against the real server.

use std::sync::Arc;
use std::time::Duration;

use couchlink::couch::{CouchError, FeedEvent};
use couchlink::domain::LinkId;
use couchlink::follower::{FeedStatus, Follower, Step};
use couchlink::metrics::{Gauges, Metrics};
use couchlink::store::LinkStore;
use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn heartbeats_keep_an_idle_feed_alive_and_changes_come_through() {
    let db = TestDb::new().await;
    let reader = db.client_as(Some(READER));
    let since = reader.current_seq().await.unwrap();
    let mut feed = reader.changes(&since, Duration::from_millis(200)).await.unwrap();
    // The change is written once five heartbeats have kept the idle feed open: the test waits
    // for events, not for time (a loaded machine delays both). The idle limit is generous for
    // the same reason; a feed without heartbeats would still fail it.
    let (beats, enough) = tokio::sync::oneshot::channel::<()>();
    let writer = tokio::spawn(async move {
        enough.await.expect("the reader counts five heartbeats");
        db.put_link("Beat1", json!({"url": "https://beat.example/"})).await;
    });
    let mut beats = Some(beats);
    let mut heartbeats = 0;
    loop {
        match feed.next(Duration::from_secs(30)).await {
            Ok(Some(FeedEvent::Idle)) => {
                heartbeats += 1;
                if heartbeats == 5 {
                    let _ = beats.take().expect("sent once").send(());
                }
            }
            Ok(Some(FeedEvent::Change { id, doc, .. })) => {
                assert_eq!(id, "Beat1");
                assert_eq!(doc.unwrap()["url"], "https://beat.example/");
                break;
            }
            other => panic!("expected heartbeats, then the change, got {other:?}"),
        }
    }
    assert!(heartbeats >= 5, "the change came after {heartbeats} heartbeats");
    writer.await.unwrap();
}

#[tokio::test]
async fn a_silent_feed_is_reported_as_stalled() {
    let db = TestDb::new().await;
    let reader = db.client_as(Some(READER));
    let since = reader.current_seq().await.unwrap();
    // A heartbeat far longer than the idle limit: nothing arrives in time. (pouchdb-server
    // sends the headers only with the first heartbeat, so opening takes 3 s there; CouchDB 3
    // answers at once.)
    let mut feed = reader.changes(&since, Duration::from_secs(3)).await.unwrap();
    // pouchdb-server's first heartbeat came with the headers: it is read first.
    let mut next = feed.next(Duration::from_millis(500)).await;
    if matches!(next, Ok(Some(FeedEvent::Idle))) {
        next = feed.next(Duration::from_millis(500)).await;
    }
    assert!(matches!(next, Err(CouchError::Stalled(_))), "{next:?}");
}

#[tokio::test]
async fn each_follower_step_applies_one_change_to_the_cache() {
    let db = TestDb::new().await;
    let reader = db.client_as(Some(READER));
    let metrics = Arc::new(Metrics::default());
    let store = Arc::new(LinkStore::new(reader.clone(), metrics.clone(), 100, 8));
    let status = Arc::new(FeedStatus::default());
    let mut follower = Follower::new(reader, store.clone(), metrics.clone(), status.clone());
    assert_eq!(follower.step().await.unwrap(), Step::Connected);
    assert!(status.is_live());

    db.put_link("Step1", json!({"url": "https://one.example/"})).await;
    let id = LinkId::parse("Step1").unwrap();
    let link = store.get(id).await.unwrap().expect("read from CouchDB");
    assert_eq!(&*link.url, "https://one.example/");
    // The creation comes through the feed too (the cache already agrees).
    assert_eq!(follower.step().await.unwrap(), Step::Applied { id: "Step1".into() });

    db.put_link("Step1", json!({"url": "https://two.example/"})).await;
    db.put_link("Othr1", json!({"url": "https://other.example/"})).await;
    assert_eq!(follower.step().await.unwrap(), Step::Applied { id: "Step1".into() });
    let link = store.get(id).await.unwrap().expect("still cached");
    assert_eq!(&*link.url, "https://two.example/", "the edit is in the cache after one step");
    assert_eq!(follower.step().await.unwrap(), Step::Applied { id: "Othr1".into() });

    let gauges = Gauges { cache_entries: store.len(), feed_up: true, ..Gauges::default() };
    let text = metrics.render(&gauges);
    assert!(text.contains("couchlink_cache_misses_total 1\n"), "one CouchDB read in all: {text}");
    assert!(text.contains("couchlink_feed_changes_total 3\n"), "{text}");
    assert_eq!(store.len(), 1, "a change to a link nobody asked for is not cached");
}
