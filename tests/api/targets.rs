//! A link's `targets`: the first rule whose conditions (operating system, kind of device,
//! preferred language) all match the visitor sends them to its `url`; everyone else gets the
//! link's `url`. Responses that depended on them say `Vary: User-Agent, Accept-Language`.

use reqwest::Method;
use serde_json::{json, Value};

use crate::support::*;

const IPHONE: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1";
const IPAD: &str = "Mozilla/5.0 (iPad; CPU OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1";
const ANDROID_CHROME: &str =
    "Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Mobile Safari/537.36";
const SAMSUNG_INTERNET: &str = "Mozilla/5.0 (Linux; Android 14; SAMSUNG SM-S918B) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/25.0 Chrome/121.0.0.0 Mobile Safari/537.36";
const ANDROID_TABLET: &str =
    "Mozilla/5.0 (Linux; Android 13; SM-X710) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36";
const DESKTOP_CHROME: &str =
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36";
const DESKTOP_FIREFOX: &str = "Mozilla/5.0 (X11; Linux x86_64; rv:127.0) Gecko/20100101 Firefox/127.0";
const DESKTOP_SAFARI: &str = "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15";
const DESKTOP_EDGE: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36 Edg/126.0.0.0";
const GOOGLEBOT: &str = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";

const APP_STORE: &str = "https://apps.apple.com/app/id1";
const PLAY_STORE: &str = "https://play.google.com/store/apps/details?id=ie.example";
const WEB: &str = "https://example.com/app";
const WEB_FR: &str = "https://example.com/fr/app";

/// `GET /{id}` as a visitor sending `user_agent` and `accept_language`: (status, Location, Vary).
async fn visit(
    app: &TestApp,
    id: &str,
    user_agent: Option<&str>,
    accept_language: Option<&str>,
) -> (u16, String, String) {
    let mut request = app.http.get(format!("{}/{id}", app.base));
    if let Some(ua) = user_agent {
        request = request.header("User-Agent", ua);
    }
    if let Some(lang) = accept_language {
        request = request.header("Accept-Language", lang);
    }
    let r = request.send().await.unwrap();
    let header = |name: &str| r.headers().get(name).map(|v| v.to_str().unwrap().to_owned()).unwrap_or_default();
    (r.status().as_u16(), header("location"), header("vary"))
}

#[tokio::test]
async fn each_phone_gets_its_store_and_everyone_else_the_web() {
    let app = spawn_app().await;
    let targets = json!([
        {"when": {"os": ["ios"]}, "url": APP_STORE},
        {"when": {"os": ["android"]}, "url": PLAY_STORE},
        {"when": {"device": ["desktop"], "lang": ["fr"]}, "url": WEB_FR},
    ]);
    app.db.put_link("App01", json!({"url": WEB, "targets": targets})).await;
    let cases = [
        (Some(IPHONE), None, APP_STORE),
        (Some(IPAD), Some("fr"), APP_STORE),
        (Some(ANDROID_CHROME), None, PLAY_STORE),
        (Some(SAMSUNG_INTERNET), Some("de-DE,de;q=0.9"), PLAY_STORE),
        (Some(ANDROID_TABLET), None, PLAY_STORE),
        (Some(DESKTOP_CHROME), Some("fr-FR,fr;q=0.9,en;q=0.8"), WEB_FR),
        (Some(DESKTOP_FIREFOX), Some("fr"), WEB_FR),
        (Some(DESKTOP_SAFARI), Some("en-GB,en;q=0.9,fr;q=0.8"), WEB),
        (Some(DESKTOP_EDGE), Some("en;q=0.5, fr"), WEB_FR),
        (Some(DESKTOP_EDGE), None, WEB),
        (Some(GOOGLEBOT), Some("fr"), WEB),
        (None, None, WEB),
    ];
    for (ua, lang, expected) in cases {
        let (status, location, vary) = visit(&app, "App01", ua, lang).await;
        assert_eq!((status, location.as_str()), (302, expected), "{ua:?} {lang:?}");
        assert_eq!(vary, "User-Agent, Accept-Language", "{ua:?}");
    }
    // A plain link's answer depends on no header: no Vary.
    app.db.put_link("Plain", json!({"url": WEB})).await;
    assert_eq!(visit(&app, "Plain", Some(IPHONE), None).await, (302, WEB.to_owned(), String::new()));
    // The access log names the Location each visitor was sent.
    let lines = app.wait_for_log_lines(cases.len() + 1).await;
    let sent: Vec<&str> = lines.iter().filter_map(|l| l.split(' ').nth(6)).collect();
    for (_, _, expected) in cases {
        assert!(sent.contains(&expected), "{expected} not logged: {sent:?}");
    }
}

