//! `Link`: a link document as the proxy uses it (docs/reference.md, "Link documents").

use serde::Deserialize;

use super::password::{BadPasswordHash, PasswordHash};
use super::target::{canonical_location, check_internal, NotCanonical};
use time::{format_description::well_known::Rfc3339, OffsetDateTime};

use crate::visitor::geoip::Country;
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
        reason: String,
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

/// One of a link's `targets`: where it sends the visitors its conditions all match (an empty
/// list is no condition): one `url`, or a `split` between weighted variants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// Any of these operating systems.
    pub os: Box<[Os]>,
    /// Any of these kinds of device.
    pub device: Box<[Device]>,
    /// Any of these as the visitor's most preferred language.
    pub lang: Box<[Language]>,
    /// Any of these as the country the visitor's address is in.
    pub country: Box<[Country]>,
    /// Query parameters of the request: each name with the values it may have (any of them).
    pub query: Box<[QueryCondition]>,
    /// Where to: one destination (weight 1), or a split's variants.
    variants: Box<[Variant]>,
    /// Whether the rule is a `split` (else its one destination is its `url`).
    split: bool,
}

/// A query parameter's name, and the values any of which it may have.
pub type QueryCondition = (Box<str>, Box<[Box<str>]>);

/// One destination of a rule: its share of the visitors (for a split) and its target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variant {
    /// Its weight among the split's variants (0: none sent there).
    pub weight: u32,
    /// Where to, checked as a link's `url` is.
    pub url: Box<str>,
    /// The `Location` of a plain `GET /{id}` sent here, worked out once as a link's: `None`
    /// for an internal redirect, which the full resolution follows.
    plain: Option<Box<str>>,
}

impl Variant {
    /// The `Location` for a plain `GET /{id}` sent here, when it is a direct redirect.
    pub fn plain_location(&self) -> Option<&str> {
        self.plain.as_deref()
    }

    fn new(weight: u32, url: &str) -> Result<Variant, String> {
        let plain = check_target(url).map_err(|e| e.to_string())?.map(String::into_boxed_str);
        Ok(Variant { weight, url: url.into(), plain })
    }
}

/// The conditions a rule may hold, in the order documented.
const CONDITIONS: [&str; 5] = ["os", "device", "lang", "country", "query"];

impl Rule {
    /// Its destinations: one, or a split's variants in the order written.
    pub fn variants(&self) -> &[Variant] {
        &self.variants
    }

    /// Whether it is a split.
    pub fn is_split(&self) -> bool {
        self.split
    }

    /// Whether it asks where the visitor is.
    pub fn asks_country(&self) -> bool {
        !self.country.is_empty()
    }

    /// Whether `visitor` is one this rule sends to its destination.
    pub fn matches(&self, visitor: &Visitor<'_>) -> bool {
        (self.os.is_empty() || visitor.client().os.is_some_and(|os| self.os.contains(&os)))
            && (self.device.is_empty() || visitor.client().device.is_some_and(|d| self.device.contains(&d)))
            && (self.lang.is_empty() || visitor.language().is_some_and(|l| self.lang.contains(&l)))
            && (self.country.is_empty() || visitor.country().is_some_and(|c| self.country.contains(&c)))
            && self.query.iter().all(|(name, values)| visitor.query_has(name, values))
    }

    /// Which variant `visitor` gets: the one destination, or for a split a stable function of
    /// the visitor's tracking ID (else its address) and `link`, so that they keep it on every
    /// visit, visitors spread by weight, and changing one weight moves only the visitors it
    /// must (weighted rendezvous hashing: each variant scores `-ln(u) / weight`, with `u` a
    /// hash of visitor, link and variant in (0, 1); the lowest score wins).
    pub fn pick(&self, visitor: &Visitor<'_>, link: &str) -> usize {
        if !self.split {
            return 0;
        }
        let key = visitor.sticky_key();
        let mut best = (f64::INFINITY, 0);
        for (i, variant) in self.variants.iter().enumerate() {
            if variant.weight == 0 {
                continue;
            }
            let u = unit_hash(&[&key, link.as_bytes(), variant.url.as_bytes()]);
            let score = -u.ln() / f64::from(variant.weight);
            if score < best.0 {
                best = (score, i);
            }
        }
        best.1
    }

