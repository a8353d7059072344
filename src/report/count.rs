//! Counting: lines into per-link, per-target-version and per-day tallies. Each thread counts
//! its pieces into its own `Tally`; tallies merge once at the end, so no lock is taken per line.

use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};
use std::sync::LazyLock;

use rayon::iter::{IntoParallelRefMutIterator, ParallelIterator};
use rayon::slice::ParallelSliceMut;

use super::line::{self, Day, Malformed, Stamp};
use super::Options;
use crate::domain::LinkId;

type Map<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// One visitor seen on one version of one link, appended per counted line and sorted once at
/// the end, which makes the distinct counts a walk over runs of equal entries. A hash set per
/// link did the same with one random memory access per line into tables that outgrow the
/// caches (measured: the largest share of a report's time); appending is sequential, and the
/// sort works through cache-sized pieces.
///
/// Packed in one number ordered as the walk needs it: the link's index (32 bits), the top 61
/// bits of a digest of the tracking ID, the version's counter (32 bits), and how the visitor
/// was seen ([`HUMAN`], [`BOT`], [`NEW`]; 3 bits). Sorted, a link's entries are together, and
/// within them one visitor's, and within those one visitor's on one version: the link's
/// distinct visitors and each version's come out of the same walk. Two of a million visitors
/// share a digest about once in ten million reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Seen(u128);

impl Seen {
    fn new(link: usize, visitor: u64, counter: usize, flags: u8) -> Seen {
        Seen((link as u128) << 96 | u128::from(visitor >> 3) << 35 | (counter as u128) << 3 | u128::from(flags))
    }

    fn link(self) -> usize {
        (self.0 >> 96) as usize
    }

    /// The visitor's digest.
    fn visitor(self) -> u64 {
        (self.0 >> 35) as u64 & ((1 << 61) - 1)
    }

    fn counter(self) -> usize {
        (self.0 >> 3) as u32 as usize
    }

    fn flags(self) -> u8 {
        (self.0 & 0b111) as u8
    }

    /// The same visitor and flags, at another link's index and counter (a merged tally's).
    fn moved(self, link: usize, counter: usize) -> Seen {
        Seen::new(link, self.visitor() << 3, counter, self.flags())
    }

    /// Whether both are the same visitor on the same version (flags aside).
    fn same(self, other: Seen) -> bool {
        self.0 >> 3 == other.0 >> 3
    }
}

/// The entries of several sorted parts, in order.
struct Sorted<'a> {
    parts: &'a [Vec<Seen>],
    next: Vec<usize>,
}

impl<'a> Sorted<'a> {
    fn new(parts: &'a [Vec<Seen>]) -> Sorted<'a> {
        Sorted { parts, next: vec![0; parts.len()] }
    }
}

impl Iterator for Sorted<'_> {
    type Item = Seen;

    fn next(&mut self) -> Option<Seen> {
        // Parts are few (one per thread): a look at each head beats a heap.
        let mut best: Option<(usize, Seen)> = None;
        for (i, part) in self.parts.iter().enumerate() {
            if let Some(&s) = part.get(self.next[i]) {
                if best.is_none_or(|(_, b)| s < b) {
                    best = Some((i, s));
                }
            }
        }
        let (i, s) = best?;
        self.next[i] += 1;
        Some(s)
    }
}

/// Entries a thread appends before it sorts them and keeps one per visitor, link and version:
/// bounds a report's memory by the visitors it finds, not by the lines it reads (32 MiB).
const SEEN_BATCH: usize = 1 << 21;

/// Sorts `seen` and keeps one entry per visitor and version, with the flags of all of them.
fn compact(seen: &mut Vec<Seen>) {
    seen.sort_unstable();
    seen.dedup_by(|later, kept| {
        let same = later.same(*kept);
        if same {
            kept.0 |= later.0 & 0b111;
        }
        same
    });
}

/// Distinct visitors, and how many of them were seen as new, as humans, as bots.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Visitors {
    /// Distinct tracking IDs.
    pub all: u64,
    /// Issued their ID by one of the redirects counted.
    pub new: u64,
    /// Seen with a human User-Agent.
    pub human: u64,
    /// Seen with a bot's.
    pub bot: u64,
}

impl Visitors {
    /// Counts one more visitor, seen as `flags` say.
    fn add(&mut self, flags: u8) {
        self.all += 1;
        self.new += u64::from(flags & NEW != 0);
        self.human += u64::from(flags & HUMAN != 0);
        self.bot += u64::from(flags & BOT != 0);
    }
}

