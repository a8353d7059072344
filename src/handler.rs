//! The redirect logic: one request's parts in, one response out, no socket needed.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use bytes::Bytes;
use hyper::StatusCode;
use time::OffsetDateTime;

use crate::access_log::{AccessLog, Entry};
use crate::client_ip::TrustedProxies;
use crate::domain::{Link, LinkId, PublicUrl, TrackingId};
use crate::http1::{Headers, Persistence, Request};
use crate::metrics::Metrics;
use crate::resolve::{climbs_out, resolve, safe_location, ResolveError, Resolved, Ruleset};
use crate::store::{LinkStore, Unavailable};

/// The one body for every kind of "no such link", so a 404 never tells whether an ID exists.
const NOT_FOUND_BODY: &str = "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Not Found</title></head>\
<body><h1>Not Found</h1><p>There is no active short link at this address.</p></body></html>\n";
const NOT_IMPLEMENTED_BODY: &str =
    "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Not Implemented</title></head>\
<body><h1>Not Implemented</h1><p>Short links answer GET and HEAD only.</p></body></html>\n";
const UNAVAILABLE_BODY: &str = "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Service Unavailable</title></head>\
<body><h1>Service Unavailable</h1><p>The link database cannot be reached. Please try again shortly.</p></body></html>\n";
/// Seconds a client is asked to wait after a 503.
const RETRY_AFTER_SECS: &str = "5";
/// The longest request target answered; longer gets 414 (nginx's default buffer is 8 KiB too).
pub const MAX_TARGET_BYTES: usize = 8 * 1024;
/// The most header bytes (names and values) answered; more gets 431.
pub const MAX_HEADER_BYTES: usize = 16 * 1024;

/// Everything a request needs, built once at start-up.
pub struct App {
    /// Where link documents are read.
    pub store: Arc<LinkStore>,
    /// Where every request is recorded.
    pub log: AccessLog,
    /// Shared counters.
    pub metrics: Arc<Metrics>,
    /// Response settings.
    pub settings: Settings,
}

/// How responses are shaped.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The short links' base URL.
    pub public_url: PublicUrl,
    /// The tracking cookie's name.
    pub cookie_name: String,
    /// `; Path=/; Max-Age=...` and the rest, computed once.
    cookie_attributes: String,
    /// Whose forwarding headers are believed.
    pub trusted_proxies: TrustedProxies,
    /// Whether `Sec-GPC: 1` and `DNT: 1` turn the tracking cookie off for that request.
    pub honor_privacy_signals: bool,
    /// Whether logged addresses lose their host part ([`crate::client_ip::anonymize`]).
    pub anonymize_ip: bool,
}

impl Settings {
    /// Settings for `public_url` (its scheme decides the cookie's `Secure`).
    pub fn new(public_url: PublicUrl, cookie_name: &str, trusted_proxies: TrustedProxies) -> Self {
        let secure = if public_url.is_https() { "; Secure" } else { "" };
        Settings {
            cookie_attributes: format!("; Path=/; Max-Age=63072000; HttpOnly; SameSite=Lax{secure}"),
            public_url,
            cookie_name: cookie_name.to_owned(),
            trusted_proxies,
            honor_privacy_signals: false,
            anonymize_ip: false,
        }
    }

    /// The client's address as the log keeps it.
    fn logged_ip(&self, ip: IpAddr) -> IpAddr {
        if self.anonymize_ip {
            crate::client_ip::anonymize(ip)
        } else {
            ip
        }
    }

    /// Whether this request goes untracked: privacy signals honoured, and one of them set.
    /// Global Privacy Control (`Sec-GPC: 1`) and Do Not Track (`DNT: 1`) mean the same here,
    /// and any instance saying `1` counts: a client that sends both `0` and `1` asked not to be
    /// tracked.
    fn untracked(&self, headers: &Headers<'_>) -> bool {
        self.honor_privacy_signals
            && ["sec-gpc", "dnt"].iter().any(|name| headers.all(name).any(|v| v.trim_ascii() == b"1"))
    }
}

