//! The counting engine: log lines into a [`Tally`], on every core.
//!
//! Each thread counts the pieces it takes into a [`Partial`] of its own; partials are merged
//! once at the end, so no lock is taken per line. The data model, top-down:
//!
//! - [`Partial`]: one thread's counts: totals, the versions of links it has seen, and its
//!   visitor sightings.
//! - [`VersionCount`]: one target version of one link as its lines change it: its numbers,
//!   first and last redirect, redirects on the day being counted. Kept in the map that finds it
//!   by link and a digest of the `Location` ([`VersionKey`]): a line costs one lookup, and
//!   never a comparison of `Location` bytes (they are apart, by version number).
//! - [`DayRun`]: a version's redirects on one day, appended to one list when the version's day
//!   changes, and put in order per version and day at the end ([`days_of_versions`]).
//! - [`Sighting`]: a visitor seen on one version of one link, and how ([`Seen`]). Distinct
//!   visitors are not counted as lines come (that is a set per link and version, looked up at
//!   random for every line) but at the end, over the sightings sorted, where a visitor's
//!   sightings are next to each other: each link apart, links side by side ([`LinkCounts`]).
//! - [`Visitor`]: a tracking ID packed losslessly into 128 bits: visitors are counted exactly.
//! - `Combos` (in `combos`): with `--by`, each line's values (one per breakdown, each numbered in
//!   `Values`) as one number: a line costs one more lookup and its sighting one more number,
//!   whatever the number of breakdowns. Redirects per version and combination are appended
//!   ([`Runs`]); each value's redirects and visitors are counted from the combinations at the
//!   end ([`LinkCounts`]).
//!
//! The plain model in [`model`](super::model) counts the same things the obvious way; property
//! tests check that this engine's reports are identical to its.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::LazyLock;

use rayon::iter::{IntoParallelIterator, ParallelIterator};
use rayon::slice::ParallelSliceMut;

use super::breakdown::{self, Agent, Breakdown, Breakdowns, GeoIpError};
use super::combos::{Combos, Values, MAX_BREAKDOWNS, NO_COMBO};
use super::line::{self, Day, Line, Malformed, Stamp};
use super::tally::{DayCount, LinkTally, Sample, Seen, Stats, Tally, ValueCount, Version, Visitors, SAMPLES};
use super::Options;
use crate::domain::LinkId;

type Map<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// What one thread has counted from the pieces it read.
pub struct Partial {
    lines: u64,
    in_range: u64,
    malformed: u64,
    /// Responses by status, at index status - 100 (statuses are 100 to 599).
    statuses: Vec<u64>,
    not_found: Map<Box<[u8]>, u64>,
    versions: Versions,
    /// Redirects of days that ended, in the order they ended.
    day_runs: Vec<DayRun>,
    sightings: Sightings,
    samples: Vec<Sample>,
    piece_lines: Vec<(usize, u64)>,
    agents: AgentCache,
    /// With `--by`: the values seen, their combinations, and redirects per version and
    /// combination.
    values: Values,
    combos: Combos,
    combo_redirects: Runs,
    /// Countries by address as logged.
    countries: Map<Address, u32>,
    /// The number of each campaign breakdown's [`breakdown::NO_CAMPAIGN`], once known.
    no_campaign: [Option<u32>; MAX_BREAKDOWNS],
    /// The first lookup that failed (a damaged GeoIP database): the report fails with it.
    failure: Option<GeoIpError>,
}

/// The versions of links seen, and the links, each numbered in the order first seen.
#[derive(Default)]
struct Versions {
    counts: Map<VersionKey, VersionCount>,
    /// Each version's `Location`, by number.
    locations: Vec<Box<[u8]>>,
    /// Each link, by number.
    links: Vec<LinkId>,
    /// Each link's number.
    link_numbers: Map<LinkId, u32>,
}

impl Versions {
    /// The version `key`, redirecting to `location`, added (first seen `at`) when new.
    fn get(&mut self, key: VersionKey, location: &[u8], at: Stamp) -> &mut VersionCount {
        let Versions { counts, links, link_numbers, locations } = self;
        counts.entry(key).or_insert_with(|| {
            let link = *link_numbers.entry(key.link).or_insert_with(|| {
                links.push(key.link);
                links.len() as u32 - 1
            });
            locations.push(location.into());
            let number = locations.len() as u32 - 1;
            VersionCount { number, link, today: at.day(), first: at, last: at, today_redirects: [0; 2] }
        })
    }
}

/// A target version: its link, and a 64-bit digest of its `Location` standing for the bytes.
/// Two different `Location`s of one link would be counted as one version if their digests
/// were equal: for a link with a thousand versions, about one chance in 4 * 10^13.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct VersionKey {
    link: LinkId,
    location: u64,
}

