//! The redirect path's budget: a fixed mix of requests driven through the real connection code
//! (`http::Connections` serving `startup::RedirectService`, the handler, the link store, the
//! access log) over in-memory streams, for `bench/budget.sh` to count in instructions under
//! Valgrind (callgrind) and hold to `bench/budget.txt` in CI.
//!
//! Each scenario runs once unmeasured (the caches a long-running proxy has warm: the per-thread
//! User-Agent answers, the formatted `Date`), then twice inside [`measured`], with
//! [`SHORT`] and [`LONG`] requests: callgrind collects only inside that function and dumps after
//! each call, so what a request costs is the difference of the two dumps over the difference
//! of the counts, and what a run costs once (a connection, a task) drops out. Allocations are
//! counted the same way, on this thread, by the allocator below, and printed.
//!
//! `cargo bench --bench budget` runs it without Valgrind: it then prints the allocations and,
//! for a rough idea only, requests per second (never a figure to compare: see bench/versus.sh).

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use couchlink::access_log::{AccessLog, Flusher, LogOptions};
use couchlink::client_ip::TrustedProxies;
use couchlink::couch::{CouchClient, CouchConfig};
use couchlink::domain::{Host, Link, LinkDoc, LinkId, PublicUrl};
use couchlink::handler::{App, Settings, Site, Sites};
use couchlink::http::{Connections, Shape};
use couchlink::metrics::Metrics;
use couchlink::startup::RedirectService;
use couchlink::store::LinkStore;
use memchr::memmem::Finder;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

/// Counts the allocations (and reallocations) made on each thread, over the allocator the
/// proxy itself uses.
struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: every call is passed on unchanged to mimalloc, which upholds GlobalAlloc's contract;
// the counter is a const-initialised thread-local Cell, which never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        unsafe { mimalloc::MiMalloc.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { mimalloc::MiMalloc.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        unsafe { mimalloc::MiMalloc.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        unsafe { mimalloc::MiMalloc.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Requests of the shorter and the longer measured run of each scenario (multiples of the
/// pipelining depth).
const SHORT: usize = 256;
const LONG: usize = 2304;
/// Requests sent at once by the pipelining scenario (bench/pipelined.lua's depth).
const DEPTH: usize = 16;
/// Links in each domain's cache.
const LINKS: usize = 1000;
/// Short domains of the several-domains scenario.
const DOMAINS: usize = 10;

const PHONE: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) \
                     Version/17.4 Mobile/15E148 Safari/604.1";
const COOKIE: &str = "tid=20261122101733a3f9c1e2b7d4e601";

/// How a scenario's requests travel.
#[derive(Clone, Copy)]
enum Wire {
    /// One at a time on one keep-alive connection.
    KeepAlive,
    /// [`DEPTH`] at a time on one keep-alive connection.
    Pipelined,
    /// Each on a connection of its own, closed after it (`Connection: close`).
    Close,
}

struct Scenario {
    name: &'static str,
    /// Whether it is served by the several-domains proxy.
    domains: bool,
    /// Its connections' peer: [`PROXY`] (trusted to name the client) or [`PEER`].
    peer: SocketAddr,
    wire: Wire,
    /// Request `k`'s bytes and the status it must get.
    request: fn(usize) -> (String, u16),
}

/// Link `k`'s ID: `L` and four base-62 digits.
fn link_id(k: usize) -> String {
    const DIGITS: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut id = String::from("L");
    let mut n = k;
    for _ in 0..4 {
        id.push(DIGITS[n % 62] as char);
        n /= 62;
    }
    id
}

/// A link of the mix, spread so that lookups land all over the cache.
fn some_link(k: usize) -> String {
    link_id(k * 7919 % LINKS)
}

fn get(path: &str, host: &str, extra: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n{extra}\r\n")
}

fn browser_headers(cookie: bool) -> String {
    let cookie = if cookie { format!("Cookie: {COOKIE}\r\n") } else { String::new() };
    format!(
        "User-Agent: {PHONE}\r\nAccept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8\r\n\
         Accept-Language: en-GB,en;q=0.9\r\nAccept-Encoding: gzip, deflate, br\r\n{cookie}"
    )
}

