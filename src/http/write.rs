//! The one writer of the redirect listener's responses: a [`Reply`] the handler decided, as
//! HTTP/1 bytes, straight from the cached link and the settings (no header map, nothing
//! allocated for a redirect).

use time::OffsetDateTime;

use crate::decimal::push_decimal;
use crate::domain::PublicUrl;
#[cfg(test)]
use crate::domain::{LinkId, TrackingId};
use crate::message::{Body, Reply, Status};

/// The start of a response after `HTTP/1.x `: its status line, and the headers every response
/// has up to the value of `Content-Length`, as one string per status (one copy).
fn head(status: Status, json: bool) -> &'static str {
    macro_rules! head {
        ($line:literal) => {
            head!($line, "text/html; charset=utf-8")
        };
        ($line:literal, $type:literal) => {
            // Every answer depends on the live database: a reprinted QR code must reach its new
            // target at once, and every scan must reach the proxy to be logged.
            concat!($line, "\r\ncontent-type: ", $type, "\r\ncache-control: no-store\r\ncontent-length: ")
        };
    }
    match status {
        Status::Ok if json => head!("200 OK", "application/json; charset=utf-8"),
        Status::Ok => head!("200 OK"),
        Status::Found => head!("302 Found"),
        Status::BadRequest => head!("400 Bad Request"),
        Status::Unauthorized(_) => head!("401 Unauthorized"),
        Status::NotFound => head!("404 Not Found"),
        Status::UriTooLong => head!("414 URI Too Long"),
        Status::TooManyRequests(_) => head!("429 Too Many Requests"),
        Status::HeadersTooLarge => head!("431 Request Header Fields Too Large"),
        Status::NotImplemented => head!("501 Not Implemented"),
        Status::Unavailable => head!("503 Service Unavailable"),
    }
}

/// The page sent with a status when the reply has no body of its own.
fn page(status: Status) -> &'static str {
    macro_rules! page {
        ($title:literal, $text:literal) => {
            concat!(
                "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>",
                $title,
                "</title></head><body><h1>",
                $title,
                "</h1><p>",
                $text,
                "</p></body></html>\n"
            )
        };
    }
    match status {
        Status::NotFound => page!("Not Found", "There is no active short link at this address."),
        Status::Unauthorized(_) => {
            page!("Password Required", "This short link asks for a password. Ask whoever gave you the link for it.")
        }
        Status::TooManyRequests(_) => {
            page!("Too Many Requests", "Too many wrong passwords came from your address. Please try again later.")
        }
        Status::NotImplemented => page!("Not Implemented", "Short links answer GET and HEAD only."),
        Status::Unavailable => {
            page!("Service Unavailable", "The link database cannot be reached. Please try again shortly.")
        }
        Status::UriTooLong => page!("URI Too Long", "The address asked for is longer than any short link."),
        Status::HeadersTooLarge => {
            page!("Request Header Fields Too Large", "The request's headers are larger than this server accepts.")
        }
        Status::BadRequest | Status::Ok | Status::Found => {
            page!("Bad Request", "The request could not be understood.")
        }
    }
}

/// Seconds a client is asked to wait after a 503.
const RETRY_AFTER_SECS: &str = "5";

/// What shapes every response of one listener: the cookie's name and attributes, the public
/// URL of short links, each written as the text around the values of a response (worked out
/// once, copied per response).
#[derive(Debug, Clone)]
pub struct Shape {
    /// The short links' base URL.
    pub public_url: PublicUrl,
    /// The tracking cookie's name.
    pub cookie_name: String,
    /// `\r\nset-cookie: tid=`.
    cookie_start: String,
    /// `; Path=/; Max-Age=...` and the rest.
    cookie_attributes: String,
    /// `\r\nlink: <https://0x1f.ie/`, before a short link's ID.
    link_start: String,
}

impl Shape {
    /// The shape for `public_url` (its scheme decides the cookie's `Secure`).
    pub fn new(public_url: PublicUrl, cookie_name: &str) -> Shape {
        let secure = if public_url.is_https() { "; Secure" } else { "" };
        Shape {
            cookie_start: format!("\r\nset-cookie: {cookie_name}="),
            cookie_attributes: format!("; Path=/; Max-Age=63072000; HttpOnly; SameSite=Lax{secure}"),
            link_start: format!("\r\nlink: <{public_url}/"),
            public_url,
            cookie_name: cookie_name.to_owned(),
        }
    }
}

