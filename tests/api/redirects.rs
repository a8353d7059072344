//! Responses: what each request gets.

use reqwest::Method;
use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn live_link_redirects_with_the_contract_headers() {
    let app = spawn_app().await;
    app.db.put_link("H83if", json!({"url": "https://example.com/wp/?p=14", "inactive": false})).await;

    let response = app.get("/H83if").await;
    assert_redirects_to(&response, "https://example.com/wp/?p=14");
    assert_eq!(response.headers()["link"], format!("<{}/H83if>; rel=\"shortlink\"", app.base));
    assert_eq!(response.headers()["content-type"], "text/html; charset=utf-8");
    let body = response.text().await.unwrap();
    assert!(body.contains("<a href=\"https://example.com/wp/?p=14\">"), "{body}");
}

#[tokio::test]
async fn shortlink_header_and_cookie_come_from_the_normalised_public_url() {
    for (public_url, expected) in [("https://0x1f.ie/", "https://0x1f.ie"), ("HTTPS://0x1F.IE", "https://0x1f.ie")] {
        let app = spawn_app_with(AppOptions::with(move |c| {
            c.public_url = Some(couchlink::domain::PublicUrl::parse(public_url).unwrap());
        }))
        .await;
        app.db.put_link("H83if", json!({"url": "https://example.com/"})).await;
        let response = app.get("/H83if").await;
        assert_eq!(response.headers()["link"], format!("<{expected}/H83if>; rel=\"shortlink\""), "{public_url}");
        let cookie = response.headers()["set-cookie"].to_str().unwrap();
        assert!(cookie.ends_with("; Secure"), "{public_url}: {cookie}");
    }
}

#[tokio::test]
async fn head_gets_the_same_status_and_headers_without_a_body() {
    let app = spawn_app().await;
    app.db.put_link("H83if", json!({"url": "https://example.com/wp/?p=14"})).await;

    let get = app.get("/H83if").await;
    let head = app.request(Method::HEAD, "/H83if").await;
    assert_eq!(head.status(), 302);
    for name in ["location", "cache-control", "link", "content-type", "content-length"] {
        assert_eq!(head.headers()[name], get.headers()[name], "{name}");
    }
    assert!(head.headers().contains_key("set-cookie"));
    assert_eq!(head.bytes().await.unwrap().len(), 0);

    let head_missing = app.request(Method::HEAD, "/Nopee").await;
    assert_eq!(head_missing.status(), 404);
}

#[tokio::test]
async fn other_methods_get_501_with_allow() {
    let app = spawn_app().await;
    app.db.put_link("H83if", json!({"url": "https://example.com/"})).await;
    for method in [
        Method::POST,
        Method::PUT,
        Method::DELETE,
        Method::PATCH,
        Method::OPTIONS,
        Method::from_bytes(b"BREW").unwrap(),
    ] {
        let response = app.request(method.clone(), "/H83if").await;
        assert_eq!(response.status(), 501, "{method}");
        assert_eq!(response.headers()["allow"], "GET, HEAD", "{method}");
        assert!(response.headers().contains_key("set-cookie"), "{method}");
    }
}

#[tokio::test]
async fn every_kind_of_unknown_link_gets_the_same_404() {
    // Without validation, so the database can hold documents CouchDB would refuse today.
    let app = spawn_app_with(AppOptions { bare_db: true, ..Default::default() }).await;
    app.db.put_link("Inact", json!({"url": "https://example.com/", "inactive": true})).await;
    app.db.put_link("Expir", json!({"url": "https://example.com/", "expires": "2020-01-01T00:00:00Z"})).await;
    app.db.put_link("Jscri", json!({"url": "javascript:alert(1)"})).await;
    app.db.put_link("NoUrl", json!({"title": "no url"})).await;
    app.db.put_link("Later", json!({"url": "https://example.com/", "expires": "2999-01-01T00:00:00Z"})).await;

    let reference = app.get("/Nopee").await;
    assert_eq!(reference.status(), 404);
    let reference_body = reference.text().await.unwrap();
    for path in [
        "/Inact",
        "/Expir",
        "/Jscri",
        "/NoUrl",
        "/",
        "/H83i",
        "/H83ifx",
        "/H8-if",
        "/_all_docs",
        "/%48%38%33%69%66",
        "/h83IF",
    ] {
        let response = app.get(path).await;
        assert_eq!(response.status(), 404, "{path}");
        assert!(response.headers().get("location").is_none(), "{path}");
        assert_eq!(response.text().await.unwrap(), reference_body, "{path}");
    }
    assert_redirects_to(&app.get("/Later").await, "https://example.com/");
}

#[tokio::test]
async fn ids_are_case_sensitive() {
    let app = spawn_app().await;
    app.db.put_link("AbCdE", json!({"url": "https://upper.example/"})).await;
    app.db.put_link("abcde", json!({"url": "https://lower.example/"})).await;
    assert_redirects_to(&app.get("/AbCdE").await, "https://upper.example/");
    assert_redirects_to(&app.get("/abcde").await, "https://lower.example/");
    assert_eq!(app.get("/ABCDE").await.status(), 404);
}
