//! `couchlink report` as analysts run it: a hand-written log with known answers (plain and
//! gzipped days, new and returning visitors, a re-pointed link, bots, probes, malformed lines),
//! its CSV and JSON schemas, the HTML page in headless Chromium, the README's GoAccess recipe
//! with the real goaccess, and the report of a log couchlink itself wrote.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{json, Value};

use crate::support::process::{couchlink_command, tool};
use crate::support::*;

const FIREFOX: &str = "Mozilla%2F5.0%20(X11%3B%20Linux%20x86_64%3B%20rv%3A120.0)%20Gecko%2F20100101%20Firefox%2F120.0";
const SAFARI: &str = "Mozilla%2F5.0%20(iPhone%3B%20CPU%20iPhone%20OS%2017_0%20like%20Mac%20OS%20X)%20AppleWebKit%2F605.1.15%20(KHTML%2C%20like%20Gecko)%20Version%2F17.0%20Mobile%2F15E148%20Safari%2F604.1";
const GOOGLEBOT: &str =
    "Mozilla%2F5.0%20(compatible%3B%20Googlebot%2F2.1%3B%20%2Bhttp%3A%2F%2Fwww.google.com%2Fbot.html)";

/// Visitor `a` gets its ID on the 21st from H83if; `b` is Googlebot; `d` is new on the 22nd;
/// `g` got its ID before the log begins (returning); one client is untracked (`-`).
fn day_21() -> String {
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
fn day_22_valid() -> Vec<String> {
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

fn day_22() -> String {
    let mut lines = day_22_valid();
    lines.insert(8, "this is not a log line".to_owned());
    lines.insert(9, "20261122100003.0 198.51.100.7 - - /H83if 302".to_owned());
    lines.into_iter().map(|l| l + "\n").collect()
}

fn gzip(text: &str) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(text.as_bytes()).unwrap();
    gz.finish().unwrap()
}

/// A log directory as retention leaves it: yesterday gzipped, today plain.
fn log_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("access.2026-11-21.log.gz"), gzip(&day_21())).unwrap();
    std::fs::write(dir.path().join("access.2026-11-22.log"), day_22()).unwrap();
    dir
}

fn report(args: &[&str], dir: &Path) -> Output {
    couchlink_command().arg("report").args(args).env("COUCHLINK_LOG_DIR", dir).output().expect("couchlink runs")
}

fn json_report(args: &[&str], dir: &Path) -> Value {
    let out = report(&[&["--format", "json"], args].concat(), dir);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn link<'a>(report: &'a Value, id: &str) -> &'a Value {
    report["links"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["id"] == id)
        .unwrap_or_else(|| panic!("no {id} in {report:#}"))
}

