//! The link's page: served by the proxy and followed when re-pointed, its QR tag, a URL per screen,
//! refusals in CouchDB's words, a conflict with someone else's save, deactivation.

use super::prelude::*;

pub async fn run(f: &mut Fixture) {
    let Fixture { db, proxy, console, browser, http, id, .. } = f;
    // Shared from here on: only the browser changes (its screenshots).
    let (db, proxy, console, http, id) = (&*db, &*proxy, console.as_str(), &*http, id.as_str());
    // The proxy serves it, and follows a re-pointing within a second.
    served_to(proxy, id, "https://example.com/spring").await;
    // The QR tag is couchlink's, of the short URL, for a visitor CouchDB lets read the database.
    let cookies = browser.client.get_all_cookies().await.unwrap();
    let session =
        cookies.iter().find(|c| c.name() == "AuthSession").expect("CouchDB's session cookie").value().to_owned();
    let tag = http
        .get(format!("{console}qr/{}/{id}.svg", db.name))
        .header("cookie", format!("AuthSession={session}"))
        .send()
        .await
        .unwrap();
    assert_eq!(tag.headers()["content-type"], "image/svg+xml");
    let anonymous = http.get(format!("{console}qr/{}/{id}.svg", db.name)).send().await.unwrap();
    assert_eq!(anonymous.status(), 401, "a tag for a visitor not logged in");
    browser.shot("link-page").await;

    // A URL per screen: the link's page has its own, a reload keeps it, back and forward move
    // between the screens visited (the new link's form, then this page).
    let here = current_url(browser).await;
    assert!(here.ends_with(&format!("#/{}/link/{id}", db.name)), "{here}");
    browser.client.refresh().await.unwrap();
    browser.find(&format!("article[aria-label='Link {id}']")).await;
    browser.client.back().await.unwrap();
    browser.find("form[aria-label='New link']").await;
    assert!(current_url(browser).await.ends_with(&format!("#/{}/new", db.name)));
    browser.client.forward().await.unwrap();
    browser.find(&format!("article[aria-label='Link {id}']")).await;
    click_button(browser, "Edit").await;
    fill(browser, "#f-url", "https://example.com/summer").await;
    click_button(browser, "Save").await;
    let saved = Instant::now();
    served_to(proxy, id, "https://example.com/summer").await;
    let took = saved.elapsed();
    assert!(took < FRESH + Duration::from_millis(500), "the proxy served the edit after {took:?}");

    // Each refusal is shown next to its field, in CouchDB's words; every control has a name.
    page_says(browser, "summer").await;
    click_button(browser, "Edit").await;
    let unnamed = browser
        .client
        .execute(
            "return Array.from(document.querySelectorAll('input, select, textarea, button'))
               .filter(e => e.tagName === 'BUTTON' ? !e.textContent.trim() : e.labels.length === 0)
               .map(e => e.outerHTML)",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(unnamed, json!([]), "controls without an accessible name");
    fill(browser, "#f-url", "ftp://example.com/file").await;
    click_button(browser, "Save").await;
    let alert = browser.find("#e-url").await.text().await.unwrap();
    assert!(alert.contains("Only \"http://\" and \"https://\""), "{alert}");
    fill(browser, "#f-url", "https://example.com/summer").await;
    fill(browser, "#f-expires", "next friday").await;
    click_button(browser, "Save").await;
    let alert = browser.find("#e-expires").await.text().await.unwrap();
    assert!(alert.contains("\"expires\" must be a date and time with its time zone"), "{alert}");
    browser.shot("refused").await;
    click_button(browser, "Cancel").await;

    // Someone else saves meanwhile: both versions are shown, and nothing is overwritten unasked.
    click_button(browser, "Edit").await;
    // (The form is the revision it read: someone saves after it shows.)
    browser.find(&format!("form[aria-label='Edit {id}']")).await;
    let theirs = db
        .put_link(
            id,
            json!({"url": "https://example.com/autumn", "title": "Autumn flyer",
                                          "tags": ["flyer"], "inactive": false}),
        )
        .await;
    fill(browser, "#f-url", "https://example.com/winter").await;
    click_button(browser, "Save").await;
    let said = page_says(browser, "Someone else saved").await;
    assert!(said.contains("https://example.com/winter") && said.contains("https://example.com/autumn"), "{said}");
    let stored: Value = db.admin(reqwest::Method::GET, id, None).await.json().await.unwrap();
    assert_eq!(stored["_rev"], json!(theirs), "the editor's save overwrote nothing");
    browser.shot("conflict").await;
    click_button(browser, "Keep mine").await;
    page_says(browser, "Points to: https://example.com/winter").await;
    let stored: Value = db.admin(reqwest::Method::GET, id, None).await.json().await.unwrap();
    assert_eq!(
        (stored["url"].as_str(), stored["title"].as_str()),
        (Some("https://example.com/winter"), Some("Spring flyer"))
    );

    // Deactivated, the proxy answers 404; reactivated, it redirects again.
    click_button(browser, "Deactivate").await;
    eventually("the proxy answers the inactive link 404", Duration::from_secs(10), || async {
        let status = proxy.get(&format!("/{id}")).await.map(|r| r.status().as_u16());
        holds(status == Some(404), status)
    })
    .await;
    click_button(browser, "Reactivate").await;
    served_to(proxy, id, "https://example.com/winter").await;
}
