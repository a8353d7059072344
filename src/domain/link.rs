//! `Link`: a link document as the proxy uses it (docs/reference.md, "Link documents").

use serde::Deserialize;

use super::password::{BadPasswordHash, PasswordHash};
use super::target::{check_target, NotCanonical};
use time::{format_description::well_known::Rfc3339, OffsetDateTime};

use super::rule::{BadRule, Rule};
use crate::visitor::Visitor;

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
    /// The hash of the password a visitor must give (docs/reference.md, "Passwords").
    #[serde(default)]
    pub password: Option<Typed<String>>,
    /// Counted redirects after which the link acts as expired (docs/reference.md, "Visit
    /// limits").
    #[serde(default)]
    pub max_visits: Option<Typed<serde_json::Number>>,
    /// `true`: bots' redirects count toward `max_visits` too.
    #[serde(default)]
    pub max_visits_bots: Option<Typed<bool>>,
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
        reason: BadRule,
    },
    /// A field of the wrong JSON type.
    #[error("\"{0}\" has the wrong JSON type")]
    WrongType(&'static str),
    /// The `password` is not a hash the proxy checks against: the link is never served open.
    #[error("\"password\": {0}")]
    BadPassword(BadPasswordHash),
    /// `max_visits` is not a whole number from 1 to [`MAX_VISITS`].
    #[error("\"max_visits\" must be a whole number from 1 to {MAX_VISITS}")]
    BadMaxVisits,
}

/// The largest `max_visits`.
pub const MAX_VISITS: u32 = 1_000_000_000;

/// A link's visit limit: after `max` counted redirects it acts as expired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VisitLimit {
    /// Counted redirects allowed, 1 to [`MAX_VISITS`].
    pub max: u32,
    /// Whether bots' redirects are counted too.
    pub bots: bool,
}

impl UnusableLink {
    /// The document's field at fault.
    pub fn field(&self) -> &'static str {
        match self {
            UnusableLink::NoUrl => "url",
            UnusableLink::BadTime(name, _) | UnusableLink::WrongType(name) => name,
            UnusableLink::BadFallback(_) => "fallback",
            UnusableLink::BadRule { .. } => "targets",
            UnusableLink::BadPassword(_) => "password",
            UnusableLink::BadMaxVisits => "max_visits",
        }
    }
}

/// What a link document does at an instant, as `couchlink qr --check` and the console say it.
/// The console's model decides the same (`console/link.js`); both are held to
/// `tests/link_status.json`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// It redirects.
    Live,
    /// `inactive: true`.
    Inactive,
    /// Its `expires` has come.
    Expired,
    /// Its `valid_from` has not.
    NotStarted,
    /// The proxy will not serve it as written: a `url` it refuses acts as inactive (the
    /// fallback, or 404); anything else answers 404.
    Refused {
        /// The field at fault.
        field: &'static str,
        /// Why, for people.
        why: String,
    },
}

impl Status {
    /// What `doc` does at `now`.
    pub fn of(doc: LinkDoc, now: OffsetDateTime) -> Status {
        match Link::from_doc(doc) {
            Ok(link) => link.status(now),
            Err(e) => Status::Refused { field: e.field(), why: e.to_string() },
        }
    }