/// A run of equal keys in a sorted walk, with the flags of all its entries.
#[derive(Default)]
struct Run {
    key: Option<u128>,
    flags: u8,
}

impl Run {
    /// Adds an entry: the flags of the run it ended, if it started a new one.
    fn push(&mut self, key: u128, flags: u8) -> Option<u8> {
        if self.key == Some(key) {
            self.flags |= flags;
            return None;
        }
        let ended = self.key.map(|_| self.flags);
        (self.key, self.flags) = (Some(key), flags);
        ended
    }

    /// Ends the walk: the last run's flags.
    fn finish(&mut self) -> Option<u8> {
        self.key.take().map(|_| self.flags)
    }
}

/// The digest of a tracking ID (its top 61 bits go in a [`Seen`]): the same in every thread and every
/// run, so tallies merge.
fn visitor_key(id: &[u8; 30]) -> u64 {
    DIGEST.hash_one(id)
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
#[derive(Debug, Default)]
pub struct Stats {
    /// 302 responses.
    pub redirects: u64,
    /// Of which to a bot's User-Agent.
    pub bot_redirects: u64,
    /// Its distinct visitors.
    pub visitors: Visitors,
}

/// One distinct `Location` a link redirected to.
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
    /// Redirects per UTC day, `[human, bot]`, in day order.
    pub days: Vec<(Day, [u64; 2])>,
}

/// A link's redirects: in all, and per target version.
#[derive(Debug, Default)]
pub struct LinkTally {
    /// All its redirects.
    pub total: Stats,
    /// Per distinct `Location`, in no particular order until the report sorts them.
    pub versions: Vec<Version>,
}

/// Adds one day's `[human, bot]` redirects to `days`, kept in day order.
pub fn add_day(days: &mut Vec<(Day, [u64; 2])>, day: Day, counts: [u64; 2]) {
    match days.binary_search_by_key(&day, |(d, _)| *d) {
        Ok(i) => (0..2).for_each(|k| days[i].1[k] += counts[k]),
        Err(i) => days.insert(i, (day, counts)),
    }
}

/// What a redirect line changes in its version, kept apart from the rest of the version: a
/// line's link is one of thousands at random, and with only these 64 bytes each the counters
/// of 5000 links' versions fit a core's cache (a link's whole tally did not: two cache misses
/// per line, measured).
#[derive(Debug, Clone, Copy)]
struct Counter {
    /// A digest of the `Location`, compared instead of its bytes: two of a link's targets
    /// share a 64-bit digest about once in 10^19 pairs.
    digest: u64,
    first: Stamp,
    last: Stamp,
    redirects: u64,
    bot_redirects: u64,
    /// The day being counted; its redirects, `[human, bot]`, go to the version's `days` when
    /// the day changes (lines come mostly in time order, so seldom).
    day: Option<Day>,
    today: [u32; 2],
    /// The counter of the link's next version, or [`LAST`].
    next: u32,
}

/// [`Counter::next`] of a link's last version.
const LAST: u32 = u32::MAX;

const _: () = assert!(std::mem::size_of::<Counter>() == 64, "one cache line a version");

impl Counter {
    fn new(digest: u64, at: Stamp) -> Counter {
        Counter { digest, first: at, last: at, redirects: 0, bot_redirects: 0, day: None, today: [0; 2], next: LAST }
    }
}

/// A version's redirects on one day, `[human, bot]`, as counted in one stretch of lines.
/// Appended when a version's day changes and summed per version and day at the end: adding
/// them to the version's list of days as they came was a cache miss and a search each time
/// (measured: 5% of a report).
#[derive(Debug, Clone, Copy)]
struct DayRun {
    counter: u32,
    day: Day,
    counts: [u32; 2],
}

/// The rest of a version, filled in at the end.
#[derive(Debug)]
struct Cold {
    location: Box<[u8]>,
    days: Vec<(Day, [u64; 2])>,
    visitors: Visitors,
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
    /// Per link, once [`Tally::settle`] has run.
    pub links: Vec<(LinkId, LinkTally)>,
    /// Each link's index (in `ids`, and in a [`Seen`]) and its first version's counter.
    index: Map<LinkId, (u32, u32)>,
    /// The links, in the order first seen.
    ids: Vec<LinkId>,
    /// Every version of every link.
    counters: Vec<Counter>,
    /// The rest of each version, at the same index.
    colds: Vec<Cold>,
    /// Redirects per version and day, not yet summed.
    day_runs: Vec<DayRun>,
    /// Visitors per link and version, not yet counted.
    seen: Vec<Seen>,
    /// More of them, from merged tallies (in this tally's indices): each is sorted apart, on
    /// its own core, and the sorted parts are walked side by side.
    parts: Vec<Vec<Seen>>,
    /// `seen`'s length at which it is next compacted.
    compact_at: usize,
    /// The first malformed lines of each piece.
    pub samples: Vec<Sample>,
    /// Lines per piece, to number sampled lines within their file.
    pub piece_lines: Vec<(usize, u64)>,
    bots: BotCache,
}

