//! The form a stored `url` must have to be served (docs/reference.md, "Link documents"): exactly the
//! `Location` the proxy sends, so that nothing a URL parser would clean up (a tab dropped from a
//! host, `https:evil.com` read as `https://evil.com/`, a zero-width space vanishing under IDNA)
//! can make the target differ from what the document shows an editor. The validation function
//! (`couchdb/validate_doc_update.js`) checks the same rules, case for case
//! (`tests/target_cases.json` runs against both).
//!
//! An absolute target is `http://` or `https://` (lower case), a host, an optional port, then
//! path, query and fragment, all in visible ASCII:
//! - host: a DNS name in lower case (letters, digits, `-`; an international name in its `xn--`
//!   form) whose last label is not a number, or an IPv4 address in dotted decimal; no user
//!   name or password, no IPv6 literal;
//! - port: decimal without leading zeros, 1 to 65535, not the scheme's default (80, 443);
//! - path, query, fragment: RFC 3986's characters for them, `%` only before two hex digits
//!   (text in other scripts percent-encoded as UTF-8), no `.` or `..` segment (nor `%2e`), and
//!   no `'` in the query (parsers encode it there).
//!
//! The one difference allowed: an empty path (`https://example.com`) is sent as `/`.
//! An internal redirect is a path starting with one `/`, of the same characters.

use url::Url;

/// Why a stored `url` is not served (for the operator's log).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the \"url\" is not in the form couchlink sends ({0})")]
pub struct NotCanonical(pub &'static str);

/// Characters of a path segment (RFC 3986 `pchar`, `%` checked apart), and `/`.
fn path_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@/%".contains(&b)
}

fn query_char(b: u8) -> bool {
    (path_char(b) || b == b'?') && b != b'\''
}

fn fragment_char(b: u8) -> bool {
    path_char(b) || b == b'?'
}

/// The `Location` for a stored absolute target, when it is in canonical form.
///
/// ```
/// use couchlink::domain::canonical_location;
/// assert_eq!(canonical_location("https://example.com").unwrap(), "https://example.com/");
/// assert!(canonical_location("https:evil.com").is_err());
/// ```
pub fn canonical_location(url: &str) -> Result<String, NotCanonical> {
    let location = grammar_location(url)?;
    // The same answer from the URL parser the resolution uses, or the rules missed a case.
    match Url::parse(&location) {
        Ok(parsed) if parsed.as_str() == location => Ok(location),
        _ => Err(NotCanonical("a URL parser would rewrite it")),
    }
}

/// [`canonical_location`] by the written rules alone.
fn grammar_location(url: &str) -> Result<String, NotCanonical> {
    if !url.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(NotCanonical(
            "only visible ASCII: spaces, control characters and other scripts must be percent-encoded",
        ));
    }
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .ok_or(NotCanonical("it must start with http:// or https:// in lower case"))?;
    let https = url.starts_with("https://");
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let (host, port) = match authority.rsplit_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (authority, None),
    };
    check_host(host)?;
    if let Some(port) = port {
        let number: u32 = port.parse().map_err(|_| NotCanonical("the port must be a number"))?;
        if port.starts_with('0') || !(1..=65535).contains(&number) || !port.bytes().all(|b| b.is_ascii_digit()) {
            return Err(NotCanonical("the port must be 1 to 65535, without leading zeros"));
        }
        if number == if https { 443 } else { 80 } {
            return Err(NotCanonical("the scheme's default port is left out"));
        }
    }
    check_tail(tail)?;
    Ok(if tail.starts_with('/') { url.to_owned() } else { format!("{}/{tail}", &url[..url.len() - tail.len()]) })
}

/// An internal redirect's value (`/H83if/spring?utm=x`), when it is in canonical form.
pub fn check_internal(value: &str) -> Result<(), NotCanonical> {
    if value.starts_with("//") || !value.starts_with('/') {
        return Err(NotCanonical("an internal redirect starts with a single /"));
    }
    if !value.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(NotCanonical(
            "only visible ASCII: spaces, control characters and other scripts must be percent-encoded",
        ));
    }
    check_tail(value)
}

