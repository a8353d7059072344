//! A print sheet of the ticked links, a bulk change with its undo, and a tag's colours.

use super::prelude::*;

pub async fn run(f: &mut Fixture) {
    let Fixture { db, console, browser, http, id, .. } = f;
    // Shared from here on: only the browser changes (its screenshots).
    let (db, console, http, id) = (&*db, console.as_str(), &*http, id.as_str());
    // A print sheet of the links ticked, in the colours picked: the console makes the PDF.
    open_console(browser, console).await;
    page_says(browser, id).await;
    let boxes =
        browser.client.find_all(Locator::Css("section[aria-label=Links] tbody input[type=checkbox]")).await.unwrap();
    for tick in &boxes {
        tick.click().await.unwrap();
    }
    page_says(browser, &format!("Print sheet of {} tag", boxes.len())).await;
    set_colour(browser, "s-fg", "#1a1a6e").await;
    click_button(browser, "Make the sheet (PDF)").await;
    let link = browser.find("a[download='couchlink-sheet.pdf']").await;
    let text = link.text().await.unwrap();
    assert!(text.starts_with(&format!("Download the sheet ({} tags, PDF, ", boxes.len())), "{text}");
    assert!(link.attr("href").await.unwrap().unwrap_or_default().starts_with("blob:"));
    // The same request the page made (its CSP keeps scripts from reading the blob back).
    let cookies = browser.client.get_all_cookies().await.unwrap();
    let session = cookies.iter().find(|c| c.name() == "AuthSession").unwrap().value().to_owned();
    let sheet = http
        .post(format!("{console}qr/{}/sheet.pdf", db.name))
        .header("origin", console.trim_end_matches('/'))
        .header("cookie", format!("AuthSession={session}"))
        .json(&json!({"tags": [{"id": id, "title": "Summer flyer"}], "paper": "letter", "size_mm": 40,
                      "fg": "#1a1a6e", "bg": "#ffffff", "titles": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(sheet.status(), 200);
    assert_eq!(sheet.headers()["content-type"], "application/pdf");
    let pdf = sheet.bytes().await.unwrap();
    assert!(pdf.starts_with(b"%PDF-1.7") && pdf.windows(8).any(|w| w == b"/Count 1"));
    browser.shot("print-sheet").await;
    set_colour(browser, "s-fg", "#eeeeee").await;
    click_button(browser, "Make the sheet (PDF)").await;
    let said = page_says(browser, "symbol contrast").await;
    assert!(said.contains("phone readers need at least 40%"), "{said}");
    // The same ticked links changed at once: a preview, one write (a link someone saved
    // meanwhile is not written over), the outcome per link, and one undo.
    fill(browser, "#b-rule", "{\"when\": ").await;
    click_button(browser, "Preview the change").await;
    page_says(browser, "The rule is not JSON").await;
    fill(
        browser,
        "#b-rule",
        r#"{"when": {"os": ["android"]}, "url": "https://play.google.com/store/apps/details?id=x"}"#,
    )
    .await;
    fill(browser, "#b-add", "run-2").await;
    click_button(browser, "Preview the change").await;
    let preview = browser.find("table[aria-label='Preview']").await.text().await.unwrap();
    assert!(preview.contains(id) && preview.contains("run-2") && preview.contains("play.google.com"), "{preview}");
    let before: Value = db.admin(reqwest::Method::GET, id, None).await.json().await.unwrap();
    let mut theirs = before.clone();
    theirs["note"] = json!("saved meanwhile");
    let r = db.admin(reqwest::Method::PUT, id, Some(&theirs)).await;
    assert!(r.status().is_success());
    let plural = if boxes.len() == 1 { "" } else { "s" };
    click_button(browser, &format!("Apply to {} link{plural}", boxes.len())).await;
    let result = browser.find("table[aria-label='Result']").await.text().await.unwrap();
    assert!(result.contains(&format!("{id} edited by someone else meanwhile")), "{result}");
    // The stored markup test's link holds a `javascript:` URL (written past the validation by
    // the admin): CouchDB refuses it, with its reason, and applies the rest.
    assert!(result.contains("Xss01 refused: [url] Only \"http://\""), "{result}");
    let applied = result.matches(" applied").count();
    assert_eq!(applied, boxes.len() - 2, "{result}");
    let batch = page_says(browser, "Bulk change bulk-").await;
    let batch = batch.split("Bulk change ").nth(1).unwrap().split_whitespace().next().unwrap().to_owned();
    let kept: Value = db.admin(reqwest::Method::GET, id, None).await.json().await.unwrap();
    assert_eq!(
        (kept["note"].as_str(), kept["tags"].as_array().unwrap().contains(&json!("run-2"))),
        (Some("saved meanwhile"), false)
    );
    let tagged = admin_json(
        http,
        db,
        &format!("{}/{}/_design/console/_view/search?key=%22run-2%22&include_docs=true", db.couch.url, db.name),
    )
    .await;
    let tagged = tagged["rows"].as_array().unwrap();
    assert_eq!(tagged.len(), applied);
    assert!(tagged.iter().all(|r| r["doc"]["edit"]["batch"] == batch.as_str() && r["doc"]["edit"]["by"] == EDITOR.0));
    assert!(tagged
        .iter()
        .all(|r| r["doc"]["targets"].as_array().unwrap().last().unwrap()["when"]["os"] == json!(["android"])));
    browser
        .client
        .execute("document.querySelector(\"table[aria-label='Preview']\").scrollIntoView()", vec![])
        .await
        .unwrap();
    browser.shot("bulk").await;
    click_button(browser, "Undo this change").await;
    let undone = browser.find("table[aria-label='Undone']").await.text().await.unwrap();
    assert_eq!(undone.matches("applied").count(), applied, "{undone}");
    let tagged =
        admin_json(http, db, &format!("{}/{}/_design/console/_view/search?key=%22run-2%22", db.couch.url, db.name))
            .await;
    assert_eq!(tagged["rows"], json!([]), "every link put back");

    // One tag in colours, on the link's page; colours too alike are refused with the reason.
    open_link(browser, id).await;
    set_colour(browser, "t-fg", "#1a1a6e").await;
    eventually("the tag takes its colour", Duration::from_secs(10), || async {
        let src = browser.find(".tag img").await.attr("src").await.unwrap().unwrap_or_default();
        holds(src.contains("fg=%231a1a6e"), src)
    })
    .await;
    set_colour(browser, "t-bg", "#2a2a7e").await;
    page_says(browser, "symbol contrast of").await;
}
