//! `Link`: a link document as the proxy uses it (docs/reference.md, "Link documents").

use serde::Deserialize;

use super::target::{canonical_location, check_internal, NotCanonical};
use time::{format_description::well_known::Rfc3339, OffsetDateTime};

use crate::visitor::language::Language;
use crate::visitor::{Device, Os, Visitor};

/// A link document's fields as CouchDB returns them (other fields are ignored). Each field is
/// read whatever its JSON type: a document with a wrong type (`{"url": 42}`, written by an admin
/// or before the validation function existed) is still a document, one that [`Link::from_doc`]
/// turns down, and not a failure to talk to CouchDB.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct LinkDoc {
    /// The revision, to tell one unusable revision from the next in warnings.
    #[serde(default, rename = "_rev")]
    pub rev: Option<Typed<String>>,
    /// The target: an absolute http/https URL or an internal redirect (`/...`).
    #[serde(default)]
    pub url: Option<Typed<String>>,
    /// `true` turns the link off (404).
    #[serde(default)]
    pub inactive: Option<Typed<bool>>,
    /// RFC 3339 instant from which the link answers 404 (or its fallback).
    #[serde(default)]
    pub expires: Option<Typed<String>>,
    /// RFC 3339 instant before which the link acts as inactive.
    #[serde(default)]
    pub valid_from: Option<Typed<String>>,
    /// Where people go while the link is inactive, expired or not yet started, instead of a 404.
    #[serde(default)]
    pub fallback: Option<Typed<String>>,
    /// Rules sending some visitors elsewhere than `url`: the first that matches wins.
    #[serde(default)]
    pub targets: Option<Typed<Vec<serde_json::Value>>>,
    /// `true`: the `url` carries an out-of-band invitation (`oob` or `_oob`), which a client
    /// asking for `application/json` gets itself (Aries RFC 0434, "URL Shortening").
    #[serde(default)]
    pub oob: Option<Typed<bool>>,
}

/// A field's value: of the expected JSON type, or of another.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum Typed<T> {
    /// The expected type.
    Right(T),
    /// Any other.
    Wrong(WrongType),
}

/// A value of an unexpected JSON type (its content is not kept).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WrongType;

impl<'de> Deserialize<'de> for WrongType {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        serde::de::IgnoredAny::deserialize(d).map(|_| WrongType)
    }
}

impl<T> From<T> for Typed<T> {
    fn from(value: T) -> Self {
        Typed::Right(value)
    }
}

impl LinkDoc {
    /// The revision, when the document has a string one.
    pub fn revision(&self) -> Option<&str> {
        match &self.rev {
            Some(Typed::Right(rev)) => Some(rev),
            _ => None,
        }
    }
}

/// A present field of the right type, `None` when absent (or null), `Err` when of another type.
fn field<T>(value: Option<Typed<T>>, name: &'static str) -> Result<Option<T>, UnusableLink> {
    match value {
        None => Ok(None),
        Some(Typed::Right(v)) => Ok(Some(v)),
        Some(Typed::Wrong(_)) => Err(UnusableLink::WrongType(name)),
    }
}

/// Why a link document cannot be served.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnusableLink {
    /// No `url`, or not a string.
    #[error("the document has no string \"url\"")]
    NoUrl,
    /// `expires` or `valid_from` is not an RFC 3339 timestamp.
    #[error("\"{0}\" is not an RFC 3339 timestamp: {1:?}")]
    BadTime(&'static str, String),
    /// The `fallback` is not in the form the proxy sends.
    #[error("\"fallback\": {0}")]
    BadFallback(NotCanonical),
    /// A rule of `targets` cannot be followed.
    #[error("rule {} of \"targets\": {reason}", .rule + 1)]
    BadRule {
        /// Which rule (from 0).
        rule: usize,
        /// Why not.
        reason: String,
    },
    /// A field of the wrong JSON type.
    #[error("\"{0}\" has the wrong JSON type")]
    WrongType(&'static str),
}

/// A link the proxy can serve, parsed from its document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// The stored target, unchanged.
    pub url: Box<str>,
    /// Whether the document says `inactive: true`.
    pub inactive: bool,
    /// The `Location` of a plain `GET /{id}`, worked out once when the document is read: which
    /// kind, and the text itself only when it differs from `url`. Kept apart (rather than one
    /// enum holding the text) so that a `Link` is 48 bytes and its `Arc` block 64, one
    /// allocator size class below what the enum's tag cost (`bench/scale.sh` measures memory
    /// per link: docs/benchmarks.md).
    plain: Plain,
    plain_other: Option<Box<str>>,
    /// The document says `oob: true` (in the struct's padding: a `Link` stays 48 bytes).
    oob: bool,
    /// What few links have (a time window, a fallback, rules), boxed so that the rest stay
    /// 48 bytes.
    window: Option<Box<Window>>,
}

