//! A request's referrer, as the live counts group it: the host of its `Referer` field. One rule,
//! for every place that reads a referrer (the access log does not hold one, so the report has
//! none).

use std::borrow::Cow;

/// No `Referer` field (a scanned tag, a typed address, or a page that sends none).
pub const NO_REFERRER: &str = "(none)";

/// A `Referer` that is no absolute URL with a host.
pub const UNREADABLE: &str = "(other)";

/// Longest host kept (DNS allows 253 characters).
const MAX_HOST: usize = 253;

/// The host of `referer` (RFC 9110 section 10.1.3: an absolute URI or a partial one), lower
/// case, without its user, port or trailing dot: `https://News.Example.com:8443/a?b` is
/// `news.example.com`, `android-app://com.google.android.gm/` is `com.google.android.gm`. None
/// is [`NO_REFERRER`]; a value without a scheme and a host (a partial URI, bytes that are no
/// host) is [`UNREADABLE`].
pub fn host(referer: Option<&[u8]>) -> Cow<'_, str> {
    let Some(referer) = referer.filter(|r| !r.is_empty()) else { return Cow::Borrowed(NO_REFERRER) };
    match authority_host(referer) {
        Some(host) if host.bytes().any(|b| b.is_ascii_uppercase()) => Cow::Owned(host.to_ascii_lowercase()),
        Some(host) => Cow::Borrowed(host),
        None => Cow::Borrowed(UNREADABLE),
    }
}

fn authority_host(uri: &[u8]) -> Option<&str> {
    let colon = memchr::memchr(b':', uri)?;
    let scheme = &uri[..colon];
    let scheme_ok = scheme.first().is_some_and(u8::is_ascii_alphabetic)
        && scheme.iter().all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'));
    let rest = uri[colon + 1..].strip_prefix(b"//").filter(|_| scheme_ok)?;
    let end = rest.iter().position(|&b| matches!(b, b'/' | b'?' | b'#')).unwrap_or(rest.len());
    let authority = &rest[..end];
    let authority = match memchr::memrchr(b'@', authority) {
        Some(at) => &authority[at + 1..],
        None => authority,
    };
    let host = if authority.first() == Some(&b'[') {
        &authority[..=memchr::memchr(b']', authority)?]
    } else {
        let host = match memchr::memrchr(b':', authority) {
            Some(at) if authority[at + 1..].iter().all(u8::is_ascii_digit) => &authority[..at],
            Some(_) => return None,
            None => authority,
        };
        host.strip_suffix(b".").unwrap_or(host)
    };
    let allowed = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b'[' | b']' | b':');
    if host.is_empty() || host.len() > MAX_HOST || !host.iter().all(allowed) {
        return None;
    }
    std::str::from_utf8(host).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_referrer_is_its_host() {
        let cases: [(&str, &str); 14] = [
            ("https://news.example.com/a/b?c=d#e", "news.example.com"),
            ("https://News.Example.COM:8443/", "news.example.com"),
            ("http://user:pw@example.org", "example.org"),
            ("https://example.org./x", "example.org"),
            ("android-app://com.google.android.gm/", "com.google.android.gm"),
            ("http://[2001:db8::1]:8080/x", "[2001:db8::1]"),
            ("http://203.0.113.7/", "203.0.113.7"),
            ("https://xn--bcher-kva.example/", "xn--bcher-kva.example"),
            ("/relative/path", UNREADABLE),
            ("about:blank", UNREADABLE),
            ("https://", UNREADABLE),
            ("https://exa mple.com/", UNREADABLE),
            ("https://example.com:http/", UNREADABLE),
            ("1https://example.com/", UNREADABLE),
        ];
        for (referer, want) in cases {
            assert_eq!(host(Some(referer.as_bytes())), want, "{referer}");
        }
        assert_eq!(host(None), NO_REFERRER);
        assert_eq!(host(Some(b"")), NO_REFERRER);
        assert_eq!(host(Some(b"https://\xff.example/")), UNREADABLE);
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_give_a_short_answer(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..400)) {
            proptest::prop_assert!(host(Some(&bytes)).len() <= MAX_HOST);
        }
    }
}
