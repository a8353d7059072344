//! The plain model of a report's counting, kept as the oracle of the engine in
//! [`count`](super::count): one thread, ordered maps, every visitor's tracking ID kept whole,
//! each count where a reader would look for it, every breakdown value read afresh per line. The property tests below check that the
//! engine's reports are byte for byte this model's, over random logs.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use super::breakdown::{Breakdown, GeoIpError};
use super::line::{self, Day, Malformed, Stamp};
use super::tally::{DayCount, LinkTally, Sample, Seen, Stats, Tally, ValueCount, Version, Visitors, SAMPLES};
use super::{read, Options, Report, ReportError};
use crate::domain::LinkId;

/// Everything counted so far.
#[derive(Default)]
struct Model {
    lines: u64,
    in_range: u64,
    malformed: u64,
    statuses: BTreeMap<u16, u64>,
    not_found: BTreeMap<Vec<u8>, u64>,
    /// Per link, per `Location`.
    links: BTreeMap<LinkId, BTreeMap<Vec<u8>, VersionModel>>,
    samples: Vec<Sample>,
}

/// Per breakdown and value: redirects, and every visitor seen.
type ByValue = BTreeMap<(Breakdown, String), (u64, BTreeSet<[u8; 30]>)>;

/// One target version of a link.
struct VersionModel {
    first: Stamp,
    last: Stamp,
    /// `[human, bot]` redirects per day.
    days: BTreeMap<Day, [u64; 2]>,
    /// Every visitor seen, and how.
    visitors: BTreeMap<[u8; 30], Seen>,
    /// Per breakdown and value: redirects, and every visitor seen.
    by: ByValue,
}

/// The report of the logs `paths` name, counted by the model, plain files read in pieces of
/// `chunk` bytes (so that malformed lines are sampled per piece, as the engine does).
pub fn run(paths: &[PathBuf], options: &Options, chunk: u64) -> Result<Report, ReportError> {
    let mut sources = read::sources(paths)?;
    sources.retain(|s| options.may_include(s));
    let pieces = read::pieces(&sources, chunk);
    let mut model = Model::default();
    let mut piece_lines = Vec::new();
    let mut failure = None;
    for (i, piece) in pieces.iter().enumerate() {
        let mut number = 0;
        read::read_piece(&sources[piece.source], *piece, &mut Vec::new(), |bytes, terminated| {
            number += 1;
            if let Err(e) = model.line(bytes, terminated, options, i, number) {
                failure.get_or_insert(e);
            }
        })?;
        piece_lines.push((i, number));
    }
    if let Some(e) = failure {
        return Err(e.into());
    }
    Ok(Report::new(model.tally(piece_lines), &sources, &pieces, options))
}

impl Model {
    fn line(
        &mut self,
        bytes: &[u8],
        terminated: bool,
        options: &Options,
        piece: usize,
        number: u64,
    ) -> Result<(), GeoIpError> {
        self.lines += 1;
        let parsed = if terminated { line::parse(bytes) } else { Err(Malformed::Unterminated) };
        let line = match parsed {
            Ok(line) => line,
            Err(reason) => {
                self.malformed += 1;
                if self.samples.iter().filter(|s| s.piece == piece).count() < SAMPLES {
                    self.samples.push(Sample::new(piece, number, reason, bytes));
                }
                return Ok(());
            }
        };
        if !options.includes(line.stamp) {
            return Ok(());
        }
        self.in_range += 1;
        *self.statuses.entry(line.status).or_default() += 1;
        if line.status == 404 {
            *self.not_found.entry(line.path().to_vec()).or_default() += 1;
        }
        let (Some(location), Some(id)) = (line.location, line.link()) else { return Ok(()) };
        if !options.wants(id) {
            return Ok(());
        }
        let bot = line::bot_agent(line.user_agent);
        let breakdowns = options.breakdowns.list();
        let values = options.breakdowns.values(&line)?;
        // The version rule is held to its own table of cases (`resolve::logged_version`).
        let location = crate::resolve::logged_version(line.target, location);
        let version = self.links.entry(id).or_default().entry(location.to_vec()).or_insert(VersionModel {
            first: line.stamp,
            last: line.stamp,
            days: BTreeMap::new(),
            visitors: BTreeMap::new(),
            by: BTreeMap::new(),
        });
        version.first = version.first.min(line.stamp);
        version.last = version.last.max(line.stamp);
        version.days.entry(line.stamp.day()).or_default()[usize::from(bot)] += 1;
        if let Some(id) = line.tracking {
            let seen = version.visitors.entry(*id).or_default();
            *seen = seen.and(Seen::redirect(bot, line.issued_tracking_id()));
        }
        for (&breakdown, value) in breakdowns.iter().zip(values) {
            let (redirects, visitors) = version.by.entry((breakdown, value)).or_default();
            *redirects += 1;
            visitors.extend(line.tracking.copied());
        }
        Ok(())
    }

