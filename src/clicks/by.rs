//! What a link's redirects are broken down by in the live counts (docs/reference.md, "Live
//! counts"): country, device, operating system, browser, referrer host, the three campaign
//! parameters a marketer sets, and the split variant a rule chose. Each is read by the one
//! reading the report uses too ([`crate::visitor`]: one bot list, one User-Agent reading, one
//! GeoIP reader, one rule for a campaign), so that the two agree on the same requests.
//!
//! Bounded per link and interval: the device, the system and the browser are a few names, a
//! number each; the values visitors send are counted by [`Top`] (exact up to
//! [`super::top::EXACT`] distinct values, the most frequent kept past that, across serving
//! threads), a split's variants per variant chosen; a document keeps each breakdown's
//! [`TOP_VALUES`] most counted and the rest under [`super::OTHER_VERSIONS`]. Every breakdown adds
//! up to the link's redirects.

use std::borrow::Cow;

use super::top::Top;
use super::Values;
use crate::visitor::{Browser, Client, Device, Os};

/// Values of a breakdown a document keeps by name, the most counted; the rest are summed under
/// [`super::OTHER_VERSIONS`].
pub const TOP_VALUES: usize = 16;

/// A value no redirect of the kind carried: no GeoIP place, no `Referer`, no `utm_*`
/// parameter, no split.
pub const NONE: &str = "(none)";

/// A device, system or browser the User-Agent does not name.
pub const OTHER: &str = "other";

/// The device of a bot's redirect (the report's word too).
pub const BOT: &str = "bot";

/// A breakdown of the live counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Dimension {
    /// The ISO 3166 code the GeoIP database places the (logged) address in; counted only when
    /// `COUCHLINK_GEOIP` names a database.
    Country,
    /// mobile, tablet, desktop, bot or other.
    Device,
    /// The operating system, as link rules name it, or other.
    Os,
    /// The browser family, or other.
    Browser,
    /// The `Referer`'s host ([`crate::visitor::referrer::host`]).
    Referrer,
    /// `utm_source`, from the request's query or else the target's.
    UtmSource,
    /// `utm_medium`, likewise.
    UtmMedium,
    /// `utm_campaign`, likewise.
    UtmCampaign,
    /// The split variant a rule chose, named by its URL; where two variants counted share one,
    /// each is `URL (R.V)`, rule `R` and variant `V` counted from 1 (as refusals name them:
    /// `targets.R.split.V`).
    Variant,
}

impl Dimension {
    /// In the order documents and the console show them.
    pub const ALL: [Dimension; 9] = [
        Dimension::Country,
        Dimension::Device,
        Dimension::Os,
        Dimension::Browser,
        Dimension::Referrer,
        Dimension::UtmSource,
        Dimension::UtmMedium,
        Dimension::UtmCampaign,
        Dimension::Variant,
    ];

    /// Its name in documents, views and `couchlink clicks --by`.
    pub fn name(self) -> &'static str {
        match self {
            Dimension::Country => "country",
            Dimension::Device => "device",
            Dimension::Os => "os",
            Dimension::Browser => "browser",
            Dimension::Referrer => "referrer",
            Dimension::UtmSource => "utm_source",
            Dimension::UtmMedium => "utm_medium",
            Dimension::UtmCampaign => "utm_campaign",
            Dimension::Variant => "variant",
        }
    }

    /// The dimension named `name`.
    pub fn parse(name: &str) -> Option<Dimension> {
        Dimension::ALL.into_iter().find(|d| d.name() == name)
    }
}

/// What one redirect's request says, for the breakdowns.
#[derive(Debug, Clone)]
pub struct Seen<'a> {
    /// The country, when a GeoIP database is configured ([`NONE`] for an address it does not
    /// place); `None` without one.
    pub country: Option<&'a str>,
    /// What the User-Agent says ([`Client::of`], the rules' own reading, remembered per thread).
    pub client: Client,
    /// The `Referer`'s host ([`crate::visitor::referrer::host`]); `None` without a `Referer`.
    pub referrer: Option<Cow<'a, str>>,
    /// `utm_source`, `utm_medium` and `utm_campaign` ([`crate::visitor::campaign::campaign`]),
    /// `None` when the request has no `utm_` parameter ([`Seen::campaign_of`]).
    pub campaign: Option<[Cow<'a, str>; 3]>,
    /// The split variant chosen, `(rule, variant)` from 0.
    pub variant: Option<(u16, u16)>,
}