#[tokio::test]
async fn the_first_matching_rule_wins_and_devices_and_languages_are_told_apart() {
    let app = spawn_app().await;
    let targets = json!([
        {"when": {"device": ["tablet"]}, "url": "https://example.com/tablet"},
        {"when": {"os": ["ios", "android"], "lang": ["de"]}, "url": "https://example.com/de/phone"},
        {"when": {"os": ["ios", "android"]}, "url": "https://example.com/phone"},
        {"when": {"lang": ["de", "at"]}, "url": "https://example.com/de"},
    ]);
    app.db.put_link("Rules", json!({"url": WEB, "targets": targets})).await;
    let cases = [
        (Some(IPAD), Some("de"), "https://example.com/tablet"),
        (Some(ANDROID_TABLET), None, "https://example.com/tablet"),
        (Some(IPHONE), Some("de-AT"), "https://example.com/de/phone"),
        (Some(IPHONE), Some("fr;q=0.9, de"), "https://example.com/de/phone"),
        (Some(IPHONE), Some("de;q=0.5, fr"), "https://example.com/phone"),
        (Some(SAMSUNG_INTERNET), Some("en"), "https://example.com/phone"),
        (Some(DESKTOP_SAFARI), Some("de"), "https://example.com/de"),
        (None, Some("de;q=0"), WEB),
        (None, Some("*"), WEB),
    ];
    for (ua, lang, expected) in cases {
        let (status, location, _) = visit(&app, "Rules", ua, lang).await;
        assert_eq!((status, location.as_str()), (302, expected), "{ua:?} {lang:?}");
    }
}

#[tokio::test]
async fn rules_merge_paths_and_queries_and_an_off_link_goes_to_its_fallback() {
    let app = spawn_app().await;
    let targets = json!([{"when": {"os": ["ios"]}, "url": "https://example.com/ios"}, {"when": {"os": ["android"]}, "url": "/Andro"}]);
    app.db.put_link("Merge", json!({"url": WEB, "targets": targets.clone()})).await;
    app.db.put_link("Andro", json!({"url": "https://example.com/android"})).await;
    app.db
        .put_link(
            "Ended",
            json!({"url": WEB, "targets": targets, "inactive": true, "fallback": "https://example.com/ended"}),
        )
        .await;
    let (_, ios, _) = visit(&app, "Merge/spring?utm_source=qr", Some(IPHONE), None).await;
    let (_, web, _) = visit(&app, "Merge/spring?utm_source=qr", Some(DESKTOP_CHROME), None).await;
    assert_eq!(ios, web.replace("https://example.com/app", "https://example.com/ios"), "merged as a url is");
    // A rule's internal redirect is followed like a url's.
    assert_eq!(visit(&app, "Merge", Some(ANDROID_CHROME), None).await.1, "https://example.com/android");
    // An inactive link's rules are not consulted: its fallback, the same for everyone.
    for ua in [IPHONE, ANDROID_CHROME, DESKTOP_CHROME] {
        assert_eq!(
            visit(&app, "Ended", Some(ua), None).await,
            (302, "https://example.com/ended".to_owned(), String::new())
        );
    }
}

