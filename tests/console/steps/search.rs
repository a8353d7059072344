//! A taken ID is said so; a search finds by a tag's beginning, and a slower older search's answer
//! is never shown.

use super::prelude::*;

pub async fn run(f: &mut Fixture) {
    let Fixture { db, proxy, console, browser, id, .. } = f;
    // Shared from here on: only the browser changes (its screenshots).
    let (db, proxy, console, id) = (&*db, &*proxy, console.as_str(), id.as_str());
    // A chosen ID that is taken is said so next to the ID, and nothing is overwritten.
    open_console(browser, console).await;
    click_button(browser, "New link").await;
    fill(browser, "#f-id", id).await;
    fill(browser, "#f-url", "https://example.com/taken").await;
    click_button(browser, "Save").await;
    let alert = browser.find("#e-id").await.text().await.unwrap();
    assert!(alert.contains(&format!("The ID {id} is taken")), "{alert}");
    assert_eq!(location(proxy, id).await.as_deref(), Some("https://example.com/summer"));
    click_button(browser, "Cancel").await;

    // Search by a tag's beginning finds the flyer. A slower earlier search (its answer held
    // back 1.5 s in the page) answered after it is never shown. The page says when it has read
    // the held answer (or its fetch ended unanswered): only then is what it shows looked at.
    open_console(browser, console).await;
    page_says(browser, id).await;
    browser
        .client
        .execute(
            "const fetch0 = window.fetch;
             const read = () => setTimeout(() => { window.__held = 'read'; }, 0);
             window.fetch = (url, init) => {
               const held = String(url).includes('xsstest');
               if (held) window.__held = 'asked';
               return fetch0(url, init).then(r => {
                 if (!held) return r;
                 const json0 = r.json.bind(r);
                 r.json = () => json0().finally(read);
                 return new Promise(done => setTimeout(() => done(r), 1500));
               }, e => { if (held) read(); throw e; });
             };",
            vec![],
        )
        .await
        .unwrap();
    fill(browser, "#search", "xsstest").await;
    click_button(browser, "Search").await;
    fill(browser, "#search", "fly").await;
    click_button(browser, "Search").await;
    page_says(browser, id).await;
    eventually("the page has read the slower search's answer", Duration::from_secs(10), || async {
        let held = browser.client.execute("return window.__held || null", vec![]).await.unwrap();
        holds(held == json!("read"), held)
    })
    .await;
    let said = page_says(browser, id).await;
    assert!(!said.contains("Xss01"), "the slower, older search's answer was shown:\n{said}");
    assert!(current_url(browser).await.ends_with(&format!("#/{}/links?q=fly", db.name)));
    browser.shot("search").await;
}
