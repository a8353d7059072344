//! Live counts (docs/reference.md, "Live counts"): what each proxy served, added up per link in
//! memory and written to the links database's clicks database once per interval, where a view
//! with CouchDB's built-in `_sum` adds up every proxy.
//!
//! - [`Tally`]: the counting itself, on the redirect path: one part per serving thread, so
//!   that counting takes no lock another thread holds.
//! - [`by`]: what a link's redirects are broken down by (country, device, campaign, ...).
//! - [`doc`]: the documents an interval's counts become, and the clicks database's design.
//! - [`writer`]: the task that takes the tally every interval and writes it, keeping what
//!   CouchDB could not take (up to a bound) for later.
//! - [`rollup`]: old intervals rolled up into daily documents, by an admin.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::domain::LinkId;

pub mod by;
pub mod doc;
pub mod rollup;
pub mod writer;

/// The clicks database of links database `db` when none is named: `<db>_clicks`.
pub fn database_of(db: &str) -> String {
    format!("{db}_clicks")
}

/// Distinct versions counted per link and interval, at most: a link's versions are what it
/// decided (its `url` over time, its rules' targets and variants, its fallback), a handful,
/// never the visitor's own path or query. Past this, its redirects are counted under
/// [`OTHER_VERSIONS`].
pub const MAX_VERSIONS: usize = 32;

/// The version that stands for every version past [`MAX_VERSIONS`], so that a link's versions
/// always add up to its redirects. No target is spelt so (a target is `http...` or `/...`).
pub const OTHER_VERSIONS: &str = "(other)";

/// What one response counts as.
#[derive(Debug, Clone)]
pub enum Click<'a> {
    /// A 302 for the link whose ID the request's path begins with, to `location`.
    Redirect {
        /// The link.
        id: LinkId,
        /// What the link decided: its `url`, a rule's, a split's variant, or its fallback, as
        /// sent when nothing is merged into it (never the visitor's own path or query).
        version: &'a str,
        /// The User-Agent is on the bot list (or absent).
        bot: bool,
        /// The response issued a new tracking ID.
        new_visitor: bool,
        /// What the request says, for the breakdowns.
        seen: &'a by::Seen<'a>,
    },
    /// A 404 for a link the database has (inactive, expired, not started).
    NotFound(LinkId),
    /// A 404 for anything else (an unknown ID, a path that is none): one total, so that
    /// strangers' guesses make no keys.
    Unknown,
}

/// One link's counts over an interval.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct LinkCounts {
    /// Redirects.
    pub redirects: u64,
    /// Of which to a bot's User-Agent.
    pub bot_redirects: u64,
    /// Redirects that issued a new tracking ID.
    pub new_visitors: u64,
    /// 404s (the link exists, but does not work).
    pub not_found: u64,
    /// Redirects per version, at most [`MAX_VERSIONS`] of them and the rest under
    /// [`OTHER_VERSIONS`].
    pub versions: Values,
    /// Redirects per value of each breakdown.
    pub by: by::By,
}

/// A link's redirects per version (or per value of a breakdown): the first kept in place (most
/// links send everyone to one target an interval: one allocation, its text, per link and
/// interval), more in a list, and those past [`MAX_VERSIONS`] in one number.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Values {
    first: Option<(Box<str>, u64)>,
    more: Vec<(Box<str>, u64)>,
    other: u64,
}

impl Values {
    /// Counts `n` redirects to `location`; under [`OTHER_VERSIONS`] when [`MAX_VERSIONS`] others
    /// are counted already. Its place among the values counted by name, if it is one.
    pub(crate) fn add(&mut self, location: &str, n: u64) -> Option<usize> {
        if let Some(at) = self.place_of(location) {
            *self.count_at(at) += n;
            Some(at)
        } else if self.len() < MAX_VERSIONS && location != OTHER_VERSIONS {
            Some(self.push(location.into(), n))
        } else {
            self.other += n;
            None
        }
    }

    /// [`Values::add`] of a location already owned.
    fn add_owned(&mut self, location: Box<str>, n: u64) -> Option<usize> {
        if let Some(at) = self.place_of(&location) {
            *self.count_at(at) += n;
            Some(at)
        } else if self.len() < MAX_VERSIONS && &*location != OTHER_VERSIONS {
            Some(self.push(location, n))
        } else {
            self.other += n;
            None
        }
    }

