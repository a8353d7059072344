//! A new link made in the editor's form, under a fresh random ID.

use super::prelude::*;

pub async fn run(f: &mut Fixture) {
    let Fixture { db, browser, id, .. } = f;
    // Shared from here on: only the browser changes (its screenshots).
    let db = &*db;
    // A new link, under a fresh random ID.
    browser.click("section[aria-label=Links] button").await;
    fill(browser, "#f-url", "https://example.com/spring").await;
    fill(browser, "#f-title", "Spring flyer").await;
    fill(browser, "#f-tags", "flyer, print").await;
    browser.shot("new-link").await;
    browser.click("form[aria-label='New link'] button[type=submit]").await;
    let short = browser.find("output[aria-label='Short URL']").await.text().await.unwrap();
    *id = short.rsplit('/').next().unwrap().to_owned();
    let id = id.as_str();
    assert_eq!(couchlink::domain::LinkId::parse(id).unwrap().as_str(), id);
    let stored: Value = db.admin(reqwest::Method::GET, id, None).await.json().await.unwrap();
    assert_eq!(
        (stored["url"].as_str(), stored["title"].as_str()),
        (Some("https://example.com/spring"), Some("Spring flyer"))
    );
    assert_eq!(stored["tags"], json!(["flyer", "print"]));
    assert!(stored["created"].is_string(), "{stored}");
}
