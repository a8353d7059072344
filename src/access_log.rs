//! The access log (docs/reference.md, "Access log"): one space-separated line per request, one file per
//! UTC day, written off-thread by tracing-appender's non-blocking writer in lossless mode.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use percent_encoding::{percent_encode, AsciiSet, CONTROLS, NON_ALPHANUMERIC};
use time::OffsetDateTime;
use tracing_appender::non_blocking::{NonBlocking, NonBlockingBuilder, WorkerGuard};

use crate::domain::TrackingId;

/// What the User-Agent keeps unescaped: JavaScript's `encodeURIComponent` set, so the
/// documented example `Mozilla%2F5.0%20(X11%3B%20Linux)` comes out exactly.
const USER_AGENT_SET: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'!')
    .remove(b'~')
    .remove(b'*')
    .remove(b'\'')
    .remove(b'(')
    .remove(b')');

/// The request target and `Location` keep visible ASCII; everything else (space, controls,
/// bytes above 0x7E) becomes `%HH`.
const VISIBLE_ASCII_SET: &AsciiSet = &CONTROLS.add(b' ');

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
    let mut stamp = [0u8; 14];
    crate::domain::write_compact_timestamp(entry.time, &mut stamp);
    out.extend_from_slice(&stamp);
    out.push(b'.');
    out.push(b'0' + (entry.time.nanosecond() / 100_000_000) as u8);
    out.push(b' ');
    // IPv4 clients on a dual-stack socket show up as ::ffff:a.b.c.d; log them as a.b.c.d.
    match entry.client.to_canonical() {
        IpAddr::V4(v4) => {
            for (i, octet) in v4.octets().into_iter().enumerate() {
                if i > 0 {
                    out.push(b'.');
                }
                push_decimal(out, octet.into());
            }
        }
        v6 => {
            let _ = write!(out, "{v6}");
        }
    }
    out.push(b' ');
    out.extend_from_slice(entry.tracking.map_or(b"-".as_slice(), |t| t.as_str().as_bytes()));
    out.push(b' ');
    match entry.user_agent {
        Some(ua) if !ua.is_empty() => extend_encoded(out, ua, USER_AGENT_SET),
        _ => out.push(b'-'),
    }
    out.push(b' ');
    if entry.target.is_empty() {
        out.push(b'-');
    } else {
        extend_encoded(out, entry.target, VISIBLE_ASCII_SET);
    }
    out.push(b' ');
    push_decimal(out, entry.status.into());
    if let (302, Some(location)) = (entry.status, entry.location) {
        out.push(b' ');
        extend_encoded(out, location.as_bytes(), VISIBLE_ASCII_SET);
    }
    out.push(b'\n');
}

