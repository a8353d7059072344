//! The redirect listener's own HTTP/1 (src/http1.rs): pipelined requests answered in order,
//! requests with a body refused and their connection closed, HTTP/1.0 keep-alive, and any
//! split of the bytes on the wire giving the same answers.

use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::*;

/// Reads from `stream` until `n` whole responses (each with its `content-length` body, except
/// those to the HEAD requests `is_head` names by index) are in, and returns their heads (status
/// line and headers) in order, with whatever followed.
async fn read_responses_to(
    stream: &mut TcpStream,
    n: usize,
    is_head: impl Fn(usize) -> bool,
) -> (Vec<String>, Vec<u8>) {
    let mut buf = Vec::new();
    let mut heads = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        while heads.len() < n {
            let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else { break };
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            let length: usize = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase().strip_prefix("content-length: ").map(|v| v.trim().parse().unwrap())
                })
                .expect("every response has a content-length");
            let total = end + 4 + if is_head(heads.len()) { 0 } else { length };
            if buf.len() < total {
                break;
            }
            buf.drain(..total);
            heads.push(head);
        }
        if heads.len() == n {
            return (heads, buf);
        }
        let read = tokio::time::timeout(Duration::from_secs(20), stream.read(&mut chunk))
            .await
            .expect("responses within 20 s")
            .unwrap();
        assert!(read > 0, "connection closed after {} of {n} responses: {heads:#?}", heads.len());
        buf.extend_from_slice(&chunk[..read]);
    }
}

/// [`read_responses_to`] GET requests only.
async fn read_responses(stream: &mut TcpStream, n: usize) -> (Vec<String>, Vec<u8>) {
    read_responses_to(stream, n, |_| false).await
}

fn location(head: &str) -> Option<&str> {
    head.lines().find_map(|l| l.strip_prefix("location: "))
}

#[tokio::test]
async fn pipelined_requests_are_answered_in_order_with_one_line_each() {
    let app = spawn_app().await;
    for (id, url) in [("Pipe1", "https://example.com/1"), ("Pipe2", "https://example.com/2")] {
        app.db.put_link(id, json!({ "url": url })).await;
    }
    let mut stream = TcpStream::connect(app.addr).await.unwrap();
    // 16 requests in one write: redirects, a 404, one with a query, one asking to close last.
    let ids = ["Pipe1", "Pipe2", "nope9", "Pipe2?x=1"];
    let mut raw = Vec::new();
    for i in 0..16 {
        let close = if i == 15 { "Connection: close\r\n" } else { "" };
        raw.extend_from_slice(format!("GET /{} HTTP/1.1\r\nHost: x\r\n{close}\r\n", ids[i % 4]).as_bytes());
    }
    stream.write_all(&raw).await.unwrap();
    let (heads, rest) = read_responses(&mut stream, 16).await;
    for (i, head) in heads.iter().enumerate() {
        let expected = match ids[i % 4] {
            "Pipe1" => Some("https://example.com/1"),
            "Pipe2" => Some("https://example.com/2"),
            "Pipe2?x=1" => Some("https://example.com/2?x=1"),
            _ => None,
        };
        assert_eq!(location(head), expected, "response {i}: {head}");
        assert_eq!(head.starts_with("HTTP/1.1 404 "), expected.is_none(), "response {i}: {head}");
    }
    assert!(heads[15].contains("connection: close"), "{}", heads[15]);
    assert!(rest.is_empty(), "nothing after the last response");
    let mut tail = Vec::new();
    stream.read_to_end(&mut tail).await.unwrap();
    assert!(tail.is_empty(), "the connection closed after the 16th response");
    let lines = app.wait_for_log_lines(16).await;
    assert_eq!(lines.len(), 16);
    let targets: Vec<&str> = lines.iter().map(|l| l.split(' ').nth(4).unwrap()).collect();
    let expected: Vec<String> = (0..16).map(|i| format!("/{}", ids[i % 4])).collect();
    assert_eq!(targets, expected, "one line per response, in the order asked");
}

