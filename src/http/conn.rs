//! One HTTP/1 connection of the redirect listener, over any byte stream: requests read and
//! parsed, each answered by the [`Respond`]er's [`Reply`] (written by [`super::write`]),
//! pipelined answers in order, the idle and slow-client timeout, and the drain.
//!
//! Why not hyper here (it still serves the admin listener and the agent): a cached redirect is
//! a few hundred bytes worked out from one lookup, and hyper's per-request machinery (its
//! dispatcher, a `HeaderMap` built for each request and response, a timer armed per request)
//! cost more than the redirect itself (`docs/benchmarks.md`). What hyper gave is kept: the
//! limits on request heads ([`super::limits`]), one header timeout for idle and slow clients
//! (and, here, for clients that stop reading their responses), `Connection: close` and
//! HTTP/1.0 keep-alive, and the graceful drain of [`super::accept::run_connections`].

use std::future::Future;
use std::mem::MaybeUninit;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{watch, OwnedSemaphorePermit};
use tokio::task::JoinHandle;
use tokio::time::{Instant, Sleep};

use super::limits::{self, Refusal, MAX_HEADERS, MAX_HEAD_BYTES};
use super::write::{self, Framing, Persistence, Shape};
use crate::message::{Field, Headers, Reply, Request};

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

/// How long an idle connection waits, once the server stops, for a request already on its way.
const STOP_GRACE: Duration = Duration::from_millis(50);

/// What the redirect listener serves: for each request, the reply (never an error).
pub trait Respond: Send + Sync + 'static {
    /// The `Location` a reply carries (borrowed from a cached link, or built).
    type Location: AsRef<str> + Send;

    /// The reply to a request within the limits.
    fn respond(&self, request: &Request<'_>, peer: SocketAddr) -> impl Future<Output = Reply<Self::Location>> + Send;

    /// The reply to a request refused by the limits (`request`: as parsed, or `None` when it
    /// could not be); the connection closes after it.
    fn refuse(&self, refusal: Refusal, request: Option<&Request<'_>>, peer: SocketAddr) -> Reply<Self::Location>;

    /// The cookie's name and attributes and the public URL the replies of site `site` (see
    /// [`Reply::site`]) are written with.
    fn shape(&self, site: usize) -> &Shape;

    /// Told about each connection accepted.
    fn accepted(&self) {}
}

/// What one connection did, for tests and its caller.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConnStats {
    /// Requests answered (refusals included).
    pub replies: usize,
    /// Times a buffered head was handed to the parser: once per request that arrives whole,
    /// twice for one that does not, whatever the pace at which its bytes arrive.
    pub parses: usize,
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
/// read.
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

    /// Serves one connection over `stream` (a socket, or in tests a `tokio::io::duplex` end)
    /// on a task of its own; its stats when it ends.
    pub fn serve_stream<S>(
        &self,
        stream: S,
        peer: SocketAddr,
        permit: Option<OwnedSemaphorePermit>,
    ) -> JoinHandle<ConnStats>
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        self.responder.accepted();
        let connection = Connection {
            stream,
            peer,
            responder: self.responder.clone(),
            closing: self.closing.clone(),
            stop: self.stop.clone(),
            _open: self.open.subscribe(),
            header_timeout: self.header_timeout,
            buf: Vec::with_capacity(INITIAL_BUFFER),
            looked: false,
            scanned: 0,
            out: Vec::new(),
            stats: ConnStats::default(),
        };
        tokio::spawn(async move {
            let _permit = permit;
            connection.run().await
        })
    }
}

