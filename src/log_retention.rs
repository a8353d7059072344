//! Access log retention: finished days gzipped, days past the retention period deleted, the
//! file still being written never touched.

use std::fs::File;
use std::io::{self, BufReader, BufWriter};
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::time::Duration;

use flate2::write::GzEncoder;
use flate2::Compression;
use time::{Date, OffsetDateTime};
use tokio::sync::watch;

/// How long after midnight (UTC) a day's file may still receive lines: a batch stamped just
/// before midnight is written within a second or so, but a disk that stalls can hold it back.
/// Only then is the day finished.
const GRACE: Duration = Duration::from_secs(15 * 60);
/// How often the log folder is looked at (also once at start).
const EVERY: Duration = Duration::from_secs(10 * 60);

/// What to do with finished days.
#[derive(Debug, Clone)]
pub struct Retention {
    /// The access log folder.
    pub dir: PathBuf,
    /// Days of logs to keep, today included; `None` keeps them all.
    pub keep_days: Option<NonZeroU32>,
    /// Whether finished days are gzipped.
    pub compress: bool,
}

/// What one [`Retention::step`] did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Files replaced by their `.gz`.
    pub compressed: Vec<PathBuf>,
    /// Files deleted because their day is past the retention period.
    pub deleted: Vec<PathBuf>,
}

/// A file of the access log: `access.YYYY-MM-DD.log`, or the same with `.gz`.
struct DayFile {
    path: PathBuf,
    day: Date,
    gzipped: bool,
}

fn day_file(path: PathBuf) -> Option<DayFile> {
    let name = path.file_name()?.to_str()?;
    let rest = name.strip_prefix("access.")?;
    let (day, gzipped) = match rest.strip_suffix(".log.gz") {
        Some(day) => (day, true),
        None => (rest.strip_suffix(".log")?, false),
    };
    let format = time::macros::format_description!("[year]-[month]-[day]");
    let day = Date::parse(day, &format).ok()?;
    Some(DayFile { path, day, gzipped })
}

impl Retention {
    /// One pass over the folder as of `now`: deletes the days past retention, then gzips the
    /// finished days that remain. Files that are not the access log's are left alone.
    pub fn step(&self, now: OffsetDateTime) -> io::Result<Outcome> {
        let mut outcome = Outcome::default();
        let mut files = Vec::new();
        for entry in std::fs::read_dir(&self.dir)? {
            if let Some(file) = day_file(entry?.path()) {
                files.push(file);
            }
        }
        let today = now.date();
        // The newest day whose file can no longer receive a line.
        let finished = (now - GRACE).date().previous_day();
        let oldest_kept = self.keep_days.and_then(|n| today.checked_sub(time::Duration::days(i64::from(n.get()) - 1)));
        for file in files {
            if oldest_kept.is_some_and(|oldest| file.day < oldest) {
                std::fs::remove_file(&file.path)?;
                outcome.deleted.push(file.path);
            } else if self.compress && !file.gzipped && finished.is_some_and(|last| file.day <= last) {
                gzip_replacing(&file.path)?;
                outcome.compressed.push(file.path);
            }
        }
        outcome.compressed.sort();
        outcome.deleted.sort();
        Ok(outcome)
    }

    /// Runs [`Retention::step`] at start and every ten minutes until `stop` turns true. A
    /// failure is reported once (and again only after a success): the access log itself goes on.
    pub async fn run(self, mut stop: watch::Receiver<bool>) {
        let mut failing = false;
        while !*stop.borrow() {
            let retention = self.clone();
            let result = tokio::task::spawn_blocking(move || retention.step(OffsetDateTime::now_utc())).await;
            match result {
                Ok(Ok(outcome)) => {
                    failing = false;
                    for path in &outcome.compressed {
                        tracing::info!("access log {} compressed", path.display());
                    }
                    for path in &outcome.deleted {
                        tracing::info!("access log {} deleted (older than the retention period)", path.display());
                    }
                }
                Ok(Err(e)) if !std::mem::replace(&mut failing, true) => {
                    tracing::warn!("access log retention in {} failed: {e}; retrying", self.dir.display());
                }
                _ => {}
            }
            tokio::select! {
                _ = tokio::time::sleep(EVERY) => {}
                _ = stop.changed() => break,
            }
        }
    }
}

