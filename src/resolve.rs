//! Shortlink resolution as the Internet-Draft "A Deterministic Algorithm for Resolving Shortlinks
//! with Internal Redirects" specifies it, as a pure algorithm over any ruleset.
//!
//! [`resolve`] is the draft's algorithm step by step (embedded `#`/`?` extraction, longest-prefix
//! match, remaining path, internal redirects with a loop limit, query and fragment precedence).
//! [`resolve_url`] wraps it for a whole request URL, as the draft's examples are written.
//! [`safe_location`] and [`climbs_out`] are couchlink's own checks on the result (the draft's
//! "Path Traversal" and "Input Validation" considerations).

use std::future::Future;

use percent_encoding::percent_decode_str;
use url::Url;

/// The draft's loop limit: at most this many internal redirects are followed in a row; one
/// more is refused ([`ResolveError::TooManyRedirects`]).
pub const MAX_INTERNAL_REDIRECTS: usize = 255;

/// A source of shortlink values (the draft's "Ruleset").
pub trait Ruleset {
    /// A value: an absolute destination (`http...`) or an internal redirect (`/...`).
    type Value: AsRef<str>;
    /// Why a lookup could not be answered (as opposed to "no such key").
    type Error;
    /// The value stored under `key`, if any.
    fn get(&self, key: &str) -> impl Future<Output = Result<Option<Self::Value>, Self::Error>> + Send;
}

/// How resolution ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolved {
    /// An absolute destination was found: the assembled destination URL, and the remaining
    /// path that was appended to it (for the caller's traversal check).
    Absolute {
        /// The destination URL.
        url: String,
        /// The remaining path appended to it.
        appended: String,
    },
    /// No key matched: the origin-relative path, query and fragment the draft would send the
    /// client to on the request's own origin.
    NoMatch {
        /// The path, with the remaining path of any internal redirects followed.
        path: String,
        /// The combined query, with its `?` (or empty).
        query: String,
        /// The selected fragment, with its `#` (or empty).
        fragment: String,
    },
}

/// Why resolution failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError<E> {
    /// The ruleset could not be read.
    #[error("ruleset lookup failed")]
    Lookup(E),
    /// More than 255 internal redirects in a row (the draft's loop protection).
    #[error("too many internal redirects")]
    TooManyRedirects,
    /// A value is neither a parseable `http...` URL nor a `/` path.
    #[error("unusable ruleset value {0:?}")]
    BadValue(String),
}

/// Resolves a request's `pathname` (starting with `/`), `request_query` and `request_fragment`
/// (each with its leading `?`/`#`, or empty) against `rules`, exactly as the draft specifies,
/// except for two points where couchlink follows the draft's worked examples over its prose:
/// the remaining path is joined to the destination's path with exactly one `/`, and a
/// destination query is kept verbatim when no other query is merged into it.
pub async fn resolve<R: Ruleset>(
    pathname: &str,
    request_query: &str,
    request_fragment: &str,
    rules: &R,
) -> Result<Resolved, ResolveError<R::Error>> {
    let mut pathname = pathname.to_owned();
    let mut relative = String::new();
    let mut initial_query = String::new();
    let mut initial_hash = String::new();
    let mut redirects = 0;

    loop {
        // Embedded fragment first, then query; only the first of each is kept across hops.
        if let Some(i) = pathname.rfind('#') {
            if initial_hash.is_empty() {
                initial_hash = pathname[i..].to_owned();
            }
            pathname.truncate(i);
        }
        if let Some(i) = pathname.rfind('?') {
            if initial_query.is_empty() {
                initial_query = pathname[i..].to_owned();
            }
            pathname.truncate(i);
        }

        let Some((key_len, value)) = longest_prefix_match(&pathname, rules).await? else {
            let query = combine_queries(None, &initial_query, request_query);
            let fragment = select_fragment(request_fragment, &initial_hash, "");
            return Ok(Resolved::NoMatch { path: join_paths(&pathname, &relative), query, fragment });
        };

        // The part after the key and its "/" (the "/" itself is kept in front).
        let remaining = pathname.get(key_len + 1..).unwrap_or("");
        relative.insert_str(0, remaining);

        let value = value.as_ref();
        if value.starts_with("http") {
            let embedded = Embedded { query: &initial_query, hash: &initial_hash };
            let url = absolute_destination(value, &relative, &embedded, request_query, request_fragment)
                .ok_or_else(|| ResolveError::BadValue(value.to_owned()))?;
            return Ok(Resolved::Absolute { url, appended: relative });
        }
        if !value.starts_with('/') {
            return Err(ResolveError::BadValue(value.to_owned()));
        }
        pathname = value.to_owned();
        redirects += 1;
        if redirects > MAX_INTERNAL_REDIRECTS {
            return Err(ResolveError::TooManyRedirects);
        }
    }
}

