//! A limited link's visits: only redirects use one, and the open page says what the proxy admitted.

use super::prelude::*;

pub async fn run(f: &mut Fixture) {
    let Fixture { db, proxy, browser, http, .. } = f;
    // Shared from here on: only the browser changes (its screenshots).
    let (db, proxy, http) = (&*db, &*proxy, &*http);
    // A visit limit: only redirects use a visit. Requests answered 404 (paths after the ID that
    // resolve to nothing: twice the limit of them) use none; the open page says, live, the
    // redirects the proxy admitted, and the proxy serves the target while visits are left.
    let limited = "Limit";
    let (target, over) = ("https://example.com/limited", "https://example.com/over");
    db.put_link(limited, json!({"url": target, "max_visits": 4, "fallback": over})).await;
    // (It asks without a User-Agent, as a bot: a bot's redirect uses no visit of this link.)
    proxy.wait_until_served(&format!("/{limited}"), 302, Some(target), Duration::from_secs(10)).await;
    browser
        .client
        .execute("location.hash = arguments[0]", vec![json!(format!("#/{}/link/{limited}", db.name))])
        .await
        .unwrap();
    page_says(browser, "Visits: 0 of 4 (4 left)").await;
    for path in ["%2e%2e", "..", "%2E%2E?x=1", "a/../../.."] {
        for _ in 0..2 {
            let answer = raw_get(proxy, &format!("/{limited}/{path}")).await;
            assert!(answer.starts_with("HTTP/1.1 404"), "{path}: {answer}");
        }
    }
    let made = Instant::now();
    for _ in 0..3 {
        assert_eq!(visit(http, proxy, limited).await.as_deref(), Some(target), "visits are left");
    }
    let visits_line = "return Array.from(document.querySelectorAll('article p'))
                         .map(p => p.textContent).find(t => t.startsWith('Visits:')) || null";
    // Within LIVE of the first redirect, without a reload.
    let left = LIVE.saturating_sub(made.elapsed());
    eventually("the page says the 3 redirects' visits (not the 8 404s')", left, || async {
        let shown = browser.client.execute(visits_line, vec![]).await.unwrap();
        holds(shown == json!("Visits: 3 of 4 (1 left)"), shown)
    })
    .await;
    eprintln!("a limited link's visits shown {:?} after the first redirect, without a reload", made.elapsed());
    assert_eq!(visit(http, proxy, limited).await.as_deref(), Some(target), "the last visit left");
    assert_eq!(visit(http, proxy, limited).await.as_deref(), Some(over), "used up by its 4 redirects");
}
