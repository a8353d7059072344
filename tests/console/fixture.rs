//! What every step of the console test shares, started once: a CouchDB 3 with the links
//! database (live counts and history set up), a second database the editor may read and one it
//! may not, `couchlink serve` counting every second, the console (holding no account) and one
//! browser session.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use couchlink::console::{Console, ConsoleSite};
use couchlink::domain::PublicUrl;

use crate::support::apache::ApacheCouchDb;
use crate::support::browser::Browser;
use crate::support::process::ServeProcess;
use crate::support::{test_setup, TestDb, EDITOR_ROLE, READER};
use crate::PROXY_INTERVAL;

pub struct Fixture {
    /// The CouchDB of the test's own, unless `COUCHLINK_TEST_COUCHDB_URL` named one.
    _own: Option<ApacheCouchDb>,
    /// The links database.
    pub db: TestDb,
    /// A second database the editor may read (several domains).
    pub second: TestDb,
    /// A database the test accounts may not read.
    pub other: String,
    /// The links database's history database.
    pub history_db: String,
    pub proxy: ServeProcess,
    /// The console's address, ending in `/`.
    pub console: String,
    pub browser: Browser,
    pub http: reqwest::Client,
    /// The link the editor makes in the first steps (a fresh random ID), which the others use.
    pub id: String,
}

impl Fixture {
    pub async fn start() -> Fixture {
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
        let http = crate::support::http();
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
        let browser = Browser::start("console-screenshots").await;
        Fixture { _own: own, db, second, other, history_db, proxy, console, browser, http, id: String::new() }
    }
}
