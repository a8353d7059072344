//! Log out, a pasted edit URL opening after a login, and a reader without edit controls whose
//! forged write CouchDB refuses.

use super::prelude::*;

pub async fn run(f: &mut Fixture) {
    let Fixture { db, proxy, console, browser, id, .. } = f;
    // Shared from here on: only the browser changes (its screenshots).
    let (db, proxy, console, id) = (&*db, &*proxy, console.as_str(), id.as_str());
    // Log out. A link's edit form pasted as a URL opens once the editor has logged in.
    click_button(browser, "Log out").await;
    browser.find("#name").await;
    browser.client.goto(&format!("{console}#/{}/link/{id}/edit", db.name)).await.unwrap();
    fill(browser, "#name", EDITOR.0).await;
    fill(browser, "#password", EDITOR.1).await;
    browser.click("form[aria-label='Log in'] button[type=submit]").await;
    browser.find(&format!("form[aria-label='Edit {id}']")).await;
    assert_eq!(
        browser.find("#f-url").await.prop("value").await.unwrap().as_deref(),
        Some("https://example.com/summer")
    );
    click_button(browser, "Log out").await;
    browser.find("#name").await;

    // A reader: no edit control, and a write forged from the page itself is CouchDB's to refuse.
    log_in(browser, console, READER).await;
    page_says(browser, "(reader)").await;
    assert!(!buttons(browser).await.contains(&"New link".to_owned()));
    open_link(browser, id).await;
    page_says(browser, "summer").await;
    let names = buttons(browser).await;
    assert!(
        !names.iter().any(|n| ["Edit", "Deactivate", "Save", "Restore this version"].contains(&n.as_str())),
        "{names:?}"
    );
    page_says(browser, "History").await;
    browser.shot("reader").await;
    let status = browser
        .client
        .execute_async(
            "const done = arguments[arguments.length - 1];
             fetch('couch/' + arguments[0] + '/' + arguments[1])
               .then(r => r.json())
               .then(doc => fetch('couch/' + arguments[0] + '/' + arguments[1], {method: 'PUT',
                   headers: {'Content-Type': 'application/json'},
                   body: JSON.stringify({...doc, url: 'https://evil.example/'})}))
               .then(r => done(r.status));",
            vec![json!(db.name), json!(id)],
        )
        .await
        .unwrap();
    assert_eq!(status, json!(403));
    assert_eq!(location(proxy, id).await.as_deref(), Some("https://example.com/summer"));
    click_button(browser, "Log out").await;
    browser.find("#name").await;
}
