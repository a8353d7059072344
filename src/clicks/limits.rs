//! Visit limits (docs/reference.md, "Visit limits"): whether a link with `max_visits` may
//! still redirect, from what every proxy counted (the clicks database's `by_link` view, read
//! when the link is first asked for and again after each interval's writes) and what this proxy
//! admitted since.
//!
//! A link's count is `view + admitted - written`: the view holds every proxy's written counts,
//! this proxy's included; `written` is what this proxy wrote of the link since it began to
//! watch it (read from the documents CouchDB acknowledged), so `view - written` is everyone
//! else's and this proxy's earlier counts, and `admitted` is this proxy's own, exact. Each
//! visit is admitted by one compare-and-swap against the limit, so one proxy never lets more
//! through, whatever its threads. Other proxies' visits are known as of their last interval
//! and this one's last read: with several proxies the overshoot is bounded by what the others
//! serve in one interval and a read (docs/benchmarks.md, "Visit limits").

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use super::doc::DESIGN_DOC;
use crate::couch::{CouchClient, ViewQuery};
use crate::domain::{LinkId, VisitLimit};

/// How long a link's first request waits for the view before it is admitted on this proxy's
/// own counts alone (a view still being indexed, CouchDB away); read again after the interval.
const FIRST_READ: Duration = Duration::from_secs(2);

/// The links with a limit this proxy has been asked for, per links database.
pub struct Limits {
    links: Mutex<HashMap<LinkId, Arc<Entry>>>,
    /// The clicks database, where every proxy's counts are (`None`: live counts are off, and
    /// a limit is counted from this proxy's start).
    couch: Option<CouchClient>,
}

/// One limited link's counts.
#[derive(Default)]
struct Entry {
    /// Visits this proxy admitted since it began to watch the link: people in the low 32 bits
    /// (at most the limit, under 2^30), bots in the high 32 (at most 2^31).
    admitted: AtomicU64,
    /// `view - written`, people and bots, as of the last read.
    base_people: AtomicI64,
    base_bots: AtomicI64,
    /// This proxy's written redirects of the link since it began to watch it: all, and bots.
    written_all: AtomicU64,
    written_bots: AtomicU64,
    /// Read once before the first visit is admitted.
    first_read: tokio::sync::OnceCell<()>,
}

const BOT: u64 = 1 << 32;

impl Entry {
    /// Counted visits, given `admitted` (packed) and whether bots count.
    fn counted(&self, admitted: u64, bots: bool) -> i64 {
        let (people, bot) = ((admitted & (BOT - 1)) as i64, (admitted >> 32) as i64);
        let mut n = self.base_people.load(Relaxed) + people;
        if bots {
            n += self.base_bots.load(Relaxed) + bot;
        }
        n
    }

    /// Sets the base from the view's totals (all redirects, bots' redirects).
    fn read(&self, all: u64, bots: u64) {
        let (written_all, written_bots) = (self.written_all.load(Relaxed), self.written_bots.load(Relaxed));
        let people = (all - bots.min(all)) as i64 - (written_all - written_bots.min(written_all)) as i64;
        self.base_people.store(people, Relaxed);
        self.base_bots.store(bots as i64 - written_bots as i64, Relaxed);
    }
}

impl Limits {
    /// Limits whose counts are in `couch`'s database (the clicks database), or this proxy's
    /// alone.
    pub fn new(couch: Option<CouchClient>) -> Limits {
        Limits { links: Mutex::default(), couch }
    }

