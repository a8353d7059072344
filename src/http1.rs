//! couchlink's own HTTP/1 server for the redirect listener: GET and HEAD without bodies,
//! pipelined requests answered in order, over `httparse`.
//!
//! Why not hyper here (it still serves the admin listener and the agent): a cached redirect is
//! a few hundred bytes worked out from one lookup, and hyper's per-request machinery (its
//! dispatcher, a `HeaderMap` built for each request and response, a timer armed per request)
//! cost more than the redirect itself; see bench/run.sh and the README's figures. What hyper
//! gave is kept: the limits on request heads (400, 414, 431, answered by the service with a
//! cookie and a log line), one header timeout for idle and slow clients (and, here, for clients
//! that stop reading their responses), `Connection: close` and HTTP/1.0 keep-alive, and the
//! graceful drain of [`crate::accept::run_connections`].

use std::future::Future;
use std::mem::MaybeUninit;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{watch, OwnedSemaphorePermit};
use tokio::time::{Instant, Sleep};

use crate::accept::MAX_HEAD_BYTES;

/// The most header fields in one request (hyper's default); more gets 431.
const MAX_HEADERS: usize = 100;
/// The read buffer a connection starts with (most request heads fit); it doubles, up to
/// `MAX_HEAD_BYTES`, only for a larger head. Idle connections hold little else.
const INITIAL_BUFFER: usize = 1024;
/// Responses gathered before they are written, at most: pipelined requests are answered with
/// one write per batch, and a client that pipelines without reading cannot grow it unbounded.
const MAX_PENDING_OUTPUT: usize = 64 * 1024;
/// How long a connection closed by the server keeps reading (and discarding) what its client
/// still sends, so that the kernel does not answer that data with a reset that could destroy
/// the last response before the client read it (nginx's `lingering_close`).
const LINGER: Duration = Duration::from_millis(500);

/// One request as the handler sees it: borrowed from the connection's read buffer.
#[derive(Debug)]
pub struct Request<'a> {
    /// The method, as sent (`GET`, `HEAD`, ...).
    pub method: &'a str,
    /// The request target as received, without a fragment (`/H83if?x=1`, or absolute-form).
    pub target: &'a str,
    /// The target's path (`/H83if`; `*` for asterisk-form).
    pub path: &'a str,
    /// The target's query, without its `?`.
    pub query: Option<&'a str>,
    /// The header fields.
    pub headers: Headers<'a>,
    /// Whether the request announces a body (`Content-Length` above 0, or `Transfer-Encoding`).
    pub has_body: bool,
    /// `0` for HTTP/1.0, `1` for HTTP/1.1.
    pub version: u8,
}

impl Request<'_> {
    /// Whether this is `HEAD` (the response has headers and no body).
    pub fn is_head(&self) -> bool {
        self.method == "HEAD"
    }
}

/// A request's header fields, in the order received.
#[derive(Debug, Clone, Copy)]
pub struct Headers<'a>(pub &'a [httparse::Header<'a>]);

impl<'a> Headers<'a> {
    /// The first value of header `name` (ASCII case-insensitive).
    pub fn get(&self, name: &str) -> Option<&'a [u8]> {
        self.all(name).next()
    }

    /// Every value of header `name`, in order.
    pub fn all<'n>(&self, name: &'n str) -> impl Iterator<Item = &'a [u8]> + use<'a, 'n> {
        self.0.iter().filter(move |h| h.name.eq_ignore_ascii_case(name)).map(|h| h.value)
    }

    /// The bytes of every name and value together.
    pub fn total_bytes(&self) -> usize {
        self.0.iter().map(|h| h.name.len() + h.value.len()).sum()
    }

    /// Whether any `Connection` header lists `token`.
    fn connection_has(&self, token: &str) -> bool {
        self.all("connection")
            .any(|v| v.split(|&b| b == b',').any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes())))
    }
}

/// How a response ends its connection, written as its `Connection` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Persistence {
    /// HTTP/1.1's default: the connection stays open, no header.
    KeepAlive,
    /// HTTP/1.0 with `Connection: keep-alive`: it stays open, and says so.
    KeepAlive10,
    /// `Connection: close`: the last response on this connection.
    Close,
}

