//! The admins' path in a real browser: an editor uses Fauxton on Apache CouchDB 3.5 (headless
//! Chromium driven over WebDriver) while couchlink serves the same database, and every step is
//! checked where users see it: in Fauxton, in CouchDB, and at the proxy.
//!
//! Not part of the plain `cargo test` (it needs Chromium, chromedriver and a CouchDB 3: the one
//! `COUCHLINK_TEST_COUCHDB_URL` names, as for `cargo test`, or else a node of its own started
//! with the `couchdb.sh` that `COUCHLINK_COUCHDB_SH` names); `.ci/run` runs it with
//! `cargo test --test fauxton -- --nocapture`. Without them it fails, naming what is missing.
//! Screenshots of every step go to `target/fauxton-screenshots/`.

#[path = "../support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use fantoccini::Locator;
use serde_json::{json, Value};

use support::apache::ApacheCouchDb;
use support::browser::Browser;
use support::process::ServeProcess;
use support::{eventually, holds, http, TestDb, EDITOR, READER};

/// The freshness couchlink promises an edit.
const FRESH: Duration = Duration::from_secs(1);

impl Browser {
    /// Clicks Fauxton's notifications away (they cover the toolbar's buttons).
    async fn dismiss_notifications(&self) {
        eventually("Fauxton's notifications go away", Duration::from_secs(10), || async {
            let toasts = self.client.find_all(Locator::Css(".Toastify__toast")).await.unwrap();
            let left = toasts.len();
            for toast in toasts {
                let _ = toast.click().await;
            }
            holds(left == 0, left)
        })
        .await
    }

    /// Waits (at most 10 s) for a notification saying `text`; all of its text.
    async fn notification(&self, text: &str) -> String {
        let what = format!("Fauxton says {text:?}");
        let said = eventually(&what, Duration::from_secs(10), || async {
            let mut seen = Vec::new();
            for toast in self.client.find_all(Locator::Css(".Toastify__toast")).await.unwrap() {
                if let Ok(said) = toast.text().await {
                    if said.contains(text) {
                        return Ok(said);
                    }
                    seen.push(said);
                }
            }
            Err(seen)
        })
        .await;
        // It has finished sliding in, for the screenshot, once no notification runs an animation
        // of its own (its countdown bar, a child, runs until it closes; Fauxton's spinners too).
        eventually("the notification has slid in", Duration::from_secs(10), || async {
            let script = "return Array.from(document.querySelectorAll('.Toastify__toast'))
                .flatMap(t => t.getAnimations()).filter(a => a.playState === 'running').length";
            let running = self.client.execute(script, vec![]).await.unwrap();
            holds(running == json!(0), running)
        })
        .await;
        said
    }

    /// The document in Fauxton's JSON editor.
    async fn editor_document(&self) -> Value {
        self.find(".ace_editor").await;
        let text = self
            .client
            .execute("return document.querySelector('.ace_editor').env.editor.getValue()", vec![])
            .await
            .unwrap();
        serde_json::from_str(text.as_str().unwrap()).unwrap()
    }

    /// Opens document `id` of `db` in the editor and waits until it shows revision `generation`.
    async fn open_document(&self, fauxton: &str, db: &str, id: &str, generation: u32) -> Value {
        self.client.goto(&format!("{fauxton}#database/{db}/{id}")).await.unwrap();
        let what = format!("Fauxton shows revision {generation}");
        eventually(&what, Duration::from_secs(10), || async {
            let doc = self.editor_document().await;
            if doc["_rev"].as_str().is_some_and(|r| r.starts_with(&format!("{generation}-"))) {
                Ok(doc)
            } else {
                Err(doc)
            }
        })
        .await
    }

