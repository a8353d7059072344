//! Link documents and who may do what: CouchDB itself keeps bad links and unauthorised people
//! out; `couchlink setup` and `couchlink create`.

use couchlink::cmd::create::{CreateError, NewLink};
use couchlink::cmd::setup::{Report, Step};
use couchlink::domain::LinkId;
use reqwest::Method;
use serde_json::{json, Value};

use crate::support::*;

/// One request to the links database as `who` (anonymous when `None`); the status.
async fn status_as(db: &TestDb, who: Option<(&str, &str)>, method: Method, path: &str, body: Option<Value>) -> u16 {
    db.request_as(who, method, path, body.as_ref()).await.status().as_u16()
}

#[tokio::test]
async fn access_matrix() {
    let db = TestDb::new().await;
    let admin = (db.couch.admin_user.as_str(), db.couch.admin_password.as_str());
    // Where the servers differ, the real CouchDB 3 is held to its own answers:
    // - a member writing a design document gets 403 forbidden ("You are not a db or server
    //   admin."); pouchdb-server says 401;
    // - a member writing `_security` gets 500 {"error":"error","reason":"no_majority"} from
    //   CouchDB 3.5 (every shard refuses it as forbidden, so no majority agrees; the object is
    //   unchanged, checked below); pouchdb-server says 401.
    let (design, security) = if db.couch.is_pouchdb { (401, 401) } else { (403, 500) };
    let set_up: Value = db.admin(Method::GET, "_security", None).await.json().await.unwrap();

    // (who, read, _all_docs, create, update, delete, design doc, _security, _changes)
    type Row<'a> = (&'a str, Option<(&'a str, &'a str)>, [u16; 8]);
    let matrix: [Row; 4] = [
        ("anonymous", None, [401, 401, 401, 401, 401, 401, 401, 401]),
        ("reader", Some(READER), [200, 200, 403, 403, 403, design, security, 200]),
        ("editor", Some(EDITOR), [200, 200, 201, 201, 403, design, security, 200]),
        ("admin", Some(admin), [200, 200, 201, 201, 200, 201, 200, 200]),
    ];
    // What members and strangers try to install: nobody would be let in.
    let locked_out = json!({"admins": {"names": [], "roles": []}, "members": {"names": ["intruder"], "roles": []}});
    for (n, (name, who, expected)) in matrix.into_iter().enumerate() {
        let id = ["Aaaa1", "Bbbb2", "Cccc3", "Dddd4"][n];
        let rev = db.put_link(id, json!({"url": "https://example.com/"})).await;
        let new_id = ["Newa1", "Newb2", "Newc3", "Newd4"][n];
        let new_security = if name == "admin" { set_up.clone() } else { locked_out.clone() };
        let got = [
            status_as(&db, who, Method::GET, id, None).await,
            status_as(&db, who, Method::GET, "_all_docs", None).await,
            status_as(&db, who, Method::PUT, new_id, Some(json!({"url": "https://example.com/new"}))).await,
            status_as(&db, who, Method::PUT, id, Some(json!({"_rev": rev, "url": "https://example.com/edited"}))).await,
            status_as(&db, who, Method::DELETE, &format!("{id}?rev={}", db.rev(id).await.unwrap()), None).await,
            status_as(&db, who, Method::PUT, &format!("_design/by_{n}"), Some(json!({"views": {}}))).await,
            status_as(&db, who, Method::PUT, "_security", Some(new_security)).await,
            status_as(&db, who, Method::GET, "_changes?limit=1", None).await,
        ];
        assert_eq!(got, expected, "{name}: read, _all_docs, create, update, delete, design doc, _security, _changes");
        let security: Value = db.admin(Method::GET, "_security", None).await.json().await.unwrap();
        assert_eq!(security, set_up, "after {name}'s attempt, _security is unchanged");
        let design_doc = db.admin(Method::GET, &format!("_design/by_{n}"), None).await.status();
        assert_eq!(design_doc == 200, name == "admin", "only the admin's design document exists ({name})");
    }
}