/// What a request resolved to.
enum Outcome {
    Redirect {
        location: Location,
        id: Option<LinkId>,
    },
    /// 200 with the out-of-band invitation a link's URL carries, as JSON (RFC 0434's URL
    /// shortening, for a client that asks for `application/json`).
    Invitation(Bytes),
    NotFound,
    NotImplemented,
    Unavailable,
    /// 400, 414 or 431: a request too long, too large or too broken to answer.
    Refused(StatusCode),
}

/// Answers one request, appending the whole response to `out` (its `Connection` header from
/// `persistence`). Never fails: every error is already a response here, and every response is
/// logged and carries the tracking cookie.
pub async fn handle(app: &App, request: &Request<'_>, peer: SocketAddr, persistence: Persistence, out: &mut Vec<u8>) {
    let now = OffsetDateTime::now_utc();
    let headers = &request.headers;
    let outcome = if request.target.len() > MAX_TARGET_BYTES {
        Outcome::Refused(StatusCode::URI_TOO_LONG)
    } else if headers.total_bytes() > MAX_HEADER_BYTES {
        Outcome::Refused(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE)
    } else if request.has_body {
        // Nothing here reads a body; the connection closes after this answer.
        Outcome::NotImplemented
    } else {
        match request.method {
            "GET" | "HEAD" => {
                let invited = if wants_json(headers) { invitation(&app.store, request.path, now).await } else { None };
                match invited {
                    Some(outcome) => outcome,
                    None => locate(&app.store, request.path, request.query, now).await,
                }
            }
            _ => Outcome::NotImplemented,
        }
    };
    let tracking = (!app.settings.untracked(headers))
        .then(|| tracking_cookie(headers, &app.settings.cookie_name, now).unwrap_or_else(|| TrackingId::generate(now)));
    let head = Head { version: request.version, omit_body: request.is_head(), persistence, now };
    let status = write_response(out, &outcome, tracking.as_ref(), &app.settings, head);
    app.log.write(&Entry {
        time: now,
        client: app.settings.logged_ip(app.settings.trusted_proxies.client_ip(peer.ip(), headers)),
        tracking: tracking.as_ref(),
        user_agent: headers.get("user-agent"),
        target: request.target.as_bytes(),
        status,
        location: match &outcome {
            Outcome::Redirect { location, .. } => Some(location.as_str()),
            _ => None,
        },
    });
    app.metrics.response(status);
}

/// Answers and logs a request too broken or too large to parse (400; a request line or header
/// section past [`crate::accept::MAX_HEAD_BYTES`]: 414 or 431), appending the response to
/// `out`; the connection closes after it. The response carries a fresh tracking cookie like any
/// other (nothing of the request can be trusted, its cookie included), and the log line has `-`
/// as User-Agent and target, so it keeps its 6 well-formed fields.
pub fn reject(app: &App, peer: SocketAddr, status: u16, out: &mut Vec<u8>) {
    let now = OffsetDateTime::now_utc();
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
    let tracking = TrackingId::generate(now);
    let head = Head { version: 1, omit_body: false, persistence: Persistence::Close, now };
    write_response(out, &Outcome::Refused(status), Some(&tracking), &app.settings, head);
    app.log.write(&Entry {
        time: now,
        client: app.settings.logged_ip(peer.ip()),
        tracking: Some(&tracking),
        user_agent: None,
        target: b"",
        status: status.as_u16(),
        location: None,
    });
    app.metrics.response(status.as_u16());
}

/// `Date`'s value (RFC 9110's IMF-fixdate, `Mon, 23 Nov 2026 12:13:00 GMT`), formatted once
/// per second and thread.
fn write_http_date(now: OffsetDateTime, out: &mut Vec<u8>) {
    thread_local! {
        static CACHED: std::cell::Cell<(i64, [u8; 29])> = const { std::cell::Cell::new((i64::MIN, [0; 29])) };
    }
    let second = now.unix_timestamp();
    let (cached_second, mut text) = CACHED.get();
    if cached_second != second {
        let format = time::macros::format_description!(
            "[weekday repr:short], [day] [month repr:short] [year] [hour]:[minute]:[second] GMT"
        );
        let formatted = now.to_offset(time::UtcOffset::UTC).format(format).unwrap_or_default();
        match formatted.as_bytes().try_into() {
            Ok(bytes) => text = bytes,
            // Years past 9999 or before 1000: not cached.
            Err(_) => return out.extend_from_slice(formatted.as_bytes()),
        }
        CACHED.set((second, text));
    }
    out.extend_from_slice(&text);
}