    fn tally(self, piece_lines: Vec<(usize, u64)>) -> Tally {
        let links = self
            .links
            .into_iter()
            .map(|(id, versions)| {
                // A visitor of the link is one of any of its versions, seen as on all of them.
                let mut everyone: BTreeMap<[u8; 30], Seen> = BTreeMap::new();
                let mut link_by: ByValue = BTreeMap::new();
                for version in versions.values() {
                    for (visitor, seen) in &version.visitors {
                        let all = everyone.entry(*visitor).or_default();
                        *all = all.and(*seen);
                    }
                    for (value, (redirects, visitors)) in &version.by {
                        let (all_redirects, all_visitors) = link_by.entry(value.clone()).or_default();
                        *all_redirects += redirects;
                        all_visitors.extend(visitors);
                    }
                }
                let versions: Vec<Version> = versions
                    .into_iter()
                    .map(|(location, v)| {
                        let bot_redirects = v.days.values().map(|[_, bot]| bot).sum();
                        let redirects = v.days.values().map(|[human, bot]| human + bot).sum();
                        Version {
                            location: location.into(),
                            first: v.first,
                            last: v.last,
                            stats: Stats { redirects, bot_redirects, visitors: visitors(v.visitors.values()) },
                            days: v.days.iter().map(|(&day, &[human, bot])| DayCount { day, human, bot }).collect(),
                            by: value_counts(v.by),
                        }
                    })
                    .collect();
                let total = Stats {
                    redirects: versions.iter().map(|v| v.stats.redirects).sum(),
                    bot_redirects: versions.iter().map(|v| v.stats.bot_redirects).sum(),
                    visitors: visitors(everyone.values()),
                };
                (id, LinkTally { total, versions, by: value_counts(link_by) })
            })
            .collect();
        Tally {
            lines: self.lines,
            in_range: self.in_range,
            malformed: self.malformed,
            statuses: self.statuses,
            not_found: self.not_found.into_iter().map(|(path, n)| (path.into(), n)).collect(),
            links,
            samples: self.samples,
            piece_lines,
        }
    }
}

fn value_counts(by: ByValue) -> Vec<ValueCount> {
    by.into_iter()
        .map(|((breakdown, value), (redirects, visitors))| ValueCount {
            breakdown,
            value: value.into(),
            redirects,
            visitors: visitors.len() as u64,
        })
        .collect()
}