impl Persistence {
    /// The `Connection` header line to write, if any.
    pub fn header(self) -> &'static [u8] {
        match self {
            Persistence::KeepAlive => b"",
            Persistence::KeepAlive10 => b"connection: keep-alive\r\n",
            Persistence::Close => b"connection: close\r\n",
        }
    }
}

/// What the redirect listener serves: each parsed request answered as bytes, never an error.
pub trait Respond: Send + Sync + 'static {
    /// Appends the whole response to `request` (status line, headers with `persistence`'s
    /// `Connection` header, body) to `out`.
    fn respond(
        &self,
        request: &Request<'_>,
        peer: SocketAddr,
        persistence: Persistence,
        out: &mut Vec<u8>,
    ) -> impl Future<Output = ()> + Send;

    /// Appends the response to a request too broken or too large to parse (400, 414 or 431);
    /// the connection closes after it.
    fn reject(&self, peer: SocketAddr, status: u16, out: &mut Vec<u8>);

    /// Told about each connection accepted.
    fn accepted(&self) {}
}

/// The connections of one listener: how they are served, and how they are stopped.
pub struct Connections<R> {
    responder: Arc<R>,
    header_timeout: Duration,
    /// Set at shutdown: every response from then on says `Connection: close`.
    closing: Arc<AtomicBool>,
    /// Set at the end of the drain's lame-duck second: idle connections close.
    stop: Arc<Stop>,
    /// Each connection holds a receiver (never read): the receivers left are the connections
    /// open, and `closed()` completes when the last one ends.
    open: watch::Sender<()>,
}

/// The signal that closes idle connections: a flag for connections that start after it, and a
/// wake-up for those waiting. Each connection registers once for its whole life, not once per
/// read (a `watch` receiver's `changed()` per read cost 2% of the CPU at 1000 connections).
#[derive(Default)]
struct Stop {
    set: AtomicBool,
    notify: tokio::sync::Notify,
}

impl<R: Respond> Connections<R> {
    /// Serves `responder`, closing connections whose next request head does not arrive within
    /// `header_timeout` of their opening or of their previous response.
    pub fn new(responder: Arc<R>, header_timeout: Duration) -> Self {
        Connections {
            responder,
            header_timeout,
            closing: Arc::default(),
            stop: Arc::default(),
            open: watch::Sender::new(()),
        }
    }
}

impl<R: Respond> crate::accept::Connections for Connections<R> {
    fn serve(&self, stream: TcpStream, peer: SocketAddr, permit: Option<OwnedSemaphorePermit>) {
        self.responder.accepted();
        let _ = stream.set_nodelay(true);
        let connection = Connection {
            stream,
            peer,
            responder: self.responder.clone(),
            closing: self.closing.clone(),
            stop: self.stop.clone(),
            _open: self.open.subscribe(),
            header_timeout: self.header_timeout,
            buf: Vec::with_capacity(INITIAL_BUFFER),
            out: Vec::new(),
        };
        tokio::spawn(async move {
            let _permit = permit;
            connection.run().await;
        });
    }

    fn start_closing(&self) {
        self.closing.store(true, Ordering::Relaxed);
    }

    fn open(&self) -> usize {
        self.open.receiver_count()
    }

    async fn close_idle_and_wait(self) {
        self.stop.set.store(true, Ordering::SeqCst);
        self.stop.notify.notify_waiters();
        self.open.closed().await;
    }
}

/// One accepted connection.
struct Connection<R> {
    stream: TcpStream,
    peer: SocketAddr,
    responder: Arc<R>,
    closing: Arc<AtomicBool>,
    stop: Arc<Stop>,
    /// Held while the connection is open.
    _open: watch::Receiver<()>,
    header_timeout: Duration,
    /// Bytes read and not yet answered.
    buf: Vec<u8>,
    /// Responses not yet written.
    out: Vec<u8>,
}

