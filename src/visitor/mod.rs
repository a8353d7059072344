//! What a request says about who asks, for the conditions of a link's `targets` and the live
//! counts' breakdowns: the operating system, kind of device and browser its `User-Agent` names,
//! the language it prefers ([`language`]), its campaign ([`campaign`]) and referrer
//! ([`referrer`]).
//!
//! A User-Agent is read by [`Client::of`], for the proxy's rules and the report's device
//! breakdown alike: a few substring searches, bounded by the string's length whatever it holds,
//! so that a client sending a new User-Agent with every request costs the proxy next to nothing
//! more, and nothing to compile or hold. Its oracle, in the tests only, is the ua-parser project's
//! regular expressions (uap-core, through the `ua-parser` crate: thorough, but 0.1 s and 28 MiB
//! to compile, about 6 us for a browser's string not seen before and 47 us for 400 random
//! bytes): the tests hold the two to the same answers for real browsers' strings.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::OnceLock;

pub mod bot;
pub mod campaign;
pub mod geoip;
pub mod language;
pub mod referrer;
#[cfg(test)]
mod uap;

/// An operating system a rule can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Os {
    /// iOS and iPadOS (an iPad that asks for desktop sites says macOS).
    Ios,
    /// Android.
    Android,
    /// Windows.
    Windows,
    /// macOS.
    Macos,
    /// Linux desktops (Ubuntu, Fedora, ...), Android aside.
    Linux,
    /// ChromeOS.
    Chromeos,
}

impl Os {
    /// Every name a rule may use, in the order documented.
    pub const NAMES: [&'static str; 6] = ["ios", "android", "windows", "macos", "linux", "chromeos"];

    /// The OS a rule names.
    pub fn parse(name: &str) -> Option<Os> {
        Some(match name {
            "ios" => Os::Ios,
            "android" => Os::Android,
            "windows" => Os::Windows,
            "macos" => Os::Macos,
            "linux" => Os::Linux,
            "chromeos" => Os::Chromeos,
            _ => return None,
        })
    }

    /// The name a rule uses.
    pub fn name(self) -> &'static str {
        Os::NAMES[self as usize]
    }
}

/// A kind of device a rule can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Device {
    /// A phone.
    Mobile,
    /// A tablet.
    Tablet,
    /// A computer.
    Desktop,
}

impl Device {
    /// Every name a rule may use.
    pub const NAMES: [&'static str; 3] = ["mobile", "tablet", "desktop"];

    /// The name a rule uses.
    pub fn name(self) -> &'static str {
        Device::NAMES[self as usize]
    }

    /// The device a rule names.
    pub fn parse(name: &str) -> Option<Device> {
        Some(match name {
            "mobile" => Device::Mobile,
            "tablet" => Device::Tablet,
            "desktop" => Device::Desktop,
            _ => return None,
        })
    }
}

/// A browser family, for the live counts and the report (rules do not name browsers): the
/// families uap-core names, a few of its names taken as one (Chrome on a phone is Chrome).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Browser {
    /// Chrome and Chromium, on any system.
    Chrome,
    /// Safari, on any system.
    Safari,
    /// Firefox, on any system.
    Firefox,
    /// Microsoft Edge.
    Edge,
    /// Opera.
    Opera,
    /// Samsung Internet.
    Samsung,
    /// Facebook's in-app browser.
    Facebook,
    /// Instagram's in-app browser.
    Instagram,
}

impl Browser {
    /// Every name, in the enum's order.
    pub const NAMES: [&'static str; 8] =
        ["chrome", "safari", "firefox", "edge", "opera", "samsung", "facebook", "instagram"];

    /// Its name in counts and reports.
    pub fn name(self) -> &'static str {
        Browser::NAMES[self as usize]
    }
}

/// What a User-Agent says: each part `None` when it does not say (a bot is neither).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Client {
    /// The operating system.
    pub os: Option<Os>,
    /// The kind of device.
    pub device: Option<Device>,
    /// The browser family.
    pub browser: Option<Browser>,
    /// A crawler, per uap-core.
    pub bot: bool,
}

/// Answers kept per serving thread before the oldest are dropped (all at once: simple, and
/// rare with real traffic's few hundred strings).
const CACHED: usize = 4096;