/// When a link works, where it sends people when it does not, and whom it sends elsewhere.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Window {
    /// Unix nanoseconds from which it works (`i64::MIN`: always) and until which (`i64::MAX`:
    /// never ends). Instants past 2262 saturate.
    valid_from_ns: i64,
    expires_ns: i64,
    fallback: Option<Box<str>>,
    targets: Box<[Rule]>,
}

/// One of a link's `targets`: where it sends the visitors its conditions all match (an empty
/// list is no condition).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// Any of these operating systems.
    pub os: Box<[Os]>,
    /// Any of these kinds of device.
    pub device: Box<[Device]>,
    /// Any of these as the visitor's most preferred language.
    pub lang: Box<[Language]>,
    /// Where to, checked as a link's `url` is.
    pub url: Box<str>,
    /// The `Location` of a plain `GET /{id}` this rule matches, worked out once as a link's:
    /// `None` for an internal redirect, which the full resolution follows.
    plain: Option<Box<str>>,
}

impl Rule {
    /// The `Location` for a plain `GET /{id}` this rule matches, when it is a direct redirect.
    pub fn plain_location(&self) -> Option<&str> {
        self.plain.as_deref()
    }

    /// Whether `visitor` is one this rule sends to its `url`.
    pub fn matches(&self, visitor: &Visitor<'_>) -> bool {
        (self.os.is_empty() || visitor.client().os.is_some_and(|os| self.os.contains(&os)))
            && (self.device.is_empty() || visitor.client().device.is_some_and(|d| self.device.contains(&d)))
            && (self.lang.is_empty() || visitor.language().is_some_and(|l| self.lang.contains(&l)))
    }

    /// A rule as a document holds it: `{"when": {"os": [...], ...}, "url": "..."}`.
    pub fn from_value(value: &serde_json::Value) -> Result<Rule, String> {
        let url = value.get("url").and_then(|u| u.as_str()).ok_or("it has no string \"url\"")?;
        let plain = check_target(url).map_err(|e| format!("\"url\": {e}"))?.map(String::into_boxed_str);
        let when = value.get("when").and_then(|w| w.as_object()).ok_or("it has no \"when\" object")?;
        fn names<T>(
            when: &serde_json::Map<String, serde_json::Value>,
            key: &str,
            parse: fn(&str) -> Option<T>,
            allowed: &str,
        ) -> Result<Box<[T]>, String> {
            match when.get(key) {
                None => Ok(Box::new([])),
                Some(serde_json::Value::Array(items)) => items
                    .iter()
                    .map(|item| {
                        item.as_str()
                            .and_then(parse)
                            .ok_or_else(|| format!("\"{key}\" holds {item}; allowed: {allowed}"))
                    })
                    .collect(),
                Some(other) => Err(format!("\"{key}\" is {other}, not a list")),
            }
        }
        if let Some(key) = when.keys().find(|k| !["os", "device", "lang"].contains(&k.as_str())) {
            return Err(format!("\"when\" holds \"{key}\", which is no condition"));
        }
        let rule = Rule {
            os: names(when, "os", Os::parse, &Os::NAMES.join(", "))?,
            device: names(when, "device", Device::parse, &Device::NAMES.join(", "))?,
            lang: names(when, "lang", Language::parse, "language codes like fr or de")?,
            url: url.into(),
            plain,
        };
        if rule.os.is_empty() && rule.device.is_empty() && rule.lang.is_empty() {
            return Err("it has no condition".into());
        }
        Ok(rule)
    }

