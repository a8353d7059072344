//! The one writer of the redirect listener's responses: a [`Reply`] the handler decided, as
//! HTTP/1 bytes, straight from the cached link and the settings (no header map, nothing
//! allocated for a redirect).

use time::OffsetDateTime;

use super::conn::Persistence;
use crate::domain::PublicUrl;
#[cfg(test)]
use crate::domain::{LinkId, TrackingId};
use crate::message::{Body, Reply, Status};

/// The status line after `HTTP/1.x `.
fn status_line(status: Status) -> &'static str {
    match status {
        Status::Ok => "200 OK",
        Status::Found => "302 Found",
        Status::BadRequest => "400 Bad Request",
        Status::NotFound => "404 Not Found",
        Status::UriTooLong => "414 URI Too Long",
        Status::HeadersTooLarge => "431 Request Header Fields Too Large",
        Status::NotImplemented => "501 Not Implemented",
        Status::Unavailable => "503 Service Unavailable",
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
/// URL of short links.
#[derive(Debug, Clone)]
pub struct Shape {
    /// The short links' base URL.
    pub public_url: PublicUrl,
    /// The tracking cookie's name.
    pub cookie_name: String,
    /// `; Path=/; Max-Age=...` and the rest, computed once.
    cookie_attributes: String,
}

impl Shape {
    /// The shape for `public_url` (its scheme decides the cookie's `Secure`).
    pub fn new(public_url: PublicUrl, cookie_name: &str) -> Shape {
        let secure = if public_url.is_https() { "; Secure" } else { "" };
        Shape {
            cookie_attributes: format!("; Path=/; Max-Age=63072000; HttpOnly; SameSite=Lax{secure}"),
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

/// Appends `reply` to `out`.
pub fn write<L: AsRef<str>>(reply: &Reply<L>, shape: &Shape, framing: Framing, out: &mut Vec<u8>) {
    let location = reply.location.as_ref().map(AsRef::as_ref);
    out.extend_from_slice(if framing.version == 0 { b"HTTP/1.0 " } else { b"HTTP/1.1 " });
    out.extend_from_slice(status_line(reply.status).as_bytes());
    out.extend_from_slice(match reply.body {
        Body::Json(_) => b"\r\ncontent-type: application/json; charset=utf-8",
        _ => b"\r\ncontent-type: text/html; charset=utf-8",
    });
    // Every answer depends on the live database: a reprinted QR code must reach its new
    // target at once, and every scan must reach the proxy to be logged.
    out.extend_from_slice(b"\r\ncache-control: no-store\r\ncontent-length: ");
    let length = match &reply.body {
        Body::Page => page(reply.status).len(),
        Body::Json(json) => json.len(),
        Body::Redirect => redirect_body_len(location.unwrap_or_default()),
    };
    crate::access_log::push_decimal(out, length as u32);
    if let Some(tracking) = &reply.cookie {
        out.extend_from_slice(b"\r\nset-cookie: ");
        out.extend_from_slice(shape.cookie_name.as_bytes());
        out.push(b'=');
        out.extend_from_slice(tracking.as_str().as_bytes());
        out.extend_from_slice(shape.cookie_attributes.as_bytes());
    }
    // The `Location` is a canonical target or checked by `safe_location`, the public URL and
    // IDs by their types' `parse`: visible ASCII only, so they are written as they are.
    if let Some(location) = location {
        out.extend_from_slice(b"\r\nlocation: ");
        out.extend_from_slice(location.as_bytes());
    }
    if reply.vary {
        out.extend_from_slice(b"\r\nvary: User-Agent, Accept-Language");
    }
    if let Some(id) = &reply.shortlink {
        out.extend_from_slice(b"\r\nlink: <");
        shape.public_url.write_short_url(id, out);
        out.extend_from_slice(b">; rel=\"shortlink\"");
    }
    match reply.status {
        Status::NotImplemented => out.extend_from_slice(b"\r\nallow: GET, HEAD"),
        Status::Unavailable => {
            out.extend_from_slice(b"\r\nretry-after: ");
            out.extend_from_slice(RETRY_AFTER_SECS.as_bytes());
        }
        _ => {}
    }
    out.extend_from_slice(b"\r\ndate: ");
    write_http_date(reply.now, out);
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(framing.persistence.header());
    out.extend_from_slice(b"\r\n");
    if !framing.omit_body {
        match &reply.body {
            Body::Page => out.extend_from_slice(page(reply.status).as_bytes()),
            Body::Json(json) => out.extend_from_slice(json),
            Body::Redirect => write_redirect_body(location.unwrap_or_default(), out),
        }
    }
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
            vary: false,
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
            vary: true,
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
        for status in [Status::BadRequest, Status::UriTooLong, Status::HeadersTooLarge, Status::NotFound] {
            let text = written(&reply(status, Body::Page), &shape, false);
            let (head, body) = text.split_once("\r\n\r\n").unwrap();
            assert!(head.contains(&format!("content-length: {}\r\n", body.len())), "{head}");
            assert!(body.contains(&status_line(status)[4..]), "{status:?}: {body}");
        }
    }
}
