//! `couchlink import` and `couchlink export` against a real CouchDB API: one real-shaped sample
//! per format (`tests/import/`), known answers for every row, the validation function's own
//! reasons, re-runs, dry runs, a CouchDB cut mid-way, and the export round trip.

use std::path::{Path, PathBuf};
use std::process::Output;

use couchlink::transfer::entry::System;
use couchlink::transfer::import::{import, Import, ImportError, Progress};
use couchlink::transfer::read::{self, Columns};
use reqwest::Method;
use serde_json::{json, Value};

use crate::support::couch::{TestDb, EDITOR, READER};
use crate::support::process::couchlink_command;
use crate::support::relay::Relay;

const PUBLIC: &str = "https://0x1f.test";

fn sample(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/import").join(name)
}

/// `couchlink ARGS` as `who` on `db`.
fn couchlink(db: &TestDb, who: (&str, &str), args: &[&str]) -> Output {
    couchlink_command()
        .args(args)
        .env("COUCHLINK_COUCHDB_URL", &db.couch.url)
        .env("COUCHLINK_COUCHDB_USER", who.0)
        .env("COUCHLINK_COUCHDB_PASSWORD", who.1)
        .env("COUCHLINK_DB", &db.name)
        .env("COUCHLINK_PUBLIC_URL", PUBLIC)
        .output()
        .expect("couchlink runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Every document of `db` but design documents, by ID, without `_rev`.
async fn documents(db: &TestDb) -> Vec<(String, Value)> {
    let r = db.admin(Method::GET, "_all_docs?include_docs=true", None).await;
    let body: Value = r.json().await.unwrap();
    body["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|row| !row["id"].as_str().unwrap().starts_with("_design/"))
        .map(|row| {
            let mut doc = row["doc"].clone();
            doc.as_object_mut().unwrap().remove("_rev");
            // Each imported document states its writer and the run, for the history: checked
            // here, then left out of the comparisons.
            if let Some(edit) = doc.as_object_mut().unwrap().remove("edit") {
                assert_eq!(edit["by"], EDITOR.0, "{edit}");
                assert!(edit["batch"].as_str().unwrap().starts_with("import-"), "{edit}");
            }
            (row["id"].as_str().unwrap().to_owned(), doc)
        })
        .collect()
}

/// One format's sample and what importing it must give.
struct Case {
    system: &'static str,
    file: &'static str,
    args: &'static [&'static str],
    rows: usize,
    /// Links stored under their own code: ID and document (without `_id`).
    kept: Vec<(&'static str, Value)>,
    /// Links stored under a fresh ID: old short URL and document.
    renamed: Vec<(&'static str, Value)>,
    /// Refused rows: line and a part of the reason.
    invalid: Vec<(u64, &'static str)>,
}

/// What is in the database under `Takn1` before each import: a 5-character code of every
/// sample is taken.
fn taken() -> Value {
    json!({"url": "https://example.com/already-here", "inactive": false})
}

async fn import_as_known(case: Case) {
    let db = TestDb::new().await;
    db.put_link("Takn1", taken()).await;
    let before = documents(&db).await;
    let dir = tempfile::tempdir().unwrap();
    let mapping = dir.path().join("mapping.csv");
    let file = sample(case.file);
    let file = file.to_str().unwrap();
    let mapping_arg = mapping.to_str().unwrap();
    let run = |extra: &[&str]| {
        let mut args = vec!["import", file, "--from", case.system, "--mapping", mapping_arg];
        args.extend(case.args);
        args.extend(extra);
        couchlink(&db, EDITOR, &args)
    };

    // Invalid rows: each listed with its file, line and the validation function's reason;
    // nothing written, dry or not.
    for extra in [&["--dry-run"][..], &[]] {
        let out = run(extra);
        let stderr = text(&out.stderr);
        assert!(!out.status.success(), "{}: {stderr}", case.system);
        for (line, reason) in &case.invalid {
            let listed = stderr
                .lines()
                .find(|l| l.starts_with(&format!("{file}:{line}: ")))
                .unwrap_or_else(|| panic!("{}: line {line} not listed as invalid:\n{stderr}", case.system));
            assert!(listed.contains(reason), "{}: {listed:?} lacks {reason:?}", case.system);
        }
        assert_eq!(stderr.lines().filter(|l| l.starts_with(file)).count(), case.invalid.len(), "{stderr}");
        assert!(stderr.contains("nothing was written"), "{stderr}");
        assert_eq!(documents(&db).await, before, "{}: written with {extra:?}", case.system);
        assert!(!mapping.exists());
    }

    // A dry run that skips them writes nothing either, and says what it would do.
    let out = run(&["--dry-run", "--skip-invalid"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let would = case.kept.len() + case.renamed.len();
    let stdout = text(&out.stdout);
    assert!(stdout.starts_with(&format!("dry run, nothing written: {would} of {} rows", case.rows)), "{stdout}");
    assert_eq!(documents(&db).await, before);
    assert!(!mapping.exists());

    // The import itself.
    let out = run(&["--skip-invalid"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.starts_with(&format!(
            "imported {would} of {} rows from 1 file, {} under new IDs",
            case.rows,
            case.renamed.len()
        )),
        "{stdout}"
    );
    assert!(stdout.contains(&format!("; {} invalid, skipped", case.invalid.len())), "{stdout}");
    let docs: std::collections::HashMap<String, Value> = documents(&db).await.into_iter().collect();
    assert_eq!(docs.len(), before.len() + would);
    assert_eq!(docs["Takn1"], json!({"_id": "Takn1", "url": "https://example.com/already-here", "inactive": false}));
    for (id, wanted) in &case.kept {
        let mut wanted = wanted.clone();
        wanted["_id"] = json!(id);
        assert_eq!(docs.get(*id), Some(&wanted), "{}: {id}", case.system);
    }
    let table = std::fs::read_to_string(&mapping).unwrap();
    let mut lines = table.lines();
    assert_eq!(lines.next(), Some("old_short_url,new_short_url"));
    let rows: Vec<(String, String)> =
        lines.map(|l| l.split_once(',').map(|(a, b)| (a.to_owned(), b.to_owned())).unwrap()).collect();
    assert_eq!(rows.len(), case.renamed.len(), "{table}");
    for (old, wanted) in &case.renamed {
        let new = &rows.iter().find(|(o, _)| o == old).unwrap_or_else(|| panic!("{old} not in {table}")).1;
        let id = new.strip_prefix(&format!("{PUBLIC}/")).unwrap();
        assert!(couchlink::domain::LinkId::parse(id).is_ok(), "{new}");
        let mut wanted = wanted.clone();
        wanted["_id"] = json!(id);
        assert_eq!(docs.get(id), Some(&wanted), "{}: {old}", case.system);
    }

    // Again: nothing twice, the same mapping.
    let out = run(&["--skip-invalid"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.starts_with(&format!("imported 0 of {} rows", case.rows)), "{stdout}");
    assert!(stdout.contains(&format!("; {would} already imported, skipped")), "{stdout}");
    assert_eq!(documents(&db).await.len(), docs.len());
    let mut again: Vec<String> = std::fs::read_to_string(&mapping).unwrap().lines().map(str::to_owned).collect();
    let mut first: Vec<String> = table.lines().map(str::to_owned).collect();
    again.sort();
    first.sort();
    assert_eq!(again, first);
}

/// `imported_from` of a Bitly link.
fn bitly_from(code: &str, host: &str, created: &str) -> Value {
    json!({"system": "bitly", "code": code, "short_url": format!("https://{host}/{code}"), "created": created})
}

/// The link both Bitly samples keep under its own code.
fn bitly_store() -> (&'static str, Value) {
    let from = bitly_from("Bt5kA", "acme.co", "2023-05-02T16:40:03Z");
    ("Bt5kA", json!({"url": "https://example.com/store", "inactive": false, "imported_from": from}))
}

/// The link both Bitly samples give a fresh ID.
fn bitly_spring() -> (&'static str, Value) {
    let from = bitly_from("3Kq8ZxT", "bit.ly", "2023-04-18T09:12:44Z");
    let doc = json!({"url": "https://example.com/spring/?utm_source=flyer", "inactive": false,
                     "title": "Spring catalogue", "tags": ["print", "spring"], "imported_from": from});
    ("https://bit.ly/3Kq8ZxT", doc)
}

#[tokio::test]
async fn bitly_api_pages_import_as_known() {
    let from = bitly_from;
    import_as_known(Case {
        system: "bitly",
        file: "bitly.json",
        args: &[],
        rows: 5,
        kept: vec![bitly_store()],
        renamed: vec![
            bitly_spring(),
            (
                "https://acme.co/Takn1",
                // Archived in Bitly: inactive here.
                json!({"url": "https://example.com/taken", "inactive": true, "title": "Poster",
                       "imported_from": from("Takn1", "acme.co", "2023-05-09T08:00:00Z")}),
            ),
        ],
        invalid: vec![
            (45, "https://bit.ly/3Kq8ZxT is also on"),
            (59, "must not contain spaces, line breaks, invisible characters or letters outside A-Z"),
        ],
    })
    .await;
}

#[tokio::test]
async fn kutt_api_pages_import_as_known() {
    let from = |code: &str, created: &str| json!({"system": "kutt", "code": code, "short_url": format!("https://kutt.it/{code}"), "created": created});
    import_as_known(Case {
        system: "kutt",
        file: "kutt.json",
        args: &[],
        rows: 6,
        kept: vec![(
            "Kt7pQ",
            json!({"url": "https://example.org/docs/start", "inactive": false, "expires": "2030-06-30T00:00:00Z",
                   "title": "Getting started", "imported_from": from("Kt7pQ", "2024-01-15T10:20:30Z")}),
        )],
        renamed: vec![
            (
                "https://kutt.it/release-notes",
                json!({"url": "https://example.org/releases/", "inactive": false,
                       "imported_from": from("release-notes", "2024-02-01T08:00:00Z")}),
            ),
            (
                "https://kutt.it/Takn1",
                json!({"url": "https://example.org/banned", "inactive": true,
                       "imported_from": from("Takn1", "2024-02-10T11:11:11Z")}),
            ),
        ],
        invalid: vec![
            (46, "is also on"),
            (59, "secret is password-protected in Kutt"),
            (72, "Only \"http://\" and \"https://\" addresses are allowed"),
        ],
    })
    .await;
}

#[tokio::test]
async fn shlink_api_pages_import_as_known() {
    let from = |code: &str, created: &str| json!({"system": "shlink", "code": code, "short_url": format!("https://s.test/{code}"), "created": created});
    import_as_known(Case {
        system: "shlink",
        file: "shlink.json",
        args: &[],
        rows: 5,
        kept: vec![(
            "Sh1nk",
            json!({"url": "https://example.net/app", "inactive": false,
                   "valid_from": "2024-05-06T22:00:00Z", "expires": "2031-01-01T00:00:00Z", "max_visits": 500,
                   "targets": [
                       {"when": {"os": ["android"]}, "url": "https://play.google.com/store/apps/details?id=net.example.app"},
                       {"when": {"os": ["ios"]}, "url": "https://apps.apple.com/app/id1234567890"}],
                   "title": "Our app", "tags": ["app", "qr"],
                   "imported_from": from("Sh1nk", "2024-05-06T05:08:09Z")}),
        )],
        renamed: vec![
            (
                "https://s.test/abc123",
                json!({"url": "https://example.net/blog/post-1", "inactive": false,
                       "imported_from": from("abc123", "2024-05-07T08:00:00Z")}),
            ),
            (
                "https://s.test/Takn1",
                json!({"url": "https://example.net/taken", "inactive": false,
                       "imported_from": from("Takn1", "2024-05-08T08:00:00Z")}),
            ),
        ],
        // The same code on another Shlink domain is another link: refused for its host only.
        invalid: vec![(50, "https://s.test/abc123 is also on"), (64, "The host name must be lower-case")],
    })
    .await;
}

/// The CSV Shlink's web client downloads ("Export" in its list of short URLs): told from the
/// API's JSON by content, with the same `--from shlink`.
#[tokio::test]
async fn a_shlink_web_client_csv_imports_as_known() {
    let from = |code: &str, created: &str| json!({"system": "shlink", "code": code, "short_url": format!("https://s.test/{code}"), "created": created});
    import_as_known(Case {
        system: "shlink",
        file: "shlink-web-client.csv",
        args: &[],
        rows: 5,
        kept: vec![(
            "Sh1nk",
            json!({"url": "https://example.net/app", "inactive": false, "title": "Our app", "tags": ["app", "qr"],
                   "imported_from": from("Sh1nk", "2024-05-06T05:08:09Z")}),
        )],
        renamed: vec![
            (
                "https://s.test/abc123",
                json!({"url": "https://example.net/blog/post-1", "inactive": false, "title": "Blog: \"Post 1\"",
                       "imported_from": from("abc123", "2024-05-07T08:00:00Z")}),
            ),
            (
                "https://s.test/Takn1",
                json!({"url": "https://example.net/taken", "inactive": false, "title": "Posters, flyers",
                       "tags": ["print"], "imported_from": from("Takn1", "2024-05-08T08:00:00Z")}),
            ),
        ],
        invalid: vec![(5, "https://s.test/abc123 is also on"), (6, "The host name must be lower-case")],
    })
    .await;
}

/// The same button's CSV from web clients before the `domain` and `shortCode` columns (every
/// cell quoted, tags joined by commas).
#[tokio::test]
async fn an_older_shlink_web_client_csv_imports_as_known() {
    let from = |code: &str, created: &str| json!({"system": "shlink", "code": code, "short_url": format!("https://s.test/{code}"), "created": created});
    import_as_known(Case {
        system: "shlink",
        file: "shlink-web-client-2021.csv",
        args: &[],
        rows: 3,
        kept: vec![(
            "Old01",
            json!({"url": "https://example.net/old", "inactive": false, "title": "Old page", "tags": ["a", "b"],
                   "imported_from": from("Old01", "2021-03-01T10:00:00Z")}),
        )],
        renamed: vec![(
            "https://s.test/older-one",
            json!({"url": "https://example.net/older", "inactive": false,
                   "imported_from": from("older-one", "2021-03-02T10:00:00Z")}),
        )],
        invalid: vec![(4, "Only \"http://\" and \"https://\"")],
    })
    .await;
}

/// A Bitly CSV with the API's column names; archived links arrive inactive.
#[tokio::test]
async fn a_bitly_csv_imports_as_known() {
    let from = bitly_from;
    import_as_known(Case {
        system: "bitly",
        file: "bitly.csv",
        args: &[],
        rows: 7,
        kept: vec![bitly_store()],
        renamed: vec![
            bitly_spring(),
            (
                "https://acme.co/Takn1",
                json!({"url": "https://example.com/taken", "inactive": true, "title": "Poster", "tags": ["print", "poster"],
                       "imported_from": from("Takn1", "acme.co", "2023-05-09T08:00:00Z")}),
            ),
            (
                "https://bit.ly/6OnlyId",
                json!({"url": "https://example.com/only-id", "inactive": false,
                       "imported_from": from("6OnlyId", "bit.ly", "2023-06-01T00:00:00Z")}),
            ),
        ],
        invalid: vec![
            (5, "https://bit.ly/3Kq8ZxT is also on"),
            (6, "must not contain spaces"),
            (7, "\"archived\" is \"maybe\", not true or false"),
        ],
    })
    .await;
}

#[tokio::test]
async fn a_yourls_table_imports_as_known() {
    let from = |code: &str, created: &str| json!({"system": "yourls", "code": code, "created": created});
    import_as_known(Case {
        system: "yourls",
        file: "yourls.csv",
        args: &["--old-base", "https://sho.rt/"],
        rows: 5,
        kept: vec![(
            "Yr1sA",
            json!({"url": "https://example.com/yourls/one", "inactive": false, "title": "First link",
                   "imported_from": from("Yr1sA", "2019-08-21T14:40:03Z")}),
        )],
        renamed: vec![
            (
                "https://sho.rt/ozh",
                json!({"url": "https://ozh.org/", "inactive": false, "title": "Ozh",
                       "imported_from": from("ozh", "2019-08-22T09:00:00Z")}),
            ),
            (
                "https://sho.rt/Takn1",
                json!({"url": "https://example.com/yourls/taken", "inactive": false,
                       "imported_from": from("Takn1", "2019-08-23T10:00:00Z")}),
            ),
        ],
        invalid: vec![(5, "ozh is also on"), (6, "Only \"http://\" and \"https://\" addresses are allowed")],
    })
    .await;
}

#[tokio::test]
async fn any_csv_imports_by_its_named_columns() {
    import_as_known(Case {
        system: "csv",
        file: "links.csv",
        args: &["--url-column", "Long URL", "--code-column", "short code", "--old-base", "https://old.example"],
        rows: 5,
        kept: vec![(
            "Cs1vA",
            json!({"url": "https://example.com/csv/one", "inactive": false, "title": "One",
                   "tags": ["spring", "print"], "campaign": "spring-2025",
                   "imported_from": {"system": "csv", "code": "Cs1vA", "created": "2025-01-02T03:04:05Z"}}),
        )],
        renamed: vec![
            (
                "https://old.example/summer",
                json!({"url": "https://example.com/csv/two", "inactive": false, "title": "Two", "campaign": "summer-2025",
                       "imported_from": {"system": "csv", "code": "summer", "created": "2025-01-03T00:00:00Z"}}),
            ),
            (
                "https://old.example/Takn1",
                json!({"url": "https://example.com/csv/taken", "inactive": false,
                       "imported_from": {"system": "csv", "code": "Takn1"}}),
            ),
        ],
        invalid: vec![(5, "summer is also on"), (6, "must not have \".\" or \"..\" parts")],
    })
    .await;
}

#[tokio::test]
async fn a_column_named_but_missing_is_one_clear_error() {
    let db = TestDb::new().await;
    let file = sample("links.csv");
    let out = couchlink(&db, EDITOR, &["import", file.to_str().unwrap(), "--from", "csv", "--url-column", "target"]);
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(stderr.contains("no column \"target\" (the header has Long URL, Short code"), "{stderr}");
    let out = couchlink(&db, EDITOR, &["import", file.to_str().unwrap(), "--from", "kutt"]);
    assert!(text(&out.stderr).contains("is not a Kutt API v2 page of links"), "{}", text(&out.stderr));
    // The proxy's read-only account cannot import: the validation function says so per row.
    let out = couchlink(&db, READER, &["import", sample("kutt.json").to_str().unwrap(), "--from", "kutt", "--dry-run"]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("may not change links in this database"), "{}", text(&out.stderr));
}

/// Every kind of field a link document may hold, to go out and come back exactly.
fn varied_links() -> Vec<(&'static str, Value)> {
    vec![
        ("A1b2C", json!({"url": "https://example.com/a", "inactive": false})),
        (
            "Zz9yY",
            json!({"url": "/A1b2C/more", "inactive": true, "expires": "2031-01-01T00:00:00Z",
                         "valid_from": "2025-01-01T00:00:00Z", "fallback": "https://example.com/ended"}),
        ),
        (
            "m0Q4r",
            json!({"url": "https://example.com/app", "targets": [
            {"when": {"os": ["ios"]}, "url": "https://apps.apple.com/app/id1"},
            {"when": {"device": ["desktop"], "lang": ["fr", "de"]}, "url": "https://example.com/fr/"}],
            "note": "Zürich, \"quoted\", comma", "owner": {"team": "growth", "ids": [1, 2.5, null]},
            "imported_from": {"system": "bitly", "code": "3Kq8ZxT", "short_url": "https://bit.ly/3Kq8ZxT"}}),
        ),
        ("Oob01", json!({"url": "https://wallet.example/?_oob=eyJ0eXBlIjoiaW52In0", "oob": true, "Campaign": "X"})),
    ]
}

#[tokio::test]
async fn an_export_restores_exactly_and_a_second_restore_adds_nothing() {
    let source = TestDb::new().await;
    for (id, doc) in varied_links() {
        source.put_link(id, doc).await;
    }
    // A deleted link is not a link.
    source.put_link("Gone1", json!({"url": "https://example.com/gone"})).await;
    source.delete_link("Gone1").await;
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("links.jsonl");
    let out = couchlink(&source, READER, &["export", "--out", first.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("exported 4 links"), "{}", text(&out.stderr));
    let exported = std::fs::read_to_string(&first).unwrap();
    assert_eq!(exported.lines().count(), 4);
    // The documented order: by ID, `_id` then the known fields, then the others by name.
    assert_eq!(
        exported.lines().nth(2).unwrap(),
        r#"{"_id":"Zz9yY","url":"/A1b2C/more","inactive":true,"expires":"2031-01-01T00:00:00Z","valid_from":"2025-01-01T00:00:00Z","fallback":"https://example.com/ended"}"#
    );
    assert!(!exported.contains("_rev"));

    let target = TestDb::new().await;
    let out = couchlink(&target, EDITOR, &["import", first.to_str().unwrap(), "--from", "jsonl"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).starts_with("imported 4 of 4 rows"), "{}", text(&out.stdout));
    assert_eq!(documents(&target).await, documents(&source).await);
    let second = dir.path().join("again.jsonl");
    let out = couchlink(&target, READER, &["export", "--out", second.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    // Exactly, but for the `edit` each restored document states: its writer is the restorer.
    let without_edit = |text: &str| -> Vec<Value> {
        text.lines()
            .map(|l| {
                let mut doc: Value = serde_json::from_str(l).unwrap();
                doc.as_object_mut().unwrap().remove("edit");
                doc
            })
            .collect()
    };
    let again = std::fs::read_to_string(&second).unwrap();
    assert!(again.contains(r#""edit":{"at":"#), "{again}");
    assert_eq!(without_edit(&again), without_edit(&exported));

    let out = couchlink(&target, EDITOR, &["import", first.to_str().unwrap(), "--from", "jsonl"]);
    assert!(
        text(&out.stdout).contains("imported 0 of 4 rows from 1 file; 4 already imported"),
        "{}",
        text(&out.stdout)
    );

    // A restore over a different link under one ID refuses that row, by its line.
    target.put_link("A1b2C", json!({"url": "https://example.com/changed", "inactive": false})).await;
    let out = couchlink(&target, EDITOR, &["import", first.to_str().unwrap(), "--from", "jsonl", "--dry-run"]);
    assert!(!out.status.success());
    let file = first.to_str().unwrap();
    assert!(
        text(&out.stderr).contains(&format!("{file}:1: A1b2C holds a different link in this database")),
        "{}",
        text(&out.stderr)
    );

    // CSV: a header and one row per link, every field.
    let out = couchlink(&source, READER, &["export", "--format", "csv"]);
    let csv = text(&out.stdout);
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some("id,url,inactive,expires,valid_from,fallback,targets,oob,imported_from,other"));
    let mut reader = csv::Reader::from_reader(csv.as_bytes());
    let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), 4);
    let row = rows.iter().find(|r| &r[0] == "m0Q4r").unwrap();
    let (_, doc) = varied_links().into_iter().find(|(id, _)| *id == "m0Q4r").unwrap();
    assert_eq!(&row[1], "https://example.com/app");
    assert_eq!((&row[2], &row[3], &row[7]), ("", "", ""));
    assert_eq!(serde_json::from_str::<Value>(&row[6]).unwrap(), doc["targets"]);
    assert_eq!(serde_json::from_str::<Value>(&row[8]).unwrap(), doc["imported_from"]);
    assert_eq!(serde_json::from_str::<Value>(&row[9]).unwrap(), json!({"note": doc["note"], "owner": doc["owner"]}));
    let row = rows.iter().find(|r| &r[0] == "Zz9yY").unwrap();
    assert_eq!(
        row.iter().collect::<Vec<_>>(),
        [
            "Zz9yY",
            "/A1b2C/more",
            "true",
            "2031-01-01T00:00:00Z",
            "2025-01-01T00:00:00Z",
            "https://example.com/ended",
            "",
            "",
            "",
            ""
        ]
    );
}

/// 2,500 rows through a relay that is cut once the first wave of batches (two of 1,000) is in:
/// the import says what was written, and running it again writes exactly the rest.
#[tokio::test]
async fn a_couchdb_failure_midway_says_what_was_written_and_a_rerun_completes_it() {
    let db = TestDb::new().await;
    let relay = Relay::start(&db.couch.url).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("many.csv");
    let mut csv = String::from("url,code\n");
    for n in 0..2500 {
        csv.push_str(&format!("https://example.com/{n},legacy-{n}\n"));
    }
    std::fs::write(&file, csv).unwrap();
    let rows = || read::read(System::Csv, &file, &Columns::default()).unwrap();
    let mut config = db.couch_config();
    config.url = relay.url();
    let editor = couchlink::couch::CouchClient::new(&config).unwrap().with_credentials(EDITOR.0, EDITOR.1);
    let how = Import { system: System::Csv, dry_run: false, skip_invalid: false };

    let cut_after_first = |progress: Progress| {
        if matches!(progress, Progress::Writing { done, .. } if done >= 2000) {
            relay.cut();
        }
    };
    let Err(ImportError::Interrupted { outcome, total, from, .. }) =
        import(&editor, how, rows(), &cut_after_first).await
    else {
        panic!("the cut went unnoticed");
    };
    assert_eq!((outcome.written.len(), total), (2000, 2500));
    let docs = documents(&db).await;
    assert_eq!(docs.len(), 2000);
    // What it says was written is, and the row it names as failed is not.
    let written: std::collections::HashSet<&str> = docs.iter().map(|(id, _)| id.as_str()).collect();
    assert!(outcome.written.iter().all(|s| written.contains(s.id.as_str())));
    let failed_code = format!("legacy-{}", from.line - 2);
    assert!(docs.iter().all(|(_, d)| d["imported_from"]["code"] != failed_code.as_str()), "{failed_code}");

    relay.restore();
    let outcome = import(&editor, how, rows(), &|_| {}).await.unwrap();
    assert_eq!((outcome.written.len(), outcome.already.len()), (500, 2000));
    let docs = documents(&db).await;
    assert_eq!(docs.len(), 2500);
    let mut codes: Vec<&str> = docs.iter().map(|(_, d)| d["imported_from"]["code"].as_str().unwrap()).collect();
    codes.sort();
    codes.dedup();
    assert_eq!(codes.len(), 2500, "each row once");
}

/// A restore finds taken and deleted IDs both ways: reading a small database whole, and asking
/// a large one (more than two documents per row) for each ID.
#[tokio::test]
async fn a_restore_finds_taken_and_deleted_ids_in_small_and_large_databases() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("restore.jsonl");
    std::fs::write(
        &file,
        concat!(
            r#"{"_id":"Same1","url":"https://example.com/same","inactive":false}"#,
            "\n",
            r#"{"_id":"Gone2","url":"https://example.com/gone"}"#,
            "\n",
            r#"{"_id":"New01","url":"https://example.com/new","note":"kept as is"}"#,
            "\n",
        ),
    )
    .unwrap();
    for extra in [0, 40] {
        let db = TestDb::new().await;
        db.put_link("Same1", json!({"url": "https://example.com/same", "inactive": false})).await;
        db.put_link("Gone2", json!({"url": "https://example.com/before"})).await;
        db.delete_link("Gone2").await;
        let filler: Vec<Value> =
            (0..extra).map(|n| json!({"_id": format!("F{n:04}"), "url": "https://example.com/"})).collect();
        let r = db.admin(Method::POST, "_bulk_docs", Some(&json!({ "docs": filler }))).await;
        assert!(r.status().is_success());
        let out = couchlink(&db, EDITOR, &["import", file.to_str().unwrap(), "--from", "jsonl", "--skip-invalid"]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let stderr = text(&out.stderr);
        assert!(stderr.contains(":2: Gone2 was deleted in this database"), "{extra}: {stderr}");
        let stdout = text(&out.stdout);
        assert!(
            stdout.starts_with("imported 1 of 3 rows from 1 file; 1 already imported, skipped; 1 invalid"),
            "{extra}: {stdout}"
        );
        let r = db.admin(Method::GET, "New01", None).await;
        let mut doc: Value = r.json().await.unwrap();
        doc.as_object_mut().unwrap().remove("_rev");
        let edit = doc.as_object_mut().unwrap().remove("edit").expect("the import states its writer");
        assert_eq!(edit["by"], EDITOR.0);
        assert_eq!(doc, json!({"_id": "New01", "url": "https://example.com/new", "note": "kept as is"}));
    }
}

/// On a terminal a long import shows a progress bar (indicatif's), while it checks and while it
/// writes; into a pipe, only the summary line and nothing of the bar.
#[tokio::test]
async fn a_progress_bar_on_a_terminal_and_none_in_a_pipe() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("many.csv");
    let mut csv = String::from("url\n");
    for n in 0..3000 {
        csv.push_str(&format!("https://example.com/{n}\n"));
    }
    std::fs::write(&file, csv).unwrap();
    let piped = TestDb::new().await;
    let out = couchlink(&piped, EDITOR, &["import", file.to_str().unwrap(), "--from", "csv"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(!text(&out.stderr).contains("links written"), "{}", text(&out.stderr));

    // Python's pty gives the command a terminal and copies what it draws to our pipe.
    let db = TestDb::new().await;
    let out = std::process::Command::new("python3")
        .args(["-c", "import pty, sys; sys.exit(pty.spawn(sys.argv[1:]) >> 8)"])
        .arg(env!("CARGO_BIN_EXE_couchlink"))
        .args(["import", file.to_str().unwrap(), "--from", "csv"])
        .env("COUCHLINK_COUCHDB_URL", &db.couch.url)
        .env("COUCHLINK_COUCHDB_USER", EDITOR.0)
        .env("COUCHLINK_COUCHDB_PASSWORD", EDITOR.1)
        .env("COUCHLINK_DB", &db.name)
        .output()
        .expect("this test needs python3");
    let shown = text(&out.stdout);
    assert!(out.status.success(), "{shown}");
    assert!(shown.contains("/3000 links checked") && shown.contains("/3000 links written"), "{shown}");
    assert!(shown.contains("imported 3000 of 3000 rows"), "{shown}");
}

/// Rows the validation functions passed before writing, refused by CouchDB while writing (an
/// admin changed the function meanwhile): the others are written, the refused ones listed with
/// CouchDB's reason, and the import is an error, not a success.
#[tokio::test]
async fn rows_couchdb_refuses_while_writing_make_the_import_fail() {
    let db = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("late.csv");
    let mut csv = String::from("url,code\n");
    for n in 0..2500 {
        csv.push_str(&format!("https://example.com/late/{n},old-{n}\n"));
    }
    std::fs::write(&file, csv).unwrap();
    let rows = read::read(System::Csv, &file, &Columns::default()).unwrap();
    let editor = db.client_as(Some(EDITOR));
    let how = Import { system: System::Csv, dry_run: false, skip_invalid: false };
    let (url, name) = (db.couch.url.clone(), db.name.clone());
    let (admin, password) = (db.couch.admin_user.clone(), db.couch.admin_password.clone());
    // After the first wave, a stricter function: refused from then on.
    let stricter = move |progress: Progress| {
        if progress != (Progress::Writing { done: 2000, total: 2500 }) {
            return;
        }
        let (url, name, admin, password) = (url.clone(), name.clone(), admin.clone(), password.clone());
        std::thread::spawn(move || {
            tokio::runtime::Runtime::new().unwrap().block_on(async {
                let http = reqwest::Client::new();
                let design = format!("{url}/{name}/_design/couchlink");
                let mut doc: Value = http.get(&design).basic_auth(&admin, Some(&password)).send().await.unwrap().json().await.unwrap();
                let source = doc["validate_doc_update"].as_str().unwrap().replacen(
                    '{',
                    "{ if (newDoc.url && newDoc.url.indexOf('/late/') !== -1) { throw({forbidden: 'No more late links.'}); }",
                    1,
                );
                doc["validate_doc_update"] = json!(source);
                let r = http.put(&design).basic_auth(&admin, Some(&password)).json(&doc).send().await.unwrap();
                assert!(r.status().is_success());
            })
        })
        .join()
        .unwrap();
    };
    let Err(ImportError::RefusedWhileWriting(outcome)) = import(&editor, how, rows, &stricter).await else {
        panic!("the refusals went unnoticed");
    };
    assert_eq!((outcome.written.len(), outcome.invalid.len()), (2000, 500));
    assert!(outcome.invalid.iter().all(|i| i.reason == "No more late links."), "{:?}", outcome.invalid[0]);
    assert_eq!(documents(&db).await.len(), 2000);
}

/// Two imports of one file started at the same moment store each row once: fresh IDs are a
/// sequence of the source and the row's key, so the second writer meets the first at CouchDB's
/// conflict and finds its own row there. Both ways of learning what the database holds: a small
/// database read whole, and a larger one asked by key (the import's index, `_all_docs`).
#[tokio::test]
async fn two_imports_of_one_file_at_the_same_moment_store_each_row_once() {
    let dir = tempfile::tempdir().unwrap();
    for (rows, filler) in [(2000, 0), (300, 700)] {
        let db = TestDb::new().await;
        let docs: Vec<Value> =
            (0..filler).map(|n| json!({"_id": format!("F{n:04}"), "url": "https://example.com/filler"})).collect();
        if !docs.is_empty() {
            assert!(db.admin(Method::POST, "_bulk_docs", Some(&json!({ "docs": docs }))).await.status().is_success());
        }
        let file = dir.path().join(format!("twice-{rows}.csv"));
        let mut csv = String::from("url,code\n");
        for n in 0..rows {
            // Codes that are no couchlink IDs, and one that is: fresh IDs and a kept one.
            let code = if n == 0 { "Kept0".to_owned() } else { format!("legacy-{n}") };
            csv.push_str(&format!("https://example.com/{n},{code}\n"));
        }
        std::fs::write(&file, csv).unwrap();
        let editor = db.client_as(Some(EDITOR));
        let how = Import { system: System::Csv, dry_run: false, skip_invalid: false };
        let rows_of = || read::read(System::Csv, &file, &Columns::default()).unwrap();
        let (a, b) = tokio::join!(import(&editor, how, rows_of(), &|_| {}), import(&editor, how, rows_of(), &|_| {}));
        let (a, b) = (a.unwrap(), b.unwrap());
        assert_eq!(a.written.len() + b.written.len(), rows, "{rows} rows: each written by one of the two");
        assert_eq!(a.written.len() + a.already.len(), rows);
        assert_eq!(b.written.len() + b.already.len(), rows);
        let stored = documents(&db).await;
        assert_eq!(stored.len(), rows + filler);
        let mut codes: Vec<&str> = stored.iter().filter_map(|(_, d)| d["imported_from"]["code"].as_str()).collect();
        codes.sort();
        codes.dedup();
        assert_eq!(codes.len(), rows, "each row once");
        // Both runs report the same ID for each row (the mapping files agree).
        let id_of = |o: &couchlink::transfer::import::Outcome| {
            let mut ids: Vec<(String, String)> =
                o.written.iter().chain(&o.already).map(|s| (s.place.line.to_string(), s.id.to_string())).collect();
            ids.sort();
            ids
        };
        assert_eq!(id_of(&a), id_of(&b));
    }
}

/// An import into a database many times its size asks CouchDB by key: what it reads grows with
/// the file, not with the database (before, rows needing a fresh ID made it read everything).
#[tokio::test]
async fn an_import_into_a_large_database_reads_what_the_file_needs_not_the_whole_database() {
    let db = TestDb::new().await;
    let relay = Relay::start(&db.couch.url).await;
    let long = "x".repeat(400);
    let filler: Vec<Value> = (0..3000)
        .map(|n| json!({"_id": format!("G{n:04}"), "url": format!("https://example.com/{long}/{n}")}))
        .collect();
    assert!(db.admin(Method::POST, "_bulk_docs", Some(&json!({ "docs": filler }))).await.status().is_success());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("small.csv");
    let mut csv = String::from("url,code\n");
    for n in 0..100 {
        csv.push_str(&format!("https://example.com/new/{n},legacy-{n}\n"));
    }
    std::fs::write(&file, csv).unwrap();
    let mut config = db.couch_config();
    config.url = relay.url();
    let editor = couchlink::couch::CouchClient::new(&config).unwrap().with_credentials(EDITOR.0, EDITOR.1);
    let how = Import { system: System::Csv, dry_run: false, skip_invalid: false };
    let rows = || read::read(System::Csv, &file, &Columns::default()).unwrap();
    let outcome = import(&editor, how, rows(), &|_| {}).await.unwrap();
    assert_eq!(outcome.written.len(), 100);
    // The database holds 1.2 MB of links; reading it whole would be more than that.
    let first = relay.bytes_down();
    assert!(first < 300_000, "read {first} bytes for 100 rows");
    // A second run finds every row in the index, and reads as little.
    let before = relay.bytes_down();
    let again = import(&editor, how, rows(), &|_| {}).await.unwrap();
    assert_eq!((again.written.len(), again.already.len()), (0, 100));
    assert!(relay.bytes_down() - before < 300_000, "read {} bytes", relay.bytes_down() - before);
}
