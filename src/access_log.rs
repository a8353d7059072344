//! The access log (docs/reference.md, "Access log"): one space-separated line per request, one file per
//! UTC day, written by a thread of its own from a queue bounded in bytes (docs/operations.md,
//! "Faults").

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::net::IpAddr;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use time::OffsetDateTime;

use crate::decimal::push_decimal;
use crate::domain::TrackingId;

/// What the User-Agent keeps unescaped: JavaScript's `encodeURIComponent` set, so the
/// documented example `Mozilla%2F5.0%20(X11%3B%20Linux)` comes out exactly.
const USER_AGENT_KEEPS: [bool; 256] = byte_table!(
    |b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'!' | b'~' | b'*' | b'\'' | b'(' | b')')
);

/// The request target and `Location` keep visible ASCII; everything else (space, controls,
/// bytes above 0x7E) becomes `%HH`.
const VISIBLE_ASCII_KEEPS: [bool; 256] = byte_table!(|b| matches!(b, 0x21..=0x7E));

/// How much of a refused request's target its log line keeps: an attacker's long targets must
/// not grow the log one to one.
pub const LOGGED_TARGET_BYTES: usize = 1024;

/// What the log keeps of `target`: all of it, or for one past [`LOGGED_TARGET_BYTES`] its
/// first bytes and `…` (`%E2%80%A6` in the log), the mark of a cut.
pub fn logged_target(target: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    if target.len() <= LOGGED_TARGET_BYTES {
        return target.into();
    }
    let mut cut = target[..LOGGED_TARGET_BYTES].to_vec();
    cut.extend_from_slice("…".as_bytes());
    cut.into()
}

/// One request as the log records it.
#[derive(Debug, Clone)]
pub struct Entry<'a> {
    /// When the request was answered.
    pub time: OffsetDateTime,
    /// The client (after trusted-proxy headers).
    pub client: IpAddr,
    /// The tracking ID set in the response; `None` when the client asked not to be tracked
    /// (logged as `-`).
    pub tracking: Option<&'a TrackingId>,
    /// The raw `User-Agent` header, if any.
    pub user_agent: Option<&'a [u8]>,
    /// The request target as received.
    pub target: &'a [u8],
    /// The response status.
    pub status: u16,
    /// The `Location` sent, for a 302.
    pub location: Option<&'a str>,
}

/// Appends `entry` as one log line (with its `\n`) to `out`: 6 fields, or 7 when the status is
/// 302, each non-empty and free of spaces, whatever the client sent.
pub fn format_line(entry: &Entry<'_>, out: &mut Vec<u8>) {
    out.extend_from_slice(&crate::domain::clock::compact_stamp(entry.time));
    out.extend_from_slice(&[b'.', b'0' + (entry.time.nanosecond() / 100_000_000) as u8, b' ']);
    // IPv4 clients on a dual-stack socket show up as ::ffff:a.b.c.d; log them as a.b.c.d.
    match entry.client.to_canonical() {
        IpAddr::V4(v4) => {
            let [a, b, c, d] = v4.octets();
            push_octet(out, a);
            for octet in [b, c, d] {
                out.push(b'.');
                push_octet(out, octet);
            }
        }
        v6 => {
            let _ = write!(out, "{v6}");
        }
    }
    out.push(b' ');
    out.extend_from_slice(entry.tracking.map_or(b"-".as_slice(), |t| t.as_bytes()));
    out.push(b' ');
    match entry.user_agent {
        Some(ua) if !ua.is_empty() => extend_user_agent(out, ua),
        _ => out.push(b'-'),
    }
    out.push(b' ');
    if entry.target.is_empty() {
        out.push(b'-');
    } else {
        extend_visible(out, entry.target);
    }
    out.push(b' ');
    match entry.status {
        // Every status answered is three digits: written without a loop.
        status @ 100..=999 => {
            let digits = [status / 100, status / 10 % 10, status % 10];
            out.extend_from_slice(&digits.map(|d| b'0' + d as u8));
        }
        status => push_decimal(out, status.into()),
    }
    if let (302, Some(location)) = (entry.status, entry.location) {
        out.push(b' ');
        extend_visible(out, location.as_bytes());
    }
    out.push(b'\n');
}

