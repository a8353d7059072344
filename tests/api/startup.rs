//! Contracts §7: misconfiguration is a clear error, an unreachable CouchDB is not.

use std::time::Duration;

use couchlink::client_ip::TrustedProxies;
use couchlink::couch::CouchConfig;
use couchlink::serve::{ServeConfig, StartError};
use tokio::net::TcpListener;

use crate::helpers::*;

async fn start(couch: CouchConfig, log_dir: std::path::PathBuf) -> Result<(), StartError> {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let config = ServeConfig {
        couch,
        public_url: "http://127.0.0.1".into(),
        log_dir,
        trusted_proxies: TrustedProxies::default(),
        cookie_name: "tid".into(),
        drain_timeout: Duration::from_secs(1),
        cache_capacity: 100,
        workers: 1,
    };
    // Shut down at once if it starts: the tests only look at how start-up ends.
    let admin = TcpListener::bind("127.0.0.1:0").await.unwrap();
    couchlink::serve::run(config, listener, admin, async {}).await
}

#[tokio::test]
async fn wrong_credentials_are_refused_with_a_clear_message() {
    let db = TestDb::new().await;
    let mut couch = db.couch_config();
    couch.password = Some("wrong".into());
    let dir = tempfile::tempdir().unwrap();
    let message = start(couch, dir.path().into()).await.unwrap_err().to_string();
    assert!(message.contains("refused user \"admin\"") && message.contains("incorrect"), "{message}");
}

#[tokio::test]
async fn a_missing_database_says_to_run_setup() {
    let mut couch = TestDb::new().await.couch_config();
    couch.db = "no_such_db_here".into();
    let dir = tempfile::tempdir().unwrap();
    let message = start(couch, dir.path().into()).await.unwrap_err().to_string();
    assert!(message.contains("does not exist") && message.contains("couchlink setup"), "{message}");
}

#[tokio::test]
async fn an_unwritable_log_directory_is_refused() {
    let db = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("not-a-dir");
    std::fs::write(&file, b"").unwrap();
    let message = start(db.couch_config(), file.join("logs")).await.unwrap_err().to_string();
    assert!(message.contains("cannot write the access log"), "{message}");
}

#[tokio::test]
async fn an_unreachable_couchdb_is_not_fatal_and_unknown_links_get_503() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let couch = CouchConfig { url: format!("http://127.0.0.1:{port}"), user: None, password: None, db: "links".into() };
    let mut app = spawn_app_with(AppOptions { couch: Some(couch), ..Default::default() }).await;
    let response = app.get("/H83if").await;
    assert_eq!(response.status(), 503);
    assert!(response.headers().contains_key("retry-after"));
    assert!(response.headers().contains_key("set-cookie"));
    app.stop().await.unwrap();
    assert_eq!(app.log_lines().len(), 1);
}
