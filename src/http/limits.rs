//! Every limit of the redirect listener's HTTP/1, and the one place that decides which request
//! heads are refused and with what: 400 for what cannot be understood (RFC 9112), 414 for a
//! target too long, 431 for headers too large.

#[cfg(test)]
use crate::message::Headers;
use crate::message::{Field, Request, Status};

/// The most bytes read while a request head is incomplete: past it, 414 while the request line
/// is not complete, else 431.
pub const MAX_HEAD_BYTES: usize = 96 * 1024;
/// The most header fields in one request (hyper's default); more gets 431.
pub const MAX_HEADERS: usize = 100;
/// The longest request target answered; longer gets 414 (nginx's default buffer is 8 KiB too).
pub const MAX_TARGET_BYTES: usize = 8 * 1024;
/// The most header bytes (names and values) answered; more gets 431.
pub const MAX_HEADER_BYTES: usize = 16 * 1024;

/// A request head couchlink will not answer as asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// 400: not HTTP/1 couchlink understands.
    BadRequest,
    /// 414: the target is longer than [`MAX_TARGET_BYTES`], or the request line did not end
    /// within [`MAX_HEAD_BYTES`].
    UriTooLong,
    /// 431: more than [`MAX_HEADERS`] fields, [`MAX_HEADER_BYTES`] in names and values, or a
    /// head past [`MAX_HEAD_BYTES`].
    HeadersTooLarge,
}

impl Refusal {
    /// The status answered.
    pub fn status(self) -> Status {
        match self {
            Refusal::BadRequest => Status::BadRequest,
            Refusal::UriTooLong => Status::UriTooLong,
            Refusal::HeadersTooLarge => Status::HeadersTooLarge,
        }
    }

    /// For a head that grew past [`MAX_HEAD_BYTES`] without ending: 414 while its request
    /// line has not ended either, else 431.
    pub fn for_unfinished_head(head: &[u8]) -> Refusal {
        if memchr::memchr(b'\n', head).is_none() {
            Refusal::UriTooLong
        } else {
            Refusal::HeadersTooLarge
        }
    }
}

/// Checks a parsed request against the limits and RFC 9112's rules on `Host`, absolute-form
/// targets and the asterisk form.
pub fn check(request: &Request<'_>) -> Result<(), Refusal> {
    if request.target.len() > MAX_TARGET_BYTES {
        return Err(Refusal::UriTooLong);
    }
    if request.headers.total_bytes() > MAX_HEADER_BYTES {
        return Err(Refusal::HeadersTooLarge);
    }
    // The asterisk form is for OPTIONS only (RFC 9112 §3.2.4).
    if request.target == "*" && request.method != "OPTIONS" {
        return Err(Refusal::BadRequest);
    }
    // An absolute-form target names no user (RFC 9110 §4.2.4: "http" URIs with userinfo are
    // invalid in a request). The origin form, almost every request, has no authority to look
    // for.
    if !request.target.starts_with('/') && absolute_authority(request.target).is_some_and(|a| a.contains('@')) {
        return Err(Refusal::BadRequest);
    }
    // HTTP/1.1: exactly one Host, and a valid one (RFC 9112 §3.2: "MUST respond with a 400").
    // HTTP/1.0 may leave it out, but one it sends must still be a single valid one.
    let mut hosts = request.headers.fields(Field::Host);
    match (hosts.next(), hosts.next()) {
        (None, _) if request.version == 0 => {}
        (Some(host), None) if is_valid_host(host) => {}
        _ => return Err(Refusal::BadRequest),
    }
    Ok(())
}

/// The authority of an absolute-form target (`http://0x1f.ie/H83if` → `0x1f.ie`).
fn absolute_authority(target: &str) -> Option<&str> {
    let (_, rest) = target.split_once("://")?;
    Some(&rest[..rest.find(['/', '?']).unwrap_or(rest.len())])
}