impl<R: Respond> super::accept::Connections for Connections<R> {
    fn serve(&self, stream: TcpStream, peer: SocketAddr, permit: Option<OwnedSemaphorePermit>) {
        let _ = stream.set_nodelay(true);
        drop(self.serve_stream(stream, peer, permit));
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
struct Connection<S, R> {
    stream: S,
    peer: SocketAddr,
    responder: Arc<R>,
    closing: Arc<AtomicBool>,
    stop: Arc<Stop>,
    /// Held while the connection is open.
    _open: watch::Receiver<()>,
    header_timeout: Duration,
    /// Bytes read and not yet answered.
    buf: Vec<u8>,
    /// Whether the next head was parsed once already and found incomplete: from then on it is
    /// searched for its end before it is parsed again.
    looked: bool,
    /// How far `buf` has been searched for the end of the next head: each byte is searched
    /// once, however slowly the head arrives.
    scanned: usize,
    /// Responses not yet written.
    out: Vec<u8>,
    stats: ConnStats,
}

/// What the buffered bytes hold next.
enum Next<'a> {
    Request(Request<'a>, usize),
    /// Not a whole request head (only blank lines before it so far).
    Partial,
    /// Unanswerable.
    Refused(Refusal),
}

impl<S, R> Connection<S, R>
where
    S: AsyncRead + AsyncWrite + Unpin,
    R: Respond,
{
    async fn run(mut self) -> ConnStats {
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
                if start == self.buf.len() {
                    break;
                }
                // A head is parsed as soon as its first bytes are here: most arrive whole, and
                // are then read once. One that did not is searched for its end in the new bytes
                // of each later read, and parsed again only when that end has come.
                let end = if self.looked {
                    let Some(end) = head_end(&self.buf, start, &mut self.scanned) else { break };
                    Some(end)
                } else {
                    None
                };
                self.stats.parses += 1;
                let mut headers = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
                let reply = match parse(&self.buf[start..], &mut headers) {
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
                        let (reply, persistence) = match limits::check(&request) {
                            Ok(()) => (self.responder.respond(&request, self.peer).await, persistence),
                            Err(refusal) => {
                                (self.responder.refuse(refusal, Some(&request), self.peer), Persistence::Close)
                            }
                        };
                        let framing = Framing { version: request.version, omit_body: request.is_head(), persistence };
                        start += len;
                        self.scanned = start;
                        self.looked = false;
                        close = persistence == Persistence::Close;
                        Some((reply, framing))
                    }
                    Next::Partial => {
                        self.looked = true;
                        match end {
                            // Blank lines before a request line: search past them.
                            Some(end) => self.scanned = end,
                            // Not whole yet: wait for more, and search it from the start.
                            None => {
                                self.scanned = start;
                                break;
                            }
                        }
                        None
                    }
                    Next::Refused(refusal) => {
                        close = true;
                        let framing = Framing { version: 1, omit_body: false, persistence: Persistence::Close };
                        Some((self.responder.refuse(refusal, None, self.peer), framing))
                    }
                };
                if let Some((reply, framing)) = reply {
                    write::write(&reply, self.responder.shape(reply.site), framing, &mut self.out);
                    self.stats.replies += 1;
                }
                if self.out.len() >= MAX_PENDING_OUTPUT && !close && !self.flush(timer.as_mut(), &mut since).await {
                    return self.stats;
                }
            }
            if !self.out.is_empty() && !self.flush(timer.as_mut(), &mut since).await {
                return self.stats;
            }
            if close {
                return self.close().await;
            }
            // Keep only the unanswered bytes, at the front.
            if start == self.buf.len() {
                self.buf.clear();
            } else if start > 0 {
                self.buf.drain(..start);
            }
            self.scanned -= start;
            start = 0;
            if self.buf.len() >= MAX_HEAD_BYTES {
                let refusal = Refusal::for_unfinished_head(&self.buf);
                let framing = Framing { version: 1, omit_body: false, persistence: Persistence::Close };
                let reply = self.responder.refuse(refusal, None, self.peer);
                write::write(&reply, self.responder.shape(reply.site), framing, &mut self.out);
                self.stats.replies += 1;
                if self.flush(timer.as_mut(), &mut since).await {
                    return self.close().await;
                }
                return self.stats;
            }
            if stopping && self.buf.is_empty() {
                // Idle at a stop: a request may already be on its way (a keep-alive client sends
                // its next one the moment it has read a response). Waiting a moment answers it,
                // with `Connection: close`, where closing at once would meet it with a reset
                // and fail it; then the connection ends with a FIN.
                match tokio::time::timeout(STOP_GRACE, self.stream.read_buf(&mut self.buf)).await {
                    Ok(Ok(read)) if read > 0 => continue,
                    Ok(_) => return self.stats,
                    Err(_) => return self.close().await,
                }
            }
            if self.buf.capacity() - self.buf.len() < INITIAL_BUFFER / 2 {
                self.buf.reserve(self.buf.len().max(INITIAL_BUFFER));
            }
            tokio::select! {
                biased;
                read = self.stream.read_buf(&mut self.buf) => match read {
                    Ok(0) | Err(_) => return self.stats,
                    Ok(_) => {}
                },
                _ = &mut timer => {
                    let deadline = since + self.header_timeout;
                    if Instant::now() >= deadline {
                        // Idle past the keep-alive timeout, or too slow sending a head: closed
                        // without a response, as hyper did.
                        return self.stats;
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
    async fn close(mut self) -> ConnStats {
        let _ = self.stream.shutdown().await;
        // Into the request buffer's own room, emptied each time: no allocation of its own (a
        // buffer taken and freed per connection made the allocator take a fresh page and give
        // it back on every close), and nothing more for every connection's task to carry.
        let Connection { stream, buf, .. } = &mut self;
        let _ = tokio::time::timeout(LINGER, async {
            buf.clear();
            while let Ok(n) = stream.read_buf(buf).await {
                if n == 0 {
                    break;
                }
                buf.clear();
            }
        })
        .await;
        self.stats
    }
}

/// The end of the next request head in `buf[start..]` (the index just past its blank line),
/// searching only from `*scanned` (where a terminator may begin) on and moving it forward: a head that arrives a byte at a
/// time is searched once in all, and parsed once, when it is whole (hyper's
/// `is_complete_fast`). A head ends at an empty line, `\n\n` or `\n\r\n` (httparse also takes
/// bare `\n` line ends).
fn head_end(buf: &[u8], start: usize, scanned: &mut usize) -> Option<usize> {
    let from = (*scanned).max(start);
    for i in memchr::memchr_iter(b'\n', &buf[from..]).map(|i| from + i) {
        match buf.get(i + 1) {
            Some(b'\n') => return Some(i + 2),
            Some(b'\r') if buf.get(i + 2) == Some(&b'\n') => return Some(i + 3),
            _ => {}
        }
    }
    // A terminator may start in the last two bytes and end in the next read.
    *scanned = buf.len().saturating_sub(2).max(start);
    None
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
                return Next::Refused(Refusal::BadRequest);
            };
            let Some((target, path, query)) = split_target(target) else {
                return Next::Refused(Refusal::BadRequest);
            };
            let headers: &'b [httparse::Header<'b>] = request.headers;
            let headers = Headers::new(headers);
            let Some(has_body) = announces_body(&headers) else {
                return Next::Refused(Refusal::BadRequest);
            };
            Next::Request(Request { method, target, path, query, headers, has_body, version }, len)
        }
        Ok(httparse::Status::Partial) => Next::Partial,
        Err(httparse::Error::TooManyHeaders) => Next::Refused(Refusal::HeadersTooLarge),
        Err(_) => Next::Refused(Refusal::BadRequest),
    }
}