#[tokio::test]
async fn each_rule_refuses_a_bad_document_with_a_reason_people_understand() {
    let db = TestDb::new().await;
    let editor = db.client_as(Some(EDITOR));
    let long = format!("https://example.com/{}", "a".repeat(2030));
    let cases: Vec<(&str, Value, &str)> = vec![
        ("abc", json!({"url": "https://example.com/"}), "exactly 5"),
        ("a-b_c", json!({"url": "https://example.com/"}), "exactly 5"),
        ("b2c3d4e5-uuid-from-fauxton", json!({"url": "https://example.com/"}), "replace the ID"),
        ("Nourl", json!({"title": "no url"}), "needs a \"url\""),
        ("Numbr", json!({"url": 42}), "needs a \"url\""),
        ("Ftpxx", json!({"url": "ftp://example.com/file"}), "Only \"http://\" and \"https://\""),
        ("Jsxxx", json!({"url": "javascript:alert(1)"}), "Only \"http://\" and \"https://\""),
        ("Upper", json!({"url": "HTTPS://example.com/"}), "in lower case"),
        ("Plain", json!({"url": "example.com"}), "must start with \"http://\""),
        ("Space", json!({"url": "https://example.com/a b"}), "spaces"),
        ("Ctrlx", json!({"url": "https://example.com/a\r\nb"}), "line breaks"),
        ("Nbspx", json!({"url": "https://example.com/\u{a0}"}), "invisible"),
        ("Nohst", json!({"url": "https:///path"}), "no host"),
        ("Longx", json!({"url": long}), "at most 2048 bytes"),
        ("Slash", json!({"url": "//evil.example/"}), "single \"/\""),
        ("Inact", json!({"url": "https://example.com/", "inactive": "yes"}), "true or false"),
        ("Oobxx", json!({"url": "https://example.com/?oob=e30", "oob": "yes"}), "\"oob\" must be true or false"),
        ("Expir", json!({"url": "https://example.com/", "expires": "tomorrow"}), "like \"2026-12-31T23:59:59Z\""),
        (
            "Expi2",
            json!({"url": "https://example.com/", "expires": "2026-13-01T00:00:00Z"}),
            "like \"2026-12-31T23:59:59Z\"",
        ),
        (
            "Expi3",
            json!({"url": "https://example.com/", "expires": "2026-12-31 23:59:59"}),
            "like \"2026-12-31T23:59:59Z\"",
        ),
    ];
    // Not in the form sent: refused, the encoded form suggested where it can be worked out.
    let cases = [
        &cases[..],
        &[
            ("Utf8a", json!({"url": "https://example.com/café"}), "it is \"https://example.com/caf%C3%A9\""),
            ("Utf8b", json!({"url": "https://bücher.example/"}), "its xn-- form"),
            ("Opaq1", json!({"url": "https:evil.com"}), "spell out \"https://\""),
            ("Dots1", json!({"url": "/Good1/../admin"}), "\".\" or \"..\" parts"),
        ],
    ]
    .concat();
    for (id, doc, reason) in cases {
        let err = editor.create_doc_raw(id, &doc).await.expect_err(id);
        assert_eq!(err.status(), Some(403), "{id}: {err}");
        assert!(err.reason().unwrap().contains(reason), "{id}: {:?} should mention {reason:?}", err.reason());
    }
    // And the good ones go in.
    for (id, doc) in [
        ("Good1", json!({"url": "https://example.com/wp/?p=14", "inactive": false})),
        ("Good2", json!({"url": "http://example.com", "expires": "2026-12-31T23:59:59Z", "campaign": "winter"})),
        ("Good3", json!({"url": "/Good1/spring?utm_source=poster"})),
        (
            "Good4",
            json!({"url": "https://xn--bcher-kva.example/caf%C3%A9", "expires": "2026-12-31T23:59:59.5+01:00", "inactive": true}),
        ),
        ("Good5", json!({"url": format!("https://example.com/{}", "a".repeat(2048 - 20))})),
        ("Good6", json!({"url": "https://wallet.example/?_oob=e30", "oob": true})),
    ] {
        editor.create_doc_raw(id, &doc).await.unwrap_or_else(|e| panic!("{id} refused: {e}"));
    }
}