/// The page sent with a 400, 414 or 431.
fn refused_body(status: StatusCode) -> String {
    let (title, why) = match status {
        StatusCode::URI_TOO_LONG => ("URI Too Long", "The address asked for is longer than any short link."),
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE => {
            ("Request Header Fields Too Large", "The request's headers are larger than this server accepts.")
        }
        _ => ("Bad Request", "The request could not be understood."),
    };
    format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{title}</title></head>\
         <body><h1>{title}</h1><p>{why}</p></body></html>\n"
    )
}

/// A `Location` to send: borrowed from the cached link for a plain request, or built.
enum Location {
    Plain(Arc<Link>),
    Resolved(String),
}

impl Location {
    fn as_str(&self) -> &str {
        match self {
            Location::Plain(link) => link.plain_location().expect("only links with a plain location"),
            Location::Resolved(location) => location,
        }
    }
}

/// The links the proxy may follow at request time: valid IDs of live documents only.
struct LiveLinks<'a> {
    store: &'a LinkStore,
    now: OffsetDateTime,
}

/// A live link's target, borrowed from the shared document.
struct Target(Arc<Link>);

impl AsRef<str> for Target {
    fn as_ref(&self) -> &str {
        &self.0.url
    }
}

impl Ruleset for LiveLinks<'_> {
    type Value = Target;
    type Error = Unavailable;

    async fn get(&self, key: &str) -> Result<Option<Target>, Unavailable> {
        // A candidate that is not an ID never reaches CouchDB or the cache.
        let Ok(id) = LinkId::parse(key) else {
            return Ok(None);
        };
        let link = self.store.get(id).await?;
        Ok(link.filter(|l| l.live_target(self.now).is_some()).map(Target))
    }
}

/// Resolves a request path (the shortlink resolution draft, see [`crate::resolve`]) to a
/// redirect, a 404, or a 503.
async fn locate(store: &LinkStore, path: &str, query: Option<&str>, now: OffsetDateTime) -> Outcome {
    // The common case, `GET /{id}` alone: the answer was worked out when the link was read.
    if query.is_none() {
        if let Some(id) = path.strip_prefix('/').and_then(|p| LinkId::parse(p).ok()) {
            match store.get(id).await {
                Ok(Some(link)) if link.live_target(now).is_some() && link.plain_location().is_some() => {
                    return Outcome::Redirect { location: Location::Plain(link), id: Some(id) };
                }
                // An internal redirect, or a target to refuse: the full resolution decides.
                Ok(Some(link)) if link.live_target(now).is_some() => {}
                Ok(_) => return Outcome::NotFound,
                // Counted in the metrics; the feed's state change is what gets a warning.
                Err(_) => return Outcome::Unavailable,
            }
        }
    }
    let rules = LiveLinks { store, now };
    let query = query.map(|q| format!("?{q}")).unwrap_or_default();
    match resolve(path, &query, "", &rules).await {
        Ok(Resolved::Absolute { url, appended }) if !climbs_out(&appended) => match safe_location(&url) {
            Some(location) => {
                let id = path.trim_start_matches('/').split('/').next().and_then(|s| LinkId::parse(s).ok());
                Outcome::Redirect { location: Location::Resolved(location), id }
            }
            None => {
                tracing::debug!(path, "refusing to redirect to an unsafe target {url:?}");
                Outcome::NotFound
            }
        },
        Ok(_) => Outcome::NotFound,
        Err(ResolveError::Lookup(_)) => Outcome::Unavailable,
        Err(ResolveError::TooManyRedirects) => Outcome::NotFound,
        Err(ResolveError::BadValue(value)) => {
            tracing::debug!(path, "a link document holds an unusable url {value:?}");
            Outcome::NotFound
        }
    }
}

