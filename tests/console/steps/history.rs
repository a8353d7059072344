//! The link's history: each change with its writer, and a version back in one click.

use super::prelude::*;

pub async fn run(f: &mut Fixture) {
    let Fixture { db, history_db, browser, http, id, .. } = f;
    // Shared from here on: only the browser changes (its screenshots).
    let (db, history_db, http, id) = (&*db, history_db.as_str(), &*http, id.as_str());
    // The link's history: each change with its writer (the console states the editor; the
    // admin's write from elsewhere stated nothing), and any version back in one click.
    let said = page_says(browser, "writer not stated").await;
    assert!(said.contains(&format!("by {}", EDITOR.0)), "{said}");
    let entries = admin_json(
        http,
        db,
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
    page_says(browser, "Points to: https://example.com/summer").await;
    let restored: Value = db.admin(reqwest::Method::GET, id, None).await.json().await.unwrap();
    assert_eq!(restored["edit"]["restores"], summer["rev"], "{restored}");
    assert_eq!(restored["edit"]["by"], EDITOR.0);
    assert_eq!(restored["targets"], Value::Null, "the version as it was, without the rules added since");
    page_says(browser, &format!("restores {}", summer["rev"].as_str().unwrap())).await;
}