impl Default for Tally {
    fn default() -> Tally {
        Tally {
            lines: 0,
            in_range: 0,
            malformed: 0,
            statuses: Vec::new(),
            not_found: Map::default(),
            links: Vec::new(),
            index: Map::default(),
            ids: Vec::new(),
            counters: Vec::new(),
            colds: Vec::new(),
            day_runs: Vec::new(),
            seen: Vec::new(),
            parts: Vec::new(),
            compact_at: SEEN_BATCH,
            samples: Vec::new(),
            piece_lines: Vec::new(),
            bots: BotCache::default(),
        }
    }
}

impl Tally {
    /// Counts the lines of piece number `piece` through the returned counter.
    pub fn piece<'a>(&'a mut self, piece: usize, options: &'a Options) -> PieceCounter<'a> {
        PieceCounter { tally: self, options, piece, line: 0, samples: 0 }
    }

    /// A new version's counter, after counter `previous` of the same link (if any).
    fn add_version(&mut self, previous: Option<usize>, counter: Counter, location: Box<[u8]>) -> usize {
        let c = self.counters.len();
        self.counters.push(counter);
        self.colds.push(Cold { location, days: Vec::new(), visitors: Visitors::default() });
        if let Some(p) = previous {
            self.counters[p].next = c as u32;
        }
        c
    }

    /// The counter of link `id`'s version with this `Location` digest, adding the link or the
    /// version (from `new`: its counter and location) when it is new; and the link's index.
    fn version(&mut self, id: LinkId, digest: u64, new: impl FnOnce() -> (Counter, Box<[u8]>)) -> (usize, usize) {
        let (link, mut c) = match self.index.get(&id) {
            Some(&(link, head)) => (link as usize, head as usize),
            None => {
                let (counter, location) = new();
                let c = self.add_version(None, counter, location);
                self.index.insert(id, (self.ids.len() as u32, c as u32));
                self.ids.push(id);
                return (self.ids.len() - 1, c);
            }
        };
        loop {
            let counter = &self.counters[c];
            if counter.digest == digest {
                return (link, c);
            }
            if counter.next == LAST {
                let (counter, location) = new();
                return (link, self.add_version(Some(c), counter, location));
            }
            c = counter.next as usize;
        }
    }

    /// Ends every counter's day being counted.
    fn settle_days(&mut self) {
        for (c, counter) in self.counters.iter_mut().enumerate() {
            if let Some(day) = counter.day.take() {
                self.day_runs.push(DayRun { counter: c as u32, day, counts: counter.today });
                counter.today = [0; 2];
            }
        }
    }

    /// Adds `other`'s counts to these.
    pub fn merge(mut self, mut other: Tally) -> Tally {
        self.settle_days();
        other.settle_days();
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
        // Where each of `other`'s links and versions is in ours, to move its visitors over.
        let mut links = Vec::with_capacity(other.ids.len());
        let mut counters = vec![0u32; other.counters.len()];
        for id in &other.ids {
            let mut c = other.index[id].1 as usize;
            let mut link;
            loop {
                let theirs = other.counters[c];
                let mut location = Some(std::mem::take(&mut other.colds[c].location));
                let (l, ours) = self.version(*id, theirs.digest, || (theirs, location.take().unwrap_or_default()));
                link = l;
                counters[c] = ours as u32;
                if location.is_some() {
                    // Both counted this version: add theirs to ours.
                    let counter = &mut self.counters[ours];
                    counter.first = counter.first.min(theirs.first);
                    counter.last = counter.last.max(theirs.last);
                    counter.redirects += theirs.redirects;
                    counter.bot_redirects += theirs.bot_redirects;
                } else {
                    // New here: the counter came as a whole, but for its place in our chain.
                    self.counters[ours].next = LAST;
                }
                if theirs.next == LAST {
                    break;
                }
                c = theirs.next as usize;
            }
            links.push(link);
        }
        self.day_runs.extend(other.day_runs.iter().map(|r| DayRun { counter: counters[r.counter as usize], ..*r }));
        let mut theirs = other.parts;
        theirs.push(other.seen);
        for part in &mut theirs {
            for s in part.iter_mut() {
                *s = s.moved(links[s.link()], counters[s.counter()] as usize);
            }
        }
        self.parts.extend(theirs.into_iter().filter(|p| !p.is_empty()));
        self.samples.extend(other.samples);
        self.piece_lines.extend(other.piece_lines);
        self
    }