/// Whether the client asks for JSON (an agent retrieving a shortened out-of-band invitation).
/// Browsers' `Accept` never names `application/json`, so their requests stay on the redirect.
fn wants_json(headers: &Headers<'_>) -> bool {
    headers.get("accept").is_some_and(|v| v.windows(16).any(|w| w.eq_ignore_ascii_case(b"application/json")))
}

/// For `/{id}` of a live link whose document says `oob: true`: its invitation, as RFC 0434's
/// URL shortening has a url-shortener answer an `Accept: application/json` request. `None`
/// sends the request down the usual way (a redirect, or 404).
async fn invitation(store: &LinkStore, path: &str, now: OffsetDateTime) -> Option<Outcome> {
    let id = LinkId::parse(path.strip_prefix('/')?).ok()?;
    match store.get(id).await {
        Ok(Some(link)) if link.live_target(now).is_some() => {
            link.oob_invitation().map(|json| Outcome::Invitation(Bytes::from(json)))
        }
        Ok(_) => None,
        Err(_) => Some(Outcome::Unavailable),
    }
}

/// The first valid tracking ID among the request's cookies of that name, at `now`.
fn tracking_cookie(headers: &Headers<'_>, name: &str, now: OffsetDateTime) -> Option<TrackingId> {
    headers.all("cookie").find_map(|value| {
        let text = String::from_utf8_lossy(value);
        cookie::Cookie::split_parse(text.as_ref())
            .flatten()
            .find_map(|c| (c.name() == name).then(|| TrackingId::parse_received(c.value(), now)).flatten())
    })
}

/// What a response's head depends on besides its outcome.
#[derive(Debug, Clone, Copy)]
struct Head {
    /// The request's HTTP minor version, answered in kind (HTTP/1.0 gets `HTTP/1.0`).
    version: u8,
    /// HEAD: the same headers, `Content-Length` included, and no body.
    omit_body: bool,
    persistence: Persistence,
    now: OffsetDateTime,
}

