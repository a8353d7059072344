//! Roles that belong to one links database: an account made for one database is a stranger to
//! every other on the same CouchDB, and databases set up with the shared role names of older
//! couchlink versions keep working until an admin drops them, said plainly.

use couchlink::cmd::setup::{self, SetupOptions};
use reqwest::Method;
use serde_json::{json, Value};

use crate::support::*;

/// A database set up with its own default roles (`<db>:reader`, `<db>:editor`), and an editor
/// account holding that database's editor role only.
async fn database_with_own_roles() -> (TestDb, (String, String)) {
    let db = TestDb { name: format!("test_{}", random_lowercase(12)), couch: couch().clone() };
    setup::run(&db.client_as(None), None, &SetupOptions::for_database(&db.name)).await.expect("setup works");
    let editor = (format!("{}-editor", db.name), "pw".to_owned());
    ensure_user(couch(), (&editor.0, &editor.1), &format!("{}:editor", db.name)).await;
    (db, editor)
}

async fn put_as(db: &TestDb, who: (&str, &str), id: &str) -> u16 {
    let doc = json!({"url": "https://example.com/"});
    db.request_as(Some(who), Method::PUT, id, Some(&doc)).await.status().as_u16()
}

#[tokio::test]
async fn an_editor_of_one_database_cannot_write_another_nor_can_a_shared_editor_role() {
    let (links, links_editor) = database_with_own_roles().await;
    let (acme, acme_editor) = database_with_own_roles().await;
    let links_editor = (links_editor.0.as_str(), links_editor.1.as_str());
    let acme_editor = (acme_editor.0.as_str(), acme_editor.1.as_str());
    assert_eq!(put_as(&links, links_editor, "Mine1").await, 201);
    assert_eq!(put_as(&acme, acme_editor, "Mine2").await, 201);
    // CouchDB 3 refuses a non-member 403 ("You are not allowed to access this db.");
    // pouchdb-server says 401. Either way nothing is written.
    let refused = put_as(&acme, links_editor, "Intr1").await;
    assert!(refused == 403 || (couch().is_pouchdb && refused == 401), "links' editor wrote to acme: {refused}");
    assert_eq!(acme.admin(Method::GET, "Intr1", None).await.status(), 404);
    // An account that carries the old shared "editor" role is a stranger to a database set up
    // with its own roles.
    let shared = ("couchlink-test-shared-editor", "pw");
    ensure_user(couch(), shared, "editor").await;
    let refused = put_as(&acme, shared, "Intr2").await;
    assert!(refused == 403 || (couch().is_pouchdb && refused == 401), "a shared editor wrote to acme: {refused}");
}

#[tokio::test]
async fn shared_roles_keep_working_until_dropped_and_setup_says_so() {
    // A database as an older couchlink set it up: the shared roles in _security.
    let db = TestDb { name: format!("test_{}", random_lowercase(12)), couch: couch().clone() };
    assert!(db.admin(Method::PUT, "", None).await.status().is_success());
    let old = json!({"admins": {"names": [], "roles": []},
        "members": {"names": ["alice"], "roles": ["reader", "editor"]}});
    assert!(db.admin(Method::PUT, "_security", Some(&old)).await.status().is_success());
    let shared = ("couchlink-test-shared-editor", "pw");
    ensure_user(couch(), shared, "editor").await;

    // Setup, as an operator runs it: it keeps admitting the shared roles and says so on stderr.
    let run = |extra: &[&str]| {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_couchlink"))
            .arg("setup")
            .args(extra)
            .env("COUCHLINK_COUCHDB_URL", &db.couch.url)
            .env("COUCHLINK_COUCHDB_USER", &db.couch.admin_user)
            .env("COUCHLINK_COUCHDB_PASSWORD", &db.couch.admin_password)
            .env("COUCHLINK_DB", &db.name)
            .env_remove("COUCHLINK_READER_PASSWORD")
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        (String::from_utf8(output.stdout).unwrap(), String::from_utf8(output.stderr).unwrap())
    };
    let (stdout, stderr) = run(&[]);
    let own = format!("{}:editor", db.name);
    assert!(stdout.contains(&format!("added members.roles \"{own}\"")), "{stdout}");
    assert!(!stdout.contains("removed"), "{stdout}");
    assert!(
        stderr.contains("still admits the shared roles \"reader\" and \"editor\"")
            && stderr.contains("--drop-shared-roles"),
        "{stderr}"
    );
    assert_eq!(put_as(&db, shared, "Old01").await, 201, "the shared editor still works until dropped");
    let security: Value = db.admin(Method::GET, "_security", None).await.json().await.unwrap();
    assert_eq!(security["members"]["names"], json!(["alice"]), "what the admin added is kept: {security}");

    // Dropped: the shared editor is refused, the database's own editor is not.
    let (stdout, stderr) = run(&["--drop-shared-roles"]);
    assert!(stdout.contains("removed members.roles \"editor\""), "{stdout}");
    assert!(!stderr.contains("still admits"), "{stderr}");
    let refused = put_as(&db, shared, "Old02").await;
    assert!(refused == 403 || (couch().is_pouchdb && refused == 401), "dropped, yet written: {refused}");
    let editor = (format!("{}-editor", db.name), "pw".to_owned());
    ensure_user(couch(), (&editor.0, &editor.1), &own).await;
    assert_eq!(put_as(&db, (&editor.0, &editor.1), "New01").await, 201);

    // Replacing outright is asked for by name, and says what it removed.
    let (stdout, _) = run(&["--replace-security"]);
    assert!(stdout.contains("removed members.names \"alice\""), "{stdout}");
}
