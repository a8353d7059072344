//! The running log: lines gathered into batches on the serving threads, handed to a thread of
//! its own through a queue bounded in bytes, written there (or at once, with `sync`); what the
//! disk refuses waits, what does not fit is counted lost, and shutdown writes what is left.

use std::collections::VecDeque;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use time::OffsetDateTime;

use super::files::{probe_writable, DailyFiles};
use super::format::{format_line, Entry};

/// Why the access log could not be opened.
#[derive(Debug, thiserror::Error)]
#[error("cannot write the access log in {dir}")]
pub struct OpenError {
    dir: String,
    #[source]
    source: io::Error,
}

/// Lines are gathered into a batch for at most this long before going to the writer thread:
/// one hand-off (and one `write(2)`) per batch instead of per request.
pub const FLUSH_INTERVAL: Duration = Duration::from_millis(5);
/// A batch this large is handed off at once, by the request that filled it.
const MAX_BATCH: usize = 256 * 1024;
/// How much of the log may wait in memory for the disk by default
/// (`COUCHLINK_LOG_QUEUE_BYTES`): about a million lines, minutes of a busy proxy's traffic.
pub const DEFAULT_QUEUE_BYTES: usize = 256 << 20;
/// How often the writer tries again while the disk refuses a batch.
const RETRY: Duration = Duration::from_millis(100);
/// While the log cannot be written, a reminder at most this often.
const REMINDER: Duration = Duration::from_secs(60);

/// The running access log: cheap to share, one call per request.
#[derive(Clone)]
pub struct AccessLog {
    shared: Arc<Shared>,
}

struct Shared {
    dir: PathBuf,
    /// Lines not yet handed to the writer thread.
    batch: Mutex<Batch>,
    /// Buffers of batches written, kept for the next batches: a serving thread appending a
    /// line never grows a fresh buffer (nothing allocated per line, or per batch, on its way).
    spare: Mutex<Vec<Vec<u8>>>,
    /// Batches handed over, waiting for the disk.
    queue: Mutex<Queue>,
    /// Signalled when a batch is queued, or the log closes.
    ready: Condvar,
    /// At most this many bytes wait in `queue`; batches past it are lost, and counted.
    limit: usize,
    /// Each line written to its file before the request's response (`COUCHLINK_LOG_SYNC`).
    sync: bool,
    /// The files, written by the writer thread, and by requests themselves with `sync`.
    files: Mutex<DailyFiles>,
    counts: Counts,
    stop: AtomicBool,
}

/// Lines of one UTC day, in arrival order.
#[derive(Default)]
struct Batch {
    bytes: Vec<u8>,
    lines: u64,
    /// How many of its bytes are on disk already: a retry after a partial write goes on from
    /// there, so that no line is written twice.
    done: usize,
}

#[derive(Default)]
struct Queue {
    batches: VecDeque<Batch>,
    bytes: usize,
    /// No more batches are taken; the writer stops once the queue is empty.
    closed: bool,
    /// Shutdown ran out of time: the writer stops at once.
    abandoned: bool,
}

#[derive(Default)]
struct Counts {
    /// Lines written to the file.
    written: AtomicU64,
    /// Lines lost: handed over while the queue was full, or still queued when shutdown ran
    /// out of time.
    lost: AtomicU64,
    /// Bytes waiting in the queue.
    queued: AtomicU64,
    /// Since when the disk has been refusing the log, while it is.
    failing_since: Mutex<Option<OffsetDateTime>>,
}

/// The access log's state, for `/healthz` and `/metrics`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LogHealth {
    /// Lines written to disk since the start.
    pub lines_written: u64,
    /// Lines lost since the start.
    pub lines_lost: u64,
    /// Bytes waiting for the disk.
    pub queued_bytes: u64,
    /// Since when the disk has been refusing lines, while it is.
    pub failing_since: Option<OffsetDateTime>,
}

/// How the access log is written.
#[derive(Debug, Clone, Copy)]
pub struct LogOptions {
    /// Bytes that may wait in memory for the disk.
    pub queue_bytes: usize,
    /// Each line written to its file before the response is sent, not in batches: no line is
    /// lost when the process is killed, at the cost of a `write(2)` per request.
    pub sync: bool,
    /// How long lines gather before going to the writer thread (a batch that fills first goes
    /// at once): [`FLUSH_INTERVAL`] in a running proxy; `bench/budget.sh` sets it past its run, so
    /// that batches are handed over by size alone and the counts do not depend on timing.
    pub flush_interval: Duration,
}