impl Default for Seen<'_> {
    fn default() -> Self {
        Seen::NOTHING
    }
}

impl Seen<'_> {
    /// A request that says nothing: no GeoIP database, no User-Agent, referrer or campaign.
    pub const NOTHING: Seen<'static> = Seen {
        country: None,
        client: Client { os: None, device: None, browser: None, bot: false },
        referrer: None,
        campaign: None,
        variant: None,
    };

    /// The campaign of a request for `target` (whose query is `query`) sent to `location`, by
    /// the report's rule, when the request's query has a `utm_` parameter; `None` when it has
    /// none, as most requests do: its campaign is then its version's own (the `Location` holds
    /// the version's parameters and no other `utm_` one), read once per version when the
    /// document is written.
    pub fn campaign_of<'a>(
        target: &'a [u8],
        query: Option<&str>,
        location: Option<&'a [u8]>,
    ) -> Option<[Cow<'a, str>; 3]> {
        use crate::visitor::campaign::{campaign, may_have_campaign};
        query.is_some_and(|q| may_have_campaign(q.as_bytes(), None)).then(|| {
            let [source, medium, name, _, _] = campaign(target, location);
            [source, medium, name]
        })
    }
}

const DEVICES: usize = Device::NAMES.len() + 2;
const SYSTEMS: usize = Os::NAMES.len() + 1;
const BROWSERS: usize = Browser::NAMES.len() + 1;

/// Longest value counted by name (bytes): a longer referrer host or campaign value is counted as
/// other, so that a document's size stays bounded whatever visitors send.
pub const MAX_VALUE_BYTES: usize = 200;

/// Counts one redirect under `value`, or as other past [`MAX_VALUE_BYTES`].
fn add_value(values: &mut Top, value: &str) {
    values.add(if value.len() > MAX_VALUE_BYTES { super::OTHER_VERSIONS } else { value }, 1);
}

/// Most variants counted by name per link and interval (a link has at most a few splits).
const MAX_VARIANTS: usize = 64;

/// Versions whose plain redirects are counted in place (most links send everyone to one or
/// two targets an interval); more are counted in a list.
const IN_PLACE: usize = 2;

/// A redirect's device, system and browser as one number (the bot's device included):
/// `(device * SYSTEMS + os) * BROWSERS + browser`, so that a request adds to one counter, not
/// three.
type Profile = u16;

/// A profile slot not used yet.
const UNUSED: Profile = Profile::MAX;

fn profile(device: usize, os: usize, browser: usize) -> Profile {
    ((device * SYSTEMS + os) * BROWSERS + browser) as Profile
}

/// A profile's device, system and browser.
fn parts(profile: Profile) -> (usize, usize, usize) {
    let p = usize::from(profile);
    (p / (SYSTEMS * BROWSERS), p / BROWSERS % SYSTEMS, p % BROWSERS)
}

/// Profiles counted in place per link and interval (a printed tag's minute: a phone or two);
/// more are counted in a list.
const PROFILES_IN_PLACE: usize = 2;

/// One link's redirects per value of each breakdown over an interval. What nearly every
/// redirect of a printed tag is (a User-Agent read once, no `Referer`, no `utm_` in the request,
/// no split) is two counters side by side in the link's counts: its profile's and its
/// version's; a redirect without a `Referer` or a split adds to no counter at all (those are the
/// link's redirects less the ones counted by name). The values visitors send (countries,
/// referrers, campaigns, variants) are kept apart, allocated the first time one is counted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct By {
    /// Redirects per profile, the first ones in place.
    profiles: [(Profile, u64); PROFILES_IN_PLACE],
    /// Redirects whose request carried no `utm_` parameter, per place of their version among
    /// the link's versions ([`Values::add`]'s answer): their campaign is their version's, read
    /// when the document is written (the report reads the same from the `Location`, which
    /// holds the version's parameters and no other `utm_` one).
    by_version: [u64; IN_PLACE],
    more_profiles: Vec<(Profile, u64)>,
    by_version_more: Vec<u64>,
    /// Of those, redirects to a version past [`super::MAX_VERSIONS`]: campaign unknown, counted
    /// as other.
    by_version_other: u64,
    named: Option<Box<Named>>,
}

