//! The finished report: plain numbers and strings, in the order they are shown, serialised
//! as-is for `--format json` (schema `couchlink-report/2`, docs/report.md "Link analytics").

use rayon::iter::{IntoParallelIterator, ParallelIterator};
use serde::Serialize;

use super::breakdown::Breakdown;
use super::line::{Day, Stamp};
use super::read::{Piece, Source};
pub use super::tally::ValueCount;
use super::tally::{merge_days, LinkTally, Sample, Stats, Tally, SAMPLES};
use super::Options;

/// Everything a report says.
#[derive(Debug, Serialize)]
pub struct Report {
    /// `couchlink-report/2`; changes only when a field changes meaning or goes away.
    pub schema: &'static str,
    /// The time range asked for (ISO 8601, UTC; `until` exclusive), `null` for open ends.
    pub since: Option<String>,
    /// See `since`.
    pub until: Option<String>,
    /// The breakdowns asked for with `--by`, in the order of each `by`.
    pub breakdowns: Vec<&'static str>,
    /// The GeoIP database countries came from.
    pub geoip: Option<GeoIpRead>,
    /// The files read, in order.
    pub files: Vec<FileRead>,
    /// Over all lines.
    pub totals: Totals,
    /// Per link, most redirects first.
    pub links: Vec<LinkReport>,
}

/// The GeoIP database read.
#[derive(Debug, Serialize)]
pub struct GeoIpRead {
    /// As given.
    pub path: String,
    /// What it says it is (`GeoLite2-Country`, ...).
    pub database_type: String,
    /// The day it was built (`YYYY-MM-DD`, UTC).
    pub built: String,
}

/// Per breakdown asked for, its values, most redirects first; in JSON an object whose keys are
/// the breakdowns' names. The counts stay where counting left them, sorted in place: a busy
/// month has millions.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct By {
    /// Each breakdown, and where its values are in `values`.
    groups: Vec<(Breakdown, std::ops::Range<usize>)>,
    values: Vec<ValueCount>,
}

impl Serialize for By {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(self.groups.len()))?;
        for (breakdown, values) in self.iter() {
            map.serialize_entry(breakdown.name(), values)?;
        }
        map.end()
    }
}

impl By {
    /// `counts` grouped under `breakdowns` (each present, even without values), sorted.
    fn new(breakdowns: &[Breakdown], mut values: Vec<ValueCount>) -> By {
        values.sort_unstable_by(|a, b| (a.breakdown, b.redirects, &a.value).cmp(&(b.breakdown, a.redirects, &b.value)));
        let groups = breakdowns
            .iter()
            .map(|&breakdown| {
                let start = values.partition_point(|v| v.breakdown < breakdown);
                (breakdown, start..values.partition_point(|v| v.breakdown <= breakdown))
            })
            .collect();
        By { groups, values }
    }

    /// Each breakdown asked for, and its values (`value`, `redirects`, `visitors`).
    pub fn iter(&self) -> impl Iterator<Item = (Breakdown, &[ValueCount])> {
        self.groups.iter().map(|(b, range)| (*b, &self.values[range.clone()]))
    }

    /// Whether no breakdown was asked for.
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }
}

/// A file read.
#[derive(Debug, Serialize)]
pub struct FileRead {
    /// As given, or found in the directory.
    pub path: String,
    /// Whether it was gzipped.
    pub gzip: bool,
    /// Its lines.
    pub lines: u64,
}

/// Over all lines.
#[derive(Debug, Serialize)]
pub struct Totals {
    /// Lines read (malformed ones and those outside the time range included).
    pub lines: u64,
    /// Well-formed lines in the time range.
    pub in_range: u64,
    /// Lines that are not the log's format: counted here, never dropped silently.
    pub malformed: u64,
    /// Responses in the range by status code (as a string key, for JSON).
    pub statuses: std::collections::BTreeMap<String, u64>,
    /// 404s by path (query left out), most first.
    pub not_found: Vec<PathCount>,
    /// The first malformed lines (at most 20), with where they are.
    pub malformed_lines: Vec<MalformedLine>,
}

/// A path and how often it was asked for.
#[derive(Debug, Serialize)]
pub struct PathCount {
    /// The path, as logged.
    pub path: String,
    /// Requests.
    pub count: u64,
}

/// A malformed line and where it is.
#[derive(Debug, Serialize)]
pub struct MalformedLine {
    /// Its file.
    pub file: String,
    /// Its line number, from 1.
    pub line: u64,
    /// What is wrong.
    pub reason: String,
    /// The line (at most 200 characters).
    pub text: String,
}

/// Redirects and visitors.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// 302 responses.
    pub redirects: u64,
    /// To browsers and other non-bots.
    pub human_redirects: u64,
    /// To a User-Agent on the bot list, or none.
    pub bot_redirects: u64,
    /// Distinct tracking IDs (lines with `-` count as requests, not visitors).
    pub visitors: u64,
    /// Visitors whose tracking ID was issued by one of these redirects.
    pub new_visitors: u64,
    /// Visitors seen with a human User-Agent.
    pub human_visitors: u64,
    /// Visitors seen with a bot's (one ID seen as both counts in both).
    pub bot_visitors: u64,
}

impl Counts {
    fn new(s: &Stats) -> Counts {
        let v = s.visitors;
        Counts {
            redirects: s.redirects,
            human_redirects: s.redirects - s.bot_redirects,
            bot_redirects: s.bot_redirects,
            visitors: v.all,
            new_visitors: v.new,
            human_visitors: v.human,
            bot_visitors: v.bot,
        }
    }
}

/// Redirects of one UTC day: as counted, moved into the report without a copy.
pub use super::tally::DayCount;

