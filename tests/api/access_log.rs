//! The access log: one well-formed log line per request, none lost.

use std::sync::Arc;

use serde_json::json;

use crate::support::process::{reader_env, ServeProcess};
use crate::support::*;

/// Splits a line into its fields, checking the contract's shape: 6 or 7 non-empty fields.
fn fields(line: &str) -> Vec<&str> {
    let fields: Vec<&str> = line.split(' ').collect();
    assert!(fields.len() == 6 || fields.len() == 7, "6 or 7 fields: {line:?}");
    assert!(fields.iter().all(|f| !f.is_empty()), "no empty field: {line:?}");
    assert!(line.bytes().all(|b| b.is_ascii_graphic() || b == b' '), "visible ASCII only: {line:?}");
    fields
}

#[tokio::test]
async fn each_request_is_one_line_with_the_contract_fields() {
    let app = spawn_app().await;
    app.db.put_link("H83if", json!({"url": "https://example.com/wp/?p=14"})).await;
    let redirect = app
        .http
        .get(format!("{}/H83if", app.base))
        .header("user-agent", "Mozilla/5.0 (X11; Linux)")
        .send()
        .await
        .unwrap();
    let tid = tracking_cookie(&redirect);
    let missing =
        app.http.get(format!("{}/Nopee?x=1", app.base)).header("cookie", format!("tid={tid}")).send().await.unwrap();
    assert_eq!(missing.status(), 404);

    let lines = app.wait_for_log_lines(2).await;
    assert_eq!(lines.len(), 2, "{lines:?}");
    let first = fields(&lines[0]);
    assert_eq!(first.len(), 7);
    assert!(first[0].len() == 16 && first[0].as_bytes()[14] == b'.', "yyyymmddhhmmss.s: {}", first[0]);
    assert_eq!(first[1], "127.0.0.1");
    assert_eq!(first[2], tid);
    assert_eq!(first[3], "Mozilla%2F5.0%20(X11%3B%20Linux)");
    assert_eq!(&first[4..], ["/H83if", "302", "https://example.com/wp/?p=14"]);

    let second = fields(&lines[1]);
    assert_eq!(second.len(), 6, "no Location field unless 302");
    assert_eq!(second[2], tid, "the echoed tracking ID");
    assert_eq!(&second[4..], ["/Nopee?x=1", "404"]);
}