/// What the buffered bytes hold next.
enum Next<'a> {
    Request(Request<'a>, usize),
    /// Not a whole request head yet.
    Partial,
    /// Unanswerable: 400, 414 or 431.
    Refused(u16),
}

impl<R: Respond> Connection<R> {
    async fn run(mut self) {
        // One timer per connection, not per request: it is re-armed only when it fires early,
        // to the deadline counted from the last response (`since`).
        let mut since = Instant::now();
        let timer = tokio::time::sleep_until(since + self.header_timeout);
        tokio::pin!(timer);
        let stop = self.stop.clone();
        let stopped = stop.notify.notified();
        tokio::pin!(stopped);
        // Registered before the flag is read, so a stop signalled in between is not missed.
        stopped.as_mut().enable();
        let mut stopping = stop.set.load(Ordering::SeqCst);
        let mut start = 0;
        loop {
            // Answer every complete request buffered, in order.
            let mut close = false;
            while !close {
                let mut headers = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
                match parse(&self.buf[start..], &mut headers) {
                    Next::Request(request, len) => {
                        let persistence = if request.has_body
                            || stopping
                            || self.closing.load(Ordering::Relaxed)
                            || !keeps_alive(&request)
                        {
                            Persistence::Close
                        } else if request.version == 0 {
                            Persistence::KeepAlive10
                        } else {
                            Persistence::KeepAlive
                        };
                        self.responder.respond(&request, self.peer, persistence, &mut self.out).await;
                        start += len;
                        close = persistence == Persistence::Close;
                    }
                    Next::Partial => break,
                    Next::Refused(status) => {
                        self.responder.reject(self.peer, status, &mut self.out);
                        close = true;
                    }
                }
                if self.out.len() >= MAX_PENDING_OUTPUT && !close && !self.flush(timer.as_mut(), &mut since).await {
                    return;
                }
            }
            if !self.out.is_empty() && !self.flush(timer.as_mut(), &mut since).await {
                return;
            }
            if close {
                self.close().await;
                return;
            }
            // Keep only the unanswered bytes, at the front.
            if start == self.buf.len() {
                self.buf.clear();
            } else if start > 0 {
                self.buf.drain(..start);
            }
            start = 0;
            // The head read at most (`accept::MAX_HEAD_BYTES`): 414 while the request line is
            // not complete, else 431.
            if self.buf.len() >= MAX_HEAD_BYTES {
                let status = if memchr::memchr(b'\n', &self.buf).is_none() { 414 } else { 431 };
                self.responder.reject(self.peer, status, &mut self.out);
                if self.flush(timer.as_mut(), &mut since).await {
                    self.close().await;
                }
                return;
            }
            if stopping && self.buf.is_empty() {
                return;
            }
            if self.buf.capacity() - self.buf.len() < INITIAL_BUFFER / 2 {
                self.buf.reserve(self.buf.len().max(INITIAL_BUFFER));
            }
            tokio::select! {
                biased;
                read = self.stream.read_buf(&mut self.buf) => match read {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                },
                _ = &mut timer => {
                    let deadline = since + self.header_timeout;
                    if Instant::now() >= deadline {
                        // Idle past the keep-alive timeout, or too slow sending a head: closed
                        // without a response, as hyper did.
                        return;
                    }
                    timer.as_mut().reset(deadline);
                }
                _ = &mut stopped, if !stopping => {
                    stopping = true;
                }
            }
        }
    }

    /// Writes the responses gathered; `false` if the connection is lost. The header timeout
    /// counts from here (`since`) and bounds the write as well: a client that reads nothing for
    /// that long, its buffers full, is dropped rather than held open for ever.
    async fn flush(&mut self, mut timer: Pin<&mut Sleep>, since: &mut Instant) -> bool {
        *since = Instant::now();
        let deadline = *since + self.header_timeout;
        let written = {
            let write = self.stream.write_all(&self.out);
            tokio::pin!(write);
            loop {
                tokio::select! {
                    // A write that completes at once never polls the timer.
                    biased;
                    written = &mut write => break written.is_ok(),
                    _ = timer.as_mut() => {
                        if Instant::now() >= deadline {
                            break false;
                        }
                        timer.as_mut().reset(deadline);
                    }
                }
            }
        };
        self.out.clear();
        written
    }

