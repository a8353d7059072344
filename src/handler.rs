//! The redirect logic: one request's parts in, one response out, no socket needed.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::http::request::Parts;
use hyper::{Method, Response, StatusCode};
use time::OffsetDateTime;

use crate::access_log::{AccessLog, Entry};
use crate::client_ip::TrustedProxies;
use crate::domain::{Link, LinkId, PublicUrl, TrackingId};
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
    /// Global Privacy Control (`Sec-GPC: 1`) and Do Not Track (`DNT: 1`) mean the same here.
    fn untracked(&self, headers: &HeaderMap) -> bool {
        self.honor_privacy_signals
            && ["sec-gpc", "dnt"]
                .iter()
                .any(|name| headers.get(*name).is_some_and(|v| v.as_bytes().trim_ascii() == b"1"))
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

/// Answers one request. Never fails: every error is already a response here, and every
/// response is logged and carries the tracking cookie.
pub async fn handle(app: &App, request: &Parts, peer: SocketAddr) -> Response<Full<Bytes>> {
    let now = OffsetDateTime::now_utc();
    let target = match request.uri.scheme() {
        // Absolute-form targets are logged whole, as received.
        Some(_) => request.uri.to_string(),
        None => request.uri.path_and_query().map_or_else(|| request.uri.path().to_owned(), |pq| pq.as_str().to_owned()),
    };
    let header_bytes: usize = request.headers.iter().map(|(name, value)| name.as_str().len() + value.len()).sum();
    let outcome = if target.len() > MAX_TARGET_BYTES {
        Outcome::Refused(StatusCode::URI_TOO_LONG)
    } else if header_bytes > MAX_HEADER_BYTES {
        Outcome::Refused(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE)
    } else {
        match request.method {
            Method::GET | Method::HEAD => {
                let invited = if wants_json(&request.headers) {
                    invitation(&app.store, request.uri.path(), now).await
                } else {
                    None
                };
                match invited {
                    Some(outcome) => outcome,
                    None => locate(&app.store, request.uri.path(), request.uri.query(), now).await,
                }
            }
            _ => Outcome::NotImplemented,
        }
    };
    let tracking = (!app.settings.untracked(&request.headers)).then(|| {
        tracking_cookie(&request.headers, &app.settings.cookie_name).unwrap_or_else(|| TrackingId::generate(now))
    });
    let response = build_response(&outcome, tracking.as_ref(), &app.settings, request.method == Method::HEAD);

    let status = response.status().as_u16();
    app.log.write(&Entry {
        time: now,
        client: app.settings.logged_ip(app.settings.trusted_proxies.client_ip(peer.ip(), &request.headers)),
        tracking: tracking.as_ref(),
        user_agent: request.headers.get(header::USER_AGENT).map(HeaderValue::as_bytes),
        target: target.as_bytes(),
        status,
        location: match &outcome {
            Outcome::Redirect { location, .. } => Some(location.as_str()),
            _ => None,
        },
    });
    app.metrics.response(status);
    response
}

impl crate::accept::Service for App {
    async fn call(&self, request: Parts, peer: SocketAddr) -> Response<Full<Bytes>> {
        handle(self, &request, peer).await
    }

    fn rejected(&self, peer: SocketAddr, status: u16) -> Bytes {
        answer_rejected(self, peer, status)
    }
}

/// Answers and logs a request that hyper refused before it reached [`handle`] (unparsable: 400;
/// a request line or header section past hyper's own limits: 414 or 431). The response, in
/// place of hyper's bare one, carries a fresh tracking cookie like any other (nothing of the
/// request can be trusted, its cookie included), and the log line has `-` as User-Agent and
/// target, so it keeps its 6 well-formed fields. Returned as the bytes to send; the connection
/// closes after them.
pub fn answer_rejected(app: &App, peer: SocketAddr, status: u16) -> Bytes {
    let now = OffsetDateTime::now_utc();
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
    let tracking = TrackingId::generate(now);
    let response = build_response(&Outcome::Refused(status), Some(&tracking), &app.settings, false);
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
    let (parts, _) = response.into_parts();
    let body = refused_body(status);
    let mut raw = Vec::with_capacity(512 + body.len());
    raw.extend_from_slice(
        format!("HTTP/1.1 {} {}\r\n", status.as_str(), status.canonical_reason().unwrap_or("")).as_bytes(),
    );
    raw.extend_from_slice(format!("date: {}\r\n", http_date(now)).as_bytes());
    for (name, value) in &parts.headers {
        raw.extend_from_slice(name.as_str().as_bytes());
        raw.extend_from_slice(b": ");
        raw.extend_from_slice(value.as_bytes());
        raw.extend_from_slice(b"\r\n");
    }
    raw.extend_from_slice(b"connection: close\r\n\r\n");
    raw.extend_from_slice(body.as_bytes());
    Bytes::from(raw)
}

/// `Date`'s format (RFC 9110's IMF-fixdate): `Mon, 23 Nov 2026 12:13:00 GMT`.
fn http_date(now: OffsetDateTime) -> String {
    let format = time::macros::format_description!(
        "[weekday repr:short], [day] [month repr:short] [year] [hour]:[minute]:[second] GMT"
    );
    now.to_offset(time::UtcOffset::UTC).format(format).unwrap_or_default()
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
fn wants_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .is_some_and(|v| v.as_bytes().windows(16).any(|w| w.eq_ignore_ascii_case(b"application/json")))
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

/// The first valid tracking ID among the request's cookies of that name.
fn tracking_cookie(headers: &HeaderMap, name: &str) -> Option<TrackingId> {
    headers.get_all(header::COOKIE).iter().find_map(|value| {
        let text = String::from_utf8_lossy(value.as_bytes());
        cookie::Cookie::split_parse(text.as_ref())
            .flatten()
            .find_map(|c| (c.name() == name).then(|| TrackingId::parse(c.value())).flatten())
    })
}

fn build_response(
    outcome: &Outcome,
    tracking: Option<&TrackingId>,
    settings: &Settings,
    head: bool,
) -> Response<Full<Bytes>> {
    let (status, body) = match outcome {
        Outcome::Redirect { location, .. } => (StatusCode::FOUND, Bytes::from(redirect_body(location.as_str()))),
        Outcome::Invitation(json) => (StatusCode::OK, json.clone()),
        Outcome::NotFound => (StatusCode::NOT_FOUND, Bytes::from_static(NOT_FOUND_BODY.as_bytes())),
        Outcome::NotImplemented => (StatusCode::NOT_IMPLEMENTED, Bytes::from_static(NOT_IMPLEMENTED_BODY.as_bytes())),
        Outcome::Unavailable => (StatusCode::SERVICE_UNAVAILABLE, Bytes::from_static(UNAVAILABLE_BODY.as_bytes())),
        Outcome::Refused(status) => (*status, Bytes::from(refused_body(*status))),
    };
    let mut headers = HeaderMap::with_capacity(8);
    let content_type = match outcome {
        Outcome::Invitation(_) => "application/json; charset=utf-8",
        _ => "text/html; charset=utf-8",
    };
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    // Every answer depends on the live database: a reprinted QR code must reach its new
    // target at once, and every scan must reach the proxy to be logged.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(body.len()));
    if let Some(tracking) = tracking {
        let mut cookie = String::with_capacity(settings.cookie_name.len() + 32 + settings.cookie_attributes.len());
        cookie.push_str(&settings.cookie_name);
        cookie.push('=');
        cookie.push_str(tracking.as_str());
        cookie.push_str(&settings.cookie_attributes);
        headers.insert(header::SET_COOKIE, header_value(cookie));
    }
    match outcome {
        Outcome::Redirect { location, id } => {
            headers.insert(header::LOCATION, header_value(location.as_str().to_owned()));
            if let Some(id) = id {
                let short = settings.public_url.short_url(id);
                let mut link = String::with_capacity(short.len() + 20);
                link.push('<');
                link.push_str(&short);
                link.push_str(">; rel=\"shortlink\"");
                headers.insert(header::LINK, header_value(link));
            }
        }
        Outcome::NotImplemented => {
            headers.insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        }
        Outcome::Unavailable => {
            headers.insert(header::RETRY_AFTER, HeaderValue::from_static(RETRY_AFTER_SECS));
        }
        Outcome::Invitation(_) | Outcome::NotFound | Outcome::Refused(_) => {}
    }
    // HEAD: the same headers (Content-Length included), no body.
    let mut response = Response::new(Full::new(if head { Bytes::new() } else { body }));
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    response
}

/// A header value from text couchlink built: visible ASCII only (the `Location` is checked by
/// `safe_location`; the public URL, IDs and cookie values by their types' `parse`).
fn header_value(text: String) -> HeaderValue {
    HeaderValue::try_from(text).expect("couchlink's header values are visible ASCII")
}

fn redirect_body(location: &str) -> String {
    const HEAD: &str = "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Redirecting</title></head><body><p>Redirecting to <a href=\"";
    let mut body = String::with_capacity(HEAD.len() + 2 * location.len() + 32);
    body.push_str(HEAD);
    html_escape_into(location, &mut body);
    body.push_str("\">");
    html_escape_into(location, &mut body);
    body.push_str("</a></p></body></html>\n");
    body
}

fn html_escape_into(s: &str, out: &mut String) {
    let mut rest = s;
    while let Some(i) = rest.find(['&', '<', '>', '"', '\'']) {
        out.push_str(&rest[..i]);
        out.push_str(match rest.as_bytes()[i] {
            b'&' => "&amp;",
            b'<' => "&lt;",
            b'>' => "&gt;",
            b'"' => "&quot;",
            _ => "&#39;",
        });
        rest = &rest[i + 1..];
    }
    out.push_str(rest);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(cookie: &'static str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::COOKIE, HeaderValue::from_static(cookie));
        h
    }

    #[test]
    fn valid_tracking_cookie_is_found_among_others() {
        let h = headers("a=1; tid=20261122101733a3f9c1e2b7d4e601; b=2");
        assert_eq!(tracking_cookie(&h, "tid").unwrap().as_str(), "20261122101733a3f9c1e2b7d4e601");
        assert!(tracking_cookie(&headers("tid=20261122101733A3F9C1E2B7D4E6012F"), "tid").is_none());
        assert!(tracking_cookie(&headers("xtid=20261122101733a3f9c1e2b7d4e601"), "tid").is_none());
    }

    #[test]
    fn set_cookie_has_every_attribute_and_secure_only_for_https() {
        let tid = TrackingId::parse("20261122101733a3f9c1e2b7d4e601").unwrap();
        let plain = Settings::new(PublicUrl::parse("http://0x1f.ie").unwrap(), "tid", TrustedProxies::default());
        let r = build_response(&Outcome::NotFound, Some(&tid), &plain, false);
        assert_eq!(
            r.headers()[header::SET_COOKIE],
            "tid=20261122101733a3f9c1e2b7d4e601; Path=/; Max-Age=63072000; HttpOnly; SameSite=Lax"
        );
        let secure = Settings::new(PublicUrl::parse("HTTPS://0x1f.ie/").unwrap(), "tid", TrustedProxies::default());
        let r = build_response(&Outcome::NotFound, Some(&tid), &secure, false);
        assert!(r.headers()[header::SET_COOKIE].to_str().unwrap().ends_with("; SameSite=Lax; Secure"));
    }

    #[test]
    fn redirect_body_escapes_the_target() {
        assert!(redirect_body("https://t.example/?a=1&b=\"2\"")
            .contains("href=\"https://t.example/?a=1&amp;b=&quot;2&quot;\""));
    }
}
