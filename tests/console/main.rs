//! The console in a real browser (headless Chromium over WebDriver) on Apache CouchDB 3.5,
//! with `couchlink serve` on the same database: an editor logs in, creates a link, follows it
//! through the proxy, re-points it and sees the proxy follow within a second, is refused with
//! CouchDB's reason, searches, sees stored scripts stay text, and logs out; a reader gets no edit
//! control and a forged write from the page is refused by CouchDB; a write from another origin
//! is refused by the console; a database the account may not read is not offered. The proxy
//! counts every second while the console keeps its own default (a minute): an open page shows
//! new counts within the proxy's interval and 2 s, and a limited link's visits as the proxy
//! admitted them.
//!
//! Not part of the plain `cargo test` (it needs Chromium, chromedriver and a CouchDB 3: the one
//! `COUCHLINK_TEST_COUCHDB_URL` names, or else a node of its own started with the `couchdb.sh`
//! that `COUCHLINK_COUCHDB_SH` names); `.ci/run` runs it with `cargo test --test console`.
//! Screenshots of every step go to `target/console-screenshots/` (docs/console.md shows them).

#[path = "../support/mod.rs"]
mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use fantoccini::Locator;
use serde_json::{json, Value};

use couchlink::console::{Console, ConsoleSite};
use couchlink::domain::PublicUrl;
use support::apache::ApacheCouchDb;
use support::browser::Browser;
use support::process::ServeProcess;
use support::{test_setup, TestDb, EDITOR, EDITOR_ROLE, READER};

/// The freshness couchlink promises an edit.
const FRESH: Duration = Duration::from_secs(1);

/// The proxy's live counts interval here (`COUCHLINK_CLICKS_INTERVAL_SECS`); the console keeps
/// its own default.
const PROXY_INTERVAL: &str = "1";

/// How soon an open page shows new counts: the proxies' interval and 2 s, and 300 ms for this
/// test's own polling and the browser's rendering.
const LIVE: Duration = Duration::from_millis(1000 + 2000 + 300);

/// A browser's User-Agent: its redirects use a limited link's visits (a bot's do not).
const DESKTOP: &str =
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36";