/// Whether the headers announce a body; `None` for a `Content-Length` that is not a number,
/// or several that disagree (RFC 9112 §6.3: unanswerable).
fn announces_body(headers: &Headers<'_>) -> Option<bool> {
    let mut length: Option<&[u8]> = None;
    for value in headers.fields(Field::ContentLength) {
        let value = value.trim_ascii();
        if value.is_empty() || !value.iter().all(u8::is_ascii_digit) || length.is_some_and(|seen| seen != value) {
            return None;
        }
        length = Some(value);
    }
    let nonzero = length.is_some_and(|value| value.iter().any(|&b| b != b'0'));
    Some(nonzero || headers.field(Field::TransferEncoding).is_some())
}

/// Splits a request target into (target without fragment, path, query), checking its bytes as
/// the `http` crate does (what hyper accepted is accepted); `None` for one it refuses.
fn split_target(raw: &str) -> Option<(&str, &str, Option<&str>)> {
    let target = match memchr::memchr(b'#', raw.as_bytes()) {
        Some(hash) => &raw[..hash],
        None => raw,
    };
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
    let rest = &target[path_start..];
    let (path, query) = match memchr::memchr(b'?', rest.as_bytes()) {
        Some(mark) => (&rest[..mark], Some(&rest[mark + 1..])),
        None => (rest, None),
    };
    let path_ok = path.bytes().all(|b| PATH_BYTES[usize::from(b)]);
    let query_ok = query.is_none_or(|q| q.bytes().all(|b| QUERY_BYTES[usize::from(b)]));
    if !path_ok || !query_ok {
        return None;
    }
    Some((target, if path.is_empty() { "/" } else { path }, query))
}