impl Default for By {
    fn default() -> Self {
        By {
            profiles: [(UNUSED, 0); PROFILES_IN_PLACE],
            by_version: [0; IN_PLACE],
            more_profiles: Vec::new(),
            by_version_more: Vec::new(),
            by_version_other: 0,
            named: None,
        }
    }
}

/// What visitors send, counted by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Named {
    country: Top,
    referrer: Top,
    /// `utm_source`, `utm_medium`, `utm_campaign` of requests that carried a `utm_` parameter.
    campaign: [Top; 3],
    /// Per variant chosen.
    variants: Vec<(Variant, u64)>,
    /// Variants past [`MAX_VARIANTS`].
    other_variants: u64,
}

/// A split variant counted.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Variant {
    /// Chosen by a rule: `(rule, variant)` from 0, and the place of the version it sent to
    /// among the link's versions (its URL; `None` past [`super::MAX_VERSIONS`]).
    Chosen(u16, u16, Option<usize>),
    /// Read back from a document, by its name there.
    Named(Box<str>),
}

impl Named {
    fn add_variant(&mut self, variant: Variant, n: u64) {
        if let Some((_, count)) = self.variants.iter_mut().find(|(v, _)| *v == variant) {
            *count += n;
        } else if self.variants.len() < MAX_VARIANTS {
            self.variants.push((variant, n));
        } else {
            self.other_variants += n;
        }
    }
}

impl By {
    fn named(&mut self) -> &mut Named {
        self.named.get_or_insert_default()
    }

    fn add_profile(&mut self, profile: Profile, n: u64) {
        for slot in &mut self.profiles {
            if slot.0 == profile {
                slot.1 += n;
                return;
            }
            if slot.0 == UNUSED {
                *slot = (profile, n);
                return;
            }
        }
        match self.more_profiles.iter_mut().find(|(p, _)| *p == profile) {
            Some((_, count)) => *count += n,
            None => self.more_profiles.push((profile, n)),
        }
    }

    fn add_by_version(&mut self, place: Option<usize>, n: u64) {
        match place {
            Some(at) if at < IN_PLACE => self.by_version[at] += n,
            Some(at) => {
                let at = at - IN_PLACE;
                if self.by_version_more.len() <= at {
                    self.by_version_more.resize(at + 1, 0);
                }
                self.by_version_more[at] += n;
            }
            None => self.by_version_other += n,
        }
    }

    /// Counts one redirect, a bot's if `bot`, to the version at `version` among the link's
    /// versions (`None`: counted as other).
    pub(crate) fn add(&mut self, seen: &Seen<'_>, bot: bool, version: Option<usize>) {
        let client = &seen.client;
        let device = if bot { Device::NAMES.len() } else { client.device.map_or(DEVICES - 1, |d| d as usize) };
        let os = client.os.map_or(SYSTEMS - 1, |o| o as usize);
        let browser = client.browser.map_or(BROWSERS - 1, |b| b as usize);
        self.add_profile(profile(device, os, browser), 1);
        if let Some(country) = seen.country {
            self.named().country.add(country, 1);
        }
        if let Some(referrer) = &seen.referrer {
            add_value(&mut self.named().referrer, referrer);
        }
        match &seen.campaign {
            Some(values) => {
                let named = self.named();
                for (counted, value) in named.campaign.iter_mut().zip(values) {
                    add_value(counted, value);
                }
            }
            None => self.add_by_version(version, 1),
        }
        if let Some((rule, variant)) = seen.variant {
            self.named().add_variant(Variant::Chosen(rule, variant, version), 1);
        }
    }

    /// Adds `other` to these counts; `places[i]` is where `other`'s version `i` is among
    /// these counts' link's versions.
    pub(crate) fn merge(&mut self, other: &By, places: &[Option<usize>]) {
        for &(profile, n) in other.profiles.iter().chain(&other.more_profiles) {
            if profile != UNUSED {
                self.add_profile(profile, n);
            }
        }
        for (at, n) in other.by_version.iter().chain(&other.by_version_more).enumerate() {
            if *n > 0 {
                self.add_by_version(places.get(at).copied().flatten(), *n);
            }
        }
        self.by_version_other += other.by_version_other;
        if let Some(theirs) = &other.named {
            let ours = self.named();
            ours.country.merge(&theirs.country);
            ours.referrer.merge(&theirs.referrer);
            for (ours, theirs) in ours.campaign.iter_mut().zip(&theirs.campaign) {
                ours.merge(theirs);
            }
            for (variant, n) in &theirs.variants {
                let variant = match variant {
                    Variant::Chosen(rule, v, at) => {
                        Variant::Chosen(*rule, *v, at.and_then(|at| places.get(at).copied().flatten()))
                    }
                    named => named.clone(),
                };
                ours.add_variant(variant, *n);
            }
            ours.other_variants += theirs.other_variants;
        }
    }