thread_local! {
    /// [`Client::of`]'s answers per User-Agent (foldhash, as the link cache: a User-Agent is a
    /// hundred bytes or more, hashed per request): one hash lookup for a string seen before
    /// instead of the bot list and the searches.
    static SEEN: RefCell<HashMap<Box<[u8]>, Client, foldhash::fast::RandomState>> = RefCell::default();
}

/// Longest User-Agent [`Client::of`] remembers (a client sending a new long string every time
/// gains nothing from them).
const REMEMBERED_BYTES: usize = 512;

/// [`Client::read`] of `ua`, remembered in [`SEEN`] (emptied at [`CACHED`] entries).
fn remembered(ua: &[u8]) -> Client {
    if let Some(client) = SEEN.with_borrow(|seen| seen.get(ua).copied()) {
        return client;
    }
    let client = Client::read(ua);
    SEEN.with_borrow_mut(|seen| {
        if seen.len() >= CACHED {
            seen.clear();
        }
        seen.insert(ua.into(), client);
    });
    client
}

/// The substrings [`Client::of`] looks for (SIMD, memchr).
struct Needles {
    cros: memchr::memmem::Finder<'static>,
    android: memchr::memmem::Finder<'static>,
    iphone: memchr::memmem::Finder<'static>,
    ipad: memchr::memmem::Finder<'static>,
    ipod: memchr::memmem::Finder<'static>,
    windows_phone: memchr::memmem::Finder<'static>,
    windows: memchr::memmem::Finder<'static>,
    macintosh: memchr::memmem::Finder<'static>,
    mac_os_x: memchr::memmem::Finder<'static>,
    linux: memchr::memmem::Finder<'static>,
    mobile: memchr::memmem::Finder<'static>,
    kindle: memchr::memmem::Finder<'static>,
    /// Each browser family's tokens, in the order they are tried (an in-app browser's string
    /// also names Safari or Chrome; Edge's, Opera's and Samsung's name Chrome), then the tokens
    /// of browsers counted as none of them (web views, Amazon Silk).
    browsers: Vec<(Option<Browser>, memchr::memmem::Finder<'static>)>,
    safari_version: memchr::memmem::Finder<'static>,
}

static NEEDLES: std::sync::LazyLock<Needles> = std::sync::LazyLock::new(|| {
    let find = memchr::memmem::Finder::new;
    Needles {
        cros: find("CrOS"),
        android: find("Android"),
        iphone: find("iPhone"),
        ipad: find("iPad"),
        ipod: find("iPod"),
        windows_phone: find("Windows Phone"),
        windows: find("Windows"),
        macintosh: find("Macintosh"),
        mac_os_x: find("Mac OS X"),
        linux: find("Linux"),
        mobile: find("Mobile"),
        kindle: find("Kindle"),
        browsers: [
            (Some(Browser::Facebook), "FBAN/"),
            (Some(Browser::Facebook), "FB_IAB/"),
            (Some(Browser::Instagram), "Instagram"),
            (Some(Browser::Samsung), "SamsungBrowser/"),
            (Some(Browser::Edge), "Edg/"),
            (Some(Browser::Edge), "EdgA/"),
            (Some(Browser::Edge), "EdgiOS/"),
            (Some(Browser::Edge), "Edge/"),
            (Some(Browser::Opera), "OPR/"),
            (Some(Browser::Opera), "Opera"),
            (Some(Browser::Firefox), "Firefox/"),
            (Some(Browser::Firefox), "FxiOS/"),
            (None, "Silk/"),
            (None, "; wv)"),
            (Some(Browser::Chrome), "CriOS/"),
            (Some(Browser::Chrome), "Chrome/"),
            (Some(Browser::Chrome), "Chromium/"),
        ]
        .into_iter()
        .map(|(browser, token)| (browser, find(token)))
        .collect(),
        safari_version: find("Version/"),
    }
});

impl Client {
    /// What `user_agent` says, read in time proportional to its length (see the module's
    /// documentation): the operating system by the token browsers put in their strings, the
    /// device by uap-core's and Chrome's rules (an iPad or a Kindle is a tablet, so is an
    /// Android device whose string says no `Mobile`), and bots by the one bot list.
    pub fn of(user_agent: Option<&[u8]>) -> Client {
        // None at all, or an empty one, is a bot's (every browser sends one), saying nothing else.
        let Some(ua) = user_agent.filter(|ua| !ua.is_empty()) else { return Client { bot: true, ..Client::default() } };
        if ua.len() <= REMEMBERED_BYTES {
            return remembered(ua);
        }
        Client::read(ua)
    }

