//! couchlink's HTTP/1 against hyper's, in the same process, over one corpus of raw requests
//! (request-smuggling variants after the public `smuggler` tool's mutations, RFC 9112 edge
//! cases): for each, whether the request reaches the service or is refused by the protocol
//! (a 400, 414 or 431, or a close without an answer). Where the two differ, the case must be
//! one of the deliberate differences listed in `docs/http.md`, and every one listed must
//! differ.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use time::OffsetDateTime;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::conn::{Connections, Respond};
use super::limits::{Refusal, MAX_HEAD_BYTES};
use super::write::Shape;
use crate::domain::PublicUrl;
use crate::message::{Body, Reply, Request, Status};

/// Where a request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    /// The service answered it.
    Served,
    /// The protocol refused it.
    Refused,
}

/// Every request that reaches it is answered 302.
struct Serves(Shape);

impl Respond for Serves {
    type Location = &'static str;

    async fn respond(&self, _: &Request<'_>, _: SocketAddr) -> Reply<&'static str> {
        reply(Status::Found)
    }

    fn refuse(&self, refusal: Refusal, _: Option<&Request<'_>>, _: SocketAddr) -> Reply<&'static str> {
        reply(refusal.status())
    }

    fn shape(&self, _site: usize) -> &Shape {
        &self.0
    }
}

fn reply(status: Status) -> Reply<&'static str> {
    Reply {
        status,
        body: Body::Page,
        location: None,
        shortlink: None,
        cookie: None,
        vary: crate::message::Vary::Nothing,
        now: OffsetDateTime::UNIX_EPOCH,
        site: 0,
    }
}

/// The class of the first response to `raw`: a status of 400, 414 or 431, or none, is a refusal.
fn classify(response: &[u8]) -> Class {
    let status = response.get(9..12).and_then(|s| std::str::from_utf8(s).ok());
    match status {
        None | Some("400" | "414" | "431") => Class::Refused,
        Some(_) => Class::Served,
    }
}

/// Sends `raw` and reads until the first response head is complete, the server closes, or a
/// second passes in silence (a server waiting for more of a request it took as incomplete).
async fn exchange(mut client: tokio::io::DuplexStream, raw: &[u8]) -> Vec<u8> {
    let _ = client.write_all(raw).await;
    let mut out = Vec::new();
    let mut chunk = [0u8; 4096];
    while !out.windows(4).any(|w| w == b"\r\n\r\n") {
        match tokio::time::timeout(Duration::from_secs(1), client.read(&mut chunk)).await {
            Ok(Ok(n)) if n > 0 => out.extend_from_slice(&chunk[..n]),
            _ => break,
        }
    }
    out
}

async fn couchlink(raw: &[u8]) -> Class {
    let shape = Shape::new(PublicUrl::parse("http://0x1f.ie").unwrap(), "tid");
    let connections = Connections::new(Arc::new(Serves(shape)), Duration::from_secs(5));
    let (client, server) = tokio::io::duplex(1 << 20);
    let _task = connections.serve_stream(server, "192.0.2.1:1".parse().unwrap(), None);
    classify(&exchange(client, raw).await)
}

async fn hyper(raw: &[u8]) -> Class {
    let (client, server) = tokio::io::duplex(1 << 20);
    let service = service_fn(|_request| async {
        Ok::<_, Infallible>(hyper::Response::builder().status(302).body(Full::new(Bytes::new())).unwrap())
    });
    // As couchlink's admin listener configures it.
    let connection = hyper::server::conn::http1::Builder::new()
        .max_buf_size(MAX_HEAD_BYTES)
        .serve_connection(TokioIo::new(server), service);
    tokio::spawn(connection);
    classify(&exchange(client, raw).await)
}

/// The corpus: a name (as `docs/http.md` cites it) and the raw bytes.
fn corpus() -> Vec<(&'static str, Vec<u8>)> {
    let mut cases: Vec<(&'static str, Vec<u8>)> = [
        ("get", "GET /H83if HTTP/1.1\r\nHost: 0x1f.ie\r\n\r\n"),
        ("head", "HEAD /H83if HTTP/1.1\r\nHost: 0x1f.ie\r\n\r\n"),
        ("http-1.0-without-host", "GET /H83if HTTP/1.0\r\n\r\n"),
        ("bare-lf-line-ends", "GET /H83if HTTP/1.1\nHost: x\n\n"),
        ("absolute-form", "GET http://0x1f.ie/H83if HTTP/1.1\r\nHost: 0x1f.ie\r\n\r\n"),
        ("query", "GET /H83if?utm=a&b HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("no-host", "GET /H83if HTTP/1.1\r\n\r\n"),
        ("two-hosts", "GET /H83if HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"),
        ("invalid-host", "GET /H83if HTTP/1.1\r\nHost: a b\r\n\r\n"),
        ("host-with-path", "GET /H83if HTTP/1.1\r\nHost: a/b\r\n\r\n"),
        ("userinfo-in-absolute-form", "GET http://u:p@0x1f.ie/H83if HTTP/1.1\r\nHost: 0x1f.ie\r\n\r\n"),
        ("asterisk-form-get", "GET * HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("asterisk-form-options", "OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("content-length-body", "POST /H83if HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"),
        ("chunked-body", "POST /H83if HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
        ("cl-te", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nG"),
        ("te-not-chunked", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: xchunked\r\n\r\n"),
        ("te-chunked-then-identity", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, identity\r\n\r\n"),
        ("two-content-lengths", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab"),
        ("content-length-plus", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: +1\r\n\r\na"),
        ("content-length-not-a-number", "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: x\r\n\r\n"),
        ("space-before-colon", "GET / HTTP/1.1\r\nHost : x\r\n\r\n"),
        ("obs-fold", "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\n\r\n"),
        ("nul-in-value", "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\0b\r\n\r\n"),
        ("cr-only-line-ends", "GET / HTTP/1.1\rHost: x\r\r"),
        ("double-space-in-request-line", "GET  / HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("http-2-version", "GET / HTTP/2.0\r\nHost: x\r\n\r\n"),
        ("lowercase-version", "GET / http/1.1\r\nHost: x\r\n\r\n"),
        ("space-in-target", "GET /a b HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("no-target", "GET HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("tab-in-target", "GET /a\tb HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("leading-blank-line", "\r\nGET /H83if HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("header-without-colon", "GET / HTTP/1.1\r\nHost: x\r\nnocolon\r\n\r\n"),
        ("empty-header-name", "GET / HTTP/1.1\r\nHost: x\r\n: v\r\n\r\n"),
        ("unknown-method", "BREW /H83if HTTP/1.1\r\nHost: x\r\n\r\n"),
    ]
    .into_iter()
    .map(|(name, raw)| (name, raw.as_bytes().to_vec()))
    .collect();
    let headers: String = (0..120).map(|i| format!("X-{i}: v\r\n")).collect();
    cases.push(("too-many-headers", format!("GET / HTTP/1.1\r\nHost: x\r\n{headers}\r\n").into_bytes()));
    cases.push(("huge-target", format!("GET /{} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(100_000)).into_bytes()));
    cases.push(("long-target", format!("GET /{} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(10_000)).into_bytes()));
    cases
        .push(("huge-header", format!("GET / HTTP/1.1\r\nHost: x\r\nX: {}\r\n\r\n", "a".repeat(100_000)).into_bytes()));
    cases
        .push(("large-header", format!("GET / HTTP/1.1\r\nHost: x\r\nX: {}\r\n\r\n", "a".repeat(20_000)).into_bytes()));
    cases
}

/// The case names in `docs/http.md`'s table of deliberate differences (its first column,
/// in backticks).
fn documented_differences() -> Vec<String> {
    let doc = include_str!("../../docs/http.md");
    let table = doc.split("## Where couchlink and hyper differ").nth(1).expect("docs/http.md has the section");
    table
        .lines()
        .take_while(|l| !l.starts_with("## "))
        .filter_map(|l| l.strip_prefix("| `")?.split('`').next().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn couchlink_refuses_where_hyper_does_but_for_the_documented_differences() {
    let mut differing = Vec::new();
    for (name, raw) in corpus() {
        let (ours, theirs) = (couchlink(&raw).await, hyper(&raw).await);
        if ours != theirs {
            differing.push((name.to_owned(), ours, theirs));
        }
    }
    let names: Vec<&str> = differing.iter().map(|(n, _, _)| n.as_str()).collect();
    let documented = documented_differences();
    assert_eq!(names, documented, "differing (name, couchlink, hyper): {differing:?}");
}
