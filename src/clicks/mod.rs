//! Live counts (docs/reference.md, "Live counts"): what each proxy served, added up per link in
//! memory and written to the links database's clicks database once per interval, where a view
//! with CouchDB's built-in `_sum` adds up every proxy.
//!
//! - [`Tally`]: the counting itself, on the redirect path: each thread counts in its own
//!   memory, with no lock, and hands its counts over once an interval.
//! - [`by`]: what a link's redirects are broken down by (country, device, campaign, ...).
//! - [`top`]: the values visitors send, counted so that the most frequent are kept.
//! - [`doc`]: the documents an interval's counts become, and the clicks database's design.
//! - [`limits`]: visit limits, from what every proxy counted and what this one admitted.
//! - [`writer`]: the task that takes the tally every interval and writes it, keeping what
//!   CouchDB could not take (up to a bound) for later.
//! - [`rollup`]: old intervals rolled up into daily documents, by an admin.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use crate::domain::LinkId;

pub mod by;
pub mod doc;
pub mod limits;
pub mod rollup;
pub mod top;
pub mod writer;

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

/// The counts of one links database since they were last taken.
///
/// Each thread counts in a memory of its own ([`HELD`]): a request's count takes no lock and
/// touches no line another thread writes. A thread hands its counts over when asked
/// ([`Tally::ask`], once an interval: a serving thread's [`Tally::hand_over_when_asked`]
/// task wakes for it), when it ends, and, for the thread that takes them, at [`Tally::take`].
#[derive(Clone, Default)]
pub struct Tally {
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Shared {
    /// What threads handed over since the last take.
    handed: Mutex<Counts>,
    /// How many times the counts were asked for: a serving thread's task hands over at each.
    asked: watch::Sender<u64>,
}

/// One thread's counts of one tally, not handed over yet.
struct Held {
    shared: Arc<Shared>,
    counts: Counts,
}

impl Held {
    fn hand_over(&mut self) {
        if self.counts.is_empty() {
            return;
        }
        let counts = std::mem::take(&mut self.counts);
        let mut handed = self.shared.handed.lock().unwrap_or_else(|e| e.into_inner());
        if handed.is_empty() {
            *handed = counts;
        } else {
            handed.merge(counts);
        }
    }
}

impl Drop for Held {
    /// A thread that ends hands over what it counted: nothing counted is lost with it.
    fn drop(&mut self) {
        self.hand_over();
    }
}

thread_local! {
    /// This thread's counts, per tally (a proxy has one per links database: a handful).
    static HELD: RefCell<Vec<Held>> = const { RefCell::new(Vec::new()) };
}

impl Tally {
    /// Counts one response, in this thread's own counts.
    pub fn record(&self, click: Click<'_>) {
        HELD.with_borrow_mut(|held| {
            let at = match held.iter().position(|h| Arc::ptr_eq(&h.shared, &self.shared)) {
                Some(at) => at,
                None => {
                    held.push(Held { shared: self.shared.clone(), counts: Counts::default() });
                    held.len() - 1
                }
            };
            held[at].counts.add(click);
        });
    }

    /// Asks every serving thread to hand its counts over ([`Tally::hand_over_when_asked`]);
    /// they do within a few milliseconds, busy or idle. What a thread hands over late is taken
    /// by the next [`Tally::take`]: never lost, never counted twice.
    pub fn ask(&self) {
        self.shared.asked.send_modify(|n| *n += 1);
    }

    /// Hands this thread's counts over.
    pub fn hand_over(&self) {
        HELD.with_borrow_mut(|held| {
            if let Some(h) = held.iter_mut().find(|h| Arc::ptr_eq(&h.shared, &self.shared)) {
                h.hand_over();
            }
        });
    }

    /// Hands this thread's counts over each time they are asked for. Run by each serving
    /// thread, as a task of its own (the thread it runs on is the one whose counts it hands
    /// over: couchlink's serving threads each run a current-thread runtime; on a multi-threaded
    /// one, a thread that runs no such task keeps its counts until it ends); it never ends by
    /// itself.
    pub fn hand_over_when_asked(self) -> impl std::future::Future<Output = ()> {
        // Asked from now on, before the task first runs.
        let mut asked = self.shared.asked.subscribe();
        async move {
            while asked.changed().await.is_ok() {
                self.hand_over();
            }
        }
    }

    /// Everything handed over since the last call and this thread's own counts, leaving them
    /// empty.
    pub fn take(&self) -> Counts {
        self.hand_over();
        std::mem::take(&mut *self.shared.handed.lock().unwrap_or_else(|e| e.into_inner()))
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
    fn a_thread_that_goes_on_serving_hands_its_counts_over_when_asked() {
        let tally = Tally::default();
        let (done, until) = tokio::sync::oneshot::channel::<()>();
        let (counted, is_counted) = std::sync::mpsc::channel();
        let serving = {
            let tally = tally.clone();
            std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
                runtime.block_on(async move {
                    let handing_over = tally.clone().hand_over_when_asked();
                    for _ in 0..5 {
                        tally.record(redirect("H83if", "https://a.example/", false, false));
                    }
                    counted.send(()).unwrap();
                    tokio::select! {
                        _ = handing_over => unreachable!("it never ends by itself"),
                        _ = until => {}
                    }
                });
            })
        };
        is_counted.recv().unwrap();
        assert!(tally.take().is_empty(), "not handed over before it is asked for");
        tally.ask();
        let began = std::time::Instant::now();
        let mut taken = tally.take();
        while taken.is_empty() && began.elapsed() < std::time::Duration::from_secs(10) {
            std::thread::sleep(std::time::Duration::from_millis(1));
            taken = tally.take();
        }
        assert_eq!(taken.links[&id("H83if")].redirects, 5, "handed over while the thread goes on");
        done.send(()).unwrap();
        serving.join().unwrap();
        assert!(tally.take().is_empty(), "nothing handed over twice");
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
