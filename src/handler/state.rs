//! The handler's state, built once at start-up: the short domains served (a site each: its
//! links, log, counters, live counts and visit limits) and the settings every request reads.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use crate::access_log::AccessLog;
use crate::clicks::limits::Limits;
use crate::clicks::Tally;
use crate::client_ip::TrustedProxies;
use crate::domain::{Host, Link, LinkId};
use crate::gate::Gate;
use crate::message::{Field, Headers, Request};
use crate::metrics::Metrics;
use crate::store::LinkStore;
use crate::visitor::geoip::GeoIp;

/// Everything a request needs, built once at start-up.
pub struct App {
    /// The short domains served, one site each.
    pub sites: Sites,
    /// Process-wide counters (connections, serving threads); with one domain, its site's too.
    pub metrics: Arc<Metrics>,
    /// What the policy depends on.
    pub settings: Settings,
}

/// One short domain as requests meet it: its links, its access log, its counters.
pub struct Site {
    /// Where its link documents are read; `None` for the requests of no configured domain,
    /// which all answer 404.
    pub store: Option<Arc<LinkStore>>,
    /// Where its requests are recorded.
    pub log: AccessLog,
    /// Its counters.
    pub metrics: Arc<Metrics>,
    /// Its live counts per link, when counting is on.
    pub clicks: Option<Arc<Tally>>,
    /// Its links' visit limits: what every proxy counted (the live counts), and this one.
    pub limits: Arc<Limits>,
}

/// The sites a proxy serves, and which one a request is for: its host (the absolute-form
/// target's, else the `Host` header's), compared without port or case, international names in
/// their `xn--` form.
pub struct Sites {
    pub(super) list: Vec<Site>,
    pub(super) by_host: HashMap<Box<str>, usize>,
    /// Where a request for no configured host goes: the default domain, or the last site (the
    /// one without links).
    pub(super) otherwise: usize,
}

impl Sites {
    /// One site, whatever the host: couchlink with one domain, as configured before domains.
    pub fn single(site: Site) -> Sites {
        Sites { list: vec![site], by_host: HashMap::new(), otherwise: 0 }
    }

    /// A site per host, in order; a request for another host goes to `default` (an index into
    /// `hosts`), else to `unknown`, a site without links.
    pub fn new(hosts: Vec<(Host, Site)>, default: Option<usize>, unknown: Site) -> Sites {
        let by_host = hosts.iter().enumerate().map(|(n, (host, _))| (host.as_str().into(), n)).collect();
        let otherwise = default.unwrap_or(hosts.len());
        let mut list: Vec<Site> = hosts.into_iter().map(|(_, site)| site).collect();
        list.push(unknown);
        Sites { list, by_host, otherwise }
    }

    /// The site `request` is for, by index.
    pub fn pick(&self, request: &Request<'_>) -> usize {
        if self.by_host.is_empty() {
            return self.otherwise;
        }
        let named = match request.target.split_once("://") {
            Some((_, rest)) => rest.split(['/', '?']).next().map(str::as_bytes),
            None => request.headers.field(Field::Host),
        };
        named.and_then(|host| self.find(host)).unwrap_or(self.otherwise)
    }

    /// The site of `host` as a request names it: looked up as sent when it is already in the
    /// compared form (no allocation), else once normalised.
    pub(super) fn find(&self, host: &[u8]) -> Option<usize> {
        let name = match host.iter().rposition(|&b| b == b':') {
            Some(colon) if !host.starts_with(b"[") && host[colon + 1..].iter().all(u8::is_ascii_digit) => {
                &host[..colon]
            }
            _ => host,
        };
        let plain = name.iter().all(|&b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.');
        if plain && !name.ends_with(b".") {
            // ASCII only, so UTF-8.
            let name = std::str::from_utf8(name).ok()?;
            return self.by_host.get(name).copied();
        }
        let host = Host::parse(std::str::from_utf8(host).ok()?).ok()?;
        self.by_host.get(host.as_str()).copied()
    }

    /// Site `index`.
    pub fn get(&self, index: usize) -> &Site {
        &self.list[index]
    }

    /// Every site, the one for unknown hosts last when there is one.
    pub fn iter(&self) -> impl Iterator<Item = &Site> {
        self.list.iter()
    }
}

/// What the policy depends on besides the links.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The tracking cookie's name.
    pub cookie_name: String,
    /// Whose forwarding header is believed.
    pub trusted_proxies: TrustedProxies,
    /// Whether `Sec-GPC: 1` and `DNT: 1` turn the tracking cookie off for that request.
    pub honor_privacy_signals: bool,
    /// Whether logged addresses lose their host part ([`crate::client_ip::anonymize`]).
    pub anonymize_ip: bool,
    /// Where a link that does not work (inactive, expired, not yet started) and has no
    /// `fallback` of its own sends people, instead of a 404 (`COUCHLINK_FALLBACK_URL`).
    pub fallback: Option<Arc<str>>,
    /// The database `when.country` rules place addresses with (`COUCHLINK_GEOIP`), one for
    /// every domain.
    pub geoip: Option<Arc<GeoIp>>,
    /// Without one: the link revisions whose country conditions were already warned about.
    pub(super) warned_without_geoip: Arc<std::sync::Mutex<std::collections::HashSet<usize>>>,
    /// Password-protected links' gate: remembered verdicts, wrong guesses per address.
    pub gate: Arc<Gate>,
}

impl Settings {
    /// Settings with the cookie `cookie_name`, believing `trusted_proxies`.
    pub fn new(cookie_name: &str, trusted_proxies: TrustedProxies) -> Self {
        Settings {
            cookie_name: cookie_name.to_owned(),
            trusted_proxies,
            honor_privacy_signals: false,
            anonymize_ip: false,
            fallback: None,
            geoip: None,
            warned_without_geoip: Arc::default(),
            // A check or two at a time per core: each holds its hash's memory (19 MiB) while it runs.
            gate: Arc::new(Gate::new(std::thread::available_parallelism().map_or(1, usize::from))),
        }
    }

    /// A request for `link`, one of whose rules asks for a country, with no GeoIP database:
    /// counted, and said once per revision (the cached revision's address tells them apart).
    pub(super) fn country_without_geoip(&self, id: LinkId, link: &Arc<Link>, metrics: &Metrics) {
        metrics.country_without_geoip();
        let mut warned = self.warned_without_geoip.lock().unwrap_or_else(|e| e.into_inner());
        if warned.len() >= 10_000 {
            warned.clear();
        }
        if warned.insert(Arc::as_ptr(link) as usize) {
            tracing::warn!(
                "link {id} has a country condition but no GeoIP database is configured (COUCHLINK_GEOIP): served as if it never matched"
            );
        }
    }

    /// The client's address as the log keeps it.
    pub(super) fn logged_ip(&self, ip: IpAddr) -> IpAddr {
        if self.anonymize_ip {
            crate::client_ip::anonymize(ip)
        } else {
            ip
        }
    }

    /// Whether this request goes untracked: privacy signals honoured, and one of them set.
    /// Global Privacy Control (`Sec-GPC: 1`) and Do Not Track (`DNT: 1`) mean the same here,
    /// and any instance saying `1` counts: a client that sends both `0` and `1` asked not to be
    /// tracked.
    pub(super) fn untracked(&self, headers: &Headers<'_>) -> bool {
        self.honor_privacy_signals
            && headers.fields(Field::SecGpc).chain(headers.fields(Field::Dnt)).any(|v| v.trim_ascii() == b"1")
    }
}
