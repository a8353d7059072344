//! Strangers and other origins: refused by CouchDB or by the console, never answered with rows or
//! written.

use super::prelude::*;

pub async fn run(f: &mut Fixture) {
    let Fixture { db, proxy, console, browser, http, id, .. } = f;
    // Shared from here on: only the browser changes (its screenshots).
    let (db, proxy, console, http, id) = (&*db, &*proxy, console.as_str(), &*http, id.as_str());
    // A stranger (no session) asking for the top links or the breakdowns through the console:
    // CouchDB refuses, no rows; an 8 KB query is refused before CouchDB or by it, never answered
    // with rows.
    for query in ["?group_level=4".to_owned(), format!("?group_level=4&startkey={}", "%22a".repeat(2800))] {
        for view in ["by_day_link", "by_month_link", "by_dimension"] {
            let r = http
                .get(format!("{console}couch/{}_clicks/_design/clicks/_view/{view}{query}", db.name))
                .send()
                .await
                .unwrap();
            let status = r.status().as_u16();
            let body = r.text().await.unwrap();
            assert!((400..500).contains(&status) && !body.contains("\"rows\""), "{view}: {status} {body}");
        }
    }

    // A write from another origin is refused by the console, before CouchDB.
    let cookies = browser.client.get_all_cookies().await.unwrap();
    let session =
        cookies.iter().find(|c| c.name() == "AuthSession").expect("CouchDB's session cookie").value().to_owned();
    let forged = http
        .put(format!("{console}couch/{}/{id}", db.name))
        .header("origin", "http://evil.example")
        .header("cookie", format!("AuthSession={session}"))
        .json(&json!({"url": "https://evil.example/", "inactive": false}))
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), 403);
    // A read another site's page makes with the session, as a browser marks it, is refused too.
    for (name, value) in [("origin", "http://evil.example"), ("sec-fetch-site", "cross-site")] {
        let read = http
            .get(format!("{console}couch/{}/{id}", db.name))
            .header(name, value)
            .header("cookie", format!("AuthSession={session}"))
            .send()
            .await
            .unwrap();
        assert_eq!(read.status(), 403, "{name}: {value}");
    }
    assert_eq!(location(proxy, id).await.as_deref(), Some("https://example.com/summer"));
}