#[tokio::test]
async fn hostile_input_still_gives_one_well_formed_line() {
    let app = spawn_app().await;
    let requests: [&[u8]; 5] = [
        b"GET /a%20b\"c%00 HTTP/1.1\r\nHost: x\r\nUser-Agent: evil agent \"quoted\" \xff\xfe %41\r\nCookie: tid=bad value; tid=\"\r\nConnection: close\r\n\r\n",
        b"GET /\xc3\xa9t\xc3\xa9 HTTP/1.1\r\nHost: x\r\nUser-Agent:\r\nCookie: \xff tid=\r\nConnection: close\r\n\r\n",
        b"POST /H83if?q=%0d%0a HTTP/1.1\r\nHost: x\r\nUser-Agent: a\tb\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        b"GET http://example.com/H83if?x=%22y%22 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        // Not valid UTF-8 in the target: the parser refuses it with 400 before the handler sees it.
        b"GET /\xe9t\xe9 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    ];
    for raw in requests {
        let response = app.raw(raw).await;
        assert!(response.starts_with("HTTP/1.1 "), "every request is answered: {response:?}");
    }
    let lines = app.wait_for_log_lines(requests.len()).await;
    assert_eq!(lines.len(), requests.len(), "one line per request: {lines:?}");
    for line in &lines {
        fields(line);
    }
    let all = lines.join("\n");
    assert!(all.contains(" evil%20agent%20%22quoted%22%20%FF%FE%20%2541 /a%20b\"c%00 404"), "{all}");
    assert!(all.contains(" - /%C3%A9t%C3%A9 404"), "empty UA is '-', non-ASCII encoded: {all}");
    assert!(all.contains(" a%09b /H83if?q=%0d%0a 501"), "{all}");
    assert!(all.contains(" - http://example.com/H83if?x=%22y%22 404"), "absolute-form target logged whole: {all}");
    assert!(all.contains(" - - 400"), "the parser's own 400 is logged too: {all}");
}

#[tokio::test]
async fn a_burst_of_concurrent_requests_logs_exactly_one_line_each() {
    let mut app = spawn_app().await;
    app.db.put_link("H83if", json!({"url": "https://example.com/"})).await;
    let app_ref = Arc::new(app.base.clone());
    let mut tasks = Vec::new();
    for i in 0..400 {
        let base = app_ref.clone();
        let client = app.http.clone();
        tasks.push(tokio::spawn(async move {
            let path = if i % 2 == 0 { "/H83if" } else { "/Nopee" };
            client.get(format!("{base}{path}")).send().await.unwrap().status().as_u16()
        }));
    }
    let mut redirects = 0;
    for t in tasks {
        if t.await.unwrap() == 302 {
            redirects += 1;
        }
    }
    assert_eq!(redirects, 200);
    app.stop().await.unwrap();
    let lines = app.log_lines();
    assert_eq!(lines.len(), 400);
    assert_eq!(lines.iter().filter(|l| fields(l).len() == 7).count(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_flushes_every_line_before_returning() {
    let mut app = spawn_app().await;
    for _ in 0..50 {
        app.get("/Nopee").await;
    }
    // No waiting for the writer thread: stop must not return before the lines are on disk.
    app.stop().await.unwrap();
    assert_eq!(app.log_lines().len(), 50);
}

#[tokio::test]
async fn forwarded_client_is_believed_only_from_a_trusted_proxy() {
    let trusting = spawn_app_with(AppOptions::with(move |c| {
        c.trusted_proxies = "127.0.0.1/32".parse().unwrap();
    }))
    .await;
    trusting
        .http
        .get(format!("{}/Nopee", trusting.base))
        .header("x-forwarded-for", "198.51.100.9, 203.0.113.7")
        .send()
        .await
        .unwrap();
    // X-Forwarded-For is the header read by default: a client's own `Forwarded` is not.
    trusting
        .http
        .get(format!("{}/Nopee", trusting.base))
        .header("forwarded", "for=\"[2001:db8::5]:443\"")
        .send()
        .await
        .unwrap();
    let lines = trusting.wait_for_log_lines(2).await;
    assert_eq!(fields(&lines[0])[1], "203.0.113.7");
    assert_eq!(fields(&lines[1])[1], "127.0.0.1");

    let rfc7239 = spawn_app_with(AppOptions::with(move |c| {
        c.trusted_proxies = "127.0.0.1/32".parse().unwrap();
        c.trusted_proxies = c.trusted_proxies.clone().reading(couchlink::client_ip::ForwardedHeader::Forwarded);
    }))
    .await;
    for (name, value) in [("forwarded", "for=\"[2001:db8::5]:443\""), ("x-forwarded-for", "203.0.113.7")] {
        rfc7239.http.get(format!("{}/Nopee", rfc7239.base)).header(name, value).send().await.unwrap();
    }
    let lines = rfc7239.wait_for_log_lines(2).await;
    assert_eq!((fields(&lines[0])[1], fields(&lines[1])[1]), ("2001:db8::5", "127.0.0.1"));

    let wary = spawn_app().await;
    wary.http.get(format!("{}/Nopee", wary.base)).header("x-forwarded-for", "203.0.113.7").send().await.unwrap();
    assert_eq!(fields(&wary.wait_for_log_lines(1).await[0])[1], "127.0.0.1");
}

#[tokio::test]
async fn finished_days_are_gzipped_and_days_past_retention_deleted_while_the_live_file_is_written() {
    let logs = tempfile::tempdir().unwrap();
    let today = time::OffsetDateTime::now_utc().date();
    let day = |d: time::Date| format!("access.{d}.log");
    let two_days_ago = day(today - time::Duration::days(2));
    std::fs::write(logs.path().join("access.2020-01-01.log"), "long ago\n").unwrap();
    std::fs::write(logs.path().join(&two_days_ago), "two days ago\n").unwrap();
    let dir = logs.path().display().to_string();
    let mut app = spawn_app_with(AppOptions::with(move |c| {
        c.log_dir = std::path::PathBuf::from(dir);
        c.log_keep_days = 30;
    }))
    .await;
    app.db.put_link("Keep1", json!({"url": "https://kept.example/"})).await;
    assert_eq!(app.get("/Keep1").await.status(), 302);

    let gz = logs.path().join(format!("{two_days_ago}.gz"));
    let old = logs.path().join("access.2020-01-01.log");
    eventually("retention gzips and deletes", std::time::Duration::from_secs(10), || async {
        holds(gz.exists() && !old.exists(), (gz.exists(), old.exists()))
    })
    .await;
    app.stop().await.unwrap();
    let mut text = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(std::fs::File::open(&gz).unwrap()), &mut text)
        .unwrap();
    assert_eq!(text, "two days ago\n");
    let mut names: Vec<String> =
        std::fs::read_dir(logs.path()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    assert_eq!(names, [format!("{two_days_ago}.gz"), day(today)], "the live file stays as it is");
    let live = std::fs::read_to_string(logs.path().join(day(today))).unwrap();
    assert_eq!(live.lines().count(), 1, "{live}");
}

#[tokio::test]
async fn anonymized_addresses_for_peers_and_forwarded_clients_alike() {
    let app = spawn_app_with(AppOptions::with(move |c| {
        c.anonymize_ip = true;
        c.trusted_proxies = "127.0.0.1".parse().unwrap();
    }))
    .await;
    app.http.get(format!("{}/Nopee", app.base)).send().await.unwrap();
    app.http.get(format!("{}/Nopee", app.base)).header("x-forwarded-for", "203.0.113.77").send().await.unwrap();
    app.http.get(format!("{}/Nopee", app.base)).header("x-forwarded-for", "2001:db8:1:2::5").send().await.unwrap();
    let lines = app.wait_for_log_lines(3).await;
    let ips: Vec<&str> = lines.iter().map(|l| l.split(' ').nth(1).unwrap()).collect();
    assert_eq!(ips, ["127.0.0.0", "203.0.113.0", "2001:db8:1::"]);
}

/// Any bytes as target, User-Agent and cookie, through the whole proxy (the HTTP/1
/// parser, the handler): every request gets exactly one response and exactly one
/// well-formed log line, whether it redirects, is not found, or is refused as malformed.
#[test]
fn any_request_bytes_give_one_response_and_one_well_formed_line() {
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestRunner};

    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let app = runtime.block_on(async {
        let app = spawn_app().await;
        app.db.put_link("H83if", json!({"url": "https://example.com/wp/"})).await;
        app
    });
    // Targets near the links' own shape as well as anything at all.
    let target = prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..64),
        "/H83if[/?#a-z%.]{0,12}".prop_map(String::into_bytes),
        "/[A-Za-z0-9]{5}".prop_map(String::into_bytes),
    ];
    // Header values: anything at all, or what the parser lets through (tab, visible ASCII,
    // space, and any byte from 0x80 up).
    let header = prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..48),
        proptest::collection::vec(prop_oneof![Just(b'\t'), 0x20u8..0x7f, 0x80u8..=0xff], 0..48),
    ];
    let method = prop_oneof![Just("GET"), Just("HEAD"), Just("POST"), Just("G\u{e9}T")];
    let requests = std::sync::atomic::AtomicUsize::new(0);
    // Failures print their minimal case; nothing is persisted (there is no source file for it).
    let mut runner = TestRunner::new(Config { cases: 256, failure_persistence: None, ..Config::default() });
    runner
        .run(&(method, target, header.clone(), header), |(method, target, agent, cookie)| {
            let mut raw = format!("{method} ").into_bytes();
            raw.extend_from_slice(&target);
            raw.extend_from_slice(b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\nUser-Agent: ");
            raw.extend_from_slice(&agent);
            raw.extend_from_slice(b"\r\nCookie: tid=");
            raw.extend_from_slice(&cookie);
            raw.extend_from_slice(b"\r\n\r\n");
            let response = runtime
                .block_on(async { tokio::time::timeout(std::time::Duration::from_secs(20), app.raw(&raw)).await });
            let response = response.map_err(|_| TestCaseError::fail("no response within 20 s"))?;
            requests.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            prop_assert!(response.starts_with("HTTP/1.1 "), "{:?} got {:?}", String::from_utf8_lossy(&raw), response);
            prop_assert_eq!(response.matches("HTTP/1.1 ").count(), 1, "one response: {:?}", response);
            Ok(())
        })
        .unwrap();
    let sent = requests.into_inner();
    let lines = runtime.block_on(app.wait_for_log_lines(sent));
    assert_eq!(lines.len(), sent, "one line per request");
    let statuses: std::collections::BTreeSet<&str> = lines.iter().map(|line| fields(line)[5]).collect();
    // The cases reached the handler's answers and the parser's refusals alike.
    for status in ["302", "400", "404", "501"] {
        assert!(statuses.contains(status), "no {status} among {statuses:?}");
    }
}

