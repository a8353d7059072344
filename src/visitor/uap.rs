//! The tests' oracle for [`Client::of`]: what uap-core's regular expressions (the ua-parser
//! project's, through the `ua-parser` crate) say of a User-Agent, in the same terms.

use std::sync::OnceLock;

use serde::Deserialize;

use super::{Browser, Client, Device, Os};

/// The parts of uap-core's data couchlink uses.
#[derive(Deserialize)]
struct Data<'a> {
    #[serde(borrow)]
    user_agent_parsers: Vec<ua_parser::user_agent::Parser<'a>>,
    #[serde(borrow)]
    os_parsers: Vec<ua_parser::os::Parser<'a>>,
    #[serde(borrow)]
    device_parsers: Vec<ua_parser::device::Parser<'a>>,
}

struct Extractors {
    browser: ua_parser::user_agent::Extractor<'static>,
    os: ua_parser::os::Extractor<'static>,
    device: ua_parser::device::Extractor<'static>,
}

static DATA: &str = include_str!("regexes.json");

static EXTRACTORS: OnceLock<Extractors> = OnceLock::new();

fn extractors() -> &'static Extractors {
    EXTRACTORS.get_or_init(|| {
        // The shipped data: a failure here is a build that cannot work, caught by the tests.
        let data: Data<'static> = serde_json::from_str(DATA).expect("src/visitor/regexes.json parses");
        let (browser_parsers, os_parsers, device_parsers) =
            (data.user_agent_parsers, data.os_parsers, data.device_parsers);
        // Side by side: the device expressions take about 0.1 s to compile, the OS ones a
        // quarter of that.
        std::thread::scope(|scope| {
            let device = scope.spawn(|| {
                let device = device_parsers.into_iter().try_fold(ua_parser::device::Builder::new(), |b, p| b.push(p));
                device
                    .expect("uap-core's device expressions parse")
                    .build()
                    .expect("uap-core's device expressions compile")
            });
            let os = os_parsers.into_iter().try_fold(ua_parser::os::Builder::new(), |b, p| b.push(p));
            let browser = browser_parsers.into_iter().try_fold(ua_parser::user_agent::Builder::new(), |b, p| b.push(p));
            Extractors {
                browser: browser
                    .expect("uap-core's browser expressions parse")
                    .build()
                    .expect("uap-core's browser expressions compile"),
                os: os.expect("uap-core's OS expressions parse").build().expect("uap-core's OS expressions compile"),
                device: device.join().expect("the device expressions' thread"),
            }
        })
    })
}

/// What `user_agent` says by uap-core (nothing for none, or one that is not text).
pub fn of(user_agent: Option<&[u8]>) -> Client {
    user_agent.and_then(|bytes| std::str::from_utf8(bytes).ok()).map(parse).unwrap_or_default()
}

/// The OS uap-core's family name stands for.
fn os_of_family(family: &str) -> Option<Os> {
    Some(match family {
        "iOS" | "iPadOS" => Os::Ios,
        "Android" => Os::Android,
        "Windows" => Os::Windows,
        "Mac OS X" | "macOS" => Os::Macos,
        "Chrome OS" => Os::Chromeos,
        "Linux" | "Ubuntu" | "Debian" | "Fedora" | "Red Hat" | "SUSE" | "openSUSE" | "Mint" | "Arch Linux"
        | "Gentoo" | "Slackware" | "Mandriva" | "CentOS" | "Kubuntu" => Os::Linux,
        _ => return None,
    })
}

/// The browser uap-core's family name stands for.
fn browser_of_family(family: &str) -> Option<Browser> {
    Some(match family {
        "Chrome" | "Chrome Mobile" | "Chrome Mobile iOS" | "Chromium" => Browser::Chrome,
        "Safari" | "Mobile Safari" => Browser::Safari,
        "Firefox" | "Firefox Mobile" | "Firefox iOS" => Browser::Firefox,
        "Edge" | "Edge Mobile" => Browser::Edge,
        "Opera" => Browser::Opera,
        "Samsung Internet" => Browser::Samsung,
        "Facebook" => Browser::Facebook,
        "Instagram" => Browser::Instagram,
        _ => return None,
    })
}

fn parse(ua: &str) -> Client {
    let extractors = extractors();
    let os = extractors.os.extract(ua).and_then(|v| os_of_family(&v.os));
    let device = extractors.device.extract(ua);
    let family = device.as_ref().map(|d| &*d.device);
    let brand = device.as_ref().and_then(|d| d.brand.as_deref());
    if family == Some("Spider") {
        return Client { os: None, device: None, browser: None, bot: true };
    }
    // uap-core names devices, not kinds: tablets are the iPads and what it files under a
    // tablet brand; Android phones and tablets are told apart by Chrome's documented rule,
    // "Mobile" in the string for phones only.
    let tablet = family == Some("iPad")
        || brand.is_some_and(|b| b.ends_with("_Tablet") || b == "Kindle")
        || (os == Some(Os::Android) && !ua.contains("Mobile"));
    let device = match os {
        _ if tablet => Some(Device::Tablet),
        Some(Os::Ios | Os::Android) => Some(Device::Mobile),
        Some(Os::Windows | Os::Macos | Os::Linux | Os::Chromeos) => Some(Device::Desktop),
        None => None,
    };
    let browser = extractors.browser.extract(ua).and_then(|v| browser_of_family(&v.family));
    Client { os, device, browser, bot: false }
}