#[test]
fn known_answers_from_a_plain_and_a_gzipped_day() {
    let dir = log_dir();
    let r = json_report(&[], dir.path());
    assert_eq!(r["schema"], "couchlink-report/1");
    assert_eq!(r["totals"]["lines"], 15);
    assert_eq!(r["totals"]["in_range"], 13);
    assert_eq!(r["totals"]["malformed"], 2, "counted, never dropped silently");
    assert_eq!(r["totals"]["statuses"], json!({"302": 9, "404": 3, "501": 1}));
    assert_eq!(r["totals"]["not_found"], json!([{"path": "/wp-login.php", "count": 2}, {"path": "/.env", "count": 1}]));
    let day22 = dir.path().join("access.2026-11-22.log").display().to_string();
    let malformed: Vec<(String, u64)> = r["totals"]["malformed_lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["file"].as_str().unwrap().to_owned(), m["line"].as_u64().unwrap()))
        .collect();
    assert_eq!(malformed, [(day22.clone(), 9), (day22, 10)]);
    assert_eq!(
        r["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| (f["gzip"].as_bool().unwrap(), f["lines"].as_u64().unwrap()))
            .collect::<Vec<_>>(),
        [(true, 4), (false, 11)]
    );

    let h = link(&r, "H83if");
    // a, b (a bot), d and g; the untracked client is a request but no visitor. g's ID is older
    // than the log: a returning visitor, not a new one.
    let expected = json!({"redirects": 8, "human_redirects": 7, "bot_redirects": 1, "visitors": 4, "new_visitors": 3,
                          "human_visitors": 3, "bot_visitors": 1});
    for (key, value) in expected.as_object().unwrap() {
        assert_eq!(h[key], *value, "H83if {key}");
    }
    assert_eq!(
        (h["first_seen"].as_str(), h["last_seen"].as_str()),
        (Some("2026-11-21T09:00:00.0Z"), Some("2026-11-22T11:00:00.0Z"))
    );
    assert_eq!(
        h["days"],
        json!([{"day": "2026-11-21", "human": 2, "bot": 1}, {"day": "2026-11-22", "human": 5, "bot": 0}])
    );
    // The re-pointed tag: each target version apart, in the order first served; a returning to
    // the new target is not a new visitor there.
    let v = h["versions"].as_array().unwrap();
    assert_eq!(v.len(), 2);
    assert_eq!((v[0]["version"].as_u64(), v[0]["location"].as_str()), (Some(1), Some("https://example.com/spring")));
    assert_eq!(
        (v[0]["first_seen"].as_str(), v[0]["last_seen"].as_str()),
        (Some("2026-11-21T09:00:00.0Z"), Some("2026-11-21T23:59:59.9Z"))
    );
    assert_eq!(
        (v[0]["redirects"].as_u64(), v[0]["visitors"].as_u64(), v[0]["new_visitors"].as_u64()),
        (Some(3), Some(2), Some(2))
    );
    assert_eq!(v[1]["location"], "https://example.com/summer");
    assert_eq!(
        (v[1]["redirects"].as_u64(), v[1]["visitors"].as_u64(), v[1]["new_visitors"].as_u64()),
        (Some(5), Some(3), Some(1))
    );

    // No User-Agent at all counts as a bot.
    let a = link(&r, "Ab3dE");
    assert_eq!(
        (a["redirects"].as_u64(), a["bot_redirects"].as_u64(), a["bot_visitors"].as_u64()),
        (Some(1), Some(1), Some(1))
    );
    assert_eq!(r["links"][0]["id"], "H83if", "most redirects first");
}

#[test]
fn since_and_until_split_at_utc_midnight() {
    let dir = log_dir();
    let redirects = |r: &Value| r["totals"]["statuses"]["302"].as_u64().unwrap_or(0);
    let from_22 = json_report(&["--since", "2026-11-22"], dir.path());
    assert_eq!(redirects(&from_22), 6, "23:59:59.9 on the 21st is left out");
    assert_eq!(from_22["files"].as_array().unwrap().len(), 1, "the 21st's file is not even read");
    assert_eq!(link(&from_22, "H83if")["versions"][0]["location"], "https://example.com/summer");
    let to_21 = json_report(&["--until", "2026-11-21"], dir.path());
    assert_eq!(redirects(&to_21), 3, "the whole 21st, its last tenth of a second included");
    assert_eq!(link(&to_21, "H83if")["last_seen"], "2026-11-21T23:59:59.9Z");
    assert_eq!(to_21["until"], "2026-11-22T00:00:00.0Z");
    let around = json_report(&["--since", "2026-11-21T23:59:59.9Z", "--until", "2026-11-22T00:00:00.1Z"], dir.path());
    assert_eq!(redirects(&around), 3, "the last tenth before midnight and the first after");
    let empty = report(&["--since", "2026-11-22", "--until", "2026-11-21"], dir.path());
    assert!(!empty.status.success());
    assert!(String::from_utf8_lossy(&empty.stderr).contains("is not before --until"));
}

#[test]
fn link_filter_keeps_totals_whole() {
    let dir = log_dir();
    let r = json_report(&["--link", "Ab3dE"], dir.path());
    assert_eq!(r["links"].as_array().unwrap().len(), 1);
    assert_eq!(r["links"][0]["id"], "Ab3dE");
    assert_eq!(r["totals"]["statuses"]["302"], 9);
    let bad = report(&["--link", "nope"], dir.path());
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("exactly 5 characters"));
}

#[test]
fn csv_schema_is_stable() {
    let dir = log_dir();
    let out = report(&["--format", "csv"], dir.path());
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("2 malformed lines"), "said on stderr even in CSV: {stderr}");
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "link,version,location,first_seen,last_seen,redirects,human_redirects,bot_redirects,visitors,new_visitors,human_visitors,bot_visitors\n\
         H83if,all,,2026-11-21T09:00:00.0Z,2026-11-22T11:00:00.0Z,8,7,1,4,3,3,1\n\
         H83if,1,https://example.com/spring,2026-11-21T09:00:00.0Z,2026-11-21T23:59:59.9Z,3,2,1,2,2,1,1\n\
         H83if,2,https://example.com/summer,2026-11-22T00:00:00.0Z,2026-11-22T11:00:00.0Z,5,5,0,3,1,3,0\n\
         Ab3dE,all,,2026-11-22T09:00:00.0Z,2026-11-22T09:00:00.0Z,1,0,1,1,1,0,1\n\
         Ab3dE,1,https://example.org/,2026-11-22T09:00:00.0Z,2026-11-22T09:00:00.0Z,1,0,1,1,1,0,1\n"
    );
}