/// The query and fragment extracted from internal-redirect values on the way.
struct Embedded<'a> {
    query: &'a str,
    hash: &'a str,
}

/// The draft's construction phase for an absolute destination `value` (which starts with
/// `http`): `{origin}{destination path + relative}{combined query}{selected fragment}`.
fn absolute_destination(
    value: &str,
    relative: &str,
    embedded: &Embedded<'_>,
    request_query: &str,
    request_fragment: &str,
) -> Option<String> {
    let destination = Url::parse(value).ok()?;
    let path = join_paths(destination.path(), relative);
    let query = combine_queries(destination.query(), embedded.query, request_query);
    let dest_hash = destination.fragment().map(|f| format!("#{f}")).unwrap_or_default();
    let fragment = select_fragment(request_fragment, embedded.hash, &dest_hash);
    let origin = destination.origin().ascii_serialization();
    Some(format!("{origin}{path}{query}{fragment}"))
}

async fn longest_prefix_match<R: Ruleset>(
    pathname: &str,
    rules: &R,
) -> Result<Option<(usize, R::Value)>, ResolveError<R::Error>> {
    let mut candidate = pathname.strip_prefix('/').unwrap_or(pathname);
    if !candidate.is_empty() {
        if let Some(value) = rules.get(candidate).await.map_err(ResolveError::Lookup)? {
            return Ok(Some((candidate.len(), value)));
        }
    }
    while let Some(slash) = candidate.rfind('/') {
        candidate = &candidate[..slash];
        if let Some(value) = rules.get(candidate).await.map_err(ResolveError::Lookup)? {
            return Ok(Some((candidate.len(), value)));
        }
    }
    Ok(None)
}

/// Appends `relative` (empty, or starting with `/`) to `base` with exactly one `/` between
/// them: `https://github.com` + `/ietf/guidelines` is `https://github.com/ietf/guidelines`.
fn join_paths(base: &str, relative: &str) -> String {
    if relative.is_empty() {
        return base.to_owned();
    }
    let base = base.strip_suffix('/').unwrap_or(base);
    let relative = relative.strip_prefix('/').unwrap_or(relative);
    format!("{base}/{relative}")
}

/// The draft's `combineQueries`: destination < pathname-embedded < request, by
/// `URLSearchParams.set`. With nothing to merge, the destination's query is kept byte for byte
/// rather than re-serialised, so a plain redirect never rewrites the stored target.
fn combine_queries(destination: Option<&str>, embedded: &str, request: &str) -> String {
    let pairs = |q: &str| -> Vec<(String, String)> {
        let q = q.strip_prefix('?').unwrap_or(q);
        form_urlencoded::parse(q.as_bytes()).into_owned().collect()
    };
    let (embedded, request) = (pairs(embedded), pairs(request));
    if embedded.is_empty() && request.is_empty() {
        return match destination {
            Some(q) if !q.is_empty() => format!("?{q}"),
            _ => String::new(),
        };
    }
    let mut params = pairs(destination.unwrap_or(""));
    for (key, value) in embedded.into_iter().chain(request) {
        search_params_set(&mut params, key, value);
    }
    let serialized = form_urlencoded::Serializer::new(String::new()).extend_pairs(&params).finish();
    if serialized.is_empty() {
        serialized
    } else {
        format!("?{serialized}")
    }
}

/// `URLSearchParams.set`: the first pair named `key` takes `value`, later ones are removed;
/// without one, the pair is appended.
fn search_params_set(params: &mut Vec<(String, String)>, key: String, value: String) {
    match params.iter().position(|(k, _)| *k == key) {
        Some(first) => {
            params[first].1 = value;
            let mut index = 0;
            params.retain(|(k, _)| {
                index += 1;
                index - 1 <= first || *k != key
            });
        }
        None => params.push((key, value)),
    }
}