/// How the request that a reply answers frames it.
#[derive(Debug, Clone, Copy)]
pub struct Framing {
    /// The request's HTTP minor version, answered in kind (HTTP/1.0 gets `HTTP/1.0`).
    pub version: u8,
    /// HEAD: the same headers, `Content-Length` included, and no body.
    pub omit_body: bool,
    /// The `Connection` header.
    pub persistence: Persistence,
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

/// Appends `reply` to `out`.
pub fn write<L: AsRef<str>>(reply: &Reply<L>, shape: &Shape, framing: Framing, out: &mut Vec<u8>) {
    let location = reply.location.as_ref().map(AsRef::as_ref);
    // How long the location is once HTML-escaped (for the redirect page), worked out once.
    let escaped = location.map_or(0, escaped_len);
    out.extend_from_slice(if framing.version == 0 { b"HTTP/1.0 " } else { b"HTTP/1.1 " });
    out.extend_from_slice(head(reply.status, matches!(reply.body, Body::Json(_))).as_bytes());
    let length = match &reply.body {
        Body::Page => page(reply.status).len(),
        Body::Json(json) => json.len(),
        Body::Redirect => REDIRECT_BODY.iter().map(|part| part.len()).sum::<usize>() + 2 * escaped,
    };
    push_decimal(out, length as u32);
    if let Some(tracking) = &reply.cookie {
        out.extend_from_slice(shape.cookie_start.as_bytes());
        out.extend_from_slice(tracking.as_bytes());
        out.extend_from_slice(shape.cookie_attributes.as_bytes());
    }
    // The `Location` is a canonical target or checked by `safe_location`, the public URL and
    // IDs by their types' `parse`: visible ASCII only, so they are written as they are.
    if let Some(location) = location {
        out.extend_from_slice(b"\r\nlocation: ");
        out.extend_from_slice(location.as_bytes());
    }
    if let Some(vary) = reply.vary.header() {
        out.extend_from_slice(vary);
    }
    if let Some(id) = &reply.shortlink {
        out.extend_from_slice(shape.link_start.as_bytes());
        out.extend_from_slice(id.as_bytes());
        out.extend_from_slice(b">; rel=\"shortlink\"");
    }
    match reply.status {
        Status::NotImplemented => out.extend_from_slice(b"\r\nallow: GET, HEAD"),
        Status::Unavailable => {
            out.extend_from_slice(b"\r\nretry-after: ");
            out.extend_from_slice(RETRY_AFTER_SECS.as_bytes());
        }
        // RFC 7617: the realm names the link (never its target); the password is read as UTF-8.
        Status::Unauthorized(id) => {
            out.extend_from_slice(b"\r\nwww-authenticate: Basic realm=\"");
            out.extend_from_slice(id.as_bytes());
            out.extend_from_slice(b"\", charset=\"UTF-8\"");
        }
        Status::TooManyRequests(seconds) => {
            out.extend_from_slice(b"\r\nretry-after: ");
            push_decimal(out, seconds);
        }
        _ => {}
    }
    write_http_date(reply.now, out);
    out.extend_from_slice(framing.persistence.header());
    out.extend_from_slice(b"\r\n");
    if !framing.omit_body {
        match &reply.body {
            Body::Page => out.extend_from_slice(page(reply.status).as_bytes()),
            Body::Json(json) => out.extend_from_slice(json),
            Body::Redirect => write_redirect_body(location.unwrap_or_default(), escaped, out),
        }
    }
}

/// The `Date` header line, with the line ends around it (RFC 9110's IMF-fixdate,
/// `\r\ndate: Mon, 23 Nov 2026 12:13:00 GMT\r\n`), formatted once per second and thread.
fn write_http_date(now: OffsetDateTime, out: &mut Vec<u8>) {
    const LINE: usize = 8 + 29 + 2;
    thread_local! {
        static CACHED: std::cell::Cell<(i64, [u8; LINE])> = const { std::cell::Cell::new((i64::MIN, [0; LINE])) };
    }
    let second = now.unix_timestamp();
    let (cached_second, mut line) = CACHED.get();
    if cached_second != second {
        let format = time::macros::format_description!(
            "\r\ndate: [weekday repr:short], [day] [month repr:short] [year] [hour]:[minute]:[second] GMT\r\n"
        );
        let formatted = now.to_offset(time::UtcOffset::UTC).format(format).unwrap_or_default();
        match formatted.as_bytes().try_into() {
            Ok(bytes) => line = bytes,
            // Years past 9999 or before 1000: not cached.
            Err(_) => return out.extend_from_slice(formatted.as_bytes()),
        }
        CACHED.set((second, line));
    }
    out.extend_from_slice(&line);
}

/// The redirect page's parts around the escaped target, which comes twice.
const REDIRECT_BODY: [&str; 3] = [
    "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Redirecting</title></head><body><p>Redirecting to <a href=\"",
    "\">",
    "</a></p></body></html>\n",
];

/// The redirect page for `location`, whose escaped length is `escaped`: when that is its own
/// length (most targets), nothing needs escaping and it is copied as it is.
fn write_redirect_body(location: &str, escaped: usize, out: &mut Vec<u8>) {
    out.extend_from_slice(REDIRECT_BODY[0].as_bytes());
    let start = out.len();
    if escaped == location.len() {
        out.extend_from_slice(location.as_bytes());
    } else {
        html_escape_into(location, out);
    }
    let end = out.len();
    out.extend_from_slice(REDIRECT_BODY[1].as_bytes());
    // The second time, a copy of the first.
    out.extend_from_within(start..end);
    out.extend_from_slice(REDIRECT_BODY[2].as_bytes());
}

/// What each character HTML escapes to, if it does.
const fn html_escape(b: u8) -> Option<&'static str> {
    match b {
        b'&' => Some("&amp;"),
        b'<' => Some("&lt;"),
        b'>' => Some("&gt;"),
        b'"' => Some("&quot;"),
        b'\'' => Some("&#39;"),
        _ => None,
    }
}

