//! The task that writes a links database's live counts: every interval it takes the
//! [`Tally`](super::Tally), turns it into documents ([`super::doc`]) and writes them, in order,
//! to the clicks database. What CouchDB cannot take waits in memory up to a bound, and is
//! written when it answers again; past the bound, counts are lost and counted
//! (docs/operations.md, "Faults"). A document CouchDB refuses for good (400, 403, 413) is set
//! aside, said once and counted, so that nothing a visitor sends can hold back the intervals
//! after it. At a stop it writes what is left.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use time::OffsetDateTime;
use tokio::sync::watch;

use super::doc::{documents, size_bound, Document, Writer, DEFAULT_MAX_DOCUMENT_SIZE};
use super::Tally;
use crate::couch::{CouchClient, CouchError};
use crate::errors::Causes;

/// How much of the counts may wait for CouchDB by default (`COUCHLINK_CLICKS_QUEUE_BYTES`):
/// a day of one-minute intervals of a proxy serving a few hundred links a minute.
pub const DEFAULT_QUEUE_BYTES: usize = 64 << 20;

/// Seconds per interval unless configured (`COUCHLINK_CLICKS_INTERVAL_SECS`).
pub const DEFAULT_INTERVAL_SECS: u32 = 60;

/// How long the serving threads are given to hand their counts over at the end of an interval
/// (each does within a few milliseconds; what comes later is taken with the next interval).
const HAND_OVER: Duration = Duration::from_millis(50);

/// How long a stop waits for CouchDB to take what is left.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// The state of a links database's counts, for `/healthz` and `/metrics`.
#[derive(Debug, Default)]
pub struct ClicksStatus {
    written: AtomicU64,
    pending: AtomicU64,
    pending_bytes: AtomicU64,
    lost: AtomicU64,
    set_aside: AtomicU64,
    /// Why the last write failed, while writes fail.
    failing: Mutex<Option<String>>,
}

impl ClicksStatus {
    /// Documents written since the start.
    pub fn written(&self) -> u64 {
        self.written.load(Relaxed)
    }

    /// Documents waiting for CouchDB, and their size in bytes.
    pub fn pending(&self) -> (u64, u64) {
        (self.pending.load(Relaxed), self.pending_bytes.load(Relaxed))
    }

    /// Responses whose counts were lost (the queue full, a stop that CouchDB did not answer, a
    /// document CouchDB refused for good).
    pub fn lost(&self) -> u64 {
        self.lost.load(Relaxed)
    }

    /// Documents CouchDB refused for good (their responses are in [`ClicksStatus::lost`]).
    pub fn set_aside(&self) -> u64 {
        self.set_aside.load(Relaxed)
    }

    /// Why writing fails, while it does.
    pub fn failing(&self) -> Option<String> {
        self.failing.lock().expect("clicks status lock").clone()
    }
}

/// One links database's counts and where they go.
pub struct ClicksWriter {
    /// The clicks database, as the proxy's account.
    pub couch: CouchClient,
    /// What the serving threads count.
    pub tally: Arc<Tally>,
    /// This process, as the documents name it.
    pub writer: Writer,
    /// Seconds per interval (1 to 3600), intervals starting at multiples of it in UTC.
    pub interval_secs: u32,
    /// Bytes of documents that may wait for CouchDB.
    pub queue_bytes: usize,
    /// What `/healthz` and `/metrics` show.
    pub status: Arc<ClicksStatus>,
    /// The visit limits, told what is written and read again after each interval's writes.
    pub limits: Arc<super::limits::Limits>,
}

/// Documents waiting for CouchDB, oldest first.
#[derive(Default)]
struct Queue {
    docs: VecDeque<Waiting>,
    bytes: usize,
}

/// A document waiting for CouchDB.
struct Waiting {
    doc: Document,
    /// Refused with `403` while a later document was taken: the refusal looks like the
    /// document's own, and is taken for it if the next try, an interval later, is refused too.
    suspect: bool,
}