const SCENARIOS: [Scenario; 9] = [
    // What wrk sends (bench/versus.sh's rows): a plain link, no User-Agent, no cookie.
    Scenario {
        name: "plain",
        domains: false,
        peer: PEER,
        wire: Wire::KeepAlive,
        request: |k| (get(&format!("/{}", some_link(k)), "0x1f.ie", ""), 302),
    },
    // A phone's browser, with the cookie it was given.
    Scenario {
        name: "browser",
        domains: false,
        peer: PEER,
        wire: Wire::KeepAlive,
        request: |k| (get(&format!("/{}", some_link(k)), "0x1f.ie", &browser_headers(true)), 302),
    },
    // A link with five rules (bench/helpers.py's), asked by that phone: its second rule.
    Scenario {
        name: "rules",
        domains: false,
        peer: PEER,
        wire: Wire::KeepAlive,
        request: |_| (get("/Rules", "0x1f.ie", &browser_headers(true)), 302),
    },
    // 404s: a path that is no ID, an inactive link, an ID known to be missing.
    Scenario {
        name: "not_found",
        domains: false,
        peer: PEER,
        wire: Wire::KeepAlive,
        request: |k| (get(["/favicon.ico", "/Inact", "/Gone0"][k % 3], "0x1f.ie", &browser_headers(false)), 404),
    },
    // A path and a query appended to a link (the resolution draft's full algorithm).
    Scenario {
        name: "appended",
        domains: false,
        peer: PEER,
        wire: Wire::KeepAlive,
        request: |k| (get(&format!("/{}/spring/poster?utm_medium=print", some_link(k)), "0x1f.ie", ""), 302),
    },
    // Sixteen at a time (bench/pipelined.lua).
    Scenario {
        name: "pipelined",
        domains: false,
        peer: PEER,
        wire: Wire::Pipelined,
        request: |k| (get(&format!("/{}", some_link(k)), "0x1f.ie", ""), 302),
    },
    // A connection per request.
    Scenario {
        name: "close",
        domains: false,
        peer: PEER,
        wire: Wire::Close,
        request: |k| (get(&format!("/{}", some_link(k)), "0x1f.ie", "Connection: close\r\n"), 302),
    },
    // A phone's browser behind the operator's proxy (deploy/nginx-couchlink.conf's headers).
    Scenario {
        name: "proxied",
        domains: false,
        peer: PROXY,
        wire: Wire::KeepAlive,
        request: |k| {
            let forwarded =
                "X-Forwarded-For: 198.51.100.23\r\nX-Forwarded-Proto: https\r\nX-Real-IP: 198.51.100.23\r\n";
            (get(&format!("/{}", some_link(k)), "0x1f.ie", &(browser_headers(true) + forwarded)), 302)
        },
    },
    // Ten short domains, the Host header picking one.
    Scenario {
        name: "domains",
        domains: true,
        peer: PEER,
        wire: Wire::KeepAlive,
        request: |k| (get(&format!("/{}", some_link(k)), &format!("d{}.example", k % DOMAINS), ""), 302),
    },
];

/// The links every domain holds: [`LINKS`] plain ones, one with five rules, an inactive one,
/// and IDs known to be missing.
fn links() -> Vec<(LinkId, Option<Arc<Link>>)> {
    let doc = |json: serde_json::Value| {
        let doc: LinkDoc = serde_json::from_value(json).expect("a link document");
        Some(Arc::new(Link::from_doc(doc).expect("a usable link")))
    };
    let mut links: Vec<_> = (0..LINKS)
        .map(|k| {
            let id = link_id(k);
            let url = format!("https://example.com/landing/{id}?utm_source=qr&utm_medium=print");
            (LinkId::parse(&id).expect("an ID"), doc(serde_json::json!({ "url": url })))
        })
        .collect();
    let rules = serde_json::json!({
        "url": "https://example.com/landing/rules",
        "targets": [
            {"when": {"os": ["android"]}, "url": "https://play.google.com/store/apps/details?id=ie.example"},
            {"when": {"os": ["ios"], "device": ["mobile"]}, "url": "https://apps.apple.com/app/id1"},
            {"when": {"device": ["tablet"]}, "url": "https://example.com/tablet"},
            {"when": {"device": ["desktop"], "lang": ["fr"]}, "url": "https://example.com/fr/"},
            {"when": {"lang": ["de"]}, "url": "https://example.com/de/"}
        ]
    });
    links.push((LinkId::parse("Rules").expect("an ID"), doc(rules)));
    let inactive = serde_json::json!({ "url": "https://example.com/over", "inactive": true });
    links.push((LinkId::parse("Inact").expect("an ID"), doc(inactive)));
    links.extend((0..10).map(|k| (LinkId::parse(&format!("Gone{k}")).expect("an ID"), None)));
    links
}