/// How many bytes each byte grows by when escaped, as a table (one load per byte).
const ESCAPE_GROWTH: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        table[b] = match html_escape(b as u8) {
            Some(escaped) => escaped.len() as u8 - 1,
            None => 0,
        };
        b += 1;
    }
    table
};

fn html_escape_into(s: &str, out: &mut Vec<u8>) {
    let mut rest = s.as_bytes();
    while let Some(i) = rest.iter().position(|&b| ESCAPE_GROWTH[usize::from(b)] != 0) {
        out.extend_from_slice(&rest[..i]);
        out.extend_from_slice(html_escape(rest[i]).unwrap_or_default().as_bytes());
        rest = &rest[i + 1..];
    }
    out.extend_from_slice(rest);
}

/// `s`'s length once escaped: each special byte's growth counted by comparisons alone (no
/// table, no branch), in byte lanes over chunks short enough not to overflow one (32 bytes grow
/// by at most 160), which compiles to vector instructions.
fn escaped_len(s: &str) -> usize {
    let growth = |sum: u8, &b: &u8| {
        sum.wrapping_add(
            4 * u8::from(b == b'&')
                + 3 * u8::from(b == b'<')
                + 3 * u8::from(b == b'>')
                + 5 * u8::from(b == b'"')
                + 4 * u8::from(b == b'\''),
        )
    };
    s.len() + s.as_bytes().chunks(32).map(|chunk| usize::from(chunk.iter().fold(0u8, growth))).sum::<usize>()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(reply: &Reply<&str>, shape: &Shape, omit_body: bool) -> String {
        let framing = Framing { version: 1, omit_body, persistence: Persistence::KeepAlive };
        let mut out = Vec::new();
        write(reply, shape, framing, &mut out);
        String::from_utf8(out).unwrap()
    }

    fn reply(status: Status, body: Body) -> Reply<&'static str> {
        Reply {
            status,
            body,
            location: None,
            shortlink: None,
            vary: crate::message::Vary::Nothing,
            cookie: TrackingId::parse("20261122101733a3f9c1e2b7d4e601"),
            now: OffsetDateTime::from_unix_timestamp(1_795_436_780).unwrap(),
            site: 0,
        }
    }

    #[test]
    fn set_cookie_has_every_attribute_and_secure_only_for_https() {
        let plain = Shape::new(PublicUrl::parse("http://0x1f.ie").unwrap(), "tid");
        assert!(written(&reply(Status::NotFound, Body::Page), &plain, false).contains(
            "\r\nset-cookie: tid=20261122101733a3f9c1e2b7d4e601; Path=/; Max-Age=63072000; HttpOnly; SameSite=Lax\r\n"
        ));
        let secure = Shape::new(PublicUrl::parse("HTTPS://0x1f.ie/").unwrap(), "tid");
        assert!(written(&reply(Status::NotFound, Body::Page), &secure, false).contains("; SameSite=Lax; Secure\r\n"));
    }

    #[test]
    fn a_redirect_is_written_whole_with_its_length_and_an_escaped_body() {
        let shape = Shape::new(PublicUrl::parse("http://0x1f.ie").unwrap(), "tid");
        let redirect = Reply {
            location: Some("https://t.example/?a=1&b='2'"),
            shortlink: Some(LinkId::parse("H83if").unwrap()),
            vary: crate::message::Vary::Visitor,
            ..reply(Status::Found, Body::Redirect)
        };
        let response = written(&redirect, &shape, false);
        let (head, body) = response.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 302 Found\r\n"), "{head}");
        assert!(head.contains(&format!("\r\ncontent-length: {}\r\n", body.len())), "{head}");
        assert!(head.contains("\r\nlocation: https://t.example/?a=1&b='2'\r\n"), "{head}");
        assert!(head.contains("\r\nlink: <http://0x1f.ie/H83if>; rel=\"shortlink\"\r\n"), "{head}");
        assert!(head.contains("\r\nvary: User-Agent, Accept-Language\r\n"), "{head}");
        assert!(head.contains("\r\ndate: Mon, 23 Nov 2026 12:26:20 GMT"), "{head}");
        assert!(body.contains("href=\"https://t.example/?a=1&amp;b=&#39;2&#39;\">"), "{body}");
        // HEAD: the same head, Content-Length included, and no body.
        assert_eq!(written(&redirect, &shape, true), format!("{head}\r\n\r\n"));
    }

    #[test]
    fn each_status_has_its_line_page_and_headers() {
        let shape = Shape::new(PublicUrl::parse("http://0x1f.ie").unwrap(), "tid");
        let unavailable = written(&reply(Status::Unavailable, Body::Page), &shape, false);
        assert!(
            unavailable.starts_with("HTTP/1.1 503 Service Unavailable\r\n")
                && unavailable.contains("\r\nretry-after: 5\r\n")
        );
        let not_implemented = written(&reply(Status::NotImplemented, Body::Page), &shape, false);
        assert!(not_implemented.contains("\r\nallow: GET, HEAD\r\n"));
        let id = LinkId::parse("H83if").unwrap();
        let unauthorized = written(&reply(Status::Unauthorized(id), Body::Page), &shape, false);
        assert!(unauthorized.starts_with("HTTP/1.1 401 Unauthorized\r\n"), "{unauthorized}");
        assert!(unauthorized.contains("\r\nwww-authenticate: Basic realm=\"H83if\", charset=\"UTF-8\"\r\n"));
        let waiting = written(&reply(Status::TooManyRequests(412), Body::Page), &shape, false);
        assert!(
            waiting.starts_with("HTTP/1.1 429 Too Many Requests\r\n") && waiting.contains("\r\nretry-after: 412\r\n")
        );
        for text in [unauthorized, waiting] {
            let (head, body) = text.split_once("\r\n\r\n").unwrap();
            assert!(head.contains(&format!("content-length: {}\r\n", body.len())), "{head}");
        }
        for status in [Status::BadRequest, Status::UriTooLong, Status::HeadersTooLarge, Status::NotFound] {
            let text = written(&reply(status, Body::Page), &shape, false);
            let (head, body) = text.split_once("\r\n\r\n").unwrap();
            assert!(head.contains(&format!("content-length: {}\r\n", body.len())), "{head}");
            let reason = &super::head(status, false).split("\r\n").next().unwrap()[4..];
            assert!(body.contains(reason), "{status:?}: {body}");
        }
    }

    proptest::proptest! {
        /// The redirect page is the same whether its target needed escaping or not: each
        /// character escaped as a plain per-character model escapes it, its length as counted.
        #[test]
        fn the_redirect_page_escapes_as_the_plain_model_does(location in "[a-z&<>\"'/?=:.]{0,40}|.{0,40}") {
            let model: String = location
                .chars()
                .map(|c| u8::try_from(c).ok().and_then(html_escape).map_or(c.to_string(), str::to_owned))
                .collect();
            let mut out = Vec::new();
            write_redirect_body(&location, escaped_len(&location), &mut out);
            let expected = format!("{}{model}{}{model}{}", REDIRECT_BODY[0], REDIRECT_BODY[1], REDIRECT_BODY[2]);
            proptest::prop_assert_eq!(String::from_utf8(out).unwrap(), expected);
            proptest::prop_assert_eq!(escaped_len(&location), model.len());
        }
    }
}