#[test]
fn json_schema_is_stable() {
    let r = json_report(&[], log_dir().path());
    let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>().join(",");
    assert_eq!(keys(&r), "files,links,schema,since,totals,until");
    assert_eq!(keys(&r["totals"]), "in_range,lines,malformed,malformed_lines,not_found,statuses");
    assert_eq!(keys(&r["totals"]["malformed_lines"][0]), "file,line,reason,text");
    assert_eq!(keys(&r["files"][0]), "gzip,lines,path");
    let counts = "bot_redirects,bot_visitors,human_redirects,human_visitors,new_visitors,redirects,visitors";
    let link = &r["links"][0];
    assert_eq!(
        keys(link),
        format!("{counts},days,first_seen,id,last_seen,versions")
            .split(',')
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect::<Vec<_>>()
            .join(",")
    );
    assert_eq!(
        keys(&link["versions"][0]),
        format!("{counts},days,first_seen,last_seen,location,version")
            .split(',')
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect::<Vec<_>>()
            .join(",")
    );
    assert_eq!(keys(&link["days"][0]), "bot,day,human");
}

#[test]
fn table_for_a_terminal() {
    let out = report(&[], log_dir().path());
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("15 lines in 2 files: 13 in range, 2 malformed\n"), "{text}");
    let row = text.lines().find(|l| l.starts_with("H83if")).unwrap();
    assert_eq!(row.split_whitespace().take(8).collect::<Vec<_>>(), ["H83if", "8", "7", "1", "4", "3", "3", "1"]);
    assert!(text.lines().any(|l| l.starts_with("  v2") && l.ends_with("https://example.com/summer")), "{text}");
    assert!(text.contains("access.2026-11-22.log:9: no yyyymmddhhmmss.t timestamp: this is not a log line"), "{text}");
}

#[test]
fn an_unreadable_file_is_an_error_naming_it() {
    let dir = log_dir();
    // A day whose gzip stream is cut short: the whole report fails, naming the file.
    let mut broken = gzip(&day_21());
    broken.truncate(broken.len() / 2);
    let path = dir.path().join("access.2026-11-20.log.gz");
    std::fs::write(&path, broken).unwrap();
    let out = report(&[], dir.path());
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&path.display().to_string()), "{stderr}");
    assert!(out.stdout.is_empty(), "no half report");
    let missing = dir.path().join("access.2026-11-19.log");
    let out = report(&[missing.to_str().unwrap()], dir.path());
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains(&format!("cannot read {}", missing.display())));
    let empty = tempfile::tempdir().unwrap();
    let out = report(&[], empty.path());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no access.*.log or access.*.log.gz files in"));
    assert!(!out.status.success());
}

#[test]
fn a_reader_that_stops_early_is_not_an_error() {
    // `couchlink report | head`: more than a pipe holds, and a reader that leaves after a line.
    let dir = tempfile::tempdir().unwrap();
    let lines: String =
        (0..3000).map(|i| format!("20261122090000.0 ::1 - - /L{i:04} 302 https://example.com/{i}\n")).collect();
    std::fs::write(dir.path().join("access.2026-11-22.log"), lines).unwrap();
    let mut child = couchlink_command()
        .arg("report")
        .env("COUCHLINK_LOG_DIR", dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("couchlink runs");
    let mut first = [0; 100];
    child.stdout.take().unwrap().read_exact(&mut first).unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && !stderr.contains("pipe"), "{stderr}");
    // Where the output is a file that cannot be written, it is an error.
    let out = report(&["--out", "/proc/no-such-dir/report.txt"], dir.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("cannot write the report to /proc/no-such-dir/report.txt"),
        "{stderr}"
    );
}

/// Where screenshots go, for people to look at.
fn screenshot_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/report-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Renders `html` in headless Chromium into a PNG of `width`×`height`.
pub fn screenshot(html: &Path, png: &Path, width: u32, height: u32) {
    let profile = tempfile::tempdir().unwrap();
    let out = tool("chromium", "chromium")
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run"])
        .args(["--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars"])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--window-size={width},{height}"))
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("file://{}", html.display()))
        .output()
        .unwrap();
    assert!(png.exists(), "chromium made no screenshot: {}", String::from_utf8_lossy(&out.stderr));
}

/// Pixels of each colour, as `#rrggbb`.
fn colours(png: &Path) -> std::collections::HashMap<String, usize> {
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(png).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let step = info.color_type.samples();
    let mut counts = std::collections::HashMap::new();
    for px in buf[..info.buffer_size()].chunks(step) {
        *counts.entry(format!("#{:02x}{:02x}{:02x}", px[0], px[1], px[2])).or_insert(0) += 1;
    }
    counts
}

