//! Counting: lines into per-link, per-target-version and per-day tallies. Each thread counts
//! its pieces into its own `Tally`; tallies merge once at the end, so no lock is taken per line.

use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};
use std::sync::LazyLock;

use smallvec::SmallVec;

use super::line::{self, Day, Malformed, Stamp};
use super::Options;
use crate::domain::{LinkId, TrackingId};

type Map<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// Distinct visitors, each one `u64`: the top 61 bits of a digest of its tracking ID, and in
/// the low 3 bits how it was seen ([`HUMAN`], [`BOT`], [`NEW`]). 8 bytes a visitor where a map
/// from digest to flags takes 16 and the 30-character ID 48: a report holds one entry per link
/// a visitor clicked, so the table's size is the report's memory and much of its time (page
/// faults, cache misses). Two of a million visitors share a digest about once in ten million
/// reports.
#[derive(Default, Clone)]
struct Visitors(hashbrown::HashTable<u64>);

/// The bits of an entry that are flags.
const FLAGS: u64 = 0b111;

impl Visitors {
    /// The table's hash of an entry: from its digest bits only, as flags change. The digest is
    /// random already; the multiplication spreads it to the high bits the table's tags use.
    fn hash(entry: u64) -> u64 {
        (entry >> 3).wrapping_mul(0x9e37_79b9_7f4a_7c15)
    }

    /// Adds `flags` to visitor `key` (a digest with its low 3 bits clear), adding the visitor.
    fn add(&mut self, key: u64, flags: u8) {
        let flags = u64::from(flags);
        match self.0.entry(Self::hash(key), |&e| e & !FLAGS == key, |&e| Self::hash(e)) {
            hashbrown::hash_table::Entry::Occupied(mut e) => *e.get_mut() |= flags,
            hashbrown::hash_table::Entry::Vacant(e) => drop(e.insert(key | flags)),
        }
    }

    fn len(&self) -> usize {
        self.0.len()
    }
}

/// The digest of a tracking ID, as a [`Visitors`] key: the same in every thread and every
/// run, so tallies merge.
fn visitor_key(id: &TrackingId) -> u64 {
    DIGEST.hash_one(id.as_str()) & !FLAGS
}

/// One fixed seed: digests must agree between threads, whose tallies merge.
static DIGEST: LazyLock<foldhash::quality::FixedState> =
    LazyLock::new(|| foldhash::quality::FixedState::with_seed(0x636f_7563_686c_696e));

/// The bot cache's keys are digests already: hashing them again would only cost time.
#[derive(Default)]
struct Prehashed(u64);

impl Hasher for Prehashed {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// Visitor flags: seen as a human, seen as a bot, issued its tracking ID here.
const HUMAN: u8 = 1;
const BOT: u8 = 2;
const NEW: u8 = 4;

/// Malformed lines kept as examples, per piece and in the report.
pub const SAMPLES: usize = 20;

/// Redirects and visitors of a link, or of one of its target versions.
#[derive(Default)]
pub struct Stats {
    /// 302 responses.
    pub redirects: u64,
    /// Of which to a bot's User-Agent.
    pub bot_redirects: u64,
    /// Distinct visitors, with how they were seen; for the only version of a link, kept once,
    /// in the link's own `Stats` (see [`LinkTally`]).
    visitors: Visitors,
}

impl Stats {
    fn add(&mut self, visitor: Option<u64>, flags: u8) {
        self.redirects += 1;
        self.bot_redirects += u64::from(flags & BOT != 0);
        if let Some(v) = visitor {
            self.visitors.add(v, flags);
        }
    }

    fn merge(&mut self, other: Stats) {
        self.redirects += other.redirects;
        self.bot_redirects += other.bot_redirects;
        self.visitors.0.reserve(other.visitors.len(), |&e| Visitors::hash(e));
        for entry in other.visitors.0 {
            self.visitors.add(entry & !FLAGS, (entry & FLAGS) as u8);
        }
    }

