//! What the steps do on the page and ask of the proxy and CouchDB: typing, clicking, reading
//! what the page says, each waiting (within a limit) for the page to get there.

use std::time::Duration;

use fantoccini::Locator;
use serde_json::{json, Value};

use crate::support::browser::Browser;
use crate::support::process::ServeProcess;
use crate::support::{eventually, holds, TestDb, Text};
use crate::DESKTOP;

/// Types `text` into the field labelled by `css`, replacing what it held.
pub async fn fill(browser: &Browser, css: &str, text: &str) {
    // The page may render again between finding the field and typing (a reload finishing):
    // a stale field is looked for again. And `clear` sends no input event, so a field the page
    // renders from its own state (the search) can be given its old text back by a render between
    // clearing and typing ("xsstest" + "Xss01" was seen): the field must hold `text` alone, as its
    // last input event told the page.
    let what = format!("{text:?} typed into {css}");
    eventually(&what, Duration::from_secs(5), || async {
        let field = browser.find(css).await;
        if field.clear().await.is_err() || field.send_keys(text).await.is_err() {
            return Err(None);
        }
        let value = field.prop("value").await.ok().flatten();
        holds(value.as_deref() == Some(text), value)
    })
    .await
}

/// Waits (at most 10 s) until the page's text contains `text`; all of its text.
pub async fn page_says(browser: &Browser, text: &str) -> String {
    let what = format!("the page says {text:?}");
    eventually(&what, Duration::from_secs(10), || async {
        let body = browser.find("body").await.text().await.unwrap_or_default();
        if body.contains(text) {
            Ok(body)
        } else {
            Err(Text(body))
        }
    })
    .await
}

pub async fn log_in(browser: &Browser, console: &str, who: (&str, &str)) {
    open_console(browser, console).await;
    fill(browser, "#name", who.0).await;
    fill(browser, "#password", who.1).await;
    browser.click("form[aria-label='Log in'] button[type=submit]").await;
    page_says(browser, "Log out").await;
}

pub async fn buttons(browser: &Browser) -> Vec<String> {
    let mut names = Vec::new();
    for button in browser.client.find_all(Locator::Css("button")).await.unwrap() {
        names.push(button.text().await.unwrap_or_default());
    }
    names
}

/// Where the proxy sends `GET /{id}`.
pub async fn location(proxy: &ServeProcess, id: &str) -> Option<String> {
    let response = proxy.get(&format!("/{id}")).await?;
    (response.status() == 302).then(|| response.headers()["location"].to_str().unwrap().to_owned())
}

/// Waits (at most 10 s) until the proxy sends `GET /{id}` to `target`.
pub async fn served_to(proxy: &ServeProcess, id: &str, target: &str) {
    let what = format!("the proxy sends /{id} to {target}");
    eventually(&what, Duration::from_secs(10), || async {
        let seen = location(proxy, id).await;
        holds(seen.as_deref() == Some(target), seen)
    })
    .await
}

/// `GET url` as CouchDB's admin: its JSON.
pub async fn admin_json(http: &reqwest::Client, db: &TestDb, url: &str) -> Value {
    let answer = http.get(url).basic_auth(&db.couch.admin_user, Some(&db.couch.admin_password)).send().await.unwrap();
    answer.json().await.unwrap()
}

/// Loads the console afresh at its first screen (chromedriver's `goto` from an address with
/// a hash to the same one without leaves the page as it is).
pub async fn open_console(browser: &Browser, console: &str) {
    browser.client.goto(console).await.unwrap();
    browser.client.execute("location.hash = '#/'", vec![]).await.unwrap();
    browser.client.refresh().await.unwrap();
}

/// Whether what the script `element` names is no wider than `width` (a script's number).
pub async fn fits(browser: &Browser, element: &str, width: &str) -> bool {
    let script = format!("return {element}.scrollWidth <= {width}");
    browser.client.execute(&script, vec![]).await.unwrap() == json!(true)
}

/// The address the browser shows.
pub async fn current_url(browser: &Browser) -> String {
    browser.client.current_url().await.unwrap().to_string()
}

/// Opens link `id` from the list (searching for it).
pub async fn open_link(browser: &Browser, id: &str) {
    fill(browser, "#search", id).await;
    click_button(browser, "Search").await;
    let what = format!("{id} shows in the list and opens");
    eventually(&what, Duration::from_secs(10), || async {
        let links = browser.client.find_all(Locator::Css("section[aria-label=Links] td a")).await.unwrap();
        for link in links {
            // The list may re-render under the search between finding and clicking: a stale
            // element is looked for again.
            if link.text().await.unwrap_or_default() == id && link.click().await.is_ok() {
                return Ok(());
            }
        }
        Err(Text(browser.page().await))
    })
    .await;
    browser.find("article").await;
}

/// `GET /{id}` as a browser: where the proxy sends it (`None`: no redirect).
pub async fn visit(http: &reqwest::Client, proxy: &ServeProcess, id: &str) -> Option<String> {
    let r = http.get(format!("http://{}/{id}", proxy.addr)).header("User-Agent", DESKTOP).send().await.unwrap();
    proxy.responses.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    r.headers().get("location").map(|l| l.to_str().unwrap().to_owned())
}

/// `GET path` as a browser, sent as it is (an HTTP client would take its dots away): the whole
/// answer.
pub async fn raw_get(proxy: &ServeProcess, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(proxy.addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nUser-Agent: {DESKTOP}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    stream.read_to_end(&mut out).await.unwrap();
    proxy.responses.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    String::from_utf8_lossy(&out).into_owned()
}

/// Sets the colour input `id` as a person picking `value` would (an input event).
pub async fn set_colour(browser: &Browser, id: &str, value: &str) {
    browser.find(&format!("#{id}")).await;
    let script = "const i = document.getElementById(arguments[0]); i.value = arguments[1];
                  i.dispatchEvent(new Event('input', {bubbles: true}));";
    browser.client.execute(script, vec![json!(id), json!(value)]).await.unwrap();
}

/// Clicks the button named `name` (waiting for it).
pub async fn click_button(browser: &Browser, name: &str) {
    let what = format!("a button {name:?} is clicked");
    eventually(&what, Duration::from_secs(10), || async {
        let mut seen = Vec::new();
        for button in browser.client.find_all(Locator::Css("button")).await.unwrap() {
            let text = button.text().await.unwrap_or_default();
            if text == name && button.click().await.is_ok() {
                return Ok(());
            }
            seen.push(text);
        }
        Err(seen)
    })
    .await
}