/// The bytes the `http` crate takes in a target's path, and in its query, as tables: one load
/// per byte.
const PATH_BYTES: [bool; 256] = byte_table!(|b| matches!(
    b,
    0x21 | 0x24..=0x3B | 0x3D | 0x40..=0x5F | 0x61..=0x7A | 0x7C | 0x7E | b'"' | b'{' | b'}' | 0x80..
));
const QUERY_BYTES: [bool; 256] = byte_table!(|b| matches!(b, 0x21 | 0x24..=0x3B | 0x3D | 0x3F..=0x7E | 0x80..));

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
            Next::Refused(refusal) => Err(Some(refusal.status().code())),
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

    /// The connection loop over in-memory streams, with tokio's clock paused (it jumps ahead
    /// whenever every task waits), as mini-redis tests its server: what a real socket would
    /// show, without real sockets or waiting.
    mod connection {
        use std::net::SocketAddr;
        use std::sync::Arc;
        use std::time::Duration;

        use time::OffsetDateTime;
        use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
        use tokio::time::Instant;

        use super::super::*;
        use crate::domain::PublicUrl;
        use crate::http::accept::Connections as _;
        use crate::message::{Body, Status};

        const TIMEOUT: Duration = Duration::from_secs(10);

        /// Answers every request with a redirect to its own path; refusals as the limits say.
        struct PathEcho(Shape);

        impl Respond for PathEcho {
            type Location = String;

            async fn respond(&self, request: &Request<'_>, _peer: SocketAddr) -> Reply<String> {
                let location = Some(format!("https://t.example{}", request.path));
                Reply { location, ..reply(Status::Found, Body::Redirect) }
            }

            fn refuse(&self, refusal: Refusal, _: Option<&Request<'_>>, _: SocketAddr) -> Reply<String> {
                reply(refusal.status(), Body::Page)
            }

            fn shape(&self, _site: usize) -> &Shape {
                &self.0
            }
        }

        fn reply(status: Status, body: Body) -> Reply<String> {
            Reply {
                status,
                body,
                location: None,
                shortlink: None,
                cookie: None,
                vary: crate::message::Vary::Nothing,
                now: OffsetDateTime::UNIX_EPOCH,
                site: 0,
            }
        }

        fn connections() -> Connections<PathEcho> {
            let shape = Shape::new(PublicUrl::parse("http://0x1f.ie").unwrap(), "tid");
            Connections::new(Arc::new(PathEcho(shape)), TIMEOUT)
        }

        /// A connection served over a duplex pipe of `capacity` bytes each way: the client's end
        /// and the connection's task.
        fn connect(connections: &Connections<PathEcho>, capacity: usize) -> (DuplexStream, JoinHandle<ConnStats>) {
            let (client, server) = tokio::io::duplex(capacity);
            let task = connections.serve_stream(server, "192.0.2.1:4711".parse().unwrap(), None);
            (client, task)
        }

        async fn read_all(client: &mut DuplexStream) -> String {
            let mut out = Vec::new();
            client.read_to_end(&mut out).await.unwrap();
            String::from_utf8(out).unwrap()
        }

        #[tokio::test(start_paused = true)]
        async fn an_idle_connection_closes_at_the_header_timeout_without_a_response() {
            let connections = connections();
            let started = Instant::now();
            let (mut client, task) = connect(&connections, 4096);
            assert_eq!(read_all(&mut client).await, "");
            assert!(started.elapsed() >= TIMEOUT, "closed after {:?}", started.elapsed());
            assert_eq!(task.await.unwrap(), ConnStats::default());
        }

        #[tokio::test(start_paused = true)]
        async fn a_slow_head_is_closed_at_the_timeout_counted_from_the_last_response() {
            let connections = connections();
            let (mut client, task) = connect(&connections, 4096);
            client.write_all(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
            let mut first = [0u8; 12];
            client.read_exact(&mut first).await.unwrap();
            assert_eq!(&first, b"HTTP/1.1 302");
            let answered = Instant::now();
            // Half a head, then nothing: no answer, closed a timeout after the response.
            client.write_all(b"GET /b HTTP/1.1\r\nHo").await.unwrap();
            let rest = read_all(&mut client).await;
            assert!(!rest.contains("HTTP/1.1"), "{rest}");
            assert!(answered.elapsed() >= TIMEOUT - Duration::from_millis(1), "{:?}", answered.elapsed());
            assert_eq!(task.await.unwrap().replies, 1);
        }

        #[tokio::test(start_paused = true)]
        async fn pipelined_requests_are_answered_in_order_and_each_whole_head_is_parsed_once() {
            let connections = connections();
            let (mut client, task) = connect(&connections, 64 * 1024);
            let requests: String =
                ["/one", "/two", "/three"].iter().map(|p| format!("GET {p} HTTP/1.1\r\nHost: x\r\n\r\n")).collect();
            client.write_all(requests.as_bytes()).await.unwrap();
            client.write_all(b"GET /last HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await.unwrap();
            let text = read_all(&mut client).await;
            let locations: Vec<&str> = text.lines().filter_map(|l| l.strip_prefix("location: ")).collect();
            assert_eq!(
                locations,
                ["https://t.example/one", "https://t.example/two", "https://t.example/three", "https://t.example/last"]
            );
            assert_eq!(task.await.unwrap(), ConnStats { replies: 4, parses: 4 });
        }

        #[tokio::test(start_paused = true)]
        async fn a_trickled_head_is_parsed_twice_whatever_its_pace() {
            let connections = connections();
            let (client, task) = connect(&connections, 64);
            // Just under the most read without an end: 431 (a header past its limit), once.
            let value = "v".repeat(MAX_HEAD_BYTES - 100);
            let head = format!("GET /t HTTP/1.1\r\nHost: x\r\nX-Long: {value}\r\n\r\n");
            assert!(head.len() < MAX_HEAD_BYTES);
            let (mut reader, mut writer) = tokio::io::split(client);
            let sender = tokio::spawn(async move {
                for byte in head.as_bytes() {
                    writer.write_all(std::slice::from_ref(byte)).await.unwrap();
                }
                writer
            });
            let mut response = Vec::new();
            reader.read_to_end(&mut response).await.unwrap();
            drop(sender.await.unwrap());
            assert!(response.starts_with(b"HTTP/1.1 431 "), "{}", String::from_utf8_lossy(&response));
            // Once at its first byte, once when whole: not once per read.
            assert_eq!(task.await.unwrap(), ConnStats { replies: 1, parses: 2 });
        }

        #[tokio::test(start_paused = true)]
        async fn a_client_that_never_reads_is_dropped_at_the_timeout() {
            let connections = connections();
            let (mut client, task) = connect(&connections, 1024);
            let started = Instant::now();
            // Far more answers than the pipe holds, none of them read.
            let request = b"GET /x HTTP/1.1\r\nHost: x\r\n\r\n".repeat(2000);
            let _ = tokio::time::timeout(Duration::from_secs(60), client.write_all(&request)).await;
            let stats =
                tokio::time::timeout(Duration::from_secs(60), task).await.expect("the connection ended").unwrap();
            assert!(stats.replies < 2000, "{stats:?}");
            assert!(started.elapsed() >= TIMEOUT, "dropped after {:?}", started.elapsed());
        }

        #[tokio::test(start_paused = true)]
        async fn a_drain_closes_idle_connections_and_tells_busy_ones_to_close() {
            let connections = connections();
            let (mut idle, idle_task) = connect(&connections, 4096);
            let (mut busy, busy_task) = connect(&connections, 4096);
            busy.write_all(b"GET /half").await.unwrap();
            tokio::task::yield_now().await;
            connections.start_closing();
            let drained = tokio::spawn(connections.close_idle_and_wait());
            assert_eq!(read_all(&mut idle).await, "", "the idle connection closed without a word");
            busy.write_all(b" HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
            let answer = read_all(&mut busy).await;
            assert!(answer.starts_with("HTTP/1.1 302 ") && answer.contains("\r\nconnection: close\r\n"), "{answer}");
            drained.await.unwrap();
            assert_eq!((idle_task.await.unwrap().replies, busy_task.await.unwrap().replies), (0, 1));
        }

        #[tokio::test(start_paused = true)]
        async fn a_request_arriving_as_the_drain_starts_is_answered_not_reset() {
            let connections = connections();
            let (mut idle, idle_task) = connect(&connections, 4096);
            tokio::task::yield_now().await;
            connections.start_closing();
            let drained = tokio::spawn(connections.close_idle_and_wait());
            tokio::task::yield_now().await;
            // Sent by a keep-alive client that had not yet seen the stop.
            idle.write_all(b"GET /H83if HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
            let answer = read_all(&mut idle).await;
            assert!(answer.starts_with("HTTP/1.1 302 ") && answer.contains("\r\nconnection: close\r\n"), "{answer}");
            drained.await.unwrap();
            assert_eq!(idle_task.await.unwrap().replies, 1);
        }
    }
}