/// Types `text` into the field labelled by `css`, replacing what it held.
async fn fill(browser: &Browser, css: &str, text: &str) {
    // The page may render again between finding the field and typing (a reload finishing):
    // a stale field is looked for again, a few times.
    for _ in 0..5 {
        let field = browser.find(css).await;
        if field.clear().await.is_ok() && field.send_keys(text).await.is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{css} kept going stale");
}

/// Waits (at most 10 s) until the page's text contains `text`.
async fn page_says(browser: &Browser, text: &str) -> String {
    let started = Instant::now();
    loop {
        let body = browser.find("body").await.text().await.unwrap_or_default();
        if body.contains(text) {
            return body;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "the page never said {text:?}; it says:\n{body}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn log_in(browser: &Browser, console: &str, who: (&str, &str)) {
    open_console(browser, console).await;
    fill(browser, "#name", who.0).await;
    fill(browser, "#password", who.1).await;
    browser.click("form[aria-label='Log in'] button[type=submit]").await;
    page_says(browser, "Log out").await;
}

async fn buttons(browser: &Browser) -> Vec<String> {
    let mut names = Vec::new();
    for button in browser.client.find_all(Locator::Css("button")).await.unwrap() {
        names.push(button.text().await.unwrap_or_default());
    }
    names
}

/// Where the proxy sends `GET /{id}`.
async fn location(proxy: &ServeProcess, id: &str) -> Option<String> {
    let response = proxy.get(&format!("/{id}")).await?;
    (response.status() == 302).then(|| response.headers()["location"].to_str().unwrap().to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_editor_and_a_reader_use_the_console_and_couchdb_decides_every_write() {
    let own = std::env::var_os("COUCHLINK_TEST_COUCHDB_URL").is_none().then(ApacheCouchDb::single);
    let db = match &own {
        Some(couchdb) => TestDb::named_on(&couchdb.couch(0), "links").await,
        None => TestDb::new().await,
    };
    let clicks_db = format!("{}_clicks", db.name);
    let reader = couchlink::cmd::setup::Reader { name: READER.0.into(), password: READER.1.into() };
    let history_db = format!("{}_history", db.name);
    let options = couchlink::cmd::setup::SetupOptions {
        clicks_db: Some(clicks_db.clone()),
        history_db: Some(history_db.clone()),
        ..test_setup()
    };
    couchlink::cmd::setup::run(&db.client_as(None), Some(&reader), &options).await.unwrap();

    // A second database the test accounts may not read.
    let http = support::http();
    let other = format!("{}_other", db.name);
    let admin = (&db.couch.admin_user, Some(&db.couch.admin_password));
    let made = http.put(format!("{}/{other}", db.couch.url)).basic_auth(admin.0, admin.1).send().await.unwrap();
    assert!(made.status().is_success(), "{:?}", made.text().await);
    let security = json!({"members": {"roles": ["someone-else:reader"]}, "admins": {"roles": []}});
    http.put(format!("{}/{other}/_security", db.couch.url))
        .basic_auth(admin.0, admin.1)
        .json(&security)
        .send()
        .await
        .unwrap();

    let proxy = ServeProcess::start(
        "couchlink",
        &[
            ("COUCHLINK_COUCHDB_URL", &db.couch.url),
            ("COUCHLINK_COUCHDB_USER", READER.0),
            ("COUCHLINK_COUCHDB_PASSWORD", READER.1),
            ("COUCHLINK_DB", &db.name),
            ("COUCHLINK_CLICKS_DB", &clicks_db),
            ("COUCHLINK_CLICKS_INTERVAL_SECS", PROXY_INTERVAL),
        ],
    );
    let public_url = PublicUrl::parse(&format!("http://{}", proxy.addr)).unwrap();
    // A second database the editor may read (several domains): the console offers a choice.
    let second = TestDb::new_on(&db.couch).await;
    second.put_link("Sec01", json!({"url": "https://example.com/second-domain", "inactive": false})).await;
    let sites = vec![
        ConsoleSite {
            db: db.name.clone(),
            public_url: public_url.clone(),
            clicks_db: Some(clicks_db),
            history_db: Some(history_db.clone()),
            editor_role: EDITOR_ROLE.into(),
        },
        ConsoleSite {
            db: other.clone(),
            public_url: public_url.clone(),
            clicks_db: None,
            history_db: None,
            editor_role: "someone-else:editor".into(),
        },
        ConsoleSite {
            db: second.name.clone(),
            public_url,
            clicks_db: None,
            history_db: None,
            editor_role: EDITOR_ROLE.into(),
        },
    ];
    let couch_url = url::Url::parse(&db.couch.url).unwrap();
    let couch_url = {
        let mut u = couch_url;
        u.set_username("").unwrap();
        u.set_password(None).unwrap();
        u
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let console_addr = listener.local_addr().unwrap();
    let limits = couchlink::http::accept::Limits::new(64, Duration::from_secs(10));
    // The console's own interval stays its default: the page follows the proxy's, as its counts
    // documents state it.
    let console = Console::new(sites, couch_url, false).unwrap();
    assert!(console.clicks_interval_secs >= 60, "the console's default is a minute or more");
    tokio::spawn(couchlink::http::accept::run(
        listener,
        Arc::new(console),
        limits,
        std::future::pending::<()>(),
        Duration::from_secs(1),
    ));
    let console = format!("http://{console_addr}/");
    let mut browser = Browser::start("console-screenshots").await;

    // The editor logs in; the database it may not read is not offered.
    open_console(&browser, &console).await;
    browser.find("#name").await;
    browser.shot("log-in").await;
    log_in(&browser, &console, EDITOR).await;
    let said = page_says(&browser, "(editor)").await;
    let mut offered = Vec::new();
    for option in browser.client.find_all(Locator::Css("#db option")).await.unwrap() {
        offered.push(option.text().await.unwrap());
    }
    assert_eq!(offered, [db.name.clone(), second.name.clone()], "only the databases the editor may read");
    assert!(!said.contains(&other), "a database the editor may not read is offered:\n{said}");
    browser.find("#db").await.select_by_value(&second.name).await.unwrap();
    page_says(&browser, "https://example.com/second-domain").await;
    browser.find("#db").await.select_by_value(&db.name).await.unwrap();
    let said = page_says(&browser, "No links yet").await;
    assert!(!said.contains("second-domain"), "{said}");

    // A new link, under a fresh random ID.
    browser.click("section[aria-label=Links] button").await;
    fill(&browser, "#f-url", "https://example.com/spring").await;
    fill(&browser, "#f-title", "Spring flyer").await;
    fill(&browser, "#f-tags", "flyer, print").await;
    browser.shot("new-link").await;
    browser.click("form[aria-label='New link'] button[type=submit]").await;
    let short = browser.find("output[aria-label='Short URL']").await.text().await.unwrap();
    let id = short.rsplit('/').next().unwrap().to_owned();
    assert_eq!(couchlink::domain::LinkId::parse(&id).unwrap().as_str(), id);
    let stored: Value = db.admin(reqwest::Method::GET, &id, None).await.json().await.unwrap();
    assert_eq!(
        (stored["url"].as_str(), stored["title"].as_str()),
        (Some("https://example.com/spring"), Some("Spring flyer"))
    );
    assert_eq!(stored["tags"], json!(["flyer", "print"]));
    assert!(stored["created"].is_string(), "{stored}");

    // The proxy serves it, and follows a re-pointing within a second.
    let started = Instant::now();
    while location(&proxy, &id).await.as_deref() != Some("https://example.com/spring") {
        assert!(started.elapsed() < Duration::from_secs(10), "the proxy never served the new link");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The QR tag is couchlink's, of the short URL, for a visitor CouchDB lets read the database.
    let cookies = browser.client.get_all_cookies().await.unwrap();
    let session =
        cookies.iter().find(|c| c.name() == "AuthSession").expect("CouchDB's session cookie").value().to_owned();
    let tag = http
        .get(format!("{console}qr/{}/{id}.svg", db.name))
        .header("cookie", format!("AuthSession={session}"))
        .send()
        .await
        .unwrap();
    assert_eq!(tag.headers()["content-type"], "image/svg+xml");
    let anonymous = http.get(format!("{console}qr/{}/{id}.svg", db.name)).send().await.unwrap();
    assert_eq!(anonymous.status(), 401, "a tag for a visitor not logged in");
    browser.shot("link-page").await;

    // A URL per screen: the link's page has its own, a reload keeps it, back and forward move
    // between the screens visited (the new link's form, then this page).
    let here = current_url(&browser).await;
    assert!(here.ends_with(&format!("#/{}/link/{id}", db.name)), "{here}");
    browser.client.refresh().await.unwrap();
    browser.find(&format!("article[aria-label='Link {id}']")).await;
    browser.client.back().await.unwrap();
    browser.find("form[aria-label='New link']").await;
    assert!(current_url(&browser).await.ends_with(&format!("#/{}/new", db.name)));
    browser.client.forward().await.unwrap();
    browser.find(&format!("article[aria-label='Link {id}']")).await;
    click_button(&browser, "Edit").await;
    fill(&browser, "#f-url", "https://example.com/summer").await;
    click_button(&browser, "Save").await;
    let saved = Instant::now();
    while location(&proxy, &id).await.as_deref() != Some("https://example.com/summer") {
        assert!(saved.elapsed() < Duration::from_secs(10), "the proxy never served the re-pointed link");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let took = saved.elapsed();
    assert!(took < FRESH + Duration::from_millis(500), "the proxy served the edit after {took:?}");

    // Each refusal is shown next to its field, in CouchDB's words; every control has a name.
    page_says(&browser, "summer").await;
    click_button(&browser, "Edit").await;
    let unnamed = browser
        .client
        .execute(
            "return Array.from(document.querySelectorAll('input, select, textarea, button'))
               .filter(e => e.tagName === 'BUTTON' ? !e.textContent.trim() : e.labels.length === 0)
               .map(e => e.outerHTML)",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(unnamed, json!([]), "controls without an accessible name");
    fill(&browser, "#f-url", "ftp://example.com/file").await;
    click_button(&browser, "Save").await;
    let alert = browser.find("#e-url").await.text().await.unwrap();
    assert!(alert.contains("Only \"http://\" and \"https://\""), "{alert}");
    fill(&browser, "#f-url", "https://example.com/summer").await;
    fill(&browser, "#f-expires", "next friday").await;
    click_button(&browser, "Save").await;
    let alert = browser.find("#e-expires").await.text().await.unwrap();
    assert!(alert.contains("\"expires\" must be a date and time with its time zone"), "{alert}");
    browser.shot("refused").await;
    click_button(&browser, "Cancel").await;

    // Someone else saves meanwhile: both versions are shown, and nothing is overwritten unasked.
    click_button(&browser, "Edit").await;
    // (The form is the revision it read: someone saves after it shows.)
    browser.find(&format!("form[aria-label='Edit {id}']")).await;
    let theirs = db
        .put_link(
            &id,
            json!({"url": "https://example.com/autumn", "title": "Autumn flyer",
                                          "tags": ["flyer"], "inactive": false}),
        )
        .await;
    fill(&browser, "#f-url", "https://example.com/winter").await;
    click_button(&browser, "Save").await;
    let said = page_says(&browser, "Someone else saved").await;
    assert!(said.contains("https://example.com/winter") && said.contains("https://example.com/autumn"), "{said}");
    let stored: Value = db.admin(reqwest::Method::GET, &id, None).await.json().await.unwrap();
    assert_eq!(stored["_rev"], json!(theirs), "the editor's save overwrote nothing");
    browser.shot("conflict").await;
    click_button(&browser, "Keep mine").await;
    page_says(&browser, "Points to: https://example.com/winter").await;
    let stored: Value = db.admin(reqwest::Method::GET, &id, None).await.json().await.unwrap();
    assert_eq!(
        (stored["url"].as_str(), stored["title"].as_str()),
        (Some("https://example.com/winter"), Some("Spring flyer"))
    );

    // Deactivated, the proxy answers 404; reactivated, it redirects again.
    click_button(&browser, "Deactivate").await;
    let started = Instant::now();
    while proxy.get(&format!("/{id}")).await.map(|r| r.status().as_u16()) != Some(404) {
        assert!(started.elapsed() < Duration::from_secs(10), "the proxy never stopped serving the inactive link");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    click_button(&browser, "Reactivate").await;
    let started = Instant::now();
    while location(&proxy, &id).await.as_deref() != Some("https://example.com/winter") {
        assert!(started.elapsed() < Duration::from_secs(10), "the proxy never served the reactivated link");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // A rule, made in the rule editor: iPhones go to the App Store; a bad one is refused by its rule.
    click_button(&browser, "Edit").await;
    click_button(&browser, "Add a rule").await;
    fill(&browser, "#r0-os", "ios").await;
    fill(&browser, "#r0-url", "https://apps.apple.com/app/id1").await;
    click_button(&browser, "Save").await;
    page_says(&browser, "Points to: https://example.com/winter").await;
    let stored: Value = db.admin(reqwest::Method::GET, &id, None).await.json().await.unwrap();
    assert_eq!(stored["targets"], json!([{"when": {"os": ["ios"]}, "url": "https://apps.apple.com/app/id1"}]));
    let iphone = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) \
                  Version/17.0 Mobile/15E148 Safari/604.1";
    let started = Instant::now();
    loop {
        let r = http.get(format!("http://{}/{id}", proxy.addr)).header("user-agent", iphone).send().await.unwrap();
        if r.headers().get("location").is_some_and(|l| l == "https://apps.apple.com/app/id1") {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "the proxy never applied the rule");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    click_button(&browser, "Edit").await;
    fill(&browser, "#r0-device", "watch").await;
    click_button(&browser, "Save").await;
    let alert = browser.find("#e-targets").await.text().await.unwrap();
    assert!(alert.contains("\"device\"") && alert.contains("watch"), "{alert}");
    click_button(&browser, "Cancel").await;
    // A second rule: a country and a campaign parameter, split between two pages.
    click_button(&browser, "Edit").await;
    click_button(&browser, "Add a rule").await;
    fill(&browser, "#r1-country", "IE, GB").await;
    fill(&browser, "#r1-query", "utm_source=flyer,poster").await;
    fill(&browser, "#r1-split", "70 https://example.com/a\n30 https://example.com/b").await;
    browser.shot("rules").await;
    click_button(&browser, "Save").await;
    page_says(&browser, "Points to: https://example.com/winter").await;
    let stored: Value = db.admin(reqwest::Method::GET, &id, None).await.json().await.unwrap();
    assert_eq!(
        stored["targets"][1],
        json!({"when": {"country": ["IE", "GB"], "query": {"utm_source": ["flyer", "poster"]}},
               "split": [{"weight": 70, "url": "https://example.com/a"}, {"weight": 30, "url": "https://example.com/b"}]})
    );

    // The link's history: each change with its writer (the console states the editor; the
    // admin's write from elsewhere stated nothing), and any version back in one click.
    let said = page_says(&browser, "writer not stated").await;
    assert!(said.contains(&format!("by {}", EDITOR.0)), "{said}");
    let entries = admin_json(
        &http,
        &db,
        &format!(
            "{}/{history_db}/_all_docs?include_docs=true&startkey=%22{id}%2F%22&endkey=%22{id}%2F%EF%BF%B0%22",
            db.couch.url
        ),
    )
    .await;
    let summer = entries["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["doc"])
        .find(|e| e["after"]["url"] == "https://example.com/summer" && e["kind"] == "changed")
        .unwrap_or_else(|| panic!("the summer edit is recorded: {entries}"))
        .clone();
    assert_eq!(summer["by"], EDITOR.0);
    // Deactivated and reactivated within a second: each write states its writer.
    let rows = entries["rows"].as_array().unwrap();
    let deactivated = rows.iter().map(|r| &r["doc"]).find(|e| e["after"]["inactive"] == true).expect("recorded");
    assert_eq!(deactivated["by"], EDITOR.0, "{deactivated}");
    let reactivated = rows.iter().map(|r| &r["doc"]).find(|e| e["before"]["inactive"] == true).expect("recorded");
    assert_eq!(reactivated["by"], EDITOR.0, "{reactivated}");
    let revision = format!("li[aria-label='Revision {}']", summer["rev"].as_str().unwrap());
    let row = browser.find(&revision).await.text().await.unwrap();
    assert!(row.contains("https://example.com/summer") && row.contains("https://example.com/spring"), "{row}");
    browser
        .client
        .execute("document.querySelector(\"section[aria-label='History']\").scrollIntoView()", vec![])
        .await
        .unwrap();
    browser.shot("history").await;
    browser.click(&format!("{revision} button")).await;
    page_says(&browser, "Points to: https://example.com/summer").await;
    let restored: Value = db.admin(reqwest::Method::GET, &id, None).await.json().await.unwrap();
    assert_eq!(restored["edit"]["restores"], summer["rev"], "{restored}");
    assert_eq!(restored["edit"]["by"], EDITOR.0);
    assert_eq!(restored["targets"], Value::Null, "the version as it was, without the rules added since");
    page_says(&browser, &format!("restores {}", summer["rev"].as_str().unwrap())).await;

    // A password, set in the editor: only its hash is stored, the proxy asks for it, and the
    // editor removes it again.
    click_button(&browser, "Edit").await;
    fill(&browser, "#f-password", "staff only").await;
    click_button(&browser, "Save").await;
    page_says(&browser, "asks for a password").await;
    let stored: Value = db.admin(reqwest::Method::GET, &id, None).await.json().await.unwrap();
    let hash = stored["password"].as_str().unwrap_or_else(|| panic!("no hash stored: {stored}"));
    assert!(hash.starts_with("$argon2id$v=19$") && !hash.contains("staff only"), "{hash}");
    let started = Instant::now();
    while http.get(format!("http://{}/{id}", proxy.addr)).send().await.unwrap().status() != 401 {
        assert!(started.elapsed() < Duration::from_secs(10), "the proxy never asked for the password");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let opened =
        http.get(format!("http://{}/{id}", proxy.addr)).basic_auth("", Some("staff only")).send().await.unwrap();
    assert_eq!(opened.headers().get("location").map(|l| l.to_str().unwrap()), Some("https://example.com/summer"));
    click_button(&browser, "Edit").await;
    browser.click("#f-remove-password").await;
    click_button(&browser, "Save").await;
    let started = Instant::now();
    while location(&proxy, &id).await.as_deref() != Some("https://example.com/summer") {
        assert!(started.elapsed() < Duration::from_secs(10), "the proxy still asks for the removed password");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // A visit limit, set in the editor; the link's page says what is left, as the proxies
    // counted it (the one redirect above, and those of the rules' steps before).
    click_button(&browser, "Edit").await;
    fill(&browser, "#f-max_visits", "1000").await;
    click_button(&browser, "Save").await;
    let said = page_says(&browser, "of 1000 (").await;
    assert!(said.contains("Visits: "), "{said}");
    let stored: Value = db.admin(reqwest::Method::GET, &id, None).await.json().await.unwrap();
    assert_eq!(stored["max_visits"], json!(1000));

    db.put_link(
        &id,
        json!({"url": "https://example.com/summer", "title": "Spring flyer",
                            "tags": ["flyer", "print"], "inactive": false}),
    )
    .await;
    browser.client.refresh().await.unwrap();
    page_says(&browser, "Log out").await;

    // Clicks, from the proxy's live counts (a reload keeps the link's page).
    let started = Instant::now();
    loop {
        browser.client.refresh().await.unwrap();
        browser.find(&format!("article[aria-label='Link {id}']")).await;
        let text = page_says(&browser, "Per target version").await;
        if text.contains("https://example.com/summer") {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(15), "the clicks never showed:\n{text}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Clicks over time: a bar and a row per day of the 30 shown, today's equal to CouchDB's view,
    // and the CSV the table's numbers.
    let view = format!(
        "{}/{}_clicks/_design/clicks/_view/by_link?group_level=4&startkey=[\"{id}\"]&endkey=[\"{id}\",{{}}]",
        db.couch.url.trim_end_matches('/'),
        db.name
    );
    let today = time::OffsetDateTime::now_utc().date().to_string();
    let started = Instant::now();
    let (table, counted) = loop {
        let rows = admin_json(&http, &db, &view).await;
        // Today's row of the view: its key past the link's ID spells the day.
        let day_of = |r: &Value| {
            r["key"].as_array().unwrap()[1..].iter().map(|p| p.as_str().unwrap()).collect::<Vec<_>>().join("-")
        };
        let counted: u64 = rows["rows"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| day_of(r) == today)
            .map(|r| r["value"][0].as_u64().unwrap())
            .sum();
        browser.client.refresh().await.unwrap();
        page_says(&browser, "Download CSV").await;
        let table = browser
            .client
            .execute(
                "return Array.from(document.querySelectorAll('section[aria-label=Clicks] > figure.card tbody tr')).map(r => Array.from(r.cells).map(c => c.textContent))",
                vec![],
            )
            .await
            .unwrap();
        let last = table.as_array().unwrap().last().cloned().unwrap_or_default();
        if last[0] == json!(today) && last[1] == json!(counted.to_string()) && counted > 0 {
            break (table, counted);
        }
        assert!(started.elapsed() < Duration::from_secs(15), "today's row {last} never matched the view's {counted}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert_eq!(table.as_array().unwrap().len(), 30, "a row a day for 30 days");
    let bars = browser
        .client
        .find_all(Locator::Css("section[aria-label=Clicks] > figure.card svg.chart rect.bar"))
        .await
        .unwrap();
    assert_eq!(bars.len(), 30, "a bar a day");
    let csv = browser
        .client
        .execute(
            "const href = document.querySelector('section[aria-label=Clicks] > figure.card a[download]').href;
             return decodeURIComponent(href.slice(href.indexOf(',') + 1));",
            vec![],
        )
        .await
        .unwrap();
    let csv = csv.as_str().unwrap().to_owned();
    let lines: Vec<&str> = csv.trim_end().split("\r\n").collect();
    assert_eq!(lines[0], "day,redirects,bots,new visitors,404s");
    let rows: Vec<String> = table
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_array().unwrap().iter().map(|c| c.as_str().unwrap()).collect::<Vec<_>>().join(","))
        .collect();
    assert_eq!(lines[1..], rows[..], "the CSV is the table");
    // Live: redirects made while the page is open show without a reload, within the proxy's
    // interval (1 s here, the console's own a minute) and 2 s.
    let made = Instant::now();
    for _ in 0..3 {
        assert_eq!(location(&proxy, &id).await.as_deref(), Some("https://example.com/summer"));
    }
    let today_row =
        "const cell = document.querySelector('section[aria-label=Clicks] > figure.card tbody tr:last-child td:nth-child(2)');
         return cell && cell.textContent";
    loop {
        let shown = browser.client.execute(today_row, vec![]).await.unwrap();
        if shown.as_str().and_then(|s| s.parse::<u64>().ok()) == Some(counted + 3) {
            break;
        }
        assert!(made.elapsed() < LIVE, "today shows {shown}, not {} without a reload", counted + 3);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eprintln!("new counts shown {:?} after the first redirect, without a reload", made.elapsed());
    let counted = counted + 3;
    // Per month: this month's one bar holds at least today's.
    browser.find("#c-unit").await.select_by_value("month").await.unwrap();
    page_says(&browser, "Redirects per month").await;
    let month_cell = browser.client.execute(today_row, vec![]).await.unwrap();
    let Some(month_total) = month_cell.as_str().and_then(|s| s.parse::<u64>().ok()) else {
        let body = browser.find("body").await.text().await.unwrap_or_default();
        panic!("this month shows {month_cell}; the page says:\n{body}");
    };
    assert!(month_total >= counted, "{month_total} this month, {counted} today");
    browser.find("#c-unit").await.select_by_value("day").await.unwrap();
    page_says(&browser, "Redirects per day").await;

    // Breakdowns of the range: phones with a campaign and a referrer through the proxy, then
    // each card's table equal to CouchDB's by_dimension view over the same 30 days, its CSV the
    // table's.
    const PHONE: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1";
    for source in ["flyer", "flyer", "poster"] {
        let r = http
            .get(format!("http://{}/{id}?utm_source={source}", proxy.addr))
            .header("User-Agent", PHONE)
            .header("Referer", "https://news.example.com/story")
            .send()
            .await
            .unwrap();
        proxy.responses.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        assert_eq!(r.status(), 302);
    }
    let counted = counted + 3;
    let from = (time::OffsetDateTime::now_utc().date() - time::Duration::days(29)).to_string();
    let by_view = format!(
        "{}/{}_clicks/_design/clicks/_view/by_dimension?group_level=4&startkey={}&endkey={}",
        db.couch.url.trim_end_matches('/'),
        db.name,
        json!([id, format!("d{from}")]),
        json!([id, format!("d{today}"), {}]),
    );
    let card_rows = |name: &str| {
        format!("return Array.from(document.querySelectorAll('.breakdowns figure[aria-label^=\"{name},\"] tbody tr')).map(r => [r.cells[0].textContent, Number(r.cells[1].textContent)])")
    };
    let started = Instant::now();
    loop {
        let rows = admin_json(&http, &db, &by_view).await;
        let mut view: std::collections::BTreeMap<(String, String), u64> = Default::default();
        for r in rows["rows"].as_array().unwrap() {
            let key = r["key"].as_array().unwrap();
            let (d, v) = (key[2].as_str().unwrap().to_owned(), key[3].as_str().unwrap().to_owned());
            *view.entry((d, v)).or_default() += r["value"].as_u64().unwrap();
        }
        let shown = |dimension: &str| -> std::collections::BTreeMap<(String, String), u64> {
            view.iter().filter(|((d, _), _)| d == dimension).map(|(k, n)| (k.clone(), *n)).collect()
        };
        let mut agree = view.get(&("utm_source".into(), "poster".into())) == Some(&1);
        for (dimension, name) in [("device", "Devices"), ("utm_source", "Campaign sources"), ("referrer", "Referrers")]
        {
            let table = browser.client.execute(&card_rows(name), vec![]).await.unwrap();
            let table: std::collections::BTreeMap<(String, String), u64> = table
                .as_array()
                .unwrap()
                .iter()
                .map(|r| ((dimension.to_owned(), r[0].as_str().unwrap().to_owned()), r[1].as_u64().unwrap()))
                .collect();
            agree &= table == shown(dimension);
        }
        if agree {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(15), "the breakdowns never matched the view: {view:?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let devices = browser.client.execute(&card_rows("Devices"), vec![]).await.unwrap();
    // The three phones, and any the page's own browser made earlier.
    let mobile = devices.as_array().unwrap().iter().find(|r| r[0] == "mobile").map(|r| r[1].as_u64().unwrap());
    assert!(mobile >= Some(3), "{devices}");
    assert_eq!(
        browser
            .client
            .find_all(Locator::Css(".breakdowns figure[aria-label^='Devices,'] rect.bar"))
            .await
            .unwrap()
            .len(),
        devices.as_array().unwrap().len(),
        "a bar per row"
    );
    let csv = browser
        .client
        .execute(
            "const href = document.querySelector(\".breakdowns figure[aria-label^='Campaign sources,'] a[download]\").href;
             return decodeURIComponent(href.slice(href.indexOf(',') + 1));",
            vec![],
        )
        .await
        .unwrap();
    let sources = browser.client.execute(&card_rows("Campaign sources"), vec![]).await.unwrap();
    let expected: Vec<String> = std::iter::once("utm_source,redirects".to_owned())
        .chain(sources.as_array().unwrap().iter().map(|r| format!("{},{}", r[0].as_str().unwrap(), r[1])))
        .collect();
    assert_eq!(csv.as_str().unwrap().trim_end().split("\r\n").collect::<Vec<_>>(), expected, "the CSV is the table");
    assert!(sources.to_string().contains(r#"["flyer",2]"#), "{sources}");
    browser.client.execute("document.querySelector('.breakdowns').scrollIntoView()", vec![]).await.unwrap();
    browser.shot("breakdowns").await;

    // A tag's page: the flyer and a second link of the print run, their clicks added up (today
    // equal to the sum of both links' rows of the view), a row per link.
    let second = "Fly02";
    db.put_link(second, json!({"url": "https://example.com/poster", "tags": ["flyer"]})).await;
    for _ in 0..2 {
        let r = http.get(format!("http://{}/{second}", proxy.addr)).header("User-Agent", PHONE).send().await.unwrap();
        proxy.responses.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        assert_eq!(r.status(), 302);
    }
    browser
        .client
        .execute("location.hash = arguments[0]", vec![json!(format!("#/{}/tag/flyer", db.name))])
        .await
        .unwrap();
    page_says(&browser, "Tag: flyer").await;
    let today_of = |id: &str| {
        let view = format!(
            "{}/{}_clicks/_design/clicks/_view/by_link?group_level=4&startkey={}&endkey={}",
            db.couch.url.trim_end_matches('/'),
            db.name,
            json!([id, &today[..4], &today[5..7], &today[8..]]),
            json!([id, &today[..4], &today[5..7], &today[8..], {}]),
        );
        let (http, db) = (&http, &db);
        async move {
            let rows = admin_json(http, db, &view).await;
            rows["rows"].as_array().unwrap().iter().map(|r| r["value"][0].as_u64().unwrap()).sum::<u64>()
        }
    };
    let started = Instant::now();
    loop {
        let (a, b) = (today_of(&id).await, today_of(second).await);
        let shown = browser.client.execute(today_row, vec![]).await.unwrap();
        let per_link = browser
            .client
            .execute(
                "return Array.from(document.querySelectorAll('figure[aria-label^=\"Redirects per link\"] tbody tr')).map(r => [r.cells[0].textContent, Number(r.cells[1].textContent)])",
                vec![],
            )
            .await
            .unwrap();
        if b == 2
            && shown.as_str() == Some(&(a + b).to_string())
            && per_link.to_string().contains(&format!("[\"{second}\",2]"))
        {
            assert!(per_link.to_string().contains(&format!("[\"{id}\",{a}]")), "{per_link}");
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(15), "today shows {shown}, not {a} + {b}; per link {per_link}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    browser.shot("tag").await;
    // Back: the link's page again.
    browser.client.back().await.unwrap();
    browser.find(&format!("article[aria-label='Link {id}']")).await;
    page_says(&browser, "Redirects per day").await;
    browser
        .client
        .execute("document.querySelector('section[aria-label=Clicks]').scrollIntoView()", vec![])
        .await
        .unwrap();
    browser.shot("clicks").await;

    // The overview: today's top links, this one first with today's redirects; this month's too.
    open_console(&browser, &console).await;
    page_says(&browser, "Top links, today (UTC)").await;
    let top = "return Array.from(document.querySelectorAll('section[aria-label=\"Top links\"] tbody tr')).map(r => [r.cells[0].textContent, Number(r.cells[1].textContent)])";
    let rows = browser.client.execute(top, vec![]).await.unwrap();
    assert_eq!(rows[0], json!([id, counted]), "{rows}");
    assert_eq!(
        browser.client.find_all(Locator::Css("section[aria-label='Top links'] rect.bar")).await.unwrap().len(),
        rows.as_array().unwrap().len()
    );
    browser.find("#top-period").await.select_by_value("month").await.unwrap();
    page_says(&browser, "Top links, this month (UTC)").await;
    let rows = browser.client.execute(top, vec![]).await.unwrap();
    assert_eq!(rows[0][0], json!(id), "{rows}");
    assert!(rows[0][1].as_u64().unwrap() >= counted, "{rows}");
    browser.shot("top-links").await;

    // A visit limit: only redirects use a visit. Requests answered 404 (paths after the ID that
    // resolve to nothing: twice the limit of them) use none; the open page says, live, the
    // redirects the proxy admitted, and the proxy serves the target while visits are left.
    let limited = "Limit";
    let (target, over) = ("https://example.com/limited", "https://example.com/over");
    db.put_link(limited, json!({"url": target, "max_visits": 4, "fallback": over})).await;
    // (It asks without a User-Agent, as a bot: a bot's redirect uses no visit of this link.)
    proxy.wait_until_served(&format!("/{limited}"), 302, Some(target), Duration::from_secs(10)).await;
    browser
        .client
        .execute("location.hash = arguments[0]", vec![json!(format!("#/{}/link/{limited}", db.name))])
        .await
        .unwrap();
    page_says(&browser, "Visits: 0 of 4 (4 left)").await;
    for path in ["%2e%2e", "..", "%2E%2E?x=1", "a/../../.."] {
        for _ in 0..2 {
            let answer = raw_get(&proxy, &format!("/{limited}/{path}")).await;
            assert!(answer.starts_with("HTTP/1.1 404"), "{path}: {answer}");
        }
    }
    let made = Instant::now();
    for _ in 0..3 {
        assert_eq!(visit(&http, &proxy, limited).await.as_deref(), Some(target), "visits are left");
    }
    let visits_line = "return Array.from(document.querySelectorAll('article p'))
                         .map(p => p.textContent).find(t => t.startsWith('Visits:')) || null";
    loop {
        let shown = browser.client.execute(visits_line, vec![]).await.unwrap();
        if shown == json!("Visits: 3 of 4 (1 left)") {
            break;
        }
        assert!(made.elapsed() < LIVE, "the page says {shown} after 3 redirects and 8 404s, without a reload");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eprintln!("a limited link's visits shown {:?} after the first redirect, without a reload", made.elapsed());
    assert_eq!(visit(&http, &proxy, limited).await.as_deref(), Some(target), "the last visit left");
    assert_eq!(visit(&http, &proxy, limited).await.as_deref(), Some(over), "used up by its 4 redirects");

    // A title with markup and a javascript: URL an admin stored past validation stay inert.
    let design_rev = db.rev("_design/couchlink").await.unwrap();
    let design: Value = db.admin(reqwest::Method::GET, "_design/couchlink", None).await.json().await.unwrap();
    db.admin(reqwest::Method::DELETE, &format!("_design/couchlink?rev={design_rev}"), None).await;
    let hostile = json!({"url": "javascript:window.__clicked=1", "title": "<img src=x onerror=window.__xss=1>",
                         "tags": ["xsstest"], "inactive": false});
    let put = db.admin(reqwest::Method::PUT, "Xss01", Some(&hostile)).await;
    assert!(put.status().is_success(), "{:?}", put.text().await);
    let mut restored = design.clone();
    restored.as_object_mut().unwrap().remove("_rev");
    db.admin(reqwest::Method::PUT, "_design/couchlink", Some(&restored)).await;
    open_console(&browser, &console).await;
    fill(&browser, "#search", "xsstest").await;
    click_button(&browser, "Search").await;
    page_says(&browser, "<img src=x onerror=window.__xss=1>").await;
    open_link(&browser, "Xss01").await;
    page_says(&browser, "javascript:window.__clicked=1").await;
    // The page decides its status as the proxy does (tests/link_status.json): refused, not live.
    let status = browser.find("article [class^=status-]").await.text().await.unwrap();
    assert_eq!(status, "refused (url)");
    let hrefs = browser
        .client
        .execute("return Array.from(document.querySelectorAll('a')).map(a => a.href)", vec![])
        .await
        .unwrap();
    assert!(!hrefs.to_string().contains("javascript:"), "{hrefs}");
    assert!(browser.client.find_all(Locator::Css("article img[src=x]")).await.unwrap().is_empty());
    let xss = browser.client.execute("return [window.__xss, window.__clicked]", vec![]).await.unwrap();
    assert_eq!(xss, json!([null, null]));
    browser.shot("stored-markup-stays-text").await;

    // A chosen ID that is taken is said so next to the ID, and nothing is overwritten.
    open_console(&browser, &console).await;
    click_button(&browser, "New link").await;
    fill(&browser, "#f-id", &id).await;
    fill(&browser, "#f-url", "https://example.com/taken").await;
    click_button(&browser, "Save").await;
    let alert = browser.find("#e-id").await.text().await.unwrap();
    assert!(alert.contains(&format!("The ID {id} is taken")), "{alert}");
    assert_eq!(location(&proxy, &id).await.as_deref(), Some("https://example.com/summer"));
    click_button(&browser, "Cancel").await;

    // Search by a tag's beginning finds the flyer. A slower earlier search (its answer held
    // back 1.5 s in the page) answered after it is never shown.
    open_console(&browser, &console).await;
    page_says(&browser, &id).await;
    browser
        .client
        .execute(
            "const fetch0 = window.fetch;
             window.fetch = (url, init) => fetch0(url, init).then(r => String(url).includes('xsstest')
               ? new Promise(done => setTimeout(() => done(r), 1500)) : r);",
            vec![],
        )
        .await
        .unwrap();
    fill(&browser, "#search", "xsstest").await;
    click_button(&browser, "Search").await;
    fill(&browser, "#search", "fly").await;
    click_button(&browser, "Search").await;
    page_says(&browser, &id).await;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let said = page_says(&browser, &id).await;
    assert!(!said.contains("Xss01"), "the slower, older search's answer was shown:\n{said}");
    assert!(current_url(&browser).await.ends_with(&format!("#/{}/links?q=fly", db.name)));
    browser.shot("search").await;

    // A print sheet of the links ticked, in the colours picked: the console makes the PDF.
    open_console(&browser, &console).await;
    page_says(&browser, &id).await;
    let boxes =
        browser.client.find_all(Locator::Css("section[aria-label=Links] tbody input[type=checkbox]")).await.unwrap();
    for tick in &boxes {
        tick.click().await.unwrap();
    }
    page_says(&browser, &format!("Print sheet of {} tag", boxes.len())).await;
    set_colour(&browser, "s-fg", "#1a1a6e").await;
    click_button(&browser, "Make the sheet (PDF)").await;
    let link = browser.find("a[download='couchlink-sheet.pdf']").await;
    let text = link.text().await.unwrap();
    assert!(text.starts_with(&format!("Download the sheet ({} tags, PDF, ", boxes.len())), "{text}");
    assert!(link.attr("href").await.unwrap().unwrap_or_default().starts_with("blob:"));
    // The same request the page made (its CSP keeps scripts from reading the blob back).
    let cookies = browser.client.get_all_cookies().await.unwrap();
    let session = cookies.iter().find(|c| c.name() == "AuthSession").unwrap().value().to_owned();
    let sheet = http
        .post(format!("{console}qr/{}/sheet.pdf", db.name))
        .header("origin", console.trim_end_matches('/'))
        .header("cookie", format!("AuthSession={session}"))
        .json(&json!({"tags": [{"id": id, "title": "Summer flyer"}], "paper": "letter", "size_mm": 40,
                      "fg": "#1a1a6e", "bg": "#ffffff", "titles": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(sheet.status(), 200);
    assert_eq!(sheet.headers()["content-type"], "application/pdf");
    let pdf = sheet.bytes().await.unwrap();
    assert!(pdf.starts_with(b"%PDF-1.7") && pdf.windows(8).any(|w| w == b"/Count 1"));
    browser.shot("print-sheet").await;
    set_colour(&browser, "s-fg", "#eeeeee").await;
    click_button(&browser, "Make the sheet (PDF)").await;
    let said = page_says(&browser, "symbol contrast").await;
    assert!(said.contains("phone readers need at least 40%"), "{said}");
    // The same ticked links changed at once: a preview, one write (a link someone saved
    // meanwhile is not written over), the outcome per link, and one undo.
    fill(&browser, "#b-rule", "{\"when\": ").await;
    click_button(&browser, "Preview the change").await;
    page_says(&browser, "The rule is not JSON").await;
    fill(
        &browser,
        "#b-rule",
        r#"{"when": {"os": ["android"]}, "url": "https://play.google.com/store/apps/details?id=x"}"#,
    )
    .await;
    fill(&browser, "#b-add", "run-2").await;
    click_button(&browser, "Preview the change").await;
    let preview = browser.find("table[aria-label='Preview']").await.text().await.unwrap();
    assert!(preview.contains(&id) && preview.contains("run-2") && preview.contains("play.google.com"), "{preview}");
    let before: Value = db.admin(reqwest::Method::GET, &id, None).await.json().await.unwrap();
    let mut theirs = before.clone();
    theirs["note"] = json!("saved meanwhile");
    let r = db.admin(reqwest::Method::PUT, &id, Some(&theirs)).await;
    assert!(r.status().is_success());
    let plural = if boxes.len() == 1 { "" } else { "s" };
    click_button(&browser, &format!("Apply to {} link{plural}", boxes.len())).await;
    let result = browser.find("table[aria-label='Result']").await.text().await.unwrap();
    assert!(result.contains(&format!("{id} edited by someone else meanwhile")), "{result}");
    // The stored markup test's link holds a `javascript:` URL (written past the validation by
    // the admin): CouchDB refuses it, with its reason, and applies the rest.
    assert!(result.contains("Xss01 refused: [url] Only \"http://\""), "{result}");
    let applied = result.matches(" applied").count();
    assert_eq!(applied, boxes.len() - 2, "{result}");
    let batch = page_says(&browser, "Bulk change bulk-").await;
    let batch = batch.split("Bulk change ").nth(1).unwrap().split_whitespace().next().unwrap().to_owned();
    let kept: Value = db.admin(reqwest::Method::GET, &id, None).await.json().await.unwrap();
    assert_eq!(
        (kept["note"].as_str(), kept["tags"].as_array().unwrap().contains(&json!("run-2"))),
        (Some("saved meanwhile"), false)
    );
    let tagged = admin_json(
        &http,
        &db,
        &format!("{}/{}/_design/console/_view/search?key=%22run-2%22&include_docs=true", db.couch.url, db.name),
    )
    .await;
    let tagged = tagged["rows"].as_array().unwrap();
    assert_eq!(tagged.len(), applied);
    assert!(tagged.iter().all(|r| r["doc"]["edit"]["batch"] == batch.as_str() && r["doc"]["edit"]["by"] == EDITOR.0));
    assert!(tagged
        .iter()
        .all(|r| r["doc"]["targets"].as_array().unwrap().last().unwrap()["when"]["os"] == json!(["android"])));
    browser
        .client
        .execute("document.querySelector(\"table[aria-label='Preview']\").scrollIntoView()", vec![])
        .await
        .unwrap();
    browser.shot("bulk").await;
    click_button(&browser, "Undo this change").await;
    let undone = browser.find("table[aria-label='Undone']").await.text().await.unwrap();
    assert_eq!(undone.matches("applied").count(), applied, "{undone}");
    let tagged =
        admin_json(&http, &db, &format!("{}/{}/_design/console/_view/search?key=%22run-2%22", db.couch.url, db.name))
            .await;
    assert_eq!(tagged["rows"], json!([]), "every link put back");

    // One tag in colours, on the link's page; colours too alike are refused with the reason.
    open_link(&browser, &id).await;
    set_colour(&browser, "t-fg", "#1a1a6e").await;
    let started = Instant::now();
    while !browser.find(".tag img").await.attr("src").await.unwrap().unwrap_or_default().contains("fg=%231a1a6e") {
        assert!(started.elapsed() < Duration::from_secs(10), "the tag never took its colour");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    set_colour(&browser, "t-bg", "#2a2a7e").await;
    page_says(&browser, "symbol contrast of").await;

    // On a phone-sized screen, nothing runs off its side; no credentials in the browser's storage.
    browser.client.set_window_size(390, 844).await.unwrap();
    browser.client.refresh().await.unwrap();
    page_says(&browser, &id).await;
    // Its breakdowns too, a card to a row.
    browser.find(".breakdowns figure").await;
    assert!(
        fits(&browser, "document.documentElement", "window.innerWidth").await,
        "the link's page is wider than a phone"
    );
    open_console(&browser, &console).await;
    page_says(&browser, &id).await;
    assert!(fits(&browser, "document.documentElement", "window.innerWidth").await, "the list is wider than a phone");
    // Nor does the list scroll sideways inside its box.
    let table = "document.querySelector('section[aria-label=Links] .scroll')";
    assert!(fits(&browser, table, &format!("{table}.clientWidth")).await, "the list scrolls sideways on a phone");
    browser.shot("phone").await;
    browser.client.set_window_size(1280, 800).await.unwrap();
    let stored = browser.client.execute("return localStorage.length + sessionStorage.length", vec![]).await.unwrap();
    assert_eq!(stored, json!(0));

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
    assert_eq!(location(&proxy, &id).await.as_deref(), Some("https://example.com/summer"));

    // Log out. A link's edit form pasted as a URL opens once the editor has logged in.
    click_button(&browser, "Log out").await;
    browser.find("#name").await;
    browser.client.goto(&format!("{console}#/{}/link/{id}/edit", db.name)).await.unwrap();
    fill(&browser, "#name", EDITOR.0).await;
    fill(&browser, "#password", EDITOR.1).await;
    browser.click("form[aria-label='Log in'] button[type=submit]").await;
    browser.find(&format!("form[aria-label='Edit {id}']")).await;
    assert_eq!(
        browser.find("#f-url").await.prop("value").await.unwrap().as_deref(),
        Some("https://example.com/summer")
    );
    click_button(&browser, "Log out").await;
    browser.find("#name").await;

    // A reader: no edit control, and a write forged from the page itself is CouchDB's to refuse.
    log_in(&browser, &console, READER).await;
    page_says(&browser, "(reader)").await;
    assert!(!buttons(&browser).await.contains(&"New link".to_owned()));
    open_link(&browser, &id).await;
    page_says(&browser, "summer").await;
    let names = buttons(&browser).await;
    assert!(
        !names.iter().any(|n| ["Edit", "Deactivate", "Save", "Restore this version"].contains(&n.as_str())),
        "{names:?}"
    );
    page_says(&browser, "History").await;
    browser.shot("reader").await;
    let status = browser
        .client
        .execute_async(
            "const done = arguments[arguments.length - 1];
             fetch('couch/' + arguments[0] + '/' + arguments[1])
               .then(r => r.json())
               .then(doc => fetch('couch/' + arguments[0] + '/' + arguments[1], {method: 'PUT',
                   headers: {'Content-Type': 'application/json'},
                   body: JSON.stringify({...doc, url: 'https://evil.example/'})}))
               .then(r => done(r.status));",
            vec![json!(db.name), json!(id)],
        )
        .await
        .unwrap();
    assert_eq!(status, json!(403));
    assert_eq!(location(&proxy, &id).await.as_deref(), Some("https://example.com/summer"));
    click_button(&browser, "Log out").await;
    browser.find("#name").await;
}

/// Loads the console afresh at its first screen (chromedriver's `goto` from an address with
/// a hash to the same one without leaves the page as it is).
/// `GET url` as CouchDB's admin: its JSON.
async fn admin_json(http: &reqwest::Client, db: &TestDb, url: &str) -> Value {
    let answer = http.get(url).basic_auth(&db.couch.admin_user, Some(&db.couch.admin_password)).send().await.unwrap();
    answer.json().await.unwrap()
}

async fn open_console(browser: &Browser, console: &str) {
    browser.client.goto(console).await.unwrap();
    browser.client.execute("location.hash = '#/'", vec![]).await.unwrap();
    browser.client.refresh().await.unwrap();
}

/// Whether what the script `element` names is no wider than `width` (a script's number).
async fn fits(browser: &Browser, element: &str, width: &str) -> bool {
    let script = format!("return {element}.scrollWidth <= {width}");
    browser.client.execute(&script, vec![]).await.unwrap() == json!(true)
}

/// The address the browser shows.
async fn current_url(browser: &Browser) -> String {
    browser.client.current_url().await.unwrap().to_string()
}

/// Opens link `id` from the list (searching for it).
async fn open_link(browser: &Browser, id: &str) {
    fill(browser, "#search", id).await;
    click_button(browser, "Search").await;
    let started = Instant::now();
    loop {
        let links = browser.client.find_all(Locator::Css("section[aria-label=Links] td a")).await.unwrap();
        for link in links {
            // The list may re-render under the search between finding and clicking: a stale
            // element is looked for again.
            if link.text().await.unwrap_or_default() == id && link.click().await.is_ok() {
                browser.find("article").await;
                return;
            }
        }
        if started.elapsed() > Duration::from_secs(10) {
            let body = browser.find("body").await.text().await.unwrap_or_default();
            panic!("{id} never showed in the list; the page says:\n{body}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `GET /{id}` as a browser: where the proxy sends it (`None`: no redirect).
async fn visit(http: &reqwest::Client, proxy: &ServeProcess, id: &str) -> Option<String> {
    let r = http.get(format!("http://{}/{id}", proxy.addr)).header("User-Agent", DESKTOP).send().await.unwrap();
    proxy.responses.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    r.headers().get("location").map(|l| l.to_str().unwrap().to_owned())
}

/// `GET path` as a browser, sent as it is (an HTTP client would take its dots away): the whole
/// answer.
async fn raw_get(proxy: &ServeProcess, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(proxy.addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nUser-Agent: {DESKTOP}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    stream.read_to_end(&mut out).await.unwrap();
    proxy.responses.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    String::from_utf8_lossy(&out).into_owned()
}

/// Sets the colour input `id` as a person picking `value` would (an input event).
async fn set_colour(browser: &Browser, id: &str, value: &str) {
    browser.find(&format!("#{id}")).await;
    let script = "const i = document.getElementById(arguments[0]); i.value = arguments[1];
                  i.dispatchEvent(new Event('input', {bubbles: true}));";
    browser.client.execute(script, vec![json!(id), json!(value)]).await.unwrap();
}

/// Clicks the button named `name` (waiting for it).
async fn click_button(browser: &Browser, name: &str) {
    let started = Instant::now();
    loop {
        for button in browser.client.find_all(Locator::Css("button")).await.unwrap() {
            if button.text().await.unwrap_or_default() == name && button.click().await.is_ok() {
                return;
            }
        }
        assert!(started.elapsed() < Duration::from_secs(10), "no button {name:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