    /// The rule as a document holds it.
    pub fn to_value(&self) -> serde_json::Value {
        let mut when = serde_json::Map::new();
        let os: Vec<&str> = self.os.iter().map(|o| o.name()).collect();
        let device: Vec<&str> = self.device.iter().map(|d| d.name()).collect();
        let lang: Vec<&str> = self.lang.iter().map(Language::as_str).collect();
        for (key, names) in [("os", os), ("device", device), ("lang", lang)] {
            if !names.is_empty() {
                when.insert(key.into(), names.into());
            }
        }
        serde_json::json!({"when": when, "url": &*self.url})
    }
}

/// A link's document fields, as a cache snapshot stores them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkParts {
    /// The stored target.
    pub url: Box<str>,
    /// `inactive: true`.
    pub inactive: bool,
    /// `valid_from` as Unix nanoseconds (`i64::MIN`: always).
    pub valid_from_ns: i64,
    /// `expires` as Unix nanoseconds (`i64::MAX`: never).
    pub expires_ns: i64,
    /// `fallback`.
    pub fallback: Option<Box<str>>,
    /// `targets`.
    pub targets: Box<[Rule]>,
    /// `oob: true`.
    pub oob: bool,
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

/// An RFC 3339 instant as Unix nanoseconds, saturated to the range of `i64`.
fn instant_ns(value: Option<String>, name: &'static str, absent: i64) -> Result<i64, UnusableLink> {
    match value {
        None => Ok(absent),
        Some(text) => match OffsetDateTime::parse(&text, &Rfc3339) {
            Ok(t) => Ok(t.unix_timestamp_nanos().clamp(i64::MIN as i128, i64::MAX as i128) as i64),
            Err(_) => Err(UnusableLink::BadTime(name, text)),
        },
    }
}

/// What [`Link::plain_location`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Plain {
    /// The stored `url` is already the `Location`.
    SameAsUrl,
    /// The `Location` differs from the stored `url` (its empty path sent as `/`): in
    /// `plain_other`.
    Other,
    /// Not a direct redirect: an internal redirect.
    Resolve,
    /// The stored `url` is not one the proxy sends (a document from before the validation
    /// function, or replicated in): the link never works, and acts as inactive, its
    /// `fallback` (or the server's) served instead of a 404 (contracts, "Redirect responses").
    Unservable,
}

impl Link {
    /// Reads a document; `Err` says why it cannot be served. CouchDB's validation keeps such
    /// documents out, but the proxy does not trust the database to have always had it.
    pub fn from_doc(doc: LinkDoc) -> Result<Link, UnusableLink> {
        let url = field(doc.url, "url")?.ok_or(UnusableLink::NoUrl)?;
        let inactive = field(doc.inactive, "inactive")?;
        let oob = field(doc.oob, "oob")?;
        let expires_ns = instant_ns(field(doc.expires, "expires")?, "expires", i64::MAX)?;
        let valid_from_ns = instant_ns(field(doc.valid_from, "valid_from")?, "valid_from", i64::MIN)?;
        let fallback = field(doc.fallback, "fallback")?;
        let targets = field(doc.targets, "targets")?
            .unwrap_or_default()
            .iter()
            .enumerate()
            .map(|(rule, value)| Rule::from_value(value).map_err(|reason| UnusableLink::BadRule { rule, reason }))
            .collect::<Result<_, _>>()?;
        Link::from_parts(LinkParts {
            url: url.into_boxed_str(),
            inactive: inactive.unwrap_or(false),
            valid_from_ns,
            expires_ns,
            fallback: fallback.map(String::into_boxed_str),
            targets,
            oob: oob.unwrap_or(false),
        })
    }