/// One domain's site: its store (never asked to read CouchDB: every ID of the mix is cached),
/// its access log in `dir`.
fn site(dir: &Path, flushers: &mut Vec<Flusher>) -> Site {
    let config = CouchConfig {
        url: "http://127.0.0.1:9".into(),
        user: None,
        password: None,
        password_file: None,
        db: "links".into(),
    };
    let couch = CouchClient::new(&config).expect("a CouchDB client");
    let metrics = Arc::new(Metrics::default());
    let store = LinkStore::new(couch, metrics.clone(), 1 << 16, 32);
    store.restore(links());
    // Batches handed over when full, not every few milliseconds: under Valgrind a timer's
    // moment depends on how the threads were scheduled, and so would the counts.
    let options = LogOptions { flush_interval: Duration::from_secs(3600), ..LogOptions::default() };
    let (log, flusher) = AccessLog::open(dir, options).expect("an access log");
    flushers.push(flusher);
    // Counting on, as a proxy runs by default (the tally is never taken here: its writer is
    // not on the redirect path).
    Site {
        store: Some(Arc::new(store)),
        log,
        metrics,
        clicks: Some(Arc::default()),
        limits: Arc::new(couchlink::clicks::limits::Limits::new(None)),
    }
}

/// The proxy as one serving thread runs it, with one domain or [`DOMAINS`].
fn proxy(dir: &Path, domains: bool, flushers: &mut Vec<Flusher>) -> Connections<RedirectService> {
    let settings = Settings::new("tid", TRUSTED.parse::<TrustedProxies>().expect("a proxy list"));
    let shape = |url: &str| Shape::new(PublicUrl::parse(url).expect("a public URL"), "tid");
    let (sites, shapes) = if domains {
        let hosts = (0..DOMAINS)
            .map(|d| {
                let host = Host::parse(&format!("d{d}.example")).expect("a host");
                (host, site(&dir.join(format!("d{d}")), flushers))
            })
            .collect();
        let mut shapes: Vec<Shape> = (0..DOMAINS).map(|d| shape(&format!("https://d{d}.example"))).collect();
        shapes.push(shape("https://d0.example"));
        (Sites::new(hosts, None, site(&dir.join("_unknown"), flushers)), shapes)
    } else {
        (Sites::single(site(&dir.join("one"), flushers)), vec![shape("http://0x1f.ie")])
    };
    let app = Arc::new(App { sites, metrics: Arc::new(Metrics::default()), settings });
    Connections::new(Arc::new(RedirectService::new(app, Arc::new(shapes), 0)), Duration::from_secs(10))
}

/// A client's address, and the operator's proxy's (trusted: [`TRUSTED`]).
const PEER: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::new(203, 0, 113, 7)), 40_000);
const PROXY: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 1)), 40_000);
const TRUSTED: &str = "192.0.2.0/24";

/// Reads one response from `stream` into `buf` (which holds what was read after the previous
/// one from `*at` on), checks its status, and moves `*at` past it. Kept cheap (memchr's
/// searches, no copying): its instructions are counted with the proxy's.
async fn response(stream: &mut DuplexStream, buf: &mut Vec<u8>, at: &mut usize, status: u16, request: &str) {
    const LENGTH: &[u8] = b"\r\ncontent-length: ";
    static HEAD_END: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\r\n\r\n"));
    static CONTENT_LENGTH: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(LENGTH));
    loop {
        if let Some(end) = HEAD_END.find(&buf[*at..]).map(|end| *at + end) {
            let head = &buf[*at..end];
            let got = head.get(9..12).map(|code| code.iter().fold(0u16, |n, d| n * 10 + u16::from(d - b'0')));
            assert_eq!(got, Some(status), "{request:?} answered {}", String::from_utf8_lossy(head));
            let value = CONTENT_LENGTH.find(head).expect("a content-length") + LENGTH.len();
            let digits = head[value..].iter().take_while(|d| d.is_ascii_digit());
            let length = digits.fold(0usize, |n, d| n * 10 + usize::from(d - b'0'));
            let total = end + 4 + length;
            // Past this response: the next starts there.
            *at = total;
            while buf.len() < total {
                assert_ne!(stream.read_buf(buf).await.expect("reads"), 0, "{request:?}: cut short");
            }
            return;
        }
        assert_ne!(stream.read_buf(buf).await.expect("reads"), 0, "{request:?}: no answer");
    }
}