impl Default for LogOptions {
    fn default() -> Self {
        LogOptions { queue_bytes: DEFAULT_QUEUE_BYTES, sync: false, flush_interval: FLUSH_INTERVAL }
    }
}

/// Held by whoever shuts down: writes every line before letting the process exit.
pub struct Flusher {
    log: AccessLog,
    ticker: std::thread::JoinHandle<()>,
    writer: std::thread::JoinHandle<()>,
}

impl AccessLog {
    /// Opens (creating it if need be) `dir`, writing to one `access.YYYY-MM-DD.log` file per
    /// UTC day. Fails at once, with the reason, when the directory is not writable.
    pub fn open(dir: &Path, options: LogOptions) -> Result<(AccessLog, Flusher), OpenError> {
        let err = |source| OpenError { dir: dir.display().to_string(), source };
        std::fs::create_dir_all(dir).map_err(err)?;
        probe_writable(dir).map_err(err)?;
        let log = AccessLog {
            shared: Arc::new(Shared {
                dir: dir.to_owned(),
                batch: Mutex::default(),
                spare: Mutex::default(),
                queue: Mutex::default(),
                ready: Condvar::new(),
                limit: options.queue_bytes,
                sync: options.sync,
                files: Mutex::new(DailyFiles::new(dir.to_owned())),
                counts: Counts::default(),
                stop: AtomicBool::new(false),
            }),
        };
        let writing = log.clone();
        let writer = std::thread::Builder::new()
            .name("couchlink-access-log".into())
            .spawn(move || writing.write_queued())
            .map_err(err)?;
        let ticking = log.clone();
        let interval = options.flush_interval;
        let ticker = std::thread::Builder::new()
            .name("couchlink-log-flush".into())
            .spawn(move || {
                // Slept in steps of at most FLUSH_INTERVAL, so that a stop is seen as soon.
                let mut slept = Duration::ZERO;
                while !ticking.shared.stop.load(Ordering::Acquire) {
                    std::thread::sleep(FLUSH_INTERVAL.min(interval));
                    slept += FLUSH_INTERVAL.min(interval);
                    if slept >= interval {
                        ticking.flush();
                        slept = Duration::ZERO;
                    }
                }
            })
            .map_err(err)?;
        Ok((log.clone(), Flusher { log, ticker, writer }))
    }

    /// Records one request. Never blocks on a disk that refuses the log: a line that finds the
    /// queue full is lost, and counted.
    pub fn write(&self, entry: &Entry<'_>) {
        thread_local! {
            // Each thread formats its lines in one buffer of its own: nothing allocated per line.
            static LINE: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(Vec::with_capacity(512));
        }
        LINE.with_borrow_mut(|line| {
            line.clear();
            format_line(entry, line);
            if !(self.shared.sync && self.write_now(line)) {
                self.append(line);
            }
        });
    }

    /// Writes `line` to its file at once (`sync`); false when lines are already waiting for the
    /// disk, which go first. A line the disk refuses waits in the queue like any other.
    fn write_now(&self, line: &[u8]) -> bool {
        let mut queue = self.shared.queue.lock().expect("log queue lock");
        if !queue.batches.is_empty() {
            return false;
        }
        let mut batch = Batch { bytes: line.to_vec(), lines: 1, done: 0 };
        if self.shared.files.lock().expect("log files lock").write_batch(&batch.bytes, &mut batch.done).is_ok() {
            self.shared.counts.written.fetch_add(1, Ordering::AcqRel);
        } else {
            self.shared.enqueue(&mut queue, batch);
        }
        true
    }

    /// Adds one formatted line to the batch, handing batches that are full or of an earlier
    /// day to the writer thread.
    fn append(&self, line: &[u8]) {
        let full = {
            let mut batch = self.shared.batch.lock().expect("log batch lock");
            // A batch holds one UTC day (the first 8 bytes of a line), so each line lands in
            // its own day's file even when it is written just after midnight.
            let new_day = batch.bytes.get(..8).is_some_and(|day| day != &line[..8]);
            let earlier = if new_day { Some(std::mem::replace(&mut *batch, self.shared.fresh())) } else { None };
            batch.bytes.extend_from_slice(line);
            batch.lines += 1;
            let full = (batch.bytes.len() >= MAX_BATCH).then(|| std::mem::replace(&mut *batch, self.shared.fresh()));
            [earlier, full]
        };
        for batch in full.into_iter().flatten() {
            self.send(batch);
        }
    }