/// User-Agents kept encoded per thread, at most: real traffic repeats a few hundred, and a
/// browser's is a hundred bytes or more with a third of them escaped (a few thousand
/// instructions to encode, against a lookup).
const AGENTS_KEPT: usize = 512;
/// Longer User-Agents are encoded each time, not kept (they are rare, and the memory is bounded
/// by this times [`AGENTS_KEPT`]).
const AGENT_KEPT_BYTES: usize = 512;

/// User-Agents as received, and as logged.
type Agents = std::collections::HashMap<Box<[u8]>, Box<[u8]>, foldhash::fast::RandomState>;

thread_local! {
    /// This thread's [`Agents`]; emptied when full (simple, and rare).
    static AGENTS: std::cell::RefCell<Agents> = std::cell::RefCell::default();
}

/// Appends a User-Agent, percent-encoded: from this thread's memory of those it saw.
fn extend_user_agent(out: &mut Vec<u8>, ua: &[u8]) {
    if ua.len() > AGENT_KEPT_BYTES {
        return extend_encoded(out, ua, &USER_AGENT_KEEPS);
    }
    AGENTS.with_borrow_mut(|agents| {
        if let Some(encoded) = agents.get(ua) {
            return out.extend_from_slice(encoded);
        }
        let start = out.len();
        extend_encoded(out, ua, &USER_AGENT_KEEPS);
        if agents.len() >= AGENTS_KEPT {
            agents.clear();
        }
        agents.insert(ua.into(), out[start..].into());
    })
}

/// Appends `bytes` with everything but visible ASCII as `%HH`. A `Location` always is visible
/// ASCII (canonical, or checked by `safe_location`) and most targets are: that is checked in one
/// pass that compiles to vector instructions (no early exit), then copied at once.
fn extend_visible(out: &mut Vec<u8>, bytes: &[u8]) {
    if bytes.iter().fold(true, |visible, &b| visible & (b.wrapping_sub(0x21) < 0x5E)) {
        out.extend_from_slice(bytes);
    } else {
        extend_encoded(out, bytes, &VISIBLE_ASCII_KEEPS);
    }
}

/// Appends an address's octet in decimal, from a table (four per IPv4 line).
fn push_octet(out: &mut Vec<u8>, octet: u8) {
    const OCTETS: [([u8; 3], u8); 256] = {
        let mut table = [([0u8; 3], 0u8); 256];
        let mut n = 0;
        while n < 256 {
            let digits = [b'0' + (n / 100) as u8, b'0' + (n / 10 % 10) as u8, b'0' + (n % 10) as u8];
            let len = if n >= 100 {
                3
            } else if n >= 10 {
                2
            } else {
                1
            };
            let mut text = [0u8; 3];
            let mut i = 0;
            while i < len {
                text[i] = digits[3 - len + i];
                i += 1;
            }
            table[n] = (text, len as u8);
            n += 1;
        }
        table
    };
    let (text, len) = &OCTETS[usize::from(octet)];
    out.extend_from_slice(&text[..usize::from(*len)]);
}