impl VersionKey {
    fn new(link: LinkId, location: &[u8]) -> VersionKey {
        VersionKey { link, location: LOCATION_DIGEST.hash_one(location) }
    }
}

/// One fixed seed: every thread's digests of a `Location` must agree for partials to merge.
static LOCATION_DIGEST: LazyLock<foldhash::quality::FixedState> =
    LazyLock::new(|| foldhash::quality::FixedState::with_seed(0x636f_7563_686c_696e));

/// One target version of a link, as each of its lines changes it.
#[derive(Debug)]
struct VersionCount {
    /// Its number: its place in [`Versions::locations`].
    number: u32,
    /// Its link's number.
    link: u32,
    /// The day being counted: the latest line's.
    today: Day,
    first: Stamp,
    last: Stamp,
    /// Redirects on `today`, `[human, bot]`.
    today_redirects: [u64; 2],
}

/// A version's redirects on one day, `[human, bot]`, counted in one stretch of its lines.
/// Appended when the version's day changes (in a busy log of many links, about every third
/// line) rather than added to a list of days per version: that was a cache miss each time,
/// where appending writes one place in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct DayRun {
    version: u32,
    day: Day,
    redirects: [u64; 2],
}

/// A visitor seen on one version of one link (by their numbers in a [`Partial`]). Ordered by
/// link, then visitor, then version: sorted, a visitor's sightings on a link are one run, with
/// those on each version next to each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Sighting {
    link: u32,
    visitor: Visitor,
    version: u32,
    /// The line's values ([`Combos`]); always [`NO_COMBO`] without `--by`.
    combo: u32,
    seen: Seen,
}

/// A tracking ID (14 digits of issue second, 16 lowercase hex digits, checked when the line
/// was read) held losslessly as two numbers in one: the second (below 2^47) above the 64 bits
/// of hex. Equal exactly when the IDs are: nothing is hashed, and no two visitors are ever
/// counted as one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Visitor(u128);

impl Visitor {
    fn of(id: &[u8; 30]) -> Visitor {
        let (second, hex) = id.split_at(14);
        let second = second.iter().fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
        let hex = hex.iter().fold(0u64, |n, h| n << 4 | u64::from(if *h <= b'9' { h - b'0' } else { h - b'a' + 10 }));
        Visitor(u128::from(second) << 64 | u128::from(hex))
    }
}

impl Default for Partial {
    fn default() -> Partial {
        Partial {
            lines: 0,
            in_range: 0,
            malformed: 0,
            statuses: vec![0; 500],
            not_found: Map::default(),
            versions: Versions::default(),
            day_runs: Vec::new(),
            sightings: Sightings::default(),
            samples: Vec::new(),
            piece_lines: Vec::new(),
            agents: AgentCache::default(),
            values: Values::default(),
            combos: Combos::default(),
            combo_redirects: Runs::default(),
            countries: Map::default(),
            no_campaign: [None; MAX_BREAKDOWNS],
            failure: None,
        }
    }
}

impl Partial {
    /// Counts the lines of piece number `piece` through the returned counter.
    pub fn piece<'a>(&'a mut self, piece: usize, options: &'a Options) -> PieceCounter<'a> {
        PieceCounter { partial: self, options, piece, line: 0, samples: 0 }
    }

    /// Counts a redirect to `location` (of link `key.link`) at `at`, to a bot or not; returns
    /// the numbers of the link and the version.
    fn count(&mut self, key: VersionKey, location: &[u8], at: Stamp, bot: bool) -> (u32, u32) {
        let version = self.versions.get(key, location, at);
        version.count(at, bot, &mut self.day_runs);
        (version.link, version.number)
    }

    /// The combination of `line`'s values for `breakdowns` (not empty), whose User-Agent is
    /// `agent`.
    fn combo(&mut self, line: &Line<'_>, agent: AgentNumbers, breakdowns: &Breakdowns) -> Result<u32, GeoIpError> {
        let mut key = [u32::MAX; MAX_BREAKDOWNS];
        let campaign = breakdown::may_have_campaign(line.target, line.location)
            .then(|| breakdown::campaign(line.target, line.location));
        for (slot, &b) in key.iter_mut().zip(breakdowns.list()) {
            *slot = match b {
                Breakdown::Device => agent.device,
                Breakdown::Os => agent.os,
                Breakdown::Browser => agent.browser,
                Breakdown::Country => match Address::of(line.ip) {
                    Some(address) => match self.countries.get(&address) {
                        Some(&n) => n,
                        None => {
                            let n = self.values.number(b, breakdowns.country(line.ip)?);
                            if self.countries.len() >= CACHE {
                                self.countries.clear();
                            }
                            self.countries.insert(address, n);
                            n
                        }
                    },
                    None => self.values.number(b, breakdowns.country(line.ip)?),
                },
                utm => match &campaign {
                    Some(values) => self.values.number(utm, &values[utm as usize]),
                    None => *self.no_campaign[utm as usize].get_or_insert_with(|| {
                        let Partial { values, .. } = self;
                        values.number(utm, breakdown::NO_CAMPAIGN)
                    }),
                },
            };
        }
        Ok(self.combos.number(key))
    }