fn visitors<'a>(seen: impl Iterator<Item = &'a Seen>) -> Visitors {
    let mut visitors = Visitors::default();
    seen.for_each(|s| visitors.add(*s));
    visitors
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use proptest::prelude::*;

    use super::super::breakdown::{Breakdowns, Dimension};
    use super::super::Schema;
    use super::*;

    /// User-Agents as logged: two browsers, a bot on the list, and none.
    const AGENTS: [&str; 4] = [
        "Mozilla%2F5.0%20(X11%3B%20Linux%20x86_64%3B%20rv%3A120.0)%20Gecko%2F20100101%20Firefox%2F120.0",
        "Mozilla%2F5.0%20(iPhone%3B%20CPU%20iPhone%20OS%2018_1%20like%20Mac%20OS%20X)",
        "Mozilla%2F5.0%20(compatible%3B%20Googlebot%2F2.1%3B%20%2Bhttp%3A%2F%2Fwww.google.com%2Fbot.html)",
        "-",
    ];
    const LINKS: [&str; 5] = ["H83if", "H83ig", "aaaaa", "Zz9Q0", "q1w2e"];
    /// Queries of the request and of the `Location`: none, in the request, in the `Location`
    /// only, in both and different, encoded, empty.
    const CAMPAIGNS: [(&str, &str); 7] = [
        ("", ""),
        ("?utm_source=mail", "?utm_source=mail"),
        ("?utm_source=tw&utm_medium=social", ""),
        ("", "?utm_campaign=spring&utm_source=tag"),
        ("?utm_source=mail", "?utm_source=tag&utm_medium=qr"),
        ("?utm_campaign=big+sale%21&utm_term=a", ""),
        ("?utm_source=&x=1", "?utm_content=v"),
    ];
    /// Client addresses as logged: in each network of [`geoip`]'s database, anonymised, in
    /// none, and not an address.
    const ADDRESSES: [&str; 7] =
        ["198.51.100.7", "198.51.100.200", "198.51.100.0", "2001:db8:1::", "2001:db8:1::7", "::1", "unknown"];

    /// A database placing 198.51.100.0/25 in France, 198.51.100.128/25 in Germany and
    /// 2001:db8::/32 in Japan.
    fn geoip(dir: &std::path::Path) -> super::super::breakdown::GeoIp {
        let mut writer = mmdb_writer::Writer::new("Test-Country");
        for (net, code) in [("198.51.100.0/25", "FR"), ("198.51.100.128/25", "DE"), ("2001:db8::/32", "JP")] {
            let record = serde_json::json!({ "country": { "iso_code": code } });
            writer.insert(net.parse::<ipnet::IpNet>().unwrap(), &record).unwrap();
        }
        let path = dir.join("test.mmdb");
        std::fs::write(&path, writer.to_bytes().unwrap()).unwrap();
        super::super::breakdown::GeoIp::open(&path).unwrap()
    }

    /// One line of a random log.
    #[derive(Debug, Clone)]
    enum Event {
        /// A redirect of link `link` to its version `version`, `seconds` after the log's
        /// start, for visitor `visitor` (none: untracked); when `issued`, the response that
        /// issued the visitor's ID (at the ID's second, then).
        Redirect {
            seconds: u32,
            link: usize,
            version: usize,
            visitor: Option<usize>,
            issued: bool,
            agent: usize,
            /// Index into [`CAMPAIGNS`] and [`ADDRESSES`].
            campaign: usize,
            ip: usize,
        },
        /// Another response: a 404 for a link or a probe, a 200, a 400.
        Other { seconds: u32, status: u16, target: usize },
        /// A line couchlink does not write.
        Malformed(usize),
    }

    /// Over about 70 days from 2026-10-20: across two month ends.
    const SPAN: u32 = 70 * 86_400;
    const START: time::PrimitiveDateTime = time::macros::datetime!(2026-10-20 00:00);

    fn stamp(seconds: u32) -> String {
        let at = START + time::Duration::seconds(i64::from(seconds));
        let f = time::macros::format_description!("[year][month][day][hour][minute][second]");
        at.format(&f).unwrap()
    }

    /// The second visitor `v`'s tracking ID was issued at.
    fn issued_at(v: usize) -> u32 {
        v as u32 * 7_919 % SPAN
    }

    /// Visitor `v`'s tracking ID, with random hex that two visitors may share (the issue second
    /// tells them apart, as it does in real IDs).
    fn tracking_id(v: usize) -> String {
        format!("{}{:016x}", stamp(issued_at(v)), (v as u64 % 4).wrapping_mul(0x9e37_79b9_7f4a_7c15))
    }

    /// When an event happens: a redirect that issued its visitor's ID, at the ID's second.
    fn seconds_of(event: &Event) -> u32 {
        match *event {
            Event::Redirect { visitor: Some(v), issued: true, .. } => issued_at(v),
            Event::Redirect { seconds, .. } | Event::Other { seconds, .. } => seconds,
            Event::Malformed(_) => 0,
        }
    }

    fn render(event: &Event) -> String {
        let seconds = seconds_of(event);
        match *event {
            Event::Redirect { link, version, visitor, agent, campaign, ip, .. } => {
                let id = visitor.map_or("-".to_owned(), tracking_id);
                let (query, location_query) = CAMPAIGNS[campaign];
                format!(
                    "{}.{} {} {id} {} /{}{query} 302 https://example.com/{}/v{version}{location_query}",
                    stamp(seconds),
                    seconds % 10,
                    ADDRESSES[ip],
                    AGENTS[agent],
                    LINKS[link],
                    LINKS[link]
                )
            }
            Event::Other { status, target, .. } => {
                let path = ["/H83if", "/wp-login.php", "/.env?x=1", "/", "/aaaaa/deeper"][target];
                format!("{}.0 ::1 - {} {path} {status}", stamp(seconds), AGENTS[target % 4])
            }
            Event::Malformed(kind) => [
                "garbage",
                "20261122101733.5 ::1 - - /H83if 302",
                "20261322101733.5 ::1 - - /H83if 404",
                "20261122101733.5 ::1 nottracking - /H83if 404",
            ][kind]
                .to_owned(),
        }
    }

    fn event() -> impl Strategy<Value = Event> {
        prop_oneof![
            8 => (0..SPAN, 0..LINKS.len(), 0..3usize, proptest::option::weighted(0.8, 0..12usize), any::<bool>(), 0..AGENTS.len(), 0..CAMPAIGNS.len(), 0..ADDRESSES.len())
                .prop_map(|(seconds, link, version, visitor, issued, agent, campaign, ip)| Event::Redirect {
                    seconds, link, version, visitor, issued, agent, campaign, ip
                }),
            2 => (0..SPAN, prop_oneof![Just(404u16), Just(200), Just(400)], 0..5usize)
                .prop_map(|(seconds, status, target)| Event::Other { seconds, status, target }),
            1 => (0..4usize).prop_map(Event::Malformed),
        ]
    }

    /// A random log, its options, and how it is stored.
    #[derive(Debug)]
    struct Case {
        /// Several files' lines.
        files: Vec<Vec<Event>>,
        /// Each file's lines sorted by time, as couchlink writes them (or left shuffled).
        sorted: bool,
        /// Which files are gzipped.
        gzipped: Vec<bool>,
        /// The last file ends inside its last line.
        unterminated: bool,
        /// `--since` and `--until` as seconds into the log.
        since: Option<u32>,
        until: Option<u32>,
        /// `--link`, by index.
        links: Vec<usize>,
        /// The engine's piece size.
        chunk: u64,
        /// `--by`.
        by: Vec<Dimension>,
    }

    fn case() -> impl Strategy<Value = Case> {
        (
            proptest::collection::vec(proptest::collection::vec(event(), 0..120), 1..4),
            any::<bool>(),
            proptest::collection::vec(any::<bool>(), 4),
            any::<bool>(),
            proptest::option::of(0..SPAN),
            proptest::option::of(0..SPAN),
            proptest::collection::vec(0..LINKS.len(), 0..3),
            prop_oneof![Just(read::CHUNK), 1..600u64],
            proptest::sample::subsequence(vec![Dimension::Campaign, Dimension::Device, Dimension::Country], 0..=3),
        )
            .prop_map(|(files, sorted, gzipped, unterminated, since, until, links, chunk, by)| Case {
                files,
                sorted,
                gzipped,
                unterminated,
                since,
                until,
                links,
                chunk,
                by,
            })
    }

    /// Writes the case's files; returns their paths.
    fn write(case: &Case, dir: &std::path::Path) -> Vec<PathBuf> {
        let mut paths = Vec::new();
        for (i, events) in case.files.iter().enumerate() {
            let mut events = events.clone();
            if case.sorted {
                events.sort_by_key(seconds_of);
            }
            let mut text: String = events.iter().map(|e| render(e) + "\n").collect();
            if case.unterminated && i == case.files.len() - 1 {
                text.pop();
            }
            let path = dir.join(format!("log{i}"));
            if case.gzipped[i] {
                let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                gz.write_all(text.as_bytes()).unwrap();
                std::fs::write(&path, gz.finish().unwrap()).unwrap();
            } else {
                std::fs::write(&path, text).unwrap();
            }
            paths.push(path);
        }
        paths
    }

    fn options(case: &Case, dir: &std::path::Path) -> Options {
        let at = |s: u32| Stamp::parse(format!("{}.0", stamp(s)).as_bytes()).unwrap();
        let geoip = case.by.contains(&Dimension::Country).then(|| geoip(dir));
        Options {
            since: case.since.map(at),
            until: case.until.map(at),
            links: case.links.iter().map(|&i| LinkId::parse(LINKS[i]).unwrap()).collect(),
            breakdowns: Breakdowns::new(&case.by, geoip).unwrap().into(),
            schema: Schema::V2,
        }
    }

    fn json(report: &Report) -> String {
        let mut out = Vec::new();
        super::super::print::json(report, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

        #[test]
        fn the_engine_reports_what_the_plain_model_counts(case in case()) {
            let dir = tempfile::tempdir().unwrap();
            let paths = write(&case, dir.path());
            let options = options(&case, dir.path());
            let engine = super::super::run_in_pieces(&paths, &options, case.chunk).unwrap();
            let model = run(&paths, &options, case.chunk).unwrap();
            prop_assert_eq!(json(&engine), json(&model));
        }
    }

    #[test]
    fn the_model_counts_a_small_log_by_hand() {
        // Visitor 1 is issued an ID on version 0, comes back on version 2 as a bot; visitor 2
        // is a bot; an untracked client; a 404; a malformed line.
        let events = [
            Event::Redirect {
                seconds: 100,
                link: 0,
                version: 0,
                visitor: Some(1),
                issued: true,
                agent: 0,
                campaign: 0,
                ip: 0,
            },
            Event::Redirect {
                seconds: 86_500,
                link: 0,
                version: 2,
                visitor: Some(1),
                issued: false,
                agent: 2,
                campaign: 0,
                ip: 0,
            },
            Event::Redirect {
                seconds: 86_600,
                link: 0,
                version: 2,
                visitor: Some(2),
                issued: false,
                agent: 2,
                campaign: 0,
                ip: 0,
            },
            Event::Redirect {
                seconds: 86_700,
                link: 0,
                version: 2,
                visitor: None,
                issued: false,
                agent: 0,
                campaign: 0,
                ip: 0,
            },
            Event::Other { seconds: 200, status: 404, target: 1 },
            Event::Malformed(0),
        ];
        let case = Case {
            files: vec![events.to_vec()],
            sorted: false,
            gzipped: vec![false],
            unterminated: false,
            since: None,
            until: None,
            links: vec![],
            chunk: read::CHUNK,
            by: vec![],
        };
        let dir = tempfile::tempdir().unwrap();
        let report = run(&write(&case, dir.path()), &Options::default(), read::CHUNK).unwrap();
        let json: serde_json::Value = serde_json::from_str(&json(&report)).unwrap();
        let link = &json["links"][0];
        assert_eq!(json["totals"]["malformed"], 1);
        assert_eq!(json["totals"]["not_found"][0]["path"], "/wp-login.php");
        assert_eq!(
            [
                &link["redirects"],
                &link["bot_redirects"],
                &link["visitors"],
                &link["new_visitors"],
                &link["bot_visitors"]
            ],
            [4, 2, 2, 1, 2]
        );
        let days: Vec<(String, u64, u64)> = link["days"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| (d["day"].as_str().unwrap().to_owned(), d["human"].as_u64().unwrap(), d["bot"].as_u64().unwrap()))
            .collect();
        assert_eq!(days, [("2026-10-20".into(), 1, 0), ("2026-10-21".into(), 1, 2)]);
        let second = &link["versions"][1];
        assert_eq!([&second["visitors"], &second["new_visitors"], &second["human_visitors"]], [2, 0, 0]);
    }
}
