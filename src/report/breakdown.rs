//! What a redirect is broken down by (`--by`): its campaign (the `utm_*` parameters), the kind
//! of device and the operating system its User-Agent names, and the country its address is in
//! (`--geoip`). Each line has one value per breakdown; the counters count redirects and
//! visitors per value.

use std::borrow::Cow;
use std::net::IpAddr;

use super::line::{self, Line};
/// The country database, shared with the proxy's `when.country` rules.
pub use crate::visitor::geoip::{GeoIp, GeoIpError};
use crate::visitor::Client;

/// What `--by` names: each stands for one or more [`Breakdown`]s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dimension {
    /// The five `utm_*` parameters.
    Campaign,
    /// The kind of device and the operating system.
    Device,
    /// The country (needs a GeoIP database).
    Country,
}

/// One column of values a redirect is counted under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Breakdown {
    /// `utm_source`.
    UtmSource,
    /// `utm_medium`.
    UtmMedium,
    /// `utm_campaign`.
    UtmCampaign,
    /// `utm_term`.
    UtmTerm,
    /// `utm_content`.
    UtmContent,
    /// mobile, tablet, desktop, bot or other.
    Device,
    /// The operating system's name as link targets use it, or other.
    Os,
    /// An ISO 3166 country code.
    Country,
}

/// A line without the breakdown's `utm_*` parameter.
pub const NO_CAMPAIGN: &str = "(none)";
/// An address the database does not place in a country (private ranges, or not an address).
pub const NO_COUNTRY: &str = "(unknown)";
/// A device or operating system the User-Agent does not name.
pub const OTHER: &str = "other";
/// The device of a redirect counted as a bot's.
pub const BOT: &str = "bot";

impl Breakdown {
    /// In the order reports show them.
    pub const ALL: [Breakdown; 8] = [
        Breakdown::UtmSource,
        Breakdown::UtmMedium,
        Breakdown::UtmCampaign,
        Breakdown::UtmTerm,
        Breakdown::UtmContent,
        Breakdown::Device,
        Breakdown::Os,
        Breakdown::Country,
    ];

    /// Its name in every format: the query parameter for campaigns.
    pub fn name(self) -> &'static str {
        match self {
            Breakdown::UtmSource => "utm_source",
            Breakdown::UtmMedium => "utm_medium",
            Breakdown::UtmCampaign => "utm_campaign",
            Breakdown::UtmTerm => "utm_term",
            Breakdown::UtmContent => "utm_content",
            Breakdown::Device => "device",
            Breakdown::Os => "os",
            Breakdown::Country => "country",
        }
    }

    /// Those `dimension` stands for.
    pub fn of(dimension: Dimension) -> &'static [Breakdown] {
        match dimension {
            Dimension::Campaign => &Breakdown::ALL[..5],
            Dimension::Device => &Breakdown::ALL[5..7],
            Dimension::Country => &Breakdown::ALL[7..],
        }
    }

    /// Whether it is a `utm_*` parameter.
    pub fn is_campaign(self) -> bool {
        self <= Breakdown::UtmContent
    }
}

/// The breakdowns asked for (in [`Breakdown::ALL`]'s order), and the database countries come
/// from when one of them is the country.
#[derive(Debug, Default)]
pub struct Breakdowns {
    list: Vec<Breakdown>,
    geoip: Option<GeoIp>,
}

impl Breakdowns {
    /// The breakdowns of `dimensions`; the country only with `geoip`, which it needs.
    pub fn new(dimensions: &[Dimension], geoip: Option<GeoIp>) -> Result<Breakdowns, GeoIpError> {
        if dimensions.contains(&Dimension::Country) && geoip.is_none() {
            return Err(GeoIpError::NoDatabase);
        }
        let list =
            Breakdown::ALL.into_iter().filter(|b| dimensions.iter().any(|d| Breakdown::of(*d).contains(b))).collect();
        Ok(Breakdowns { list, geoip })
    }

    /// In the order reports show them.
    pub fn list(&self) -> &[Breakdown] {
        &self.list
    }

    /// The database, when countries are asked for.
    pub fn geoip(&self) -> Option<&GeoIp> {
        self.geoip.as_ref()
    }

    /// Whether a User-Agent's device and OS are asked for.
    pub fn devices(&self) -> bool {
        self.list.contains(&Breakdown::Device)
    }

