//! `couchlink report` as analysts run it: a hand-written log with known answers (plain and
//! gzipped days, new and returning visitors, a re-pointed link, bots, probes, malformed lines),
//! its CSV and JSON schemas, and the report of a log couchlink itself wrote. (The HTML page in
//! headless Chromium and the GoAccess recipe are in `tests/tools`.)

use std::io::Read;
use std::path::Path;
use std::process::Stdio;

use serde_json::{json, Value};

use crate::support::process::couchlink_command;
use crate::support::report_fixtures::*;
use crate::support::*;

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
    assert_eq!(r["schema"], "couchlink-report/2");
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
    // couchlink-report/1, still written with --schema 1 (for one release), has what it had.
    let r = json_report(&["--schema", "1"], log_dir().path());
    assert_eq!(r["schema"], "couchlink-report/1");
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

    // couchlink-report/2: the same, and the breakdowns asked for.
    let r2 = json_report(&[], log_dir().path());
    assert_eq!(keys(&r2), "breakdowns,files,geoip,links,schema,since,totals,until");
    assert_eq!((&r2["breakdowns"], &r2["geoip"]), (&json!([]), &Value::Null));
    assert_eq!(r2["links"][0]["by"], json!({}));
    let mut with_by: Vec<String> = keys(link).split(',').map(str::to_owned).chain(["by".to_owned()]).collect();
    with_by.sort();
    assert_eq!(keys(&r2["links"][0]), with_by.join(","));
    let dir = breakdown_dir();
    let geo = dir.path().join("geo.mmdb");
    let r2 = json_report(&["--by", "device", "--geoip", geo.to_str().unwrap()], dir.path());
    assert_eq!(r2["breakdowns"], json!(["device", "os", "browser", "country"]));
    assert_eq!(keys(&r2["geoip"]), "built,database_type,path");
    assert_eq!(r2["geoip"]["database_type"], "GeoLite2-Country");
    assert_eq!(keys(&r2["links"][0]["by"]), "browser,country,device,os");
    assert_eq!(keys(&r2["links"][0]["versions"][0]["by"]), "browser,country,device,os");
    assert_eq!(keys(&r2["links"][0]["by"]["device"][0]), "redirects,value,visitors");
}

/// `[value, redirects, visitors]` of each value of `breakdown` in a link's or version's `by`.
fn values(by: &Value, breakdown: &str) -> Vec<(String, u64, u64)> {
    by[breakdown]
        .as_array()
        .unwrap_or_else(|| panic!("no {breakdown} in {by:#}"))
        .iter()
        .map(|v| {
            (v["value"].as_str().unwrap().to_owned(), v["redirects"].as_u64().unwrap(), v["visitors"].as_u64().unwrap())
        })
        .collect()
}

fn v(value: &str, redirects: u64, visitors: u64) -> (String, u64, u64) {
    (value.to_owned(), redirects, visitors)
}