    /// Hands the current batch to the writer thread, putting a fresh one in its place.
    fn flush(&self) {
        // Taken before the batch's lock, so that serving threads never wait on the allocator.
        let mut fresh = Some(self.shared.fresh());
        let taken = {
            let mut batch = self.shared.batch.lock().expect("log batch lock");
            (batch.lines > 0).then(|| std::mem::replace(&mut *batch, fresh.take().expect("not used yet")))
        };
        if let Some(unused) = fresh {
            self.shared.recycle(unused.bytes);
        }
        if let Some(batch) = taken {
            self.send(batch);
        }
    }

    /// Queues `batch` for the writer thread, or counts its lines lost when the queue is full.
    fn send(&self, batch: Batch) {
        let mut queue = self.shared.queue.lock().expect("log queue lock");
        self.shared.enqueue(&mut queue, batch);
    }

    /// The writer thread: writes queued batches in order, keeping a batch the disk refuses at
    /// the head of the queue and trying again until it is written.
    fn write_queued(&self) {
        let shared = &self.shared;
        let mut alarm = Alarm::default();
        loop {
            let mut batch = {
                let mut queue = shared.queue.lock().expect("log queue lock");
                loop {
                    if queue.abandoned {
                        // Shutdown gave up on the disk: what is left (a batch this thread had
                        // taken when it did, say) is lost, and counted.
                        let lines: u64 = queue.batches.drain(..).map(|b| b.lines).sum();
                        shared.counts.lost.fetch_add(lines, Ordering::AcqRel);
                        return;
                    }
                    if queue.closed && queue.batches.is_empty() {
                        return;
                    }
                    if let Some(batch) = queue.batches.pop_front() {
                        break batch;
                    }
                    queue = shared.ready.wait_timeout(queue, REMINDER).expect("log queue lock").0;
                }
            };
            let written = shared.files.lock().expect("log files lock").write_batch(&batch.bytes, &mut batch.done);
            let mut queue = shared.queue.lock().expect("log queue lock");
            match written {
                Ok(()) => {
                    queue.bytes -= batch.bytes.len();
                    shared.counts.queued.store(queue.bytes as u64, Ordering::Release);
                    drop(queue);
                    shared.counts.written.fetch_add(batch.lines, Ordering::AcqRel);
                    alarm.written(shared);
                    shared.recycle(batch.bytes);
                }
                Err(e) => {
                    queue.batches.push_front(batch);
                    drop(queue);
                    alarm.refused(shared, &e);
                    std::thread::sleep(RETRY);
                }
            }
        }
    }

    /// Lines written to the file so far.
    pub fn lines_written(&self) -> u64 {
        self.shared.counts.written.load(Ordering::Relaxed)
    }

    /// The log's state: lines written and lost, bytes waiting, whether the disk refuses it.
    pub fn health(&self) -> LogHealth {
        let counts = &self.shared.counts;
        LogHealth {
            lines_written: counts.written.load(Ordering::Acquire),
            lines_lost: counts.lost.load(Ordering::Acquire),
            queued_bytes: counts.queued.load(Ordering::Acquire),
            failing_since: *counts.failing_since.lock().expect("log state lock"),
        }
    }
}

/// A fresh batch's buffer, when no spare one is left: room for a full batch and its last line,
/// so that a batch never grows (a copy of all of it) on a serving thread. Pages not written are
/// never touched, so an idle log's buffers cost address space, not memory.
const FRESH_BATCH_BYTES: usize = MAX_BATCH + 64 * 1024;
/// Spare buffers kept, at most.
const SPARE_BATCHES: usize = 4;

impl Shared {
    /// An empty batch, in a spare buffer when there is one.
    fn fresh(&self) -> Batch {
        let bytes = self.spare.lock().expect("log spare lock").pop();
        Batch { bytes: bytes.unwrap_or_else(|| Vec::with_capacity(FRESH_BATCH_BYTES)), lines: 0, done: 0 }
    }

