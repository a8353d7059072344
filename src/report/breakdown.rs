//! What a redirect is broken down by (`--by`): its campaign (the `utm_*` parameters), the kind
//! of device and the operating system its User-Agent names, and the country its address is in
//! (`--geoip`). Each line has one value per breakdown; the counters count redirects and
//! visitors per value.

use std::borrow::Cow;
use std::net::IpAddr;

use super::line::{self, Line};
/// The country database, shared with the proxy's `when.country` rules.
pub use crate::visitor::geoip::{GeoIp, GeoIpError, NO_COUNTRY};
use crate::visitor::Client;

/// What `--by` names: each stands for one or more [`Breakdown`]s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dimension {
    /// The five `utm_*` parameters.
    Campaign,
    /// The kind of device, the operating system and the browser.
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
    /// The browser family ([`crate::visitor::Browser`]), or other.
    Browser,
    /// An ISO 3166 country code.
    Country,
}

/// How a line's campaign is read: the one rule, shared with the proxy's live counts.
pub use crate::visitor::campaign::{campaign, may_have_campaign, NO_CAMPAIGN};
/// A device or operating system the User-Agent does not name.
pub const OTHER: &str = "other";
/// The device of a redirect counted as a bot's.
pub const BOT: &str = "bot";

impl Breakdown {
    /// In the order reports show them.
    pub const ALL: [Breakdown; 9] = [
        Breakdown::UtmSource,
        Breakdown::UtmMedium,
        Breakdown::UtmCampaign,
        Breakdown::UtmTerm,
        Breakdown::UtmContent,
        Breakdown::Device,
        Breakdown::Os,
        Breakdown::Browser,
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
            Breakdown::Browser => "browser",
            Breakdown::Country => "country",
        }
    }

    /// Those `dimension` stands for.
    pub fn of(dimension: Dimension) -> &'static [Breakdown] {
        match dimension {
            Dimension::Campaign => &Breakdown::ALL[..5],
            Dimension::Device => &Breakdown::ALL[5..8],
            Dimension::Country => &Breakdown::ALL[8..],
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
                    Breakdown::Browser => agent.browser.to_owned(),
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
/// and, when asked, its kind of device, operating system and browser.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Agent {
    /// On the bot list, or no User-Agent at all.
    pub bot: bool,
    /// mobile, tablet, desktop, `bot`, or `other`.
    pub device: &'static str,
    /// As link targets name it, or `other`.
    pub os: &'static str,
    /// Its family ([`crate::visitor::Browser::NAMES`]), or `other`.
    pub browser: &'static str,
}

impl Agent {
    /// What the percent-encoded `encoded` counts as; the User-Agent is read only when
    /// `devices` asks for the device and OS, by the reading link rules use ([`Client::of`]:
    /// substring searches, no expressions to compile or hold in memory; the tests hold it to
    /// uap-core's answers).
    pub fn of(encoded: &[u8], devices: bool) -> Agent {
        let bot = line::bot_agent(encoded);
        if !devices {
            return Agent { bot, device: OTHER, os: OTHER, browser: OTHER };
        }
        let decoded: Cow<'_, [u8]> = percent_encoding::percent_decode(encoded).into();
        let client = if encoded == b"-" { Client::default() } else { Client::of(Some(&decoded)) };
        Agent {
            bot,
            // The report's own bot list over the device: a redirect counts as a bot's in one
            // place only.
            device: if bot { BOT } else { client.device.map_or(OTHER, |d| d.name()) },
            os: client.os.map_or(OTHER, |o| o.name()),
            browser: client.browser.map_or(OTHER, |b| b.name()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_as_link_rules_read_them_and_bots_by_the_report_list() {
        let agent = |ua: &str| {
            let a = Agent::of(ua.as_bytes(), true);
            (a.bot, a.device, a.os, a.browser)
        };
        assert_eq!(
            agent("Mozilla%2F5.0%20(iPhone%3B%20CPU%20iPhone%20OS%2018_1%20like%20Mac%20OS%20X)%20Mobile%2F15E148"),
            (false, "mobile", "ios", "other")
        );
        assert_eq!(
            agent("Mozilla%2F5.0%20(Windows%20NT%2010.0%3B%20Win64%3B%20x64)%20AppleWebKit%2F537.36%20Chrome%2F131.0.0.0%20Safari%2F537.36"),
            (false, "desktop", "windows", "chrome")
        );
        assert_eq!(agent("curl%2F8.5.0"), (true, "bot", "other", "other"));
        assert_eq!(agent("-"), (true, "bot", "other", "other"));
        assert_eq!(agent("Nokia3310"), (false, "other", "other", "other"));
        assert_eq!(Agent::of(b"curl%2F8.5.0", false), Agent { bot: true, device: OTHER, os: OTHER, browser: OTHER });
    }

    #[test]
    fn dimensions_stand_for_their_breakdowns_in_one_order() {
        let b = Breakdowns::new(&[Dimension::Device, Dimension::Campaign], None).unwrap();
        let names: Vec<_> = b.list().iter().map(|b| b.name()).collect();
        assert_eq!(
            names,
            ["utm_source", "utm_medium", "utm_campaign", "utm_term", "utm_content", "device", "os", "browser"]
        );
        assert!(matches!(Breakdowns::new(&[Dimension::Country], None), Err(GeoIpError::NoDatabase)));
    }
}