/// The draft's `selectFragment`: request > pathname-embedded > destination.
fn select_fragment(request: &str, embedded: &str, destination: &str) -> String {
    [request, embedded, destination].into_iter().find(|f| !f.is_empty()).unwrap_or("").to_owned()
}

/// Resolves a whole request URL the way the draft's examples are written; the no-match case
/// stays on the request's origin.
pub async fn resolve_url<R: Ruleset>(request: &str, rules: &R) -> Result<String, ResolveError<R::Error>> {
    let request = Url::parse(request).map_err(|_| ResolveError::BadValue(request.to_owned()))?;
    let query = request.query().map(|q| format!("?{q}")).unwrap_or_default();
    let fragment = request.fragment().map(|f| format!("#{f}")).unwrap_or_default();
    match resolve(request.path(), &query, &fragment, rules).await? {
        Resolved::Absolute { url, .. } => Ok(url),
        Resolved::NoMatch { path, query, fragment } => {
            let destination = request.join(&path).map_err(|_| ResolveError::BadValue(path.clone()))?;
            Ok(format!("{}{}{query}{fragment}", destination.origin().ascii_serialization(), destination.path()))
        }
    }
}

/// Whether an appended path would climb out of the target's path, as any server behind the
/// target might read it: a `.` or `..` segment, also with `;` parameters after it (`..;`, which
/// servers that strip parameters read as `..`), also percent-encoded once or more (`%2e%2e`,
/// `%252e%252e`); a segment hiding a `/` or `\` behind percent-encoding (`%2f`, `%5c`); or
/// percent-encoding that is not UTF-8 (overlong `%C0%AE` is a `.` to some decoders).
pub fn climbs_out(appended: &str) -> bool {
    appended.split('/').any(|segment| {
        let mut text = std::borrow::Cow::Borrowed(segment);
        // Each round undoes one layer of encoding; a few cover anything a server would undo.
        for _ in 0..4 {
            let Ok(decoded) = percent_decode_str(&text).decode_utf8() else { return true };
            let name = decoded.split(';').next().unwrap_or_default();
            if name == "." || name == ".." || decoded.contains(['/', '\\']) {
                return true;
            }
            if decoded == text {
                return false;
            }
            text = std::borrow::Cow::Owned(decoded.into_owned());
        }
        true // still encoded after that many layers: no honest path is
    })
}

/// The `Location` couchlink may send for a resolved destination: an absolute http/https URL
/// with a host, non-ASCII percent-encoded as UTF-8, and nothing but visible ASCII. A target
/// holding whitespace or control characters is refused rather than silently cleaned.
///
/// ```
/// use couchlink::resolve::safe_location;
/// assert_eq!(safe_location("https://t.example/café").unwrap(), "https://t.example/caf%C3%A9");
/// assert_eq!(safe_location("javascript:alert(1)"), None);
/// ```
pub fn safe_location(destination: &str) -> Option<String> {
    if destination.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return None;
    }
    let url = Url::parse(destination).ok()?;
    let allowed = matches!(url.scheme(), "http" | "https") && url.host_str().is_some_and(|h| !h.is_empty());
    let location: String = url.into();
    (allowed && location.bytes().all(|b| b.is_ascii_graphic())).then_some(location)
}