#[tokio::test]
async fn the_validation_function_refuses_a_bad_rule_with_a_reason_naming_it() {
    let db = TestDb::new().await;
    let url = "https://example.com/";
    let cases = [
        (json!({"os": ["ios"]}), "\"targets\" must be a list of rules"),
        (
            json!([{"when": {"os": ["iOS"]}, "url": url}]),
            "Rule 1 of \"targets\": \"os\" holds \"iOS\"; allowed: ios, android",
        ),
        (
            json!([{"when": {"os": ["ios"]}, "url": url}, {"when": {"device": ["phone"]}, "url": url}]),
            "Rule 2 of \"targets\": \"device\" holds \"phone\"",
        ),
        (json!([{"when": {"lang": ["fr-CH"]}, "url": url}]), "Rule 1 of \"targets\": \"lang\" holds \"fr-CH\""),
        (json!([{"when": {}, "url": url}]), "Rule 1 of \"targets\" has no condition"),
        (json!([{"when": {"browser": ["safari"]}, "url": url}]), "Rule 1 of \"targets\": \"browser\" is no condition"),
        (json!([{"when": {"os": ["ios"]}}]), "Rule 1 of \"targets\" needs a \"url\""),
        (
            json!([{"when": {"os": ["ios"]}, "url": "ftp://example.com/"}]),
            "In the \"url\" of rule 1 of \"targets\": only",
        ),
        (
            json!([{"when": {"os": ["ios"]}, "url": "https://Example.com/"}]),
            "In the \"url\" of rule 1 of \"targets\": the host",
        ),
    ];
    for (targets, says) in cases {
        let doc = json!({"url": url, "targets": targets});
        let r = db.request_as(Some(EDITOR), Method::PUT, "Rule1", Some(&doc)).await;
        let status = r.status().as_u16();
        let body: Value = r.json().await.unwrap();
        assert_eq!(status, 403, "{doc} was stored");
        assert!(
            couchlink::domain::Refusal::parse(body["reason"].as_str().unwrap()).message().starts_with(says),
            "{doc}: {body}"
        );
    }
    let good = json!({"url": url, "targets": [{"when": {"os": ["ios"], "device": ["mobile"], "lang": ["fr", "DE"]}, "url": "/H83if"}]});
    let r = db.request_as(Some(EDITOR), Method::PUT, "Rule1", Some(&good)).await;
    assert_eq!(r.status().as_u16(), 201, "{}", r.text().await.unwrap());
}

/// `GET /{id}?query` from the address `from` (told by the trusted proxy's `X-Forwarded-For`),
/// with the tracking cookie `tid` if any: (status, Location, Vary, the cookie set).
async fn visit_from(app: &TestApp, path: &str, from: &str, tid: Option<&str>) -> (u16, String, String, String) {
    let mut request = app.http.get(format!("{}{path}", app.base)).header("X-Forwarded-For", from);
    if let Some(tid) = tid {
        request = request.header("Cookie", format!("tid={tid}"));
    }
    let r = request.send().await.unwrap();
    let header = |name: &str| r.headers().get(name).map(|v| v.to_str().unwrap().to_owned()).unwrap_or_default();
    (r.status().as_u16(), header("location"), header("vary"), header("set-cookie"))
}

/// couchlink behind a trusted proxy on loopback, placing addresses with the test database
/// (203.0.113.0/25 France, 203.0.113.128/25 Germany, 2001:db8:1::/48 Japan; nothing for
/// 192.0.2.0/24), anonymising addresses if asked.
async fn app_with_countries(anonymize: bool) -> (TestApp, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("countries.mmdb");
    crate::support::report_fixtures::geoip_db(&db);
    let app = spawn_app_on(TestDb::new().await, |c| {
        c.trusted_proxies = "127.0.0.1/32".parse().unwrap();
        c.geoip = Some(db.clone());
        c.anonymize_ip = anonymize;
    })
    .await;
    (app, dir)
}

#[tokio::test]
async fn countries_send_visitors_where_their_address_is_over_ipv4_and_ipv6() {
    let (app, _dir) = app_with_countries(false).await;
    let targets = json!([
        {"when": {"country": ["FR"]}, "url": "https://example.com/fr"},
        {"when": {"country": ["DE", "JP"]}, "url": "https://example.com/de-jp"},
    ]);
    app.db.put_link("Geo01", json!({"url": WEB, "targets": targets})).await;
    for (from, location) in [
        ("203.0.113.7", "https://example.com/fr"),
        ("203.0.113.200", "https://example.com/de-jp"),
        ("2001:db8:1::abcd", "https://example.com/de-jp"),
        // Placed nowhere, or in a country no rule names: the link's url.
        ("192.0.2.1", WEB),
        ("198.51.100.9", WEB),
        ("2001:db8:2::1", WEB),
    ] {
        let (status, got, vary, _) = visit_from(&app, "/Geo01", from, None).await;
        assert_eq!((status, got.as_str()), (302, location), "from {from}");
        assert!(vary.contains("User-Agent"), "a response that consulted a rule says Vary: {vary:?}");
    }
}

