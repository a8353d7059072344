//! Clients that are not well behaved: requests too long, too large or too broken (each answered
//! with the tracking cookie and logged), too many connections (a cap that waits, without
//! spinning, and recovers), and connections that idle or trickle their headers (closed).

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::*;

/// The status and tracking cookie of a raw response.
fn status_and_cookie(response: &str) -> (u16, String) {
    let status =
        response.get(9..12).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("no status in {response:?}"));
    let cookie = response
        .lines()
        .find_map(|l| l.to_ascii_lowercase().strip_prefix("set-cookie: tid=").map(|rest| rest[..30].to_owned()))
        .unwrap_or_else(|| panic!("no tracking cookie in {response:?}"));
    assert!(is_fresh_tracking_id(&cookie), "{cookie}");
    (status, cookie)
}

#[tokio::test]
async fn oversized_and_broken_requests_get_their_status_a_cookie_and_a_log_line() {
    let app = spawn_app().await;
    let long_target = format!("/{}", "a".repeat(couchlink::http::limits::MAX_TARGET_BYTES));
    let huge_target = format!("/{}", "a".repeat(70_000));
    let big_header = "b".repeat(couchlink::http::limits::MAX_HEADER_BYTES);
    let many_headers: String = (0..150).map(|i| format!("X-H{i}: v\r\n")).collect();
    // A head that fills the parser's whole buffer without ending: exactly that many bytes, so none
    // are left unread when the connection closes (unread bytes would make the kernel reset it).
    let endless = format!("GET / HTTP/1.1\r\nX-Long: {}", "c".repeat(couchlink::http::limits::MAX_HEAD_BYTES));
    let endless = &endless[..couchlink::http::limits::MAX_HEAD_BYTES];
    let cases: Vec<(String, u16, &str)> = vec![
        (format!("GET {long_target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"), 414, "the handler's limit"),
        (
            format!("GET {huge_target} HTTP/1.1\r\nHost: x\r\n\r\n"),
            414,
            "longer than HTTP libraries take (hyper: 64 KiB)",
        ),
        (
            format!("GET /H83if HTTP/1.1\r\nHost: x\r\nX-Big: {big_header}\r\nConnection: close\r\n\r\n"),
            431,
            "the handler's limit",
        ),
        (
            format!("GET /H83if HTTP/1.1\r\nHost: x\r\n{many_headers}\r\n"),
            431,
            "more header fields than the parser takes",
        ),
        (endless.to_owned(), 431, "a head longer than the parser's buffer"),
        ("GET /H83if HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n".to_owned(), 400, "refused by the parser"),
        // RFC 9112 §3.2: an HTTP/1.1 request with no Host, two, or an invalid one is a 400.
        ("GET /H83if HTTP/1.1\r\nConnection: close\r\n\r\n".to_owned(), 400, "no Host"),
        ("GET /H83if HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n".to_owned(), 400, "two Host lines"),
        ("GET /H83if HTTP/1.1\r\nHost: a b\r\n\r\n".to_owned(), 400, "an invalid Host"),
        // RFC 9110 §4.2.4: no userinfo in an http URI; asterisk-form is for OPTIONS only.
        ("GET http://u:p@x/H83if HTTP/1.1\r\nHost: x\r\n\r\n".to_owned(), 400, "userinfo in absolute-form"),
        ("GET * HTTP/1.1\r\nHost: x\r\n\r\n".to_owned(), 400, "asterisk-form GET"),
    ];
    let mut cookies = Vec::new();
    for (request, expected, why) in &cases {
        let response = app.raw(request.as_bytes()).await;
        let (status, cookie) = status_and_cookie(&response);
        assert_eq!(status, *expected, "{why}: {}", &response[..response.len().min(300)]);
        assert!(response.contains("<h1>"), "{why}: a page says what went wrong");
        cookies.push((cookie, *expected));
    }
    let lines = app.wait_for_log_lines(cases.len()).await;
    assert_eq!(lines.len(), cases.len(), "{lines:#?}");
    for (cookie, status) in cookies {
        let line =
            lines.iter().find(|l| l.contains(&cookie)).unwrap_or_else(|| panic!("no line for {cookie}: {lines:#?}"));
        let fields: Vec<&str> = line.split(' ').collect();
        assert_eq!(fields.len(), 6, "{line}");
        assert_eq!(fields[5], status.to_string(), "{line}");
        // An attacker's long target does not grow the log one to one: a bounded prefix, marked.
        assert!(fields[4].len() <= couchlink::access_log::LOGGED_TARGET_BYTES + 9, "{} bytes logged", fields[4].len());
    }
    let long_line = lines.iter().find(|l| l.split(' ').nth(4).is_some_and(|t| t.starts_with("/aaaa"))).unwrap();
    assert!(long_line.split(' ').nth(4).unwrap().ends_with("%E2%80%A6"), "{long_line}");
    // Each refusal is counted under its own status.
    for (status, at_least) in [("400", 6.0), ("414", 1.0), ("431", 3.0)] {
        let sample = format!("couchlink_responses_total{{status=\"{status}\"}}");
        assert!(app.metric(&sample).await >= at_least, "{sample}");
    }
}