    /// [`Client::of`]'s reading itself.
    fn read(ua: &[u8]) -> Client {
        if bot::is_bot(Some(ua)) {
            return Client { os: None, device: None, browser: None, bot: true };
        }
        let n = &*NEEDLES;
        // Browsers name the system in their first comment, `Mozilla/5.0 (iPhone; CPU ...)`:
        // the system's tokens are looked for there (most strings' first 60 bytes), `Mobile`
        // and `Kindle` anywhere.
        let (open, close) = (b'(', b')');
        let comment = match memchr::memchr(open, ua) {
            Some(start) => {
                let end = memchr::memchr(close, &ua[start..]).map_or(ua.len(), |at| start + at);
                &ua[start..end]
            }
            None => ua,
        };
        let has = |finder: &memchr::memmem::Finder<'_>| finder.find(comment).is_some();
        let os = if has(&n.cros) {
            Some(Os::Chromeos)
        } else if has(&n.android) {
            Some(Os::Android)
        } else if has(&n.iphone) || has(&n.ipad) || has(&n.ipod) {
            Some(Os::Ios)
        } else if has(&n.windows_phone) {
            None
        } else if has(&n.windows) {
            Some(Os::Windows)
        } else if has(&n.macintosh) || has(&n.mac_os_x) {
            Some(Os::Macos)
        } else if has(&n.linux) {
            Some(Os::Linux)
        } else {
            None
        };
        let anywhere = |finder: &memchr::memmem::Finder<'_>| finder.find(ua).is_some();
        let tablet = has(&n.ipad) || anywhere(&n.kindle) || (os == Some(Os::Android) && !anywhere(&n.mobile));
        let device = match os {
            _ if tablet && os.is_some() => Some(Device::Tablet),
            Some(Os::Ios | Os::Android) => Some(Device::Mobile),
            Some(Os::Windows | Os::Macos | Os::Linux | Os::Chromeos) => Some(Device::Desktop),
            None => None,
        };
        let browser = match n.browsers.iter().find(|(_, token)| anywhere(token)) {
            Some((browser, _)) => *browser,
            // Safari says `Version/17.5 ... Safari/604.1`; an app's web view says neither.
            None if anywhere(&n.safari_version) && memchr::memmem::find(ua, b"Safari/").is_some() => {
                Some(Browser::Safari)
            }
            None => None,
        };
        Client { os, device, browser, bot: false }
    }
}

/// One request's visitor as a link's rules see it: what its `User-Agent` and `Accept-Language`
/// say, where its address is, its query and its tracking ID, each read only if a rule asks.
pub struct Visitor<'a> {
    user_agent: Option<&'a [u8]>,
    accept_language: Option<&'a [u8]>,
    /// The request's query (after `?`, undecoded).
    query: Option<&'a str>,
    /// The client's address as logged (after trusted proxies, anonymised if configured).
    address: Option<std::net::IpAddr>,
    /// The tracking ID the response carries (received or new), when it carries one.
    tracking: Option<&'a [u8]>,
    geoip: Option<&'a geoip::GeoIp>,
    client: OnceLock<Client>,
    language: OnceLock<Option<language::Language>>,
    /// What the database says of its address, as it says it: looked up once for the rules and
    /// the live counts alike.
    place: OnceLock<Option<&'a str>>,
}

impl<'a> Visitor<'a> {
    /// The visitor sending these headers (nothing else known of it).
    pub fn new(user_agent: Option<&'a [u8]>, accept_language: Option<&'a [u8]>) -> Self {
        Visitor {
            user_agent,
            accept_language,
            query: None,
            address: None,
            tracking: None,
            geoip: None,
            client: Default::default(),
            language: Default::default(),
            place: Default::default(),
        }
    }