    /// Adds `other`'s counts to these.
    pub(crate) fn merge(&mut self, other: &Values) {
        for (value, n) in other.first.iter().chain(&other.more) {
            self.add(value, *n);
        }
        self.other += other.other;
    }

    /// The value counted by name at `place` ([`Values::add`]'s answer).
    pub(crate) fn get(&self, place: usize) -> Option<&str> {
        match place {
            0 => self.first.as_ref().map(|(l, _)| &**l),
            n => self.more.get(n - 1).map(|(l, _)| &**l),
        }
    }

    fn place_of(&self, location: &str) -> Option<usize> {
        match &self.first {
            Some((l, _)) if **l == *location => Some(0),
            _ => self.more.iter().position(|(l, _)| **l == *location).map(|at| at + 1),
        }
    }

    fn count_at(&mut self, place: usize) -> &mut u64 {
        match place {
            0 => &mut self.first.as_mut().expect("a first value").1,
            n => &mut self.more[n - 1].1,
        }
    }

    fn push(&mut self, location: Box<str>, n: u64) -> usize {
        if self.first.is_none() {
            self.first = Some((location, n));
            0
        } else {
            self.more.push((location, n));
            self.more.len()
        }
    }

    /// Each version counted and its redirects, first seen first, then [`OTHER_VERSIONS`] if
    /// any.
    pub fn iter(&self) -> impl Iterator<Item = (&str, u64)> {
        let other = (self.other > 0).then_some((OTHER_VERSIONS, self.other));
        self.first.iter().chain(&self.more).map(|(l, n)| (&**l, *n)).chain(other)
    }

    /// How many versions are counted by name.
    pub fn len(&self) -> usize {
        usize::from(self.first.is_some()) + self.more.len()
    }

    /// Whether nothing is counted.
    pub fn is_empty(&self) -> bool {
        self.first.is_none() && self.other == 0
    }
}

/// Everything counted over an interval.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Counts {
    /// Per link.
    pub links: HashMap<LinkId, LinkCounts, foldhash::fast::RandomState>,
    /// 404s of anything but a known link.
    pub unknown_not_found: u64,
}

impl Counts {
    /// Whether nothing was counted.
    pub fn is_empty(&self) -> bool {
        self.links.is_empty() && self.unknown_not_found == 0
    }

    /// Redirects and 404s counted (what is lost when these counts are).
    pub fn responses(&self) -> u64 {
        self.unknown_not_found + self.links.values().map(|c| c.redirects + c.not_found).sum::<u64>()
    }

    fn add(&mut self, click: Click<'_>) {
        match click {
            Click::Redirect { id, version: location, bot, new_visitor, seen } => {
                let link = self.links.entry(id).or_default();
                link.redirects += 1;
                link.bot_redirects += u64::from(bot);
                link.new_visitors += u64::from(new_visitor);
                let version = link.versions.add(location, 1);
                link.by.add(seen, bot, version);
            }
            Click::NotFound(id) => self.links.entry(id).or_default().not_found += 1,
            Click::Unknown => self.unknown_not_found += 1,
        }
    }

    /// Adds `other` to these counts.
    pub fn merge(&mut self, other: Counts) {
        self.unknown_not_found += other.unknown_not_found;
        for (id, theirs) in other.links {
            let ours = self.links.entry(id).or_default();
            ours.redirects += theirs.redirects;
            ours.bot_redirects += theirs.bot_redirects;
            ours.new_visitors += theirs.new_visitors;
            ours.not_found += theirs.not_found;
            let Values { first, more, other } = theirs.versions;
            // Where each of their versions is among ours, for the breakdowns counted by version.
            let places: Vec<Option<usize>> =
                first.into_iter().chain(more).map(|(location, n)| ours.versions.add_owned(location, n)).collect();
            ours.versions.other += other;
            ours.by.merge(&theirs.by, &places);
        }
    }
}

/// Parts of a tally: serving threads beyond this share them.
const PARTS: usize = 16;

/// One serving thread's counts, on a cache line of its own (no other thread's counting writes
/// near it).
#[repr(align(128))]
#[derive(Default)]
struct Part(Mutex<Counts>);

/// The counts of one links database since they were last taken, kept per serving thread.
pub struct Tally {
    parts: Box<[Part]>,
}

impl Default for Tally {
    fn default() -> Self {
        Tally { parts: (0..PARTS).map(|_| Part::default()).collect() }
    }
}

/// Numbers threads as they first count, so that each takes a part of its own.
static THREADS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static THREAD: usize = THREADS.fetch_add(1, Ordering::Relaxed);
}