#[tokio::test]
async fn an_anonymised_address_is_placed_as_the_first_of_its_block() {
    let (app, _dir) = app_with_countries(true).await;
    let targets = json!([{"when": {"country": ["DE"]}, "url": "https://example.com/de"}]);
    app.db.put_link("Geo02", json!({"url": WEB, "targets": targets})).await;
    // 203.0.113.200 is in Germany, but its /24's first address, 203.0.113.0, is in France: as
    // the log keeps it, and as the report would place it.
    let (_, got, _, _) = visit_from(&app, "/Geo02", "203.0.113.200", None).await;
    assert_eq!(got, WEB);
}

#[tokio::test]
async fn a_query_condition_and_a_split_combine_with_the_others() {
    let (app, _dir) = app_with_countries(false).await;
    let targets = json!([
        {"when": {"query": {"utm_source": ["flyer", "poster"]}, "country": ["FR"]}, "url": "https://example.com/print-fr"},
        {"when": {"query": {"utm_source": ["flyer", "poster"]}}, "url": "https://example.com/print"},
        {"split": [{"weight": 1, "url": "https://example.com/a"}, {"weight": 1, "url": "https://example.com/b"}]},
    ]);
    app.db.put_link("Split", json!({"url": WEB, "targets": targets})).await;
    let (_, got, vary, _) = visit_from(&app, "/Split?utm_source=poster", "203.0.113.7", None).await;
    assert!(got.starts_with("https://example.com/print-fr?"), "{got}");
    assert_eq!(vary, "User-Agent, Accept-Language", "a rule without a split does not vary by cookie");
    let (_, got, _, _) = visit_from(&app, "/Split?utm_source=flyer", "198.51.100.9", None).await;
    assert!(got.starts_with("https://example.com/print?"), "{got}");
    // Everyone else is split, and keeps their variant on every visit.
    let mut seen = std::collections::HashMap::new();
    for n in 0..40 {
        let tid = format!("20261126120000{n:016x}");
        let (_, first, vary, _) = visit_from(&app, "/Split", "192.0.2.1", Some(&tid)).await;
        assert!(first == "https://example.com/a" || first == "https://example.com/b", "{first}");
        assert_eq!(vary, "User-Agent, Accept-Language, Cookie", "a split varies with the tracking cookie");
        let (_, _, vary, _) = visit_from(&app, "/Split?fbclid=x", "192.0.2.1", Some(&tid)).await;
        assert_eq!(vary, "User-Agent, Accept-Language, Cookie", "on the full resolution too");
        for _ in 0..3 {
            assert_eq!(visit_from(&app, "/Split", "192.0.2.1", Some(&tid)).await.1, first, "{tid} kept its variant");
        }
        *seen.entry(first).or_insert(0) += 1;
    }
    assert_eq!(seen.len(), 2, "both variants get visitors: {seen:?}");
    // A new visitor's variant follows the tracking ID the response gives them.
    let (_, first, _, cookie) = visit_from(&app, "/Split", "192.0.2.1", None).await;
    let tid = cookie.strip_prefix("tid=").unwrap().split(';').next().unwrap().to_owned();
    assert_eq!(visit_from(&app, "/Split", "192.0.2.1", Some(&tid)).await.1, first);
}

#[tokio::test]
async fn without_a_geoip_database_a_country_condition_never_matches_and_is_counted() {
    let app = spawn_app_on(TestDb::new().await, |c| c.trusted_proxies = "127.0.0.1/32".parse().unwrap()).await;
    let targets = json!([{"when": {"country": ["FR"]}, "url": "https://example.com/fr"}]);
    app.db.put_link("Geo03", json!({"url": WEB, "targets": targets})).await;
    for _ in 0..3 {
        assert_eq!(visit_from(&app, "/Geo03", "203.0.113.7", None).await.1, WEB);
    }
    // Once per request on the full resolution too (its live counts' version asked quietly).
    assert_eq!(visit_from(&app, "/Geo03?fbclid=x", "203.0.113.7", None).await.1, format!("{WEB}?fbclid=x"));
    let metrics =
        app.http.get(format!("http://{}/metrics", app.admin_addr)).send().await.unwrap().text().await.unwrap();
    assert!(metrics.contains("\ncouchlink_country_rules_without_geoip_total 4\n"), "{metrics}");
}