    /// Keeps a written (or unused) batch's buffer, emptied, for a later batch, while few are
    /// kept and it is not one a burst grew large.
    fn recycle(&self, mut bytes: Vec<u8>) {
        bytes.clear();
        let mut spare = self.spare.lock().expect("log spare lock");
        if spare.len() < SPARE_BATCHES && bytes.capacity() > 0 && bytes.capacity() <= 2 * MAX_BATCH {
            spare.push(bytes);
        }
    }

    /// Puts `batch` at the end of `queue` (this log's, locked), or counts its lines lost when
    /// it does not fit.
    fn enqueue(&self, queue: &mut Queue, batch: Batch) {
        if queue.closed || queue.bytes + batch.bytes.len() > self.limit {
            self.counts.lost.fetch_add(batch.lines, Ordering::AcqRel);
            return;
        }
        queue.bytes += batch.bytes.len();
        self.counts.queued.store(queue.bytes as u64, Ordering::Release);
        queue.batches.push_back(batch);
        self.ready.notify_one();
    }
}

/// What the writer thread says about a disk that refuses the log: one warning when it starts,
/// a reminder at most once a [`REMINDER`] while it lasts or lines are being lost, one when it
/// ends.
#[derive(Default)]
struct Alarm {
    last_said: Option<std::time::Instant>,
    /// Lines lost when last said.
    lost_then: u64,
}

impl Alarm {
    fn refused(&mut self, shared: &Shared, e: &io::Error) {
        let mut since = shared.counts.failing_since.lock().expect("log state lock");
        let lost = shared.counts.lost.load(Ordering::Acquire);
        if since.is_none() {
            *since = Some(OffsetDateTime::now_utc());
            tracing::warn!(
                "cannot write the access log in {}: {e}; lines wait in memory (up to {} bytes), then are counted as lost",
                shared.dir.display(),
                shared.limit
            );
            (self.last_said, self.lost_then) = (Some(std::time::Instant::now()), lost);
        } else if self.last_said.is_none_or(|t| t.elapsed() >= REMINDER) {
            tracing::warn!(
                "the access log in {} still cannot be written ({e}): {} lines lost so far, {} bytes waiting",
                shared.dir.display(),
                lost,
                shared.counts.queued.load(Ordering::Acquire)
            );
            (self.last_said, self.lost_then) = (Some(std::time::Instant::now()), lost);
        }
    }

    fn written(&mut self, shared: &Shared) {
        let mut since = shared.counts.failing_since.lock().expect("log state lock");
        let lost = shared.counts.lost.load(Ordering::Acquire);
        if let Some(start) = since.take() {
            tracing::warn!(
                "the access log in {} is written again, after {}: {} lines were lost meanwhile",
                shared.dir.display(),
                format!("{} s", (OffsetDateTime::now_utc() - start).whole_seconds()),
                lost - self.lost_then
            );
            (self.last_said, self.lost_then) = (None, lost);
        } else if lost > self.lost_then && self.last_said.is_none_or(|t| t.elapsed() >= REMINDER) {
            // The disk takes the lines, but not as fast as they come.
            tracing::warn!(
                "{} access log lines lost: the disk is slower than the traffic (COUCHLINK_LOG_QUEUE_BYTES is {})",
                lost - self.lost_then,
                shared.limit
            );
            (self.last_said, self.lost_then) = (Some(std::time::Instant::now()), lost);
        }
    }
}