#[tokio::test]
async fn setup_is_idempotent_and_repairs_what_changed() {
    let db = TestDb::bare().await; // no design document yet
    let other_security = json!({"admins": {"names": [], "roles": []}, "members": {"names": [], "roles": ["staff"]}});
    db.admin(Method::PUT, "_security", Some(&other_security)).await;
    let admin = db.client_as(None);
    let reader = couchlink::cmd::setup::Reader { name: READER.0.into(), password: READER.1.into() };

    let first = couchlink::cmd::setup::run(&admin, Some(&reader), &test_setup()).await.unwrap();
    assert_eq!((first.database, first.security, first.design), (Step::Unchanged, Step::Updated, Step::Created));
    // Merged, not replaced: what an admin added stays, and the report says what was added.
    assert!(first.security_changes.iter().all(|c| c.starts_with("added ")), "{:?}", first.security_changes);
    let merged: Value = db.admin(Method::GET, "_security", None).await.json().await.unwrap();
    assert_eq!(merged["members"]["roles"], json!(["staff", READER_ROLE, EDITOR_ROLE]), "{merged}");
    let design_rev = db.rev("_design/couchlink").await.unwrap();

    let second = couchlink::cmd::setup::run(&admin, Some(&reader), &test_setup()).await.unwrap();
    assert_eq!(
        second,
        Report {
            database: Step::Unchanged,
            security: Step::Unchanged,
            security_changes: vec![],
            shared_roles: vec![],
            design: Step::Unchanged,
            console: Step::Unchanged,
            import: Step::Unchanged,
            clicks: None,
            history: None,
            reader: Step::Unchanged
        }
    );
    assert_eq!(db.rev("_design/couchlink").await.unwrap(), design_rev, "second run wrote nothing");

    // Someone edits the validation in Fauxton: setup puts the reviewed file back.
    db.admin(
        Method::PUT,
        "_design/couchlink",
        Some(&json!({"_rev": design_rev, "validate_doc_update": "function(){}"})),
    )
    .await;
    let third = couchlink::cmd::setup::run(&admin, Some(&reader), &test_setup()).await.unwrap();
    assert_eq!(third.design, Step::Updated);
    assert_eq!(
        db.client_as(Some(EDITOR))
            .create_doc_raw("Badid!", &json!({"url": "https://example.com/"}))
            .await
            .unwrap_err()
            .status(),
        Some(403)
    );
}

#[tokio::test]
async fn setup_on_a_new_database_creates_it_and_refuses_non_admins() {
    let mut config = TestDb::bare().await.couch_config();
    config.db = format!("test_{}", random_lowercase(12));
    let admin = couchlink::couch::CouchClient::new(&config).unwrap();
    let report = couchlink::cmd::setup::run(&admin, None, &test_setup()).await.unwrap();
    assert_eq!(
        (report.database, report.security, report.design, report.reader),
        (Step::Created, Step::Created, Step::Created, Step::Skipped)
    );

    let as_editor = admin.with_credentials(EDITOR.0, EDITOR.1);
    let err = couchlink::cmd::setup::run(&as_editor, None, &test_setup()).await.unwrap_err();
    assert!(err.to_string().contains("admin credentials"), "{err}");
}

#[tokio::test]
async fn create_stores_a_fresh_link_and_never_overwrites_or_reuses_an_id() {
    let db = TestDb::new().await;
    db.put_link("Taken", json!({"url": "https://original.example/"})).await;
    db.put_link("Gone1", json!({"url": "https://deleted.example/"})).await;
    db.delete_link("Gone1").await;
    let editor = db.client_as(Some(EDITOR));

    let ids = ["Taken", "Gone1", "Fresh"].map(|s| LinkId::parse(s).unwrap());
    let link = NewLink {
        expires: Some("2030-01-01T00:00:00Z".into()),
        valid_from: Some("2029-01-01T00:00:00Z".into()),
        fallback: Some("https://ended.example/".into()),
        ..NewLink::to("https://new.example/")
    };
    let id = couchlink::cmd::create::run(&editor, &link, ids).await.unwrap();
    assert_eq!(id.as_str(), "Fresh");
    let fresh: Value = db.admin(Method::GET, "Fresh", None).await.json().await.unwrap();
    assert_eq!(
        (fresh["url"].as_str(), fresh["inactive"].as_bool(), fresh["expires"].as_str()),
        (Some("https://new.example/"), Some(false), Some("2030-01-01T00:00:00Z"))
    );
    assert_eq!(
        (fresh["valid_from"].as_str(), fresh["fallback"].as_str()),
        (Some("2029-01-01T00:00:00Z"), Some("https://ended.example/"))
    );
    let taken: Value = db.admin(Method::GET, "Taken", None).await.json().await.unwrap();
    assert_eq!(taken["url"], "https://original.example/", "an existing link is never overwritten");
    assert_eq!(db.admin(Method::GET, "Gone1", None).await.status(), 404, "a deleted ID is not handed out again");
}

