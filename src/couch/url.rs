//! Every CouchDB URL couchlink asks, built here and nowhere else: each path segment encoded
//! once, credentials kept out of anything shown.

use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};

use super::users::user_doc_id;
use super::CouchClient;

/// Percent-encodes one path segment (a database name may hold `/`, `+`, `$`...).
pub(super) fn segment(s: &str) -> String {
    utf8_percent_encode(s, PATH_SEGMENT).to_string()
}

/// What a path segment must have percent-encoded (RFC 3986, 3.3: a segment is unreserved
/// characters, sub-delims, `:` and `@` as they are), and `+`: CouchDB decodes a `+` in a path
/// as a space (seen on 3.5: `PUT /a+b` is refused as the name "a b"). So `links_history`,
/// `acme-links`, `p(1)$` go as they are, `/` and `+` as `%2F` and `%2B`.
const PATH_SEGMENT: &percent_encoding::AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~')
    .remove(b'!')
    .remove(b'$')
    .remove(b'&')
    .remove(b'\'')
    .remove(b'(')
    .remove(b')')
    .remove(b'*')
    .remove(b',')
    .remove(b';')
    .remove(b'=')
    .remove(b':')
    .remove(b'@');

/// `url` with any password it holds replaced by `***`, for messages; also for text that does
/// not parse as a URL (the userinfo is whatever stands between `://` and the authority's last
/// `@`).
///
/// ```
/// use couchlink::couch::redact_userinfo;
/// assert_eq!(redact_userinfo("http://me:secret@db:5984/"), "http://me:***@db:5984/");
/// assert_eq!(redact_userinfo("http://me:sec ret@db:5984/"), "http://me:***@db:5984/");
/// assert_eq!(redact_userinfo("http://db:5984/"), "http://db:5984/");
/// ```
pub fn redact_userinfo(url: &str) -> String {
    let Some(start) = url.find("://").map(|i| i + 3) else { return url.to_owned() };
    let authority_end = url[start..].find(['/', '?', '#']).map_or(url.len(), |i| start + i);
    let Some(at) = url[start..authority_end].rfind('@').map(|i| start + i) else { return url.to_owned() };
    let user = url[start..at].split(':').next().unwrap_or_default();
    let hidden = if url[start..at].contains(':') { ":***" } else { "" };
    format!("{}{user}{hidden}{}", &url[..start], &url[at..])
}

impl CouchClient {
    pub(super) fn server(&self, path: &str) -> String {
        format!("{}/{path}", self.base)
    }

    pub(super) fn in_db(&self, path: &str) -> String {
        if path.is_empty() {
            format!("{}/{}", self.base, segment(&self.db))
        } else {
            format!("{}/{}/{path}", self.base, segment(&self.db))
        }
    }

    pub(super) fn doc_url(&self, id: &str) -> String {
        self.in_db(&segment(id))
    }

    pub(super) fn design_doc_url(&self, name: &str) -> String {
        self.in_db(&format!("_design/{}", segment(name)))
    }

    pub(super) fn user_url(&self, name: &str) -> String {
        self.server(&format!("_users/{}", segment(&user_doc_id(name))))
    }
}

/// The URL of `segments` on the CouchDB server at `server`, for a client that holds the server
/// as a parsed URL (the console's passage): each segment encoded as [`CouchClient`] encodes its
/// own (`+` too), under the path the server's URL has of its own, as `CouchClient` keeps it. A
/// CouchDB behind a proxy at `http://host/db/` is asked `http://host/db/_session`, never
/// `http://host/_session`; the server's query and fragment are not kept.
///
/// ```
/// let at = |server: &str, segments: &[&str]| {
///     couchlink::couch::server_path_url(&reqwest::Url::parse(server).unwrap(), segments).to_string()
/// };
/// assert_eq!(at("http://127.0.0.1:5984/", &["_session"]), "http://127.0.0.1:5984/_session");
/// assert_eq!(at("http://127.0.0.1:8080/db/", &["links", "H83if"]), "http://127.0.0.1:8080/db/links/H83if");
/// assert_eq!(at("http://127.0.0.1:8080/db", &["a+b/c"]), "http://127.0.0.1:8080/db/a%2Bb%2Fc");
/// ```
pub fn server_path_url(server: &reqwest::Url, segments: &[&str]) -> reqwest::Url {
    let mut path = server.path().trim_end_matches('/').to_owned();
    for s in segments {
        path.push('/');
        path.push_str(&segment(s));
    }
    let mut url = server.clone();
    url.set_path(&path);
    url.set_query(None);
    url.set_fragment(None);
    url
}

#[cfg(test)]
mod tests {
    use super::super::CouchConfig;
    use super::*;

    #[test]
    fn urls_encode_each_segment_once() {
        let config = CouchConfig {
            url: "http://127.0.0.1:5984/".into(),
            user: None,
            password: None,
            password_file: None,
            db: "links/test+1".into(),
        };
        let client = CouchClient::new(&config).unwrap();
        assert_eq!(client.in_db("_security"), "http://127.0.0.1:5984/links%2Ftest%2B1/_security");
        assert_eq!(client.design_doc_url("couchlink"), "http://127.0.0.1:5984/links%2Ftest%2B1/_design/couchlink");
        assert_eq!(client.user_url("maria"), "http://127.0.0.1:5984/_users/org.couchdb.user:maria");
        // Only what RFC 3986 asks to be escaped in a segment, and `+` (CouchDB reads it as a space).
        let named = |db: &str| CouchClient::new(&CouchConfig { db: db.into(), ..config.clone() }).unwrap().in_db("x");
        assert_eq!(named("links_history"), "http://127.0.0.1:5984/links_history/x");
        assert_eq!(named("acme-links$(1)"), "http://127.0.0.1:5984/acme-links$(1)/x");
        assert_eq!(named("a+b/c"), "http://127.0.0.1:5984/a%2Bb%2Fc/x");
        assert_eq!(
            client.doc_url("H83if/0000000001-~ab"),
            "http://127.0.0.1:5984/links%2Ftest%2B1/H83if%2F0000000001-~ab"
        );
    }
}