    /// A rule as a document holds it: `{"when": {"os": [...], ...}, "url": "..."}`, or with
    /// `"split": [{"weight": 50, "url": "..."}, ...]` instead of `"url"` (and `"when"` then
    /// optional: a split for every visitor the rules before it did not take).
    pub fn from_value(value: &serde_json::Value) -> Result<Rule, String> {
        let object = value.as_object().ok_or("it is not an object")?;
        if let Some(key) = object.keys().find(|k| !["when", "url", "split"].contains(&k.as_str())) {
            return Err(format!("it holds \"{key}\"; a rule holds \"when\" and \"url\" or \"split\""));
        }
        let (variants, split) = match (object.get("url"), object.get("split")) {
            (Some(_), Some(_)) => return Err("it has both \"url\" and \"split\"; give one".into()),
            (None, None) => return Err("it has no string \"url\"".into()),
            (Some(url), None) => {
                let url = url.as_str().ok_or("it has no string \"url\"")?;
                (vec![Variant::new(1, url).map_err(|e| format!("\"url\": {e}"))?], false)
            }
            (None, Some(split)) => (split_variants(split)?, true),
        };
        let empty = serde_json::Map::new();
        let when = match object.get("when") {
            Some(when) => when.as_object().ok_or("its \"when\" is not an object")?,
            None if split => &empty,
            None => return Err("it has no \"when\" object".into()),
        };
        fn names<T>(
            when: &serde_json::Map<String, serde_json::Value>,
            key: &str,
            parse: fn(&str) -> Option<T>,
            allowed: &str,
        ) -> Result<Box<[T]>, String> {
            match when.get(key) {
                None => Ok(Box::new([])),
                Some(serde_json::Value::Array(items)) if !items.is_empty() => items
                    .iter()
                    .map(|item| {
                        item.as_str()
                            .and_then(parse)
                            .ok_or_else(|| format!("\"when\".\"{key}\" holds {item}; allowed: {allowed}"))
                    })
                    .collect(),
                Some(other) => Err(format!("\"when\".\"{key}\" is {other}, not a list of one or more values")),
            }
        }
        if let Some(key) = when.keys().find(|k| !CONDITIONS.contains(&k.as_str())) {
            return Err(format!("\"when\" holds \"{key}\", which is no condition"));
        }
        let rule = Rule {
            os: names(when, "os", Os::parse, &Os::NAMES.join(", "))?,
            device: names(when, "device", Device::parse, &Device::NAMES.join(", "))?,
            lang: names(when, "lang", Language::parse, "language codes like fr or de")?,
            country: names(when, "country", Country::parse, "ISO 3166-1 codes in upper case, like IE or GB")?,
            query: query_condition(when.get("query"))?,
            variants: variants.into(),
            split,
        };
        let conditions = rule.os.len() + rule.device.len() + rule.lang.len() + rule.country.len() + rule.query.len();
        if conditions == 0 && !split {
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
        let country: Vec<&str> = self.country.iter().map(Country::as_str).collect();
        for (key, names) in [("os", os), ("device", device), ("lang", lang), ("country", country)] {
            if !names.is_empty() {
                when.insert(key.into(), names.into());
            }
        }
        if !self.query.is_empty() {
            let query: serde_json::Map<String, serde_json::Value> = self
                .query
                .iter()
                .map(|(name, values)| (name.to_string(), values.iter().map(|v| &**v).collect::<Vec<&str>>().into()))
                .collect();
            when.insert("query".into(), query.into());
        }
        let mut rule = serde_json::Map::new();
        if !when.is_empty() || !self.split {
            rule.insert("when".into(), when.into());
        }
        if self.split {
            let variants: Vec<serde_json::Value> =
                self.variants.iter().map(|v| serde_json::json!({"weight": v.weight, "url": &*v.url})).collect();
            rule.insert("split".into(), variants.into());
        } else {
            rule.insert("url".into(), serde_json::Value::from(&*self.variants[0].url));
        }
        rule.into()
    }
}

/// Most variants a split may have.
pub const MAX_VARIANTS: usize = 16;

/// A split's variants: `[{"weight": N, "url": "..."}, ...]`, weights whole numbers from 0 to
/// 1,000,000 and not all 0, each url once.
fn split_variants(split: &serde_json::Value) -> Result<Vec<Variant>, String> {
    let items = split.as_array().filter(|items| items.len() >= 2 && items.len() <= MAX_VARIANTS).ok_or_else(|| {
        format!("\"split\" must be a list of 2 to {MAX_VARIANTS} variants, like [{{\"weight\": 50, \"url\": \"https://example.com/a\"}}, ...]")
    })?;
    let mut variants: Vec<Variant> = Vec::with_capacity(items.len());
    for (n, item) in items.iter().enumerate() {
        let which = format!("variant {} of \"split\"", n + 1);
        let object = item.as_object().ok_or_else(|| format!("{which} is not an object with \"weight\" and \"url\""))?;
        if let Some(key) = object.keys().find(|k| !["weight", "url"].contains(&k.as_str())) {
            return Err(format!("{which} holds \"{key}\"; a variant holds \"weight\" and \"url\""));
        }
        let weight = object
            .get("weight")
            .and_then(serde_json::Value::as_u64)
            .filter(|w| *w <= 1_000_000)
            .ok_or_else(|| format!("{which}: \"weight\" must be a whole number from 0 to 1000000"))?;
        let url = object.get("url").and_then(|u| u.as_str()).ok_or_else(|| format!("{which} has no string \"url\""))?;
        if variants.iter().any(|v| &*v.url == url) {
            return Err(format!("{which}: \"url\" {url} is another variant's too"));
        }
        variants.push(Variant::new(weight as u32, url).map_err(|e| format!("{which}: \"url\": {e}"))?);
    }
    if variants.iter().all(|v| v.weight == 0) {
        return Err("every variant of \"split\" has weight 0".into());
    }
    Ok(variants)
}

/// `"query": {"utm_source": ["flyer", "poster"]}`: each name with one or more values.
fn query_condition(value: Option<&serde_json::Value>) -> Result<Box<[QueryCondition]>, String> {
    let Some(value) = value else { return Ok(Box::new([])) };
    let object = value
        .as_object()
        .filter(|o| !o.is_empty())
        .ok_or("\"when\".\"query\" must be an object of parameter names, each with a list of values, like {\"utm_source\": [\"flyer\"]}")?;
    object
        .iter()
        .map(|(name, values)| {
            let bad = || format!("\"when\".\"query\".\"{name}\" must be a list of one or more strings");
            if name.is_empty() {
                return Err("\"when\".\"query\" names an empty parameter".to_owned());
            }
            let values = values.as_array().filter(|v| !v.is_empty()).ok_or_else(bad)?;
            let values = values.iter().map(|v| v.as_str().map(Box::from).ok_or_else(bad)).collect::<Result<_, _>>()?;
            Ok((Box::from(name.as_str()), values))
        })
        .collect()
}

/// A number in (0, 1) from `parts`, the same in every process and build.
fn unit_hash(parts: &[&[u8]]) -> f64 {
    ((stable_hash(parts) >> 11) as f64 + 0.5) / (1u64 << 53) as f64
}

/// A 64-bit hash of `parts`, the same in every process and build (a split's variant, an
/// import's fresh IDs): FNV-1a over the parts (each followed by a 0xff byte, which UTF-8 never
/// holds), then SplitMix64's finaliser.
pub fn stable_hash(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for &b in part.iter().chain(&[0xff]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
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
                check_target(&variant.url)
                    .map_err(|e| UnusableLink::BadRule { rule, reason: format!("\"url\": {e}") })?;
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

    fn split(weights: &[u32]) -> Rule {
        let variants: Vec<serde_json::Value> = weights
            .iter()
            .enumerate()
            .map(|(i, w)| serde_json::json!({"weight": w, "url": format!("https://example.com/{i}")}))
            .collect();
        Rule::from_value(&serde_json::json!({"split": variants})).unwrap()
    }

    /// 10,000 visitors with fresh tracking IDs, each the variant it gets.
    fn assign(rule: &Rule) -> Vec<usize> {
        (0..10_000)
            .map(|n| {
                let tid = format!("20261126120000{n:016x}");
                let visitor = Visitor::new(None, None).with_request(None, None, Some(tid.as_bytes()), None);
                rule.pick(&visitor, "H83if")
            })
            .collect()
    }

    #[test]
    fn a_split_spreads_visitors_by_weight_and_each_keeps_their_variant() {
        let rule = split(&[50, 30, 20]);
        let got = assign(&rule);
        for (variant, weight) in [(0, 50.0), (1, 30.0), (2, 20.0)] {
            let share = got.iter().filter(|&&v| v == variant).count() as f64 / 100.0;
            assert!((share - weight).abs() <= 2.0, "variant {variant}: {share}% for a weight of {weight}%");
        }
        assert_eq!(assign(&rule), got, "the same visitors get the same variants again");
        // Another link splits its visitors independently.
        let visitor = |n: usize| format!("20261126120000{n:016x}");
        let elsewhere: Vec<usize> = (0..10_000)
            .map(|n| {
                let tid = visitor(n);
                rule.pick(&Visitor::new(None, None).with_request(None, None, Some(tid.as_bytes()), None), "Other")
            })
            .collect();
        assert!(elsewhere.iter().zip(&got).filter(|(a, b)| a != b).count() > 3_000);
    }

    #[test]
    fn changing_one_weight_moves_only_the_visitors_it_must() {
        let before = assign(&split(&[50, 30, 20]));
        let after = assign(&split(&[50, 50, 20]));
        let moved: Vec<(usize, usize)> =
            before.iter().zip(&after).filter(|(a, b)| a != b).map(|(a, b)| (*a, *b)).collect();
        // Only toward the variant whose weight grew: nobody moves between the other two, or away.
        assert!(moved.iter().all(|&(_, to)| to == 1), "{:?}", &moved[..moved.len().min(10)]);
        // Its share goes from 30% to 50/120 = 41.7%: about 11.7% of visitors move.
        let share = moved.len() as f64 / 100.0;
        assert!((share - 11.7).abs() <= 2.0, "{share}% moved");
        // A weight of 0 stops a variant: only its visitors move.
        let stopped = assign(&split(&[50, 0, 20]));
        assert!(before.iter().zip(&stopped).all(|(b, s)| b == s || *b == 1));
        assert!(stopped.iter().all(|&v| v != 1));
    }

    #[test]
    fn country_query_and_split_rules_are_read_checked_and_written_back() {
        let value = serde_json::json!({
            "when": {"country": ["IE", "GB"], "query": {"utm_source": ["flyer", "poster"]}},
            "split": [{"weight": 3, "url": "https://example.com/a"}, {"weight": 1, "url": "/H83if/b"}]
        });
        let rule = Rule::from_value(&value).unwrap();
        assert_eq!(rule.to_value(), value);
        assert_eq!(Rule::from_value(&rule.to_value()).unwrap(), rule);
        let refused = [
            (
                serde_json::json!({"when": {"country": ["ie"]}, "url": "https://a.example/"}),
                "\"when\".\"country\" holds \"ie\"",
            ),
            (serde_json::json!({"when": {"country": []}, "url": "https://a.example/"}), "\"when\".\"country\" is []"),
            (
                serde_json::json!({"when": {"query": {"utm": "x"}}, "url": "https://a.example/"}),
                "\"when\".\"query\".\"utm\" must be a list",
            ),
            (
                serde_json::json!({"when": {"query": {}}, "url": "https://a.example/"}),
                "\"when\".\"query\" must be an object",
            ),
            (
                serde_json::json!({"split": [{"weight": 1, "url": "https://a.example/"}]}),
                "\"split\" must be a list of 2 to 16",
            ),
            (
                serde_json::json!({"split": [{"weight": 0, "url": "https://a.example/"}, {"weight": 0, "url": "https://b.example/"}]}),
                "every variant",
            ),
            (
                serde_json::json!({"split": [{"weight": -1, "url": "https://a.example/"}, {"weight": 1, "url": "https://b.example/"}]}),
                "variant 1 of \"split\": \"weight\"",
            ),
            (
                serde_json::json!({"split": [{"weight": 1, "url": "https://a.example/"}, {"weight": 1, "url": "https://a.example/"}]}),
                "variant 2 of \"split\": \"url\"",
            ),
            (
                serde_json::json!({"split": [{"weight": 1, "url": "ftp://a.example/"}, {"weight": 1, "url": "https://b.example/"}]}),
                "variant 1 of \"split\": \"url\":",
            ),
            (serde_json::json!({"when": {"os": ["ios"]}, "url": "https://a.example/", "split": []}), "it has both"),
        ];
        for (value, says) in refused {
            let error = Rule::from_value(&value).unwrap_err();
            assert!(error.starts_with(says), "{value}: {error}");
        }
    }

    #[test]
    fn a_query_condition_matches_any_of_its_values_form_decoded() {
        let rule = Rule::from_value(&serde_json::json!({
            "when": {"query": {"utm_source": ["flyer", "bus stop"]}}, "url": "https://example.com/print"
        }))
        .unwrap();
        for (query, matches) in [
            (Some("utm_source=flyer"), true),
            (Some("a=1&utm_source=bus+stop"), true),
            (Some("utm_source=bus%20stop&b=2"), true),
            (Some("utm_source=web"), false),
            (Some("utm_source=web&utm_source=flyer"), true),
            (Some("UTM_SOURCE=flyer"), false),
            (None, false),
        ] {
            let visitor = Visitor::new(None, None).with_request(query, None, None, None);
            assert_eq!(rule.matches(&visitor), matches, "{query:?}");
        }
    }
}