/// A log folder the disk refuses (here replaced by a file, as a remounted volume or a full disk
/// would refuse it): redirects go on, `/healthz` and `/metrics` say so, lines past the queue's
/// bound are counted lost, and all is well again once the folder can be written.
#[tokio::test]
async fn a_refused_log_shows_in_healthz_and_metrics_while_redirects_go_on() {
    let app = spawn_app_with(AppOptions::with(|c| c.log_queue_bytes = 8192)).await;
    // Live first: /healthz is 503 until the feed is (pouchdb-server opens it only with its first
    // heartbeat, later still on a busy machine), and the log alone must not make it so.
    app.wait_until_feed_is_live().await;
    app.db.put_link("H83if", json!({"url": "https://example.com/"})).await;
    assert_redirects_to(&app.get("/H83if").await, "https://example.com/");
    app.wait_for_log_lines(1).await;
    let dir = app.log_dir.path().to_owned();
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::write(&dir, "not a folder").unwrap();
    let mut answered = 1;
    // Enough lines to fill 8 KiB, a few at a time so that some wait in the queue (the pauses
    // pace the load; nothing is waited for).
    for _ in 0..30 {
        for _ in 0..5 {
            assert_redirects_to(&app.get("/H83if").await, "https://example.com/");
            answered += 1;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    app.wait_for_metric("couchlink_access_log_lines_lost_total", 1.0).await;
    let health = app.admin_get("/healthz").await;
    assert_eq!(health.status(), 200, "a failing log alone does not take the proxy out of rotation");
    let health: serde_json::Value = health.json().await.unwrap();
    assert_eq!(health["status"], "degraded", "{health}");
    assert_eq!(health["access_log"]["status"], "degraded", "{health}");
    assert!(health["access_log"]["failing_since"].is_string(), "{health}");
    assert!(health["access_log"]["lines_lost"].as_u64().unwrap() > 0, "{health}");
    assert_eq!(app.metric("couchlink_access_log_failing").await, 1.0);
    let queued = app.metric("couchlink_access_log_queue_bytes").await;
    assert!(queued > 0.0 && queued <= 8192.0, "{queued}");
    // The folder can be written again: what waited is written, and the log is well.
    std::fs::remove_file(&dir).unwrap();
    let health = eventually("the log is well and drained", std::time::Duration::from_secs(10), || async {
        let health: serde_json::Value = app.admin_get("/healthz").await.json().await.unwrap();
        let log = &health["access_log"];
        if log["status"] == "ok" && log["queued_bytes"] == 0 {
            Ok(health)
        } else {
            Err(health)
        }
    })
    .await;
    assert_eq!(health["access_log"]["status"], "ok", "{health}");
    assert_eq!(health["access_log"]["queued_bytes"], 0, "{health}");
    let written = app.metric("couchlink_access_log_lines_total").await;
    let lost = app.metric("couchlink_access_log_lines_lost_total").await;
    assert_eq!(written + lost, f64::from(answered), "every line written or counted lost");
    assert_eq!(app.metric("couchlink_access_log_failing").await, 0.0);
}

/// A full disk, as a file-size limit on the running process: lines wait in memory up to the
/// bound, then are counted lost; redirects never stop; one warning when the log starts failing
/// and one when it recovers; every answered request is a line on disk or a line counted lost.
#[tokio::test]
async fn a_full_disk_keeps_lines_in_memory_to_the_bound_then_counts_them_lost_and_recovers() {
    let db = TestDb::new().await;
    db.put_link("H83if", json!({"url": "https://example.com/"})).await;
    let env = reader_env(&db);
    let mut env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    env.push(("COUCHLINK_LOG_QUEUE_BYTES", "16384"));
    let mut proxy = ServeProcess::start("full-disk", &env);
    let redirect = |r: Option<reqwest::Response>| r.is_some_and(|r| r.status() == 302);
    for _ in 0..5 {
        assert!(redirect(proxy.get("/H83if").await));
    }
    let admin = |path: &str| format!("http://{}{path}", proxy.admin_addr);
    let metric = |text: &str, name: &str| -> u64 {
        text.lines().find_map(|l| l.strip_prefix(&format!("{name} "))).map_or(0, |v| v.parse().unwrap())
    };
    eventually("the first 5 lines are on disk", std::time::Duration::from_secs(10), || async {
        let lines = proxy.log_line_count();
        holds(lines >= 5, lines)
    })
    .await;
    // The disk is full from here: the log file may not grow.
    let file = std::fs::read_dir(proxy.log_dir.path()).unwrap().next().unwrap().unwrap().path();
    proxy.limit_file_size(Some(std::fs::metadata(&file).unwrap().len()));
    for _ in 0..40 {
        for _ in 0..5 {
            assert!(redirect(proxy.get("/H83if").await), "redirects go on while the log cannot be written");
        }
        // Paces the load so that lines wait in memory; nothing is waited for.
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let health: serde_json::Value = reqwest::get(admin("/healthz")).await.unwrap().json().await.unwrap();
    assert_eq!(health["access_log"]["status"], "degraded", "{health}");
    let text = reqwest::get(admin("/metrics")).await.unwrap().text().await.unwrap();
    let lost = metric(&text, "couchlink_access_log_lines_lost_total");
    assert!(lost > 0, "past 16 KiB lines are lost, and counted: {text}");
    assert!(metric(&text, "couchlink_access_log_queue_bytes") <= 16384);
    proxy.said_eventually("cannot write the access log").await;
    // Space again: what waited is written, and it says so once.
    proxy.limit_file_size(None);
    eventually("the log recovers", std::time::Duration::from_secs(10), || async {
        let health: serde_json::Value = reqwest::get(admin("/healthz")).await.unwrap().json().await.unwrap();
        holds(health["access_log"]["status"] == "ok", health)
    })
    .await;
    let text = reqwest::get(admin("/metrics")).await.unwrap().text().await.unwrap();
    let lost = metric(&text, "couchlink_access_log_lines_lost_total");
    proxy.said_eventually("is written again").await;
    assert!(proxy.terminate().success());
    assert_eq!(proxy.said_in_all("cannot write the access log").len(), 1, "one warning when it starts");
    assert_eq!(proxy.said_in_all("is written again").len(), 1, "one message when it recovers");
    let answered = proxy.responses.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(proxy.log_line_count() as u64 + lost, answered, "every answered request written or counted lost");
}

/// SIGKILL under load: batched, the lines lost are at most what the batches in hand held (the
/// last 5 ms, a batch being at most 256 KiB); with COUCHLINK_LOG_SYNC=true, none.
#[tokio::test]
async fn a_sigkill_under_load_loses_at_most_the_batching_window_and_with_log_sync_nothing() {
    use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
    let db = TestDb::new().await;
    db.put_link("H83if", json!({"url": "https://example.com/"})).await;
    for sync in ["false", "true"] {
        let env = reader_env(&db);
        let mut env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        env.push(("COUCHLINK_LOG_SYNC", sync));
        let mut proxy = ServeProcess::start("sigkill", &env);
        let stop = Arc::new(AtomicBool::new(false));
        // 16 clients, each counting the responses it gets.
        let clients: Vec<_> = (0..16)
            .map(|_| {
                let (stop, answered, url) =
                    (stop.clone(), proxy.responses.clone(), format!("http://{}/H83if", proxy.addr));
                tokio::spawn(async move {
                    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
                    while !stop.load(Relaxed) {
                        if http.get(&url).send().await.is_ok_and(|r| r.status() == 302) {
                            answered.fetch_add(1, Relaxed);
                        }
                    }
                })
            })
            .collect();
        // Killed once under load: the clients have had hundreds of answers.
        eventually("hundreds of answers under load", std::time::Duration::from_secs(20), || async {
            let answered = proxy.responses.load(Relaxed);
            holds(answered >= 500, answered)
        })
        .await;
        let status = proxy.kill_hard();
        stop.store(true, Relaxed);
        for client in clients {
            client.await.unwrap();
        }
        assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), Some(9), "killed, not exited");
        let answered = proxy.responses.load(Relaxed);
        let on_disk = proxy.log_line_count() as u64;
        eprintln!("COUCHLINK_LOG_SYNC={sync}: {answered} answered, {on_disk} lines on disk after SIGKILL");
        assert!(answered > 100, "under load: {answered} answered");
        if sync == "true" {
            assert!(on_disk >= answered, "every answered request is on disk: {on_disk} lines, {answered} answered");
        } else {
            // A line here is over 100 bytes: the batch being filled and one on its way hold at
            // most 2 x 256 KiB of them.
            let lost = answered.saturating_sub(on_disk);
            assert!(lost <= 2 * 256 * 1024 / 100, "{lost} lost of {answered}");
        }
    }
}

/// `rm -rf` of the log folder while serving (an operator's cleanup): the folder is made again,
/// and every request from then on has its line there.
#[tokio::test]
async fn a_log_folder_removed_while_serving_is_made_again_and_no_line_is_lost() {
    let app = spawn_app().await;
    app.db.put_link("H83if", json!({"url": "https://example.com/"})).await;
    for _ in 0..3 {
        assert_redirects_to(&app.get("/H83if").await, "https://example.com/");
    }
    app.wait_for_log_lines(3).await;
    std::fs::remove_dir_all(app.log_dir.path()).unwrap();
    for _ in 0..7 {
        assert_redirects_to(&app.get("/H83if").await, "https://example.com/");
    }
    let lines = app.wait_for_log_lines(7).await;
    assert_eq!(lines.len(), 7, "the lines after the cleanup, in the folder made again: {lines:?}");
    assert_eq!(app.metric("couchlink_access_log_lines_total").await, 10.0);
    assert_eq!(app.metric("couchlink_access_log_lines_lost_total").await, 0.0);
}
