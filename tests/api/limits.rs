//! Links that run out (docs/reference.md, "Visit limits"): `max_visits` counted redirects, then
//! the link acts as expired (its `fallback`, or 404). Exact with one proxy, whatever arrives at
//! once, and across its restart; bots counted or not as the document says; with two proxies,
//! each knows the other's visits after an interval.

use serde_json::json;

use crate::clicks::{counted_db, counting, wait_for_totals};
use crate::support::*;

const COUPON: &str = "https://shop.example/coupon";
const CAMPAIGN: &str = "https://shop.example/spring";
const BROWSER: &str = "Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0";
const BOT: &str = "Googlebot/2.1 (+http://www.google.com/bot.html)";

/// Where `path` sends `user_agent` now: its `Location`, or `None` for a 404.
async fn sent_to(app: &TestApp, path: &str, user_agent: &str) -> Option<String> {
    let r = http().get(format!("{}{path}", app.base)).header("user-agent", user_agent).send().await.unwrap();
    match r.status().as_u16() {
        302 => Some(r.headers()["location"].to_str().unwrap().to_owned()),
        404 => None,
        other => panic!("{path} answered {other}"),
    }
}

#[tokio::test]
async fn one_proxy_serves_exactly_max_visits_at_once_then_the_fallback_and_after_a_restart() {
    let db = counted_db().await;
    db.put_link("Coupn", json!({"url": COUPON, "max_visits": 25, "fallback": CAMPAIGN})).await;
    let mut app = spawn_app_on(db, |c| {
        c.clicks = Some(counting("proxy-a", 1));
        c.workers = 2;
    })
    .await;
    // 60 visitors at once, over two serving threads: 25 get the coupon, whatever the order.
    let asked = (0..60).map(|_| sent_to(&app, "/Coupn", BROWSER));
    let sent: Vec<Option<String>> = futures_util::future::join_all(asked).await;
    assert_eq!(sent.iter().filter(|s| s.as_deref() == Some(COUPON)).count(), 25, "{sent:?}");
    assert_eq!(sent.iter().filter(|s| s.as_deref() == Some(CAMPAIGN)).count(), 35);
    // Used up: bots go to the fallback too.
    assert_eq!(sent_to(&app, "/Coupn", BOT).await.as_deref(), Some(CAMPAIGN));
    app.stop().await.unwrap();

    // A new start reads what was counted from the live counts' view: still used up.
    let db = TestDb { name: app.db.name.clone(), couch: app.db.couch.clone() };
    let app = spawn_app_on(db, |c| c.clicks = Some(counting("proxy-a", 1))).await;
    assert_eq!(sent_to(&app, "/Coupn", BROWSER).await.as_deref(), Some(CAMPAIGN));
}

#[tokio::test]
async fn requests_answered_with_no_redirect_use_no_visit() {
    let db = counted_db().await;
    db.put_link("Three", json!({"url": COUPON, "max_visits": 3, "fallback": CAMPAIGN})).await;
    let app = spawn_app_on(db, |c| c.clicks = Some(counting("proxy-a", 1))).await;
    // Paths after the ID that resolve to nothing: 404 each, never a visit (sent as they are:
    // an HTTP client would take the dots away).
    for path in ["/Three/%2e%2e", "/Three/..", "/Three/%2E%2E?x=1", "/Three/a/../../.."] {
        for _ in 0..5 {
            let raw = format!("GET {path} HTTP/1.1\r\nHost: x\r\nUser-Agent: {BROWSER}\r\nConnection: close\r\n\r\n");
            let answer = app.raw(raw.as_bytes()).await;
            assert!(answer.starts_with("HTTP/1.1 404"), "{path}: {answer}");
        }
    }
    // A path after the ID that does redirect is a visit like the link's own.
    assert_eq!(sent_to(&app, "/Three/more", BROWSER).await.as_deref(), Some(&*format!("{COUPON}/more")));
    assert_eq!(sent_to(&app, "/Three", BROWSER).await.as_deref(), Some(COUPON));
    assert_eq!(sent_to(&app, "/Three", BROWSER).await.as_deref(), Some(COUPON));
    assert_eq!(sent_to(&app, "/Three", BROWSER).await.as_deref(), Some(CAMPAIGN), "used up by its three redirects");
}