#[tokio::test]
async fn create_shows_couchdbs_reason_for_a_bad_url() {
    let db = TestDb::new().await;
    let err = couchlink::cmd::create::run(
        &db.client_as(Some(EDITOR)),
        &NewLink::to("ftp://example.com/"),
        std::iter::repeat_with(LinkId::random),
    )
    .await
    .unwrap_err();
    match err {
        CreateError::Refused { status: 403, reason } => {
            assert!(reason.starts_with("[url] Only \"http://\" and \"https://\""), "{reason}")
        }
        other => panic!("expected CouchDB's refusal, got {other}"),
    }
}

/// Runs `couchlink create ...args` as the editor against `db`.
pub(crate) fn create_with_the_binary(db: &TestDb, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_couchlink"))
        .arg("create")
        .args(args)
        .env("COUCHLINK_COUCHDB_URL", &couch().url)
        .env("COUCHLINK_COUCHDB_USER", EDITOR.0)
        .env("COUCHLINK_COUCHDB_PASSWORD", EDITOR.1)
        .env("COUCHLINK_DB", &db.name)
        .output()
        .unwrap()
}

#[tokio::test]
async fn the_binary_creates_a_link_that_the_proxy_then_serves() {
    let app = spawn_app_with(AppOptions::with(move |c| {
        c.public_url = Some(couchlink::domain::PublicUrl::parse("https://0x1f.ie").unwrap());
    }))
    .await;
    let output =
        create_with_the_binary(&app.db, &["https://example.com/campaign?x=1", "--public-url", "https://0x1f.ie"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let printed = String::from_utf8(output.stdout).unwrap();
    let id = printed.trim().strip_prefix("https://0x1f.ie/").unwrap_or_else(|| panic!("printed {printed:?}"));
    assert!(LinkId::parse(id).is_ok(), "{id}");
    assert_redirects_to(&app.get(&format!("/{id}")).await, "https://example.com/campaign?x=1");

    let refused = create_with_the_binary(&app.db, &["javascript:alert(1)"]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8(refused.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "one clear line: {stderr}");
    assert!(stderr.contains("\"url\": Only \"http://\" and \"https://\""), "{stderr}");
}

/// CouchDB passes the validation function's refusal on as its `reason`, the field's path first,
/// for every case of the table the console and the CLI read (tests/refusal_fields.json).
#[tokio::test]
async fn couchdb_passes_on_each_refusals_field() {
    let db = TestDb::new().await;
    let (editor, reader) = (db.client_as(Some(EDITOR)), db.client_as(Some(READER)));
    let table: Value = serde_json::from_str(include_str!("../refusal_fields.json")).unwrap();
    let mut tried = 0;
    for case in table["cases"].as_array().unwrap() {
        let mut doc = case["doc"].clone();
        let id = doc.as_object_mut().unwrap().remove("_id").unwrap();
        let id = id.as_str().unwrap();
        // A deletion needs a written link first: tests/fauxton deletes one in Fauxton.
        if doc.get("_deleted").is_some() {
            continue;
        }
        let client = if case.get("user").is_some() { &reader } else { &editor };
        let err = client.create_doc_raw(id, &doc).await.expect_err(&doc.to_string());
        assert_eq!(err.status(), Some(403), "{doc}: {err}");
        let refusal = couchlink::domain::Refusal::parse(err.reason().unwrap());
        assert_eq!(refusal.field(), case["field"].as_str(), "{doc}: {err}");
        tried += 1;
    }
    assert!(tried >= 30, "{tried}");
}