#[test]
fn the_html_page_is_self_contained_and_its_charts_render_in_chromium() {
    let dir = log_dir();
    let html = dir.path().join("report.html");
    let out = report(&["--format", "html", "--out", html.to_str().unwrap()], dir.path());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let page = std::fs::read_to_string(&html).unwrap();
    for fetch in ["<script", "<link", "<img", "src=", "url(", "@import", "<iframe"] {
        assert!(!page.contains(fetch), "the page would fetch something: {fetch}");
    }
    assert!(page.contains("https://example.com/summer"));
    let png = screenshot_dir().join("report.png");
    let _ = std::fs::remove_file(&png);
    screenshot(&html, &png, 1100, 2400);
    let colours = colours(&png);
    // The charts' bars are drawn: humans and bots per day, and both target versions of H83if
    // (the palette of src/report/print/html.rs).
    for (name, colour) in
        [("humans", "#2563eb"), ("bots", "#94a3b8"), ("version 1", "#7c3aed"), ("version 2", "#ea580c")]
    {
        let n = colours.get(colour).copied().unwrap_or(0);
        assert!(n > 500, "{name} ({colour}): {n} pixels in {}", png.display());
    }
}

#[test]
fn the_readme_goaccess_recipe_runs_with_the_real_goaccess() {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let start = readme.find("zcat -f logs/access.").expect("the README's GoAccess recipe");
    let recipe = readme[start..].split("\n```").next().unwrap().to_owned();
    tool("goaccess", "goaccess");
    // Valid lines only (GoAccess counts malformed ones as failed): 6 and 7 fields, plain and gzipped.
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    std::fs::create_dir(&logs).unwrap();
    std::fs::write(logs.join("access.2026-11-21.log.gz"), gzip(&day_21())).unwrap();
    std::fs::write(
        logs.join("access.2026-11-22.log"),
        day_22_valid().into_iter().map(|l| l + "\n").collect::<String>(),
    )
    .unwrap();
    let run = |recipe: &str| {
        let out = Command::new("bash").args(["-o", "pipefail", "-c", recipe]).current_dir(dir.path()).output().unwrap();
        assert!(out.status.success(), "{recipe}: {}", String::from_utf8_lossy(&out.stderr));
    };
    run(&recipe);
    let page = std::fs::read_to_string(dir.path().join("report.html")).unwrap();
    assert!(page.contains("GoAccess"));
    // The same recipe with GoAccess's JSON output, to read what it counted.
    assert!(recipe.contains("-o report.html"));
    run(&recipe.replace("-o report.html", "-o report.json"));
    let counted: Value = serde_json::from_slice(&std::fs::read(dir.path().join("report.json")).unwrap()).unwrap();
    assert_eq!(counted["general"]["total_requests"], 13, "{:#}", counted["general"]);
    assert_eq!(counted["general"]["failed_requests"], 0);
    let statuses = counted["status_codes"]["data"].to_string();
    assert!(statuses.contains("302") && statuses.contains("404"), "{statuses}");
}

/// The report reads what couchlink writes: requests made to a running proxy, counted.
#[tokio::test]
async fn reports_what_a_running_proxy_logged() {
    let app = spawn_app().await;
    app.db.put_link("H83if", json!({"url": "https://example.com/spring"})).await;
    let browser = "Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0";
    let get = |headers: Vec<(&'static str, String)>| {
        let mut request = http().get(format!("{}/H83if", app.base));
        for (name, value) in headers {
            request = request.header(name, value);
        }
        async move { request.send().await.unwrap() }
    };
    let first = get(vec![("User-Agent", browser.to_owned())]).await;
    let cookie = tracking_cookie(&first);
    let again = get(vec![("User-Agent", browser.to_owned()), ("Cookie", format!("tid={cookie}"))]).await;
    assert_eq!(again.status(), 302);
    let bot = get(vec![("User-Agent", "Googlebot/2.1 (+http://www.google.com/bot.html)".to_owned())]).await;
    assert_eq!(bot.status(), 302);
    assert_eq!(app.get("/zzzzz").await.status(), 404);
    app.wait_for_log_lines(4).await;
    let r = json_report(&[], app.log_dir.path());
    let h = link(&r, "H83if");
    assert_eq!((h["redirects"].as_u64(), h["bot_redirects"].as_u64()), (Some(3), Some(1)));
    assert_eq!((h["visitors"].as_u64(), h["new_visitors"].as_u64()), (Some(2), Some(2)), "{h:#}");
    assert_eq!(r["totals"]["not_found"][0]["path"], "/zzzzz");
    assert_eq!(r["totals"]["malformed"], 0);
}