#[tokio::test]
async fn a_request_with_a_body_gets_501_and_its_connection_closes() {
    let app = spawn_app().await;
    app.db.put_link("Body1", json!({"url": "https://example.com/"})).await;
    for request in [
        "GET /Body1 HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhelloGET /Body1 HTTP/1.1\r\nHost: x\r\n\r\n",
        "POST /Body1 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    ] {
        let response = app.raw(request.as_bytes()).await;
        assert!(response.starts_with("HTTP/1.1 501 "), "{response}");
        assert!(response.contains("\r\nallow: GET, HEAD\r\n"), "{response}");
        assert!(response.contains("\r\nconnection: close\r\n"), "{response}");
        assert_eq!(response.matches("HTTP/1.1 ").count(), 1, "the body is never read as a request: {response}");
    }
    // A GET saying `Content-Length: 0` has no body: redirected, and the connection stays.
    let mut stream = TcpStream::connect(app.addr).await.unwrap();
    stream
        .write_all(
            b"GET /Body1 HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\nHEAD /Body1 HTTP/1.1\r\nHost: x\r\n\r\n",
        )
        .await
        .unwrap();
    let (heads, _) = read_responses(&mut stream, 1).await;
    assert_eq!(location(&heads[0]), Some("https://example.com/"), "{}", heads[0]);
    let lines = app.wait_for_log_lines(4).await;
    let statuses: Vec<&str> = lines.iter().map(|l| l.split(' ').nth(5).unwrap()).collect();
    assert_eq!(statuses, ["501", "501", "302", "302"]);
}

#[tokio::test]
async fn http_1_0_closes_unless_it_asks_for_keep_alive() {
    let app = spawn_app().await;
    app.db.put_link("Old10", json!({"url": "https://example.com/old"})).await;
    let response = app.raw(b"GET /Old10 HTTP/1.0\r\n\r\n").await;
    assert!(response.starts_with("HTTP/1.0 302 Found\r\n"), "answered in kind: {response}");
    assert!(response.contains("\r\nconnection: close\r\n"), "{response}");

    let mut stream = TcpStream::connect(app.addr).await.unwrap();
    for _ in 0..2 {
        stream.write_all(b"GET /Old10 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").await.unwrap();
        let (heads, _) = read_responses(&mut stream, 1).await;
        assert!(heads[0].starts_with("HTTP/1.0 302 "), "{}", heads[0]);
        assert!(heads[0].contains("\r\nconnection: keep-alive"), "{}", heads[0]);
    }
}

/// The same pipelined requests, cut anywhere and sent in pieces, get the same answers.
#[test]
fn any_split_of_pipelined_requests_gives_the_same_answers() {
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestRunner};

    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let app = runtime.block_on(async {
        let app = spawn_app().await;
        app.db.put_link("Split", json!({"url": "https://example.com/split"})).await;
        app
    });
    let requests: &[&[u8]] = &[
        b"GET /Split HTTP/1.1\r\nHost: x\r\nUser-Agent: a b\r\n\r\n",
        b"HEAD /Split HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /nope1?q=1 HTTP/1.1\r\nHost: x\r\nCookie: tid=20261122101733a3f9c1e2b7d4e601\r\n\r\n",
        b"DELETE /Split HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET http://x/Split HTTP/1.1\r\nHost: x\r\n\r\n",
    ];
    let expected = ["HTTP/1.1 302 ", "HTTP/1.1 302 ", "HTTP/1.1 404 ", "HTTP/1.1 501 ", "HTTP/1.1 302 "];
    let whole: Vec<u8> = requests.concat();
    let mut runner = TestRunner::new(Config { cases: 64, failure_persistence: None, ..Config::default() });
    let sent = std::sync::atomic::AtomicUsize::new(0);
    runner
        .run(&proptest::collection::vec(0..whole.len(), 0..6), |mut cuts| {
            cuts.sort_unstable();
            let heads = runtime.block_on(async {
                let mut stream = TcpStream::connect(app.addr).await.unwrap();
                let mut from = 0;
                for cut in cuts.into_iter().chain([whole.len()]) {
                    stream.write_all(&whole[from..cut.max(from)]).await.unwrap();
                    from = cut.max(from);
                    // Each piece in a packet of its own: the pause is what splits them.
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
                read_responses_to(&mut stream, requests.len(), |i| i == 1).await.0
            });
            sent.fetch_add(requests.len(), std::sync::atomic::Ordering::Relaxed);
            for (head, status) in heads.iter().zip(expected) {
                prop_assert!(head.starts_with(status), "{head}");
            }
            prop_assert!(heads[2].contains("tid=20261122101733a3f9c1e2b7d4e601"), "the cookie is kept");
            Ok(())
        })
        .unwrap();
    let sent = sent.into_inner();
    let lines = runtime.block_on(app.wait_for_log_lines(sent));
    assert_eq!(lines.len(), sent, "one line per response");
}