impl Queue {
    /// Takes the document at `index` out of the queue.
    fn take(&mut self, index: usize) -> Document {
        let taken = self.docs.remove(index).expect("a queued document").doc;
        self.bytes -= taken.json.len();
        taken
    }
}

/// Documents refused with `403` tried past before the refusal is taken for the account's.
const LOOK_AHEAD: usize = 4;

impl ClicksWriter {
    /// Counts and writes until `stop` says so; then writes what is left (for at most
    /// [`STOP_TIMEOUT`]) and returns.
    pub async fn run(self, mut stop: watch::Receiver<bool>) {
        let mut queue = Queue::default();
        // What CouchDB accepts, when this account may read it (an admin); else its default.
        let max = self.couch.max_document_size().await.unwrap_or(DEFAULT_MAX_DOCUMENT_SIZE);
        let bound = size_bound(max);
        let mut start = self.interval_start(OffsetDateTime::now_utc());
        loop {
            let next = start + time::Duration::seconds(i64::from(self.interval_secs));
            let wait = (next - OffsetDateTime::now_utc()).try_into().unwrap_or(Duration::ZERO);
            let stopping = tokio::select! {
                _ = tokio::time::sleep(wait) => false,
                _ = stop.wait_for(|stop| *stop) => true,
            };
            // The serving threads hand over what they counted, then it is taken.
            self.tally.ask();
            tokio::time::sleep(HAND_OVER).await;
            self.close_interval(start, &mut queue, bound);
            if stopping {
                let written = tokio::time::timeout(STOP_TIMEOUT, self.write(&mut queue)).await;
                if written.is_err() || !queue.docs.is_empty() {
                    let lost: u64 = queue.docs.iter().map(|waiting| waiting.doc.responses).sum();
                    self.status.lost.fetch_add(lost, Relaxed);
                    tracing::warn!(
                        "the counts of {lost} responses could not be written to {} before the stop",
                        self.couch.database()
                    );
                }
                return;
            }
            self.write(&mut queue).await;
            // What was just written is in the view now, and in the limits' own account.
            self.limits.read_all().await;
            start = self.interval_start(OffsetDateTime::now_utc()).max(next);
        }
    }

    /// The start of the interval `now` is in.
    fn interval_start(&self, now: OffsetDateTime) -> OffsetDateTime {
        let secs = i64::from(self.interval_secs);
        let unix = now.unix_timestamp();
        OffsetDateTime::from_unix_timestamp(unix - unix.rem_euclid(secs)).unwrap_or(now)
    }

    /// Takes what was counted since the interval that began at `start` began, and queues it;
    /// what does not fit is lost, and counted.
    fn close_interval(&self, start: OffsetDateTime, queue: &mut Queue, bound: usize) {
        let counts = self.tally.take();
        for doc in documents(&self.writer, start, self.interval_secs, &counts, bound) {
            let size = doc.json.len();
            if queue.bytes + size > self.queue_bytes {
                let lost = doc.responses;
                let before = self.status.lost.fetch_add(lost, Relaxed);
                if before == 0 {
                    tracing::warn!(
                        "counts for {} wait for CouchDB beyond COUCHLINK_CLICKS_QUEUE_BYTES ({} bytes): counts are \
                         lost from now on, and counted in /metrics",
                        self.couch.database(),
                        self.queue_bytes
                    );
                }
                continue;
            }
            queue.bytes += size;
            queue.docs.push_back(Waiting { doc, suspect: false });
        }
        self.publish(queue);
    }