    /// Ends the connection after its last response: a FIN, then what the client still sends is
    /// read and dropped for a moment, so that unread bytes do not turn the close into a reset.
    async fn close(mut self) {
        let _ = self.stream.shutdown().await;
        // On the heap, and only now: every connection's task would otherwise carry it.
        let mut scratch = vec![0u8; 4096];
        let _ = tokio::time::timeout(LINGER, async {
            while let Ok(n) = self.stream.read(&mut scratch).await {
                if n == 0 {
                    break;
                }
            }
        })
        .await;
    }
}

/// Whether the connection stays open after answering `request` (before any server decision).
fn keeps_alive(request: &Request<'_>) -> bool {
    if request.version == 0 {
        request.headers.connection_has("keep-alive")
    } else {
        !request.headers.connection_has("close")
    }
}

/// Parses the request at the start of `bytes`.
fn parse<'b, 'h>(bytes: &'b [u8], headers: &'h mut [MaybeUninit<httparse::Header<'b>>]) -> Next<'b>
where
    'h: 'b,
{
    let mut request = httparse::Request::new(&mut []);
    match request.parse_with_uninit_headers(bytes, headers) {
        Ok(httparse::Status::Complete(len)) => {
            let (Some(method), Some(target), Some(version)) = (request.method, request.path, request.version) else {
                return Next::Refused(400);
            };
            let Some((target, path, query)) = split_target(target) else {
                return Next::Refused(400);
            };
            let headers: &'b [httparse::Header<'b>] = request.headers;
            let headers = Headers(headers);
            let Some(has_body) = announces_body(&headers) else {
                return Next::Refused(400);
            };
            Next::Request(Request { method, target, path, query, headers, has_body, version }, len)
        }
        Ok(httparse::Status::Partial) => Next::Partial,
        Err(httparse::Error::TooManyHeaders) => Next::Refused(431),
        Err(_) => Next::Refused(400),
    }
}

/// Whether the headers announce a body; `None` for a `Content-Length` that is not a number,
/// or several that disagree (RFC 9112 §6.3: unanswerable).
fn announces_body(headers: &Headers<'_>) -> Option<bool> {
    let mut length: Option<&[u8]> = None;
    for value in headers.all("content-length") {
        let value = value.trim_ascii();
        if value.is_empty() || !value.iter().all(u8::is_ascii_digit) || length.is_some_and(|seen| seen != value) {
            return None;
        }
        length = Some(value);
    }
    let nonzero = length.is_some_and(|value| value.iter().any(|&b| b != b'0'));
    Some(nonzero || headers.get("transfer-encoding").is_some())
}

/// Splits a request target into (target without fragment, path, query), checking its bytes as
/// the `http` crate does (what hyper accepted is accepted); `None` for one it refuses.
fn split_target(raw: &str) -> Option<(&str, &str, Option<&str>)> {
    let target = raw.split_once('#').map_or(raw, |(before, _)| before);
    if target == "*" {
        return Some((target, "*", None));
    }
    let path_start = if target.starts_with('/') {
        0
    } else {
        // Absolute-form: `scheme://authority[/path][?query]`.
        let (scheme, rest) = target.split_once("://")?;
        let scheme_ok = scheme.as_bytes().first().is_some_and(u8::is_ascii_alphabetic)
            && scheme.bytes().all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b));
        let authority_len = rest.find(['/', '?']).unwrap_or(rest.len());
        let authority = &rest[..authority_len];
        let authority_ok = !authority.is_empty()
            && authority.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._~%!$&'()*+,;=:@[]".contains(&b));
        if !scheme_ok || !authority_ok {
            return None;
        }
        scheme.len() + 3 + authority_len
    };
    let (path, query) = match target[path_start..].split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (&target[path_start..], None),
    };
    let path_ok = path.bytes().all(|b| {
        matches!(b, 0x21 | 0x24..=0x3B | 0x3D | 0x40..=0x5F | 0x61..=0x7A | 0x7C | 0x7E | b'"' | b'{' | b'}' | 0x80..)
    });
    let query_ok =
        query.is_none_or(|q| q.bytes().all(|b| matches!(b, 0x21 | 0x24..=0x3B | 0x3D | 0x3F..=0x7E | 0x80..)));
    if !path_ok || !query_ok {
        return None;
    }
    Some((target, if path.is_empty() { "/" } else { path }, query))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (method, path, query, has_body, length)
    type Parsed = (String, String, Option<String>, bool, usize);

    fn parsed(bytes: &[u8]) -> Result<Parsed, Option<u16>> {
        let mut headers = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
        match parse(bytes, &mut headers) {
            Next::Request(r, len) => {
                Ok((r.method.to_owned(), r.path.to_owned(), r.query.map(str::to_owned), r.has_body, len))
            }
            Next::Partial => Err(None),
            Next::Refused(status) => Err(Some(status)),
        }
    }

    #[test]
    fn a_request_is_parsed_and_its_length_counted() {
        let one = b"GET /H83if?x=1 HTTP/1.1\r\nHost: a\r\n\r\n";
        let mut two = one.to_vec();
        two.extend_from_slice(b"HEAD /b HTTP/1.1\r\n\r\n");
        assert_eq!(parsed(&two), Ok(("GET".into(), "/H83if".into(), Some("x=1".into()), false, one.len())));
        assert_eq!(parsed(b"GET /H83if HTTP/1.1\r\nHost: a\r\n"), Err(None));
    }

    #[test]
    fn bodies_broken_lengths_and_bad_targets_are_told_apart() {
        assert!(!parsed(b"GET / HTTP/1.1\r\nContent-Length: 0\r\n\r\n").unwrap().3);
        assert!(parsed(b"GET / HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello").unwrap().3);
        assert!(parsed(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n").unwrap().3);
        assert_eq!(parsed(b"GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n"), Err(Some(400)));
        assert_eq!(parsed(b"GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"), Err(Some(400)));
        assert_eq!(parsed(b"GET /a<b HTTP/1.1\r\n\r\n"), Err(Some(400)));
        assert_eq!(parsed(b"GET nope HTTP/1.1\r\n\r\n"), Err(Some(400)));
        assert_eq!(parsed(b"GET / HTTP/2.0\r\n\r\n"), Err(Some(400)));
        let many = format!("GET / HTTP/1.1\r\n{}\r\n", "a: b\r\n".repeat(MAX_HEADERS + 1));
        assert_eq!(parsed(many.as_bytes()), Err(Some(431)));
    }

    #[test]
    fn targets_split_like_the_http_crate() {
        assert_eq!(split_target("/a?b#c"), Some(("/a?b", "/a", Some("b"))));
        assert_eq!(split_target("http://0x1f.ie/H83if?q"), Some(("http://0x1f.ie/H83if?q", "/H83if", Some("q"))));
        assert_eq!(split_target("http://0x1f.ie"), Some(("http://0x1f.ie", "/", None)));
        assert_eq!(split_target("*"), Some(("*", "*", None)));
        assert_eq!(split_target("/{\"json\"}"), Some(("/{\"json\"}", "/{\"json\"}", None)));
        assert_eq!(split_target("/a b"), None);
        assert_eq!(split_target("://x/"), None);
    }

    #[test]
    fn keep_alive_follows_the_version_and_connection_header() {
        let cases: [(&[u8], bool); 4] = [
            (b"GET / HTTP/1.1\r\n\r\n", true),
            (b"GET / HTTP/1.1\r\nConnection: foo, Close\r\n\r\n", false),
            (b"GET / HTTP/1.0\r\n\r\n", false),
            (b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", true),
        ];
        for (bytes, expected) in cases {
            let mut headers = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
            let Next::Request(request, _) = parse(bytes, &mut headers) else { panic!("parses") };
            assert_eq!(keeps_alive(&request), expected, "{}", String::from_utf8_lossy(bytes));
        }
    }
}