/// A client that pipelines requests and never reads the responses (its receive buffer full,
/// couchlink's send buffer full) is dropped after the header timeout, not held for ever.
#[tokio::test]
async fn a_client_that_never_reads_is_dropped_after_the_header_timeout() {
    let app = spawn_app_with(AppOptions::with(move |c| {
        c.header_timeout = std::time::Duration::from_secs(1);
    }))
    .await;
    let one = app.raw(b"GET /nope1 HTTP/1.1\r\nHost: x\r\n\r\n").await.len();
    let stream = TcpStream::connect(app.addr).await.unwrap();
    let (mut reader, mut writer) = stream.into_split();
    // Far more response bytes than loopback's socket buffers hold.
    let (batches, per_batch) = (100, 1000);
    let request = b"GET /nope1 HTTP/1.1\r\nHost: x\r\n\r\n".repeat(per_batch);
    let writing = tokio::spawn(async move {
        for _ in 0..batches {
            if writer.write_all(&request).await.is_err() {
                break;
            }
        }
        // Kept open: the client never says it is done.
        writer
    });
    // couchlink gives up after the header timeout: the kernel says so of the connection (a FIN
    // or a reset arrived; what was sent before waits in the receive buffer).
    let fd = std::os::fd::AsRawFd::as_raw_fd(reader.as_ref());
    eventually("couchlink drops the connection", Duration::from_secs(30), || async {
        let state = tcp_state(fd);
        holds(state != TCP_ESTABLISHED, state)
    })
    .await;
    // Now read what was sent before couchlink gave up, up to the end of the connection.
    let mut total = 0usize;
    let mut chunk = vec![0u8; 1 << 16];
    let ended = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            match reader.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => total += n,
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the connection ended");
    assert!(
        total < batches * per_batch * one / 2,
        "dropped long before answering everything: {total} bytes of {}",
        batches * per_batch * one
    );
    drop(writing.await.unwrap());
    // Every other client is still served.
    let response = app.raw(b"GET /nope1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await;
    assert!(response.starts_with("HTTP/1.1 404 "), "{response}");
}

/// The kernel's `TCP_ESTABLISHED` (include/net/tcp_states.h): a connection neither end closed.
const TCP_ESTABLISHED: u8 = 1;

/// The TCP state (`TCP_ESTABLISHED`, `TCP_CLOSE_WAIT`, ...) of the socket `fd`, as the kernel
/// keeps it.
fn tcp_state(fd: std::os::fd::RawFd) -> u8 {
    // SAFETY: tcp_info is plain data; getsockopt writes at most `len` bytes into it.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    let out = (&mut info as *mut libc::tcp_info).cast();
    // SAFETY: as above; `fd` is a TCP socket the caller holds open.
    let done = unsafe { libc::getsockopt(fd, libc::IPPROTO_TCP, libc::TCP_INFO, out, &mut len) };
    assert_eq!(done, 0, "TCP_INFO: {}", std::io::Error::last_os_error());
    info.tcpi_state
}