/// Appends `n` in decimal.
pub(crate) fn push_decimal(out: &mut Vec<u8>, mut n: u32) {
    let mut digits = [0u8; 10];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

fn extend_encoded(out: &mut Vec<u8>, bytes: &[u8], set: &'static AsciiSet) {
    for piece in percent_encode(bytes, set) {
        out.extend_from_slice(piece.as_bytes());
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
const FLUSH_INTERVAL: Duration = Duration::from_millis(5);
/// A batch this large is handed off at once, by the request that filled it.
const MAX_BATCH: usize = 256 * 1024;

/// The running access log: cheap to share, one call per request.
#[derive(Clone)]
pub struct AccessLog {
    shared: Arc<Shared>,
}

struct Shared {
    batch: Mutex<Batch>,
    writer: NonBlocking,
    counts: Arc<Counts>,
    stop: AtomicBool,
}

/// Lines of one UTC day, in arrival order.
#[derive(Default)]
struct Batch {
    bytes: Vec<u8>,
    lines: u64,
}

#[derive(Default)]
struct Counts {
    /// Lines handed to the writer thread.
    sent: AtomicU64,
    /// Lines the writer thread has written to the file.
    written: AtomicU64,
    /// Lines given up on after the file refused them for several seconds.
    failed: AtomicU64,
}

/// Held by whoever shuts down: writes every line before letting the process exit.
pub struct Flusher {
    log: AccessLog,
    ticker: std::thread::JoinHandle<()>,
    guard: WorkerGuard,
}

impl AccessLog {
    /// Opens (creating it if need be) `dir`, writing to one `access.YYYY-MM-DD.log` file per
    /// UTC day. Fails at once, with the reason, when the directory is not writable.
    pub fn open(dir: &Path) -> Result<(AccessLog, Flusher), OpenError> {
        let err = |source| OpenError { dir: dir.display().to_string(), source };
        std::fs::create_dir_all(dir).map_err(err)?;
        probe_writable(dir).map_err(err)?;
        let counts = Arc::new(Counts::default());
        let (writer, guard) = NonBlockingBuilder::default()
            .lossy(false)
            .thread_name("couchlink-access-log")
            .finish(DailyFiles { dir: dir.to_owned(), open: None, counts: counts.clone() });
        let log = AccessLog {
            shared: Arc::new(Shared { batch: Mutex::default(), writer, counts, stop: AtomicBool::new(false) }),
        };
        let ticking = log.clone();
        let ticker = std::thread::Builder::new()
            .name("couchlink-log-flush".into())
            .spawn(move || {
                while !ticking.shared.stop.load(Ordering::Acquire) {
                    std::thread::sleep(FLUSH_INTERVAL);
                    ticking.flush();
                }
            })
            .map_err(err)?;
        Ok((log.clone(), Flusher { log, ticker, guard }))
    }

    /// Records one request. Blocks only when the writer thread is far behind (lossless mode:
    /// back-pressure rather than a dropped line).
    pub fn write(&self, entry: &Entry<'_>) {
        thread_local! {
            // Each thread formats its lines in one buffer of its own: nothing allocated per line.
            static LINE: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(Vec::with_capacity(512));
        }
        LINE.with_borrow_mut(|line| {
            line.clear();
            format_line(entry, line);
            self.append(line);
        });
    }

    /// Adds one formatted line to the batch, handing batches that are full or of an earlier
    /// day to the writer thread.
    fn append(&self, line: &[u8]) {
        let full = {
            let mut batch = self.shared.batch.lock().expect("log batch lock");
            // A batch holds one UTC day (the first 8 bytes of a line), so each line lands in
            // its own day's file even when it is written just after midnight.
            let new_day = batch.bytes.get(..8).is_some_and(|day| day != &line[..8]);
            let earlier = if new_day { Some(std::mem::take(&mut *batch)) } else { None };
            batch.bytes.extend_from_slice(line);
            batch.lines += 1;
            let full = (batch.bytes.len() >= MAX_BATCH).then(|| std::mem::take(&mut *batch));
            [earlier, full]
        };
        for batch in full.into_iter().flatten() {
            self.send(batch);
        }
    }

    /// Hands the current batch to the writer thread.
    fn flush(&self) {
        let batch = std::mem::take(&mut *self.shared.batch.lock().expect("log batch lock"));
        if batch.lines > 0 {
            self.send(batch);
        }
    }

    fn send(&self, batch: Batch) {
        let counts = &self.shared.counts;
        counts.sent.fetch_add(batch.lines, Ordering::AcqRel);
        // One `write` call is one message to the worker: batches never interleave.
        if self.shared.writer.clone().write_all(&batch.bytes).is_err() {
            // Only possible once the worker is gone, i.e. after shutdown.
            counts.failed.fetch_add(batch.lines, Ordering::AcqRel);
        }
    }

    /// Lines written to the file so far.
    pub fn lines_written(&self) -> u64 {
        self.shared.counts.written.load(Ordering::Relaxed)
    }

    /// Lines that could not be written (the file refused them).
    pub fn lines_failed(&self) -> u64 {
        self.shared.counts.failed.load(Ordering::Relaxed)
    }
}

impl Flusher {
    /// Hands over the last batch and waits until every line is in the file (or `timeout`
    /// passes), then stops the writer thread. tracing-appender's own guard waits at most one
    /// second, which a deep backlog can outlast, hence the wait on the counters first.
    pub async fn finish(self, timeout: Duration) {
        self.log.shared.stop.store(true, Ordering::Release);
        let _ = tokio::task::spawn_blocking(move || self.ticker.join()).await;
        self.log.flush();
        let counts = &self.log.shared.counts;
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let done = counts.written.load(Ordering::Acquire) + counts.failed.load(Ordering::Acquire);
            if done >= counts.sent.load(Ordering::Acquire) {
                break;
            }
            if tokio::time::Instant::now() >= deadline {
                let queued = counts.sent.load(Ordering::Acquire) - done;
                tracing::error!("the access log flush timed out with {queued} lines still queued");
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        drop(self.guard);
    }
}

fn probe_writable(dir: &Path) -> io::Result<()> {
    let probe = dir.join(".couchlink-write-test");
    std::fs::write(&probe, b"")?;
    std::fs::remove_file(probe)
}

/// The file writer under the non-blocking worker: appends each batch to its day's file,
/// counts its lines and, when the file refuses them (disk full, say), says so on stderr and
/// retries for a while instead of dropping them.
struct DailyFiles {
    dir: PathBuf,
    /// The day (`yyyymmdd`) whose file is open, and the file.
    open: Option<([u8; 8], File)>,
    counts: Arc<Counts>,
}

impl DailyFiles {
    fn file_for(&mut self, day: [u8; 8]) -> io::Result<&mut File> {
        if self.open.as_ref().is_none_or(|(open_day, _)| *open_day != day) {
            let d = std::str::from_utf8(&day).unwrap_or("00000000");
            let name = format!("access.{}-{}-{}.log", &d[..4], &d[4..6], &d[6..8]);
            let file = OpenOptions::new().create(true).append(true).open(self.dir.join(name))?;
            self.open = Some((day, file));
        }
        Ok(&mut self.open.as_mut().expect("just opened").1)
    }
}

impl Write for DailyFiles {
    fn write(&mut self, batch: &[u8]) -> io::Result<usize> {
        const ATTEMPTS: u32 = 50;
        let lines = batch.iter().filter(|&&b| b == b'\n').count() as u64;
        let day: [u8; 8] = batch.get(..8).and_then(|d| d.try_into().ok()).unwrap_or(*b"00000000");
        for attempt in 1..=ATTEMPTS {
            match self.file_for(day).and_then(|file| file.write_all(batch)) {
                Ok(()) => {
                    self.counts.written.fetch_add(lines, Ordering::AcqRel);
                    return Ok(batch.len());
                }
                Err(e) if attempt == ATTEMPTS => {
                    self.counts.failed.fetch_add(lines, Ordering::AcqRel);
                    tracing::error!("{lines} access log lines lost after {ATTEMPTS} attempts: {e}");
                    return Err(e);
                }
                Err(e) => {
                    if attempt == 1 {
                        tracing::warn!("cannot write the access log ({e}); retrying");
                    }
                    // Reopen next time: the file may have been moved or removed.
                    self.open = None;
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        }
        unreachable!("the last attempt returns")
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
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

    proptest::proptest! {
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
}