/// The bytes sent at once, and the requests they hold, each with the status it must get.
type Batch = (Vec<u8>, Vec<(String, u16)>);

/// A scenario's requests `from..from + count`, made before they are sent (the client's own
/// allocations are not the proxy's): each batch's bytes, and its requests with the status each
/// must get.
struct Batches {
    wire: Wire,
    peer: SocketAddr,
    batches: Vec<Batch>,
    requests: usize,
}

impl Batches {
    fn new(scenario: &Scenario, from: usize, count: usize) -> Batches {
        let depth = if matches!(scenario.wire, Wire::Pipelined) { DEPTH } else { 1 };
        let batches = (from..from + count)
            .step_by(depth)
            .map(|batch| {
                let requests: Vec<(String, u16)> = (batch..batch + depth).map(scenario.request).collect();
                (requests.iter().flat_map(|(r, _)| r.bytes()).collect(), requests)
            })
            .collect();
        Batches { wire: scenario.wire, peer: scenario.peer, batches, requests: count }
    }
}

/// Sends the batches and checks every answer.
async fn drive(connections: &Connections<RedirectService>, batches: &Batches, buf: &mut Vec<u8>) {
    let peer = batches.peer;
    match batches.wire {
        Wire::KeepAlive | Wire::Pipelined => {
            let (mut client, server) = tokio::io::duplex(256 * 1024);
            let task = connections.serve_stream(server, peer, None);
            for (bytes, requests) in &batches.batches {
                client.write_all(bytes).await.expect("writes");
                let mut at = 0;
                for (request, status) in requests {
                    response(&mut client, buf, &mut at, *status, request).await;
                }
                buf.drain(..at);
            }
            drop(client);
            assert_eq!(task.await.expect("the connection's task").replies, batches.requests);
        }
        Wire::Close => {
            for (bytes, requests) in &batches.batches {
                let (mut client, server) = tokio::io::duplex(64 * 1024);
                let task = connections.serve_stream(server, peer, None);
                client.write_all(bytes).await.expect("writes");
                let (request, status) = &requests[0];
                let mut at = 0;
                response(&mut client, buf, &mut at, *status, request).await;
                buf.drain(..at);
                assert_eq!(client.read(&mut [0u8; 16]).await.expect("reads to the close"), 0, "nothing after it");
                drop(client);
                assert_eq!(task.await.expect("the connection's task").replies, 1);
            }
        }
    }
}

/// The measured part (callgrind's `--toggle-collect` and `--dump-after` name this function):
/// the batches sent and answered. Returns the allocations made on this thread meanwhile.
#[inline(never)]
fn measured(
    runtime: &tokio::runtime::Runtime,
    connections: &Connections<RedirectService>,
    batches: &Batches,
    buf: &mut Vec<u8>,
) -> u64 {
    let before = ALLOCATIONS.with(Cell::get);
    runtime.block_on(drive(connections, batches, buf));
    ALLOCATIONS.with(Cell::get) - before
}

fn main() {
    // `cargo bench` passes `--bench`; a name narrows the run to the scenarios containing it.
    let only: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let dir = std::env::temp_dir().join(format!("couchlink-budget-{}", std::process::id()));
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    let mut flushers = Vec::new();
    let (one, several) = runtime
        .block_on(async { (proxy(&dir, false, &mut flushers), proxy(&dir.join("domains"), true, &mut flushers)) });
    println!("# scenario requests allocations seconds");
    for scenario in SCENARIOS.iter().filter(|s| only.is_empty() || only.iter().any(|o| s.name.contains(o.as_str()))) {
        let connections = if scenario.domains { &several } else { &one };
        let mut buf = Vec::with_capacity(64 * 1024);
        runtime.block_on(drive(connections, &Batches::new(scenario, 0, 2 * DEPTH), &mut buf));
        let mut from = 2 * DEPTH;
        for requests in [SHORT, LONG] {
            let batches = Batches::new(scenario, from, requests);
            let started = std::time::Instant::now();
            let allocations = measured(&runtime, connections, &batches, &mut buf);
            let seconds = started.elapsed().as_secs_f64();
            println!("{} {requests} {allocations} {seconds:.4}", scenario.name);
            from += requests;
        }
    }
    runtime.block_on(async {
        for flusher in flushers {
            flusher.finish(Duration::from_secs(30)).await;
        }
    });
    let _ = std::fs::remove_dir_all(&dir);
}