    /// Once all pieces are merged: counts the distinct visitors of every link and version, and
    /// fills `links`.
    pub fn settle(&mut self) {
        self.settle_days();
        let mut runs = std::mem::take(&mut self.day_runs);
        runs.par_sort_unstable_by_key(|r| (r.counter, r.day));
        for run in runs.chunk_by(|a, b| (a.counter, a.day) == (b.counter, b.day)) {
            let counts = run.iter().fold([0; 2], |n, r| [n[0] + u64::from(r.counts[0]), n[1] + u64::from(r.counts[1])]);
            // In day order already: appended, not inserted.
            self.colds[run[0].counter as usize].days.push((run[0].day, counts));
        }
        let mut parts = std::mem::take(&mut self.parts);
        parts.push(std::mem::take(&mut self.seen));
        parts.par_iter_mut().for_each(|part| part.sort_unstable());
        let mut link_visitors = vec![Visitors::default(); self.ids.len()];
        // One walk: a new visitor of a link counts for the link, a new visitor of a version
        // for the version, each with the flags of all its entries.
        let (mut visitor, mut on_version) = (Run::default(), Run::default());
        let mut at: Option<(usize, usize)> = None;
        for seen in Sorted::new(&parts) {
            let key = seen.0 >> 3;
            if let Some(flags) = visitor.push(key >> 32, seen.flags()) {
                let (link, _) = at.expect("a run ended, so one began");
                link_visitors[link].add(flags);
            }
            if let Some(flags) = on_version.push(key, seen.flags()) {
                let (_, counter) = at.expect("a run ended, so one began");
                self.colds[counter].visitors.add(flags);
            }
            at = Some((seen.link(), seen.counter()));
        }
        if let (Some(flags), Some((link, _))) = (visitor.finish(), at) {
            link_visitors[link].add(flags);
        }
        if let (Some(flags), Some((_, counter))) = (on_version.finish(), at) {
            self.colds[counter].visitors.add(flags);
        }
        drop(parts);
        self.links = self
            .ids
            .iter()
            .zip(link_visitors)
            .map(|(id, visitors)| {
                let mut tally = LinkTally { total: Stats { visitors, ..Stats::default() }, versions: Vec::new() };
                let mut c = self.index[id].1 as usize;
                loop {
                    let counter = &self.counters[c];
                    let cold = &mut self.colds[c];
                    tally.total.redirects += counter.redirects;
                    tally.total.bot_redirects += counter.bot_redirects;
                    tally.versions.push(Version {
                        location: std::mem::take(&mut cold.location),
                        first: counter.first,
                        last: counter.last,
                        stats: Stats {
                            redirects: counter.redirects,
                            bot_redirects: counter.bot_redirects,
                            visitors: cold.visitors,
                        },
                        days: std::mem::take(&mut cold.days),
                    });
                    if counter.next == LAST {
                        break;
                    }
                    c = counter.next as usize;
                }
                (*id, tally)
            })
            .collect();
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
        let digest = DIGEST.hash_one(location);
        let (link, c) = tally.version(link, digest, || (Counter::new(digest, line.stamp), location.into()));
        let counter = &mut tally.counters[c];
        counter.first = counter.first.min(line.stamp);
        counter.last = counter.last.max(line.stamp);
        counter.redirects += 1;
        counter.bot_redirects += u64::from(bot);
        let day = line.stamp.day();
        let b = usize::from(bot);
        if counter.day != Some(day) || counter.today[b] == u32::MAX {
            if let Some(previous) = counter.day.replace(day) {
                tally.day_runs.push(DayRun { counter: c as u32, day: previous, counts: counter.today });
            }
            counter.today = [0; 2];
        }
        counter.today[b] += 1;
        if let Some(id) = line.tracking {
            let flags = if bot { BOT } else { HUMAN } | if line.issued_tracking_id() { NEW } else { 0 };
            if tally.seen.capacity() == 0 {
                // Growing by doubling would copy it every time (measured: 4% of a report).
                tally.seen.reserve(SEEN_BATCH);
            }
            tally.seen.push(Seen::new(link, visitor_key(id), c, flags));
            if tally.seen.len() >= tally.compact_at {
                compact(&mut tally.seen);
                tally.compact_at = tally.compact_at.max(2 * tally.seen.len());
            }
        }
    }