    /// A link from what [`Link::parts`] gave (a cache snapshot), checked as a document's are:
    /// a snapshot written by another version of couchlink is not trusted to agree on targets.
    pub fn from_parts(parts: LinkParts) -> Result<Link, UnusableLink> {
        let LinkParts { url, inactive, valid_from_ns, expires_ns, fallback, targets, oob } = parts;
        // Served only as written (see `target`): the `Location` is the stored text itself, but
        // for an empty path's `/`.
        let (plain, plain_other) = match check_target(&url) {
            Ok(None) => (Plain::Resolve, None),
            Ok(Some(location)) if *location == *url => (Plain::SameAsUrl, None),
            Ok(Some(location)) => (Plain::Other, Some(location.into_boxed_str())),
            Err(_) => (Plain::Unservable, None),
        };
        if let Some(fallback) = &fallback {
            check_target(fallback).map_err(UnusableLink::BadFallback)?;
        }
        for (rule, target) in targets.iter().enumerate() {
            check_target(&target.url).map_err(|e| UnusableLink::BadRule { rule, reason: format!("\"url\": {e}") })?;
        }
        let plain_link =
            valid_from_ns == i64::MIN && expires_ns == i64::MAX && fallback.is_none() && targets.is_empty();
        let window = (!plain_link).then(|| Box::new(Window { valid_from_ns, expires_ns, fallback, targets }));
        Ok(Link { url, inactive, plain, plain_other, oob, window })
    }

    /// What the link was made from, for [`Link::from_parts`].
    pub fn parts(&self) -> LinkParts {
        let (valid_from_ns, expires_ns, fallback, targets) = match &self.window {
            Some(w) => (w.valid_from_ns, w.expires_ns, w.fallback.clone(), w.targets.clone()),
            None => (i64::MIN, i64::MAX, None, Box::default()),
        };
        LinkParts {
            url: self.url.clone(),
            inactive: self.inactive,
            valid_from_ns,
            expires_ns,
            fallback,
            targets,
            oob: self.oob,
        }
    }

    /// Its `targets` (none for most links).
    pub fn targets(&self) -> &[Rule] {
        self.window.as_ref().map_or(&[], |w| &w.targets)
    }

    /// Where the link sends `visitor` while it works: the first rule of `targets` that matches,
    /// else its `url`.
    pub fn target_for(&self, visitor: &Visitor<'_>) -> &str {
        self.targets().iter().find(|rule| rule.matches(visitor)).map_or(&self.url, |rule| &rule.url)
    }

    /// Where people go while the link does not work (inactive, expired, not yet started).
    pub fn fallback(&self) -> Option<&str> {
        self.window.as_ref().and_then(|w| w.fallback.as_deref())
    }

    /// Whether the link has a start still to come at `now`.
    pub fn not_started(&self, now: OffsetDateTime) -> bool {
        self.window.as_ref().is_some_and(|w| now.unix_timestamp_nanos() < w.valid_from_ns as i128)
    }

    /// The `Location` for a plain `GET /{id}` (no extra path, no query), or `None` when that
    /// request needs the full resolution (an internal redirect) or would be refused.
    pub fn plain_location(&self) -> Option<&str> {
        match self.plain {
            Plain::SameAsUrl => Some(&self.url),
            Plain::Other => self.plain_other.as_deref(),
            Plain::Resolve | Plain::Unservable => None,
        }
    }

    /// Why the stored `url` cannot be served, when it cannot: the link then acts as inactive.
    pub fn unservable_url(&self) -> Option<NotCanonical> {
        (self.plain == Plain::Unservable).then(|| check_target(&self.url).err()).flatten()
    }