fn check_host(host: &str) -> Result<(), NotCanonical> {
    if host.contains('@') {
        return Err(NotCanonical("no user name or password before the host"));
    }
    if host.is_empty() || host.len() > 253 {
        return Err(NotCanonical("a host name of 1 to 253 characters"));
    }
    let labels: Vec<&str> = host.split('.').collect();
    let numeric = |l: &str| !l.is_empty() && l.bytes().all(|b| b.is_ascii_digit());
    if labels.iter().all(|l| numeric(l)) {
        let dotted_quad = labels.len() == 4
            && labels.iter().all(|l| {
                l.len() <= 3 && (l.len() == 1 || !l.starts_with('0')) && l.parse::<u16>().is_ok_and(|n| n <= 255)
            });
        return if dotted_quad {
            Ok(())
        } else {
            Err(NotCanonical("an IPv4 address is four numbers 0-255, without leading zeros"))
        };
    }
    for label in &labels {
        let ok = !label.is_empty()
            && label.len() <= 63
            && label.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !label.starts_with('-')
            && !label.ends_with('-');
        if !ok {
            return Err(NotCanonical(
                "a host is lower-case letters, digits and - between dots (xn-- for international names)",
            ));
        }
    }
    let last = labels[labels.len() - 1];
    if numeric(last) || (last.starts_with("0x") && last[2..].bytes().all(|b| b.is_ascii_hexdigit())) {
        return Err(NotCanonical("a host name's last label is not a number"));
    }
    Ok(())
}

/// Path, query and fragment (each optional, in that order).
fn check_tail(tail: &str) -> Result<(), NotCanonical> {
    let (before_fragment, fragment) = match tail.split_once('#') {
        Some((b, f)) => (b, Some(f)),
        None => (tail, None),
    };
    let (path, query) = match before_fragment.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (before_fragment, None),
    };
    if !path.bytes().all(path_char) {
        return Err(NotCanonical("the path holds a character that must be percent-encoded"));
    }
    if query.is_some_and(|q| !q.bytes().all(query_char)) {
        return Err(NotCanonical("the query holds a character that must be percent-encoded (' as %27)"));
    }
    if fragment.is_some_and(|f| !f.bytes().all(fragment_char)) {
        return Err(NotCanonical("the fragment holds a character that must be percent-encoded"));
    }
    if !escapes_are_complete(tail) {
        return Err(NotCanonical("% is followed by two hex digits"));
    }
    let dot = |s: &str| matches!(s.to_ascii_lowercase().as_str(), "." | ".." | "%2e" | ".%2e" | "%2e." | "%2e%2e");
    if path.split('/').any(dot) {
        return Err(NotCanonical("no . or .. path segments"));
    }
    Ok(())
}

fn escapes_are_complete(s: &str) -> bool {
    let b = s.as_bytes();
    b.iter().enumerate().all(|(i, &c)| {
        c != b'%'
            || (b.get(i + 1).is_some_and(u8::is_ascii_hexdigit) && b.get(i + 2).is_some_and(u8::is_ascii_hexdigit))
    })
}

/// Whether `target` is one the proxy sends as written: an internal redirect (`/...`), or an
/// absolute http(s) URL in canonical form (its empty path aside), then `Some` of its `Location`.
pub fn check_target(target: &str) -> Result<Option<String>, NotCanonical> {
    if target.starts_with('/') {
        check_internal(target).map(|()| None)
    } else {
        canonical_location(target).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cases shared with the validation function's test: `{"url", "ok"}`.
    #[test]
    fn the_shared_table_of_cases() {
        let cases: Vec<serde_json::Value> =
            serde_json::from_str(include_str!("../../tests/target_cases.json")).expect("valid JSON");
        for case in cases {
            let url = case["url"].as_str().unwrap();
            let got = if url.starts_with('/') { check_internal(url).is_ok() } else { canonical_location(url).is_ok() };
            assert_eq!(got, case["ok"].as_bool().unwrap(), "{url:?}: {:?}", canonical_location(url));
        }
    }

    proptest::proptest! {
        /// Whatever the written rules accept, the URL parser leaves as it is.
        #[test]
        fn accepted_targets_are_what_a_parser_gives(
            host in "[a-z0-9][a-z0-9-]{0,8}\\.[a-z]{1,5}|[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}",
            tail in "[ -~]{0,30}",
        ) {
            let url = format!("https://{host}/{tail}");
            if let Ok(location) = grammar_location(&url) {
                let parsed = Url::parse(&location).unwrap();
                proptest::prop_assert_eq!(parsed.as_str(), location.as_str());
            }
        }
    }
}
