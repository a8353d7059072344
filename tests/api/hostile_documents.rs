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

/// The cases the proxy's rule is tested with (src/domain/target.rs), each written through
/// CouchDB's validation function: the two agree on every one.
#[tokio::test]
async fn the_validation_function_and_the_proxy_agree_on_every_target() {
    let db = TestDb::new().await;
    let cases: Vec<serde_json::Value> =
        serde_json::from_str(include_str!("../target_cases.json")).expect("tests/target_cases.json is JSON");
    let editor = db.client_as(Some(EDITOR));
    let mut disagreements = Vec::new();
    for (n, case) in cases.iter().enumerate() {
        let url = case["url"].as_str().unwrap();
        let id = format!("T{n:04}");
        let stored = editor.create_doc_raw(&id, &json!({"url": url})).await;
        let proxy = if url.starts_with('/') {
            couchlink::domain::check_internal(url).is_ok()
        } else {
            couchlink::domain::canonical_location(url).is_ok()
        };
        if stored.is_ok() != proxy || proxy != case["ok"].as_bool().unwrap() {
            disagreements.push(format!("{url:?}: CouchDB {:?}, proxy {proxy}", stored.err().map(|e| e.to_string())));
        }
    }
    assert!(disagreements.is_empty(), "{disagreements:#?}");
}

#[tokio::test]
async fn a_stored_target_not_in_canonical_form_is_a_404_counted() {
    let app = spawn_app_with(AppOptions { bare_db: true, ..AppOptions::default() }).await;
    let docs = [
        ("Tab01", "http://evil.com\tx/"),
        ("Zws01", "https://exa\u{200b}mple.com/"),
        ("Opq01", "https:evil.com"),
        ("Pct01", "http://%65vil.com/"),
        ("Bsl01", "http://evil.com\\@example.com/"),
        ("Spc01", "https://example.com/a b"),
    ];
    for (id, url) in docs {
        app.db.put_link(id, json!({"url": url})).await;
    }
    app.db.put_link("Good1", json!({"url": "https://example.com"})).await;
    for (id, url) in docs {
        assert_eq!(app.get(&format!("/{id}")).await.status(), 404, "{url:?} was served");
    }
    assert!(app.metric("couchlink_unusable_documents_total").await >= docs.len() as f64);
    assert_redirects_to(&app.get("/Good1").await, "https://example.com/");
}

/// The contract's 404 row: such a link still exists, so its `fallback` (or the server's) is
/// served instead, as for an inactive one; the stored `url` itself never is, not even with
/// extra path.
#[tokio::test]
async fn a_stored_target_not_in_canonical_form_sends_people_to_the_fallback() {
    let server_fallback = "https://example.com/gone";
    let app = spawn_app_with(AppOptions {
        bare_db: true,
        configure: Some(Box::new(move |c| c.fallback_url = Some(server_fallback.into()))),
    })
    .await;
    app.db.put_link("Own01", json!({"url": "https:evil.com", "fallback": "https://example.com/ended"})).await;
    app.db.put_link("Srv01", json!({"url": "https://example.com/a b"})).await;
    app.db.put_link("Int01", json!({"url": "http://evil.com\\@example.com/", "fallback": "/Good1"})).await;
    app.db.put_link("Good1", json!({"url": "https://example.com/good"})).await;
    assert_redirects_to(&app.get("/Own01").await, "https://example.com/ended");
    assert_redirects_to(&app.get("/Own01/more?x=1").await, "https://example.com/ended/more?x=1");
    assert_redirects_to(&app.get("/Srv01").await, server_fallback);
    assert_redirects_to(&app.get("/Int01").await, "https://example.com/good");
    assert!(app.metric("couchlink_unusable_documents_total").await >= 3.0);
}
