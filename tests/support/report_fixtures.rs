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
