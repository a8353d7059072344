//! Counting: lines into per-link, per-target-version and per-day tallies. Each thread counts
//! its pieces into its own `Tally`; tallies merge once at the end, so no lock is taken per line.

use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::LazyLock;

use rayon::iter::{IndexedParallelIterator, IntoParallelRefMutIterator, ParallelIterator};
use serde::Serialize;

use super::line::{self, Day, Malformed, Stamp};
use super::Options;
use crate::domain::LinkId;

type Map<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// One visitor seen on one version of one link, appended per counted line and counted once at
/// the end, a link at a time ([`distinct_visitors`]). A hash set per link, filled as lines
/// came, did the same with one random memory access per line into tables that outgrow the
/// caches; appending is sequential, and one
/// link's entries fit a core's cache.
///
/// Packed in one number: the link's index (32 bits), the top 61 bits of a digest of the
/// tracking ID, the version's counter (32 bits), and how the visitor was seen ([`HUMAN`],
/// [`BOT`], [`NEW`]; 3 bits). Sorted, one visitor's entries on one version are together, so
/// a thread can keep one of them ([`compact`]). Two of a million visitors share a digest
/// about once in ten million reports.
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

/// Visitor entries of one tally, with where its links and counters are in the tally it was
/// merged into. They are moved there when counted, in [`distinct_visitors`]: rewriting them
/// at each merge was a pass over all of them.
struct Part {
    /// One list per shard of links ([`SHARDS`]).
    seen: Vec<Vec<Seen>>,
    links: Vec<u32>,
    counters: Vec<u32>,
}

impl Part {
    /// `seen` of a tally whose indices need no moving.
    fn native(seen: Vec<Vec<Seen>>, links: usize, counters: usize) -> Part {
        Part { seen, links: (0..links as u32).collect(), counters: (0..counters as u32).collect() }
    }
}

/// Visitor entries are kept in this many lists, each for the links whose [`shard`] it is, so
/// that each list's entries are put in per-link buckets on their own, into a buffer a core
/// uses again from shard to shard: bucketing all entries at once wrote to 16 MB of fresh
/// memory.
const SHARDS: usize = 16;