/// Appends `bytes` with every byte `keeps` does not keep as `%HH` (upper-case hex, as the
/// percent-encoding crate writes it, which the tests hold this to): what is kept is copied a
/// run at a time, so a target with nothing to escape is one scan and one copy.
fn extend_encoded(out: &mut Vec<u8>, bytes: &[u8], keeps: &[bool; 256]) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut rest = bytes;
    loop {
        let run = rest.iter().position(|&b| !keeps[usize::from(b)]).unwrap_or(rest.len());
        out.extend_from_slice(&rest[..run]);
        let Some(&b) = rest.get(run) else { return };
        out.extend_from_slice(&[b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 0xf)]]);
        rest = &rest[run + 1..];
    }
}

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
                files: Mutex::new(DailyFiles { dir: dir.to_owned(), open: None }),
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
        if self.shared.files.lock().expect("log files lock").write_batch(&mut batch).is_ok() {
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
            let written = shared.files.lock().expect("log files lock").write_batch(&mut batch);
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

fn probe_writable(dir: &Path) -> io::Result<()> {
    let probe = dir.join(".couchlink-write-test");
    std::fs::write(&probe, b"")?;
    std::fs::remove_file(probe)
}

/// The files under the writer thread: one per UTC day, in a folder that an operator's cleanup
/// or a remounted volume may remove or replace while the proxy runs.
struct DailyFiles {
    dir: PathBuf,
    /// The day (`yyyymmdd`) whose file is open, the file, and its path.
    open: Option<([u8; 8], File, PathBuf)>,
}

impl DailyFiles {
    /// Writes what is left of `batch` to its day's file (the day of its first line).
    fn write_batch(&mut self, batch: &mut Batch) -> io::Result<()> {
        self.write_rest(batch)?;
        if !self.still_in_place() {
            // Removed or replaced while the batch was written: into a file nobody will read.
            // Written again where the log is now (at worst twice, once in the moved folder).
            batch.done = 0;
            self.write_rest(batch)?;
        }
        Ok(())
    }

    fn write_rest(&mut self, batch: &mut Batch) -> io::Result<()> {
        let day: [u8; 8] = batch.bytes.get(..8).and_then(|d| d.try_into().ok()).unwrap_or(*b"00000000");
        let file = self.file_for(day)?;
        while batch.done < batch.bytes.len() {
            match file.write(&batch.bytes[batch.done..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => batch.done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// The day's file, opened (and the folder created) if it is not open or no longer where
    /// the log is.
    fn file_for(&mut self, day: [u8; 8]) -> io::Result<&mut File> {
        if self.open.as_ref().is_some_and(|(open_day, _, _)| *open_day != day) || !self.still_in_place() {
            self.open = None;
        }
        if self.open.is_none() {
            let d = std::str::from_utf8(&day).unwrap_or("00000000");
            let path = self.dir.join(format!("access.{}-{}-{}.log", &d[..4], &d[4..6], &d[6..8]));
            if !self.dir.is_dir() {
                std::fs::create_dir_all(&self.dir)?;
                tracing::warn!("the access log folder {} was gone: created it again", self.dir.display());
            }
            let file = OpenOptions::new().create(true).append(true).open(&path)?;
            self.open = Some((day, file, path));
        }
        Ok(&mut self.open.as_mut().expect("just opened").1)
    }

    /// Whether the open file (if any) is still the file at its path.
    fn still_in_place(&self) -> bool {
        let Some((_, file, path)) = &self.open else { return true };
        match (file.metadata(), std::fs::metadata(path)) {
            (Ok(open), Ok(there)) => (open.dev(), open.ino()) == (there.dev(), there.ino()),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    fn line(entry: &Entry<'_>) -> String {
        let mut out = Vec::new();
        format_line(entry, &mut out);
        String::from_utf8(out).expect("log lines are ASCII")
    }

    fn tid() -> TrackingId {
        TrackingId::parse("20261122101733a3f9c1e2b7d4e601").unwrap()
    }

    #[test]
    fn documented_example_line() {
        let tid = tid();
        let entry = Entry {
            time: datetime!(2026-11-22 10:17:33.59 UTC),
            client: "203.0.113.7".parse().unwrap(),
            tracking: Some(&tid),
            user_agent: Some(b"Mozilla/5.0 (X11; Linux)"),
            target: b"/H83if",
            status: 302,
            location: Some("https://example.com/wp/?p=14"),
        };
        assert_eq!(
            line(&entry),
            "20261122101733.5 203.0.113.7 20261122101733a3f9c1e2b7d4e601 Mozilla%2F5.0%20(X11%3B%20Linux) /H83if 302 https://example.com/wp/?p=14\n"
        );
    }

    #[test]
    fn hostile_input_still_gives_six_space_free_fields_on_one_line() {
        let tid = tid();
        let entry = Entry {
            time: datetime!(2026-11-22 10:17:33 UTC),
            client: "::ffff:10.0.0.1".parse().unwrap(),
            tracking: Some(&tid),
            user_agent: Some(b"evil \"agent\"\r\n%0A\xff\xfe\x00"),
            target: b"/a b\"c\r\n%\xff",
            status: 404,
            location: Some("https://ignored.example/"),
        };
        let text = line(&entry);
        assert!(text.ends_with('\n') && text.matches('\n').count() == 1, "{text:?}");
        let fields: Vec<&str> = text.trim_end_matches('\n').split(' ').collect();
        assert_eq!(fields.len(), 6, "{text:?}");
        assert!(fields.iter().all(|f| !f.is_empty()));
        assert_eq!(fields[1], "10.0.0.1");
        assert_eq!(fields[3], "evil%20%22agent%22%0D%0A%250A%FF%FE%00");
        assert_eq!(fields[4], "/a%20b\"c%0D%0A%%FF");
    }

    #[test]
    fn missing_or_empty_user_agent_is_a_dash() {
        let tid = tid();
        let mut entry = Entry {
            time: datetime!(2026-11-22 10:17:33.05 UTC),
            client: "2001:db8::1".parse().unwrap(),
            tracking: Some(&tid),
            user_agent: None,
            target: b"/",
            status: 501,
            location: None,
        };
        assert_eq!(line(&entry), "20261122101733.0 2001:db8::1 20261122101733a3f9c1e2b7d4e601 - / 501\n");
        entry.user_agent = Some(b"");
        assert!(line(&entry).contains(" - / 501"));
    }

    #[test]
    fn location_field_only_on_302() {
        let tid = tid();
        let entry = Entry {
            time: datetime!(2026-11-22 10:17:33 UTC),
            client: "192.0.2.1".parse().unwrap(),
            tracking: Some(&tid),
            user_agent: None,
            target: b"/H83if",
            status: 302,
            location: Some("https://t.example/"),
        };
        assert_eq!(line(&entry).split(' ').count(), 7);
        let not_found = Entry { status: 404, ..entry };
        assert_eq!(line(&not_found).split(' ').count(), 6);
    }

    #[test]
    fn an_untracked_request_logs_a_dash_for_its_tracking_id() {
        let entry = Entry {
            time: datetime!(2026-11-22 10:17:33 UTC),
            client: "203.0.113.7".parse().unwrap(),
            tracking: None,
            user_agent: None,
            target: b"/Nopee",
            status: 404,
            location: None,
        };
        assert_eq!(line(&entry), "20261122101733.0 203.0.113.7 - - /Nopee 404\n");
    }

    /// The sets the percent-encoding crate is given, the oracle of the tables above.
    const USER_AGENT_SET: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'_')
        .remove(b'.')
        .remove(b'!')
        .remove(b'~')
        .remove(b'*')
        .remove(b'\'')
        .remove(b'(')
        .remove(b')');
    const VISIBLE_ASCII_SET: &percent_encoding::AsciiSet = &percent_encoding::CONTROLS.add(b' ');

    fn encoded(bytes: &[u8], keeps: &[bool; 256]) -> String {
        let mut out = Vec::new();
        extend_encoded(&mut out, bytes, keeps);
        String::from_utf8(out).expect("ASCII")
    }

    #[test]
    fn user_agents_remembered_are_logged_as_encoded_whatever_the_bound() {
        let agents: Vec<Vec<u8>> =
            (0..AGENTS_KEPT * 2 + 7).map(|n| format!("Mozilla/5.0 (agent {n}; x) é").into_bytes()).collect();
        for round in 0..3 {
            for ua in agents.iter().chain([&vec![b'x'; AGENT_KEPT_BYTES + 1]]) {
                let mut out = Vec::new();
                extend_user_agent(&mut out, ua);
                assert_eq!(out, encoded(ua, &USER_AGENT_KEEPS).into_bytes(), "round {round}");
            }
        }
        assert!(AGENTS.with_borrow(|agents| agents.len()) <= AGENTS_KEPT);
    }

    #[test]
    fn every_octet_is_written_as_decimal() {
        for octet in 0..=255u8 {
            let mut out = Vec::new();
            push_octet(&mut out, octet);
            assert_eq!(out, octet.to_string().as_bytes());
        }
    }

    proptest::proptest! {
        /// The table-driven encoding writes what the percent-encoding crate writes, byte for
        /// byte, for any input and both sets.
        #[test]
        fn encoding_agrees_with_the_percent_encoding_crate(
            bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..300),
            text in ".{0,100}",
        ) {
            for input in [&bytes[..], text.as_bytes()] {
                proptest::prop_assert_eq!(
                    encoded(input, &USER_AGENT_KEEPS),
                    percent_encoding::percent_encode(input, USER_AGENT_SET).to_string()
                );
                proptest::prop_assert_eq!(
                    encoded(input, &VISIBLE_ASCII_KEEPS),
                    percent_encoding::percent_encode(input, VISIBLE_ASCII_SET).to_string()
                );
                let mut visible = Vec::new();
                extend_visible(&mut visible, input);
                proptest::prop_assert_eq!(visible, encoded(input, &VISIBLE_ASCII_KEEPS).into_bytes());
            }
        }

        /// Whatever a client sends as User-Agent and target, and whatever the Location, a
        /// request is exactly one line of 6 (or 7, for a 302) non-empty, space-free fields of
        /// visible ASCII.
        #[test]
        fn any_bytes_make_one_well_formed_line(
            user_agent in proptest::option::of(proptest::collection::vec(proptest::num::u8::ANY, 0..300)),
            target in proptest::collection::vec(proptest::num::u8::ANY, 0..300),
            location in proptest::option::of(".{0,200}"),
            tracked in proptest::bool::ANY,
        ) {
            let tid = tid();
            let location = location.and_then(|l| crate::resolve::safe_location(&l));
            let status = if location.is_some() { 302 } else { 404 };
            let entry = Entry {
                time: datetime!(2026-11-22 10:17:33 UTC),
                client: "2001:db8::1".parse().unwrap(),
                tracking: tracked.then_some(&tid),
                user_agent: user_agent.as_deref(),
                target: &target,
                status,
                location: location.as_deref(),
            };
            let text = line(&entry);
            proptest::prop_assert!(text.ends_with('\n'));
            let body = &text[..text.len() - 1];
            proptest::prop_assert!(!body.contains('\n'), "one line: {body:?}");
            proptest::prop_assert!(body.bytes().all(|b| b.is_ascii_graphic() || b == b' '), "{body:?}");
            let fields: Vec<&str> = body.split(' ').collect();
            proptest::prop_assert_eq!(fields.len(), if status == 302 { 7 } else { 6 }, "{:?}", body);
            proptest::prop_assert!(fields.iter().all(|f| !f.is_empty()), "{body:?}");
        }
    }

    #[test]
    fn a_long_target_is_logged_cut_and_marked() {
        let target = vec![b'a'; 10_000];
        let logged = logged_target(&target);
        assert_eq!(logged.len(), LOGGED_TARGET_BYTES + 3);
        assert!(logged.ends_with("…".as_bytes()));
        assert_eq!(&*logged_target(b"/H83if"), b"/H83if");
    }

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
