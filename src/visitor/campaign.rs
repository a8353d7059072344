//! A request's campaign: the `utm_*` parameters of its query, or else of the target it is sent
//! to. One rule, read by the proxy's live counts and by `couchlink report` alike.

use std::borrow::Cow;

/// No value of a `utm_*` parameter in the request or its target.
pub const NO_CAMPAIGN: &str = "(none)";

/// The parameters [`campaign`] reads, in its answer's order.
pub const NAMES: [&str; 5] = ["utm_source", "utm_medium", "utm_campaign", "utm_term", "utm_content"];

/// The values of the five `utm_*` parameters, in [`NAMES`]' order: each from the request
/// target's query, or else from the `Location`'s; [`NO_CAMPAIGN`] in neither. The first
/// occurrence counts, an empty value is none, and a value is decoded as a form field (`%20` and
/// `+` are spaces): as ClickHouse's `extractURLParameter` and `decodeURLFormComponent` read it
/// (docs/clickhouse.md). Each query is read once, whatever the number of parameters.
pub fn campaign<'a>(target: &'a [u8], location: Option<&'a [u8]>) -> [Cow<'a, str>; 5] {
    let mut found: [Option<&[u8]>; 5] = [None; 5];
    for uri in std::iter::once(target).chain(location) {
        for (name, value) in query(uri) {
            let Some(parameter) = name.strip_prefix(b"utm_") else { continue };
            let slot = match parameter {
                b"source" => 0,
                b"medium" => 1,
                b"campaign" => 2,
                b"term" => 3,
                b"content" => 4,
                _ => continue,
            };
            if found[slot].is_none() && !value.is_empty() {
                found[slot] = Some(value);
            }
        }
    }
    found.map(|value| value.map_or(Cow::Borrowed(NO_CAMPAIGN), form_decoded))
}

/// Whether any `utm_*` parameter can be in the line: most lines have none, and skip the search.
pub fn may_have_campaign(target: &[u8], location: Option<&[u8]>) -> bool {
    // Built once: the proxy asks this of every redirect.
    static UTM: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"utm_"));
    let finder = |bytes: &[u8]| UTM.find(bytes).is_some();
    finder(target) || location.is_some_and(finder)
}

/// The raw `name=value` pairs of `uri`'s query (before any fragment); a pair without `=` has
/// an empty value.
fn query(uri: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> {
    let uri = &uri[..memchr::memchr(b'#', uri).unwrap_or(uri.len())];
    let query = memchr::memchr(b'?', uri).map_or(&[][..], |start| &uri[start + 1..]);
    query.split(|&b| b == b'&').filter(|pair| !pair.is_empty()).map(|pair| match memchr::memchr(b'=', pair) {
        Some(eq) => (&pair[..eq], &pair[eq + 1..]),
        None => (pair, &[][..]),
    })
}

/// A form field's value decoded: `+` is a space, `%xx` a byte; invalid UTF-8 replaced.
fn form_decoded(value: &[u8]) -> Cow<'_, str> {
    if !value.iter().any(|&b| b == b'+' || b == b'%') {
        return String::from_utf8_lossy(value);
    }
    let spaced: Vec<u8> = value.iter().map(|&b| if b == b'+' { b' ' } else { b }).collect();
    let decoded: Vec<u8> = percent_encoding::percent_decode(&spaced).collect();
    Cow::Owned(String::from_utf8_lossy(&decoded).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utm<'a>(target: &'a [u8], location: Option<&'a [u8]>, name: &str) -> Cow<'a, str> {
        let i = NAMES.iter().position(|n| *n == name).unwrap();
        campaign(target, location)[i].clone()
    }

    #[test]
    fn campaigns_come_from_the_request_then_from_the_location() {
        let loc = Some(&b"https://e.x/p?utm_source=tag&utm_medium=qr#top"[..]);
        assert_eq!(utm(b"/H83if?utm_source=mail", loc, "utm_source"), "mail");
        assert_eq!(utm(b"/H83if?utm_source=mail", loc, "utm_medium"), "qr", "each parameter on its own");
        assert_eq!(utm(b"/H83if", loc, "utm_source"), "tag");
        assert_eq!(utm(b"/H83if?utm_source=", loc, "utm_source"), "tag", "an empty value is none");
        assert_eq!(utm(b"/H83if", None, "utm_campaign"), NO_CAMPAIGN);
        assert_eq!(utm(b"/H83if?x=1&utm_campaign=spring+sale%21&utm_campaign=b", None, "utm_campaign"), "spring sale!");
        assert_eq!(utm(b"/H83if?xutm_campaign=a", None, "utm_campaign"), NO_CAMPAIGN, "a whole name only");
        assert_eq!(utm(b"/H83if#?utm_term=a", None, "utm_term"), NO_CAMPAIGN, "not in a fragment");
        assert_eq!(utm(b"/H83if?utm_term=%ff", None, "utm_term"), "\u{fffd}");
        assert!(may_have_campaign(b"/H83if", loc));
        assert!(!may_have_campaign(b"/H83if", Some(b"https://e.x/")));
    }
}