    /// Replaces the editor's text with `doc`. Through the editor's own API: typing into Ace
    /// would fight its automatic brackets and quotes.
    async fn set_editor_document(&self, doc: &Value) {
        let text = serde_json::to_string_pretty(doc).unwrap();
        self.client
            .execute("document.querySelector('.ace_editor').env.editor.setValue(arguments[0], 1)", vec![json!(text)])
            .await
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_editor_creates_repoints_retires_and_is_refused_in_fauxton_and_couchlink_follows() {
    // A CouchDB 3 the user started, or a node of this test's own.
    let own = std::env::var_os("COUCHLINK_TEST_COUCHDB_URL").is_none().then(ApacheCouchDb::single);
    let db = match &own {
        // The real name on a server of its own: the screenshots illustrate the admin guide.
        Some(couchdb) => TestDb::named_on(&couchdb.couch(0), "links").await,
        None => TestDb::new().await,
    };
    let server = db.couch.url.clone();
    let fauxton = format!("{server}/_utils/");
    let proxy = ServeProcess::start(
        "couchlink",
        &[
            ("COUCHLINK_COUCHDB_URL", &server),
            ("COUCHLINK_COUCHDB_USER", READER.0),
            ("COUCHLINK_COUCHDB_PASSWORD", READER.1),
            ("COUCHLINK_DB", &db.name),
        ],
    );
    let mut browser = Browser::start("fauxton-screenshots").await;

    // The editor logs in.
    browser.client.goto(&format!("{fauxton}#login")).await.unwrap();
    browser.find("#username").await.send_keys(EDITOR.0).await.unwrap();
    browser.find("#password").await.send_keys(EDITOR.1).await.unwrap();
    browser.click("#login-btn").await;
    browser.notification("You have been logged in").await;
    browser.dismiss_notifications().await;

    // 1. A new document: Fauxton proposes a UUID, the editor puts a link ID in its place.
    browser.client.goto(&format!("{fauxton}#database/{}/_new", db.name)).await.unwrap();
    let proposed = browser.editor_document().await;
    let uuid = proposed["_id"].as_str().unwrap();
    assert_eq!(uuid.len(), 32, "Fauxton proposes a UUID: {proposed}");
    browser.set_editor_document(&json!({"_id": "H83if", "url": "https://example.com/wp/?p=14"})).await;
    browser.shot("new-link-with-its-id").await;
    browser.click("#save-doc-btn").await;
    proxy.wait_until_served("/H83if", 302, Some("https://example.com/wp/?p=14"), FRESH).await;

    // 2. The printed tag points somewhere new: the editor changes `url`.
    let mut doc = browser.open_document(&fauxton, &db.name, "H83if", 1).await;
    browser.shot("new-link-saved").await;
    doc["url"] = json!("https://example.com/spring/");
    browser.set_editor_document(&doc).await;
    browser.dismiss_notifications().await;
    let clicked = Instant::now();
    browser.click("#save-doc-btn").await;
    proxy.wait_until_served("/H83if", 302, Some("https://example.com/spring/"), FRESH).await;
    let repointed = clicked.elapsed();
    browser.notification("saved").await;
    browser.shot("url-changed").await;

    // 3. A rule: iPhones go to the App Store, everyone else still to the spring page.
    let mut doc = browser.open_document(&fauxton, &db.name, "H83if", 2).await;
    doc["targets"] = json!([{"when": {"os": ["ios"]}, "url": "https://apps.apple.com/app/id123"}]);
    browser.set_editor_document(&doc).await;
    browser.dismiss_notifications().await;
    browser.click("#save-doc-btn").await;
    browser.notification("saved").await;
    browser.shot("rule-added").await;
    let iphone = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1";
    let vary = eventually("the rule is served", FRESH, || async {
        let r = http().get(format!("http://{}/H83if", proxy.addr)).header("User-Agent", iphone).send().await.unwrap();
        let location = r.headers().get("location").map(|l| l.to_str().unwrap().to_owned());
        if location.as_deref() == Some("https://apps.apple.com/app/id123") {
            Ok(r.headers()["vary"].to_str().unwrap().to_owned())
        } else {
            Err(location)
        }
    })
    .await;
    assert_eq!(vary, "User-Agent, Accept-Language");
    proxy.wait_until_served("/H83if", 302, Some("https://example.com/spring/"), FRESH).await;

    // 4. Retired: `inactive: true` answers 404.
    let mut doc = browser.open_document(&fauxton, &db.name, "H83if", 3).await;
    doc["inactive"] = json!(true);
    browser.set_editor_document(&doc).await;
    browser.dismiss_notifications().await;
    let clicked = Instant::now();
    browser.click("#save-doc-btn").await;
    proxy.wait_until_served("/H83if", 404, None, FRESH).await;
    let retired = clicked.elapsed();
    browser.shot("link-retired").await;

    // 5. Bad documents are refused, with the validation's reason on screen, and nothing stored.
    let mut refusals = Vec::new();
    let bad_rule = json!([{"when": {"os": ["iOS"]}, "url": "https://apps.apple.com/app/id123"}]);
    for (id, doc, step) in [
        ("Ftp01", json!({"_id": "Ftp01", "url": "ftp://files.example/"}), "refused-ftp-url"),
        ("H83ifx", json!({"_id": "H83ifx", "url": "https://example.com/"}), "refused-6-character-id"),
        ("Rule1", json!({"_id": "Rule1", "url": "https://example.com/", "targets": bad_rule}), "refused-rule"),
    ] {
        browser.dismiss_notifications().await;
        browser.client.goto(&format!("{fauxton}#database/{}/_new", db.name)).await.unwrap();
        browser.editor_document().await;
        browser.set_editor_document(&doc).await;
        browser.click("#save-doc-btn").await;
        let said = browser.notification("Save failed").await;
        browser.shot(step).await;
        assert_eq!(db.rev(id).await, None, "{id} was stored");
        refusals.push(said);
    }
    assert!(refusals[0].contains("Only \"http://\" and \"https://\""), "{}", refusals[0]);
    assert!(refusals[1].contains("exactly 5 letters or digits"), "{}", refusals[1]);
    assert!(refusals[2].contains("Rule 1 of \"targets\": \"os\" holds \"iOS\""), "{}", refusals[2]);

    // 6. Deleting is refused, and Fauxton says why.
    browser.dismiss_notifications().await;
    browser.open_document(&fauxton, &db.name, "H83if", 4).await;
    browser.dismiss_notifications().await;
    browser.click("button[title=\"Delete\"]").await;
    browser.click(".modal-footer button.btn-cf-primary").await;
    let said = browser.notification("Failed to delete").await;
    browser.shot("delete-refused").await;
    assert!(said.contains("Links cannot be deleted") && said.contains("\"inactive\": true"), "{said}");
    assert!(db.rev("H83if").await.is_some_and(|r| r.starts_with("4-")), "the document is still there");

    // From the click on "Save Changes" (Fauxton's own request to CouchDB included) to couchlink
    // serving the change.
    eprintln!(
        "\nFauxton flow on CouchDB 3.5, click on Save Changes → served by couchlink: new url {repointed:?}, inactive → 404 {retired:?}\n\
         refusals shown: {refusals:?}; {said:?}\nscreenshots: {}\n",
        browser.shots.display()
    );
    browser.client.clone().close().await.unwrap();
}

/// Two short domains, each its own database with its own editor (the per-database roles
/// `setup` gives by default): each editor saves a link in Fauxton in their own database, which
/// couchlink serves on that domain's host, and is refused in the other's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_editors_each_edit_their_domain_in_fauxton_and_are_refused_in_the_other() {
    let own = std::env::var_os("COUCHLINK_TEST_COUCHDB_URL").is_none().then(ApacheCouchDb::single);
    let couch = match &own {
        Some(couchdb) => couchdb.couch(0),
        None => support::couch::couch().clone(),
    };
    let suffix = support::couch::random_lowercase(6);
    let names = [format!("acme_{suffix}"), format!("beta_{suffix}")];
    let editors = [("acme-editor", "acme-pw"), ("beta-editor", "beta-pw")];
    let mut dbs = Vec::new();
    for (name, editor) in names.iter().zip(editors) {
        let db = TestDb { name: name.clone(), couch: couch.clone() };
        let roles = couchlink::domain::Roles::of_database(name, None, None).unwrap();
        let options = couchlink::cmd::setup::SetupOptions {
            roles: roles.clone(),
            clicks_db: None,
            history_db: None,
            drop_shared_roles: true,
            replace_security: false,
        };
        couchlink::cmd::setup::run(&db.client_as(None), None, &options).await.expect("setup works");
        support::couch::ensure_user(&couch, editor, &roles.editor).await;
        dbs.push(db);
    }
    // The proxy's one account reads both databases.
    let reader = json!({"name": "domains-reader", "password": "reader-pw", "type": "user",
        "roles": [format!("{}:reader", names[0]), format!("{}:reader", names[1])]});
    let url = format!("{}/_users/org.couchdb.user:domains-reader", couch.url);
    let r =
        http().put(&url).basic_auth(&couch.admin_user, Some(&couch.admin_password)).json(&reader).send().await.unwrap();
    assert!(r.status().is_success() || r.status() == 409, "{}", r.text().await.unwrap());
    let domains = format!("go.acme.test={},go.beta.test={}", names[0], names[1]);
    let proxy = ServeProcess::start(
        "couchlink",
        &[
            ("COUCHLINK_COUCHDB_URL", &couch.url),
            ("COUCHLINK_COUCHDB_USER", "domains-reader"),
            ("COUCHLINK_COUCHDB_PASSWORD", "reader-pw"),
            ("COUCHLINK_DOMAINS", &domains),
        ],
    );
    let fauxton = format!("{}/_utils/", couch.url);
    for (k, editor) in editors.iter().enumerate() {
        let (own_db, other_db) = (&names[k], &names[1 - k]);
        let host = ["go.acme.test", "go.beta.test"][k];
        let target = format!("https://{}.example/spring", ["acme", "beta"][k]);
        let mut browser = Browser::start("fauxton-screenshots").await;
        browser.client.goto(&format!("{fauxton}#login")).await.unwrap();
        browser.find("#username").await.send_keys(editor.0).await.unwrap();
        browser.find("#password").await.send_keys(editor.1).await.unwrap();
        browser.click("#login-btn").await;
        browser.notification("You have been logged in").await;
        browser.dismiss_notifications().await;

        // Their own database: saved, and served on their domain only.
        browser.client.goto(&format!("{fauxton}#database/{own_db}/_new")).await.unwrap();
        browser.editor_document().await;
        browser.set_editor_document(&json!({"_id": "Dom01", "url": target})).await;
        browser.click("#save-doc-btn").await;
        let what = format!("{host}/Dom01 served");
        eventually(&what, FRESH * 5, || async {
            let r = http().get(format!("http://{}/Dom01", proxy.addr)).header("Host", host).send().await.unwrap();
            holds(r.headers().get("location").is_some_and(|l| *l == *target), r.status())
        })
        .await;
        browser.shot(&format!("domain-{host}-saved")).await;

        // The other's database: refused, nothing stored.
        browser.dismiss_notifications().await;
        browser.client.goto(&format!("{fauxton}#database/{other_db}/_new")).await.unwrap();
        let id = format!("Xx{k}00");
        // Fauxton does not even open the form: the account is no member of that database.
        let said = browser.notification("You are not allowed to access this db").await;
        assert!(said.contains("Failed to fetch database info"), "{said}");
        browser.shot(&format!("domain-{host}-refused-in-the-other")).await;
        assert_eq!(dbs[1 - k].rev(&id).await, None, "{} wrote to {other_db}", editor.0);
        // And directly through CouchDB's API, as Fauxton would send it.
        let r = http()
            .put(format!("{}/{other_db}/{id}", couch.url))
            .basic_auth(editor.0, Some(editor.1))
            .json(&json!({"url": "https://intruder.example/"}))
            .send()
            .await
            .unwrap();
        assert!(matches!(r.status().as_u16(), 401 | 403), "{}: {}", editor.0, r.status());
        browser.client.clone().close().await.unwrap();
    }
}
