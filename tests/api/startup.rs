//! Start-up: misconfiguration is a clear error, an unreachable CouchDB is not.

use couchlink::errors::Causes;

use crate::support::*;

/// The CouchDB flags of `db`'s admin, with `password` and `db_name` in place of theirs.
fn couch_args(db: &TestDb, password: &str, db_name: &str) -> Vec<(&'static str, String)> {
    vec![
        ("--couchdb-url", db.couch.url.clone()),
        ("--couchdb-user", db.couch.admin_user.clone()),
        ("--couchdb-password", password.to_owned()),
        ("--db", db_name.to_owned()),
    ]
}

#[tokio::test]
async fn wrong_credentials_are_refused_with_a_clear_message() {
    let db = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let mut args = couch_args(&db, "wrong", &db.name);
    args.push(("--log-dir", dir.path().display().to_string()));
    let message = Causes(&start_and_stop(&args).await.unwrap_err()).to_string();
    assert!(
        message.contains(&format!("refused user {:?}", db.couch.admin_user)) && message.contains("incorrect"),
        "{message}"
    );
}

#[tokio::test]
async fn a_missing_database_says_to_run_setup() {
    let db = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let mut args = couch_args(&db, &db.couch.admin_password, "no_such_db_here");
    args.push(("--log-dir", dir.path().display().to_string()));
    let message = start_and_stop(&args).await.unwrap_err().to_string();
    assert!(message.contains("does not exist") && message.contains("couchlink setup"), "{message}");
}

#[tokio::test]
async fn an_unwritable_log_directory_is_refused() {
    let db = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("not-a-dir");
    std::fs::write(&file, b"").unwrap();
    let mut args = couch_args(&db, &db.couch.admin_password, &db.name);
    args.push(("--log-dir", file.join("logs").display().to_string()));
    let message = start_and_stop(&args).await.unwrap_err().to_string();
    assert!(message.contains("cannot write the access log"), "{message}");
}

#[tokio::test]
async fn an_unreachable_couchdb_is_not_fatal_and_unknown_links_get_503() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut app = spawn_app_with(AppOptions::args(&[("--couchdb-url", &format!("http://127.0.0.1:{port}"))])).await;
    let response = app.get("/H83if").await;
    assert_eq!(response.status(), 503);
    assert!(response.headers().contains_key("retry-after"));
    assert!(response.headers().contains_key("set-cookie"));
    app.stop().await.unwrap();
    assert_eq!(app.log_lines().len(), 1);
}

/// Runs the `couchlink` binary with `args` and the environment variables `env`; its exit
/// status and stderr.
fn run_binary(args: &[&str], env: &[(&str, &str)]) -> (std::process::ExitStatus, String) {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_couchlink"));
    command.args(args).envs(env.iter().copied());
    let output = command.output().expect("the binary runs");
    (output.status, String::from_utf8_lossy(&output.stderr).into_owned())
}

#[test]
fn a_public_url_that_would_break_headers_is_refused_at_start() {
    for (value, reason) in [
        ("https://0x1f.ie\n", "whitespace or control characters"),
        ("ftp://0x1f.ie", "http:// or https://"),
        ("https://0x1f.ie/?campaign=x", "query"),
    ] {
        let (status, stderr) = run_binary(&["serve"], &[("COUCHLINK_PUBLIC_URL", value)]);
        assert!(!status.success(), "{value:?} accepted");
        assert!(stderr.contains("--public-url") && stderr.contains(reason), "{value:?}: {stderr}");
    }
}

#[test]
fn zero_workers_is_refused_not_silently_one() {
    let (status, stderr) = run_binary(&["serve"], &[("COUCHLINK_WORKERS", "0")]);
    assert!(!status.success());
    assert!(stderr.contains("--workers"), "{stderr}");
}
