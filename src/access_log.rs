//! The access log (contracts §5): one space-separated line per request, rotated daily (UTC),
//! written off-thread by tracing-appender's non-blocking writer in lossless mode.

use std::io::{self, Write};
use std::net::IpAddr;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use percent_encoding::{percent_encode, AsciiSet, CONTROLS, NON_ALPHANUMERIC};
use time::OffsetDateTime;
use tracing_appender::non_blocking::{NonBlocking, NonBlockingBuilder, WorkerGuard};
use tracing_appender::rolling::{RollingFileAppender, Rotation};

use crate::domain::TrackingId;

/// What the User-Agent keeps unescaped: JavaScript's `encodeURIComponent` set, so the
/// contract's example `Mozilla%2F5.0%20(X11%3B%20Linux)` comes out exactly.
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

/// One request as the log records it.
#[derive(Debug, Clone)]
pub struct Entry<'a> {
    /// When the request was answered.
    pub time: OffsetDateTime,
    /// The client (after trusted-proxy headers).
    pub client: IpAddr,
    /// The tracking ID set in the response.
    pub tracking: &'a TrackingId,
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
    let _ = write!(out, "{} {} ", entry.client.to_canonical(), entry.tracking);
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
    let _ = write!(out, " {}", entry.status);
    if let (302, Some(location)) = (entry.status, entry.location) {
        out.push(b' ');
        extend_encoded(out, location.as_bytes(), VISIBLE_ASCII_SET);
    }
    out.push(b'\n');
}

fn extend_encoded(out: &mut Vec<u8>, bytes: &[u8], set: &'static AsciiSet) {
    for piece in percent_encode(bytes, set) {
        out.extend_from_slice(piece.as_bytes());
    }
}

/// Why the access log could not be opened.
#[derive(Debug, thiserror::Error)]
#[error("cannot write the access log in {dir}: {source}")]
pub struct OpenError {
    dir: String,
    #[source]
    source: io::Error,
}

/// The running access log: cheap to share, one `write` per request.
#[derive(Clone)]
pub struct AccessLog {
    writer: NonBlocking,
    counts: Arc<Counts>,
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

/// Held by whoever shuts down: flushes every sent line before letting the process exit.
pub struct Flusher {
    guard: WorkerGuard,
    counts: Arc<Counts>,
}

impl AccessLog {
    /// Opens (creating it if need be) `dir`, writing to `access.YYYY-MM-DD.log` files.
    /// Fails at once, with the reason, when the directory is not writable.
    pub fn open(dir: &Path) -> Result<(AccessLog, Flusher), OpenError> {
        let err = |source| OpenError { dir: dir.display().to_string(), source };
        std::fs::create_dir_all(dir).map_err(err)?;
        let appender = RollingFileAppender::builder()
            .rotation(Rotation::DAILY)
            .filename_prefix("access")
            .filename_suffix("log")
            .build(dir)
            .map_err(|e| err(io::Error::other(e)))?;
        // The appender opens the file lazily on some errors; prove now that it is writable.
        probe_writable(dir).map_err(err)?;
        let counts = Arc::new(Counts::default());
        let (writer, guard) = NonBlockingBuilder::default()
            .lossy(false)
            .thread_name("couchlink-access-log")
            .finish(CountingWriter { inner: appender, counts: counts.clone() });
        Ok((AccessLog { writer, counts: counts.clone() }, Flusher { guard, counts }))
    }