/// One link.
#[derive(Debug, Serialize)]
pub struct LinkReport {
    /// Its ID.
    pub id: String,
    /// All its redirects.
    #[serde(flatten)]
    pub counts: Counts,
    /// Its first redirect in the range.
    pub first_seen: String,
    /// Its last.
    pub last_seen: String,
    /// Redirects per day, days without any left out.
    pub days: Vec<DayCount>,
    /// Per breakdown asked for, its values.
    pub by: By,
    /// Each distinct `Location` it served, in the order first served.
    pub versions: Vec<VersionReport>,
}

/// One target version of a link.
#[derive(Debug, Serialize)]
pub struct VersionReport {
    /// 1 for the first `Location` served in the range, 2 for the next, ...
    pub version: usize,
    /// The `Location`, as logged.
    pub location: String,
    /// Its first redirect.
    pub first_seen: String,
    /// Its last.
    pub last_seen: String,
    /// Its redirects and visitors.
    #[serde(flatten)]
    pub counts: Counts,
    /// Its redirects per day.
    pub days: Vec<DayCount>,
    /// Per breakdown asked for, its values.
    pub by: By,
}

impl Report {
    /// The report of `tally`, read from `sources` split into `pieces`.
    pub fn new(tally: Tally, sources: &[Source], pieces: &[Piece], options: &Options) -> Report {
        // Line numbers: a piece's lines follow those of the file's earlier pieces.
        let mut lines_of_piece = vec![0; pieces.len()];
        for (piece, lines) in &tally.piece_lines {
            lines_of_piece[*piece] = *lines;
        }
        let mut file_lines = vec![0; sources.len()];
        let mut first_line = vec![0; pieces.len()];
        for (i, piece) in pieces.iter().enumerate() {
            first_line[i] = file_lines[piece.source];
            file_lines[piece.source] += lines_of_piece[i];
        }
        let path = |source: usize| sources[source].path.display().to_string();
        let mut samples: Vec<&Sample> = tally.samples.iter().collect();
        samples.sort_by_key(|s| (s.piece, s.line));
        let malformed_lines = samples
            .into_iter()
            .take(SAMPLES)
            .map(|s| MalformedLine {
                file: path(pieces[s.piece].source),
                line: first_line[s.piece] + s.line,
                reason: s.reason.to_string(),
                text: s.text.clone(),
            })
            .collect();
        let mut not_found: Vec<PathCount> = tally
            .not_found
            .into_iter()
            .map(|(p, count)| PathCount { path: String::from_utf8_lossy(&p).into_owned(), count })
            .collect();
        not_found.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.path.cmp(&b.path)));
        // Per link on all cores: thousands of links, each with its versions and days.
        let breakdowns = options.breakdowns.list();
        let mut links: Vec<LinkReport> =
            tally.links.into_par_iter().map(|(id, t)| link_report(id.as_str(), t, breakdowns)).collect();
        links.sort_by(|a, b| b.counts.redirects.cmp(&a.counts.redirects).then_with(|| a.id.cmp(&b.id)));
        Report {
            schema: options.schema.name(),
            since: options.since.map(|s| s.to_string()),
            until: options.until.map(|s| s.to_string()),
            breakdowns: breakdowns.iter().map(|b| b.name()).collect(),
            geoip: options.breakdowns.geoip().map(|g| GeoIpRead {
                path: g.path().display().to_string(),
                database_type: g.database_type().to_owned(),
                built: time::OffsetDateTime::from_unix_timestamp(g.build_epoch() as i64)
                    .map_or_else(|_| "unknown".to_owned(), |t| Day::of(t.date()).to_string()),
            }),
            files: sources
                .iter()
                .enumerate()
                .map(|(i, s)| FileRead { path: path(i), gzip: s.gzip, lines: file_lines[i] })
                .collect(),
            totals: Totals {
                lines: tally.lines,
                in_range: tally.in_range,
                malformed: tally.malformed,
                statuses: tally.statuses.into_iter().map(|(s, n)| (s.to_string(), n)).collect(),
                not_found,
                malformed_lines,
            },
            links,
        }
    }

    /// Every day from the first redirect to the last, for charts that show quiet days too.
    pub fn days(&self) -> Vec<Day> {
        let all = self.links.iter().flat_map(|l| l.days.iter().filter_map(|d| d.day.date()));
        let (Some(first), Some(last)) = (all.clone().min(), all.max()) else { return Vec::new() };
        std::iter::successors(Some(first), |d| d.next_day().filter(|n| *n <= last)).map(Day::of).collect()
    }
}

fn link_report(id: &str, mut tally: LinkTally, breakdowns: &[Breakdown]) -> LinkReport {
    tally.versions.sort_by(|a, b| (a.first, &a.location).cmp(&(b.first, &b.location)));
    let mut days: Vec<DayCount> = Vec::new();
    for v in &tally.versions {
        days = merge_days(&days, &v.days);
    }
    let first = tally.versions.iter().map(|v| v.first).min().unwrap_or(Stamp::at(time::OffsetDateTime::UNIX_EPOCH));
    let last = tally.versions.iter().map(|v| v.last).max().unwrap_or(first);
    let versions = tally
        .versions
        .into_iter()
        .enumerate()
        .map(|(i, v)| VersionReport {
            version: i + 1,
            location: String::from_utf8_lossy(&v.location).into_owned(),
            first_seen: v.first.to_string(),
            last_seen: v.last.to_string(),
            counts: Counts::new(&v.stats),
            days: v.days,
            by: By::new(breakdowns, v.by),
        })
        .collect();
    LinkReport {
        id: id.to_owned(),
        counts: Counts::new(&tally.total),
        first_seen: first.to_string(),
        last_seen: last.to_string(),
        days,
        by: By::new(breakdowns, tally.by),
        versions,
    }
}
