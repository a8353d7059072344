//! The editor logs in: only the databases it may read are offered, and each shows its own links.

use super::prelude::*;

pub async fn run(f: &mut Fixture) {
    let Fixture { db, second, other, console, browser, .. } = f;
    // Shared from here on: only the browser changes (its screenshots).
    let (db, second, other, console) = (&*db, &*second, other.as_str(), console.as_str());
    // The editor logs in; the database it may not read is not offered.
    open_console(browser, console).await;
    browser.find("#name").await;
    browser.shot("log-in").await;
    log_in(browser, console, EDITOR).await;
    let said = page_says(browser, "(editor)").await;
    let mut offered = Vec::new();
    for option in browser.client.find_all(Locator::Css("#db option")).await.unwrap() {
        offered.push(option.text().await.unwrap());
    }
    assert_eq!(offered, [db.name.clone(), second.name.clone()], "only the databases the editor may read");
    assert!(!said.contains(other), "a database the editor may not read is offered:\n{said}");
    browser.find("#db").await.select_by_value(&second.name).await.unwrap();
    page_says(browser, "https://example.com/second-domain").await;
    browser.find("#db").await.select_by_value(&db.name).await.unwrap();
    let said = page_says(browser, "No links yet").await;
    assert!(!said.contains("second-domain"), "{said}");
}
