//! A link that does not work (inactive, expired, or before its `valid_from`) sends people to its
//! `fallback`, or the server's (`COUCHLINK_FALLBACK_URL`), instead of a 404; CouchDB's
//! validation function refuses a bad `fallback` or `valid_from` with a reason naming the field.

use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};
use time::format_description::well_known::Rfc3339;

use crate::support::*;

const ENDED: &str = "https://example.com/campaign-ended";

#[tokio::test]
async fn a_link_that_does_not_work_sends_people_to_its_fallback() {
    let app = spawn_app().await;
    let db = &app.db;
    db.put_link("Off01", json!({"url": "https://a.example/", "inactive": true, "fallback": ENDED})).await;
    db.put_link("Ended", json!({"url": "https://a.example/", "expires": "2020-01-01T00:00:00Z", "fallback": ENDED}))
        .await;
    db.put_link("Later", json!({"url": "https://a.example/", "valid_from": "2099-01-01T00:00:00Z", "fallback": ENDED}))
        .await;
    db.put_link("Soon1", json!({"url": "https://a.example/", "valid_from": "2099-01-01T00:00:00Z"})).await;
    db.put_link("Live1", json!({"url": ENDED})).await;
    db.put_link("Inner", json!({"url": "https://a.example/", "inactive": true, "fallback": "/Live1"})).await;
    for id in ["Off01", "Ended", "Later", "Inner"] {
        assert_redirects_to(&app.get(&format!("/{id}")).await, ENDED);
    }
    // Without a fallback, the seed's 404 stands.
    assert_eq!(app.get("/Soon1").await.status(), 404);
    // Extra path and query merge into the fallback as they do into a url.
    let live = app.get("/Live1/spring?utm_source=qr").await;
    let off = app.get("/Off01/spring?utm_source=qr").await;
    assert_eq!(off.status(), 302);
    assert_eq!(off.headers()["location"], live.headers()["location"]);
    // The access log names the Location sent: the fallback (a line for each of the 7 answers).
    let lines = app.wait_for_log_lines(7).await;
    let off_line = lines.iter().find(|l| l.split(' ').nth(4) == Some("/Off01")).expect("logged");
    assert_eq!(off_line.split(' ').nth(6), Some(ENDED), "{off_line}");
}

#[tokio::test]
async fn a_link_starts_working_at_its_valid_from() {
    let app = spawn_app().await;
    let start = time::OffsetDateTime::now_utc() + Duration::from_secs(2);
    let doc =
        json!({"url": "https://started.example/", "valid_from": start.format(&Rfc3339).unwrap(), "fallback": ENDED});
    app.db.put_link("Start", doc).await;
    assert_redirects_to(&app.get("/Start").await, ENDED);
    eventually("the link starts at its valid_from", Duration::from_secs(5), || async {
        let r = app.get("/Start").await;
        let location = r.headers()["location"].to_str().unwrap().to_owned();
        holds(location == "https://started.example/", location)
    })
    .await;
    assert!(time::OffsetDateTime::now_utc() >= start, "served before its start");
}

#[tokio::test]
async fn the_server_fallback_serves_links_without_one_and_unknown_ids_stay_404() {
    let app = spawn_app_with(AppOptions::with(|c| c.fallback_url = Some("https://example.com/gone".into()))).await;
    app.db.put_link("Off01", json!({"url": "https://a.example/", "inactive": true})).await;
    app.db.put_link("Own01", json!({"url": "https://a.example/", "inactive": true, "fallback": ENDED})).await;
    app.db.put_link("Live1", json!({"url": "https://a.example/"})).await;
    assert_redirects_to(&app.get("/Off01").await, "https://example.com/gone");
    assert_redirects_to(&app.get("/Own01").await, ENDED);
    assert_redirects_to(&app.get("/Live1").await, "https://a.example/");
    assert_eq!(app.get("/Nopee").await.status(), 404, "an ID that is no link is still a 404");
}

#[tokio::test]
async fn the_validation_function_refuses_a_bad_fallback_or_start_with_a_reason_naming_it() {
    let db = TestDb::new().await;
    let cases = [
        (json!({"url": "https://a.example/", "fallback": "ftp://a.example/"}), "In the \"fallback\": only \"http://\""),
        (json!({"url": "https://a.example/", "fallback": "https://A.example/"}), "In the \"fallback\": the host name"),
        (
            json!({"url": "https://a.example/", "fallback": "https://a.example/x y"}),
            "The \"fallback\" must not contain spaces",
        ),
        (json!({"url": "https://a.example/", "fallback": ""}), "\"fallback\" must be an address"),
        (json!({"url": "https://a.example/", "fallback": 42}), "\"fallback\" must be an address"),
        (json!({"url": "https://a.example/", "valid_from": "tomorrow"}), "\"valid_from\" must be a date and time"),
        (
            json!({"url": "https://a.example/", "valid_from": "2027-01-01T00:00:00Z", "expires": "2026-12-01T00:00:00Z"}),
            "\"valid_from\" must come before \"expires\"",
        ),
    ];
    for (doc, says) in cases {
        let r = db.request_as(Some(EDITOR), Method::PUT, "Rule1", Some(&doc)).await;
        let status = r.status().as_u16();
        let body: Value = r.json().await.unwrap();
        assert_eq!(status, 403, "{doc} was stored");
        assert!(
            couchlink::domain::Refusal::parse(body["reason"].as_str().unwrap()).message().starts_with(says),
            "{doc}: {body}"
        );
    }
    let good = json!({"url": "https://a.example/", "valid_from": "2026-12-01T09:00:00+01:00", "fallback": "/H83if"});
    let r = db.request_as(Some(EDITOR), Method::PUT, "Rule1", Some(&good)).await;
    assert_eq!(r.status().as_u16(), 201, "{}", r.text().await.unwrap());
}