    /// Distinct visitors: all, issued their ID by this link, seen as humans, seen as bots.
    pub fn visitors(&self) -> (u64, u64, u64, u64) {
        let mut counts = (self.visitors.len() as u64, 0, 0, 0);
        for entry in self.visitors.0.iter() {
            counts.1 += u64::from(entry & u64::from(NEW) != 0);
            counts.2 += u64::from(entry & u64::from(HUMAN) != 0);
            counts.3 += u64::from(entry & u64::from(BOT) != 0);
        }
        counts
    }
}

/// One distinct `Location` a link redirected to.
pub struct Version {
    /// The `Location`, as logged.
    pub location: Box<[u8]>,
    /// A digest of `location`, compared instead of its bytes for each line: the bytes live
    /// elsewhere on the heap (a cache miss per line, measured), and two of a link's targets
    /// share a 64-bit digest about once in 10^19 pairs.
    digest: u64,
    /// Its first redirect.
    pub first: Stamp,
    /// Its last redirect.
    pub last: Stamp,
    /// Its redirects and visitors.
    pub stats: Stats,
    /// Redirects per UTC day, `[human, bot]`, in day order (once settled: see `today`).
    pub days: Vec<(Day, [u64; 2])>,
    /// The day being counted, not yet in `days`. Lines come mostly in time order, so the next
    /// line's day is nearly always this one, and counting it touches no memory outside the
    /// version (`days` lives elsewhere on the heap: a cache miss per line, measured).
    today: Option<(Day, [u64; 2])>,
}

impl Version {
    fn count_day(&mut self, day: Day, bot: bool) {
        match &mut self.today {
            Some((d, counts)) if *d == day => counts[usize::from(bot)] += 1,
            _ => {
                self.settle();
                let mut counts = [0, 0];
                counts[usize::from(bot)] = 1;
                self.today = Some((day, counts));
            }
        }
    }

    /// Moves the day being counted into `days`.
    fn settle(&mut self) {
        if let Some((day, counts)) = self.today.take() {
            match self.days.binary_search_by_key(&day, |(d, _)| *d) {
                Ok(i) => (0..2).for_each(|k| self.days[i].1[k] += counts[k]),
                Err(i) => self.days.insert(i, (day, counts)),
            }
        }
    }

    fn merge(&mut self, mut other: Version) {
        self.settle();
        other.settle();
        self.first = self.first.min(other.first);
        self.last = self.last.max(other.last);
        self.stats.merge(other.stats);
        for (day, counts) in other.days {
            match self.days.binary_search_by_key(&day, |(d, _)| *d) {
                Ok(i) => (0..2).for_each(|k| self.days[i].1[k] += counts[k]),
                Err(i) => self.days.insert(i, (day, counts)),
            }
        }
    }
}

/// A link's redirects: in all, and per target version. Most links never change target, and
/// then their one version's visitors are the link's: they are kept once, in `total`, and copied
/// to the first version only when a second appears.
#[derive(Default)]
pub struct LinkTally {
    /// All its redirects.
    pub total: Stats,
    /// Per distinct `Location`, in no particular order until the report sorts them. The first
    /// is held inline: most links have one, and finding it then costs no pointer to follow.
    pub versions: SmallVec<[Version; 1]>,
}

impl LinkTally {
    /// The visitors of version `i`.
    pub fn version_visitors(&self, i: usize) -> &Stats {
        if self.versions.len() == 1 {
            &self.total
        } else {
            &self.versions[i].stats
        }
    }