    /// Adds `n` redirects under `value` of `dimension` (a document read back: names not
    /// recognised are counted as other; a referrer's and a variant's `(none)` are the
    /// redirects not counted by name, so they need no counting).
    pub(crate) fn add_named(&mut self, dimension: Dimension, value: &str, n: u64) {
        let index = |names: &[&str]| names.iter().position(|name| *name == value);
        // Read back one breakdown at a time: the device, system and browser each as a profile
        // of its own (the others "other"); `values` adds each up alike.
        let (other_os, other_browser) = (SYSTEMS - 1, BROWSERS - 1);
        match dimension {
            Dimension::Device => {
                let device =
                    if value == BOT { Device::NAMES.len() } else { index(&Device::NAMES).unwrap_or(DEVICES - 1) };
                self.add_profile(profile(device, other_os, other_browser) | READ_BACK, n);
            }
            Dimension::Os => {
                let os = index(&Os::NAMES).unwrap_or(SYSTEMS - 1);
                self.add_profile(profile(DEVICES - 1, os, other_browser) | READ_BACK | OS_ONLY, n);
            }
            Dimension::Browser => {
                let browser = index(&Browser::NAMES).unwrap_or(BROWSERS - 1);
                self.add_profile(profile(DEVICES - 1, other_os, browser) | READ_BACK | BROWSER_ONLY, n);
            }
            Dimension::Country => {
                self.named().country.add(value, n);
            }
            Dimension::Referrer if value == NONE => {}
            Dimension::Referrer => {
                self.named().referrer.add(value, n);
            }
            Dimension::UtmSource | Dimension::UtmMedium | Dimension::UtmCampaign => {
                let k = dimension as usize - Dimension::UtmSource as usize;
                self.named().campaign[k].add(value, n);
            }
            Dimension::Variant if value == NONE => {}
            Dimension::Variant if value == super::OTHER_VERSIONS => self.named().other_variants += n,
            Dimension::Variant => self.named().add_variant(Variant::Named(value.into()), n),
        }
    }

    /// Every breakdown as a document holds it: `{"device": {"mobile": 2, ...}, ...}`, each
    /// [`By::values`] (the country only when counted); `versions` and `redirects` are the
    /// link's.
    pub fn to_json(&self, versions: &Values, redirects: u64) -> serde_json::Value {
        Dimension::ALL
            .into_iter()
            .map(|d| (d, self.values(d, versions, redirects)))
            .filter(|(_, values)| !values.is_empty())
            .map(|(d, values)| {
                let values: serde_json::Map<String, serde_json::Value> =
                    values.into_iter().map(|(v, n)| (v, n.into())).collect();
                (d.name().to_owned(), values.into())
            })
            .collect::<serde_json::Map<_, _>>()
            .into()
    }

    /// A document's `by`, read back: what is not a count of a known dimension is left out.
    pub fn from_json(by: &serde_json::Value) -> By {
        let mut read = By::default();
        for (name, values) in by.as_object().into_iter().flatten() {
            let Some(dimension) = Dimension::parse(name) else { continue };
            for (value, n) in values.as_object().into_iter().flatten() {
                read.add_named(dimension, value, n.as_u64().unwrap_or(0));
            }
        }
        read
    }

    /// The redirects per device, system and browser.
    fn clients(&self) -> ([u64; DEVICES], [u64; SYSTEMS], [u64; BROWSERS]) {
        let (mut device, mut os, mut browser) = ([0; DEVICES], [0; SYSTEMS], [0; BROWSERS]);
        for &(p, n) in self.profiles.iter().chain(&self.more_profiles) {
            if p == UNUSED {
                continue;
            }
            // A profile read back from a document stands for one breakdown only.
            let (d, o, b) = parts(p & !(READ_BACK | OS_ONLY | BROWSER_ONLY));
            let read_back = p & READ_BACK != 0;
            if !read_back || p & (OS_ONLY | BROWSER_ONLY) == 0 {
                device[d] += n;
            }
            if !read_back || p & OS_ONLY != 0 {
                os[o] += n;
            }
            if !read_back || p & BROWSER_ONLY != 0 {
                browser[b] += n;
            }
        }
        (device, os, browser)
    }