    /// The first failure met, which fails the report.
    pub fn failure(&mut self) -> Option<GeoIpError> {
        self.failure.take()
    }

    /// Ends the thread's counting: its sightings compacted on its own core, while other
    /// threads may still be reading.
    pub fn close(&mut self) {
        compact(&mut self.sightings.list);
        self.combo_redirects.compact();
    }

    /// All of `partials` in one (into the one with the most lines: its links, versions and
    /// sightings keep their numbers).
    pub fn merge_all(mut partials: Vec<Partial>) -> Partial {
        if partials.is_empty() {
            return Partial::default();
        }
        let largest = (0..partials.len()).max_by_key(|&i| partials[i].lines).unwrap_or(0);
        let mut all = partials.swap_remove(largest);
        for partial in partials {
            all.merge(partial);
        }
        all
    }

    /// Adds `other`'s counts to these.
    fn merge(&mut self, other: Partial) {
        self.lines += other.lines;
        self.in_range += other.in_range;
        self.malformed += other.malformed;
        for (ours, theirs) in self.statuses.iter_mut().zip(other.statuses) {
            *ours += theirs;
        }
        for (path, n) in other.not_found {
            *self.not_found.entry(path).or_default() += n;
        }
        // The numbers `other`'s versions (and so its links) have here, for its sightings and
        // days.
        let (mut their_versions, mut their_runs) = (other.versions, other.day_runs);
        let mut renumbered = vec![(0, 0); their_versions.locations.len()];
        end_days(their_versions.counts.values_mut(), &mut their_runs);
        for (key, theirs) in their_versions.counts {
            let ours = self.versions.get(key, &their_versions.locations[theirs.number as usize], theirs.first);
            ours.first = ours.first.min(theirs.first);
            ours.last = ours.last.max(theirs.last);
            renumbered[theirs.number as usize] = (ours.link, ours.number);
        }
        self.day_runs.extend(their_runs.into_iter().map(|r| DayRun { version: renumbered[r.version as usize].1, ..r }));
        // Their values and combinations, numbered here.
        let values: Vec<u32> = other.values.names.iter().map(|(b, v)| self.values.number(*b, v)).collect();
        let combos: Vec<u32> = other
            .combos
            .keys
            .iter()
            .map(|key| self.combos.number(key.map(|v| values.get(v as usize).copied().unwrap_or(u32::MAX))))
            .collect();
        self.combo_redirects.list.extend(other.combo_redirects.list.into_iter().map(|(key, n)| {
            let (version, combo) = Runs::split(key);
            (Runs::key(renumbered[version as usize].1, combos[combo as usize]), n)
        }));
        self.sightings.list.extend(other.sightings.list.into_iter().map(|s| {
            let (link, version) = renumbered[s.version as usize];
            Sighting { link, version, combo: combos[s.combo as usize], ..s }
        }));
        self.samples.extend(other.samples);
        self.piece_lines.extend(other.piece_lines);
    }