/// The shard of a link's visitor entries: the same in every tally, so their entries meet.
fn shard(id: LinkId) -> u8 {
    (DIGEST.hash_one(id) >> 60) as u8
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

impl std::ops::AddAssign for Visitors {
    /// Adds visitors counted apart: none of them may be among these.
    fn add_assign(&mut self, other: Visitors) {
        self.all += other.all;
        self.new += other.new;
        self.human += other.human;
        self.bot += other.bot;
    }
}

impl Visitors {
    /// Counts one more visitor, seen as `flags` say, or none if `flags` is 0: without a branch,
    /// which a visitor seen in one version and not in another would mispredict.
    fn add(&mut self, flags: u8) {
        self.all += u64::from(flags != 0);
        self.new += u64::from(flags & NEW != 0);
        self.human += u64::from(flags & HUMAN != 0);
        self.bot += u64::from(flags & BOT != 0);
    }
}

/// Distinct visitors per link (by index), and per version (by counter, only those seen), from
/// the visitor entries of all parts. A shard at a time on each core, its entries are put in
/// one bucket per link, and each bucket's distinct visitors are found with one set: a link's
/// bucket fits a core's cache, where sorting each part whole and merging the parts in one
/// walk did not. A log that is nearly all one link still counts that link on one core.
fn distinct_visitors(parts: &[Part], shards: &[u8]) -> (Vec<Visitors>, Vec<(u32, Visitors)>) {
    // Each shard's links, and each link's place among them.
    let mut members = vec![Vec::new(); SHARDS];
    let mut local = vec![0u32; shards.len()];
    for (link, &shard) in shards.iter().enumerate() {
        let members = &mut members[usize::from(shard)];
        local[link] = members.len() as u32;
        members.push(link as u32);
    }
    // Larger shards first, each core taking the next, with one buffer each for all it takes.
    let mut order: Vec<usize> = (0..SHARDS).collect();
    order.sort_by_key(|&shard| std::cmp::Reverse(parts.iter().map(|p| p.seen[shard].len()).sum::<usize>()));
    let next = AtomicUsize::new(0);
    let counted = rayon::broadcast(|_| {
        let (mut entries, mut spare, mut set, mut counted) = (Vec::new(), Vec::new(), Distinct::default(), Vec::new());
        while let Some(&shard) = order.get(next.fetch_add(1, Ordering::Relaxed)) {
            let members = &members[shard];
            // Where each link's bucket starts, and (last) where the last one ends.
            let mut starts = vec![0; members.len() + 1];
            for part in parts {
                for s in &part.seen[shard] {
                    starts[local[part.links[s.link()] as usize] as usize + 1] += 1;
                }
            }
            for i in 1..starts.len() {
                starts[i] += starts[i - 1];
            }
            entries.clear();
            entries.resize(starts[members.len()], 0u128);
            let mut next = starts.clone();
            for part in parts {
                for &s in &part.seen[shard] {
                    let link = part.links[s.link()] as usize;
                    let at = &mut next[local[link] as usize];
                    entries[*at] = s.moved(link, part.counters[s.counter()] as usize).0;
                    *at += 1;
                }
            }
            let mut versions = Vec::new();
            let visitors: Vec<Visitors> = starts
                .windows(2)
                .map(|bucket| {
                    let mut visitors = Visitors::default();
                    count_link(&entries[bucket[0]..bucket[1]], &mut spare, &mut set, &mut visitors, &mut versions);
                    visitors
                })
                .collect();
            counted.push((shard, visitors, versions));
        }
        counted
    });
    let mut link_visitors = vec![Visitors::default(); shards.len()];
    let mut versions = Vec::new();
    for (shard, visitors, theirs) in counted.into_iter().flatten() {
        for (visitors, &link) in visitors.into_iter().zip(&members[shard]) {
            link_visitors[link as usize] = visitors;
        }
        versions.extend(theirs);
    }
    (link_visitors, versions)
}

/// The most entries of a link counted with one set: a link with more is split by visitor
/// first, so that each set (at most 16,384 slots of 16 bytes, 256 KiB) stays in a core's own
/// cache. A quarter of the entries of a 1M-line report were in larger sets, and loading their
/// slots was the largest cost of counting distinct visitors.
const SET_ENTRIES: usize = 1 << 13;

/// Counts the distinct visitors in one link's entries (as [`walk`] does), in parts of distinct
/// visitors when it has more than [`SET_ENTRIES`]; `spare` holds the parts. A version may then
/// appear in `versions` once per part, its visitors to be added up.
fn count_link(
    bucket: &[u128],
    spare: &mut Vec<u128>,
    set: &mut Distinct,
    link: &mut Visitors,
    versions: &mut Vec<(u32, Visitors)>,
) {
    if bucket.len() <= SET_ENTRIES {
        return walk(bucket, set, link, versions);
    }
    // By the top bits of the visitor's digest: the set's slots go by the lowest.
    let bits = (bucket.len() / SET_ENTRIES + 1).next_power_of_two().trailing_zeros();
    let part = |s: u128| (Seen(s).visitor() >> (61 - bits)) as usize;
    let mut starts = vec![0; (1 << bits) + 1];
    for &s in bucket {
        starts[part(s) + 1] += 1;
    }
    for i in 1..starts.len() {
        starts[i] += starts[i - 1];
    }
    if spare.len() < bucket.len() {
        spare.resize(bucket.len(), 0);
    }
    let mut next = starts.clone();
    for &s in bucket {
        let at = &mut next[part(s)];
        spare[*at] = s;
        *at += 1;
    }
    for part in starts.windows(2) {
        walk(&spare[part[0]..part[1]], set, link, versions);
    }
}

/// Versions of one link counted in one pass over its entries: each takes 3 bits of flags in
/// a visitor's entry of the set, after the link's own 3.
const VERSIONS: usize = 10;

/// Counts the distinct visitors in one link's entries into `link`, and each version's into
/// `versions` (one element per version seen, by counter).
fn walk(bucket: &[u128], set: &mut Distinct, link: &mut Visitors, versions: &mut Vec<(u32, Visitors)>) {
    set.clear(bucket.len());
    let (mut counters, mut known) = ([0u32; VERSIONS], 0);
    for &s in bucket {
        let s = Seen(s);
        let counter = s.counter() as u32;
        // A link has a version or a few: a look at each beats a map.
        let v = match counters[..known].iter().position(|&c| c == counter) {
            Some(v) => v,
            None if known < VERSIONS => {
                counters[known] = counter;
                known += 1;
                known - 1
            }
            None => return walk_many(bucket, set, link, versions),
        };
        let flags = u128::from(s.flags());
        set.add(s.visitor(), u128::from(s.visitor()), flags | flags << (3 + 3 * v));
    }
    let first = versions.len();
    versions.extend(counters[..known].iter().map(|&c| (c, Visitors::default())));
    for entry in set.entries() {
        link.add(entry as u8 & 0b111);
        for (v, (_, visitors)) in versions[first..].iter_mut().enumerate() {
            visitors.add((entry >> (3 + 3 * v)) as u8 & 0b111);
        }
    }
}

/// [`walk`] for a link with more than [`VERSIONS`] versions: a pass for the link, and one for
/// its versions keyed by visitor and version.
fn walk_many(bucket: &[u128], set: &mut Distinct, link: &mut Visitors, versions: &mut Vec<(u32, Visitors)>) {
    set.clear(bucket.len());
    for s in bucket.iter().map(|s| Seen(*s)) {
        set.add(s.visitor(), u128::from(s.visitor()), u128::from(s.flags()));
    }
    set.entries().for_each(|entry| link.add(entry as u8 & 0b111));
    set.clear(bucket.len());
    for s in bucket.iter().map(|s| Seen(*s)) {
        set.add(s.visitor(), u128::from(s.visitor()) << 32 | s.counter() as u128, u128::from(s.flags()));
    }
    let first = versions.len();
    for entry in set.entries() {
        let (counter, flags) = ((entry >> 35) as u32, entry as u8 & 0b111);
        match versions[first..].iter_mut().find(|(c, _)| *c == counter) {
            Some((_, visitors)) => visitors.add(flags),
            None => {
                let mut visitors = Visitors::default();
                visitors.add(flags);
                versions.push((counter, visitors));
            }
        }
    }
}

/// An open-addressing map from a key (up to 93 bits) to 35 bits of flags, reused from link to
/// link: one link's fits a core's cache. Sorting each link's entries and walking them took a
/// little longer.
#[derive(Default)]
struct Distinct {
    /// `key << 35 | flags`, or 0 for an empty slot (every entry has a flag set); the first
    /// `mask + 1` are in use, and all are empty between uses.
    slots: Vec<u128>,
    mask: usize,
    /// The slots filled, in the order their keys came: walked, and emptied, instead of the
    /// whole table, two to four slots per key with a branch on each that the empty ones make
    /// unpredictable.
    used: Vec<u32>,
}

impl Distinct {
    /// Empties it, with room for `n` keys.
    fn clear(&mut self, n: usize) {
        for &i in &self.used {
            self.slots[i as usize] = 0;
        }
        self.used.clear();
        let len = (n * 2).next_power_of_two().max(16);
        if self.slots.len() < len {
            self.slots.resize(len, 0);
        }
        self.mask = len - 1;
    }

    /// Sets `flags` (not 0, below bit 35) on `key`, whose uniform digest is `hash`.
    fn add(&mut self, hash: u64, key: u128, flags: u128) {
        let mut i = hash as usize & self.mask;
        loop {
            let slot = &mut self.slots[i];
            if *slot == 0 {
                *slot = key << 35 | flags;
                self.used.push(i as u32);
                return;
            }
            if *slot >> 35 == key {
                *slot |= flags;
                return;
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Its entries, `key << 35 | flags`.
    fn entries(&self) -> impl Iterator<Item = u128> + '_ {
        self.used.iter().map(|&i| self.slots[i as usize])
    }
}

/// The digest of a tracking ID (its top 61 bits go in a [`Seen`]): the same in every thread and
/// every run, so tallies merge. Its 30 bytes as four words (the last two overlapping), folded
/// pairwise by 128-bit multiplies and the two results once more, as foldhash folds its input
/// (cheaper than hashing the array through `Hash`, which adds its length and takes the
/// general path for byte strings). Every byte of the constants
/// has its high bit set and a checked ID is ASCII, so no factor of the first two multiplies is
/// ever zero (which would make the other word of its pair not count).
fn visitor_key(id: &[u8; 30]) -> u64 {
    let word = |at: usize| u64::from_le_bytes([0, 1, 2, 3, 4, 5, 6, 7].map(|i| id[at + i]));
    let fold = |a: u64, b: u64| {
        let product = u128::from(a) * u128::from(b);
        product as u64 ^ (product >> 64) as u64
    };
    let (low, high) = (fold(word(0) ^ KEY[0], word(8) ^ KEY[1]), fold(word(16) ^ KEY[2], word(22) ^ KEY[3]));
    fold(low ^ KEY[1], high ^ KEY[2])
}

/// Fixed, with every byte's high bit set (see [`visitor_key`]).
const KEY: [u64; 4] = [0xdf8e_ccbc_db84_f3e9, 0xe8a7_ccba_96e7_cde5, 0x8fcb_cca1_d0fc_e69e, 0xbdf1_85d0_fd89_ef8b];

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
    /// Redirects per UTC day, in day order.
    pub days: Vec<DayCount>,
}

/// A link's redirects: in all, and per target version.
#[derive(Debug, Default)]
pub struct LinkTally {
    /// All its redirects.
    pub total: Stats,
    /// Per distinct `Location`, in no particular order until the report sorts them.
    pub versions: Vec<Version>,
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

/// What a redirect line changes in its version, kept apart from the rest of the version: a
/// line's link is one of thousands at random, and the miss on its counter is the largest
/// single cost of a line. A link's whole tally per line was two misses; 32 bytes a
/// version (the redirects summed from the days at the end) fit 12,000 versions in a core's
/// 512 KiB L2 cache.
#[derive(Debug, Clone, Copy)]
struct Counter {
    /// A digest of the `Location`, compared instead of its bytes: two of a link's targets
    /// share a 64-bit digest about once in 10^19 pairs.
    digest: u64,
    first: Stamp,
    /// The latest redirect. Its day is the day being counted in `today`: lines come mostly in
    /// time order, so a version's day seldom changes.
    last: Stamp,
    /// Redirects on `last`'s day not yet in a [`DayRun`], `[human, bot]`. A version's
    /// redirects are counted only here (summed from its days at the end).
    today: [u16; 2],
    /// The counter of the link's next version, or [`LAST`].
    next: u32,
}

/// [`Counter::next`] of a link's last version.
const LAST: u32 = u32::MAX;

const _: () = assert!(std::mem::size_of::<Counter>() == 32, "two versions a cache line");

impl Counter {
    fn new(digest: u64, at: Stamp) -> Counter {
        Counter { digest, first: at, last: at, today: [0; 2], next: LAST }
    }

    /// Counts one redirect at `at` (`bot`: to a bot), appending to `runs` (as counter `c`)
    /// the day it ends, or a line of an earlier day than the one being counted.
    fn count(&mut self, c: usize, at: Stamp, bot: bool, runs: &mut Vec<DayRun>) {
        let (day, b) = (at.day(), usize::from(bot));
        let current = self.last.day();
        self.first = self.first.min(at);
        if day == current && self.today[b] < u16::MAX {
            self.today[b] += 1;
        } else if day >= current {
            // A later day (or this day's count is full): this day's run ends.
            runs.push(DayRun { counter: c as u32, day: current, counts: self.today.map(u32::from) });
            self.today = [0; 2];
            self.today[b] = 1;
        } else {
            // Out of order by a day or more: a run of its own.
            let mut counts = [0; 2];
            counts[b] = 1;
            runs.push(DayRun { counter: c as u32, day, counts });
        }
        self.last = self.last.max(at);
    }
}

/// A version's redirects on one day, `[human, bot]`, as counted in one stretch of lines.
/// Appended when a version's day changes and summed per version and day at the end: adding
/// them to the version's list of days as they came was a cache miss and a search each time
///.
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
    days: Vec<DayCount>,
    /// Summed from `days`.
    redirects: [u64; 2],
    visitors: Visitors,
}

impl Cold {
    /// Adds `days` (in day order) and their redirects, `[human, bot]`.
    fn add_days(&mut self, days: Vec<DayCount>, redirects: [u64; 2]) {
        self.redirects = [self.redirects[0] + redirects[0], self.redirects[1] + redirects[1]];
        if self.days.is_empty() {
            self.days = days;
        } else if !days.is_empty() {
            self.days = merge_days(&self.days, &days);
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
    /// Visitors per link and version, not yet counted: a list per shard.
    seen: Vec<Vec<Seen>>,
    /// How many there are in all.
    seen_len: usize,
    /// Each link's shard, by index.
    shards: Vec<u8>,
    /// More of them, from merged tallies.
    parts: Vec<Part>,
    /// `seen_len` at which `seen` is next compacted.
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
            seen: (0..SHARDS).map(|_| Vec::new()).collect(),
            seen_len: 0,
            shards: Vec::new(),
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
        self.colds.push(Cold { location, days: Vec::new(), redirects: [0; 2], visitors: Visitors::default() });
        if let Some(p) = previous {
            self.counters[p].next = c as u32;
        }
        c
    }

    /// The counter of link `id`'s version with this `Location` digest, adding the link or the
    /// version (from `new`: its counter and location) when it is new; and the link's index.
    /// `known`: the link's entry in `index`, looked up already.
    fn version(
        &mut self,
        id: LinkId,
        known: Option<(u32, u32)>,
        digest: u64,
        new: impl FnOnce() -> (Counter, Box<[u8]>),
    ) -> (usize, usize) {
        let (link, mut c) = match known {
            Some((link, head)) => (link as usize, head as usize),
            None => {
                let (counter, location) = new();
                let c = self.add_version(None, counter, location);
                self.index.insert(id, (self.ids.len() as u32, c as u32));
                self.ids.push(id);
                self.shards.push(shard(id));
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
            if counter.today != [0; 2] {
                self.day_runs.push(DayRun {
                    counter: c as u32,
                    day: counter.last.day(),
                    counts: counter.today.map(u32::from),
                });
                counter.today = [0; 2];
            }
        }
    }

    /// Sums the redirects counted so far into their versions' days: done by each thread for
    /// its own tally before they are merged, not after the merge, where half of it ran on one
    /// core.
    pub fn sum_days(&mut self) {
        self.settle_days();
        let mut runs = std::mem::take(&mut self.day_runs);
        runs.sort_unstable_by_key(|r| u64::from(r.counter) << 32 | u64::from(r.day.number()));
        for version in runs.chunk_by(|a, b| a.counter == b.counter) {
            // Sized once: at most a day per run.
            let mut days = Vec::with_capacity(version.len());
            let mut redirects = [0; 2];
            for run in version.chunk_by(|a, b| a.day == b.day) {
                let counts =
                    run.iter().fold([0; 2], |n, r| [n[0] + u64::from(r.counts[0]), n[1] + u64::from(r.counts[1])]);
                days.push(DayCount { day: run[0].day, human: counts[0], bot: counts[1] });
                redirects = [redirects[0] + counts[0], redirects[1] + counts[1]];
            }
            self.colds[version[0].counter as usize].add_days(days, redirects);
        }
    }

    /// Adds `other`'s counts to these.
    pub fn merge(mut self, mut other: Tally) -> Tally {
        self.sum_days();
        other.sum_days();
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
        let mut links: Vec<u32> = Vec::with_capacity(other.ids.len());
        let mut counters = vec![0u32; other.counters.len()];
        for id in &other.ids {
            let mut c = other.index[id].1 as usize;
            let mut link;
            loop {
                let theirs = other.counters[c];
                let mut location = Some(std::mem::take(&mut other.colds[c].location));
                let known = self.index.get(id).copied();
                let (l, ours) =
                    self.version(*id, known, theirs.digest, || (theirs, location.take().unwrap_or_default()));
                link = l;
                counters[c] = ours as u32;
                if location.is_some() {
                    // Both counted this version: add theirs to ours.
                    let counter = &mut self.counters[ours];
                    counter.first = counter.first.min(theirs.first);
                    counter.last = counter.last.max(theirs.last);
                } else {
                    // New here: the counter came as a whole, but for its place in our chain.
                    self.counters[ours].next = LAST;
                }
                if theirs.next == LAST {
                    break;
                }
                c = theirs.next as usize;
            }
            links.push(link as u32);
        }
        // Their days joined to ours on all cores.
        let mut incoming: Vec<(Vec<DayCount>, [u64; 2])> = vec![(Vec::new(), [0; 2]); self.colds.len()];
        for (cold, &ours) in other.colds.iter_mut().zip(&counters) {
            incoming[ours as usize] = (std::mem::take(&mut cold.days), cold.redirects);
        }
        self.colds.par_iter_mut().zip(incoming).for_each(|(cold, (days, redirects))| cold.add_days(days, redirects));
        for mut part in other.parts {
            // Already moved once, into `other`: from there on into this tally.
            part.links.iter_mut().for_each(|l| *l = links[*l as usize]);
            part.counters.iter_mut().for_each(|c| *c = counters[*c as usize]);
            self.parts.push(part);
        }
        if other.seen_len > 0 {
            self.parts.push(Part { seen: other.seen, links, counters });
        }
        self.samples.extend(other.samples);
        self.piece_lines.extend(other.piece_lines);
        self
    }

    /// Once all pieces are merged: counts the distinct visitors of every link and version, and
    /// fills `links`.
    pub fn settle(&mut self) {
        self.sum_days();
        let mut parts = std::mem::take(&mut self.parts);
        parts.push(Part::native(std::mem::take(&mut self.seen), self.ids.len(), self.counters.len()));
        let (link_visitors, version_visitors) = distinct_visitors(&parts, &self.shards);
        for (counter, visitors) in version_visitors {
            self.colds[counter as usize].visitors += visitors;
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
                    let [human, bot] = cold.redirects;
                    tally.total.redirects += human + bot;
                    tally.total.bot_redirects += bot;
                    tally.versions.push(Version {
                        location: std::mem::take(&mut cold.location),
                        first: counter.first,
                        last: counter.last,
                        stats: Stats { redirects: human + bot, bot_redirects: bot, visitors: cold.visitors },
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
        // The link's entry and its first version's counter are a line's likeliest cache misses:
        // asked for first, they load while the User-Agent, `Location` and tracking ID are
        // hashed.
        let known = tally.index.get(&link).copied();
        if let Some((_, head)) = known {
            super::prefetch(&tally.counters[head as usize]);
        }
        let bot = tally.bots.is_bot(line.user_agent);
        let digest = DIGEST.hash_one(location);
        let visitor = line.tracking.map(visitor_key);
        let (link, c) = tally.version(link, known, digest, || (Counter::new(digest, line.stamp), location.into()));
        tally.counters[c].count(c, line.stamp, bot, &mut tally.day_runs);
        if let Some(visitor) = visitor {
            let flags = if bot { BOT } else { HUMAN } | if line.issued_tracking_id() { NEW } else { 0 };
            let seen = &mut tally.seen[usize::from(tally.shards[link])];
            if seen.capacity() == 0 {
                // Growing by doubling would copy it every time.
                seen.reserve(2 * SEEN_BATCH / SHARDS);
            }
            seen.push(Seen::new(link, visitor, c, flags));
            tally.seen_len += 1;
            if tally.seen_len >= tally.compact_at {
                tally.seen.iter_mut().for_each(compact);
                tally.seen_len = tally.seen.iter().map(Vec::len).sum();
                tally.compact_at = tally.compact_at.max(2 * tally.seen_len);
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
    fn a_link_with_more_versions_than_one_pass_holds_gets_each_versions_visitors_right() {
        let (mut lines, mut expected) = (Vec::new(), vec![std::collections::BTreeSet::new(); VERSIONS + 3]);
        for round in 0..2 {
            for visitor in 0..40usize {
                for (version, seen) in expected.iter_mut().enumerate() {
                    if (visitor + version) % 3 == 0 || visitor % 7 == 0 {
                        let id = format!("20261101000000{visitor:016x}");
                        let ua = if round == 1 && visitor == 3 { GOOGLEBOT } else { FIREFOX };
                        lines.push(format!("20261122100000.0 ::1 {id} {ua} /H83if 302 https://e.x/{version}"));
                        seen.insert(visitor);
                    }
                }
            }
        }
        // Issued its ID by a redirect to the last version.
        lines.push(format!(
            "20261122100000.0 ::1 20261122100000ffffffffffffffff {FIREFOX} /H83if 302 https://e.x/{}",
            VERSIONS + 2
        ));
        expected[VERSIONS + 2].insert(1000);
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let tally = counted(count(&lines, &Options::default()));
        let link = link(&tally, "H83if");
        assert_eq!(link.versions.len(), VERSIONS + 3);
        let all: std::collections::BTreeSet<_> = expected.iter().flatten().collect();
        // Visitor 3 came back as a bot: a human and a bot, one visitor.
        assert_eq!(visitors(&link.total), (all.len() as u64, 1, all.len() as u64, 1));
        for version in &link.versions {
            let k: usize = std::str::from_utf8(&version.location[12..]).unwrap().parse().unwrap();
            let n = expected[k].len() as u64;
            let (new, bot) = (u64::from(k == VERSIONS + 2), u64::from(expected[k].contains(&3)));
            assert_eq!(visitors(&version.stats), (n, new, n, bot), "version {k}");
        }
    }

    #[test]
    fn a_link_with_more_entries_than_one_set_holds_is_counted_in_parts_alike() {
        // Two links past SET_ENTRIES, one with more versions than one pass holds: each is
        // counted in parts by visitor, a visitor in one part only, a version in every part.
        for versions in [3, VERSIONS + 2] {
            let n = 3 * SET_ENTRIES + 5;
            let mut expected = vec![[std::collections::BTreeSet::new(), std::collections::BTreeSet::new()]; versions];
            let lines: Vec<String> = (0..n)
                .map(|i| {
                    let (visitor, version) = (i * 7 % (n / 2), i % versions);
                    let bot = visitor % 97 == 0;
                    expected[version][usize::from(bot)].insert(visitor);
                    let ua = if bot { GOOGLEBOT } else { FIREFOX };
                    format!("20261122100000.0 ::1 20261101000000{visitor:016x} {ua} /H83if 302 https://e.x/{version}")
                })
                .collect();
            let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
            let tally = counted(count(&lines, &Options::default()));
            let link = link(&tally, "H83if");
            let all = |v: &[std::collections::BTreeSet<usize>; 2]| v[0].union(&v[1]).count() as u64;
            let everyone = expected.iter().fold(
                [Default::default(), Default::default()],
                |mut a: [std::collections::BTreeSet<usize>; 2], v| {
                    a[0].extend(&v[0]);
                    a[1].extend(&v[1]);
                    a
                },
            );
            assert!(everyone[0].len() + everyone[1].len() > SET_ENTRIES, "more visitors than one set holds");
            assert_eq!(visitors(&link.total), (all(&everyone), 0, everyone[0].len() as u64, everyone[1].len() as u64));
            assert_eq!(link.versions.len(), versions);
            for version in &link.versions {
                let k: usize = std::str::from_utf8(&version.location[12..]).unwrap().parse().unwrap();
                let e = &expected[k];
                assert_eq!(visitors(&version.stats), (all(e), 0, e[0].len() as u64, e[1].len() as u64), "version {k}");
            }
        }
    }

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
        assert_eq!(two.days, vec![DayCount { day: Day::parse_iso("2026-11-22").unwrap(), human: 1, bot: 2 }]);
        assert_eq!(tally.not_found[&b"/nope1"[..]], 1);
    }

    #[test]
    fn days_out_of_order_and_days_past_a_counters_width_are_counted_exactly() {
        let line = |day: u32, agent: &str| format!("202611{day:02}100000.0 ::1 - {agent} /H83if 302 https://e.x/one");
        // 22nd, then the 20th (out of order), 70,000 more on the 22nd (past a 16-bit count),
        // the 21st, then the 23rd and a bot on the 22nd again.
        let mut lines = vec![line(22, FIREFOX), line(20, FIREFOX)];
        lines.extend(std::iter::repeat_n(line(22, FIREFOX), 70_000));
        // Another link: its latest redirect comes first, and its day's count fills up after.
        lines.push("20261122230000.0 ::1 - - /H83ig 302 https://e.x/one".into());
        lines.extend(std::iter::repeat_n("20261122100000.0 ::1 - - /H83ig 302 https://e.x/one".into(), 70_000));
        lines.extend([line(21, GOOGLEBOT), line(23, FIREFOX), line(22, GOOGLEBOT)]);
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let tally = counted(count(&lines, &Options::default()));
        let link = link(&tally, "H83if");
        let day = |d: &str, human, bot| DayCount { day: Day::parse_iso(d).unwrap(), human, bot };
        assert_eq!(
            link.versions[0].days,
            [day("2026-11-20", 1, 0), day("2026-11-21", 0, 1), day("2026-11-22", 70_001, 1), day("2026-11-23", 1, 0)]
        );
        assert_eq!((link.total.redirects, link.total.bot_redirects), (70_005, 2));
        let other = &self::link(&tally, "H83ig").versions[0];
        assert_eq!((other.last.to_string(), other.stats.redirects), ("2026-11-22T23:00:00.0Z".into(), 70_001));
        let v = &link.versions[0];
        assert_eq!(
            (v.first.to_string(), v.last.to_string()),
            ("2026-11-20T10:00:00.0Z".into(), "2026-11-23T10:00:00.0Z".into())
        );
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
        // A tally that holds merged visitors, merged again: their indices move twice.
        let nested = counted(
            count(&lines[..7], &options).merge(count(&lines[7..20], &options).merge(count(&lines[20..], &options))),
        );
        assert_eq!(whole.links.len(), 2);
        assert_counted_alike(&whole, &merged);
        assert_counted_alike(&whole, &nested);
    }

    /// Every link of `whole` has the same counts in `other`, in all and per version.
    fn assert_counted_alike(whole: &Tally, other: &Tally) {
        for (id, link) in &whole.links {
            let theirs = self::link(other, id.as_str());
            assert_eq!(visitors(&link.total), visitors(&theirs.total), "{id:?}");
            assert_eq!(link.versions.len(), theirs.versions.len());
            for v in &link.versions {
                let w = theirs.versions.iter().find(|w| w.location == v.location).unwrap();
                assert_eq!(
                    (v.first, v.last, &v.days, v.stats.redirects),
                    (w.first, w.last, &w.days, w.stats.redirects)
                );
                assert_eq!(visitors(&v.stats), visitors(&w.stats));
            }
        }
    }

    #[test]
    fn links_in_many_shards_count_the_same_whole_and_merged() {
        let lines: Vec<String> = (0..600)
            .map(|i| {
                format!(
                    "20261122100000.0 ::1 20261122090000{:016x} {FIREFOX} /L{:04} 302 https://e.x/{}",
                    i % 13,
                    i % 97,
                    i % 3
                )
            })
            .collect();
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let options = Options::default();
        let whole = counted(count(&lines, &options));
        let merged = counted(
            count(&lines[..150], &options)
                .merge(count(&lines[150..400], &options))
                .merge(count(&lines[400..], &options)),
        );
        let shards: std::collections::BTreeSet<u8> = whole.links.iter().map(|(id, _)| shard(*id)).collect();
        assert!(shards.len() > SHARDS / 2, "the links fall in many shards: {shards:?}");
        assert_eq!(whole.links.len(), 97);
        for (id, link) in &whole.links {
            // Link i % 97 sees visitors i % 13.
            let expected = (0..600)
                .filter(|i| i % 97 == id.as_str()[1..].parse::<usize>().unwrap())
                .map(|i| i % 13)
                .collect::<std::collections::BTreeSet<_>>()
                .len() as u64;
            assert_eq!(link.total.visitors.all, expected, "{id:?}");
        }
        assert_counted_alike(&whole, &merged);
    }

    #[test]
    fn days_summed_in_each_tally_merge_into_the_days_of_the_whole() {
        // Three links over five days, lines cut into pieces that share days and versions.
        let lines: Vec<String> = (0..240)
            .map(|i| {
                let agent = if i % 5 == 0 { GOOGLEBOT } else { FIREFOX };
                format!("2026112{}100000.0 ::1 - {agent} /H83i{} 302 https://e.x/{}", 1 + (i * 7 % 5), i % 3, i % 2)
            })
            .collect();
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let options = Options::default();
        let whole = counted(count(&lines, &options));
        let mut merged = count(&lines[..50], &options);
        for cut in [[50, 130], [130, 131], [131, 240]] {
            let mut piece = count(&lines[cut[0]..cut[1]], &options);
            if cut[0] % 2 == 0 {
                piece.sum_days();
            }
            merged = merged.merge(piece);
        }
        let merged = counted(merged);
        let days = link(&whole, "H83i0").versions.iter().map(|v| v.days.len()).sum::<usize>();
        assert_eq!(days, 10, "each version of each link has redirects on all five days");
        assert_counted_alike(&whole, &merged);
    }

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
        assert!(small.seen_len < 300 && small.compact_at > 8, "compacted on the way");
        assert_counted_alike(&whole, &counted(small));
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

    #[test]
    fn visitor_digests_are_distinct_and_spread() {
        // Realistic IDs: issue seconds over a month, random hex (a fixed xorshift stream).
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let n = 200_000;
        let (mut digests, mut top, mut low) = (Vec::with_capacity(n), [0u32; 1024], [0u32; 1024]);
        for _ in 0..n {
            let second = next() % (30 * 86_400);
            let (day, rest) = (1 + second / 86_400, second % 86_400);
            let id = format!("202611{day:02}{:02}{:02}{:02}{:016x}", rest / 3600, rest / 60 % 60, rest % 60, next());
            let digest = visitor_key(id.as_bytes().try_into().unwrap()) >> 3;
            digests.push(digest);
            top[(digest >> 51) as usize] += 1;
            low[(digest & 1023) as usize] += 1;
        }
        digests.sort_unstable();
        digests.dedup();
        assert_eq!(digests.len(), n, "no two IDs share a 61-bit digest");
        // About 195 per bucket, give or take 14: every bucket within six standard deviations.
        for buckets in [top, low] {
            assert!(
                buckets.iter().all(|&b| (110..=280).contains(&b)),
                "{:?}",
                (buckets.iter().min(), buckets.iter().max())
            );
        }
    }
}