#[tokio::test]
async fn a_geoip_database_missing_or_damaged_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let damaged = dir.path().join("damaged.mmdb");
    std::fs::write(&damaged, b"not a MaxMind database").unwrap();
    for (path, says) in [
        (dir.path().join("missing.mmdb"), "cannot read the GeoIP database"),
        (damaged, "is not a readable MaxMind DB file"),
    ] {
        let db = TestDb::new().await;
        let mut config = test_config(&db, dir.path());
        config.geoip = Some(path.clone());
        let error = start_and_stop(config).await.unwrap_err();
        let said = couchlink::errors::Causes(&error).to_string();
        assert!(said.starts_with("COUCHLINK_GEOIP: ") && said.contains(says), "{said}");
    }
}

#[tokio::test]
async fn the_validation_function_checks_countries_queries_and_splits_naming_rule_and_field() {
    let db = TestDb::new().await;
    let url = "https://example.com/";
    let cases = [
        (json!([{"when": {"country": ["ie"]}, "url": url}]), "Rule 1 of \"targets\": \"country\" holds \"ie\""),
        (json!([{"when": {"country": "IE"}, "url": url}]), "Rule 1 of \"targets\": \"country\" must be a list"),
        (
            json!([{"when": {"query": {"utm_source": "flyer"}}, "url": url}]),
            "Rule 1 of \"targets\": \"query\".\"utm_source\" must be a list",
        ),
        (json!([{"when": {"query": {}}, "url": url}]), "Rule 1 of \"targets\": \"query\" must be an object"),
        (json!([{"split": [{"weight": 1, "url": url}]}]), "Rule 1 of \"targets\": \"split\" must be a list of 2 to 16"),
        (
            json!([{"when": {"os": ["ios"]}, "url": url}, {"split": [{"weight": 1, "url": url}, {"weight": 1.5, "url": "https://example.com/b"}]}]),
            "Rule 2 of \"targets\": variant 2 of \"split\": \"weight\" must be a whole number",
        ),
        (
            json!([{"split": [{"weight": 0, "url": url}, {"weight": 0, "url": "https://example.com/b"}]}]),
            "Rule 1 of \"targets\": every variant",
        ),
        (
            json!([{"split": [{"weight": 1, "url": url}, {"weight": 1, "url": url}]}]),
            "Rule 1 of \"targets\": variant 2 of \"split\": \"url\"",
        ),
        (
            json!([{"split": [{"weight": 1, "url": url}, {"weight": 1, "url": "https://Example.com/"}]}]),
            "In the \"url\" of variant 2 of rule 1 of \"targets\"",
        ),
        (
            json!([{"when": {"os": ["ios"]}, "url": url, "split": []}]),
            "Rule 1 of \"targets\" has both \"url\" and \"split\"",
        ),
    ];
    for (targets, says) in cases {
        let doc = json!({"url": url, "targets": targets});
        let r = db.request_as(Some(EDITOR), Method::PUT, "Rule2", Some(&doc)).await;
        let status = r.status().as_u16();
        let body: Value = r.json().await.unwrap();
        assert_eq!(status, 403, "{doc} was stored");
        assert!(
            couchlink::domain::Refusal::parse(body["reason"].as_str().unwrap()).message().starts_with(says),
            "{doc}: {body}"
        );
        // The proxy reads the same document as unusable, for the same rule.
        let link = couchlink::domain::Link::from_doc(serde_json::from_value(doc.clone()).unwrap());
        assert!(link.is_err(), "{doc} is served");
    }
    let good = json!({"url": url, "targets": [
        {"when": {"country": ["IE", "GB"], "query": {"utm_source": ["flyer"]}}, "url": "/H83if"},
        {"split": [{"weight": 3, "url": "https://example.com/a"}, {"weight": 0, "url": "https://example.com/b"}]},
    ]});
    let r = db.request_as(Some(EDITOR), Method::PUT, "Rule2", Some(&good)).await;
    assert_eq!(r.status().as_u16(), 201, "{}", r.text().await.unwrap());
}