    /// The finished counts: distinct visitors counted, redirects summed from the days.
    pub fn finish(mut self) -> Tally {
        let mut sightings = self.sightings.list;
        sightings.par_sort_unstable();
        dedup(&mut sightings);
        let Versions { mut counts, locations, links, .. } = self.versions;
        end_days(counts.values_mut(), &mut self.day_runs);
        let days = days_of_versions(self.day_runs, locations.len());
        let mut versions: Vec<VersionCount> = counts.into_values().collect();
        versions.sort_unstable_by_key(|v| v.number);
        // Redirects per version and combination, in link order as the sightings are: each link
        // is then counted apart, side by side.
        let mut runs = self.combo_redirects.list;
        runs.par_sort_unstable_by_key(|(key, _)| *key);
        Runs::sum(&mut runs);
        let mut redirects: Vec<ComboRedirects> = runs
            .into_iter()
            .map(|(key, n)| {
                let (version, combo) = Runs::split(key);
                ComboRedirects { link: versions[version as usize].link, version, combo, n }
            })
            .collect();
        redirects.par_sort_unstable();
        let (values, combos) = (self.values, self.combos);
        let counted: Vec<LinkCounts> = (0..links.len() as u32)
            .into_par_iter()
            .map(|link| {
                let of = |l: u32| sightings.partition_point(|s| s.link < l);
                let sightings = &sightings[of(link)..of(link + 1)];
                let of = |l: u32| redirects.partition_point(|r| r.link < l);
                LinkCounts::count(sightings, &redirects[of(link)..of(link + 1)], &combos, &values)
            })
            .collect();
        drop(sightings);
        drop(redirects);
        let mut links: Vec<(LinkId, LinkTally)> = links.into_iter().map(|id| (id, LinkTally::default())).collect();
        let mut visitors: Vec<Visitors> = vec![Visitors::default(); locations.len()];
        let mut version_by: Vec<Vec<ValueCount>> = vec![Vec::new(); locations.len()];
        for (link, counted) in links.iter_mut().zip(counted) {
            link.1.total.visitors = counted.total;
            for (version, v) in counted.versions {
                visitors[version as usize] = v;
            }
            link.1.by = counted.by;
            for (version, by) in counted.version_by {
                version_by[version as usize] = by;
            }
        }
        for ((((version, location), days), visitors), by) in
            versions.into_iter().zip(locations).zip(days).zip(visitors).zip(version_by)
        {
            let (_, link) = &mut links[version.link as usize];
            let bot_redirects = days.iter().map(|d| d.bot).sum();
            let redirects = bot_redirects + days.iter().map(|d| d.human).sum::<u64>();
            link.total.redirects += redirects;
            link.total.bot_redirects += bot_redirects;
            let stats = Stats { redirects, bot_redirects, visitors };
            link.versions.push(Version { location, first: version.first, last: version.last, stats, days, by });
        }
        Tally {
            lines: self.lines,
            in_range: self.in_range,
            malformed: self.malformed,
            statuses: (100..).zip(self.statuses).filter(|(_, n)| *n > 0).collect(),
            not_found: self.not_found.into_iter().collect(),
            links,
            samples: self.samples,
            piece_lines: self.piece_lines,
        }
    }
}

impl VersionCount {
    /// Counts a redirect at `at`, to a bot or not; a day it ends goes to `runs`.
    fn count(&mut self, at: Stamp, bot: bool, runs: &mut Vec<DayRun>) {
        self.first = self.first.min(at);
        self.last = self.last.max(at);
        let day = at.day();
        if day != self.today {
            let redirects = std::mem::take(&mut self.today_redirects);
            runs.push(DayRun { version: self.number, day: self.today, redirects });
            self.today = day;
        }
        self.today_redirects[usize::from(bot)] += 1;
    }
}

/// Ends the day being counted of every version into `runs`.
fn end_days<'a>(versions: impl Iterator<Item = &'a mut VersionCount>, runs: &mut Vec<DayRun>) {
    for version in versions {
        let redirects = std::mem::take(&mut version.today_redirects);
        if redirects != [0; 2] {
            runs.push(DayRun { version: version.number, day: version.today, redirects });
        }
    }
}

/// Each of `versions` versions' redirects per day, in day order, from its runs.
fn days_of_versions(mut runs: Vec<DayRun>, versions: usize) -> Vec<Vec<DayCount>> {
    runs.par_sort_unstable_by_key(|r| (r.version, r.day));
    let mut days = vec![Vec::new(); versions];
    for version in runs.chunk_by(|a, b| a.version == b.version) {
        days[version[0].version as usize] = version
            .chunk_by(|a, b| a.day == b.day)
            .map(|day| DayCount {
                day: day[0].day,
                human: day.iter().map(|r| r.redirects[0]).sum(),
                bot: day.iter().map(|r| r.redirects[1]).sum(),
            })
            .collect();
    }
    days
}

/// The sightings a thread has appended, compacted ([`compact`]) each time they double, so that
/// memory grows with the visitors found rather than with the lines read.
struct Sightings {
    list: Vec<Sighting>,
    /// The length at which `list` is next compacted.
    compact_at: usize,
}

impl Default for Sightings {
    fn default() -> Sightings {
        Sightings { list: Vec::new(), compact_at: 1 << 20 }
    }
}

impl Sightings {
    fn push(&mut self, sighting: Sighting) {
        if self.list.capacity() == 0 {
            // All at once: growing by doubling copies the list each time. Pages the list does
            // not reach are never touched, and take no memory.
            self.list.reserve_exact(self.compact_at);
        }
        self.list.push(sighting);
        if self.list.len() >= self.compact_at {
            compact(&mut self.list);
            self.compact_at = self.compact_at.max(2 * self.list.len());
        }
    }
}

/// Sorts `sightings` and keeps one per link, visitor and version.
fn compact(sightings: &mut Vec<Sighting>) {
    sightings.sort_unstable();
    dedup(sightings);
}