    /// Queues one line. Blocks only if the writer thread is 128k lines behind (lossless mode:
    /// back-pressure rather than a dropped line).
    pub fn write(&self, entry: &Entry<'_>) {
        let mut line = Vec::with_capacity(256);
        format_line(entry, &mut line);
        self.counts.sent.fetch_add(1, Ordering::Relaxed);
        // One `write` call is one message to the worker, so lines never interleave.
        if self.writer.clone().write_all(&line).is_err() {
            // Only possible once the worker is gone, i.e. after shutdown.
            self.counts.failed.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Lines written to the file so far.
    pub fn lines_written(&self) -> u64 {
        self.counts.written.load(Ordering::Relaxed)
    }

    /// Lines that could not be written (the file refused them).
    pub fn lines_failed(&self) -> u64 {
        self.counts.failed.load(Ordering::Relaxed)
    }
}

impl Flusher {
    /// Waits until every line sent so far is in the file (or `timeout` passes), then stops the
    /// writer thread. tracing-appender's own guard waits at most one second, which a deep
    /// backlog can outlast, hence the wait on the counters first.
    pub async fn finish(self, timeout: Duration) {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let c = &self.counts;
            let done = c.written.load(Ordering::Acquire) + c.failed.load(Ordering::Acquire);
            if done >= c.sent.load(Ordering::Acquire) {
                break;
            }
            if tokio::time::Instant::now() >= deadline {
                eprintln!("couchlink: access log flush timed out with lines still queued");
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

/// The file writer under the non-blocking worker: counts each line and, when the file refuses
/// one (disk full, say), says so on stderr and retries for a while instead of dropping it.
struct CountingWriter {
    inner: RollingFileAppender,
    counts: Arc<Counts>,
}

impl Write for CountingWriter {
    fn write(&mut self, line: &[u8]) -> io::Result<usize> {
        const ATTEMPTS: u32 = 50;
        for attempt in 1..=ATTEMPTS {
            match self.inner.write_all(line) {
                Ok(()) => {
                    self.counts.written.fetch_add(1, Ordering::Release);
                    return Ok(line.len());
                }
                Err(e) if attempt == ATTEMPTS => {
                    self.counts.failed.fetch_add(1, Ordering::Release);
                    eprintln!("couchlink: access log line lost after {ATTEMPTS} attempts: {e}");
                    return Err(e);
                }
                Err(e) => {
                    if attempt == 1 {
                        eprintln!("couchlink: cannot write the access log ({e}); retrying");
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        }
        unreachable!("the last attempt returns")
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
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
        TrackingId::parse("20261122101733a3f9c1e2b7d4e6012f").unwrap()
    }

    #[test]
    fn contract_example_line() {
        let tid = tid();
        let entry = Entry {
            time: datetime!(2026-11-22 10:17:33.59 UTC),
            client: "203.0.113.7".parse().unwrap(),
            tracking: &tid,
            user_agent: Some(b"Mozilla/5.0 (X11; Linux)"),
            target: b"/H83if",
            status: 302,
            location: Some("https://example.com/wp/?p=14"),
        };
        assert_eq!(
            line(&entry),
            "20261122101733.5 203.0.113.7 20261122101733a3f9c1e2b7d4e6012f Mozilla%2F5.0%20(X11%3B%20Linux) /H83if 302 https://example.com/wp/?p=14\n"
        );
    }

    #[test]
    fn hostile_input_still_gives_six_space_free_fields_on_one_line() {
        let tid = tid();
        let entry = Entry {
            time: datetime!(2026-11-22 10:17:33 UTC),
            client: "::ffff:10.0.0.1".parse().unwrap(),
            tracking: &tid,
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
            tracking: &tid,
            user_agent: None,
            target: b"/",
            status: 501,
            location: None,
        };
        assert_eq!(line(&entry), "20261122101733.0 2001:db8::1 20261122101733a3f9c1e2b7d4e6012f - / 501\n");
        entry.user_agent = Some(b"");
        assert!(line(&entry).contains(" - / 501"));
    }

    #[test]
    fn location_field_only_on_302() {
        let tid = tid();
        let entry = Entry {
            time: datetime!(2026-11-22 10:17:33 UTC),
            client: "192.0.2.1".parse().unwrap(),
            tracking: &tid,
            user_agent: None,
            target: b"/H83if",
            status: 302,
            location: Some("https://t.example/"),
        };
        assert_eq!(line(&entry).split(' ').count(), 7);
        let not_found = Entry { status: 404, ..entry };
        assert_eq!(line(&not_found).split(' ').count(), 6);
    }
}
