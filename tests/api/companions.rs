//! A links database's companions are placed by one setting each, read the same way by every
//! command: with `COUCHLINK_HISTORY_DB` naming a database of its own, `setup` makes it, every
//! proxy records into it, and the console and `couchlink history` read it; nothing goes to the
//! default `<db>_history` (before, `serve` had no such setting and recorded there whatever
//! the others read).

use std::time::Duration;

use clap::Parser;
use couchlink::cmd::{Cli, Command};
use couchlink::console::Console;
use serde_json::{json, Value};

use crate::support::eventually::{eventually, holds};
use crate::support::process::{couchlink_command, reader_env, wait_within, ServeProcess};
use crate::support::*;

/// `couchlink ARGS` on `db` as `who`, with `env`; its status and what it printed.
fn couchlink(db: &TestDb, who: (&str, &str), env: &[(&str, &str)], args: &[&str]) -> (bool, String) {
    let out = couchlink_command()
        .env("COUCHLINK_COUCHDB_URL", &db.couch.url)
        .env("COUCHLINK_COUCHDB_USER", who.0)
        .env("COUCHLINK_COUCHDB_PASSWORD", who.1)
        .env("COUCHLINK_DB", &db.name)
        .envs(env.iter().copied())
        .args(args)
        .output()
        .unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr))
}

fn admin_of(db: &TestDb) -> (&str, &str) {
    (&db.couch.admin_user, &db.couch.admin_password)
}

/// Whether database `name` exists on `db`'s server.
async fn exists(db: &TestDb, name: &str) -> bool {
    let r = http()
        .get(format!("{}/{name}", db.couch.url))
        .basic_auth(&db.couch.admin_user, Some(&db.couch.admin_password))
        .send()
        .await
        .unwrap();
    r.status().is_success()
}

#[tokio::test]
async fn setup_the_proxies_the_console_and_history_all_use_the_one_named_history_database() {
    let db = TestDb::new().await;
    let audit = format!("{}_audit", db.name);
    let beside = format!("{}_history", db.name);
    let place: &[(&str, &str)] = &[
        ("COUCHLINK_HISTORY_DB", &audit),
        ("COUCHLINK_CLICKS_DB", "off"),
        ("COUCHLINK_READER_ROLE", READER_ROLE),
        ("COUCHLINK_EDITOR_ROLE", EDITOR_ROLE),
    ];

    // Setup makes the named database, and no other, and a proxy account of the test's own that
    // records there (the shared test reader's roles are left alone, as other tests use it).
    let proxy_account = (format!("reader-{}", db.name), "proxy-pw");
    let mut with_account = place.to_vec();
    with_account
        .extend([("COUCHLINK_READER_USER", proxy_account.0.as_str()), ("COUCHLINK_READER_PASSWORD", "proxy-pw")]);
    let (ok, said) = couchlink(&db, admin_of(&db), &with_account, &["setup"]);
    assert!(ok, "setup: {said}");
    assert!(said.contains(&format!("history database {audit}: created")), "{said}");
    assert!(exists(&db, &audit).await && !exists(&db, &beside).await, "{said}");

    // A proxy records there: an edit becomes an entry in the named database.
    let mut env: Vec<(&str, String)> = reader_env(&db);
    env.retain(|(k, _)| !k.starts_with("COUCHLINK_COUCHDB_USER") && !k.starts_with("COUCHLINK_COUCHDB_PASSWORD"));
    env.extend([
        ("COUCHLINK_COUCHDB_USER", proxy_account.0.clone()),
        ("COUCHLINK_COUCHDB_PASSWORD", "proxy-pw".into()),
    ]);
    env.extend(place.iter().map(|(k, v)| (*k, v.to_string())));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let proxy = ServeProcess::start("proxy", &env);
    let written =
        db.request_as(Some(EDITOR), reqwest::Method::PUT, "Audt1", Some(&json!({"url": "https://a.example/"}))).await;
    assert_eq!(written.status(), 201, "{}", written.text().await.unwrap());
    proxy.wait_until_served("/Audt1", 302, Some("https://a.example/"), Duration::from_secs(10)).await;

    // `couchlink history` reads it, as a reader, placed by the same variable.
    let listed = eventually(&format!("Audt1's entry listed from {audit}"), Duration::from_secs(15), || async {
        let (ok, said) = couchlink(&db, READER, place, &["history", "Audt1", "--json"]);
        holds(ok && said.contains("https://a.example/"), said.clone()).map(|()| said)
    })
    .await;
    let entry: Value = serde_json::from_str(listed.lines().next().unwrap()).unwrap();
    assert_eq!(entry["after"]["url"], "https://a.example/", "{listed}");
    assert!(!exists(&db, &beside).await, "the proxy made or wrote {beside}");

    // The console, from the same flags, offers that database's history and no other.
    let Command::Console(args) = Cli::parse_from([
        "couchlink",
        "console",
        "--db",
        &db.name,
        "--history-db",
        &audit,
        "--clicks-db",
        "off",
        "--editor-role",
        EDITOR_ROLE,
    ])
    .command
    else {
        unreachable!("parsed as the console")
    };
    let sites = args.sites().unwrap();
    assert_eq!(sites[0].history_db.as_deref(), Some(audit.as_str()));
    let console =
        crate::console::serve_console(Console::new(sites, crate::console::bare_url(&db), false).unwrap()).await;
    let read = |name: &str| {
        http()
            .get(format!("{console}/couch/{name}/_all_docs?include_docs=true"))
            .basic_auth(EDITOR.0, Some(EDITOR.1))
            .send()
    };
    let through = read(&audit).await.unwrap();
    assert_eq!(through.status(), 200);
    let rows: Value = through.json().await.unwrap();
    assert!(rows["rows"].as_array().unwrap().iter().any(|r| r["id"].as_str().unwrap().starts_with("Audt1/")), "{rows}");
    assert_eq!(read(&beside).await.unwrap().status(), 404, "the console passes another history database");
}

