//! The hand-written access log the report tests know the answers for (plain and gzipped days,
//! new and returning visitors, a re-pointed link, bots, probes, malformed lines), and running
//! `couchlink report` on it.

use std::io::Write;
use std::path::Path;
use std::process::Output;

use super::process::couchlink_command;

pub const FIREFOX: &str =
    "Mozilla%2F5.0%20(X11%3B%20Linux%20x86_64%3B%20rv%3A120.0)%20Gecko%2F20100101%20Firefox%2F120.0";
pub const SAFARI: &str = "Mozilla%2F5.0%20(iPhone%3B%20CPU%20iPhone%20OS%2017_0%20like%20Mac%20OS%20X)%20AppleWebKit%2F605.1.15%20(KHTML%2C%20like%20Gecko)%20Version%2F17.0%20Mobile%2F15E148%20Safari%2F604.1";
pub const GOOGLEBOT: &str =
    "Mozilla%2F5.0%20(compatible%3B%20Googlebot%2F2.1%3B%20%2Bhttp%3A%2F%2Fwww.google.com%2Fbot.html)";

/// Visitor `a` gets its ID on the 21st from H83if; `b` is Googlebot; `d` is new on the 22nd;
/// `g` got its ID before the log begins (returning); one client is untracked (`-`).
pub fn day_21() -> String {
    [
        format!("20261121090000.0 203.0.113.7 20261121090000aaaaaaaaaaaaaaaa {FIREFOX} /H83if 302 https://example.com/spring"),
        format!("20261121091500.3 203.0.113.8 20261121091500bbbbbbbbbbbbbbbb {GOOGLEBOT} /H83if 302 https://example.com/spring"),
        "20261121120000.0 203.0.113.9 20261121120000cccccccccccccccc curl%2F8.5.0 /wp-login.php 404".to_owned(),
        format!("20261121235959.9 203.0.113.7 20261121090000aaaaaaaaaaaaaaaa {FIREFOX} /H83if 302 https://example.com/spring"),
    ]
    .map(|l| l + "\n")
    .concat()
}

/// The valid lines of the 22nd: H83if now points at /summer.
pub fn day_22_valid() -> Vec<String> {
    vec![
        format!("20261122000000.0 203.0.113.7 20261121090000aaaaaaaaaaaaaaaa {FIREFOX} /H83if 302 https://example.com/summer"),
        format!("20261122000000.0 198.51.100.4 20261122000000dddddddddddddddd {SAFARI} /H83if 302 https://example.com/summer"),
        format!("20261122080000.0 198.51.100.4 20261122000000dddddddddddddddd {SAFARI} /H83if 302 https://example.com/summer"),
        format!("20261122081000.0 198.51.100.5 - {FIREFOX} /H83if 302 https://example.com/summer"),
        "20261122090000.0 198.51.100.6 20261122090000eeeeeeeeeeeeeeee - /Ab3dE 302 https://example.org/".to_owned(),
        format!("20261122100000.0 198.51.100.7 20261122100000ffffffffffffffff {FIREFOX} /wp-login.php?x=1 404"),
        format!("20261122100001.0 198.51.100.7 20261122100001ffffffffffffffff {FIREFOX} /.env 404"),
        format!("20261122100002.0 198.51.100.7 20261122100002ffffffffffffffff {FIREFOX} /H83if 501"),
        format!("20261122110000.0 198.51.100.8 20261101080000012345678abcdef9 {SAFARI} /H83if 302 https://example.com/summer"),
    ]
}

pub fn day_22() -> String {
    let mut lines = day_22_valid();
    lines.insert(8, "this is not a log line".to_owned());
    lines.insert(9, "20261122100003.0 198.51.100.7 - - /H83if 302".to_owned());
    lines.into_iter().map(|l| l + "\n").collect()
}

pub fn gzip(text: &str) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(text.as_bytes()).unwrap();
    gz.finish().unwrap()
}

/// A log directory as retention leaves it: yesterday gzipped, today plain.
pub fn log_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("access.2026-11-21.log.gz"), gzip(&day_21())).unwrap();
    std::fs::write(dir.path().join("access.2026-11-22.log"), day_22()).unwrap();
    dir
}

pub fn report(args: &[&str], dir: &Path) -> Output {
    couchlink_command().arg("report").args(args).env("COUCHLINK_LOG_DIR", dir).output().expect("couchlink runs")
}

/// User-Agents of the breakdown log, as logged (percent-encoded).
pub const IPHONE: &str = SAFARI;
pub const ANDROID_PHONE: &str = "Mozilla%2F5.0%20(Linux%3B%20Android%2014%3B%20Pixel%208)%20AppleWebKit%2F537.36%20(KHTML%2C%20like%20Gecko)%20Chrome%2F131.0.6778.81%20Mobile%20Safari%2F537.36";
pub const ANDROID_TABLET: &str = "Mozilla%2F5.0%20(Linux%3B%20Android%2014%3B%20SM-X710)%20AppleWebKit%2F537.36%20(KHTML%2C%20like%20Gecko)%20Chrome%2F131.0.6778.81%20Safari%2F537.36";
pub const WINDOWS: &str = "Mozilla%2F5.0%20(Windows%20NT%2010.0%3B%20Win64%3B%20x64)%20AppleWebKit%2F537.36%20(KHTML%2C%20like%20Gecko)%20Chrome%2F131.0.0.0%20Safari%2F537.36";
pub const MAC: &str = "Mozilla%2F5.0%20(Macintosh%3B%20Intel%20Mac%20OS%20X%2010_15_7)%20AppleWebKit%2F605.1.15%20(KHTML%2C%20like%20Gecko)%20Version%2F18.1%20Safari%2F605.1.15";

