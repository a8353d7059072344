//! The tracking cookie on every response.

use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn a_new_client_gets_a_fresh_tracking_id_on_every_kind_of_response() {
    let app = spawn_app().await;
    app.db.put_link("H83if", json!({"url": "https://example.com/"})).await;
    let mut seen = std::collections::HashSet::new();
    for (method, path) in [("GET", "/H83if"), ("GET", "/Nopee"), ("POST", "/H83if"), ("HEAD", "/H83if")] {
        let before = utc_stamp_now();
        let response = app.request(method.parse().unwrap(), path).await;
        let after = utc_stamp_now();
        let id = tracking_cookie(&response);
        assert!(is_fresh_tracking_id(&id), "{method} {path}: {id}");
        // Fixed-width digits compare as text: the ID was issued while the request was made.
        assert!((before.as_str()..=after.as_str()).contains(&&id[..14]), "issued in [{before}, {after}]: {id}");
        assert!(seen.insert(id), "each new client gets its own ID");
    }
}

#[tokio::test]
async fn a_valid_tracking_id_is_echoed_unchanged() {
    let app = spawn_app().await;
    app.db.put_link("H83if", json!({"url": "https://example.com/"})).await;
    for valid in ["20250101000000aaaaaaaaaaaaaaaa", "20261122101733a3f9c1e2b7d4e601"] {
        for path in ["/H83if", "/Nopee"] {
            let response = app
                .http
                .get(format!("{}{path}", app.base))
                .header("cookie", format!("other=1; tid={valid}"))
                .send()
                .await
                .unwrap();
            assert_eq!(tracking_cookie(&response), valid, "{path}");
        }
    }
}

#[tokio::test]
async fn a_malformed_tracking_id_is_replaced() {
    let app = spawn_app().await;
    for bad in [
        "",
        "nonsense",
        "20250101000000AAAAAAAAAAAAAAAA",
        "20250101000000aaaaaaaaaaaaaaaaa",
        "20250101000000aaaaaaaaaaaaaaaaaa", // 18 hex digits: never issued
        "2025010100000xaaaaaaaaaaaaaaaa",
        "\"20250101000000aaaaaaaaaaaaaaaa\"",
        // The right form, an impossible or future time: never echoed for two years.
        "99991399999999aaaaaaaaaaaaaaaa",
        "00000000000000aaaaaaaaaaaaaaaa",
        "99991231235959aaaaaaaaaaaaaaaa",
    ] {
        let response =
            app.http.get(format!("{}/Nopee", app.base)).header("cookie", format!("tid={bad}")).send().await.unwrap();
        let id = tracking_cookie(&response);
        assert_ne!(id, bad);
        assert!(is_fresh_tracking_id(&id), "{bad:?} → {id}");
    }
}

#[tokio::test]
async fn the_cookie_is_secure_when_the_public_url_is_https() {
    let app = spawn_app_with(AppOptions::with(move |c| {
        c.public_url = Some(couchlink::domain::PublicUrl::parse("https://0x1f.ie").unwrap());
    }))
    .await;
    let response = app.get("/Nopee").await;
    assert!(response.headers()["set-cookie"].to_str().unwrap().ends_with("; Secure"));
    let plain = spawn_app().await;
    assert!(!plain.get("/Nopee").await.headers()["set-cookie"].to_str().unwrap().contains("Secure"));
}

#[tokio::test]
async fn honoured_privacy_signals_mean_no_cookie_and_a_dash_in_the_log() {
    let app = spawn_app_with(AppOptions::with(move |c| {
        c.honor_privacy_signals = true;
    }))
    .await;
    app.db.put_link("H83if", json!({"url": "https://example.com/"})).await;
    // Any instance saying 1 counts, not only the first.
    for (name, values) in [("sec-gpc", &["1"][..]), ("dnt", &["1"]), ("sec-gpc", &["0", "1"])] {
        let mut request = app.http.get(format!("{}/H83if", app.base));
        for value in values {
            request = request.header(name, *value);
        }
        let response = request.header("cookie", "tid=20250101000000aaaaaaaaaaaaaaaa").send().await.unwrap();
        assert_redirects_to(&response, "https://example.com/");
        assert!(response.headers().get("set-cookie").is_none(), "{name}: {values:?} still set a cookie");
    }
    // No signal (or a 0): tracked as ever.
    let response = app.http.get(format!("{}/H83if", app.base)).header("dnt", "0").send().await.unwrap();
    assert!(is_fresh_tracking_id(&tracking_cookie(&response)));
    let lines = app.wait_for_log_lines(4).await;
    let third: Vec<&str> = lines.iter().map(|l| l.split(' ').nth(2).unwrap()).collect();
    assert_eq!(&third[..3], ["-", "-", "-"], "{lines:?}");
    assert!(is_fresh_tracking_id(third[3]), "{lines:?}");
    assert!(lines.iter().all(|l| l.split(' ').count() == 7), "the redirect itself is unchanged: {lines:?}");
}

#[tokio::test]
async fn privacy_signals_change_nothing_unless_the_operator_honours_them() {
    let app = spawn_app().await;
    let response = app.http.get(format!("{}/Nopee", app.base)).header("sec-gpc", "1").send().await.unwrap();
    assert!(is_fresh_tracking_id(&tracking_cookie(&response)));
}