#[test]
fn a_companion_setting_that_is_no_database_is_refused_by_every_command_naming_it() {
    for command in ["serve", "setup", "console", "clicks", "history", "restore", "bulk", "undo"] {
        let out = couchlink_command().args([command, "--help"]).output().unwrap();
        let help = String::from_utf8_lossy(&out.stdout);
        for (flag, variable) in [("--clicks-db", "COUCHLINK_CLICKS_DB"), ("--history-db", "COUCHLINK_HISTORY_DB")] {
            if !help.contains(flag) {
                continue;
            }
            // A command that took the value would go on (`serve` would serve): it is given
            // ten seconds to refuse, then stopped and the test fails.
            let mut child = couchlink_command()
                .arg(command)
                .env(variable, "Not A Name")
                .env("COUCHLINK_LISTEN", "127.0.0.1:0")
                .env("COUCHLINK_ADMIN_LISTEN", "127.0.0.1:0")
                .env("COUCHLINK_CONSOLE_LISTEN", "127.0.0.1:0")
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            let status = wait_within(&mut child, Duration::from_secs(10))
                .unwrap_or_else(|()| panic!("{command} took {variable}=\"Not A Name\" and went on"));
            let mut said = String::new();
            std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut said).unwrap();
            assert!(!status.success(), "{command} took {variable}=\"Not A Name\"");
            assert!(said.contains("cannot be a CouchDB database"), "{command}: {said}");
        }
    }
}

#[tokio::test]
async fn setup_and_serve_refuse_a_companion_that_is_a_links_database_or_the_other_companion() {
    let db = TestDb::new().await;
    let other = TestDb::new().await;
    let roles: &[(&str, &str)] = &[("COUCHLINK_READER_ROLE", READER_ROLE), ("COUCHLINK_EDITOR_ROLE", EDITOR_ROLE)];
    let refused = |env: &[(&str, &str)], args: &[&str]| {
        let mut with = roles.to_vec();
        with.extend_from_slice(env);
        let (ok, said) = couchlink(&db, admin_of(&db), &with, args);
        assert!(!ok, "{args:?} with {env:?} went on: {said}");
        said
    };
    // The links database itself, as either companion; both companions in one database.
    let said = refused(&[("COUCHLINK_HISTORY_DB", &db.name)], &["setup"]);
    assert!(said.contains("COUCHLINK_HISTORY_DB names the links database"), "{said}");
    let said = refused(&[("COUCHLINK_CLICKS_DB", &db.name)], &["setup"]);
    assert!(said.contains("COUCHLINK_CLICKS_DB names the links database"), "{said}");
    let shared = format!("{}_both", db.name);
    let said = refused(&[("COUCHLINK_CLICKS_DB", &shared), ("COUCHLINK_HISTORY_DB", &shared)], &["setup"]);
    assert!(said.contains("each needs a database of its own"), "{said}");
    assert!(!exists(&db, &shared).await, "setup made {shared} before refusing");
    // Another links database as this one's history, and a history database as a links database.
    let said = refused(&[("COUCHLINK_HISTORY_DB", &other.name)], &["setup"]);
    assert!(said.contains(&format!("{} is a links database", other.name)), "{said}");
    let other_history = format!("{}_history", other.name);
    let (ok, said) = couchlink(&other, admin_of(&other), roles, &["setup"]);
    assert!(ok, "{said}");
    let (ok, said) = couchlink(&db, admin_of(&db), roles, &["setup", "--db", &other_history]);
    assert!(!ok && said.contains(&format!("{other_history} is a history database")), "{said}");
    // Nothing of it was written: the links database takes an editor's link, the other's
    // history its recorder's entries only.
    let written =
        db.request_as(Some(EDITOR), reqwest::Method::PUT, "Kept1", Some(&json!({"url": "https://a.example/"}))).await;
    assert_eq!(written.status(), 201, "{}", written.text().await.unwrap());
    let design = http()
        .get(format!("{}/{}/_design/history", db.couch.url, other.name))
        .basic_auth(&db.couch.admin_user, Some(&db.couch.admin_password))
        .send()
        .await
        .unwrap();
    assert_eq!(design.status(), 404, "the other links database got a history's validation");

    // serve refuses the links database as its history before it serves.
    let mut child = couchlink_command()
        .arg("serve")
        .envs(reader_env(&db).iter().map(|(k, v)| (*k, v.as_str())))
        .env("COUCHLINK_HISTORY_DB", &db.name)
        .env("COUCHLINK_LISTEN", "127.0.0.1:0")
        .env("COUCHLINK_ADMIN_LISTEN", "127.0.0.1:0")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let status = wait_within(&mut child, Duration::from_secs(10)).expect("serve refused at once");
    let mut said = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut said).unwrap();
    assert!(!status.success() && said.contains("names the links database"), "{said}");

    // With several domains, a named history database is every command's refusal, not only
    // serve's: setup for one domain would rewrite another's validation.
    let domains = format!("a.example={},b.example={}", db.name, other.name);
    for args in [&["setup", "--domain", "a.example"][..], &["history", "Kept1", "--domain", "a.example"]] {
        let said = refused(&[("COUCHLINK_DOMAINS", &domains), ("COUCHLINK_HISTORY_DB", &shared)], args);
        assert!(said.contains("names one history database"), "{args:?}: {said}");
    }
}