/// `uri-host [ ":" port ]` (RFC 9110 §7.2), the empty value included (allowed for URIs without
/// an authority).
fn is_valid_host(value: &[u8]) -> bool {
    let value = value.trim_ascii();
    let port = if value.first() == Some(&b'[') {
        // IP-literal: `[` hex digits, `:` and `.` (an embedded IPv4) `]`.
        let Some(end) = value.iter().position(|&b| b == b']') else { return false };
        let literal = &value[1..end];
        if literal.is_empty() || !literal.iter().all(|b| b.is_ascii_hexdigit() || b":.".contains(b)) {
            return false;
        }
        &value[end + 1..]
    } else {
        let end = value.iter().position(|&b| b == b':').unwrap_or(value.len());
        let host = &value[..end];
        // reg-name or IPv4address: unreserved, pct-encoded and sub-delims characters.
        if !host.iter().all(|&b| REG_NAME_BYTES[usize::from(b)]) {
            return false;
        }
        &value[end..]
    };
    match port.strip_prefix(b":") {
        None => port.is_empty(),
        Some(digits) => digits.iter().all(u8::is_ascii_digit),
    }
}

/// The bytes of a reg-name or IPv4address: unreserved, pct-encoded and sub-delims characters.
const REG_NAME_BYTES: [bool; 256] = byte_table!(|b| b.is_ascii_alphanumeric()
    || matches!(
        b,
        b'-' | b'.' | b'_' | b'~' | b'%' | b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*' | b'+' | b',' | b';' | b'='
    ));

#[cfg(test)]
mod tests {
    use super::*;

    fn request<'a>(method: &'a str, target: &'a str, version: u8, headers: &'a [httparse::Header<'a>]) -> Request<'a> {
        Request { method, target, path: target, query: None, headers: Headers::new(headers), has_body: false, version }
    }

    fn host(value: &'static str) -> httparse::Header<'static> {
        httparse::Header { name: "Host", value: value.as_bytes() }
    }

    #[test]
    fn reg_name_bytes_are_the_rfc_3986_set() {
        for b in 0..=255u8 {
            assert_eq!(REG_NAME_BYTES[usize::from(b)], b.is_ascii_alphanumeric() || b"-._~%!$&'()*+,;=".contains(&b));
        }
    }

    #[test]
    fn http_1_1_needs_exactly_one_valid_host() {
        let one = [host("0x1f.ie")];
        assert_eq!(check(&request("GET", "/H83if", 1, &one)), Ok(()));
        assert_eq!(check(&request("GET", "/H83if", 1, &[])), Err(Refusal::BadRequest));
        assert_eq!(check(&request("GET", "/H83if", 1, &[host("a"), host("b")])), Err(Refusal::BadRequest));
        for bad in ["a b", "a/b", "a@b", "[::1", "a:8x", "\"x\""] {
            assert_eq!(check(&request("GET", "/", 1, &[host(bad)])), Err(Refusal::BadRequest), "{bad}");
        }
        for good in ["0x1f.ie:8080", "[2001:db8::1]:443", "127.0.0.1", "", "xn--bcher-kva.example"] {
            assert_eq!(check(&request("GET", "/", 1, &[host(good)])), Ok(()), "{good}");
        }
        // HTTP/1.0 may leave Host out.
        assert_eq!(check(&request("GET", "/", 0, &[])), Ok(()));
    }

    #[test]
    fn asterisk_form_only_for_options_and_no_userinfo_in_absolute_form() {
        let h = [host("0x1f.ie")];
        assert_eq!(check(&request("GET", "*", 1, &h)), Err(Refusal::BadRequest));
        assert_eq!(check(&request("OPTIONS", "*", 1, &h)), Ok(()));
        assert_eq!(check(&request("GET", "http://u:p@0x1f.ie/H83if", 1, &h)), Err(Refusal::BadRequest));
        assert_eq!(check(&request("GET", "http://0x1f.ie/H83if?a@b", 1, &h)), Ok(()));
    }

    #[test]
    fn long_targets_and_large_headers_have_their_own_statuses() {
        let h = [host("0x1f.ie")];
        let long = format!("/{}", "a".repeat(MAX_TARGET_BYTES));
        assert_eq!(check(&request("GET", &long, 1, &h)), Err(Refusal::UriTooLong));
        let big = "b".repeat(MAX_HEADER_BYTES);
        let large = [host("0x1f.ie"), httparse::Header { name: "X", value: big.as_bytes() }];
        assert_eq!(check(&request("GET", "/", 1, &large)), Err(Refusal::HeadersTooLarge));
        assert_eq!(Refusal::for_unfinished_head(b"GET /aaaa"), Refusal::UriTooLong);
        assert_eq!(Refusal::for_unfinished_head(b"GET / HTTP/1.1\r\nX: yyyy"), Refusal::HeadersTooLarge);
    }
}