    /// `line`'s value for each breakdown, in [`Breakdowns::list`]'s order: the plain reading,
    /// which the counting engine caches by User-Agent and address.
    pub fn values(&self, line: &Line<'_>) -> Result<Vec<String>, GeoIpError> {
        let agent = Agent::of(line.user_agent, self.devices());
        let campaign = campaign(line.target, line.location);
        self.list
            .iter()
            .map(|&b| {
                Ok(match b {
                    Breakdown::Device => agent.device.to_owned(),
                    Breakdown::Os => agent.os.to_owned(),
                    Breakdown::Country => self.country(line.ip)?.to_owned(),
                    utm => campaign[utm as usize].to_string(),
                })
            })
            .collect()
    }

    /// The country of the address `ip` as logged.
    pub fn country(&self, ip: &[u8]) -> Result<&str, GeoIpError> {
        let Some(geoip) = &self.geoip else { return Ok(NO_COUNTRY) };
        let Some(ip) = std::str::from_utf8(ip).ok().and_then(|s| s.parse::<IpAddr>().ok()) else {
            return Ok(NO_COUNTRY);
        };
        Ok(geoip.country(ip)?.unwrap_or(NO_COUNTRY))
    }
}

/// What a logged User-Agent counts as: a bot's or not (the report's one definition of a bot),
/// and, when asked, its kind of device and operating system.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Agent {
    /// On the bot list, or no User-Agent at all.
    pub bot: bool,
    /// mobile, tablet, desktop, `bot`, or `other`.
    pub device: &'static str,
    /// As link targets name it, or `other`.
    pub os: &'static str,
}

impl Agent {
    /// What the percent-encoded `encoded` counts as; the User-Agent is read only when
    /// `devices` asks for the device and OS, by the reading link rules use ([`Client::of`]:
    /// substring searches, no expressions to compile or hold in memory; the tests hold it to
    /// uap-core's answers).
    pub fn of(encoded: &[u8], devices: bool) -> Agent {
        let bot = line::bot_agent(encoded);
        if !devices {
            return Agent { bot, device: OTHER, os: OTHER };
        }
        let decoded: Cow<'_, [u8]> = percent_encoding::percent_decode(encoded).into();
        let client = if encoded == b"-" { Client::default() } else { Client::of(Some(&decoded)) };
        Agent {
            bot,
            // The report's own bot list over the device: a redirect counts as a bot's in one
            // place only.
            device: if bot { BOT } else { client.device.map_or(OTHER, |d| d.name()) },
            os: client.os.map_or(OTHER, |o| o.name()),
        }
    }
}

/// The values of the five `utm_*` parameters, in [`Breakdown::ALL`]'s order: each from the
/// request target's query, or else from the `Location`'s; [`NO_CAMPAIGN`] in neither. The first
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
    let finder = |bytes: &[u8]| memchr::memmem::find(bytes, b"utm_").is_some();
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
        let i = Breakdown::ALL.iter().position(|b| b.name() == name).unwrap();
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

    #[test]
    fn devices_as_link_rules_read_them_and_bots_by_the_report_list() {
        let agent = |ua: &str| {
            let a = Agent::of(ua.as_bytes(), true);
            (a.bot, a.device, a.os)
        };
        assert_eq!(
            agent("Mozilla%2F5.0%20(iPhone%3B%20CPU%20iPhone%20OS%2018_1%20like%20Mac%20OS%20X)%20Mobile%2F15E148"),
            (false, "mobile", "ios")
        );
        assert_eq!(
            agent("Mozilla%2F5.0%20(Windows%20NT%2010.0%3B%20Win64%3B%20x64)%20AppleWebKit%2F537.36%20Chrome%2F131.0.0.0%20Safari%2F537.36"),
            (false, "desktop", "windows")
        );
        assert_eq!(agent("curl%2F8.5.0"), (true, "bot", "other"));
        assert_eq!(agent("-"), (true, "bot", "other"));
        assert_eq!(agent("Nokia3310"), (false, "other", "other"));
        assert_eq!(Agent::of(b"curl%2F8.5.0", false), Agent { bot: true, device: OTHER, os: OTHER });
    }

    #[test]
    fn dimensions_stand_for_their_breakdowns_in_one_order() {
        let b = Breakdowns::new(&[Dimension::Device, Dimension::Campaign], None).unwrap();
        let names: Vec<_> = b.list().iter().map(|b| b.name()).collect();
        assert_eq!(names, ["utm_source", "utm_medium", "utm_campaign", "utm_term", "utm_content", "device", "os"]);
        assert!(matches!(Breakdowns::new(&[Dimension::Country], None), Err(GeoIpError::NoDatabase)));
    }
}