    /// The out-of-band invitation the link's `url` carries, as JSON text, when the document
    /// says `oob: true` and the `url` has an `oob` (RFC 0434) or `_oob` (DIDComm v2) parameter
    /// holding base64url JSON (padded or not, as RFC 0434 requires both be read).
    pub fn oob_invitation(&self) -> Option<String> {
        use base64::Engine;
        if !self.oob {
            return None;
        }
        let url = url::Url::parse(&self.url).ok()?;
        let (_, value) = url.query_pairs().find(|(k, _)| k == "oob" || k == "_oob")?;
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(value.trim_end_matches('=')).ok()?;
        let json: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
        json.is_object().then(|| json.to_string())
    }

    /// The target to redirect to at `now`, or `None` when the link is inactive or expired.
    /// Checked on every request, so a cached link expires on time (the DIDComm Shorten URL
    /// protocol: a link must stop working once its validity ends).
    pub fn live_target(&self, now: OffsetDateTime) -> Option<&str> {
        let in_window = self.window.as_ref().is_none_or(|w| {
            let now = now.unix_timestamp_nanos();
            w.valid_from_ns as i128 <= now && now < w.expires_ns as i128
        });
        (!self.inactive && in_window && self.plain != Plain::Unservable).then_some(&*self.url)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    fn parse(json: &str) -> Result<Link, UnusableLink> {
        Link::from_doc(serde_json::from_str(json).expect("a link document's shape"))
    }

    #[test]
    fn live_link_gives_its_url() {
        let link = parse(r#"{"_id":"H83if","url":"https://example.com/wp/?p=14","inactive":false}"#).unwrap();
        assert_eq!(link.live_target(OffsetDateTime::now_utc()), Some("https://example.com/wp/?p=14"));
    }

    #[test]
    fn inactive_defaults_to_false_and_true_turns_it_off() {
        let on = parse(r#"{"url":"https://a.example"}"#).unwrap();
        assert!(on.live_target(OffsetDateTime::now_utc()).is_some());
        let off = parse(r#"{"url":"https://a.example","inactive":true}"#).unwrap();
        assert_eq!(off.live_target(OffsetDateTime::now_utc()), None);
    }

    #[test]
    fn expiry_is_inclusive_of_the_instant() {
        let link = parse(r#"{"url":"https://a.example","expires":"2026-12-31T23:59:59Z"}"#).unwrap();
        assert!(link.live_target(datetime!(2026-12-31 23:59:58.999 UTC)).is_some());
        assert_eq!(link.live_target(datetime!(2026-12-31 23:59:59 UTC)), None);
        assert_eq!(link.live_target(datetime!(2027-01-01 00:00:00 +00:30)), Some("https://a.example"));
    }

    #[test]
    fn a_link_fits_a_64_byte_arc_block() {
        // Two counts (16 bytes) and the link: one allocator size class per cached link.
        assert!(std::mem::size_of::<Link>() <= 48, "{} bytes", std::mem::size_of::<Link>());
    }

    #[test]
    fn plain_location_is_worked_out_once() {
        let same = parse(r#"{"url":"https://example.com/wp/?p=14"}"#).unwrap();
        assert_eq!(same.plain_location(), Some("https://example.com/wp/?p=14"));
        let bare = parse(r#"{"url":"https://example.com"}"#).unwrap();
        assert_eq!(bare.plain_location(), Some("https://example.com/"));
        assert_eq!(parse(r#"{"url":"/H83if"}"#).unwrap().plain_location(), None);
        // Anything not already in the form sent is never sent: the link acts as inactive, so
        // its fallback is served where it has one.
        let now = OffsetDateTime::now_utc();
        for url in ["https://example.com/café", "javascript:alert(1)", "https:evil.com", "http://evil.com\tx/"] {
            let link = parse(&serde_json::json!({"url": url, "fallback": "/H83if"}).to_string()).unwrap();
            assert_eq!((link.plain_location(), link.live_target(now)), (None, None), "{url:?}");
            assert!(link.unservable_url().is_some(), "{url:?}");
            assert_eq!(link.fallback(), Some("/H83if"));
            assert_eq!(Link::from_parts(link.parts()).unwrap(), link, "the same from a snapshot");
        }
        assert_eq!(same.unservable_url(), None);
    }

    #[test]
    fn rules_are_read_checked_and_written_back_alike() {
        let doc = r#"{"url":"https://a.example/","targets":[
            {"when":{"os":["ios"],"lang":["FR"]},"url":"https://apps.apple.com/app/id1"},
            {"when":{"device":["tablet","desktop"]},"url":"/H83if"}]}"#;
        let link = parse(doc).unwrap();
        assert_eq!(link.targets().len(), 2);
        assert_eq!(link.targets()[0].to_value()["when"], serde_json::json!({"os": ["ios"], "lang": ["fr"]}));
        let again = Rule::from_value(&link.targets()[1].to_value()).unwrap();
        assert_eq!(again, link.targets()[1]);
        assert_eq!(Link::from_parts(link.parts()).unwrap(), link, "a snapshot's parts make the same link");
        let bad = |targets: &str| parse(&format!(r#"{{"url":"https://a.example/","targets":{targets}}}"#));
        assert!(matches!(
            bad(r#"[{"when":{"os":["ios"]},"url":"https://A.example/"}]"#),
            Err(UnusableLink::BadRule { rule: 0, .. })
        ));
        assert!(matches!(
            bad(r#"[{"when":{"os":["ios"]},"url":"/x"},{"when":{},"url":"/x"}]"#),
            Err(UnusableLink::BadRule { rule: 1, .. })
        ));
        assert!(matches!(bad(r#"[{"when":{"os":["beos"]},"url":"/x"}]"#), Err(UnusableLink::BadRule { .. })));
        assert_eq!(bad(r#"{"os":"ios"}"#), Err(UnusableLink::WrongType("targets")));
    }

    #[test]
    fn a_window_and_a_fallback_decide_when_the_url_is_served() {
        let link = parse(r#"{"url":"https://a.example/","valid_from":"2026-12-01T00:00:00Z","expires":"2026-12-31T00:00:00Z","fallback":"/Other"}"#).unwrap();
        assert_eq!(link.live_target(datetime!(2026-11-30 23:59:59 UTC)), None);
        assert!(link.not_started(datetime!(2026-11-30 23:59:59 UTC)));
        assert_eq!(link.live_target(datetime!(2026-12-01 00:00:00 UTC)), Some("https://a.example/"));
        assert_eq!(link.live_target(datetime!(2026-12-31 00:00:00 UTC)), None);
        assert_eq!(link.fallback(), Some("/Other"));
        assert!(matches!(
            parse(r#"{"url":"https://a.example/","fallback":"ftp://a.example/"}"#),
            Err(UnusableLink::BadFallback(_))
        ));
        assert_eq!(
            parse(r#"{"url":"https://a.example/","valid_from":"soon"}"#),
            Err(UnusableLink::BadTime("valid_from", "soon".into()))
        );
    }

    #[test]
    fn malformed_documents_are_refused_with_a_reason() {
        assert_eq!(parse(r#"{"inactive":false}"#), Err(UnusableLink::NoUrl));
        assert_eq!(
            parse(r#"{"url":"https://a.example","expires":"tomorrow"}"#),
            Err(UnusableLink::BadTime("expires", "tomorrow".into()))
        );
        assert!(UnusableLink::NoUrl.to_string().contains("url"));
        // Wrong JSON types are documents all the same, turned down with the field named.
        assert_eq!(parse(r#"{"url":42}"#), Err(UnusableLink::WrongType("url")));
        assert_eq!(parse(r#"{"url":"https://a.example","inactive":"no"}"#), Err(UnusableLink::WrongType("inactive")));
        assert_eq!(parse(r#"{"url":"https://a.example","oob":"yes"}"#), Err(UnusableLink::WrongType("oob")));
        assert_eq!(parse(r#"{"url":"https://a.example","expires":1}"#), Err(UnusableLink::WrongType("expires")));
        assert_eq!(parse(r#"{"url":["https://a.example"]}"#), Err(UnusableLink::WrongType("url")));
        // Null is absence.
        assert!(parse(r#"{"url":"https://a.example","inactive":null}"#).is_ok());
    }
}
