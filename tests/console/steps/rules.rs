//! Rules made in the rule editor, served by the proxy; a bad one refused by its rule.

use super::prelude::*;

pub async fn run(f: &mut Fixture) {
    let Fixture { db, proxy, browser, http, id, .. } = f;
    // Shared from here on: only the browser changes (its screenshots).
    let (db, proxy, http, id) = (&*db, &*proxy, &*http, id.as_str());
    // A rule, made in the rule editor: iPhones go to the App Store; a bad one is refused by its rule.
    click_button(browser, "Edit").await;
    click_button(browser, "Add a rule").await;
    fill(browser, "#r0-os", "ios").await;
    fill(browser, "#r0-url", "https://apps.apple.com/app/id1").await;
    click_button(browser, "Save").await;
    page_says(browser, "Points to: https://example.com/winter").await;
    let stored: Value = db.admin(reqwest::Method::GET, id, None).await.json().await.unwrap();
    assert_eq!(stored["targets"], json!([{"when": {"os": ["ios"]}, "url": "https://apps.apple.com/app/id1"}]));
    let iphone = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) \
                  Version/17.0 Mobile/15E148 Safari/604.1";
    eventually("the proxy applies the rule", Duration::from_secs(10), || async {
        let r = http.get(format!("http://{}/{id}", proxy.addr)).header("user-agent", iphone).send().await.unwrap();
        let location = r.headers().get("location").map(|l| l.to_str().unwrap().to_owned());
        holds(location.as_deref() == Some("https://apps.apple.com/app/id1"), location)
    })
    .await;
    click_button(browser, "Edit").await;
    fill(browser, "#r0-device", "watch").await;
    click_button(browser, "Save").await;
    let alert = browser.find("#e-targets").await.text().await.unwrap();
    assert!(alert.contains("\"device\"") && alert.contains("watch"), "{alert}");
    click_button(browser, "Cancel").await;
    // A second rule: a country and a campaign parameter, split between two pages.
    click_button(browser, "Edit").await;
    click_button(browser, "Add a rule").await;
    fill(browser, "#r1-country", "IE, GB").await;
    fill(browser, "#r1-query", "utm_source=flyer,poster").await;
    fill(browser, "#r1-split", "70 https://example.com/a\n30 https://example.com/b").await;
    browser.shot("rules").await;
    click_button(browser, "Save").await;
    page_says(browser, "Points to: https://example.com/winter").await;
    let stored: Value = db.admin(reqwest::Method::GET, id, None).await.json().await.unwrap();
    assert_eq!(
        stored["targets"][1],
        json!({"when": {"country": ["IE", "GB"], "query": {"utm_source": ["flyer", "poster"]}},
               "split": [{"weight": 70, "url": "https://example.com/a"}, {"weight": 30, "url": "https://example.com/b"}]})
    );
}
