//! `Rule`: one of a link's `targets` (docs/reference.md, "Rules"): whom it sends elsewhere,
//! where, and why a rule as a document holds it cannot be followed.

use super::target::{check_target, NotCanonical};
use crate::visitor::geoip::Country;
use crate::visitor::language::Language;
use crate::visitor::{Device, Os, Visitor};

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

    fn new(weight: u32, url: &str) -> Result<Variant, NotCanonical> {
        let plain = check_target(url)?.map(String::into_boxed_str);
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
    pub fn from_value(value: &serde_json::Value) -> Result<Rule, BadRule> {
        let object = value.as_object().ok_or(BadRule::NotAnObject)?;
        if let Some(key) = object.keys().find(|k| !["when", "url", "split"].contains(&k.as_str())) {
            return Err(BadRule::UnknownKey(key.clone()));
        }
        let (variants, split) = match (object.get("url"), object.get("split")) {
            (Some(_), Some(_)) => return Err(BadRule::UrlAndSplit),
            (None, None) => return Err(BadRule::NoUrl),
            (Some(url), None) => {
                let url = url.as_str().ok_or(BadRule::NoUrl)?;
                (vec![Variant::new(1, url).map_err(BadRule::Url)?], false)
            }
            (None, Some(split)) => (split_variants(split)?, true),
        };
        let empty = serde_json::Map::new();
        let when = match object.get("when") {
            Some(when) => when.as_object().ok_or(BadRule::WhenNotAnObject)?,
            None if split => &empty,
            None => return Err(BadRule::NoWhen),
        };
        fn names<T>(
            when: &serde_json::Map<String, serde_json::Value>,
            key: &'static str,
            parse: fn(&str) -> Option<T>,
            allowed: &str,
        ) -> Result<Box<[T]>, BadRule> {
            match when.get(key) {
                None => Ok(Box::new([])),
                Some(serde_json::Value::Array(items)) if !items.is_empty() => items
                    .iter()
                    .map(|item| {
                        item.as_str().and_then(parse).ok_or_else(|| BadRule::NotAllowed {
                            key,
                            item: item.to_string(),
                            allowed: allowed.to_owned(),
                        })
                    })
                    .collect(),
                Some(other) => Err(BadRule::NotAList { key, value: other.to_string() }),
            }
        }
        if let Some(key) = when.keys().find(|k| !CONDITIONS.contains(&k.as_str())) {
            return Err(BadRule::NoCondition(key.clone()));
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
            return Err(BadRule::NoConditions);
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
fn split_variants(split: &serde_json::Value) -> Result<Vec<Variant>, BadRule> {
    let items =
        split.as_array().filter(|items| items.len() >= 2 && items.len() <= MAX_VARIANTS).ok_or(BadRule::SplitSize)?;
    let mut variants: Vec<Variant> = Vec::with_capacity(items.len());
    for (n, item) in items.iter().enumerate() {
        let bad = |why: BadVariant| BadRule::Variant { variant: n, why };
        let object = item.as_object().ok_or(bad(BadVariant::NotAnObject))?;
        if let Some(key) = object.keys().find(|k| !["weight", "url"].contains(&k.as_str())) {
            return Err(bad(BadVariant::UnknownKey(key.clone())));
        }
        let weight = object
            .get("weight")
            .and_then(serde_json::Value::as_u64)
            .filter(|w| *w <= MAX_WEIGHT)
            .ok_or(bad(BadVariant::Weight))?;
        let url = object.get("url").and_then(|u| u.as_str()).ok_or(bad(BadVariant::NoUrl))?;
        if variants.iter().any(|v| &*v.url == url) {
            return Err(bad(BadVariant::SameUrl(url.to_owned())));
        }
        variants.push(Variant::new(weight as u32, url).map_err(|e| bad(BadVariant::Url(e)))?);
    }
    if variants.iter().all(|v| v.weight == 0) {
        return Err(BadRule::NoWeight);
    }
    Ok(variants)
}

/// The largest weight of a split's variant.
const MAX_WEIGHT: u64 = 1_000_000;

/// `"query": {"utm_source": ["flyer", "poster"]}`: each name with one or more values.
fn query_condition(value: Option<&serde_json::Value>) -> Result<Box<[QueryCondition]>, BadRule> {
    let Some(value) = value else { return Ok(Box::new([])) };
    let object = value.as_object().filter(|o| !o.is_empty()).ok_or(BadRule::QueryNotAnObject)?;
    object
        .iter()
        .map(|(name, values)| {
            let bad = || BadRule::QueryValues(name.clone());
            if name.is_empty() {
                return Err(BadRule::EmptyParameter);
            }
            let values = values.as_array().filter(|v| !v.is_empty()).ok_or_else(bad)?;
            let values = values.iter().map(|v| v.as_str().map(Box::from).ok_or_else(bad)).collect::<Result<_, _>>()?;
            Ok((Box::from(name.as_str()), values))
        })
        .collect()
}

/// Why a rule of `targets` cannot be followed (said of the rule: "rule 2 of \"targets\": ...").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadRule {
    /// Not a JSON object.
    #[error("it is not an object")]
    NotAnObject,
    /// A key other than `when`, `url` and `split`.
    #[error("it holds \"{0}\"; a rule holds \"when\" and \"url\" or \"split\"")]
    UnknownKey(String),
    /// Both a `url` and a `split`.
    #[error("it has both \"url\" and \"split\"; give one")]
    UrlAndSplit,
    /// Neither a string `url` nor a `split`.
    #[error("it has no string \"url\"")]
    NoUrl,
    /// Its `url` is not one the proxy sends.
    #[error("\"url\": {0}")]
    Url(NotCanonical),
    /// Its `split` is not a list of 2 to [`MAX_VARIANTS`].
    #[error("\"split\" must be a list of 2 to {MAX_VARIANTS} variants, like [{{\"weight\": 50, \"url\": \"https://example.com/a\"}}, ...]")]
    SplitSize,
    /// A variant of its `split` (from 0) is not one.
    #[error("variant {} of \"split\"{why}", .variant + 1)]
    Variant {
        /// Which variant (from 0).
        variant: usize,
        /// Why not (its text follows the variant's name).
        why: BadVariant,
    },
    /// Every variant of its `split` has weight 0.
    #[error("every variant of \"split\" has weight 0")]
    NoWeight,
    /// Its `when` is not an object.
    #[error("its \"when\" is not an object")]
    WhenNotAnObject,
    /// No `when`, and no `split`.
    #[error("it has no \"when\" object")]
    NoWhen,
    /// A condition's list holds a value that is not one it allows.
    #[error("\"when\".\"{key}\" holds {item}; allowed: {allowed}")]
    NotAllowed {
        /// The condition.
        key: &'static str,
        /// The value, as JSON.
        item: String,
        /// What it allows, for people.
        allowed: String,
    },
    /// A condition that is not a list of one or more values.
    #[error("\"when\".\"{key}\" is {value}, not a list of one or more values")]
    NotAList {
        /// The condition.
        key: &'static str,
        /// What it is, as JSON.
        value: String,
    },
    /// `when` holds a key that is no condition.
    #[error("\"when\" holds \"{0}\", which is no condition")]
    NoCondition(String),
    /// `when.query` is not an object of names.
    #[error("\"when\".\"query\" must be an object of parameter names, each with a list of values, like {{\"utm_source\": [\"flyer\"]}}")]
    QueryNotAnObject,
    /// A parameter of `when.query` without a list of strings.
    #[error("\"when\".\"query\".\"{0}\" must be a list of one or more strings")]
    QueryValues(String),
    /// `when.query` names the empty parameter.
    #[error("\"when\".\"query\" names an empty parameter")]
    EmptyParameter,
    /// A `url` rule with no condition at all.
    #[error("it has no condition")]
    NoConditions,
}

/// Why a variant of a split is not one; each text follows "variant N of \"split\"".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadVariant {
    /// Not a JSON object.
    #[error(" is not an object with \"weight\" and \"url\"")]
    NotAnObject,
    /// A key other than `weight` and `url`.
    #[error(" holds \"{0}\"; a variant holds \"weight\" and \"url\"")]
    UnknownKey(String),
    /// Its weight is no whole number from 0 to 1,000,000.
    #[error(": \"weight\" must be a whole number from 0 to {MAX_WEIGHT}")]
    Weight,
    /// No string `url`.
    #[error(" has no string \"url\"")]
    NoUrl,
    /// Its `url` is another variant's too.
    #[error(": \"url\" {0} is another variant's too")]
    SameUrl(String),
    /// Its `url` is not one the proxy sends.
    #[error(": \"url\": {0}")]
    Url(NotCanonical),
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

#[cfg(test)]
mod tests {
    use super::*;

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
            let error = Rule::from_value(&value).unwrap_err().to_string();
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