#[test]
fn breakdowns_by_campaign_device_and_country_have_known_answers_in_every_format() {
    let dir = breakdown_dir();
    let geo = dir.path().join("geo.mmdb");
    let all = ["--by", "campaign", "--by", "device", "--by", "country", "--geoip", geo.to_str().unwrap()];
    let r = json_report(&all, dir.path());
    assert_eq!(r["files"][0]["gzip"], true, "the 23rd is read gzipped");
    let promo = link(&r, "Promo");
    assert_eq!((&promo["redirects"], &promo["visitors"]), (&json!(10), &json!(6)));
    let by = &promo["by"];
    // utm_source: the request's first, then the Location's; lines without it as "(none)".
    assert_eq!(
        values(by, "utm_source"),
        [v("(none)", 4, 4), v("qr", 3, 2), v("flyer", 1, 1), v("mail", 1, 1), v("sms", 1, 1)]
    );
    assert_eq!(values(by, "utm_medium"), [v("(none)", 5, 5), v("print", 5, 3)]);
    assert_eq!(values(by, "utm_campaign"), [v("(none)", 5, 4), v("winter", 4, 3), v("spring", 1, 1)]);
    assert_eq!(values(by, "utm_term"), [v("(none)", 10, 6)]);
    assert_eq!(values(by, "utm_content"), [v("(none)", 10, 6)]);
    // Devices by uap-core, bots (Googlebot, no User-Agent) by the report's one bot list.
    assert_eq!(values(by, "device"), [v("mobile", 5, 2), v("bot", 2, 2), v("desktop", 2, 1), v("tablet", 1, 1)]);
    assert_eq!(
        values(by, "os"),
        [v("android", 3, 2), v("ios", 3, 1), v("other", 2, 2), v("macos", 1, 0), v("windows", 1, 1)]
    );
    // IPv4 and IPv6, full and anonymised: 203.0.113.0 (anonymised) locates in France as its /24's
    // first address does; 203.0.113.200 (full) in Germany.
    assert_eq!(
        values(by, "country"),
        [v("FR", 5, 2), v("(unknown)", 1, 1), v("BR", 1, 0), v("DE", 1, 1), v("JP", 1, 1), v("US", 1, 1)]
    );
    // Per target version, what the link decided (the visitor's own query taken off): 1 the
    // spring page (six lines, two with the request's campaign), 2 the winter page, its campaign
    // in the Location, 3 the winter page whose utm_source the visitor replaced (taken off with
    // it: the documented corner).
    let locations: Vec<&Value> = promo["versions"].as_array().unwrap().iter().map(|v| &v["location"]).collect();
    assert_eq!(
        locations,
        [
            &json!("https://example.com/a"),
            &json!(WINTER),
            &json!("https://example.com/b?utm_medium=print&utm_campaign=winter")
        ]
    );
    let winter = &promo["versions"][1];
    assert_eq!(values(&winter["by"], "utm_source"), [v("qr", 3, 2)]);
    assert_eq!(values(&winter["by"], "utm_campaign"), [v("winter", 3, 2)]);
    assert_eq!(values(&winter["by"], "device"), [v("bot", 1, 1), v("desktop", 1, 0), v("mobile", 1, 1)]);
    assert_eq!(values(&winter["by"], "country"), [v("(unknown)", 1, 1), v("BR", 1, 0), v("FR", 1, 1)]);
    let spring = &promo["versions"][0]["by"];
    assert_eq!(values(spring, "utm_source"), [v("(none)", 4, 4), v("flyer", 1, 1), v("mail", 1, 1)]);
    assert_eq!(values(spring, "utm_campaign"), [v("(none)", 5, 4), v("spring", 1, 1)]);
    assert_eq!(values(spring, "device"), [v("mobile", 3, 2), v("bot", 1, 1), v("desktop", 1, 1), v("tablet", 1, 1)]);
    assert_eq!(values(spring, "country"), [v("FR", 3, 2), v("DE", 1, 1), v("JP", 1, 1), v("US", 1, 1)]);
    let replaced = &promo["versions"][2]["by"];
    assert_eq!(values(replaced, "utm_source"), [v("sms", 1, 1)]);
    assert_eq!(values(replaced, "utm_medium"), [v("print", 1, 1)]);
    assert_eq!(values(replaced, "device"), [v("mobile", 1, 1)]);
    let other = link(&r, "Other");
    assert_eq!(values(&other["by"], "country"), [v("JP", 1, 1)]);
    // The counts outside the breakdowns are those of a report without them.
    let plain = json_report(&[], dir.path());
    let strip = |mut r: Value| {
        for l in r["links"].as_array_mut().unwrap() {
            l.as_object_mut().unwrap().remove("by");
            for v in l["versions"].as_array_mut().unwrap() {
                v.as_object_mut().unwrap().remove("by");
            }
        }
        (r["links"].clone(), r["totals"].clone())
    };
    assert_eq!(strip(r.clone()), strip(plain));

    // CSV: the long format, a row per link (`all`) or version, breakdown and value.
    let out = report(&[&["--format", "csv"], &all[..]].concat(), dir.path());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let csv = String::from_utf8(out.stdout).unwrap();
    let rows: Vec<&str> = csv.lines().collect();
    assert_eq!(rows[0], "link,version,breakdown,value,redirects,visitors");
    for row in [
        "Promo,all,utm_source,(none),4,4",
        "Promo,all,utm_campaign,winter,4,3",
        "Promo,all,device,mobile,5,2",
        "Promo,all,os,macos,1,0",
        "Promo,all,country,FR,5,2",
        "Promo,2,utm_source,qr,3,2",
        "Promo,2,country,BR,1,0",
        "Other,all,country,JP,1,1",
    ] {
        assert!(
            rows.contains(&row),
            "{row} not in
{csv}"
        );
    }
    // Every count the JSON has, and no other.
    let mut from_json = Vec::new();
    for l in r["links"].as_array().unwrap() {
        let id = l["id"].as_str().unwrap();
        let versions = l["versions"].as_array().unwrap().iter().map(|v| (v["version"].to_string(), &v["by"]));
        for (version, by) in std::iter::once(("all".to_owned(), &l["by"])).chain(versions) {
            for breakdown in by.as_object().unwrap().keys() {
                for (value, redirects, visitors) in values(by, breakdown) {
                    from_json.push(format!("{id},{version},{breakdown},{value},{redirects},{visitors}"));
                }
            }
        }
    }
    let mut csv_rows = rows[1..].to_vec();
    csv_rows.sort_unstable();
    from_json.sort_unstable();
    assert_eq!(csv_rows, from_json);

    // Table: each link's and version's top values.
    let out = report(&all, dir.path());
    let table = String::from_utf8(out.stdout).unwrap();
    for line in [
        "  utm_source       (none) 4/4, qr 3/2, flyer 1/1, mail 1/1, sms 1/1",
        "  device           mobile 5/2, bot 2/2, desktop 2/1, tablet 1/1",
        "  country          FR 5/2, (unknown) 1/1, BR 1/0, DE 1/1, JP 1/1, 1 more",
        "  v2 utm_campaign  winter 3/2",
    ] {
        assert!(
            table.lines().any(|l| l == line),
            "{line:?} not in
{table}"
        );
    }

    // HTML: the values, drawn (the page's charts are checked in Chromium in tests/tools).
    let out = report(&[&["--format", "html"], &all[..]].concat(), dir.path());
    let page = String::from_utf8(out.stdout).unwrap();
    for text in [
        "<h4>utm_campaign</h4>",
        "winter: 4 redirects, 3 visitors",
        "mobile: 5 redirects, 2 visitors",
        "<td class=\"text\">FR</td><td>5</td><td>2</td>",
    ] {
        assert!(page.contains(text), "{text} not in the page");
    }
}

