//! Clicks from the proxy's live counts: over time, live without a reload, per month, the
//! breakdowns, a tag's page and the overview, each equal to CouchDB's views.

use super::prelude::*;

pub async fn run(f: &mut Fixture) {
    let Fixture { db, proxy, console, browser, http, id, .. } = f;
    // Shared from here on: only the browser changes (its screenshots).
    let (db, proxy, console, http, id) = (&*db, &*proxy, console.as_str(), &*http, id.as_str());
    // Clicks, from the proxy's live counts (a reload keeps the link's page).
    eventually("the clicks show", Duration::from_secs(15), || async {
        browser.client.refresh().await.unwrap();
        browser.find(&format!("article[aria-label='Link {id}']")).await;
        let text = page_says(browser, "Per target version").await;
        holds(text.contains("https://example.com/summer"), Text(text))
    })
    .await;
    // Clicks over time: a bar and a row per day of the 30 shown, today's equal to CouchDB's view,
    // and the CSV the table's numbers.
    let view = format!(
        "{}/{}_clicks/_design/clicks/_view/by_link?group_level=4&startkey=[\"{id}\"]&endkey=[\"{id}\",{{}}]",
        db.couch.url.trim_end_matches('/'),
        db.name
    );
    let today = time::OffsetDateTime::now_utc().date().to_string();
    let (table, counted) = eventually("today's row shows the view's count", Duration::from_secs(15), || async {
        let rows = admin_json(http, db, &view).await;
        // Today's row of the view: its key past the link's ID spells the day.
        let day_of = |r: &Value| {
            r["key"].as_array().unwrap()[1..].iter().map(|p| p.as_str().unwrap()).collect::<Vec<_>>().join("-")
        };
        let counted: u64 = rows["rows"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| day_of(r) == today)
            .map(|r| r["value"][0].as_u64().unwrap())
            .sum();
        browser.client.refresh().await.unwrap();
        page_says(browser, "Download CSV").await;
        let table = browser
            .client
            .execute(
                "return Array.from(document.querySelectorAll('section[aria-label=Clicks] > figure.card tbody tr')).map(r => Array.from(r.cells).map(c => c.textContent))",
                vec![],
            )
            .await
            .unwrap();
        let last = table.as_array().unwrap().last().cloned().unwrap_or_default();
        if last[0] == json!(today) && last[1] == json!(counted.to_string()) && counted > 0 {
            Ok((table, counted))
        } else {
            Err((last, counted))
        }
    })
    .await;
    assert_eq!(table.as_array().unwrap().len(), 30, "a row a day for 30 days");
    let bars = browser
        .client
        .find_all(Locator::Css("section[aria-label=Clicks] > figure.card svg.chart rect.bar"))
        .await
        .unwrap();
    assert_eq!(bars.len(), 30, "a bar a day");
    let csv = browser
        .client
        .execute(
            "const href = document.querySelector('section[aria-label=Clicks] > figure.card a[download]').href;
             return decodeURIComponent(href.slice(href.indexOf(',') + 1));",
            vec![],
        )
        .await
        .unwrap();
    let csv = csv.as_str().unwrap().to_owned();
    let lines: Vec<&str> = csv.trim_end().split("\r\n").collect();
    assert_eq!(lines[0], "day,redirects,bots,new visitors,404s");
    let rows: Vec<String> = table
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_array().unwrap().iter().map(|c| c.as_str().unwrap()).collect::<Vec<_>>().join(","))
        .collect();
    assert_eq!(lines[1..], rows[..], "the CSV is the table");
    // Live: redirects made while the page is open show without a reload, within the proxy's
    // interval (1 s here, the console's own a minute) and 2 s.
    let made = Instant::now();
    for _ in 0..3 {
        assert_eq!(location(proxy, id).await.as_deref(), Some("https://example.com/summer"));
    }
    let today_row =
        "const cell = document.querySelector('section[aria-label=Clicks] > figure.card tbody tr:last-child td:nth-child(2)');
         return cell && cell.textContent";
    // Within LIVE of the first redirect, without a reload.
    let what = format!("today shows {} without a reload", counted + 3);
    eventually(&what, LIVE.saturating_sub(made.elapsed()), || async {
        let shown = browser.client.execute(today_row, vec![]).await.unwrap();
        holds(shown.as_str().and_then(|s| s.parse::<u64>().ok()) == Some(counted + 3), shown)
    })
    .await;
    eprintln!("new counts shown {:?} after the first redirect, without a reload", made.elapsed());
    let counted = counted + 3;
    // Per month: this month's one bar holds at least today's.
    browser.find("#c-unit").await.select_by_value("month").await.unwrap();
    page_says(browser, "Redirects per month").await;
    let month_cell = browser.client.execute(today_row, vec![]).await.unwrap();
    let Some(month_total) = month_cell.as_str().and_then(|s| s.parse::<u64>().ok()) else {
        let body = browser.find("body").await.text().await.unwrap_or_default();
        panic!("this month shows {month_cell}; the page says:\n{body}");
    };
    assert!(month_total >= counted, "{month_total} this month, {counted} today");
    browser.find("#c-unit").await.select_by_value("day").await.unwrap();
    page_says(browser, "Redirects per day").await;

    // Breakdowns of the range: phones with a campaign and a referrer through the proxy, then
    // each card's table equal to CouchDB's by_dimension view over the same 30 days, its CSV the
    // table's.
    const PHONE: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1";
    for source in ["flyer", "flyer", "poster"] {
        let r = http
            .get(format!("http://{}/{id}?utm_source={source}", proxy.addr))
            .header("User-Agent", PHONE)
            .header("Referer", "https://news.example.com/story")
            .send()
            .await
            .unwrap();
        proxy.responses.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        assert_eq!(r.status(), 302);
    }
    let counted = counted + 3;
    let from = (time::OffsetDateTime::now_utc().date() - time::Duration::days(29)).to_string();
    let by_view = format!(
        "{}/{}_clicks/_design/clicks/_view/by_dimension?group_level=4&startkey={}&endkey={}",
        db.couch.url.trim_end_matches('/'),
        db.name,
        json!([id, format!("d{from}")]),
        json!([id, format!("d{today}"), {}]),
    );
    let card_rows = |name: &str| {
        format!("return Array.from(document.querySelectorAll('.breakdowns figure[aria-label^=\"{name},\"] tbody tr')).map(r => [r.cells[0].textContent, Number(r.cells[1].textContent)])")
    };
    eventually("the breakdowns match the view", Duration::from_secs(15), || async {
        let rows = admin_json(http, db, &by_view).await;
        let mut view: std::collections::BTreeMap<(String, String), u64> = Default::default();
        for r in rows["rows"].as_array().unwrap() {
            let key = r["key"].as_array().unwrap();
            let (d, v) = (key[2].as_str().unwrap().to_owned(), key[3].as_str().unwrap().to_owned());
            *view.entry((d, v)).or_default() += r["value"].as_u64().unwrap();
        }
        let shown = |dimension: &str| -> std::collections::BTreeMap<(String, String), u64> {
            view.iter().filter(|((d, _), _)| d == dimension).map(|(k, n)| (k.clone(), *n)).collect()
        };
        let mut agree = view.get(&("utm_source".into(), "poster".into())) == Some(&1);
        for (dimension, name) in [("device", "Devices"), ("utm_source", "Campaign sources"), ("referrer", "Referrers")]
        {
            let table = browser.client.execute(&card_rows(name), vec![]).await.unwrap();
            let table: std::collections::BTreeMap<(String, String), u64> = table
                .as_array()
                .unwrap()
                .iter()
                .map(|r| ((dimension.to_owned(), r[0].as_str().unwrap().to_owned()), r[1].as_u64().unwrap()))
                .collect();
            agree &= table == shown(dimension);
        }
        holds(agree, view)
    })
    .await;
    let devices = browser.client.execute(&card_rows("Devices"), vec![]).await.unwrap();
    // The three phones, and any the page's own browser made earlier.
    let mobile = devices.as_array().unwrap().iter().find(|r| r[0] == "mobile").map(|r| r[1].as_u64().unwrap());
    assert!(mobile >= Some(3), "{devices}");
    assert_eq!(
        browser
            .client
            .find_all(Locator::Css(".breakdowns figure[aria-label^='Devices,'] rect.bar"))
            .await
            .unwrap()
            .len(),
        devices.as_array().unwrap().len(),
        "a bar per row"
    );
    let csv = browser
        .client
        .execute(
            "const href = document.querySelector(\".breakdowns figure[aria-label^='Campaign sources,'] a[download]\").href;
             return decodeURIComponent(href.slice(href.indexOf(',') + 1));",
            vec![],
        )
        .await
        .unwrap();
    let sources = browser.client.execute(&card_rows("Campaign sources"), vec![]).await.unwrap();
    let expected: Vec<String> = std::iter::once("utm_source,redirects".to_owned())
        .chain(sources.as_array().unwrap().iter().map(|r| format!("{},{}", r[0].as_str().unwrap(), r[1])))
        .collect();
    assert_eq!(csv.as_str().unwrap().trim_end().split("\r\n").collect::<Vec<_>>(), expected, "the CSV is the table");
    assert!(sources.to_string().contains(r#"["flyer",2]"#), "{sources}");
    browser.client.execute("document.querySelector('.breakdowns').scrollIntoView()", vec![]).await.unwrap();
    browser.shot("breakdowns").await;

    // A tag's page: the flyer and a second link of the print run, their clicks added up (today
    // equal to the sum of both links' rows of the view), a row per link.
    let second = "Fly02";
    db.put_link(second, json!({"url": "https://example.com/poster", "tags": ["flyer"]})).await;
    for _ in 0..2 {
        let r = http.get(format!("http://{}/{second}", proxy.addr)).header("User-Agent", PHONE).send().await.unwrap();
        proxy.responses.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        assert_eq!(r.status(), 302);
    }
    browser
        .client
        .execute("location.hash = arguments[0]", vec![json!(format!("#/{}/tag/flyer", db.name))])
        .await
        .unwrap();
    page_says(browser, "Tag: flyer").await;
    let today_of = |id: &str| {
        let view = format!(
            "{}/{}_clicks/_design/clicks/_view/by_link?group_level=4&startkey={}&endkey={}",
            db.couch.url.trim_end_matches('/'),
            db.name,
            json!([id, &today[..4], &today[5..7], &today[8..]]),
            json!([id, &today[..4], &today[5..7], &today[8..], {}]),
        );
        let (http, db) = (&http, &db);
        async move {
            let rows = admin_json(http, db, &view).await;
            rows["rows"].as_array().unwrap().iter().map(|r| r["value"][0].as_u64().unwrap()).sum::<u64>()
        }
    };
    eventually("the tag's page adds both links up", Duration::from_secs(15), || async {
        let (a, b) = (today_of(id).await, today_of(second).await);
        let shown = browser.client.execute(today_row, vec![]).await.unwrap();
        let per_link = browser
            .client
            .execute(
                "return Array.from(document.querySelectorAll('figure[aria-label^=\"Redirects per link\"] tbody tr')).map(r => [r.cells[0].textContent, Number(r.cells[1].textContent)])",
                vec![],
            )
            .await
            .unwrap();
        if b == 2
            && shown.as_str() == Some(&(a + b).to_string())
            && per_link.to_string().contains(&format!("[\"{second}\",2]"))
        {
            assert!(per_link.to_string().contains(&format!("[\"{id}\",{a}]")), "{per_link}");
            Ok(())
        } else {
            Err(format!("today shows {shown}, not {a} + {b}; per link {per_link}"))
        }
    })
    .await;
    browser.shot("tag").await;
    // Back: the link's page again.
    browser.client.back().await.unwrap();
    browser.find(&format!("article[aria-label='Link {id}']")).await;
    page_says(browser, "Redirects per day").await;
    browser
        .client
        .execute("document.querySelector('section[aria-label=Clicks]').scrollIntoView()", vec![])
        .await
        .unwrap();
    browser.shot("clicks").await;

    // The overview: today's top links, this one first with today's redirects; this month's too.
    open_console(browser, console).await;
    page_says(browser, "Top links, today (UTC)").await;
    let top = "return Array.from(document.querySelectorAll('section[aria-label=\"Top links\"] tbody tr')).map(r => [r.cells[0].textContent, Number(r.cells[1].textContent)])";
    let rows = browser.client.execute(top, vec![]).await.unwrap();
    assert_eq!(rows[0], json!([id, counted]), "{rows}");
    assert_eq!(
        browser.client.find_all(Locator::Css("section[aria-label='Top links'] rect.bar")).await.unwrap().len(),
        rows.as_array().unwrap().len()
    );
    browser.find("#top-period").await.select_by_value("month").await.unwrap();
    page_says(browser, "Top links, this month (UTC)").await;
    let rows = browser.client.execute(top, vec![]).await.unwrap();
    assert_eq!(rows[0][0], json!(id), "{rows}");
    assert!(rows[0][1].as_u64().unwrap() >= counted, "{rows}");
    browser.shot("top-links").await;
}
