//! Live counts (docs/reference.md, "Live counts"): what proxies count and write to the clicks
//! database, summed by its view; the same answers as `couchlink report` on the same requests;
//! who may read and write them; an outage (nothing lost, nothing twice), the bound, the stop.

use std::time::Duration;

use couchlink::clicks::by::Dimension;
use couchlink::cmd::clicks::{read, read_by, Period, Row};
use couchlink::couch::CouchClient;
use couchlink::startup::ClicksConfig;
use serde_json::{json, Value};

use crate::support::process::couchlink_command;
use crate::support::relay::Relay;
use crate::support::*;

const BROWSER: &str = "Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0";
const BOT: &str = "Googlebot/2.1 (+http://www.google.com/bot.html)";

/// A test database set up with its clicks database (`<db>_clicks`).
pub(crate) async fn counted_db() -> TestDb {
    let db = TestDb::new().await;
    let options = couchlink::cmd::setup::SetupOptions { clicks_db: Some(clicks_name(&db)), ..test_setup() };
    let reader = couchlink::cmd::setup::Reader { name: READER.0.into(), password: READER.1.into() };
    let report = couchlink::cmd::setup::run(&db.client_as(None), Some(&reader), &options).await.unwrap();
    let (_, database, security, design) = report.clicks.expect("a clicks database");
    assert_eq!((database, design), (couchlink::cmd::setup::Step::Created, couchlink::cmd::setup::Step::Created));
    assert_ne!(security, couchlink::cmd::setup::Step::Unchanged);
    db
}

fn clicks_name(db: &TestDb) -> String {
    format!("{}_clicks", db.name)
}

/// The clicks database as `who` (the admin when `None`).
fn clicks_as(db: &TestDb, who: Option<(&str, &str)>) -> CouchClient {
    db.client_as(who).for_database(&clicks_name(db))
}

/// Counting on, every `secs` seconds, as proxy `name`.
pub(crate) fn counting(name: &str, secs: u32) -> ClicksConfig {
    ClicksConfig { interval_secs: secs, proxy_name: name.to_owned(), ..ClicksConfig::new() }
}

/// A link's counts in all: redirects, bot redirects, new visitors, 404s.
pub(crate) async fn totals(db: &TestDb, id: &str) -> [u64; 4] {
    let rows = read(&clicks_as(db, None), &[id.to_owned()], Period::Total, None, None).await.unwrap();
    rows.first().map_or([0; 4], |r: &Row| r.counts)
}

/// `GET {server}/{path}` as `who` (the admin when `None`).
async fn server_get(db: &TestDb, who: Option<(&str, &str)>, path: &str) -> reqwest::Response {
    let (user, password) = who.unwrap_or((&db.couch.admin_user, &db.couch.admin_password));
    http()
        .get(format!("{}/{path}", db.couch.url))
        .basic_auth(user, Some(password))
        .header("Accept", "application/json")
        .send()
        .await
        .unwrap()
}

/// The whole database in all: redirects, bots, new visitors, 404s, unknown 404s.
async fn whole_database(db: &TestDb) -> [u64; 5] {
    let path = format!("{}/_design/clicks/_view/by_day?group_level=0", clicks_name(db));
    let body: Value = server_get(db, None, &path).await.json().await.unwrap();
    let mut sums = [0; 5];
    if let Some(row) = body["rows"].get(0) {
        for (sum, n) in sums.iter_mut().zip(row["value"].as_array().unwrap()) {
            *sum = n.as_u64().unwrap();
        }
    }
    sums
}

