//! Documents the validation function would have refused, written by an admin or before it
//! existed: never trusted, never a reason to keep asking CouchDB.

use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn documents_of_the_wrong_types_are_404_cached_until_edited_and_counted() {
    let app = spawn_app_with(AppOptions { bare_db: true, ..AppOptions::default() }).await;
    app.wait_until_feed_is_live().await;
    // Written after the warm-up, so that each is first read by a request.
    let docs = [
        ("Num42", json!({"url": 42})),
        ("InNo1", json!({"url": "https://example.com/", "inactive": "no"})),
        ("OobYs", json!({"url": "https://example.com/", "oob": "yes"})),
        ("ExpNm", json!({"url": "https://example.com/", "expires": 1_700_000_000})),
    ];
    for (id, doc) in &docs {
        app.db.put_link(id, doc.clone()).await;
    }
    for (id, _) in &docs {
        assert_eq!(app.get(&format!("/{id}")).await.status(), 404, "{id}: an unusable document is no outage");
    }
    assert!(app.metric("couchlink_unusable_documents_total").await >= docs.len() as f64);
    // Known as unusable: asked again, CouchDB is not.
    let misses = app.metric("couchlink_cache_misses_total").await;
    for (id, _) in &docs {
        assert_eq!(app.get(&format!("/{id}")).await.status(), 404, "{id}");
    }
    assert_eq!(app.metric("couchlink_cache_misses_total").await, misses, "unusable documents were read again");
    // Its next revision is read as any edit is.
    app.db.put_link("Num42", json!({"url": "https://example.com/fixed"})).await;
    app.wait_until_served("/Num42", 302, Some("https://example.com/fixed")).await;
}