/// Keeps one of each run of sorted sightings of a visitor on one version with one combination
/// of values, seen as all of the run were.
fn dedup(sightings: &mut Vec<Sighting>) {
    sightings.dedup_by(|later, kept| {
        let same = (later.link, later.visitor, later.version, later.combo)
            == (kept.link, kept.visitor, kept.version, kept.combo);
        if same {
            kept.seen = kept.seen.and(later.seen);
        }
        same
    });
}

/// Redirects per version and combination, appended as lines come and summed in sorted runs
/// whenever the list doubles: an increment in a map of a few hundred thousand entries was a
/// cache miss per line, where appending writes one place in order (as [`Sightings`]).
struct Runs {
    /// `(version << 32 | combination, redirects)`.
    list: Vec<(u64, u64)>,
    sum_at: usize,
}

impl Default for Runs {
    fn default() -> Runs {
        Runs { list: Vec::new(), sum_at: 1 << 16 }
    }
}

impl Runs {
    fn key(version: u32, combo: u32) -> u64 {
        u64::from(version) << 32 | u64::from(combo)
    }

    fn split(key: u64) -> (u32, u32) {
        ((key >> 32) as u32, key as u32)
    }

    fn add(&mut self, key: u64) {
        self.list.push((key, 1));
        if self.list.len() >= self.sum_at {
            self.compact();
            self.sum_at = self.sum_at.max(2 * self.list.len());
        }
    }

    /// Sorted, one entry per key.
    fn compact(&mut self) {
        self.list.sort_unstable_by_key(|(key, _)| *key);
        Runs::sum(&mut self.list);
    }

    /// One entry per key of the sorted `runs`, their redirects summed.
    fn sum(runs: &mut Vec<(u64, u64)>) {
        runs.dedup_by(|later, kept| {
            let same = later.0 == kept.0;
            if same {
                kept.1 += later.1;
            }
            same
        });
    }
}

/// A client address as logged, held in place (at most 39 bytes: the longest IPv6 text) for
/// the country cache: no pointer to follow to compare one, and words compared rather than a
/// call to compare bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Address([u64; 5]);

impl Address {
    fn of(ip: &[u8]) -> Option<Address> {
        let mut bytes = [0; 40];
        bytes.get_mut(..ip.len())?.copy_from_slice(ip);
        let word = |i: usize| u64::from_le_bytes(bytes[8 * i..8 * i + 8].try_into().unwrap_or_default());
        Some(Address([word(0), word(1), word(2), word(3), word(4)]))
    }
}

/// A version's redirects with one combination of values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct ComboRedirects {
    link: u32,
    version: u32,
    combo: u32,
    n: u64,
}

/// What one link's sightings and redirects (by combination) add up to: its distinct visitors
/// over all versions and per version, and its and each version's counts per value.
#[derive(Debug, Default, PartialEq, Eq)]
struct LinkCounts {
    total: Visitors,
    versions: Vec<(u32, Visitors)>,
    by: Vec<ValueCount>,
    version_by: Vec<(u32, Vec<ValueCount>)>,
}

impl LinkCounts {
    /// Counts one link's `sightings` (sorted and deduplicated) and `redirects`: a combination's
    /// redirects are its every value's; a visitor counts once per value it was seen with.
    fn count(sightings: &[Sighting], redirects: &[ComboRedirects], combos: &Combos, names: &Values) -> LinkCounts {
        let mut total = Visitors::default();
        let mut versions: Map<u32, Visitors> = Map::default();
        let mut values: Map<u32, (u64, u64)> = Map::default();
        let mut version_values: Map<(u32, u32), (u64, u64)> = Map::default();
        let mut seen = Vec::new();
        for visitor in sightings.chunk_by(|a, b| a.visitor == b.visitor) {
            total.add(visitor.iter().fold(Seen::default(), |seen, s| seen.and(s.seen)));
            for version in visitor.chunk_by(|a, b| a.version == b.version) {
                let number = version[0].version;
                versions
                    .entry(number)
                    .or_default()
                    .add(version.iter().fold(Seen::default(), |seen, s| seen.and(s.seen)));
                distinct_values(version, combos, &mut seen);
                for &value in &seen {
                    version_values.entry((number, value)).or_default().1 += 1;
                }
            }
            distinct_values(visitor, combos, &mut seen);
            for &value in &seen {
                values.entry(value).or_default().1 += 1;
            }
        }
        for r in redirects {
            for &value in combos.values(r.combo) {
                values.entry(value).or_default().0 += r.n;
                version_values.entry((r.version, value)).or_default().0 += r.n;
            }
        }
        let named = |value: u32, (redirects, visitors): (u64, u64)| {
            let (breakdown, name) = &names.names[value as usize];
            ValueCount { breakdown: *breakdown, value: name.clone(), redirects, visitors }
        };
        let mut version_by: Vec<(u32, Vec<ValueCount>)> = Vec::new();
        let mut version_values: Vec<((u32, u32), (u64, u64))> = version_values.into_iter().collect();
        version_values.sort_unstable_by_key(|((version, _), _)| *version);
        for one in version_values.chunk_by(|a, b| a.0 .0 == b.0 .0) {
            version_by.push((one[0].0 .0, one.iter().map(|&((_, value), counts)| named(value, counts)).collect()));
        }
        LinkCounts {
            total,
            versions: versions.into_iter().collect(),
            by: values.into_iter().map(|(value, counts)| named(value, counts)).collect(),
            version_by,
        }
    }
}