    /// Each value of `dimension` and its redirects, most counted first (ties by name), at most
    /// [`TOP_VALUES`] by name and the rest under [`super::OTHER_VERSIONS`]; values counted 0
    /// left out. Nothing for the country when none was counted. `versions` and `redirects` are
    /// the link's (the campaign of a request that carried none is its version's; a redirect
    /// without a referrer or a split is one not counted under a name).
    pub fn values(&self, dimension: Dimension, versions: &Values, redirects: u64) -> Vec<(String, u64)> {
        let named = |names: &[&'static str], counts: &[u64]| -> Vec<(String, u64)> {
            names.iter().zip(counts).map(|(name, n)| ((*name).to_owned(), *n)).collect()
        };
        let listed = |values: Option<&Top>| -> Vec<(String, u64)> {
            values.into_iter().flat_map(Top::iter).map(|(v, n)| (v.to_owned(), n)).collect()
        };
        let rest = |all: &[(String, u64)]| redirects.saturating_sub(all.iter().map(|(_, n)| n).sum());
        let these = self.named.as_deref();
        let all: Vec<(String, u64)> = match dimension {
            Dimension::Device => named(&[&Device::NAMES[..], &[BOT, OTHER]].concat(), &self.clients().0),
            Dimension::Os => named(&[&Os::NAMES[..], &[OTHER]].concat(), &self.clients().1),
            Dimension::Browser => named(&[&Browser::NAMES[..], &[OTHER]].concat(), &self.clients().2),
            Dimension::Country => listed(these.map(|n| &n.country)),
            Dimension::Referrer => {
                let mut all = listed(these.map(|n| &n.referrer));
                all.push((NONE.to_owned(), rest(&all)));
                all
            }
            Dimension::UtmSource | Dimension::UtmMedium | Dimension::UtmCampaign => {
                let k = dimension as usize - Dimension::UtmSource as usize;
                let mut all = listed(these.map(|n| &n.campaign[k]));
                for (at, n) in self.by_version.iter().chain(&self.by_version_more).enumerate() {
                    let value = match versions.get(at) {
                        Some(version) if *n > 0 => {
                            crate::visitor::campaign::campaign(b"", Some(version.as_bytes()))[k].to_string()
                        }
                        _ => continue,
                    };
                    all.push((value, *n));
                }
                all.push((super::OTHER_VERSIONS.to_owned(), self.by_version_other));
                all
            }
            Dimension::Variant => {
                let counted: &[(Variant, u64)] = these.map_or(&[], |n| &n.variants);
                let mut all = variant_names(counted, versions);
                all.push((super::OTHER_VERSIONS.to_owned(), these.map_or(0, |n| n.other_variants)));
                all.push((NONE.to_owned(), rest(&all)));
                all
            }
        };
        top(all)
    }
}

/// A profile read back from a document's one breakdown, and which (none: the device's).
const READ_BACK: Profile = 1 << 14;
const OS_ONLY: Profile = 1 << 13;
const BROWSER_ONLY: Profile = 1 << 12;

/// The variants counted, each named by the URL it sent to (`versions`: the link's); where
/// variants of different places share a URL, each `URL (R.V)`; one whose URL was not kept,
/// `R.V`.
fn variant_names(counted: &[(Variant, u64)], versions: &Values) -> Vec<(String, u64)> {
    let url = |at: &Option<usize>| at.and_then(|at| versions.get(at));
    let shared = |of: &str, place: (u16, u16)| {
        counted.iter().any(|(v, _)| matches!(v, Variant::Chosen(r, w, at) if (*r, *w) != place && url(at) == Some(of)))
    };
    counted
        .iter()
        .map(|(variant, n)| {
            let name = match variant {
                Variant::Chosen(r, v, at) => match url(at) {
                    Some(u) if shared(u, (*r, *v)) => format!("{u} ({}.{})", r + 1, v + 1),
                    Some(u) => u.to_owned(),
                    None => format!("{}.{}", r + 1, v + 1),
                },
                Variant::Named(name) => name.to_string(),
            };
            (name, *n)
        })
        .collect()
}