    /// The same, with what the rest of the request says: its query, its address as logged,
    /// its tracking ID, and the database that places addresses (if one is configured).
    pub fn with_request(
        mut self,
        query: Option<&'a str>,
        address: Option<std::net::IpAddr>,
        tracking: Option<&'a [u8]>,
        geoip: Option<&'a geoip::GeoIp>,
    ) -> Self {
        (self.query, self.address, self.tracking, self.geoip) = (query, address, tracking, geoip);
        self
    }

    /// The country its address is in: none without a database, an address, or a place for it.
    pub fn country(&self) -> Option<geoip::Country> {
        self.place().and_then(geoip::Country::parse)
    }

    /// Its country as the live counts count it: `None` without a database,
    /// [`geoip::NO_COUNTRY`] for an address it does not place (or whose lookup fails), as the
    /// report says of one. Asked last, after the rules: looked up again only if they did not.
    pub fn counted_country(&self) -> Option<&'a str> {
        self.geoip?;
        let place = self.place.get().copied().unwrap_or_else(|| self.look_up());
        Some(place.unwrap_or(geoip::NO_COUNTRY))
    }

    /// The database's code for its address, looked up once.
    fn place(&self) -> Option<&'a str> {
        *self.place.get_or_init(|| self.look_up())
    }

    /// [`geoip::GeoIp::country`] of its address; a failed lookup is none.
    fn look_up(&self) -> Option<&'a str> {
        self.geoip.zip(self.address).and_then(|(db, ip)| db.country(ip).ok().flatten())
    }

    /// Whether its query has parameter `name` (form-decoded, as `URLSearchParams` reads it)
    /// with one of `values`.
    pub fn query_has(&self, name: &str, values: &[Box<str>]) -> bool {
        let Some(query) = self.query else { return false };
        form_urlencoded::parse(query.as_bytes()).any(|(n, v)| n == name && values.iter().any(|want| **want == *v))
    }

    /// What keeps a visitor on one variant of a split: its tracking ID, or without one (privacy
    /// signals honoured) its address as logged.
    pub fn sticky_key(&self) -> std::borrow::Cow<'a, [u8]> {
        match (self.tracking, self.address) {
            (Some(tracking), _) => tracking.into(),
            (None, Some(address)) => address.to_string().into_bytes().into(),
            (None, None) => (&b""[..]).into(),
        }
    }

    /// What its `User-Agent` says.
    pub fn client(&self) -> Client {
        *self.client.get_or_init(|| Client::of(self.user_agent))
    }

    /// [`Visitor::client`], asked last, after the rules: read again only if they did not (and
    /// then not kept: keeping it is what costs, a hundred instructions, on the plain path).
    pub fn client_at_last(&self) -> Client {
        match self.client.get() {
            Some(client) => *client,
            None => Client::of(self.user_agent),
        }
    }

    /// Its most preferred language.
    pub fn language(&self) -> Option<language::Language> {
        *self.language.get_or_init(|| self.accept_language.and_then(language::preferred))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(ua: &str) -> (Option<Os>, Option<Device>, bool) {
        let c = Client::of(Some(ua.as_bytes()));
        (c.os, c.device, c.bot)
    }

    #[test]
    fn real_browsers_are_told_apart() {
        use Device::*;
        let cases = [
            ("Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1", Os::Ios, Mobile),
            ("Mozilla/5.0 (iPad; CPU OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1", Os::Ios, Tablet),
            ("Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Mobile Safari/537.36", Os::Android, Mobile),
            ("Mozilla/5.0 (Linux; Android 14; SAMSUNG SM-S918B) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/25.0 Chrome/121.0.0.0 Mobile Safari/537.36", Os::Android, Mobile),
            ("Mozilla/5.0 (Linux; Android 13; SM-X710) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36", Os::Android, Tablet),
            ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36", Os::Windows, Desktop),
            ("Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:127.0) Gecko/20100101 Firefox/127.0", Os::Windows, Desktop),
            ("Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15", Os::Macos, Desktop),
            ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36 Edg/126.0.0.0", Os::Windows, Desktop),
            ("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36", Os::Linux, Desktop),
            ("Mozilla/5.0 (X11; CrOS x86_64 14541.0.0) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36", Os::Chromeos, Desktop),
        ];
        for (ua, os, device) in cases {
            assert_eq!(client(ua), (Some(os), Some(device), false), "{ua}");
            // Asked again: the thread's cache answers the same.
            assert_eq!(client(ua), (Some(os), Some(device), false), "{ua}");
        }
        let bot = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";
        assert_eq!(client(bot), (None, None, true));
        assert_eq!(Client::of(None), Client { bot: true, ..Client::default() }, "none is a bot's, as the report says");
        assert_eq!(uap::of(Some(b"\xff\xfe")), Client::default());
    }

    /// The rules' fast reading agrees with uap-core (the plain model) on real clients' strings:
    /// browsers, in-app browsers, tablets, crawlers that pose as phones, and odd ones.
    #[test]
    fn the_fast_reading_agrees_with_uap_core_on_real_user_agents() {
        let corpus = [
            "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1",
            "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) CriOS/126.0.6478.54 Mobile/15E148 Safari/604.1",
            "Mozilla/5.0 (iPhone; CPU iPhone OS 16_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 Instagram 301.0.0.29.124",
            "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/21E236 [FBAN/FBIOS;FBAV/460.0.0.48.109]",
            "Mozilla/5.0 (iPad; CPU OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1",
            "Mozilla/5.0 (iPod touch; CPU iPhone OS 15_8 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/15.6 Mobile/15E148 Safari/604.1",
            "Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Mobile Safari/537.36",
            "Mozilla/5.0 (Linux; Android 14; SAMSUNG SM-S918B) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/25.0 Chrome/121.0.0.0 Mobile Safari/537.36",
            "Mozilla/5.0 (Linux; Android 13; SM-X710) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36",
            "Mozilla/5.0 (Android 14; Mobile; rv:127.0) Gecko/127.0 Firefox/127.0",
            "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Mobile Safari/537.36 EdgA/126.0.0.0",
            "Mozilla/5.0 (Linux; Android 13; Pixel 7 Build/TQ3A.230805.001; wv) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/126.0.6478.71 Mobile Safari/537.36 [FB_IAB/FB4A;FBAV/471.0.0.35.79;]",
            "Mozilla/5.0 (Linux; Android 9; KFTRWI) AppleWebKit/537.36 (KHTML, like Gecko) Silk/126.3.1 like Chrome/126.0.6478.71 Safari/537.36",
            "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36",
            "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:127.0) Gecko/20100101 Firefox/127.0",
            "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36 Edg/126.0.0.0",
            "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36 OPR/111.0.0.0",
            "Mozilla/5.0 (Windows NT 6.1; WOW64; Trident/7.0; rv:11.0) like Gecko",
            "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15",
            "Mozilla/5.0 (Macintosh; Intel Mac OS X 14.5; rv:127.0) Gecko/20100101 Firefox/127.0",
            "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36",
            "Mozilla/5.0 (X11; Ubuntu; Linux x86_64; rv:127.0) Gecko/20100101 Firefox/127.0",
            "Mozilla/5.0 (X11; Fedora; Linux x86_64; rv:127.0) Gecko/20100101 Firefox/127.0",
            "Mozilla/5.0 (X11; CrOS x86_64 14541.0.0) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36",
            "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
            "Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X Build/MMB29P) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.6478.126 Mobile Safari/537.36 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
            "Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)",
            "facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)",
            "curl/8.5.0",
        ];
        for ua in corpus {
            let (fast, uap) = (Client::of(Some(ua.as_bytes())), uap::of(Some(ua.as_bytes())));
            // uap-core files some tools under no device rather than a crawler; the rules treat
            // both alike (no condition on the OS or the device matches).
            let seen = |c: Client| (c.os, c.device, c.browser);
            assert_eq!(seen(fast), seen(uap), "{ua}");
        }
    }

    proptest::proptest! {
        /// Any bytes at all: an answer, no panic (the proxy reads what any client sends).
        #[test]
        fn the_fast_reading_answers_anything(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..600)) {
            let _ = Client::of(Some(&bytes));
        }
    }

    #[test]
    fn every_documented_name_parses() {
        assert!(Os::NAMES.iter().all(|n| Os::parse(n).is_some()));
        assert!(Device::NAMES.iter().all(|n| Device::parse(n).is_some()));
        assert_eq!(Os::parse("iOS"), None, "names are lower case");
    }
}