    /// Gives the only version its own copy of the visitors, before a second version comes.
    fn split_visitors(&mut self) {
        if let [only] = &mut self.versions[..] {
            only.stats.visitors = self.total.visitors.clone();
        }
    }
}

/// A malformed line, kept as an example.
#[derive(Debug, Clone)]
pub struct Sample {
    /// The piece it was in.
    pub piece: usize,
    /// Its line number within that piece, from 1.
    pub line: u64,
    /// What is wrong with it.
    pub reason: Malformed,
    /// The line, cut at 200 characters.
    pub text: String,
}

/// What some pieces of the log hold.
#[derive(Default)]
pub struct Tally {
    /// Lines read.
    pub lines: u64,
    /// Well-formed lines inside `--since`/`--until`.
    pub in_range: u64,
    /// Lines that are not the log's format.
    pub malformed: u64,
    /// Responses by status (100 to 599; index: status - 100).
    pub statuses: Vec<u64>,
    /// 404 responses by request path (query left out).
    pub not_found: Map<Box<[u8]>, u64>,
    /// Per link.
    pub links: Map<LinkId, LinkTally>,
    /// The first malformed lines of each piece.
    pub samples: Vec<Sample>,
    /// Lines per piece, to number sampled lines within their file.
    pub piece_lines: Vec<(usize, u64)>,
    bots: BotCache,
}

impl Tally {
    /// Counts the lines of piece number `piece` through the returned counter.
    pub fn piece<'a>(&'a mut self, piece: usize, options: &'a Options) -> PieceCounter<'a> {
        PieceCounter { tally: self, options, piece, line: 0, samples: 0 }
    }

    /// Adds `other`'s counts to these.
    pub fn merge(mut self, other: Tally) -> Tally {
        self.lines += other.lines;
        self.in_range += other.in_range;
        self.malformed += other.malformed;
        if self.statuses.len() < other.statuses.len() {
            self.statuses.resize(other.statuses.len(), 0);
        }
        for (ours, theirs) in self.statuses.iter_mut().zip(other.statuses) {
            *ours += theirs;
        }
        for (path, n) in other.not_found {
            *self.not_found.entry(path).or_default() += n;
        }
        for (id, mut theirs) in other.links {
            let ours = self.links.entry(id).or_default();
            let versions: std::collections::HashSet<&[u8]> =
                ours.versions.iter().chain(&theirs.versions).map(|v| &*v.location).collect();
            if versions.len() > 1 {
                ours.split_visitors();
                theirs.split_visitors();
            }
            ours.total.merge(theirs.total);
            for version in theirs.versions {
                match ours.versions.iter_mut().find(|v| v.location == version.location) {
                    Some(v) => v.merge(version),
                    None => ours.versions.push(version),
                }
            }
        }
        self.samples.extend(other.samples);
        self.piece_lines.extend(other.piece_lines);
        self
    }
}

/// Counts the lines of one piece into a tally.
pub struct PieceCounter<'a> {
    tally: &'a mut Tally,
    options: &'a Options,
    piece: usize,
    line: u64,
    samples: usize,
}

impl PieceCounter<'_> {
    /// Counts one line (`terminated`: it ended with a newline).
    pub fn line(&mut self, bytes: &[u8], terminated: bool) {
        self.line += 1;
        let tally = &mut *self.tally;
        tally.lines += 1;
        let parsed = if terminated { line::parse(bytes) } else { Err(Malformed::Unterminated) };
        let line = match parsed {
            Ok(line) => line,
            Err(reason) => {
                tally.malformed += 1;
                if self.samples < SAMPLES {
                    self.samples += 1;
                    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(200)]).into_owned();
                    tally.samples.push(Sample { piece: self.piece, line: self.line, reason, text });
                }
                return;
            }
        };
        if !self.options.includes(line.stamp) {
            return;
        }
        tally.in_range += 1;
        if tally.statuses.is_empty() {
            tally.statuses = vec![0; 500];
        }
        tally.statuses[usize::from(line.status - 100)] += 1;
        if line.status == 404 {
            match tally.not_found.get_mut(line.path()) {
                Some(n) => *n += 1,
                None => drop(tally.not_found.insert(line.path().into(), 1)),
            }
        }
        let (Some(location), Some(link)) = (line.location, line.link()) else { return };
        if !self.options.links.is_empty() && !self.options.links.contains(&link) {
            return;
        }
        let bot = tally.bots.is_bot(line.user_agent);
        let flags = if bot { BOT } else { HUMAN } | if line.issued_tracking_id() { NEW } else { 0 };
        let visitor = line.tracking.as_ref().map(visitor_key);
        let link = tally.links.entry(link).or_default();
        let digest = DIGEST.hash_one(location);
        let known = link.versions.iter().position(|v| v.digest == digest);
        if known.is_none() {
            link.split_visitors();
        }
        link.total.add(visitor, flags);
        let i = known.unwrap_or_else(|| {
            link.versions.push(Version {
                location: location.into(),
                digest,
                first: line.stamp,
                last: line.stamp,
                stats: Stats::default(),
                days: Vec::new(),
                today: None,
            });
            link.versions.len() - 1
        });
        // The only version's visitors are the link's (kept in `total`).
        let shared = link.versions.len() == 1;
        let version = &mut link.versions[i];
        version.first = version.first.min(line.stamp);
        version.last = version.last.max(line.stamp);
        version.stats.add(visitor.filter(|_| !shared), flags);
        version.count_day(line.stamp.day(), bot);
    }

    /// Records how many lines the piece had, and settles every version's day counts.
    pub fn finish(self) {
        self.tally.piece_lines.push((self.piece, self.line));
        for link in self.tally.links.values_mut() {
            link.versions.iter_mut().for_each(Version::settle);
        }
    }
}