/// Appends the response for `outcome` to `out`, written straight from the cached link and the
/// settings (no header map, nothing allocated for a redirect), and returns its status.
fn write_response(
    out: &mut Vec<u8>,
    outcome: &Outcome,
    tracking: Option<&TrackingId>,
    settings: &Settings,
    head: Head,
) -> u16 {
    let refused;
    let (status, body): (StatusCode, &[u8]) = match outcome {
        // Written below, straight from the location.
        Outcome::Redirect { .. } => (StatusCode::FOUND, b""),
        Outcome::Invitation(json) => (StatusCode::OK, json),
        Outcome::NotFound => (StatusCode::NOT_FOUND, NOT_FOUND_BODY.as_bytes()),
        Outcome::NotImplemented => (StatusCode::NOT_IMPLEMENTED, NOT_IMPLEMENTED_BODY.as_bytes()),
        Outcome::Unavailable => (StatusCode::SERVICE_UNAVAILABLE, UNAVAILABLE_BODY.as_bytes()),
        Outcome::Refused(status) => {
            refused = refused_body(*status);
            (*status, refused.as_bytes())
        }
    };
    out.extend_from_slice(if head.version == 0 { b"HTTP/1.0 " } else { b"HTTP/1.1 " });
    out.extend_from_slice(status.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(status.canonical_reason().unwrap_or("").as_bytes());
    out.extend_from_slice(match outcome {
        Outcome::Invitation(_) => b"\r\ncontent-type: application/json; charset=utf-8",
        _ => b"\r\ncontent-type: text/html; charset=utf-8",
    });
    // Every answer depends on the live database: a reprinted QR code must reach its new
    // target at once, and every scan must reach the proxy to be logged.
    out.extend_from_slice(b"\r\ncache-control: no-store\r\ncontent-length: ");
    let length = match outcome {
        Outcome::Redirect { location, .. } => redirect_body_len(location.as_str()),
        _ => body.len(),
    };
    crate::access_log::push_decimal(out, length as u32);
    if let Some(tracking) = tracking {
        out.extend_from_slice(b"\r\nset-cookie: ");
        out.extend_from_slice(settings.cookie_name.as_bytes());
        out.push(b'=');
        out.extend_from_slice(tracking.as_str().as_bytes());
        out.extend_from_slice(settings.cookie_attributes.as_bytes());
    }
    match outcome {
        // The `Location` is checked by `safe_location`, the public URL and IDs by their types'
        // `parse`: visible ASCII only, so they are written as they are.
        Outcome::Redirect { location, id } => {
            out.extend_from_slice(b"\r\nlocation: ");
            out.extend_from_slice(location.as_str().as_bytes());
            if let Some(id) = id {
                out.extend_from_slice(b"\r\nlink: <");
                settings.public_url.write_short_url(id, out);
                out.extend_from_slice(b">; rel=\"shortlink\"");
            }
        }
        Outcome::NotImplemented => out.extend_from_slice(b"\r\nallow: GET, HEAD"),
        Outcome::Unavailable => {
            out.extend_from_slice(b"\r\nretry-after: ");
            out.extend_from_slice(RETRY_AFTER_SECS.as_bytes());
        }
        Outcome::Invitation(_) | Outcome::NotFound | Outcome::Refused(_) => {}
    }
    out.extend_from_slice(b"\r\ndate: ");
    write_http_date(head.now, out);
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(head.persistence.header());
    out.extend_from_slice(b"\r\n");
    if !head.omit_body {
        match outcome {
            Outcome::Redirect { location, .. } => write_redirect_body(location.as_str(), out),
            _ => out.extend_from_slice(body),
        }
    }
    status.as_u16()
}

/// The redirect page's parts around the escaped target, which comes twice.
const REDIRECT_BODY: [&str; 3] = [
    "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Redirecting</title></head><body><p>Redirecting to <a href=\"",
    "\">",
    "</a></p></body></html>\n",
];

fn write_redirect_body(location: &str, out: &mut Vec<u8>) {
    out.extend_from_slice(REDIRECT_BODY[0].as_bytes());
    html_escape_into(location, out);
    out.extend_from_slice(REDIRECT_BODY[1].as_bytes());
    html_escape_into(location, out);
    out.extend_from_slice(REDIRECT_BODY[2].as_bytes());
}

fn redirect_body_len(location: &str) -> usize {
    REDIRECT_BODY.iter().map(|part| part.len()).sum::<usize>() + 2 * escaped_len(location)
}

/// What each character HTML escapes to, if it does.
fn html_escape(b: u8) -> Option<&'static str> {
    match b {
        b'&' => Some("&amp;"),
        b'<' => Some("&lt;"),
        b'>' => Some("&gt;"),
        b'"' => Some("&quot;"),
        b'\'' => Some("&#39;"),
        _ => None,
    }
}

fn html_escape_into(s: &str, out: &mut Vec<u8>) {
    let mut rest = s.as_bytes();
    while let Some(i) = rest.iter().position(|&b| html_escape(b).is_some()) {
        out.extend_from_slice(&rest[..i]);
        out.extend_from_slice(html_escape(rest[i]).unwrap_or_default().as_bytes());
        rest = &rest[i + 1..];
    }
    out.extend_from_slice(rest);
}