    /// Whether link `id`, with `limit`, may redirect one more visitor (a bot when `bot`); if
    /// so, the visit is counted now. A bot, when bots do not count, is let through while the
    /// link has visits left and is not counted.
    pub async fn admit(&self, id: LinkId, limit: VisitLimit, bot: bool) -> bool {
        let entry = self.links.lock().expect("limits").entry(id).or_default().clone();
        entry
            .first_read
            .get_or_init(|| async {
                if let Ok(Some((all, bots))) = tokio::time::timeout(FIRST_READ, self.view(id)).await.unwrap_or(Ok(None))
                {
                    entry.read(all, bots);
                }
            })
            .await;
        let max = i64::from(limit.max);
        if bot && !limit.bots {
            // Not counted against the limit, but kept (should the document start counting
            // bots); turned away once the link's visits are used up, as everyone is.
            let admitted = entry.admitted.load(Relaxed);
            let open = entry.counted(admitted, false) < max;
            if open && admitted >> 32 < 1 << 31 {
                entry.admitted.fetch_add(BOT, Relaxed);
            }
            return open;
        }
        let mut admitted = entry.admitted.load(Relaxed);
        loop {
            if entry.counted(admitted, limit.bots) >= max {
                return false;
            }
            let next = admitted + if bot { BOT } else { 1 };
            match entry.admitted.compare_exchange_weak(admitted, next, Relaxed, Relaxed) {
                Ok(_) => return true,
                Err(now) => admitted = now,
            }
        }
    }

    /// Whether link `id`'s visits are known used up, as of its last read and what this proxy
    /// admitted since, asking nothing and counting nothing (`false` before it was first read).
    pub fn used_up(&self, id: LinkId, limit: VisitLimit) -> bool {
        let Some(entry) = self.links.lock().expect("limits").get(&id).cloned() else { return false };
        entry.first_read.initialized()
            && entry.counted(entry.admitted.load(Relaxed), limit.bots) >= i64::from(limit.max)
    }

    /// Gives back a visit of `id` that [`Limits::admit`] let through (a bot's when `bot`) and
    /// that ended in no redirect (a 404 for what followed the ID, CouchDB gone meanwhile): only
    /// redirects use up a link's visits, as the live counts count them.
    pub fn give_back(&self, id: LinkId, bot: bool) {
        let Some(entry) = self.links.lock().expect("limits").get(&id).cloned() else { return };
        let one = if bot { BOT } else { 1 };
        let _ = entry.admitted.fetch_update(Relaxed, Relaxed, |n| {
            let (people, bots) = (n & (BOT - 1), n >> 32);
            let enough = if bot { bots >= 1 } else { people >= 1 };
            enough.then(|| n - one)
        });
    }

    /// Counted visits of `id` as this proxy knows them (`None`: never asked for here).
    pub fn counted(&self, id: LinkId, bots: bool) -> Option<i64> {
        let entry = self.links.lock().expect("limits").get(&id)?.clone();
        Some(entry.counted(entry.admitted.load(Relaxed), bots))
    }