    /// Its name, as the page shows it: `live`, `inactive`, `expired`, `not yet started`,
    /// `refused`.
    pub fn name(&self) -> &'static str {
        match self {
            Status::Live => "live",
            Status::Inactive => "inactive",
            Status::Expired => "expired",
            Status::NotStarted => "not yet started",
            Status::Refused { .. } => "refused",
        }
    }
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
    /// What few links have (a time window, a fallback, rules, a password), boxed so that the
    /// rest stay 48 bytes.
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
    password: Option<PasswordHash>,
    limit: Option<VisitLimit>,
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
    /// `password`.
    pub password: Option<PasswordHash>,
    /// `max_visits` and `max_visits_bots`.
    pub limit: Option<VisitLimit>,
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
        let password = field(doc.password, "password")?
            .map(|text| PasswordHash::parse(&text).map_err(UnusableLink::BadPassword))
            .transpose()?;
        let bots = field(doc.max_visits_bots, "max_visits_bots")?.unwrap_or(false);
        let limit = match doc.max_visits {
            None => None,
            // A whole number however written (`500` or `500.0`: JavaScript, and so the
            // validation function, cannot tell them apart).
            Some(Typed::Right(n)) => match n.as_f64() {
                Some(max) if max.fract() == 0.0 && (1.0..=f64::from(MAX_VISITS)).contains(&max) => {
                    Some(VisitLimit { max: max as u32, bots })
                }
                _ => return Err(UnusableLink::BadMaxVisits),
            },
            Some(Typed::Wrong(_)) => return Err(UnusableLink::BadMaxVisits),
        };
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
            password,
            limit,
        })
    }

    /// A link from what [`Link::parts`] gave (a cache snapshot), checked as a document's are:
    /// a snapshot written by another version of couchlink is not trusted to agree on targets.
    pub fn from_parts(parts: LinkParts) -> Result<Link, UnusableLink> {
        let LinkParts { url, inactive, valid_from_ns, expires_ns, fallback, targets, oob, password, limit } = parts;
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
            for variant in target.variants() {
                check_target(&variant.url).map_err(|e| UnusableLink::BadRule { rule, reason: BadRule::Url(e) })?;
            }
        }
        let plain_link = valid_from_ns == i64::MIN
            && expires_ns == i64::MAX
            && fallback.is_none()
            && targets.is_empty()
            && password.is_none()
            && limit.is_none();
        let window =
            (!plain_link).then(|| Box::new(Window { valid_from_ns, expires_ns, fallback, targets, password, limit }));
        Ok(Link { url, inactive, plain, plain_other, oob, window })
    }

    /// What the link was made from, for [`Link::from_parts`].
    pub fn parts(&self) -> LinkParts {
        let (valid_from_ns, expires_ns, fallback, targets, password, limit) = match &self.window {
            Some(w) => {
                (w.valid_from_ns, w.expires_ns, w.fallback.clone(), w.targets.clone(), w.password.clone(), w.limit)
            }
            None => (i64::MIN, i64::MAX, None, Box::default(), None, None),
        };
        LinkParts {
            url: self.url.clone(),
            inactive: self.inactive,
            valid_from_ns,
            expires_ns,
            fallback,
            targets,
            oob: self.oob,
            password,
            limit,
        }
    }

    /// Its `targets` (none for most links).
    pub fn targets(&self) -> &[Rule] {
        self.window.as_ref().map_or(&[], |w| &w.targets)
    }

    /// Where the link (whose ID is `id`) sends `visitor` while it works: the first rule of
    /// `targets` that matches (for a split, the visitor's variant), else its `url`.
    pub fn target_for(&self, visitor: &Visitor<'_>, id: &str) -> &str {
        match self.targets().iter().find(|rule| rule.matches(visitor)) {
            Some(rule) => &rule.variants()[rule.pick(visitor, id)].url,
            None => &self.url,
        }
    }

    /// The hash of the password a visitor must give while the link works (`None` for most).
    pub fn password(&self) -> Option<&PasswordHash> {
        self.window.as_ref().and_then(|w| w.password.as_ref())
    }

    /// Whether it has a password or a visit limit (most links have neither).
    pub fn guarded(&self) -> bool {
        self.window.as_ref().is_some_and(|w| w.password.is_some() || w.limit.is_some())
    }

    /// Its visit limit (`None` for most).
    pub fn limit(&self) -> Option<VisitLimit> {
        self.window.as_ref().and_then(|w| w.limit)
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

    /// What the link does at `now` (an unservable `url` first: it acts as inactive whatever
    /// else holds).
    pub fn status(&self, now: OffsetDateTime) -> Status {
        if let Some(e) = self.unservable_url() {
            Status::Refused { field: "url", why: e.to_string() }
        } else if self.inactive {
            Status::Inactive
        } else if self.not_started(now) {
            Status::NotStarted
        } else if self.live_target(now).is_none() {
            Status::Expired
        } else {
            Status::Live
        }
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

    /// The table the console's model is held to as well (console/test/link.test.js).
    #[test]
    fn a_links_status_is_the_shared_tables() {
        let table: serde_json::Value = serde_json::from_str(include_str!("../../tests/link_status.json")).unwrap();
        let now = OffsetDateTime::parse(table["now"].as_str().unwrap(), &Rfc3339).unwrap();
        let cases = table["cases"].as_array().unwrap();
        assert!(cases.len() >= 25);
        for case in cases {
            let doc: LinkDoc = serde_json::from_value(case["doc"].clone()).unwrap();
            let status = Status::of(doc, now);
            assert_eq!(status.name(), case["status"].as_str().unwrap(), "{}: {status:?}", case["doc"]);
            if let Status::Refused { field, .. } = status {
                assert_eq!(Some(field), case["field"].as_str(), "{}", case["doc"]);
            }
        }
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