/// Out of visits, a protected link acts as expired: its fallback is served without asking for
/// its password (as an inactive or expired one's is), and no guess is hashed for it.
#[tokio::test]
async fn a_protected_link_out_of_visits_serves_its_fallback_without_asking() {
    let db = counted_db().await;
    let hash = couchlink::domain::PasswordHash::create(b"staff only").unwrap();
    db.put_link("Guard", json!({"url": COUPON, "max_visits": 1, "fallback": CAMPAIGN, "password": hash.as_str()}))
        .await;
    let app = spawn_app_on(db, |c| c.clicks = Some(counting("proxy-a", 1))).await;
    let ask = |password: Option<&str>, path: &str| {
        let request = http().get(format!("{}{path}", app.base)).header("user-agent", BROWSER);
        match password {
            Some(p) => request.basic_auth("anyone", Some(p)),
            None => request,
        }
        .send()
    };
    assert_eq!(ask(None, "/Guard").await.unwrap().status(), 401);
    let opened = ask(Some("staff only"), "/Guard").await.unwrap();
    assert_eq!(opened.headers()["location"], COUPON);
    let hashed = app.metric("couchlink_password_hashes_total").await;
    for (password, path) in
        [(None, "/Guard"), (Some("wrong"), "/Guard"), (Some("staff only"), "/Guard"), (None, "/Guard?x=1")]
    {
        let answer = ask(password, path).await.unwrap();
        assert_eq!(answer.status(), 302, "{password:?} {path}");
        assert_eq!(answer.headers()["location"].to_str().unwrap().split('?').next(), Some(CAMPAIGN));
    }
    assert_eq!(app.metric("couchlink_password_hashes_total").await, hashed, "nothing hashed for a used-up link");
}

#[tokio::test]
async fn bots_pass_uncounted_unless_the_document_counts_them_and_no_fallback_is_a_404() {
    let db = counted_db().await;
    db.put_link("Human", json!({"url": COUPON, "max_visits": 2})).await;
    db.put_link("Every", json!({"url": COUPON, "max_visits": 2, "max_visits_bots": true})).await;
    let app = spawn_app_on(db, |c| c.clicks = Some(counting("proxy-a", 1))).await;
    for _ in 0..3 {
        assert_eq!(sent_to(&app, "/Human", BOT).await.as_deref(), Some(COUPON), "bots are not counted here");
    }
    assert_eq!(sent_to(&app, "/Human", BROWSER).await.as_deref(), Some(COUPON));
    assert_eq!(sent_to(&app, "/Human", BROWSER).await.as_deref(), Some(COUPON));
    assert_eq!(sent_to(&app, "/Human", BROWSER).await, None, "used up, without a fallback: 404");
    assert_eq!(sent_to(&app, "/Human", BOT).await, None);
    assert_eq!(sent_to(&app, "/Every", BOT).await.as_deref(), Some(COUPON));
    assert_eq!(sent_to(&app, "/Every", BROWSER).await.as_deref(), Some(COUPON));
    assert_eq!(sent_to(&app, "/Every", BROWSER).await, None);
    // Raising the limit opens the link again for what is left (the wait asks as a bot: a
    // request without a User-Agent is counted as one).
    app.db.put_link("Human", json!({"url": COUPON, "max_visits": 3})).await;
    app.wait_until_served("/Human", 302, Some(COUPON)).await;
    assert_eq!(sent_to(&app, "/Human", BROWSER).await.as_deref(), Some(COUPON));
    assert_eq!(sent_to(&app, "/Human", BROWSER).await, None);
}

#[tokio::test]
async fn two_proxies_know_each_others_visits_after_an_interval() {
    let db = counted_db().await;
    db.put_link("Split", json!({"url": COUPON, "max_visits": 10})).await;
    let a = spawn_app_on(db, |c| c.clicks = Some(counting("proxy-a", 1))).await;
    let db_b = TestDb { name: a.db.name.clone(), couch: a.db.couch.clone() };
    let b = spawn_app_on(db_b, |c| c.clicks = Some(counting("proxy-b", 1))).await;
    for _ in 0..6 {
        assert_eq!(sent_to(&a, "/Split", BROWSER).await.as_deref(), Some(COUPON));
    }
    // Once A's visits are in the view (its interval written; B reads the view when first asked
    // for the link): 4 left for B.
    wait_for_totals(&a.db, "Split", 6).await;
    let mut from_b = 0;
    for _ in 0..10 {
        from_b += usize::from(sent_to(&b, "/Split", BROWSER).await.is_some());
    }
    assert_eq!(from_b, 4);
}