impl Tally {
    /// Counts one response, in this thread's part (whose lock only [`Tally::take`] ever
    /// contends, once an interval).
    pub fn record(&self, click: Click<'_>) {
        let part = THREAD.with(|n| *n) % self.parts.len();
        self.parts[part].0.lock().expect("tally lock").add(click);
    }

    /// Everything counted since the last call, leaving the tally empty.
    pub fn take(&self) -> Counts {
        let mut all = Counts::default();
        for part in self.parts.iter() {
            let counts = std::mem::take(&mut *part.0.lock().expect("tally lock"));
            if all.is_empty() {
                all = counts;
            } else {
                all.merge(counts);
            }
        }
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(s: &str) -> LinkId {
        LinkId::parse(s).unwrap()
    }

    fn redirect(link: &str, location: &'static str, bot: bool, new_visitor: bool) -> Click<'static> {
        Click::Redirect { id: id(link), version: location, bot, new_visitor, seen: &by::Seen::NOTHING }
    }

    #[test]
    fn responses_are_counted_per_link_and_version_and_taken_once() {
        let tally = Tally::default();
        tally.record(redirect("H83if", "https://a.example/", false, true));
        tally.record(redirect("H83if", "https://a.example/", true, false));
        tally.record(redirect("H83if", "https://b.example/", false, false));
        tally.record(Click::NotFound(id("Inact")));
        tally.record(Click::Unknown);
        tally.record(Click::Unknown);
        let counts = tally.take();
        assert_eq!(counts.unknown_not_found, 2);
        assert_eq!(counts.responses(), 6);
        let link = &counts.links[&id("H83if")];
        assert_eq!((link.redirects, link.bot_redirects, link.new_visitors, link.not_found), (3, 1, 1, 0));
        assert_eq!(link.versions.iter().collect::<Vec<_>>(), [("https://a.example/", 2), ("https://b.example/", 1)]);
        assert_eq!(counts.links[&id("Inact")].not_found, 1);
        assert!(tally.take().is_empty(), "taken once");
    }

    #[test]
    fn every_thread_counts_and_nothing_is_lost_between_takes() {
        let tally = std::sync::Arc::new(Tally::default());
        let threads: Vec<_> = (0..20)
            .map(|_| {
                let tally = tally.clone();
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        tally.record(redirect("H83if", "https://a.example/", false, false));
                    }
                })
            })
            .collect();
        let mut taken = Counts::default();
        while threads.iter().any(|t| !t.is_finished()) {
            taken.merge(tally.take());
        }
        threads.into_iter().for_each(|t| t.join().unwrap());
        taken.merge(tally.take());
        assert_eq!(taken.links[&id("H83if")].redirects, 20_000);
        assert_eq!(taken.links[&id("H83if")].versions.iter().collect::<Vec<_>>(), [("https://a.example/", 20_000)]);
    }

    #[test]
    fn versions_past_the_bound_are_counted_as_other_and_add_up_to_the_redirects() {
        let tally = Tally::default();
        let locations: Vec<String> = (0..MAX_VERSIONS + 5).map(|n| format!("https://a.example/{n}")).collect();
        for location in locations.iter().chain(&locations[MAX_VERSIONS..]) {
            tally.record(Click::Redirect {
                id: id("H83if"),
                version: location,
                bot: false,
                new_visitor: false,
                seen: &by::Seen::NOTHING,
            });
        }
        let mut counts = tally.take();
        let mut more = Counts::default();
        more.add(Click::Redirect {
            id: id("H83if"),
            version: "https://z.example/",
            bot: false,
            new_visitor: false,
            seen: &by::Seen::NOTHING,
        });
        more.add(Click::Redirect {
            id: id("H83if"),
            version: &locations[0],
            bot: false,
            new_visitor: false,
            seen: &by::Seen::NOTHING,
        });
        counts.merge(more);
        let link = &counts.links[&id("H83if")];
        assert_eq!(link.redirects as usize, MAX_VERSIONS + 12);
        assert_eq!(link.versions.len(), MAX_VERSIONS);
        let versions: Vec<_> = link.versions.iter().collect();
        assert_eq!(versions[0], (&*locations[0], 2));
        assert_eq!(versions.last(), Some(&(OTHER_VERSIONS, 11)));
        assert_eq!(versions.iter().map(|(_, n)| n).sum::<u64>(), link.redirects);
    }
}