#[test]
fn a_missing_or_damaged_geoip_database_is_one_clear_error() {
    let dir = breakdown_dir();
    let geo = dir.path().join("geo.mmdb");
    let bytes = std::fs::read(&geo).unwrap();
    let fails = |args: &[&str], expected: &str| {
        let out = report(args, dir.path());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "one line: {stderr}");
        assert!(out.stdout.is_empty(), "never half a report");
    };
    fails(&["--by", "country"], "--by country needs a GeoIP database: --geoip FILE.mmdb");
    fails(&["--geoip", "/nonexistent/geo.mmdb"], "cannot read the GeoIP database /nonexistent/geo.mmdb");
    let text = dir.path().join("text.mmdb");
    std::fs::write(&text, "not a database\n").unwrap();
    fails(&["--geoip", text.to_str().unwrap()], "is not a readable MaxMind DB file");
    // The search tree cut short: refused when opened.
    let cut = dir.path().join("cut.mmdb");
    let metadata = bytes.windows(14).rposition(|w| w == b"\xab\xcd\xefMaxMind.com").unwrap();
    std::fs::write(&cut, [&bytes[..8], &bytes[metadata..]].concat()).unwrap();
    fails(&["--geoip", cut.to_str().unwrap()], "is not a readable MaxMind DB file");
    // A record damaged: found when an address leads to it, and the report fails with it.
    let reader = maxminddb::Reader::from_source(bytes.clone()).unwrap();
    let tree = reader.metadata().node_count as usize * usize::from(reader.metadata().record_size) / 4;
    let mut damaged = bytes.clone();
    // The data section's first record (after the tree and 16 zero bytes): an extended type that
    // does not exist.
    damaged[tree + 16] = 0x00;
    damaged[tree + 17] = 0xff;
    let damaged_path = dir.path().join("damaged.mmdb");
    std::fs::write(&damaged_path, damaged).unwrap();
    fails(&["--geoip", damaged_path.to_str().unwrap()], "is damaged: looking up");
    fails(&["--schema", "1", "--by", "device"], "couchlink-report/1 has no breakdowns");
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
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains(&format!("{} does not exist", missing.display())) && said.contains("--log-dir"), "{said}");
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

#[test]
fn a_log_truncated_while_it_is_read_is_an_error_naming_it_never_a_signal() {
    use std::os::unix::process::ExitStatusExt;
    // Big enough to be read in several pieces on every thread, over tens of milliseconds.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("access.2026-11-22.log");
    let lines: String = (0..300_000)
        .map(|i| {
            format!(
                "20261122{:02}{:02}{:02}.0 198.51.100.7 20261122090000{i:016x} Mozilla%2F5.0 /L{:04} 302 https://example.com/{}\n",
                i / 36_000,
                i / 600 % 60,
                i / 10 % 60,
                i % 5000,
                i % 7
            )
        })
        .collect();
    let run = || couchlink_command().args(["report", "--format", "json"]).arg(&path).output().expect("couchlink runs");
    std::fs::write(&path, &lines).unwrap();
    let started = std::time::Instant::now();
    let whole = run();
    assert!(whole.status.success(), "{}", String::from_utf8_lossy(&whole.stderr));
    let took = started.elapsed();
    // `> access.log` at moments spread over a whole report's time, until one lands mid-read.
    let (mut cut_short, mut attempts) = (0, 0);
    while cut_short < 3 && attempts < 60 {
        attempts += 1;
        std::fs::write(&path, &lines).unwrap();
        let child = couchlink_command()
            .args(["report", "--format", "json"])
            .arg(&path)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("couchlink runs");
        // When the cut lands within the read is what is varied: a pause of its own each attempt.
        std::thread::sleep(took.mul_f64(f64::from(attempts % 10) / 10.0));
        std::fs::File::create(&path).unwrap();
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.signal(), None, "killed by a signal: {stderr}");
        if !out.status.success() {
            assert_eq!(out.status.code(), Some(1));
            assert!(
                stderr.contains(&format!("{} changed while the report read it", path.display()))
                    && stderr.contains("cut to 0 bytes"),
                "{stderr}"
            );
            assert!(out.stdout.is_empty(), "no half report");
            cut_short += 1;
        }
    }
    assert!(cut_short > 0, "no truncation landed while the report read the file in {attempts} attempts");
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