/// The maintained bot list (the `isbot` crate's patterns), compiled once for all threads.
static BOTS: LazyLock<isbot::Bots> = LazyLock::new(isbot::Bots::default);

/// Bot or not, per distinct User-Agent: a log repeats a few thousand User-Agents millions of
/// times, and the bot list is one large regular expression. Keyed by a 64-bit digest of the
/// User-Agent, so a hit costs one hash and no comparison of long strings.
#[derive(Default)]
struct BotCache {
    seen: HashMap<u64, bool, BuildHasherDefault<Prehashed>>,
}

/// Distinct User-Agents remembered before the cache starts over (bounds its memory when every
/// line has a new one).
const BOT_CACHE: usize = 1 << 16;

impl BotCache {
    /// Whether the logged (percent-encoded) User-Agent is a bot's. No User-Agent at all counts
    /// as a bot: every browser sends one.
    fn is_bot(&mut self, encoded: &[u8]) -> bool {
        if encoded == b"-" {
            return true;
        }
        let key = DIGEST.hash_one(encoded);
        if let Some(&bot) = self.seen.get(&key) {
            return bot;
        }
        let decoded = percent_encoding::percent_decode(encoded).decode_utf8_lossy();
        let bot = BOTS.is_bot(&decoded);
        if self.seen.len() >= BOT_CACHE {
            self.seen.clear();
        }
        self.seen.insert(key, bot);
        bot
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(lines: &[&str], options: &Options) -> Tally {
        let mut tally = Tally::default();
        let mut counter = tally.piece(0, options);
        for l in lines {
            counter.line(l.as_bytes(), true);
        }
        counter.finish();
        tally
    }

    const FIREFOX: &str =
        "Mozilla%2F5.0%20(X11%3B%20Linux%20x86_64%3B%20rv%3A120.0)%20Gecko%2F20100101%20Firefox%2F120.0";
    const GOOGLEBOT: &str =
        "Mozilla%2F5.0%20(compatible%3B%20Googlebot%2F2.1%3B%20%2Bhttp%3A%2F%2Fwww.google.com%2Fbot.html)";

    #[test]
    fn visitors_new_returning_bots_and_versions() {
        let a = "20261122100000aaaaaaaaaaaaaaaa";
        let lines = [
            format!("20261122100000.1 ::1 {a} {FIREFOX} /H83if 302 https://e.x/one"),
            format!("20261122100500.0 ::1 {a} {FIREFOX} /H83if 302 https://e.x/two"),
            format!("20261122100600.0 ::1 20261122100600bbbbbbbbbbbbbbbb {GOOGLEBOT} /H83if 302 https://e.x/two"),
            "20261122100700.0 ::1 - - /H83if 302 https://e.x/two".to_string(),
            "20261122100800.0 ::1 - - /nope1 404".to_string(),
            "garbage".to_string(),
        ];
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let tally = count(&lines, &Options::default());
        assert_eq!((tally.lines, tally.in_range, tally.malformed), (6, 5, 1));
        assert_eq!(tally.samples[0].line, 6);
        let link = &tally.links[&LinkId::parse("H83if").unwrap()];
        assert_eq!((link.total.redirects, link.total.bot_redirects), (4, 2));
        // a: new (its ID issued at 10:00:00) and human; b: new and a bot; the untracked
        // client is a request, not a visitor.
        assert_eq!(link.total.visitors(), (2, 2, 1, 1));
        let two = link.versions.iter().find(|v| &*v.location == b"https://e.x/two").unwrap();
        assert_eq!(two.stats.redirects, 3);
        // a returned to the second version: not new there.
        assert_eq!(two.stats.visitors(), (2, 1, 1, 1));
        assert_eq!(two.days, vec![(Day::parse_iso("2026-11-22").unwrap(), [1, 2])]);
        assert_eq!(tally.not_found[&b"/nope1"[..]], 1);
    }

    #[test]
    fn tallies_of_pieces_merge_into_the_tally_of_the_whole() {
        let lines: Vec<String> = (0..40)
            .map(|i| {
                format!(
                    "202611{:02}100000.0 ::1 2026112210000{}aaaaaaaaaaaaaaaa {FIREFOX} /H83i{} 302 https://e.x/{}",
                    20 + i % 3,
                    i % 7,
                    i % 2,
                    i % 5
                )
            })
            .collect();
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let options = Options::default();
        let whole = count(&lines, &options);
        let merged = count(&lines[..13], &options).merge(count(&lines[13..], &options));
        for (id, link) in &whole.links {
            let other = &merged.links[id];
            assert_eq!(link.total.visitors(), other.total.visitors());
            assert_eq!(link.versions.len(), other.versions.len());
            for (i, v) in link.versions.iter().enumerate() {
                let j = other.versions.iter().position(|w| w.location == v.location).unwrap();
                let w = &other.versions[j];
                assert_eq!(
                    (v.first, v.last, &v.days, v.stats.redirects),
                    (w.first, w.last, &w.days, w.stats.redirects)
                );
                assert_eq!(link.version_visitors(i).visitors(), other.version_visitors(j).visitors());
            }
        }
    }

    #[test]
    fn a_link_seen_with_one_target_in_each_piece_gets_both_versions_visitors_right() {
        let line = |second: u32, visitor: char, target: &str| {
            let id = visitor.to_string().repeat(16);
            format!("202611221000{second:02}.0 ::1 20261122100000{id} {FIREFOX} /H83if 302 https://e.x/{target}")
        };
        let (a, b) = (vec![line(1, 'a', "one"), line(2, 'b', "one")], vec![line(3, 'a', "two"), line(4, 'c', "two")]);
        let options = Options::default();
        fn strs(v: &[String]) -> Vec<&str> {
            v.iter().map(String::as_str).collect()
        }
        let merged = count(&strs(&a), &options).merge(count(&strs(&b), &options));
        let link = &merged.links[&LinkId::parse("H83if").unwrap()];
        assert_eq!(link.total.visitors().0, 3);
        let mut per_version: Vec<(Vec<u8>, u64)> =
            (0..2).map(|i| (link.versions[i].location.to_vec(), link.version_visitors(i).visitors().0)).collect();
        per_version.sort();
        assert_eq!(per_version, [(b"https://e.x/one".to_vec(), 2), (b"https://e.x/two".to_vec(), 2)]);
    }

    #[test]
    fn bots_by_the_maintained_list_and_no_user_agent() {
        let mut cache = BotCache::default();
        assert!(cache.is_bot(GOOGLEBOT.as_bytes()));
        assert!(cache.is_bot(b"curl%2F8.5.0"));
        assert!(cache.is_bot(b"-"));
        assert!(!cache.is_bot(FIREFOX.as_bytes()));
        assert!(!cache.is_bot(FIREFOX.as_bytes()), "from the cache");
    }
}