/// The version of a link a logged redirect served, from the request target and the `Location`
/// sent (as the access log holds them): the `Location` less what the request added to it, its
/// path after the ID and its query's parameters, so that `/H83if?fbclid=...` and `/H83if` count
/// as one version, as the live counts count them (they know what the link decided; the log
/// holds only the result). Where the request added nothing, the `Location` is the version.
///
/// Taken back from the result, it differs from what the link decided in two corners, both
/// documented: a visitor's parameter that replaced one of the target's own takes it away too,
/// and a target's query merged with the visitor's is spelt as the merge re-serialises it. The
/// ClickHouse recipe (docs/clickhouse.md) computes the same, held to it by a test.
pub fn logged_version<'a>(target: &[u8], location: &'a [u8]) -> std::borrow::Cow<'a, [u8]> {
    use std::borrow::Cow;
    // `/` and the ID's 5 characters; the rest is the visitor's.
    let Some(added) = target.get(6..).filter(|rest| !rest.is_empty()) else {
        return Cow::Borrowed(location);
    };
    let (path, query) = match memchr::memchr(b'?', added) {
        Some(q) => (&added[..q], &added[q + 1..]),
        None => (added, &b""[..]),
    };
    let path = &path[..memchr::memchr(b'#', path).unwrap_or(path.len())];
    let query = &query[..memchr::memchr(b'#', query).unwrap_or(query.len())];
    let (main, fragment) = location.split_at(memchr::memchr(b'#', location).unwrap_or(location.len()));
    let (mut base, mut sent_query) = match memchr::memchr(b'?', main) {
        Some(q) => (&main[..q], Some(&main[q + 1..])),
        None => (main, None),
    };
    // The remaining path was joined with exactly one `/`: take `/` and it off the end.
    let mut root = false;
    if let Some(relative) = path.strip_prefix(b"/").filter(|r| !r.is_empty()) {
        if base.len() > relative.len() && base.ends_with(relative) && base[base.len() - relative.len() - 1] == b'/' {
            base = &base[..base.len() - relative.len() - 1];
            // `https://host` + `/more`: the target's path was `/`.
            let after_scheme = memchr::memmem::find(base, b"://").map_or(0, |i| i + 3);
            root = !base[after_scheme..].contains(&b'/');
        }
    }
    // The `Location`'s parameters whose name the request's query has, taken off; the others kept
    // as they are (the merge wrote them form-encoded already).
    let mut kept_query = None;
    if !query.is_empty() {
        let name = |pair: &[u8]| {
            let name = &pair[..memchr::memchr(b'=', pair).unwrap_or(pair.len())];
            form_urlencoded::parse(name).next().map(|(name, _)| name.into_owned()).unwrap_or_default()
        };
        let names: Vec<String> = query.split(|&b| b == b'&').filter(|p| !p.is_empty()).map(name).collect();
        if let Some(sent) = sent_query {
            let kept: Vec<&[u8]> =
                sent.split(|&b| b == b'&').filter(|p| !p.is_empty() && !names.contains(&name(p))).collect();
            kept_query = Some(kept.join(&b'&'));
            sent_query = None;
        }
    }
    let mut version = base.to_vec();
    if root {
        version.push(b'/');
    }
    match (sent_query, kept_query) {
        (Some(q), _) => {
            version.push(b'?');
            version.extend_from_slice(q);
        }
        (None, Some(q)) if !q.is_empty() => {
            version.push(b'?');
            version.extend_from_slice(&q);
        }
        _ => {}
    }
    version.extend_from_slice(fragment);
    if version == location {
        Cow::Borrowed(location)
    } else {
        Cow::Owned(version)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::convert::Infallible;

    use super::*;

    struct Rules(HashMap<String, String>);

    impl Rules {
        fn new(pairs: &[(&str, &str)]) -> Self {
            Rules(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect())
        }
    }

    impl Ruleset for Rules {
        type Value = String;
        type Error = Infallible;
        async fn get(&self, key: &str) -> Result<Option<String>, Infallible> {
            Ok(self.0.get(key).cloned())
        }
    }

    fn run<F: Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
    }

    fn resolves(rules: &[(&str, &str)], request: &str) -> Result<String, ResolveError<Infallible>> {
        run(resolve_url(request, &Rules::new(rules)))
    }

    // The draft's five worked examples, verbatim.

    #[test]
    fn draft_example_1_absolute_destination_with_path_appending() {
        let rules = [("github", "https://github.com"), ("repo", "https://github.com/FartLabs/go")];
        assert_eq!(
            resolves(&rules, "https://example.com/github/ietf/guidelines").unwrap(),
            "https://github.com/ietf/guidelines"
        );
    }

    #[test]
    fn draft_example_2_internal_redirect_chain() {
        let rules = [("docs", "/documentation"), ("docs/api", "/documentation/reference")];
        assert_eq!(
            resolves(&rules, "https://example.com/docs/api/v1/users").unwrap(),
            "https://example.com/documentation/reference/v1/users"
        );
    }

    #[test]
    fn draft_example_3_query_parameter_precedence() {
        let rules = [("example", "https://example.com?baz=qux")];
        assert_eq!(
            resolves(&rules, "https://example.com/example?foo=bar").unwrap(),
            "https://example.com/?baz=qux&foo=bar"
        );
    }

    #[test]
    fn draft_example_4_fragment_precedence() {
        let rules = [("example", "https://example.com#yin")];
        assert_eq!(resolves(&rules, "https://example.com/example#yang").unwrap(), "https://example.com/#yang");
    }

    #[test]
    fn draft_example_5_no_match_returns_original() {
        let rules = [("c", "https://example.com/calendar")];
        assert_eq!(resolves(&rules, "https://example.com/colors").unwrap(), "https://example.com/colors");
    }

    // Edge cases.

    #[test]
    fn empty_path_matches_nothing() {
        let rules = [("a", "https://a.example")];
        assert_eq!(resolves(&rules, "https://example.com/").unwrap(), "https://example.com/");
    }

    #[test]
    fn trailing_slash_is_appended_as_one_slash() {
        let rules = [("H83if", "https://t.example/wp")];
        assert_eq!(resolves(&rules, "https://0x1f.ie/H83if/").unwrap(), "https://t.example/wp/");
        let rules = [("H83if", "https://t.example/wp/")];
        assert_eq!(resolves(&rules, "https://0x1f.ie/H83if/spring").unwrap(), "https://t.example/wp/spring");
    }

    #[test]
    fn request_query_wins_and_set_collapses_repeated_keys() {
        let rules = [("k", "https://t.example/?a=1&b=2&a=3")];
        assert_eq!(resolves(&rules, "https://s.example/k?a=9").unwrap(), "https://t.example/?a=9&b=2");
        // Repeated keys in the request: each `set` replaces the last, so the last one wins.
        assert_eq!(resolves(&rules, "https://s.example/k?c=1&c=2").unwrap(), "https://t.example/?a=1&b=2&a=3&c=2");
    }

    #[test]
    fn embedded_query_ranks_between_destination_and_request() {
        let rules = [("k", "/j?x=embedded&y=embedded#inner"), ("j", "https://t.example/p?x=dest&z=dest#dest")];
        assert_eq!(
            resolves(&rules, "https://s.example/k?y=request").unwrap(),
            "https://t.example/p?x=embedded&z=dest&y=request#inner"
        );
    }

    #[test]
    fn plain_redirect_keeps_the_destination_query_verbatim() {
        let rules = [("k", "https://t.example/?q=a%20b&next=/x&flag")];
        assert_eq!(resolves(&rules, "https://s.example/k").unwrap(), "https://t.example/?q=a%20b&next=/x&flag");
    }

    #[test]
    fn encoded_characters_pass_through_the_remaining_path() {
        let rules = [("k", "https://t.example/base")];
        assert_eq!(
            resolves(&rules, "https://s.example/k/caf%C3%A9/a%20b").unwrap(),
            "https://t.example/base/caf%C3%A9/a%20b"
        );
    }

    #[test]
    fn a_loop_is_refused() {
        let rules = [("a", "/b"), ("b", "/a")];
        assert_eq!(resolves(&rules, "https://s.example/a"), Err(ResolveError::TooManyRedirects));
    }

    fn chain(hops: usize) -> Vec<(String, String)> {
        let mut rules: Vec<(String, String)> = (0..hops).map(|i| (format!("k{i}"), format!("/k{}", i + 1))).collect();
        rules.push((format!("k{hops}"), "https://end.example/".to_owned()));
        rules
    }

    #[test]
    fn a_chain_of_255_internal_redirects_resolves_and_256_does_not() {
        assert_eq!(MAX_INTERNAL_REDIRECTS, 255);
        let as_refs = |v: &Vec<(String, String)>| Rules(v.iter().cloned().collect());
        assert_eq!(
            run(resolve_url("https://s.example/k0", &as_refs(&chain(MAX_INTERNAL_REDIRECTS)))).unwrap(),
            "https://end.example/"
        );
        assert_eq!(
            run(resolve_url("https://s.example/k0", &as_refs(&chain(MAX_INTERNAL_REDIRECTS + 1)))),
            Err(ResolveError::TooManyRedirects)
        );
    }

    #[test]
    fn a_value_of_neither_kind_is_an_error_not_a_hang() {
        let rules = [("k", "ftp://t.example/")];
        assert!(matches!(resolves(&rules, "https://s.example/k"), Err(ResolveError::BadValue(_))));
    }

    #[test]
    fn remaining_path_from_each_hop_is_prepended() {
        let rules = [("a", "/b/from-a"), ("b", "https://t.example/root")];
        assert_eq!(resolves(&rules, "https://s.example/a/req").unwrap(), "https://t.example/root/from-a/req");
    }

    #[test]
    fn a_canonical_target_resolves_to_itself_for_a_plain_request() {
        for value in [
            "https://example.com/wp/?p=14",
            "https://example.com",
            "https://example.com/a#frag",
            "https://xn--bcher-kva.example/caf%C3%A9?q=%C3%BC",
            "http://t.example/?q=a%20b&flag",
        ] {
            let rules = Rules::new(&[("Plain", value)]);
            let resolved = match run(resolve("/Plain", "", "", &rules)) {
                Ok(Resolved::Absolute { url, .. }) => safe_location(&url),
                _ => None,
            };
            assert_eq!(crate::domain::canonical_location(value).ok(), resolved, "{value}");
        }
    }

    #[test]
    fn a_logged_version_is_the_location_less_what_the_request_added() {
        let table: serde_json::Value = serde_json::from_str(include_str!("../tests/version_cases.json")).unwrap();
        let cases = table["cases"].as_array().unwrap();
        assert!(cases.len() >= 10);
        for case in cases {
            let text = |k: &str| case[k].as_str().unwrap();
            let got = logged_version(text("target").as_bytes(), text("location").as_bytes());
            assert_eq!(String::from_utf8_lossy(&got), text("version"), "{}", text("why"));
        }
    }

    #[test]
    fn climbing_out_is_detected_in_every_spelling() {
        for bad in [
            "/..",
            "/a/../b",
            "/%2e%2e/x",
            "/%2E%2e",
            "/.",
            "/a%2fb",
            "/a%5Cb",
            "/a%2F..%2F",
            "/..;/x",
            "/.;jsessionid=1",
            "/%2e%2e;x",
            "/%C0%AE%C0%AE/x",
            "/%252e%252e/x",
            "/%25252e%25252e",
            "/a%252fb",
            "/%ff",
        ] {
            assert!(climbs_out(bad), "{bad}");
        }
        for ok in ["", "/", "/a/b", "/a..b", "/...", "/%2e%2e%2e", "/caf%C3%A9", "/a;b", "/...;x", "/100%25"] {
            assert!(!climbs_out(ok), "{ok}");
        }
    }

    #[test]
    fn safe_location_encodes_non_ascii_and_refuses_the_rest() {
        assert_eq!(
            safe_location("https://t.example/café?q=ü#ö").unwrap(),
            "https://t.example/caf%C3%A9?q=%C3%BC#%C3%B6"
        );
        assert_eq!(safe_location("https://bücher.example/").unwrap(), "https://xn--bcher-kva.example/");
        for bad in [
            "https://t.example/a\r\nSet-Cookie: x=1",
            "https://t.example/a b",
            "javascript:alert(1)",
            "data:text/html,hi",
            "file:///etc/passwd",
            "https://",
            "ftp://t.example/",
            " https://t.example/",
        ] {
            assert_eq!(safe_location(bad), None, "{bad:?}");
        }
    }

    proptest::proptest! {
        /// Whatever a destination holds, the Location couchlink would send is an absolute
        /// http(s) URL of visible ASCII, or nothing.
        #[test]
        fn a_location_is_http_or_https_and_visible_ascii(destination in "\\PC{0,80}|(https?|ftp|javascript|data):[\\PC]{0,60}") {
            if let Some(location) = safe_location(&destination) {
                proptest::prop_assert!(location.starts_with("http://") || location.starts_with("https://"), "{location}");
                proptest::prop_assert!(location.bytes().all(|b| b.is_ascii_graphic()), "{location:?}");
            }
        }

        /// A remaining path that passes the check never takes the URL out of the target's path.
        #[test]
        fn an_accepted_remaining_path_stays_under_the_target(
            tokens in proptest::collection::vec(
                proptest::sample::select(&["a", "b.c", ".", "..", "/", "\\", "%2e", "%2E%2e", "%2f", "%5C", "%25"][..]),
                0..10,
            )
        ) {
            let appended = tokens.concat();
            if !climbs_out(&appended) {
                let joined = format!("https://t.example/wp/{}", appended.trim_start_matches('/'));
                if let Some(location) = safe_location(&joined) {
                    let url = Url::parse(&location).unwrap();
                    proptest::prop_assert!(url.path().starts_with("/wp/"), "{appended:?} → {location}");
                }
            }
        }
    }
}