fn escaped_len(s: &str) -> usize {
    s.bytes().map(|b| html_escape(b).map_or(1, str::len)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tracking_in(cookie: &'static str) -> Option<TrackingId> {
        let now = time::macros::datetime!(2026-11-23 12:00:00 UTC);
        tracking_cookie(&Headers(&[httparse::Header { name: "Cookie", value: cookie.as_bytes() }]), "tid", now)
    }

    #[test]
    fn valid_tracking_cookie_is_found_among_others() {
        let found = tracking_in("a=1; tid=20261122101733a3f9c1e2b7d4e601; b=2");
        assert_eq!(found.unwrap().as_str(), "20261122101733a3f9c1e2b7d4e601");
        assert!(tracking_in("tid=20261122101733A3F9C1E2B7D4E6012F").is_none());
        assert!(tracking_in("xtid=20261122101733a3f9c1e2b7d4e601").is_none());
        // An impossible time first, a real one after: the real one is taken.
        let found = tracking_in("tid=99991399999999a3f9c1e2b7d4e601; tid=20261122101733a3f9c1e2b7d4e601");
        assert_eq!(found.unwrap().as_str(), "20261122101733a3f9c1e2b7d4e601");
        assert!(tracking_in("tid=20271122101733a3f9c1e2b7d4e601").is_none(), "a year ahead");
    }

    #[test]
    fn any_privacy_signal_saying_1_counts() {
        let settings = Settings::new(PublicUrl::parse("http://0x1f.ie").unwrap(), "tid", TrustedProxies::default());
        let settings = Settings { honor_privacy_signals: true, ..settings };
        let h = |pairs: &[(&'static str, &'static str)]| -> Vec<httparse::Header<'static>> {
            pairs.iter().map(|(name, value)| httparse::Header { name, value: value.as_bytes() }).collect()
        };
        assert!(settings.untracked(&Headers(&h(&[("Sec-GPC", "0"), ("Sec-GPC", "1")]))));
        assert!(settings.untracked(&Headers(&h(&[("DNT", "0"), ("dnt", " 1 ")]))));
        assert!(!settings.untracked(&Headers(&h(&[("Sec-GPC", "0"), ("DNT", "0")]))));
    }

    fn written(outcome: &Outcome, settings: &Settings, omit_body: bool) -> String {
        let tid = TrackingId::parse("20261122101733a3f9c1e2b7d4e601").unwrap();
        let now = OffsetDateTime::from_unix_timestamp(1_795_436_780).unwrap();
        let head = Head { version: 1, omit_body, persistence: Persistence::KeepAlive, now };
        let mut out = Vec::new();
        write_response(&mut out, outcome, Some(&tid), settings, head);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn set_cookie_has_every_attribute_and_secure_only_for_https() {
        let plain = Settings::new(PublicUrl::parse("http://0x1f.ie").unwrap(), "tid", TrustedProxies::default());
        assert!(written(&Outcome::NotFound, &plain, false).contains(
            "\r\nset-cookie: tid=20261122101733a3f9c1e2b7d4e601; Path=/; Max-Age=63072000; HttpOnly; SameSite=Lax\r\n"
        ));
        let secure = Settings::new(PublicUrl::parse("HTTPS://0x1f.ie/").unwrap(), "tid", TrustedProxies::default());
        assert!(written(&Outcome::NotFound, &secure, false).contains("; SameSite=Lax; Secure\r\n"));
    }

    #[test]
    fn a_redirect_is_written_whole_with_its_length_and_an_escaped_body() {
        let settings = Settings::new(PublicUrl::parse("http://0x1f.ie").unwrap(), "tid", TrustedProxies::default());
        let target = "https://t.example/?a=1&b='2'";
        let outcome = Outcome::Redirect {
            location: Location::Resolved(target.to_owned()),
            id: Some(LinkId::parse("H83if").unwrap()),
        };
        let response = written(&outcome, &settings, false);
        let (head, body) = response.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 302 Found\r\n"), "{head}");
        assert!(head.contains(&format!("\r\ncontent-length: {}\r\n", body.len())), "{head}");
        assert!(head.contains("\r\nlocation: https://t.example/?a=1&b='2'\r\n"), "{head}");
        assert!(head.contains("\r\nlink: <http://0x1f.ie/H83if>; rel=\"shortlink\"\r\n"), "{head}");
        assert!(head.contains("\r\ndate: Mon, 23 Nov 2026 12:26:20 GMT"), "{head}");
        assert!(body.contains("href=\"https://t.example/?a=1&amp;b=&#39;2&#39;\">"), "{body}");
        // HEAD: the same head, Content-Length included, and no body.
        assert_eq!(written(&outcome, &settings, true), format!("{head}\r\n\r\n"));
    }
}
