//! Resolution through the proxy (the shortlink resolution draft): extra paths, queries, aliases,
//! expiry, safe targets.

use std::time::Duration;

use serde_json::json;
use time::format_description::well_known::Rfc3339;

use crate::support::*;

#[tokio::test]
async fn the_remaining_path_is_appended_with_one_slash() {
    let app = spawn_app().await;
    app.db.put_link("H83if", json!({"url": "https://example.com/wp/"})).await;
    app.db.put_link("Gthub", json!({"url": "https://github.com"})).await;
    assert_redirects_to(&app.get("/H83if/spring").await, "https://example.com/wp/spring");
    assert_redirects_to(&app.get("/H83if/").await, "https://example.com/wp/");
    assert_redirects_to(&app.get("/Gthub/ietf/guidelines").await, "https://github.com/ietf/guidelines");
    let response = app.get("/H83if/a/b").await;
    assert_eq!(response.headers()["link"], format!("<{}/H83if>; rel=\"shortlink\"", app.base));
}

#[tokio::test]
async fn queries_merge_and_the_request_wins() {
    let app = spawn_app().await;
    app.db.put_link("Query", json!({"url": "https://t.example/p?a=1&b=2"})).await;
    assert_redirects_to(&app.get("/Query?b=9&c=3").await, "https://t.example/p?a=1&b=9&c=3");
    assert_redirects_to(&app.get("/Query").await, "https://t.example/p?a=1&b=2");
}

#[tokio::test]
async fn alias_chains_resolve_and_loops_do_not() {
    let app = spawn_app().await;
    app.db.put_link("H83if", json!({"url": "https://example.com/wp/"})).await;
    app.db.put_link("Alias", json!({"url": "/H83if/extra?utm=alias"})).await;
    app.db.put_link("Alia2", json!({"url": "/Alias"})).await;
    app.db.put_link("Loopa", json!({"url": "/Loopb"})).await;
    app.db.put_link("Loopb", json!({"url": "/Loopa"})).await;
    app.db.put_link("Dangl", json!({"url": "/Nopee/x"})).await;
    assert_redirects_to(&app.get("/Alias/more").await, "https://example.com/wp/extra/more?utm=alias");
    assert_redirects_to(&app.get("/Alia2?utm=req").await, "https://example.com/wp/extra?utm=req");
    assert_eq!(app.get("/Loopa").await.status(), 404);
    assert_eq!(app.get("/Dangl").await.status(), 404, "an alias to nothing ends without a destination");
}

#[tokio::test]
async fn expired_and_inactive_links_on_the_way_are_unknown() {
    let app = spawn_app().await;
    app.db.put_link("Old01", json!({"url": "https://old.example/", "expires": "2001-01-01T00:00:00Z"})).await;
    app.db.put_link("Off01", json!({"url": "https://off.example/", "inactive": true})).await;
    app.db.put_link("ToOld", json!({"url": "/Old01"})).await;
    app.db.put_link("ToOff", json!({"url": "/Off01"})).await;
    for path in ["/Old01", "/Off01", "/ToOld", "/ToOff", "/Old01/x"] {
        assert_eq!(app.get(path).await.status(), 404, "{path}");
    }
}

#[tokio::test]
async fn expiry_is_checked_at_request_time() {
    let app = spawn_app().await;
    let expires = (time::OffsetDateTime::now_utc() + Duration::from_millis(1500)).format(&Rfc3339).unwrap();
    app.db.put_link("Soon1", json!({"url": "https://soon.example/", "expires": expires})).await;
    assert_redirects_to(&app.get("/Soon1").await, "https://soon.example/");
    // Time itself is what is tested: the proxy sees it pass with nothing else happening.
    tokio::time::sleep(Duration::from_millis(2000)).await;
    assert_eq!(app.get("/Soon1").await.status(), 404, "no edit happened: the proxy itself saw the time pass");
}

#[tokio::test]
async fn climbing_out_of_the_target_path_is_refused() {
    let app = spawn_app().await;
    app.db.put_link("H83if", json!({"url": "https://example.com/wp/"})).await;
    for target in [
        "/H83if/../admin",
        "/H83if/%2e%2e/admin",
        "/H83if/%2E%2e",
        "/H83if/a%2fb",
        "/H83if/a%5c..",
        "/H83if/./x",
        "/H83if/..;/admin",
        "/H83if/%C0%AE%C0%AE/admin",
        "/H83if/%252e%252e/admin",
    ] {
        let response =
            app.raw(format!("GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes()).await;
        assert!(response.starts_with("HTTP/1.1 404"), "{target}: {response}");
    }
    assert_redirects_to(&app.get("/H83if/a..b/...").await, "https://example.com/wp/a..b/...");
}

#[tokio::test]
async fn non_ascii_is_stored_percent_encoded_and_appended_paths_are_encoded_as_utf8() {
    let app = spawn_app().await;
    // Stored as sent (the validation refuses the unencoded form); a request's own non-ASCII
    // path is encoded on the way.
    app.db.put_link("Utf8x", json!({"url": "https://xn--bcher-kva.example/caf%C3%A9?q=s%C3%BC%C3%9F"})).await;
    assert_redirects_to(&app.get("/Utf8x").await, "https://xn--bcher-kva.example/caf%C3%A9?q=s%C3%BC%C3%9F");
    let response = app.raw("GET /Utf8x/ü HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".as_bytes()).await;
    assert!(
        response.contains("\r\nlocation: https://xn--bcher-kva.example/caf%C3%A9/%C3%BC?q=s%C3%BC%C3%9F\r\n"),
        "{response}"
    );
}