async fn connect(app: &TestApp) -> TcpStream {
    TcpStream::connect(app.addr).await.unwrap()
}

/// Sends one GET and reads its whole response (the request asks to close).
async fn get_on(stream: &mut TcpStream) -> String {
    stream.write_all(b"GET /nope1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await.unwrap();
    let mut out = Vec::new();
    stream.read_to_end(&mut out).await.unwrap();
    String::from_utf8_lossy(&out).into_owned()
}

/// A `couchlink serve` process of its own, so the CPU it uses while at the limit is its alone
/// (in-process, the other tests running beside this one would count too).
#[tokio::test]
async fn past_max_connections_new_ones_wait_without_spinning_and_are_served_when_one_closes() {
    let db = TestDb::new().await;
    let env = process::reader_env(&db);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let limits = [("COUCHLINK_MAX_CONNECTIONS", "2"), ("COUCHLINK_HEADER_TIMEOUT_SECS", "60")];
    let server = process::ServeProcess::start("max-connections", &[&env[..], &limits[..]].concat());
    let connect = || TcpStream::connect(server.addr);
    let (mut first, _second) = (connect().await.unwrap(), connect().await.unwrap());
    // Both accepted: a request on the first is answered (and keeps it open).
    first.write_all(b"GET /nope1 HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
    let mut buf = [0u8; 12];
    first.read_exact(&mut buf).await.unwrap();
    assert_eq!(&buf, b"HTTP/1.1 404");
    // The third connects (the kernel's queue) but is not served while two are open...
    let mut third = connect().await.unwrap();
    third.write_all(b"GET /nope1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await.unwrap();
    let cpu = server.cpu_seconds();
    // A second of waiting is what is measured (no answer, and the CPU used meanwhile).
    let waited = tokio::time::timeout(Duration::from_secs(1), third.read(&mut buf)).await;
    assert!(waited.is_err(), "served past the limit: {waited:?} {:?}", String::from_utf8_lossy(&buf));
    // ...and the proxy does not spin meanwhile (one spinning thread would use about a second of
    // CPU in that second; an idle one, none).
    let used = server.cpu_seconds() - cpu;
    assert!(used < 0.3, "{used:.2} s of CPU while waiting at the limit");
    // One closes: the third is served at once.
    drop(first);
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), third.read_to_end(&mut out))
        .await
        .expect("served once a connection closed")
        .unwrap();
    assert!(out.starts_with(b"HTTP/1.1 404"), "{}", String::from_utf8_lossy(&out));
}

#[tokio::test]
async fn idle_and_trickling_connections_are_closed_after_the_header_timeout() {
    let app = spawn_app_with(AppOptions::with(move |c| {
        c.header_timeout = std::time::Duration::from_secs(1);
    }))
    .await;
    // Idle from the start: no byte ever.
    let mut idle = connect(&app).await;
    // Idle after a response, on a kept-alive connection.
    let mut kept = connect(&app).await;
    kept.write_all(b"GET /nope1 HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
    let mut buf = [0u8; 4096];
    let n = kept.read(&mut buf).await.unwrap();
    assert!(buf[..n].starts_with(b"HTTP/1.1 404"));
    // Slowloris: a header byte every 200 ms, for ever.
    let mut slow = connect(&app).await;
    let started = Instant::now();
    let trickle = async {
        for b in b"GET /nope1 HTTP/1.1\r\nHost: x\r\nX-Slow: ".iter().cycle() {
            if slow.write_all(&[*b]).await.is_err() {
                break;
            }
            // A slow client's pace: time is what this client is made of.
            tokio::time::sleep(Duration::from_millis(200)).await;
            if started.elapsed() > Duration::from_secs(10) {
                break;
            }
        }
        slow
    };
    let (mut a, mut b) = ([0u8; 1], [0u8; 1]);
    let (mut slow, idle_closed, kept_closed) = tokio::join!(trickle, idle.read(&mut a), kept.read(&mut b));
    assert_eq!(idle_closed.unwrap(), 0, "the idle connection was closed");
    assert_eq!(kept_closed.unwrap(), 0, "the kept-alive connection was closed");
    assert!(started.elapsed() < Duration::from_secs(10), "the slow client was cut off");
    // A connection closed while its head was unfinished gets no response.
    let mut rest = Vec::new();
    let _ = slow.read_to_end(&mut rest).await;
    // A fresh connection is served as before.
    let mut fresh = connect(&app).await;
    assert!(get_on(&mut fresh).await.starts_with("HTTP/1.1 404"));
}

/// 3000 connections that never send a byte and 1000 that trickle a header byte every two
/// seconds, held against a separate couchlink process: a well-behaved client still gets every
/// redirect, and the proxy's memory grows by a bounded amount per held connection. (How much
/// slower its requests get, against nginx in the same run, is `bench/hostile.py`'s job: tests
/// assert no timings.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_clients_do_not_starve_a_well_behaved_one() {
    const IDLE: usize = 3000;
    const SLOW: usize = 1000;
    let limit = rlimit::increase_nofile_limit(16_384).unwrap();
    assert!(limit >= (IDLE + SLOW + 256) as u64, "this test needs {} open files (ulimit -n)", IDLE + SLOW + 256);
    let db = TestDb::new().await;
    db.put_link("H83if", serde_json::json!({"url": "https://example.com/wp/"})).await;
    let env = process::reader_env(&db);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let server = process::ServeProcess::start("hostile", &[&env[..], &[("COUCHLINK_WORKERS", "2")]].concat());
    let well_behaved = |n: usize| {
        let server = &server;
        async move {
            for _ in 0..n {
                let response = server.get("/H83if").await.expect("answered");
                assert_eq!(response.status(), 302);
                assert_eq!(response.headers()["location"], "https://example.com/wp/");
            }
        }
    };
    well_behaved(200).await;
    let before = server.rss_kib();

    let addr = server.addr;
    let connect_all = |n: usize| async move {
        let mut held = Vec::with_capacity(n);
        for chunk in (0..n).collect::<Vec<_>>().chunks(200) {
            let batch = futures_join(chunk.len(), addr).await;
            held.extend(batch);
        }
        held
    };
    let idle = connect_all(IDLE).await;
    let slow = connect_all(SLOW).await;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let trickles: Vec<_> = slow
        .into_iter()
        .map(|mut stream| {
            let stop = stop.clone();
            tokio::spawn(async move {
                let head = b"GET /H83if HTTP/1.1\r\nHost: x\r\nX-Slow: ";
                let mut sent = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    if stream.write_all(&head[sent % head.len()..][..1]).await.is_err() {
                        return false;
                    }
                    sent += 1;
                    // A slow client's pace, below the header timeout's.
                    tokio::time::sleep(Duration::from_secs(2)).await;
                }
                true
            })
        })
        .collect();
    // Every hostile connection is accepted and held (the proxy counts what it accepted).
    let accepted_total = || async {
        let metrics =
            reqwest::get(format!("http://{}/metrics", server.admin_addr)).await.unwrap().text().await.unwrap();
        metrics
            .lines()
            .filter(|l| l.starts_with("couchlink_connections_accepted_total"))
            .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
            .sum::<f64>()
    };
    eventually("the proxy accepts every connection", Duration::from_secs(20), || async {
        let accepted = accepted_total().await;
        holds(accepted >= (IDLE + SLOW) as f64, accepted)
    })
    .await;
    well_behaved(1000).await;
    let during = server.rss_kib();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let still_open = futures_all(trickles).await;
    assert_eq!(still_open, SLOW, "slow clients held for less than the header timeout stay open");
    drop(idle);
    let per_connection = (during.saturating_sub(before) * 1024) / (IDLE + SLOW) as u64;
    eprintln!(
        "hostile: RSS {before} KiB before, {during} KiB holding {} connections: {per_connection} bytes each",
        IDLE + SLOW
    );
    assert!(per_connection < 48 * 1024, "{per_connection} bytes of memory per held connection");
}

/// `n` connections to `addr`, made concurrently.
async fn futures_join(n: usize, addr: std::net::SocketAddr) -> Vec<TcpStream> {
    let tasks: Vec<_> = (0..n).map(|_| tokio::spawn(TcpStream::connect(addr))).collect();
    let mut out = Vec::with_capacity(n);
    for t in tasks {
        out.push(t.await.unwrap().expect("connects"));
    }
    out
}

/// How many of the trickling clients were still connected when told to stop.
async fn futures_all(tasks: Vec<tokio::task::JoinHandle<bool>>) -> usize {
    let mut open = 0;
    for t in tasks {
        open += usize::from(t.await.unwrap());
    }
    open
}
