//! Link analytics from the access logs alone (`couchlink report`; offline, never on the
//! redirect path).
//!
//! - [`read`]: which files, and their lines: plain files in chunks, gzipped ones streamed.
//! - [`line`](mod@line): one line split into its fields and checked against the log's format.
//! - [`count`]: lines into per-link, per-version, per-day tallies, one per thread, merged.
//! - [`summary`]: the finished report, in the shape JSON gets it.
//! - [`print`](mod@print): the report as a table, CSV, JSON or a self-contained HTML page.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::domain::LinkId;

pub mod count;
pub mod line;
pub mod print;
pub mod read;
pub mod summary;

pub use line::Stamp;
pub use summary::Report;

/// What to count.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Lines from this time on.
    pub since: Option<Stamp>,
    /// Lines before this time.
    pub until: Option<Stamp>,
    /// Only these links in the per-link part (empty: all); totals count every line.
    pub links: HashSet<LinkId>,
}

impl Options {
    fn includes(&self, stamp: Stamp) -> bool {
        self.since.is_none_or(|s| stamp >= s) && self.until.is_none_or(|u| stamp < u)
    }

    /// Whether a file holding only `day`'s lines can hold lines in the range.
    fn may_include(&self, source: &read::Source) -> bool {
        let Some(day) = source.day else { return true };
        let next = day.date().and_then(|d| d.next_day()).map(|d| line::Day::of(d).start());
        self.until.is_none_or(|u| day.start() < u) && self.since.is_none_or(|s| next.is_none_or(|n| s < n))
    }
}

/// Why a report could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A file or directory could not be read.
    #[error("cannot read {path}")]
    Read {
        /// Which.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A path that does not exist.
    #[error("{0} does not exist: name log files or their folder as arguments, or the folder with --log-dir (COUCHLINK_LOG_DIR)")]
    Missing(PathBuf),
    /// A directory without access logs.
    #[error("no access.*.log or access.*.log.gz files in {0}")]
    NoLogs(PathBuf),
}

impl ReportError {
    fn read(path: &Path, source: std::io::Error) -> ReportError {
        ReportError::Read { path: path.to_owned(), source }
    }
}

/// Reads the logs that `paths` name (files, or directories of access logs) and counts them,
/// files and chunks of large files on all cores. Any unreadable file fails the whole report.
pub fn run(paths: &[PathBuf], options: &Options) -> Result<Report, ReportError> {
    let mut sources = read::sources(paths)?;
    sources.retain(|s| options.may_include(s));
    let pieces = read::pieces(&sources);
    // Gzipped files first: each is one stream for one thread, the longest pieces to wait for.
    let mut order: Vec<usize> = (0..pieces.len()).collect();
    order.sort_by_key(|&i| !sources[pieces[i].source].gzip);
    // One tally per thread, each taking the next piece until none is left: threads never wait
    // on each other, and tallies are merged once per thread, not once per piece.
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let tallies = rayon::broadcast(|_| {
        let mut tally = count::Tally::default();
        let mut buf = Vec::new();
        while let Some(&i) = order.get(next.fetch_add(1, Ordering::Relaxed)) {
            if failed.load(Ordering::Relaxed) {
                break;
            }
            let piece = pieces[i];
            let mut counter = tally.piece(i, options);
            read::read_piece(&sources[piece.source], piece, &mut buf, |line, terminated| {
                counter.line(line, terminated)
            })
            .inspect_err(|_| failed.store(true, Ordering::Relaxed))?;
            counter.finish();
        }
        tally.sum_days();
        Ok::<_, ReportError>(tally)
    });
    // Into the one with the most lines: its links, versions and days stay where they are.
    let mut tallies = tallies.into_iter().collect::<Result<Vec<_>, _>>()?;
    let largest = (0..tallies.len()).max_by_key(|&i| tallies[i].lines).unwrap_or(0);
    let mut tally = if tallies.is_empty() { count::Tally::default() } else { tallies.swap_remove(largest) };
    for t in tallies {
        tally = tally.merge(t);
    }
    tally.settle();
    Ok(Report::new(tally, &sources, &pieces, options))
}

/// Asks for the cache line of `value` to be loaded, without waiting for it.
fn prefetch<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    safe_arch::prefetch_t0(value);
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}
