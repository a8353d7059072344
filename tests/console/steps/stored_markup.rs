//! A title with markup and a javascript: URL an admin stored past validation stay inert.

use super::prelude::*;

pub async fn run(f: &mut Fixture) {
    let Fixture { db, console, browser, .. } = f;
    // Shared from here on: only the browser changes (its screenshots).
    let (db, console) = (&*db, console.as_str());
    // A title with markup and a javascript: URL an admin stored past validation stay inert.
    let design_rev = db.rev("_design/couchlink").await.unwrap();
    let design: Value = db.admin(reqwest::Method::GET, "_design/couchlink", None).await.json().await.unwrap();
    db.admin(reqwest::Method::DELETE, &format!("_design/couchlink?rev={design_rev}"), None).await;
    let hostile = json!({"url": "javascript:window.__clicked=1", "title": "<img src=x onerror=window.__xss=1>",
                         "tags": ["xsstest"], "inactive": false});
    let put = db.admin(reqwest::Method::PUT, "Xss01", Some(&hostile)).await;
    assert!(put.status().is_success(), "{:?}", put.text().await);
    let mut restored = design.clone();
    restored.as_object_mut().unwrap().remove("_rev");
    db.admin(reqwest::Method::PUT, "_design/couchlink", Some(&restored)).await;
    open_console(browser, console).await;
    fill(browser, "#search", "xsstest").await;
    click_button(browser, "Search").await;
    page_says(browser, "<img src=x onerror=window.__xss=1>").await;
    open_link(browser, "Xss01").await;
    page_says(browser, "javascript:window.__clicked=1").await;
    // The page decides its status as the proxy does (tests/link_status.json): refused, not live.
    let status = browser.find("article [class^=status-]").await.text().await.unwrap();
    assert_eq!(status, "refused (url)");
    let hrefs = browser
        .client
        .execute("return Array.from(document.querySelectorAll('a')).map(a => a.href)", vec![])
        .await
        .unwrap();
    assert!(!hrefs.to_string().contains("javascript:"), "{hrefs}");
    assert!(browser.client.find_all(Locator::Css("article img[src=x]")).await.unwrap().is_empty());
    let xss = browser.client.execute("return [window.__xss, window.__clicked]", vec![]).await.unwrap();
    assert_eq!(xss, json!([null, null]));
    browser.shot("stored-markup-stays-text").await;
}