/// The values of `sightings`' combinations, each once, into `seen`.
fn distinct_values(sightings: &[Sighting], combos: &Combos, seen: &mut Vec<u32>) {
    seen.clear();
    for s in sightings.iter().filter(|s| s.combo != NO_COMBO) {
        seen.extend_from_slice(combos.values(s.combo));
    }
    seen.sort_unstable();
    seen.dedup();
}

/// Counts the lines of one piece into a partial.
pub struct PieceCounter<'a> {
    partial: &'a mut Partial,
    options: &'a Options,
    piece: usize,
    /// Lines so far.
    line: u64,
    /// Malformed lines kept so far.
    samples: usize,
}

impl PieceCounter<'_> {
    /// Counts one line (`terminated`: it ended with a newline).
    pub fn line(&mut self, bytes: &[u8], terminated: bool) {
        self.line += 1;
        let p = &mut *self.partial;
        p.lines += 1;
        let line = match if terminated { line::parse(bytes) } else { Err(Malformed::Unterminated) } {
            Ok(line) => line,
            Err(reason) => {
                p.malformed += 1;
                if self.samples < SAMPLES {
                    self.samples += 1;
                    p.samples.push(Sample::new(self.piece, self.line, reason, bytes));
                }
                return;
            }
        };
        if !self.options.includes(line.stamp) {
            return;
        }
        p.in_range += 1;
        p.statuses[usize::from(line.status - 100)] += 1;
        if line.status == 404 {
            match p.not_found.get_mut(line.path()) {
                Some(n) => *n += 1,
                None => drop(p.not_found.insert(line.path().into(), 1)),
            }
        }
        let (Some(location), Some(id)) = (line.location, line.link()) else { return };
        if !self.options.wants(id) {
            return;
        }
        let breakdowns = &*self.options.breakdowns;
        let agent = p.agents.get(line.user_agent, breakdowns.devices(), &mut p.values);
        let combo = if breakdowns.list().is_empty() {
            NO_COMBO
        } else {
            p.combo(&line, agent, breakdowns).unwrap_or_else(|e| {
                p.failure.get_or_insert(e);
                NO_COMBO
            })
        };
        // A version is what the link decided, not what the visitor added (the live counts' rule).
        let location = crate::resolve::logged_version(line.target, location);
        let (link, version) = p.count(VersionKey::new(id, &location), &location, line.stamp, agent.bot);
        if combo != NO_COMBO {
            p.combo_redirects.add(Runs::key(version, combo));
        }
        if let Some(id) = line.tracking {
            let seen = Seen::redirect(agent.bot, line.issued_tracking_id());
            p.sightings.push(Sighting { link, visitor: Visitor::of(id), version, combo, seen });
        }
    }

    /// Records how many lines the piece had.
    pub fn finish(self) {
        self.partial.piece_lines.push((self.piece, self.line));
    }
}

/// What a User-Agent counts as, by number: a bot's or not, and the numbers of its device and
/// OS values (`u32::MAX` without `--by device`).
#[derive(Debug, Clone, Copy)]
struct AgentNumbers {
    bot: bool,
    device: u32,
    os: u32,
    browser: u32,
}

/// [`Agent`]s per distinct User-Agent: a log repeats a few thousand User-Agents millions of
/// times, and the bot list and the User-Agent parser are large regular expressions.
#[derive(Default)]
struct AgentCache {
    known: Map<Box<[u8]>, AgentNumbers>,
}

/// Distinct User-Agents and addresses remembered before a cache starts over (bounds its memory
/// when every line has a new one).
const CACHE: usize = 1 << 16;