/// `values` most counted first, those past [`TOP_VALUES`] (and any already counted as other)
/// summed under [`super::OTHER_VERSIONS`] last.
fn top(values: Vec<(String, u64)>) -> Vec<(String, u64)> {
    // The same value from two places (a campaign sent and one a version holds) counted once.
    let mut summed: std::collections::BTreeMap<String, u64> = std::collections::BTreeMap::new();
    for (value, n) in values.into_iter().filter(|(_, n)| *n > 0) {
        *summed.entry(value).or_default() += n;
    }
    let mut other = summed.remove(super::OTHER_VERSIONS).unwrap_or(0);
    let mut values: Vec<(String, u64)> = summed.into_iter().collect();
    values.sort_by(|(a, m), (b, n)| n.cmp(m).then_with(|| a.cmp(b)));
    if values.len() > TOP_VALUES {
        other += values.drain(TOP_VALUES..).map(|(_, n)| n).sum::<u64>();
    }
    if other > 0 {
        values.push((super::OTHER_VERSIONS.to_owned(), other));
    }
    values
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(ua: &str, referrer: &'static str, campaign: Option<[&'static str; 3]>) -> Seen<'static> {
        Seen {
            country: Some("IE"),
            client: Client::of(Some(ua.as_bytes())),
            referrer: (referrer != NONE).then(|| referrer.into()),
            campaign: campaign.map(|c| c.map(Cow::Borrowed)),
            variant: None,
        }
    }

    const PHONE: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1";

    #[test]
    fn every_breakdown_adds_up_to_the_redirects() {
        let mut by = By::default();
        let mut versions = Values::default();
        let version = versions.add("https://example.com/?utm_source=flyer&utm_medium=print", 1);
        by.add(&seen(PHONE, "(none)", None), false, version);
        by.add(&seen(PHONE, "news.example", Some(["flyer", "print", "spring"])), false, version);
        let split = Seen { variant: Some((1, 0)), ..seen("curl/8", "(none)", Some(["flyer", "(none)", "spring"])) };
        by.add(&split, true, version);
        let values = |d: Dimension| by.values(d, &versions, 3);
        assert_eq!(values(Dimension::Device), [("mobile".into(), 2), ("bot".into(), 1)]);
        assert_eq!(values(Dimension::Os), [("ios".into(), 2), ("other".into(), 1)]);
        assert_eq!(values(Dimension::Browser), [("safari".into(), 2), ("other".into(), 1)]);
        assert_eq!(values(Dimension::Referrer), [("(none)".into(), 2), ("news.example".into(), 1)]);
        assert_eq!(values(Dimension::UtmSource), [("flyer".into(), 3)]);
        assert_eq!(
            values(Dimension::UtmMedium),
            [("print".into(), 2), ("(none)".into(), 1)],
            "the first from its version"
        );
        assert_eq!(values(Dimension::UtmCampaign), [("spring".into(), 2), ("(none)".into(), 1)]);
        assert_eq!(
            values(Dimension::Variant),
            [("(none)".into(), 2), ("https://example.com/?utm_source=flyer&utm_medium=print".into(), 1)],
            "a variant named by the URL it sent to"
        );
        assert_eq!(values(Dimension::Country), [("IE".into(), 3)]);
        for d in Dimension::ALL {
            assert_eq!(values(d).iter().map(|(_, n)| n).sum::<u64>(), 3, "{d:?}");
            let mut read = By::default();
            for (value, n) in values(d) {
                read.add_named(d, &value, n);
            }
            assert_eq!(read.values(d, &Values::default(), 3), values(d), "{d:?} read back");
        }
        assert!(By::default().values(Dimension::Country, &versions, 3).is_empty(), "no country counted without GeoIP");
        let json = by.to_json(&versions, 3);
        assert_eq!(By::from_json(&json).to_json(&Values::default(), 3), json, "a document's breakdowns read back");
        assert_eq!(
            json["variant"],
            serde_json::json!({"(none)": 2, "https://example.com/?utm_source=flyer&utm_medium=print": 1})
        );
        // Merged into counts whose link has other versions first: each plain redirect keeps its
        // version's campaign.
        let mut ours = By::default();
        let mut our_versions = Values::default();
        let other = our_versions.add("https://example.com/?utm_source=poster", 1);
        ours.add(&seen(PHONE, "(none)", None), false, other);
        let place = our_versions.add(versions.get(0).unwrap(), 1);
        ours.merge(&by, &[place]);
        // Profiles past those counted in place, and a document read back merged with live
        // counts: each breakdown still adds up.
        let mut many = By::from_json(&json);
        for ua in ["Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:127.0) Gecko/20100101 Firefox/127.0",
            "Mozilla/5.0 (X11; CrOS x86_64 14541.0.0) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36",
            "Mozilla/5.0 (Linux; Android 13; SM-X710) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36"]
        {
            many.add(&seen(ua, "(none)", None), false, None);
        }
        let none = Values::default();
        assert_eq!(
            many.values(Dimension::Device, &none, 6),
            [("desktop".into(), 2), ("mobile".into(), 2), ("bot".into(), 1), ("tablet".into(), 1)]
        );
        assert_eq!(many.values(Dimension::Os, &none, 6).iter().map(|(_, n)| n).sum::<u64>(), 6);
        assert_eq!(
            many.values(Dimension::Browser, &none, 6),
            [("chrome".into(), 2), ("safari".into(), 2), ("firefox".into(), 1), ("other".into(), 1)]
        );
        assert_eq!(ours.values(Dimension::UtmSource, &our_versions, 4), [("flyer".into(), 3), ("poster".into(), 1)]);
    }

    #[test]
    fn variants_are_named_by_their_url_and_by_their_place_where_two_share_one() {
        let mut versions = Values::default();
        let a = versions.add("https://example.com/a", 1);
        let b = versions.add("https://example.com/b", 1);
        let mut by = By::default();
        let chose = |rule, variant| Seen { variant: Some((rule, variant)), ..Seen::default() };
        by.add(&chose(0, 0), false, a);
        by.add(&chose(0, 1), false, b);
        by.add(&chose(0, 1), false, b);
        by.add(&chose(1, 0), false, a);
        by.add(&chose(2, 0), false, None);
        let named: Vec<(String, u64)> = [
            ("https://example.com/b", 2),
            ("(none)", 1),
            ("3.1", 1),
            ("https://example.com/a (1.1)", 1),
            ("https://example.com/a (2.1)", 1),
        ]
        .into_iter()
        .map(|(name, n)| (name.to_owned(), n))
        .collect();
        assert_eq!(by.values(Dimension::Variant, &versions, 6), named);
        // Read back from a document, merged with live counts: the names stay.
        let mut read = By::from_json(&by.to_json(&versions, 6));
        read.merge(&by, &[Some(0), Some(1)]);
        let doubled: Vec<(String, u64)> = named.iter().map(|(name, n)| (name.clone(), 2 * n)).collect();
        assert_eq!(read.values(Dimension::Variant, &versions, 12), doubled);
    }

    #[test]
    fn past_the_top_values_the_rest_is_other_and_totals_stay() {
        let mut by = By::default();
        for n in 0..40u64 {
            let referrer = format!("site{n:02}.example");
            for _ in 0..=n {
                by.add(&Seen { referrer: Some(referrer.clone().into()), ..Seen::default() }, false, None);
            }
        }
        let none = Values::default();
        let all: u64 = (1..=40).sum();
        let values = by.values(Dimension::Referrer, &none, all);
        assert_eq!(values.len(), TOP_VALUES + 1);
        assert_eq!(values[0], ("site39.example".into(), 40), "the most counted, whatever came first");
        assert_eq!(values[TOP_VALUES - 1], ("site24.example".into(), 25));
        assert_eq!(values.last().unwrap().0, super::super::OTHER_VERSIONS);
        assert_eq!(values.iter().map(|(_, n)| n).sum::<u64>(), (1..=40).sum::<u64>());
        let mut merged = By::default();
        merged.merge(&by, &[]);
        merged.merge(&by, &[]);
        assert_eq!(
            merged.values(Dimension::Referrer, &none, 2 * all).iter().map(|(_, n)| n).sum::<u64>(),
            2 * (1..=40).sum::<u64>()
        );
        let mut long = By::default();
        long.add(&Seen { referrer: Some("a".repeat(MAX_VALUE_BYTES + 1).into()), ..Seen::default() }, false, None);
        assert_eq!(long.values(Dimension::Referrer, &none, 1), [(super::super::OTHER_VERSIONS.to_owned(), 1)]);
        assert_eq!(Dimension::parse("utm_campaign"), Some(Dimension::UtmCampaign));
    }
}
