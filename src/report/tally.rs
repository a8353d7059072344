//! What counting yields, whichever counter does it (the engine in [`count`](super::count), or
//! the plain model its tests check it against): per link, per target version, per UTC day,
//! with distinct visitors. Plain numbers, in no particular order: the summary sorts them.

use std::collections::BTreeMap;

use serde::Serialize;

use super::breakdown::Breakdown;
use super::line::{Day, Malformed, Stamp};
use crate::domain::LinkId;

/// Everything counted from some log lines.
#[derive(Debug, Default)]
pub struct Tally {
    /// Lines read.
    pub lines: u64,
    /// Well-formed lines inside `--since`/`--until`.
    pub in_range: u64,
    /// Lines that are not the log's format.
    pub malformed: u64,
    /// Responses in the range, by status.
    pub statuses: BTreeMap<u16, u64>,
    /// 404 responses by request path (query left out), each path once.
    pub not_found: Vec<(Box<[u8]>, u64)>,
    /// Per link (those `--link` names, or all).
    pub links: Vec<(LinkId, LinkTally)>,
    /// The first [`SAMPLES`] malformed lines of each piece.
    pub samples: Vec<Sample>,
    /// Lines per piece, by piece number: sampled lines are numbered within their file.
    pub piece_lines: Vec<(usize, u64)>,
}

/// A link's redirects: in all, and per target version.
#[derive(Debug, Default)]
pub struct LinkTally {
    /// All its redirects, and its distinct visitors over all versions.
    pub total: Stats,
    /// One per distinct `Location`.
    pub versions: Vec<Version>,
    /// Its redirects and visitors per value of each breakdown asked for.
    pub by: Vec<ValueCount>,
}

/// One distinct `Location` a link redirected to: a target version.
#[derive(Debug)]
pub struct Version {
    /// The `Location`, as logged.
    pub location: Box<[u8]>,
    /// Its first redirect.
    pub first: Stamp,
    /// Its last redirect.
    pub last: Stamp,
    /// Its redirects and visitors.
    pub stats: Stats,
    /// Redirects per UTC day, in day order, days without any left out.
    pub days: Vec<DayCount>,
    /// Its redirects and visitors per value of each breakdown asked for.
    pub by: Vec<ValueCount>,
}

/// The redirects, and the distinct visitors, of a link or version under one value of one
/// breakdown (`utm_source` = `print`, `device` = `mobile`, ...). A visitor seen under two
/// values counts under both.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ValueCount {
    /// Which breakdown (in JSON, the key its list is under).
    #[serde(skip)]
    pub breakdown: Breakdown,
    /// Its value (shared by every count of it).
    pub value: std::sync::Arc<str>,
    /// 302 responses.
    pub redirects: u64,
    /// Distinct tracking IDs.
    pub visitors: u64,
}

/// Redirects and visitors of a link, or of one of its versions.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    /// 302 responses.
    pub redirects: u64,
    /// Of which to a bot's User-Agent.
    pub bot_redirects: u64,
    /// Its distinct visitors.
    pub visitors: Visitors,
}

/// Distinct visitors (tracking IDs), and how many were seen as new, as humans, as bots.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Visitors {
    /// Distinct tracking IDs.
    pub all: u64,
    /// Issued their ID by one of the redirects counted.
    pub new: u64,
    /// Seen with a human User-Agent.
    pub human: u64,
    /// Seen with a bot's (one ID seen as both counts in both).
    pub bot: u64,
}

impl Visitors {
    /// Counts one more visitor, seen as `seen` says.
    pub fn add(&mut self, seen: Seen) {
        self.all += 1;
        self.new += u64::from(seen.issued());
        self.human += u64::from(seen.human());
        self.bot += u64::from(seen.bot());
    }
}

/// How a visitor was seen on a link or version, over all its redirects there: as a human, as a
/// bot (both, if its User-Agent changed), and whether one of them issued its tracking ID.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Seen(u8);

impl Seen {
    const HUMAN: u8 = 1;
    const BOT: u8 = 2;
    const NEW: u8 = 4;

    /// One redirect's: to a bot or not, and whether it issued the tracking ID.
    pub fn redirect(bot: bool, issued: bool) -> Seen {
        Seen(if bot { Seen::BOT } else { Seen::HUMAN } | if issued { Seen::NEW } else { 0 })
    }

    /// Both at once.
    pub fn and(self, other: Seen) -> Seen {
        Seen(self.0 | other.0)
    }

    fn human(self) -> bool {
        self.0 & Seen::HUMAN != 0
    }

    fn bot(self) -> bool {
        self.0 & Seen::BOT != 0
    }

    fn issued(self) -> bool {
        self.0 & Seen::NEW != 0
    }
}

/// Redirects of one UTC day.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct DayCount {
    /// `YYYY-MM-DD` in JSON.
    pub day: Day,
    /// To humans.
    pub human: u64,
    /// To bots.
    pub bot: u64,
}

/// Two lists of days in day order as one, a day in both summed.
pub fn merge_days(a: &[DayCount], b: &[DayCount]) -> Vec<DayCount> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while let (Some(x), Some(y)) = (a.get(i), b.get(j)) {
        out.push(if x.day == y.day {
            (i, j) = (i + 1, j + 1);
            DayCount { day: x.day, human: x.human + y.human, bot: x.bot + y.bot }
        } else if x.day < y.day {
            i += 1;
            *x
        } else {
            j += 1;
            *y
        });
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
    out
}

/// Malformed lines kept as examples, per piece and in the report.
pub const SAMPLES: usize = 20;

/// A malformed line, kept as an example.
#[derive(Debug, Clone)]
pub struct Sample {
    /// The piece it was in.
    pub piece: usize,
    /// Its line number within that piece, from 1.
    pub line: u64,
    /// What is wrong with it.
    pub reason: Malformed,
    /// The line, cut at 200 bytes.
    pub text: String,
}

impl Sample {
    /// Line `line` of piece `piece`, malformed for `reason`.
    pub fn new(piece: usize, line: u64, reason: Malformed, bytes: &[u8]) -> Sample {
        Sample { piece, line, reason, text: String::from_utf8_lossy(&bytes[..bytes.len().min(200)]).into_owned() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_days_stay_in_order_and_a_day_in_both_is_summed() {
        let day = |d: u8, human: u64, bot: u64| DayCount {
            day: Day::parse_iso(&format!("2026-11-{d:02}")).unwrap(),
            human,
            bot,
        };
        assert_eq!(
            merge_days(&[day(1, 1, 0), day(3, 2, 1), day(9, 1, 1)], &[day(2, 5, 0), day(3, 1, 1), day(10, 0, 4)]),
            [day(1, 1, 0), day(2, 5, 0), day(3, 3, 2), day(9, 1, 1), day(10, 0, 4)]
        );
        assert_eq!(merge_days(&[], &[day(4, 1, 0)]), [day(4, 1, 0)]);
        assert_eq!(merge_days(&[day(4, 1, 0)], &[]), [day(4, 1, 0)]);
    }

    #[test]
    fn a_visitor_seen_both_ways_counts_once_in_all_and_in_each_kind() {
        let mut v = Visitors::default();
        v.add(Seen::redirect(false, true).and(Seen::redirect(true, false)));
        v.add(Seen::redirect(true, false));
        assert_eq!(v, Visitors { all: 2, new: 1, human: 1, bot: 2 });
    }
}