    /// Records how many lines the piece had.
    pub fn finish(self) {
        self.tally.piece_lines.push((self.piece, self.line));
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

    /// A tally whose visitors are counted, as the report sees it.
    fn counted(mut tally: Tally) -> Tally {
        tally.settle();
        tally
    }

    fn link<'a>(tally: &'a Tally, id: &str) -> &'a LinkTally {
        let id = LinkId::parse(id).unwrap();
        &tally.links.iter().find(|(i, _)| *i == id).unwrap().1
    }

    fn visitors(stats: &Stats) -> (u64, u64, u64, u64) {
        let v = stats.visitors;
        (v.all, v.new, v.human, v.bot)
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
        let tally = counted(count(&lines, &Options::default()));
        assert_eq!((tally.lines, tally.in_range, tally.malformed), (6, 5, 1));
        assert_eq!(tally.samples[0].line, 6);
        let link = link(&tally, "H83if");
        assert_eq!((link.total.redirects, link.total.bot_redirects), (4, 2));
        // a: new (its ID issued at 10:00:00) and human; b: new and a bot; the untracked
        // client is a request, not a visitor.
        assert_eq!(visitors(&link.total), (2, 2, 1, 1));
        let two = link.versions.iter().find(|v| &*v.location == b"https://e.x/two").unwrap();
        assert_eq!(two.stats.redirects, 3);
        // a returned to the second version: not new there.
        assert_eq!(visitors(&two.stats), (2, 1, 1, 1));
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
        let whole = counted(count(&lines, &options));
        let merged = counted(count(&lines[..13], &options).merge(count(&lines[13..], &options)));
        assert_eq!(whole.links.len(), 2);
        for (id, link) in &whole.links {
            let other = self::link(&merged, id.as_str());
            assert_eq!(visitors(&link.total), visitors(&other.total));
            assert_eq!(link.versions.len(), other.versions.len());
            for v in &link.versions {
                let w = other.versions.iter().find(|w| w.location == v.location).unwrap();
                assert_eq!(
                    (v.first, v.last, &v.days, v.stats.redirects),
                    (w.first, w.last, &w.days, w.stats.redirects)
                );
                assert_eq!(visitors(&v.stats), visitors(&w.stats));
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
        let merged = counted(count(&strs(&a), &options).merge(count(&strs(&b), &options)));
        let link = link(&merged, "H83if");
        assert_eq!(link.total.visitors.all, 3);
        let mut per_version: Vec<(Vec<u8>, u64)> =
            link.versions.iter().map(|v| (v.location.to_vec(), v.stats.visitors.all)).collect();
        per_version.sort();
        assert_eq!(per_version, [(b"https://e.x/one".to_vec(), 2), (b"https://e.x/two".to_vec(), 2)]);
    }

    #[test]
    fn compacting_the_seen_visitors_on_the_way_changes_no_count() {
        let lines: Vec<String> = (0..300)
            .map(|i| {
                let agent = if i % 4 == 0 { GOOGLEBOT } else { FIREFOX };
                format!(
                    "20261122100{:03}.0 ::1 20261122100{:03}{:016x} {agent} /H83i{} 302 https://e.x/{}",
                    i % 60,
                    i % 7,
                    i % 7,
                    i % 3,
                    i % 2
                )
            })
            .collect();
        let options = Options::default();
        let whole = counted(count(&lines.iter().map(String::as_str).collect::<Vec<_>>(), &options));
        let mut small = Tally { compact_at: 8, ..Tally::default() };
        let mut counter = small.piece(0, &options);
        for l in &lines {
            counter.line(l.as_bytes(), true);
        }
        counter.finish();
        assert!(small.seen.len() < 300 && small.compact_at > 8, "compacted on the way");
        let small = counted(small);
        for (id, link) in &whole.links {
            let other = self::link(&small, id.as_str());
            assert_eq!(visitors(&link.total), visitors(&other.total));
            for v in &link.versions {
                let w = other.versions.iter().find(|w| w.location == v.location).unwrap();
                assert_eq!(visitors(&v.stats), visitors(&w.stats));
            }
        }
        assert!(whole.links.iter().any(|(_, l)| l.total.visitors.new > 0 && l.total.visitors.bot > 0));
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
