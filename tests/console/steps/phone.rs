//! On a phone-sized screen nothing runs off its side; no credentials in the browser's storage.

use super::prelude::*;

pub async fn run(f: &mut Fixture) {
    let Fixture { console, browser, id, .. } = f;
    // Shared from here on: only the browser changes (its screenshots).
    let (console, id) = (console.as_str(), id.as_str());
    // On a phone-sized screen, nothing runs off its side; no credentials in the browser's storage.
    browser.client.set_window_size(390, 844).await.unwrap();
    browser.client.refresh().await.unwrap();
    page_says(browser, id).await;
    // Its breakdowns too, a card to a row.
    browser.find(".breakdowns figure").await;
    assert!(
        fits(browser, "document.documentElement", "window.innerWidth").await,
        "the link's page is wider than a phone"
    );
    open_console(browser, console).await;
    page_says(browser, id).await;
    assert!(fits(browser, "document.documentElement", "window.innerWidth").await, "the list is wider than a phone");
    // Nor does the list scroll sideways inside its box.
    let table = "document.querySelector('section[aria-label=Links] .scroll')";
    assert!(fits(browser, table, &format!("{table}.clientWidth")).await, "the list scrolls sideways on a phone");
    browser.shot("phone").await;
    browser.client.set_window_size(1280, 800).await.unwrap();
    let stored = browser.client.execute("return localStorage.length + sessionStorage.length", vec![]).await.unwrap();
    assert_eq!(stored, json!(0));
}