/// Writes `path.gz` next to `path` (through a temporary file, so a crash never leaves a
/// truncated `.gz` under the final name), then removes `path`.
fn gzip_replacing(path: &Path) -> io::Result<()> {
    let mut gz = path.as_os_str().to_owned();
    gz.push(".gz");
    let gz = PathBuf::from(gz);
    let mut tmp = gz.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let mut input = BufReader::new(File::open(path)?);
    let mut encoder = GzEncoder::new(BufWriter::new(File::create(&tmp)?), Compression::default());
    io::copy(&mut input, &mut encoder)?;
    let file = encoder.finish()?.into_inner().map_err(io::IntoInnerError::into_error)?;
    file.sync_all()?;
    std::fs::rename(&tmp, &gz)?;
    std::fs::remove_file(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use time::macros::datetime;

    /// A log folder holding `files` (name, content).
    fn folder(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        dir
    }

    fn gunzip(path: &Path) -> String {
        let mut text = String::new();
        flate2::read::GzDecoder::new(File::open(path).unwrap()).read_to_string(&mut text).unwrap();
        text
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> =
            std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        names.sort();
        names
    }

    #[test]
    fn finished_days_are_gzipped_and_the_live_file_is_never_touched() {
        let dir = folder(&[
            ("access.2026-11-20.log", "20 a\n20 b\n"),
            ("access.2026-11-21.log", "21 a\n"),
            ("access.2026-11-22.log", "22 a\n"),
            ("access.2026-11-23.log", "23 live\n"),
            ("notes.txt", "not a log\n"),
        ]);
        let d = dir.path();
        let retention = Retention { dir: d.to_owned(), keep_days: None, compress: true };

        // Five minutes after midnight: yesterday may still get a late batch.
        let early = retention.step(datetime!(2026-11-23 00:05 UTC)).unwrap();
        assert_eq!(early.compressed, [d.join("access.2026-11-20.log"), d.join("access.2026-11-21.log")]);
        assert!(early.deleted.is_empty());
        assert_eq!(
            names(d),
            [
                "access.2026-11-20.log.gz",
                "access.2026-11-21.log.gz",
                "access.2026-11-22.log",
                "access.2026-11-23.log",
                "notes.txt"
            ]
        );
        assert_eq!(gunzip(&d.join("access.2026-11-20.log.gz")), "20 a\n20 b\n", "the same lines, compressed");

        // Later that day, yesterday is finished; today's file is still live and untouched.
        let later = retention.step(datetime!(2026-11-23 09:00 UTC)).unwrap();
        assert_eq!(later.compressed, [d.join("access.2026-11-22.log")]);
        assert_eq!(std::fs::read_to_string(d.join("access.2026-11-23.log")).unwrap(), "23 live\n");
        assert_eq!(retention.step(datetime!(2026-11-23 23:59:59 UTC)).unwrap(), Outcome::default(), "idempotent");
    }

    #[test]
    fn days_past_the_retention_period_are_deleted_gzipped_or_not() {
        let dir = folder(&[
            ("access.2026-11-19.log", "19\n"),
            ("access.2026-11-20.log.gz", "not really gzip, never read\n"),
            ("access.2026-11-21.log", "21\n"),
            ("access.2026-11-23.log", "23 live\n"),
            ("access.log.old", "left alone\n"),
        ]);
        let d = dir.path();
        let retention = Retention { dir: d.to_owned(), keep_days: NonZeroU32::new(3), compress: false };
        let outcome = retention.step(datetime!(2026-11-23 12:00 UTC)).unwrap();
        // Three days kept: the 21st, 22nd and 23rd.
        assert_eq!(outcome.deleted, [d.join("access.2026-11-19.log"), d.join("access.2026-11-20.log.gz")]);
        assert!(outcome.compressed.is_empty(), "compression off");
        assert_eq!(names(d), ["access.2026-11-21.log", "access.2026-11-23.log", "access.log.old"]);
    }

    #[test]
    fn keeping_one_day_keeps_the_live_file() {
        let dir = folder(&[("access.2026-11-22.log", "22\n"), ("access.2026-11-23.log", "23 live\n")]);
        let d = dir.path();
        let retention = Retention { dir: d.to_owned(), keep_days: NonZeroU32::new(1), compress: true };
        retention.step(datetime!(2026-11-23 00:00:01 UTC)).unwrap();
        assert_eq!(names(d), ["access.2026-11-23.log"]);
    }

    #[test]
    fn a_gzip_left_half_written_by_a_crash_is_redone_from_the_log() {
        let dir = folder(&[("access.2026-11-20.log", "the lines\n"), ("access.2026-11-20.log.gz.tmp", "trunc")]);
        let d = dir.path();
        let retention = Retention { dir: d.to_owned(), keep_days: None, compress: true };
        retention.step(datetime!(2026-11-23 12:00 UTC)).unwrap();
        assert_eq!(names(d), ["access.2026-11-20.log.gz"]);
        assert_eq!(gunzip(&d.join("access.2026-11-20.log.gz")), "the lines\n");
    }
}