/// The winter Location of Promo: a campaign in the Location only.
pub const WINTER: &str = "https://example.com/b?utm_source=qr&utm_medium=print&utm_campaign=winter";

/// The 23rd (gzipped): Promo's spring page, campaigns in the request (merged into the
/// Location, as couchlink does). Visitors: 1 (iPhone, 203.0.113.7: France), 2 (Android phone,
/// 203.0.113.0, anonymised: France), 3 (Android tablet, 203.0.113.200: Germany), 4 (Windows,
/// 2001:db8:1::abcd: Japan; its ID older than the log), 5 (Googlebot, 198.51.100.9: US).
pub fn breakdown_day_23() -> String {
    [
        format!("20261123080000.0 203.0.113.7 20261123080000aaaaaaaaaaaaaaaa {IPHONE} /Promo?utm_source=flyer&utm_medium=print 302 https://example.com/a?utm_source=flyer&utm_medium=print"),
        format!("20261123081000.0 203.0.113.0 20261123081000bbbbbbbbbbbbbbbb {ANDROID_PHONE} /Promo 302 https://example.com/a"),
        format!("20261123082000.0 203.0.113.200 20261123082000cccccccccccccccc {ANDROID_TABLET} /Promo 302 https://example.com/a"),
        format!("20261123083000.0 198.51.100.9 20261123083000eeeeeeeeeeeeeeee {GOOGLEBOT} /Promo 302 https://example.com/a"),
        format!("20261123090000.0 2001:db8:1::abcd 20261101000000dddddddddddddddd {WINDOWS} /Promo?utm_source=mail&utm_campaign=spring 302 https://example.com/a?utm_source=mail&utm_campaign=spring"),
        format!("20261123100000.0 203.0.113.7 20261123080000aaaaaaaaaaaaaaaa {IPHONE} /Promo 302 https://example.com/a"),
        "20261123110000.0 203.0.113.9 - - /wp-login.php 404".to_owned(),
    ]
    .map(|l| l + "\n")
    .concat()
}

/// The 24th (plain): Promo re-pointed to the winter page, whose campaign is in the Location;
/// an untracked Mac (2001:db8:2::, anonymised: Brazil), a request's own utm_source over the
/// Location's, a client without a User-Agent (a bot) at an address no country holds, and
/// visitor 4 on another link.
pub fn breakdown_day_24() -> String {
    [
        format!("20261124080000.0 2001:db8:2:: - {MAC} /Promo 302 {WINTER}"),
        format!("20261124081000.0 203.0.113.7 20261123080000aaaaaaaaaaaaaaaa {IPHONE} /Promo 302 {WINTER}"),
        format!("20261124082000.0 203.0.113.0 20261123081000bbbbbbbbbbbbbbbb {ANDROID_PHONE} /Promo?utm_source=sms 302 https://example.com/b?utm_source=sms&utm_medium=print&utm_campaign=winter"),
        format!("20261124090000.0 192.0.2.1 20261124090000ffffffffffffffff - /Promo 302 {WINTER}"),
        format!("20261124100000.0 2001:db8:1::abcd 20261101000000dddddddddddddddd {WINDOWS} /Other 302 https://example.org/"),
    ]
    .map(|l| l + "\n")
    .concat()
}

/// A MaxMind-format country database, written by the `mmdb-writer` crate: 203.0.113.0/25 in
/// France and 203.0.113.128/25 in Germany (one /24 split between two countries, where an
/// anonymised address can only locate as its /24's first), 198.51.100.0/24 in the US,
/// 2001:db8:1::/48 in Japan, 2001:db8:2::/48 in Brazil; nothing for 192.0.2.0/24.
pub fn geoip_db(path: &Path) {
    let mut writer = mmdb_writer::Writer::new("GeoLite2-Country");
    for (net, code) in [
        ("203.0.113.0/25", "FR"),
        ("203.0.113.128/25", "DE"),
        ("198.51.100.0/24", "US"),
        ("2001:db8:1::/48", "JP"),
        ("2001:db8:2::/48", "BR"),
    ] {
        let record = serde_json::json!({ "country": { "iso_code": code, "names": { "en": code } } });
        writer.insert(net.parse::<ipnet::IpNet>().unwrap(), &record).unwrap();
    }
    std::fs::write(path, writer.to_bytes().unwrap()).unwrap();
}

/// The breakdown log's folder (the 23rd gzipped, the 24th plain) with its database as
/// `geo.mmdb`.
pub fn breakdown_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("access.2026-11-23.log.gz"), gzip(&breakdown_day_23())).unwrap();
    std::fs::write(dir.path().join("access.2026-11-24.log"), breakdown_day_24()).unwrap();
    geoip_db(&dir.path().join("geo.mmdb"));
    dir
}