    /// Writes the queue in order, stopping at the first document CouchDB does not take yet.
    ///
    /// Written, now or by an earlier try whose answer was lost (a conflict): never twice.
    /// Refused for good (a document CouchDB will never take: `413` too large, `400` malformed,
    /// `403` from the validation): set aside, said and counted, so that it holds back no
    /// interval after it. A `403` may also be the account's (its proxy role taken away), which
    /// refuses every document alike: a refused document is passed over while a later one (of
    /// the next [`LOOK_AHEAD`]) is tried; once one is taken, the refusal looks like the
    /// document's own, and it is set aside if its next try, an interval later, is refused too.
    /// One look is not enough: an admin's fix of a validation function or a role can land
    /// between two tries of one round, the first document refused by the old function and the
    /// next taken by the new (seen on CouchDB 3.5 under load: an interval's counts lost right
    /// after the fix); a change reaching a database's shards a moment apart would do the same.
    /// While none
    /// is taken, they all wait, as does anything else (CouchDB away or failing, no clicks
    /// database yet), tried again next interval, in order: an admin's fix is all it takes.
    async fn write(&self, queue: &mut Queue) {
        // Documents at the front refused with 403 in this round, passed over.
        let mut held = 0;
        // The refusal of those no later document's taking has explained yet.
        let mut unexplained = None;
        while let Some(waiting) = queue.docs.get(held) {
            let suspect = waiting.suspect;
            match self.couch.create_doc_text(&waiting.doc.id, waiting.doc.json.clone()).await {
                Ok(_) => {
                    let doc = queue.take(held);
                    self.limits.written(&doc.json);
                    self.status.written.fetch_add(1, Relaxed);
                    self.recovered();
                    for passed_over in queue.docs.range_mut(..held) {
                        passed_over.suspect = true;
                    }
                    unexplained = None;
                }
                Err(e) if matches!(e.status(), Some(400 | 413)) || (suspect && e.status() == Some(403)) => {
                    let doc = queue.take(held);
                    self.set_aside(&doc, &e);
                }
                Err(e) if e.status() == Some(403) && held < LOOK_AHEAD => {
                    held += 1;
                    unexplained.get_or_insert(e);
                }
                Err(e) => {
                    self.failed(unexplained.as_ref().unwrap_or(&e));
                    break;
                }
            }
            self.publish(queue);
        }
        if let Some(e) = &unexplained {
            self.failed(e);
        }
        self.publish(queue);
    }

    /// Sets aside `doc`, which CouchDB refused for good (`why`): said once, and its responses
    /// counted lost.
    fn set_aside(&self, doc: &Document, why: &CouchError) {
        let lost = doc.responses;
        self.status.set_aside.fetch_add(1, Relaxed);
        self.status.lost.fetch_add(lost, Relaxed);
        tracing::warn!(
            "{} refused the counts document {} ({}): set aside, the counts of its {lost} responses lost and \
             counted in /metrics; later intervals are written",
            self.couch.database(),
            doc.id,
            Causes(why)
        );
    }

    fn publish(&self, queue: &Queue) {
        self.status.pending.store(queue.docs.len() as u64, Relaxed);
        self.status.pending_bytes.store(queue.bytes as u64, Relaxed);
    }

    fn failed(&self, error: &CouchError) {
        let why = Causes(error).to_string();
        let mut failing = self.status.failing.lock().expect("clicks status lock");
        if failing.is_none() {
            tracing::warn!(
                "cannot write counts to {} ({why}): they wait in memory (up to {} bytes) and are written when CouchDB \
                 takes them",
                self.couch.database(),
                self.queue_bytes
            );
        }
        *failing = Some(why);
    }

    fn recovered(&self) {
        if self.status.failing.lock().expect("clicks status lock").take().is_some() {
            tracing::info!("counts are written to {} again", self.couch.database());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_start_at_multiples_of_their_length() {
        let couch = CouchClient::new(&crate::couch::CouchConfig {
            url: "http://127.0.0.1:9".into(),
            user: None,
            password: None,
            password_file: None,
            db: "links_clicks".into(),
        })
        .unwrap();
        let writer = ClicksWriter {
            couch,
            tally: Arc::default(),
            writer: Writer::new("test"),
            interval_secs: 60,
            queue_bytes: 1 << 20,
            status: Arc::default(),
            limits: Arc::new(crate::clicks::limits::Limits::new(None)),
        };
        let now = time::macros::datetime!(2026-11-26 15:31:42.5 UTC);
        assert_eq!(writer.interval_start(now), time::macros::datetime!(2026-11-26 15:31:00 UTC));
    }
}