/// The clicks database's documents (as admin).
async fn documents(db: &TestDb) -> Vec<Value> {
    let path = format!("{}/_all_docs?include_docs=true", clicks_name(db));
    let body: Value = server_get(db, None, &path).await.json().await.unwrap();
    body["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| !r["id"].as_str().unwrap().starts_with("_design/"))
        .map(|r| r["doc"].clone())
        .collect()
}

/// `couchlink clicks --versions --format json ID` as the editor.
fn clicks_versions(app: &TestApp, id: &str) -> Value {
    let out = couchlink_command()
        .args(["clicks", "--versions", "--format", "json", id])
        .env("COUCHLINK_COUCHDB_URL", &app.db.couch.url)
        .env("COUCHLINK_COUCHDB_USER", EDITOR.0)
        .env("COUCHLINK_COUCHDB_PASSWORD", EDITOR.1)
        .env("COUCHLINK_DB", &app.db.name)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `couchlink report --format json` of the app's access log.
fn report_json(app: &TestApp) -> Value {
    let out = couchlink_command()
        .args(["report", "--format", "json"])
        .env("COUCHLINK_LOG_DIR", app.log_dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

async fn get(app: &TestApp, path: &str, user_agent: Option<&str>, cookie: Option<&str>) -> reqwest::Response {
    let mut request = http().get(format!("{}{path}", app.base));
    if let Some(ua) = user_agent {
        request = request.header("User-Agent", ua);
    }
    if let Some(tid) = cookie {
        request = request.header("Cookie", format!("tid={tid}"));
    }
    request.send().await.unwrap()
}

#[tokio::test]
async fn known_answers_are_counted_summed_by_the_views_and_agree_with_the_report() {
    let db = counted_db().await;
    db.put_link("Cnt01", json!({"url": "https://example.com/spring"})).await;
    db.put_link("Cnt02", json!({"url": "https://example.com/over", "inactive": true})).await;
    let mut app = spawn_app_on(db, |c| c.clicks = Some(counting("proxy-a", 3600))).await;
    app.wait_until_feed_is_live().await;

    // A browser twice (new, then returning with its cookie), a bot, a client without any
    // User-Agent (a bot too, by the report's list), all new but the returning one.
    let first = get(&app, "/Cnt01", Some(BROWSER), None).await;
    let tid = tracking_cookie(&first);
    // Past the ID's issue second, as a visitor who comes back later (the report tells a new
    // visitor by the second its ID was issued): the clock is what is waited for.
    eventually("the clock passes the ID's second", Duration::from_secs(5), || async {
        let now = utc_stamp_now();
        holds(now.as_str() > &tid[..14], now)
    })
    .await;
    assert_eq!(get(&app, "/Cnt01", Some(BROWSER), Some(&tid)).await.status(), 302);
    assert_eq!(get(&app, "/Cnt01", Some(BOT), None).await.status(), 302);
    assert_eq!(get(&app, "/Cnt01", None, None).await.status(), 302);
    // Re-pointed: a second target version. Until the proxy serves it, each poll is one more
    // redirect (no User-Agent: a bot; no cookie: new), to one version or the other.
    app.db.put_link("Cnt01", json!({"url": "https://example.com/summer"})).await;
    app.wait_until_served("/Cnt01", 302, Some("https://example.com/summer")).await;
    // The inactive link's 404s, per link; strangers' guesses, in one total.
    for _ in 0..2 {
        assert_eq!(get(&app, "/Cnt02", Some(BROWSER), Some(&tid)).await.status(), 404);
    }
    for path in ["/Nope1", "/Nope2", "/favicon.ico"] {
        assert_eq!(get(&app, path, Some(BROWSER), Some(&tid)).await.status(), 404);
    }
    app.stop().await.unwrap();

    let redirects_to =
        |target: &str| app.log_lines().iter().filter(|l| l.ends_with(&format!(" 302 {target}"))).count() as u64;
    let (spring, summer) = (redirects_to("https://example.com/spring"), redirects_to("https://example.com/summer"));
    let polls = spring + summer - 4;
    assert!(summer >= 1);
    let counts = totals(&app.db, "Cnt01").await;
    assert_eq!(counts, [4 + polls, 2 + polls, 3 + polls, 0], "redirects, bots, new visitors, 404s");
    assert_eq!(totals(&app.db, "Cnt02").await, [0, 0, 0, 2]);
    assert_eq!(totals(&app.db, "Nope1").await, [0; 4], "no key for a stranger's guess");
    assert_eq!(whole_database(&app.db).await, [4 + polls, 2 + polls, 3 + polls, 2, 3]);

    // Per target version.
    let versions = clicks_versions(&app, "Cnt01");
    assert_eq!(
        versions["versions"],
        json!([
            {"link": "Cnt01", "location": "https://example.com/spring", "redirects": spring},
            {"link": "Cnt01", "location": "https://example.com/summer", "redirects": summer},
        ])
    );

    // The report of the same log lines says the same.
    let report = report_json(&app);
    let link = report["links"].as_array().unwrap().iter().find(|l| l["id"] == "Cnt01").unwrap();
    assert_eq!(
        [&link["redirects"], &link["bot_redirects"], &link["new_visitors"]],
        [&json!(counts[0]), &json!(counts[1]), &json!(counts[2])],
        "{link:#}"
    );

    // The documents: one for the interval, named by what it counts.
    let docs = documents(&app.db).await;
    assert_eq!(docs.len(), 1, "{docs:#?}");
    assert_eq!(docs[0]["proxy"], "proxy-a");
    assert_eq!(docs[0]["seconds"], 3600);
    assert!(docs[0]["_id"].as_str().unwrap().ends_with("/0"));
}

/// `couchlink report --format json --by campaign,device,country` of the app's access log.
fn report_by_json(app: &TestApp, geoip: &std::path::Path) -> Value {
    let geoip = geoip.to_str().unwrap();
    let args =
        ["report", "--format", "json", "--by", "campaign", "--by", "device", "--by", "country", "--geoip", geoip];
    let out = couchlink_command().args(args).env("COUCHLINK_LOG_DIR", app.log_dir.path()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[tokio::test]
async fn every_breakdown_the_report_shares_agrees_with_it_on_a_mixed_load() {
    let dir = tempfile::tempdir().unwrap();
    let geoip = dir.path().join("countries.mmdb");
    // 203.0.113.0/25 FR, 203.0.113.128/25 DE, 198.51.100.0/24 US, 2001:db8:1::/48 JP.
    crate::support::report_fixtures::geoip_db(&geoip);
    let db = counted_db().await;
    // A split for phones (its variant counted), the campaign's medium in the target itself.
    let split = json!([{"weight": 1, "url": "https://example.com/a?utm_medium=print"},
        {"weight": 1, "url": "https://example.com/b?utm_medium=print"}]);
    db.put_link(
        "Mix01",
        json!({"url": "https://example.com/?utm_medium=print",
        "targets": [{"when": {"device": ["mobile"]}, "split": split}]}),
    )
    .await;
    let mut app = spawn_app_on(db, |c| {
        c.clicks = Some(counting("proxy-mix", 3600));
        c.trusted_proxies = "127.0.0.1/32".parse().unwrap();
        c.geoip = Some(geoip.clone());
    })
    .await;
    app.wait_until_feed_is_live().await;
    const PHONE: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1";
    const ANDROID: &str = "Mozilla/5.0 (Linux; Android 14; SAMSUNG SM-S918B) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/25.0 Chrome/121.0.0.0 Mobile Safari/537.36";
    const EDGE: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36 Edg/126.0.0.0";
    // (User-Agent, address, Referer, query), each visitor new.
    let load: [(Option<&str>, &str, Option<&str>, &str); 12] = [
        (Some(PHONE), "203.0.113.7", None, "?utm_source=flyer&utm_campaign=spring"),
        (Some(PHONE), "203.0.113.8", None, "?utm_source=flyer&utm_campaign=spring"),
        (Some(PHONE), "203.0.113.200", Some("https://News.example.com/a"), ""),
        (Some(ANDROID), "2001:db8:1::5", None, "?utm_source=poster"),
        (Some(ANDROID), "198.51.100.9", Some("android-app://com.google.android.gm/"), "?utm_campaign=spring+sale"),
        (Some(EDGE), "198.51.100.10", Some("https://www.example.org/"), ""),
        (Some(EDGE), "192.0.2.1", None, "?utm_source=mail&utm_medium=email"),
        (Some(BROWSER), "203.0.113.9", Some("not a url"), ""),
        (Some(BOT), "198.51.100.11", None, ""),
        (None, "203.0.113.10", None, "?utm_source=flyer"),
        (Some("Nokia3310"), "2001:db8:2::1", None, ""),
        (Some(PHONE), "203.0.113.11", None, "?x=1&utm_source=&utm_source=qr"),
    ];
    for (ua, from, referer, query) in load {
        let mut request = http().get(format!("{}/Mix01{query}", app.base)).header("X-Forwarded-For", from);
        if let Some(ua) = ua {
            request = request.header("User-Agent", ua);
        }
        if let Some(referer) = referer {
            request = request.header("Referer", referer);
        }
        assert_eq!(request.send().await.unwrap().status(), 302, "{ua:?} {query}");
    }
    app.stop().await.unwrap();

    let live =
        read_by(&clicks_as(&app.db, Some(READER)), &["Mix01".to_owned()], &Dimension::ALL, None, None).await.unwrap();
    let live_of = |d: Dimension| -> std::collections::BTreeMap<String, u64> {
        live.iter().filter(|r| r.dimension == d).map(|r| (r.value.clone(), r.redirects)).collect()
    };
    for d in Dimension::ALL {
        assert_eq!(live_of(d).values().sum::<u64>(), 12, "{d:?} adds up to the redirects: {live:#?}");
    }
    let report = report_by_json(&app, &geoip);
    let by = &report["links"].as_array().unwrap().iter().find(|l| l["id"] == "Mix01").unwrap()["by"];
    for d in [
        Dimension::Country,
        Dimension::Device,
        Dimension::Os,
        Dimension::Browser,
        Dimension::UtmSource,
        Dimension::UtmMedium,
        Dimension::UtmCampaign,
    ] {
        let reported: std::collections::BTreeMap<String, u64> = by[d.name()]
            .as_array()
            .unwrap_or_else(|| panic!("no {} in {by:#}", d.name()))
            .iter()
            .map(|v| (v["value"].as_str().unwrap().to_owned(), v["redirects"].as_u64().unwrap()))
            .collect();
        assert_eq!(live_of(d), reported, "{d:?}");
    }
    // Known answers too, so that the two cannot agree by both being wrong.
    let map = |pairs: &[(&str, u64)]| pairs.iter().map(|(v, n)| ((*v).to_owned(), *n)).collect();
    assert_eq!(
        live_of(Dimension::Country),
        map(&[("FR", 5), ("DE", 1), ("JP", 1), ("US", 3), ("BR", 1), ("(unknown)", 1)])
    );
    assert_eq!(live_of(Dimension::Device), map(&[("mobile", 6), ("desktop", 3), ("bot", 2), ("other", 1)]));
    assert_eq!(
        live_of(Dimension::Browser),
        map(&[("safari", 4), ("samsung", 2), ("edge", 2), ("firefox", 1), ("other", 3)])
    );
    assert_eq!(
        live_of(Dimension::Referrer),
        map(&[
            ("(none)", 8),
            ("news.example.com", 1),
            ("com.google.android.gm", 1),
            ("www.example.org", 1),
            ("(other)", 1)
        ])
    );
    assert_eq!(
        live_of(Dimension::UtmSource),
        map(&[("flyer", 3), ("poster", 1), ("mail", 1), ("qr", 1), ("(none)", 6)])
    );
    assert_eq!(live_of(Dimension::UtmMedium), map(&[("print", 11), ("email", 1)]));
    assert_eq!(live_of(Dimension::UtmCampaign), map(&[("spring", 2), ("spring sale", 1), ("(none)", 9)]));
    // Phones took the split (iPhone and Android: 6 redirects), on one variant or the other.
    let variants = live_of(Dimension::Variant);
    assert_eq!(variants.get("(none)"), Some(&6), "{variants:?} {:#?}", app.log_lines());
    // Each named by the URL it sends to.
    let named = ["(none)", "https://example.com/a?utm_medium=print", "https://example.com/b?utm_medium=print"];
    assert!(variants.keys().all(|v| named.contains(&v.as_str())), "{variants:?}");
}

#[tokio::test]
async fn a_version_is_what_the_link_decided_never_the_visitor_s_query_or_path() {
    let db = counted_db().await;
    db.put_link("Fbc01", json!({"url": "https://example.com/flyer"})).await;
    let mut app = spawn_app_on(db, |c| c.clicks = Some(counting("proxy-a", 3600))).await;
    app.wait_until_feed_is_live().await;
    // Every click from a platform that appends its own parameter, one with a path after the
    // ID, one plain: one version.
    for n in 0..5 {
        let r = get(&app, &format!("/Fbc01?fbclid=IwAR{n}x"), Some(BROWSER), None).await;
        assert_eq!(r.headers()["location"], format!("https://example.com/flyer?fbclid=IwAR{n}x"));
    }
    assert_eq!(get(&app, "/Fbc01/extra?gclid=9", Some(BROWSER), None).await.status(), 302);
    assert_eq!(get(&app, "/Fbc01", Some(BROWSER), None).await.status(), 302);
    app.stop().await.unwrap();

    let versions = clicks_versions(&app, "Fbc01");
    assert_eq!(
        versions["versions"],
        json!([{"link": "Fbc01", "location": "https://example.com/flyer", "redirects": 7}])
    );
    // The report of the same lines: the same one version.
    let report = report_json(&app);
    let link = report["links"].as_array().unwrap().iter().find(|l| l["id"] == "Fbc01").unwrap();
    let versions = link["versions"].as_array().unwrap();
    assert_eq!(versions.len(), 1, "{link:#}");
    assert_eq!((&versions[0]["location"], &versions[0]["redirects"]), (&json!("https://example.com/flyer"), &json!(7)));
}

#[tokio::test]
async fn two_proxies_are_summed_and_an_idle_proxy_writes_nothing() {
    let db = counted_db().await;
    db.put_link("Two01", json!({"url": "https://example.com/two"})).await;
    db.put_link("Two02", json!({"url": "https://example.com/two-after"})).await;
    let mut a = spawn_app_on(db, |c| c.clicks = Some(counting("proxy-a", 1))).await;
    let db_b = TestDb { name: a.db.name.clone(), couch: a.db.couch.clone() };
    let mut b = spawn_app_on(db_b, |c| c.clicks = Some(counting("proxy-b", 1))).await;
    for _ in 0..7 {
        assert_eq!(get(&a, "/Two01", Some(BROWSER), None).await.status(), 302);
    }
    for _ in 0..5 {
        assert_eq!(get(&b, "/Two01", Some(BROWSER), None).await.status(), 302);
    }
    // Written within an interval or two, by each proxy.
    wait_for_totals(&a.db, "Two01", 12).await;
    let written = documents(&a.db).await;
    let proxies: std::collections::BTreeSet<String> =
        written.iter().map(|d| d["proxy"].as_str().unwrap().to_owned()).collect();
    assert_eq!(proxies, ["proxy-a".to_owned(), "proxy-b".to_owned()].into());
    // Idle for three intervals (the clock is what is waited for: the interval now running and
    // the two after it have nothing counted), then one redirect each: written once each proxy
    // has closed the three idle intervals before it, which added no document.
    let idle_from = time::OffsetDateTime::now_utc().unix_timestamp();
    eventually("three one-second intervals pass", Duration::from_secs(10), || async {
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        holds(now >= idle_from + 3, now)
    })
    .await;
    assert_eq!(get(&a, "/Two02", Some(BROWSER), None).await.status(), 302);
    assert_eq!(get(&b, "/Two02", Some(BROWSER), None).await.status(), 302);
    wait_for_totals(&a.db, "Two02", 2).await;
    let after_idle: Vec<Value> =
        documents(&a.db).await.into_iter().filter(|d| !written.iter().any(|w| w["_id"] == d["_id"])).collect();
    assert!(
        after_idle.len() == 2 && after_idle.iter().all(|d| d["links"].as_object().unwrap().keys().eq(["Two02"])),
        "an idle proxy writes nothing: {after_idle:#?}"
    );
    a.stop().await.unwrap();
    b.stop().await.unwrap();
    assert_eq!(totals(&a.db, "Two01").await, [12, 0, 12, 0]);
    assert_eq!(documents(&a.db).await.len(), written.len() + 2, "nothing to write at the stop either");
}

/// Waits (at most 15 s) until link `id` has at least `redirects` redirects counted in CouchDB.
pub(crate) async fn wait_for_totals(db: &TestDb, id: &str, redirects: u64) {
    let what = format!("{redirects} redirects of {id} counted");
    eventually(&what, Duration::from_secs(15), || async {
        let counts = totals(db, id).await;
        holds(counts[0] >= redirects, counts)
    })
    .await;
}

#[tokio::test]
async fn every_serving_thread_hands_its_counts_over_each_interval_while_it_goes_on_serving() {
    let db = counted_db().await;
    db.put_link("Thrd1", json!({"url": "https://example.com/threads"})).await;
    // Two serving threads, each counting in its own memory with no lock: the writer asks each
    // for its counts at every interval.
    let mut app = spawn_app_on(db, |c| {
        c.workers = 2;
        c.clicks = Some(counting("proxy-a", 1));
    })
    .await;
    let accepted = |metrics: &str, worker: usize| -> f64 {
        let sample = format!("couchlink_connections_accepted_total{{worker=\"{worker}\"}} ");
        metrics.lines().find_map(|l| l.strip_prefix(&sample)).map_or(0.0, |n| n.parse().unwrap())
    };
    // A connection per request, until both threads have served some (the kernel deals them).
    let mut sent = 0;
    loop {
        let response = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap()
            .get(format!("{}/Thrd1", app.base))
            .header("Connection", "close")
            .header("User-Agent", BROWSER)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 302);
        sent += 1;
        let metrics = app.admin_get("/metrics").await.text().await.unwrap();
        if sent >= 10 && accepted(&metrics, 0) > 0.0 && accepted(&metrics, 1) > 0.0 {
            break;
        }
        assert!(sent < 400, "one thread took every connection: {metrics}");
    }
    // Written while the proxy goes on serving (not at its stop): each thread handed over.
    wait_for_totals(&app.db, "Thrd1", sent).await;
    assert!(app.metric("couchlink_clicks_documents_written_total").await >= 1.0);
    app.stop().await.unwrap();
    assert_eq!(totals(&app.db, "Thrd1").await[0], sent, "each count once");
}

/// The load: 322 redirects of one link in an interval from 300 referrer hosts, 297 of
/// them once each and coming first, three 12, 8 and 5 times: the three are kept, exactly.
#[tokio::test]
async fn the_most_frequent_referrers_are_kept_with_their_counts_whatever_came_first() {
    let db = counted_db().await;
    db.put_link("Ref01", json!({"url": "https://example.com/referrers"})).await;
    let mut app = spawn_app_on(db, |c| {
        c.workers = 2;
        c.clicks = Some(counting("proxy-a", 3600));
    })
    .await;
    let mut hosts: Vec<String> = (0..297).map(|k| format!("once{k}.example")).collect();
    for (host, n) in [("twelve.example", 12), ("eight.example", 8), ("five.example", 5)] {
        hosts.extend(std::iter::repeat_n(host.to_owned(), n));
    }
    let clients: Vec<reqwest::Client> = (0..2)
        .map(|_| reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap())
        .collect();
    for (k, host) in hosts.iter().enumerate() {
        let response = clients[k % 2]
            .get(format!("{}/Ref01", app.base))
            .header("User-Agent", BROWSER)
            .header("Referer", format!("https://{host}/page"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 302);
    }
    // The stop writes the interval.
    app.stop().await.unwrap();
    let mut referrers: std::collections::BTreeMap<String, u64> = std::collections::BTreeMap::new();
    for doc in documents(&app.db).await {
        for (host, n) in doc["links"]["Ref01"]["by"]["referrer"].as_object().into_iter().flatten() {
            *referrers.entry(host.clone()).or_default() += n.as_u64().unwrap();
        }
    }
    assert_eq!(referrers.values().sum::<u64>(), 322, "{referrers:?}");
    assert_eq!(referrers.get("twelve.example"), Some(&12), "{referrers:?}");
    assert_eq!(referrers.get("eight.example"), Some(&8), "{referrers:?}");
    assert_eq!(referrers.get("five.example"), Some(&5), "{referrers:?}");
    assert!(referrers.len() <= couchlink::clicks::by::TOP_VALUES + 1, "{referrers:?}");
}

#[tokio::test]
async fn only_proxies_write_counts_and_the_links_readers_and_editors_read_them() {
    let db = counted_db().await;
    let doc = json!({"_id": "2026-11-26T15:31:00Z/test/00ff/0", "type": "clicks", "proxy": "test", "run": "00ff",
        "start": "2026-11-26T15:31:00Z", "seconds": 60, "part": 0, "unknown_not_found": 1,
        "links": {"H83if": {"redirects": 2, "bot_redirects": 0, "new_visitors": 1, "not_found": 0,
            "versions": {"https://example.com/": 2},
            "by": {"device": {"mobile": 2}, "utm_source": {"flyer": 1, "(none)": 1}}}}});
    let id = doc["_id"].as_str().unwrap().to_owned();
    // The proxy's account (reader and proxy roles) writes a document once, never again.
    let proxy = clicks_as(&db, Some(READER));
    assert!(matches!(proxy.create_doc_raw(&id, &doc).await, Ok(couchlink::couch::Created::Stored(_))));
    let stored: Value =
        server_get(&db, None, &format!("{}/{}", clicks_name(&db), urlencode(&id))).await.json().await.unwrap();
    let mut changed = stored.clone();
    changed["unknown_not_found"] = json!(5);
    let refused = proxy.create_doc_raw(&id, &changed).await.unwrap_err();
    assert_eq!(refused.status(), Some(403), "{refused}");
    // A document not of the shape is refused, with a reason.
    let mut bad = doc.clone();
    bad["_id"] = json!("2026-11-26T15:32:00Z/test/00ff/0");
    bad["start"] = json!("2026-11-26T15:32:00Z");
    bad["links"]["H83if"]["redirects"] = json!(-1);
    let refused = proxy.create_doc_raw(bad["_id"].as_str().unwrap(), &bad).await.unwrap_err();
    assert_eq!(refused.status(), Some(403));
    assert!(refused.reason().unwrap_or_default().contains("whole number"), "{refused}");
    // Breakdowns are of the documented names, each value a count.
    for (by, says) in [
        (json!({"shoe_size": {"42": 1}}), "no breakdown \"shoe_size\""),
        (json!({"device": {"mobile": 1.5}}), "whole number"),
        (json!({"device": [1]}), "object of counts"),
        (json!([]), "\"by\" is an object"),
    ] {
        let mut bad = doc.clone();
        bad["_id"] = json!("2026-11-26T15:34:00Z/test/00ff/0");
        bad["start"] = json!("2026-11-26T15:34:00Z");
        bad["links"]["H83if"]["by"] = by.clone();
        let refused = proxy.create_doc_raw(bad["_id"].as_str().unwrap(), &bad).await.unwrap_err();
        assert_eq!(refused.status(), Some(403), "{by}");
        assert!(refused.reason().unwrap_or_default().contains(says), "{by}: {refused}");
    }
    // The proxy still cannot write links.
    let link = db.client_as(Some(READER)).create_doc_raw("Prox1", &json!({"url": "https://example.com/"})).await;
    assert_eq!(link.unwrap_err().status(), Some(403), "the proxy role writes counts, not links");

    // An editor reads them, and cannot write them.
    let editor = clicks_as(&db, Some(EDITOR));
    let rows = read(&editor, &["H83if".to_owned()], Period::Total, None, None).await.unwrap();
    assert_eq!(rows[0].counts, [2, 0, 1, 0]);
    let mut other = doc.clone();
    other["_id"] = json!("2026-11-26T15:33:00Z/test/00ff/0");
    other["start"] = json!("2026-11-26T15:33:00Z");
    assert_eq!(
        editor.create_doc_raw("2026-11-26T15:33:00Z/test/00ff/0", &other).await.unwrap_err().status(),
        Some(403)
    );
    // A reader of the links who is not a proxy reads, and cannot write.
    let plain_reader = ("clicks-plain-reader", "plain-pw");
    ensure_user(couch(), plain_reader, READER_ROLE).await;
    let reader = clicks_as(&db, Some(plain_reader));
    assert_eq!(read(&reader, &["H83if".to_owned()], Period::Total, None, None).await.unwrap()[0].counts, [2, 0, 1, 0]);
    assert_eq!(
        reader.create_doc_raw("2026-11-26T15:33:00Z/test/00ff/0", &other).await.unwrap_err().status(),
        Some(403)
    );
    // Anonymous: nothing.
    let anonymous = http().get(format!("{}/{}/_all_docs", db.couch.url, clicks_name(&db))).send().await.unwrap();
    assert_eq!(anonymous.status(), 401);
    // Someone with the roles of another database: nothing (pouchdb-server answers 401 where
    // CouchDB 3 says 403; either refuses).
    let stranger = ("clicks-stranger", "stranger-pw");
    ensure_user(couch(), stranger, "other_db:reader").await;
    let r = server_get(&db, Some(stranger), &format!("{}/_all_docs", clicks_name(&db))).await;
    assert!(matches!(r.status().as_u16(), 401 | 403), "{}", r.status());
}

fn urlencode(id: &str) -> String {
    id.replace('/', "%2F").replace(':', "%3A")
}

#[tokio::test]
async fn an_outage_keeps_the_counts_and_writes_each_once_when_couchdb_is_back() {
    let relay = Relay::start(&couch().url).await;
    let db = counted_db().await;
    db.put_link("Out01", json!({"url": "https://example.com/out"})).await;
    let url = relay.url();
    let mut app = spawn_app_on(db, move |c| {
        c.couch.url = url;
        c.clicks = Some(counting("proxy-a", 1));
    })
    .await;
    app.wait_until_feed_is_live().await;
    for _ in 0..3 {
        assert_eq!(get(&app, "/Out01", Some(BROWSER), None).await.status(), 302);
    }
    relay.cut();
    // Known links keep redirecting; their counts wait.
    for _ in 0..4 {
        assert_eq!(get(&app, "/Out01", Some(BROWSER), None).await.status(), 302);
    }
    app.wait_for_metric("couchlink_clicks_failing", 1.0).await;
    assert!(app.metric("couchlink_clicks_pending_documents").await >= 1.0);
    relay.restore();
    eventually("the counts waiting are written", Duration::from_secs(15), || async {
        let pending = app.metric("couchlink_clicks_pending_documents").await;
        let failing = app.metric("couchlink_clicks_failing").await;
        holds(pending == 0.0 && failing == 0.0, (pending, failing))
    })
    .await;
    app.stop().await.unwrap();
    assert_eq!(totals(&app.db, "Out01").await[0], 7, "every redirect counted once");
}

#[tokio::test]
async fn couchdb_s_document_size_is_read_by_an_admin_and_a_proxy_asking_is_not_taken_for_a_bad_password() {
    let db = counted_db().await;
    let proxy = clicks_as(&db, Some(READER));
    assert_eq!(proxy.max_document_size().await, None, "not a server admin");
    assert!(!proxy.account_refused(), "CouchDB's 401 for the configuration is not a refused password");
    // Set to CouchDB 3's own default (a server left at its default says not_found), which
    // changes nothing for the other tests on the server; pouchdb-server has no such setting.
    let _ = http()
        .put(format!("{}/_node/_local/_config/couchdb/max_document_size", db.couch.url))
        .basic_auth(&db.couch.admin_user, Some(&db.couch.admin_password))
        .json(&json!("8000000"))
        .send()
        .await;
    let admin = clicks_as(&db, None).max_document_size().await;
    assert!(admin == Some(8_000_000) || (couch().is_pouchdb && admin.is_none()), "{admin:?}");
}

/// Makes the clicks database's own validation (as the admin) refuse the counts documents for
/// which `condition` (JavaScript, of `doc`) holds.
async fn refuse_counts(db: &TestDb, condition: &str) {
    let path = format!("{}/_design/refuse", clicks_name(db));
    let mut body = json!({"validate_doc_update": format!(
        "function (doc) {{ if (doc.links && ({condition})) {{ throw({{forbidden: 'not these counts'}}); }} }}")});
    let old: Value = server_get(db, None, &path).await.json().await.unwrap();
    if let Some(rev) = old["_rev"].as_str() {
        body["_rev"] = json!(rev);
    }
    let made = http()
        .put(format!("{}/{path}", db.couch.url))
        .basic_auth(&db.couch.admin_user, Some(&db.couch.admin_password))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert!(made.status().is_success(), "{:?}", made.text().await);
}

#[tokio::test]
async fn a_document_couchdb_refuses_is_set_aside_and_the_intervals_after_it_are_written() {
    let db = counted_db().await;
    db.put_link("Refus", json!({"url": "https://example.com/refused"})).await;
    db.put_link("After", json!({"url": "https://example.com/after"})).await;
    // A validation of the admin's own that refuses one link's counts for good (403), as
    // CouchDB refuses a document too large for it (413): either is never taken, however often
    // it is tried.
    refuse_counts(&db, "doc.links.Refus").await;
    let mut app = spawn_app_on(db, |c| c.clicks = Some(counting("proxy-a", 1))).await;
    app.wait_until_feed_is_live().await;
    for _ in 0..2 {
        assert_eq!(get(&app, "/Refus", Some(BROWSER), None).await.status(), 302);
    }
    // Once the proxy has tried the interval holding them (refused, it waits: not yet known to be
    // the document's own refusal), honest traffic: it is written, and tells that the refusal was
    // the document's own. Not a fixed wait of an interval: under load a serving thread hands its
    // counts over after the writer took the interval's, they go with the next one, and one
    // document holding both links would be refused whole.
    app.wait_for_metric("couchlink_clicks_failing", 1.0).await;
    for _ in 0..3 {
        assert_eq!(get(&app, "/After", Some(BROWSER), None).await.status(), 302);
    }
    app.wait_for_metric("couchlink_clicks_refused_documents_total", 1.0).await;
    wait_for_totals(&app.db, "After", 3).await;
    assert_eq!(app.metric("couchlink_clicks_lost_total").await, 2.0);
    let body: Value = app.admin_get("/healthz").await.json().await.unwrap();
    assert_eq!(
        (&body["clicks"]["documents_refused"], &body["clicks"]["lost"], &body["clicks"]["pending_documents"]),
        (&json!(1), &json!(2), &json!(0)),
        "{body:#}"
    );
    assert_eq!(body["clicks"]["status"], "degraded", "{body:#}");

    // Every document refused alike (the account's rights, say): nothing is set aside, the
    // counts wait, and are written once CouchDB takes them again.
    refuse_counts(&app.db, "true").await;
    // Three redirects in intervals of their own: each waits for the last one's document to be
    // queued (and refused), however late a serving thread hands its count over.
    for n in 0..3 {
        assert_eq!(get(&app, "/After", Some(BROWSER), None).await.status(), 302);
        if n < 2 {
            app.wait_for_metric("couchlink_clicks_pending_documents", f64::from(n + 1)).await;
        }
    }
    app.wait_for_metric("couchlink_clicks_failing", 1.0).await;
    assert!(app.metric("couchlink_clicks_pending_documents").await >= 2.0);
    assert_eq!(app.metric("couchlink_clicks_refused_documents_total").await, 1.0, "none set aside");
    refuse_counts(&app.db, "false").await;
    wait_for_totals(&app.db, "After", 6).await;
    app.stop().await.unwrap();
    assert_eq!(totals(&app.db, "After").await[0], 6);
    assert_eq!(totals(&app.db, "Refus").await[0], 0);
}

#[tokio::test]
async fn a_refusal_the_admin_fixes_within_the_interval_after_a_later_document_was_taken_loses_nothing() {
    // The cause of a flake of the test above: an admin's fix can land between two tries of one
    // round, the first document refused by the old validation and the next taken by the new.
    // Taken alone, that looked like the first document's own refusal and lost its counts. Here
    // the same order, made sure of: one document refused, a later one taken, then the fix.
    let db = counted_db().await;
    db.put_link("Fixed", json!({"url": "https://example.com/fixed"})).await;
    db.put_link("Other", json!({"url": "https://example.com/other"})).await;
    refuse_counts(&db, "doc.links.Fixed").await;
    // Intervals of 5 s: the fix below comes well within the one after the taking.
    let mut app = spawn_app_on(db, |c| c.clicks = Some(counting("proxy-a", 5))).await;
    app.wait_until_feed_is_live().await;
    // Each a round away, up to an interval and its write: longer than `wait_for_metric`'s 5 s.
    let metric_reaches = |sample: &'static str| {
        let app = &app;
        async move {
            eventually(&format!("{sample} reaches 1"), Duration::from_secs(15), || async {
                let value = app.metric(sample).await;
                holds(value >= 1.0, value)
            })
            .await
        }
    };
    assert_eq!(get(&app, "/Fixed", Some(BROWSER), None).await.status(), 302);
    metric_reaches("couchlink_clicks_failing").await;
    assert_eq!(get(&app, "/Other", Some(BROWSER), None).await.status(), 302);
    metric_reaches("couchlink_clicks_documents_written_total").await;
    refuse_counts(&app.db, "false").await;
    wait_for_totals(&app.db, "Fixed", 1).await;
    assert_eq!(app.metric("couchlink_clicks_refused_documents_total").await, 0.0);
    assert_eq!(app.metric("couchlink_clicks_lost_total").await, 0.0);
    app.stop().await.unwrap();
    assert_eq!(totals(&app.db, "Other").await[0], 1);
}

#[tokio::test]
async fn counts_past_the_bound_are_lost_and_said_so_and_a_stop_writes_what_is_left() {
    // No clicks database: CouchDB answers, and refuses the counts (404) until setup makes it.
    let db = TestDb::new().await;
    db.put_link("Lost1", json!({"url": "https://example.com/lost"})).await;
    let app = spawn_app_on(db, |c| {
        c.clicks = Some(ClicksConfig { queue_bytes: 1, ..counting("proxy-a", 1) });
    })
    .await;
    app.wait_until_feed_is_live().await;
    for _ in 0..3 {
        assert_eq!(get(&app, "/Lost1", Some(BROWSER), None).await.status(), 302);
    }
    app.wait_for_metric("couchlink_clicks_lost_total", 3.0).await;
    let health = app.admin_get("/healthz").await;
    assert_eq!(health.status(), 200, "redirects go on");
    let body: Value = health.json().await.unwrap();
    assert_eq!(body["status"], "degraded", "{body:#}");
    assert_eq!(body["clicks"]["lost"], 3, "{body:#}");

    // A stop writes what is left: counting every hour, the interval never ends before it.
    let db = counted_db().await;
    db.put_link("Stop1", json!({"url": "https://example.com/stop"})).await;
    let mut app = spawn_app_on(db, |c| c.clicks = Some(counting("proxy-a", 3600))).await;
    for _ in 0..5 {
        assert_eq!(get(&app, "/Stop1", Some(BOT), None).await.status(), 302);
    }
    assert_eq!(documents(&app.db).await.len(), 0);
    app.stop().await.unwrap();
    assert_eq!(totals(&app.db, "Stop1").await, [5, 5, 5, 0]);
}

/// A counts document of `start` by `proxy`, counting `redirects` to link `id`.
fn interval(start: &str, proxy: &str, id: &str, redirects: u64) -> Value {
    json!({"_id": format!("{start}/{proxy}/00ff/0"), "type": "clicks", "proxy": proxy, "run": "00ff",
        "start": start, "seconds": 60, "part": 0, "unknown_not_found": 1,
        "links": {id: {"redirects": redirects, "bot_redirects": 1, "new_visitors": redirects, "not_found": 0,
            "versions": {format!("https://example.com/{id}"): redirects},
            "by": {"device": {"bot": 1, "mobile": redirects - 1}, "utm_source": {"flyer": redirects}}}}})
}

/// `by_version` of link `id`: each version's redirects.
async fn by_version(db: &TestDb, id: &str) -> std::collections::BTreeMap<String, u64> {
    let keys = format!("startkey=[\"{id}\"]&endkey=[\"{id}\",{{}}]");
    let path = format!("{}/_design/clicks/_view/by_version?group=true&{keys}", clicks_name(db));
    let body: Value = server_get(db, None, &path).await.json().await.unwrap();
    let rows = body["rows"].as_array().unwrap_or_else(|| panic!("{body}"));
    rows.iter().map(|r| (r["key"][1].as_str().unwrap().to_owned(), r["value"].as_u64().unwrap())).collect()
}

#[tokio::test]
async fn a_rolled_up_day_keeps_every_version_it_merges_its_versions_adding_up_to_its_redirects() {
    let db = counted_db().await;
    let proxy = clicks_as(&db, Some(READER));
    // Three intervals of 20 versions each: 60 versions in the day, past the 32 kept by name.
    for (n, start) in ["2026-10-01T08:00:00Z", "2026-10-01T09:00:00Z", "2026-10-01T10:00:00Z"].iter().enumerate() {
        let versions: serde_json::Map<String, Value> =
            (0..20).map(|v| (format!("https://example.com/v{}", n * 20 + v), json!(v + 1))).collect();
        let doc = json!({"_id": format!("{start}/web-1/00ff/0"), "type": "clicks", "proxy": "web-1", "run": "00ff",
            "start": start, "seconds": 3600, "part": 0, "unknown_not_found": 0,
            "links": {"Ver01": {"redirects": 210, "bot_redirects": 0, "new_visitors": 0, "not_found": 0,
                "versions": versions}}});
        proxy.create_doc_raw(doc["_id"].as_str().unwrap(), &doc).await.unwrap();
    }
    let before = by_version(&db, "Ver01").await;
    assert_eq!((before.len(), before.values().sum::<u64>()), (60, 630));
    couchlink::clicks::rollup::roll_up_day(&clicks_as(&db, None), "2026-10-01").await.unwrap();
    let after = by_version(&db, "Ver01").await;
    assert_eq!(after.values().sum::<u64>(), 630, "the day's versions add up to its redirects: {after:?}");
    assert_eq!(totals(&db, "Ver01").await[0], 630);
    assert_eq!(after.len(), 33, "32 by name and the rest: {after:?}");
    let other = after[couchlink::clicks::OTHER_VERSIONS];
    let kept: u64 = after
        .iter()
        .filter(|(v, _)| *v != couchlink::clicks::OTHER_VERSIONS)
        .map(|(v, n)| {
            assert_eq!(before[v], *n, "{v} kept whole");
            n
        })
        .sum();
    assert_eq!(kept + other, 630);
}

#[tokio::test]
async fn the_views_are_read_a_page_at_a_time_and_every_row_once() {
    let db = counted_db().await;
    let proxy = clicks_as(&db, Some(READER));
    for (n, hour) in (0..7).enumerate() {
        let doc = interval(&format!("2026-10-01T{hour:02}:00:00Z"), "web-1", "Pag01", n as u64 + 1);
        proxy.create_doc_raw(doc["_id"].as_str().unwrap(), &doc).await.unwrap();
    }
    let reader = clicks_as(&db, Some(EDITOR));
    let query = || couchlink::couch::ViewQuery { group_level: Some(5), ..Default::default() };
    let whole = reader.view("clicks", "by_link", &query()).await.unwrap();
    assert_eq!(whole.len(), 7);
    for page in [2, 3, 7, 100] {
        let paged = couchlink::cmd::clicks::view_rows(&reader, "by_link", query(), page).await.unwrap();
        assert_eq!(paged, whole, "pages of {page}");
    }
    let hours = read(&reader, &["Pag01".to_owned()], Period::Hour, None, None).await.unwrap();
    assert_eq!(hours.iter().map(|r| r.counts[0]).collect::<Vec<_>>(), [1, 2, 3, 4, 5, 6, 7]);
}

#[tokio::test]
async fn old_intervals_roll_up_into_daily_documents_counting_each_once() {
    use couchlink::clicks::rollup::{roll_up, roll_up_day};
    let db = counted_db().await;
    let proxy = clicks_as(&db, Some(READER));
    let written = [
        interval("2026-10-01T08:00:00Z", "web-1", "Rol01", 3),
        interval("2026-10-01T08:01:00Z", "web-1", "Rol01", 4),
        interval("2026-10-01T23:59:00Z", "web-2", "Rol02", 5),
        interval("2026-10-02T00:00:00Z", "web-1", "Rol01", 6),
        interval("2026-10-05T12:00:00Z", "web-1", "Rol01", 7),
    ];
    for doc in &written {
        proxy.create_doc_raw(doc["_id"].as_str().unwrap(), doc).await.unwrap();
    }
    let before = (totals(&db, "Rol01").await, totals(&db, "Rol02").await, whole_database(&db).await);
    assert_eq!(before.0, [20, 4, 20, 0]);

    let admin = clicks_as(&db, None);
    let until = time::macros::date!(2026 - 10 - 03);
    let days = roll_up(&admin, until).await.unwrap();
    let rolled: Vec<(&str, usize, usize)> = days.iter().map(|d| (d.day.as_str(), d.deleted, d.parts)).collect();
    assert_eq!(rolled, [("2026-10-01", 3, 1), ("2026-10-02", 1, 1)]);
    assert_eq!((totals(&db, "Rol01").await, totals(&db, "Rol02").await, whole_database(&db).await), before);
    let ids: Vec<String> = documents(&db).await.iter().map(|d| d["_id"].as_str().unwrap().to_owned()).collect();
    assert_eq!(
        ids,
        [
            "2026-10-01T00:00:00Z/rollup/0000000000000000/0",
            "2026-10-02T00:00:00Z/rollup/0000000000000000/0",
            "2026-10-05T12:00:00Z/web-1/00ff/0"
        ]
    );
    // Again: nothing to do.
    let again = roll_up(&admin, until).await.unwrap();
    assert!(again.iter().all(|d| d.deleted == 0), "{again:?}");
    assert_eq!(totals(&db, "Rol01").await, before.0);

    // An earlier run stopped between its two writes: an original it included is still there.
    // It is deleted, not counted again. One written later (a proxy's backlog) is added.
    let admin_raw = db.client_as(None).for_database(&clicks_name(&db));
    admin_raw.create_doc_raw(written[0]["_id"].as_str().unwrap(), &written[0]).await.unwrap();
    let late = interval("2026-10-01T09:00:00Z", "web-3", "Rol01", 10);
    proxy.create_doc_raw(late["_id"].as_str().unwrap(), &late).await.unwrap();
    let day = roll_up_day(&admin, "2026-10-01").await.unwrap();
    assert_eq!((day.deleted, day.parts), (2, 1));
    assert_eq!(totals(&db, "Rol01").await, [30, 5, 30, 0], "the late interval once, the included one not again");
    let versions = read(&clicks_as(&db, Some(EDITOR)), &["Rol02".to_owned()], Period::Day, None, None).await.unwrap();
    assert_eq!(versions, [Row { id: "Rol02".into(), period: "2026-10-01".into(), counts: [5, 1, 5, 0] }]);
    // The breakdowns are rolled up with the rest, every value kept, a range of days or months.
    let reader = clicks_as(&db, Some(EDITOR));
    let by = |rows: Vec<couchlink::cmd::clicks::ValueRow>| -> Vec<(String, u64)> {
        rows.into_iter().map(|r| (r.value, r.redirects)).collect()
    };
    let ids = ["Rol01".to_owned()];
    let all = read_by(&reader, &ids, &[Dimension::Device], None, None).await.unwrap();
    assert_eq!(by(all), [("mobile".to_owned(), 25), ("bot".to_owned(), 5)]);
    let first_day = read_by(&reader, &ids, &[Dimension::UtmSource], Some("2026-10-01"), Some("2026-10-01")).await;
    assert_eq!(by(first_day.unwrap()), [("flyer".to_owned(), 17)]);
}

#[tokio::test]
async fn one_process_rolls_up_the_days_past_the_age_every_round_and_stops_on_sigterm() {
    let db = counted_db().await;
    let proxy = clicks_as(&db, Some(READER));
    let day = |ago: i64| (time::OffsetDateTime::now_utc().date() - time::Duration::days(ago)).to_string();
    let old = interval(&format!("{}T10:00:00Z", day(10)), "web-1", "Age01", 4);
    let recent = interval(&format!("{}T10:00:00Z", day(2)), "web-1", "Age01", 5);
    for doc in [&old, &recent] {
        proxy.create_doc_raw(doc["_id"].as_str().unwrap(), doc).await.unwrap();
    }
    let mut child = tokio::process::Command::from(couchlink_command())
        .args(["clicks", "--roll-up-older-than", "7", "--every", "1"])
        .env("COUCHLINK_COUCHDB_URL", &db.couch.url)
        .env("COUCHLINK_COUCHDB_USER", &db.couch.admin_user)
        .env("COUCHLINK_COUCHDB_PASSWORD", &db.couch.admin_password)
        .env("COUCHLINK_DB", &db.name)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let ids =
        || async { documents(&db).await.iter().map(|d| d["_id"].as_str().unwrap().to_owned()).collect::<Vec<_>>() };
    let rolled = |d: &str| format!("{d}T00:00:00Z/rollup/0000000000000000/0");
    let wait_for = |want: Vec<String>| {
        let ids = &ids;
        async move {
            let what = format!("the documents are {want:?}");
            eventually(&what, Duration::from_secs(20), || async {
                let got = ids().await;
                holds(got == want, got)
            })
            .await
        }
    };
    // The first round rolls the day 10 days ago up; 2 days ago is within the age, kept as it is.
    wait_for(vec![rolled(&day(10)), recent["_id"].as_str().unwrap().to_owned()]).await;
    // A proxy's late interval of an old day (its backlog) is rolled up by a later round.
    let late = interval(&format!("{}T11:00:00Z", day(9)), "web-2", "Age01", 6);
    proxy.create_doc_raw(late["_id"].as_str().unwrap(), &late).await.unwrap();
    wait_for(vec![rolled(&day(10)), rolled(&day(9)), recent["_id"].as_str().unwrap().to_owned()]).await;
    assert_eq!(totals(&db, "Age01").await, [15, 3, 15, 0], "every count kept");
    let pid = child.id().unwrap().to_string();
    assert!(std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let out = tokio::time::timeout(Duration::from_secs(10), child.wait()).await.expect("stopped on SIGTERM").unwrap();
    assert!(out.success(), "{out:?}");
    let mut said = String::new();
    tokio::io::AsyncReadExt::read_to_string(child.stdout.as_mut().unwrap(), &mut said).await.unwrap();
    assert!(said.contains(&format!("{}: 1 documents rolled into 1", day(10))), "{said}");
}

#[tokio::test]
async fn a_sigterm_during_the_first_round_of_roll_ups_ends_them_once_it_is_done() {
    // CouchDB slowed down (each request held 1 s): the first round is still under way when
    // SIGTERM comes. Before the signal was caught from the start, its default action ended the
    // process ("signal 15"): seen as a flake of the test above under load.
    let db = counted_db().await;
    let relay = Relay::start(&db.couch.url).await;
    relay.delay(1000);
    let mut child = tokio::process::Command::from(couchlink_command())
        .args(["clicks", "--roll-up-older-than", "7", "--every", "1"])
        .env("COUCHLINK_COUCHDB_URL", relay.url())
        .env("COUCHLINK_COUCHDB_USER", &db.couch.admin_user)
        .env("COUCHLINK_COUCHDB_PASSWORD", &db.couch.admin_password)
        .env("COUCHLINK_DB", &db.name)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    eventually("the first round asks CouchDB", Duration::from_secs(10), || async {
        holds(relay.open() > 0, relay.open())
    })
    .await;
    let pid = child.id().unwrap().to_string();
    assert!(std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let out =
        tokio::time::timeout(Duration::from_secs(20), child.wait()).await.expect("stopped after SIGTERM").unwrap();
    assert!(out.success(), "{out:?}");
    let mut said = String::new();
    tokio::io::AsyncReadExt::read_to_string(child.stdout.as_mut().unwrap(), &mut said).await.unwrap();
    assert!(said.contains("nothing to roll up before"), "the round was done: {said}");
}