impl AgentCache {
    fn get(&mut self, encoded: &[u8], devices: bool, values: &mut Values) -> AgentNumbers {
        if let Some(&agent) = self.known.get(encoded) {
            return agent;
        }
        let agent = match Agent::of(encoded, devices) {
            Agent { bot, device, os, browser } if devices => AgentNumbers {
                bot,
                device: values.number(Breakdown::Device, device),
                os: values.number(Breakdown::Os, os),
                browser: values.number(Breakdown::Browser, browser),
            },
            Agent { bot, .. } => AgentNumbers { bot, device: u32::MAX, os: u32::MAX, browser: u32::MAX },
        };
        if self.known.len() >= CACHE {
            self.known.clear();
        }
        self.known.insert(encoded.into(), agent);
        agent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sighting(link: u32, visitor: u128, version: u32, seen: Seen) -> Sighting {
        Sighting { link, visitor: Visitor(visitor), version, combo: NO_COMBO, seen }
    }

    #[test]
    fn a_visitor_is_its_tracking_id_exactly() {
        let a = Visitor::of(b"20261122101733a3f9c1e2b7d4e601");
        assert_eq!(a.0, 20261122101733u128 << 64 | 0xa3f9c1e2b7d4e601);
        assert_eq!(Visitor::of(b"99999999999999ffffffffffffffff").0, 99999999999999u128 << 64 | u128::from(u64::MAX));
        // IDs one character apart, anywhere, are different visitors.
        let id = *b"20261122101733a3f9c1e2b7d4e601";
        for at in 0..30 {
            let mut other = id;
            other[at] = if id[at] == b'0' { b'1' } else { b'0' };
            assert_ne!(Visitor::of(&other), a, "{}", String::from_utf8_lossy(&other));
        }
    }

    #[test]
    fn compacting_keeps_one_sighting_per_link_visitor_and_version_seen_as_all_were() {
        let (human, bot, new) =
            (Seen::redirect(false, false), Seen::redirect(true, false), Seen::redirect(false, true));
        let mut list = vec![
            sighting(1, 7, 0, human),
            sighting(0, 7, 0, bot),
            sighting(1, 7, 0, new),
            sighting(1, 7, 1, bot),
            sighting(1, 8, 0, human),
            sighting(1, 7, 0, human),
        ];
        compact(&mut list);
        assert_eq!(
            list,
            [sighting(0, 7, 0, bot), sighting(1, 7, 0, new), sighting(1, 7, 1, bot), sighting(1, 8, 0, human)]
        );
    }

    #[test]
    fn sightings_are_compacted_when_they_reach_the_bound_and_the_bound_follows_what_is_kept() {
        let mut sightings = Sightings { list: Vec::new(), compact_at: 4 };
        for i in 0..20 {
            sightings.push(sighting(0, i % 3, 0, Seen::redirect(false, false)));
        }
        assert!(sightings.list.len() < 8, "{}", sightings.list.len());
        compact(&mut sightings.list);
        assert_eq!(sightings.list.len(), 3);
    }

    #[test]
    fn visitors_are_counted_per_link_once_and_per_version_and_value_once_each() {
        let (human, bot, new) =
            (Seen::redirect(false, false), Seen::redirect(true, false), Seen::redirect(false, true));
        let mut combos = Combos::default();
        let key = |values: &[u32]| {
            let mut key = [u32::MAX; MAX_BREAKDOWNS];
            key[..values.len()].copy_from_slice(values);
            key
        };
        // Two breakdowns: values 10 (the first's), 20 and 21 (the second's).
        let (a, b) = (combos.number(key(&[10, 20])), combos.number(key(&[10, 21])));
        // Versions 0 and 1 of one link: visitor 1 on both (new on the first, with another
        // value on the second), visitor 2 as a bot on the second.
        let with = |visitor: u128, version: u32, combo: u32, seen: Seen| Sighting {
            combo,
            ..sighting(0, visitor, version, seen)
        };
        let mut list = vec![with(1, 0, a, new), with(1, 1, b, human), with(2, 1, a, bot), with(2, 1, a, bot)];
        compact(&mut list);
        let redirect = |version: u32, combo: u32, n: u64| ComboRedirects { link: 0, version, combo, n };
        let mut names = Values::default();
        for value in 0..22 {
            names.number(Breakdown::ALL[usize::from(value >= 20)], &value.to_string());
        }
        let counted =
            LinkCounts::count(&list, &[redirect(0, a, 3), redirect(1, a, 2), redirect(1, b, 1)], &combos, &names);
        let numbers = |by: &[ValueCount]| -> Vec<(u32, u64, u64)> {
            let mut n: Vec<(u32, u64, u64)> =
                by.iter().map(|c| (c.value.parse().unwrap(), c.redirects, c.visitors)).collect();
            n.sort_unstable();
            n
        };
        let mut versions = counted.versions.clone();
        versions.sort_unstable_by_key(|(version, _)| *version);
        let mut version_by: Vec<_> = counted.version_by.iter().map(|(v, by)| (*v, numbers(by))).collect();
        version_by.sort_unstable();
        let v = |all, new, human, bot| Visitors { all, new, human, bot };
        assert_eq!(counted.total, v(2, 1, 1, 1));
        assert_eq!(versions, [(0, v(1, 1, 1, 0)), (1, v(2, 0, 1, 1))]);
        assert_eq!(numbers(&counted.by), [(10, 6, 2), (20, 5, 2), (21, 1, 1)]);
        assert_eq!(version_by, [(0, vec![(10, 3, 1), (20, 3, 1)]), (1, vec![(10, 3, 2), (20, 2, 1), (21, 1, 1)])]);
    }

    #[test]
    fn days_are_counted_in_runs_and_summed_in_day_order_whatever_order_lines_come_in() {
        let at = |s: &[u8]| Stamp::parse(s).unwrap();
        let first = at(b"20261122100000.0");
        let version =
            |number| VersionCount { number, link: 0, today: first.day(), first, last: first, today_redirects: [0; 2] };
        let mut versions = [version(0), version(1)];
        let mut runs = Vec::new();
        for (v, stamp, bot) in [
            (0, &b"20261122100000.0"[..], false),
            (1, b"20261122100000.0", false),
            (0, b"20261122110000.0", true),
            (0, b"20261123100000.0", false),
            (0, b"20261121100000.0", false),
            (0, b"20261122120000.0", false),
        ] {
            versions[v].count(at(stamp), bot, &mut runs);
        }
        assert_eq!(versions[0].today_redirects, [1, 0], "the latest line's day, not yet in a run");
        assert_eq!(runs.len(), 3);
        end_days(versions.iter_mut(), &mut runs);
        let days = days_of_versions(runs, 2);
        let shown = |days: &[DayCount]| -> Vec<(String, u64, u64)> {
            days.iter().map(|d| (d.day.to_string(), d.human, d.bot)).collect()
        };
        assert_eq!(
            shown(&days[0]),
            [("2026-11-21".into(), 1, 0), ("2026-11-22".into(), 2, 1), ("2026-11-23".into(), 1, 0)]
        );
        assert_eq!(shown(&days[1]), [("2026-11-22".into(), 1, 0)]);
        assert_eq!(
            (versions[0].first.to_string(), versions[0].last.to_string()),
            ("2026-11-21T10:00:00.0Z".into(), "2026-11-23T10:00:00.0Z".into())
        );
    }

    #[test]
    fn partials_renumber_the_links_and_versions_they_bring() {
        let options = Options::default();
        let line = |link: &str, visitor: char, target: &str| {
            let id = visitor.to_string().repeat(16);
            format!("20261122100001.0 ::1 20261122100000{id} - /{link} 302 https://e.x/{target}")
        };
        let count = |lines: &[String]| {
            let mut partial = Partial::default();
            let mut counter = partial.piece(0, &options);
            lines.iter().for_each(|l| counter.line(l.as_bytes(), true));
            counter.finish();
            partial
        };
        // The second partial sees the links in the other order, and a version the first lacks.
        let a = count(&[line("AAAAA", 'a', "one"), line("BBBBB", 'b', "one")]);
        let b = count(&[line("BBBBB", 'b', "two"), line("AAAAA", 'c', "one"), line("BBBBB", 'c', "one")]);
        let tally = Partial::merge_all(vec![a, b]).finish();
        // Each link's visitors, and each of its versions' as `location=visitors`.
        let mut seen: Vec<String> = tally
            .links
            .iter()
            .map(|(id, l)| {
                let mut versions: Vec<String> = l
                    .versions
                    .iter()
                    .map(|v| format!("{}={}", String::from_utf8_lossy(&v.location), v.stats.visitors.all))
                    .collect();
                versions.sort();
                format!("{id}: {} {}", l.total.visitors.all, versions.join(" "))
            })
            .collect();
        seen.sort();
        assert_eq!(seen, ["AAAAA: 2 https://e.x/one=2", "BBBBB: 2 https://e.x/one=2 https://e.x/two=1"]);
    }

    #[test]
    fn bots_by_the_maintained_list_and_no_user_agent() {
        const GOOGLEBOT: &[u8] =
            b"Mozilla%2F5.0%20(compatible%3B%20Googlebot%2F2.1%3B%20%2Bhttp%3A%2F%2Fwww.google.com%2Fbot.html)";
        const FIREFOX: &[u8] =
            b"Mozilla%2F5.0%20(X11%3B%20Linux%20x86_64%3B%20rv%3A120.0)%20Gecko%2F20100101%20Firefox%2F120.0";
        let mut cache = AgentCache::default();
        let mut values = Values::default();
        let mut is_bot = |ua: &[u8]| cache.get(ua, false, &mut values).bot;
        assert!(is_bot(GOOGLEBOT));
        assert!(is_bot(b"curl%2F8.5.0"));
        assert!(is_bot(b"-"));
        assert!(!is_bot(FIREFOX));
        assert!(!is_bot(FIREFOX), "from the cache");
        assert_eq!(cache.known.len(), 4);
    }
}