impl Flusher {
    /// Hands over the last batch and waits until every line is in the file, or `timeout`
    /// passes (the lines still waiting are then counted as lost, and said so).
    pub async fn finish(self, timeout: Duration) {
        let shared = self.log.shared.clone();
        shared.stop.store(true, Ordering::Release);
        let _ = tokio::task::spawn_blocking(move || self.ticker.join()).await;
        self.log.flush();
        {
            let mut queue = shared.queue.lock().expect("log queue lock");
            queue.closed = true;
            shared.ready.notify_one();
        }
        let deadline = tokio::time::Instant::now() + timeout;
        while !self.writer.is_finished() {
            if tokio::time::Instant::now() >= deadline {
                let mut queue = shared.queue.lock().expect("log queue lock");
                queue.abandoned = true;
                let lines: u64 = queue.batches.drain(..).map(|b| b.lines).sum();
                shared.counts.lost.fetch_add(lines, Ordering::AcqRel);
                tracing::error!("the access log could not be written before shutdown: {lines} lines lost");
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(i: u32) -> Entry<'static> {
        Entry {
            time: OffsetDateTime::now_utc(),
            client: "203.0.113.7".parse().unwrap(),
            tracking: None,
            user_agent: None,
            target: b"/H83if",
            status: if i.is_multiple_of(2) { 302 } else { 404 },
            location: Some("https://example.com/"),
        }
    }

    /// Waits (up to 10 s) until `done` holds of the log's state.
    fn wait_for(log: &AccessLog, done: impl Fn(&LogHealth) -> bool) -> LogHealth {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let health = log.health();
            if done(&health) || std::time::Instant::now() > deadline {
                return health;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn lines_in(dir: &Path) -> usize {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|f| std::fs::read_to_string(f.unwrap().path()).unwrap().lines().count())
            .sum()
    }

    #[test]
    fn a_removed_log_folder_is_created_again_and_no_line_is_lost() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("logs");
        let (log, _flusher) = AccessLog::open(&dir, LogOptions::default()).unwrap();
        (0..10).for_each(|i| log.write(&entry(i)));
        assert_eq!(wait_for(&log, |h| h.lines_written == 10).lines_written, 10);
        // An operator's cleanup, while serving.
        std::fs::remove_dir_all(&dir).unwrap();
        (0..25).for_each(|i| log.write(&entry(i)));
        let health = wait_for(&log, |h| h.lines_written == 35);
        assert_eq!((health.lines_written, health.lines_lost, health.failing_since), (35, 0, None));
        assert_eq!(lines_in(&dir), 25, "the lines after the cleanup are in the folder made again");
    }

    #[test]
    fn a_refused_log_waits_in_a_bounded_queue_counts_what_it_loses_and_recovers() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("logs");
        let (log, _flusher) = AccessLog::open(&dir, LogOptions { queue_bytes: 4096, ..LogOptions::default() }).unwrap();
        log.write(&entry(0));
        wait_for(&log, |h| h.lines_written == 1);
        // The folder replaced by a file: every write fails (as on a full or failing disk).
        std::fs::remove_dir_all(&dir).unwrap();
        std::fs::write(&dir, "not a folder").unwrap();
        log.write(&entry(1));
        let failing = wait_for(&log, |h| h.failing_since.is_some());
        assert!(failing.failing_since.is_some(), "{failing:?}");
        // Small batches, one every 10 ms: some fit in the 4 KiB queue, the rest are lost.
        for round in 0..40 {
            (0..5).for_each(|i| log.write(&entry(round * 5 + i)));
            std::thread::sleep(Duration::from_millis(10));
        }
        let full = wait_for(&log, |h| h.lines_lost > 0);
        assert!(full.lines_lost > 0 && full.queued_bytes > 0 && full.queued_bytes <= 4096, "{full:?}");
        assert_eq!(full.lines_written, 1);
        // The disk back: what waited is written, and the log is well again.
        std::fs::remove_file(&dir).unwrap();
        let well = wait_for(&log, |h| h.failing_since.is_none() && h.queued_bytes == 0);
        assert_eq!((well.failing_since, well.queued_bytes), (None, 0), "{well:?}");
        assert_eq!(well.lines_written + well.lines_lost, 202, "every line written or counted lost: {well:?}");
        assert_eq!(lines_in(&dir) as u64, well.lines_written - 1);
    }

    #[tokio::test]
    async fn lines_the_disk_refuses_until_shutdown_gives_up_are_counted_lost() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("logs");
        let (log, flusher) = AccessLog::open(&dir, LogOptions::default()).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        std::fs::write(&dir, "not a folder").unwrap();
        (0..30).for_each(|i| log.write(&entry(i)));
        wait_for(&log, |h| h.failing_since.is_some());
        flusher.finish(Duration::from_millis(300)).await;
        // The writer thread may still hold a batch it took: it counts it once it sees the end.
        let health = wait_for(&log, |h| h.lines_lost == 30);
        assert_eq!((health.lines_written, health.lines_lost), (0, 30), "{health:?}");
    }
}
