//! The `_changes` feed as couchlink reads it, against the real server.

use std::time::Duration;

use couchlink::couch::{CouchError, FeedEvent};
use serde_json::json;

use crate::helpers::*;

#[tokio::test]
async fn heartbeats_keep_an_idle_feed_alive_and_changes_come_through() {
    let db = TestDb::new().await;
    let reader = db.client_as(Some(READER));
    let since = reader.current_seq().await.unwrap();
    let mut feed = reader.changes(&since, Duration::from_millis(200)).await.unwrap();
    let writer = tokio::spawn(async move {
        // Longer than the idle limit below: only heartbeats fill the silence.
        tokio::time::sleep(Duration::from_millis(2500)).await;
        db.put_link("Beat1", json!({"url": "https://beat.example/"})).await;
    });
    match feed.next(Duration::from_secs(1)).await {
        Ok(Some(FeedEvent::Change { id, doc, .. })) => {
            assert_eq!(id, "Beat1");
            assert_eq!(doc.unwrap()["url"], "https://beat.example/");
        }
        other => panic!("expected the change after an idle stretch, got {other:?}"),
    }
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
    assert!(matches!(feed.next(Duration::from_millis(500)).await, Err(CouchError::Stalled(_))));
}
