//! A password and a visit limit set in the editor: only a hash stored, the proxy asks for it; the
//! visits left said.

use super::prelude::*;

pub async fn run(f: &mut Fixture) {
    let Fixture { db, proxy, browser, http, id, .. } = f;
    // Shared from here on: only the browser changes (its screenshots).
    let (db, proxy, http, id) = (&*db, &*proxy, &*http, id.as_str());
    // A password, set in the editor: only its hash is stored, the proxy asks for it, and the
    // editor removes it again.
    click_button(browser, "Edit").await;
    fill(browser, "#f-password", "staff only").await;
    click_button(browser, "Save").await;
    page_says(browser, "asks for a password").await;
    let stored: Value = db.admin(reqwest::Method::GET, id, None).await.json().await.unwrap();
    let hash = stored["password"].as_str().unwrap_or_else(|| panic!("no hash stored: {stored}"));
    assert!(hash.starts_with("$argon2id$v=19$") && !hash.contains("staff only"), "{hash}");
    eventually("the proxy asks for the password (401)", Duration::from_secs(10), || async {
        let status = http.get(format!("http://{}/{id}", proxy.addr)).send().await.unwrap().status();
        holds(status == 401, status)
    })
    .await;
    let opened =
        http.get(format!("http://{}/{id}", proxy.addr)).basic_auth("", Some("staff only")).send().await.unwrap();
    assert_eq!(opened.headers().get("location").map(|l| l.to_str().unwrap()), Some("https://example.com/summer"));
    click_button(browser, "Edit").await;
    browser.click("#f-remove-password").await;
    click_button(browser, "Save").await;
    served_to(proxy, id, "https://example.com/summer").await;
    // A visit limit, set in the editor; the link's page says what is left, as the proxies
    // counted it (the one redirect above, and those of the rules' steps before).
    click_button(browser, "Edit").await;
    fill(browser, "#f-max_visits", "1000").await;
    click_button(browser, "Save").await;
    let said = page_says(browser, "of 1000 (").await;
    assert!(said.contains("Visits: "), "{said}");
    let stored: Value = db.admin(reqwest::Method::GET, id, None).await.json().await.unwrap();
    assert_eq!(stored["max_visits"], json!(1000));

    db.put_link(
        id,
        json!({"url": "https://example.com/summer", "title": "Spring flyer",
                            "tags": ["flyer", "print"], "inactive": false}),
    )
    .await;
    browser.client.refresh().await.unwrap();
    page_says(browser, "Log out").await;
}