    /// Notes what a clicks document CouchDB has just acknowledged holds of the watched links.
    pub fn written(&self, doc_json: &str) {
        #[derive(Deserialize)]
        struct Doc<'a> {
            #[serde(borrow)]
            links: HashMap<&'a str, &'a RawValue>,
        }
        #[derive(Deserialize)]
        struct Counts {
            redirects: u64,
            bot_redirects: u64,
        }
        let watched: Vec<(LinkId, Arc<Entry>)> =
            self.links.lock().expect("limits").iter().map(|(id, e)| (*id, e.clone())).collect();
        if watched.is_empty() {
            return;
        }
        let Ok(doc) = serde_json::from_str::<Doc<'_>>(doc_json) else { return };
        for (id, entry) in watched {
            if let Some(Ok(c)) = doc.links.get(id.as_str()).map(|raw| serde_json::from_str::<Counts>(raw.get())) {
                entry.written_all.fetch_add(c.redirects, Relaxed);
                entry.written_bots.fetch_add(c.bot_redirects, Relaxed);
            }
        }
    }

    /// Reads every watched link's count from the view again: called by the writer after its
    /// writes, so that what it wrote is in both the view and `written`.
    pub async fn read_all(&self) {
        let watched: Vec<(LinkId, Arc<Entry>)> =
            self.links.lock().expect("limits").iter().map(|(id, e)| (*id, e.clone())).collect();
        for (id, entry) in watched {
            match self.view(id).await {
                Ok(Some((all, bots))) => entry.read(all, bots),
                Ok(None) => {}
                Err(e) => {
                    tracing::debug!("cannot read link {id}'s visits: {e}");
                    return;
                }
            }
        }
    }

    /// The view's totals of `id`: all redirects, bots' redirects (`Ok(None)`: no clicks
    /// database).
    async fn view(&self, id: LinkId) -> Result<Option<(u64, u64)>, crate::couch::CouchError> {
        let Some(couch) = &self.couch else { return Ok(None) };
        let query = ViewQuery {
            group_level: Some(1),
            start_key: json!([id.as_str()]),
            end_key: json!([id.as_str(), {}]),
            limit: None,
        };
        let rows = couch.view(DESIGN_DOC, "by_link", &query).await?;
        let value = rows.first().map(|(_, v)| v.clone()).unwrap_or(Value::Null);
        Ok(Some((value[0].as_u64().unwrap_or(0), value[1].as_u64().unwrap_or(0))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(max: u32, bots: bool) -> VisitLimit {
        VisitLimit { max, bots }
    }

    #[tokio::test]
    async fn one_proxy_admits_exactly_the_limit_whatever_its_threads() {
        let limits = Arc::new(Limits::new(None));
        let id = LinkId::parse("Coupn").unwrap();
        let mut tasks = Vec::new();
        for _ in 0..8 {
            let limits = limits.clone();
            tasks.push(tokio::spawn(async move {
                let mut n = 0;
                for _ in 0..200 {
                    n += u32::from(limits.admit(id, limit(500, false), false).await);
                }
                n
            }));
        }
        let mut admitted = 0;
        for task in tasks {
            admitted += task.await.unwrap();
        }
        assert_eq!(admitted, 500);
        assert_eq!(limits.counted(id, false), Some(500));
    }

    #[tokio::test]
    async fn bots_count_or_pass_as_the_document_says() {
        let limits = Limits::new(None);
        let id = LinkId::parse("Bots1").unwrap();
        assert!(limits.admit(id, limit(2, false), true).await);
        assert!(limits.admit(id, limit(2, false), true).await);
        assert!(limits.admit(id, limit(2, false), false).await);
        assert!(limits.admit(id, limit(2, false), false).await);
        // Used up: a bot is turned away too (the link acts as expired for everyone).
        assert!(!limits.admit(id, limit(2, false), true).await);
        assert!(!limits.admit(id, limit(2, false), false).await);
        let id = LinkId::parse("Bots2").unwrap();
        assert!(limits.admit(id, limit(2, true), true).await);
        assert!(limits.admit(id, limit(2, true), false).await);
        assert!(!limits.admit(id, limit(2, true), true).await);
    }

    #[tokio::test]
    async fn the_view_and_what_this_proxy_wrote_add_up_without_counting_twice() {
        let limits = Limits::new(None);
        let id = LinkId::parse("Mixed").unwrap();
        for _ in 0..3 {
            assert!(limits.admit(id, limit(10, false), false).await);
        }
        assert!(limits.admit(id, limit(10, false), true).await);
        // This proxy writes its 4 redirects (1 a bot's); the view then holds them beside 6 of
        // another proxy's (or of this one's earlier runs).
        limits.written(r#"{"type":"clicks","links":{"Mixed":{"redirects":4,"bot_redirects":1,"new_visitors":0},"Other":{"redirects":9,"bot_redirects":0}}}"#);
        let entry = limits.links.lock().unwrap()[&id].clone();
        entry.read(4 + 6, 1);
        assert_eq!(limits.counted(id, false), Some(3 + 6));
        assert_eq!(limits.counted(id, true), Some(4 + 6));
        assert!(limits.admit(id, limit(10, false), false).await);
        assert!(!limits.admit(id, limit(10, false), false).await);
        assert!(!limits.admit(id, limit(10, false), true).await, "used up: bots are turned away too");
        // A document that names no watched link changes nothing.
        limits.written(r#"{"type":"clicks","links":{"Other":{"redirects":9,"bot_redirects":0}}}"#);
        entry.read(4 + 6, 1);
        assert_eq!(limits.counted(id, false), Some(10));
    }
}
