//! Link analytics from the access logs alone (`couchlink report`; offline, never on the
//! redirect path).
//!
//! - [`read`]: which files, and their lines: plain files in pieces, gzipped ones streamed.
//! - [`line`](mod@line): one line split into its fields and checked against the log's format.
//! - [`breakdown`]: what a redirect is broken down by (`--by`): campaign, device, country.
//! - [`tally`]: what counting yields: per link, per target version, per day, with visitors.
//! - [`count`]: the engine: lines into a tally on every core.
//! - `model`: the same counting done plainly, the oracle the engine is tested against.
//! - [`summary`]: the finished report, in the shape JSON gets it.
//! - [`print`](mod@print): the report as a table, CSV, JSON or a self-contained HTML page.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use crate::domain::LinkId;

pub mod breakdown;
mod combos;
pub mod count;
pub mod line;
#[cfg(test)]
mod model;
pub mod print;
pub mod read;
pub mod summary;
pub mod tally;

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
    /// What each link's and version's redirects are broken down by (none: no cost).
    pub breakdowns: Arc<breakdown::Breakdowns>,
    /// The JSON schema written.
    pub schema: Schema,
}

/// The version of the JSON schema (docs/report.md).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Schema {
    /// `couchlink-report/1`, as before breakdowns (kept for one release).
    V1,
    /// `couchlink-report/2`: the breakdowns asked for, per link and per version.
    #[default]
    V2,
}

impl Schema {
    /// The `schema` field's value.
    pub fn name(self) -> &'static str {
        match self {
            Schema::V1 => "couchlink-report/1",
            Schema::V2 => "couchlink-report/2",
        }
    }
}

impl Options {
    fn includes(&self, stamp: Stamp) -> bool {
        self.since.is_none_or(|s| stamp >= s) && self.until.is_none_or(|u| stamp < u)
    }

    /// Whether link `id` is counted in the per-link part.
    fn wants(&self, id: LinkId) -> bool {
        self.links.is_empty() || self.links.contains(&id)
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
    /// Countries could not be read.
    #[error(transparent)]
    GeoIp(#[from] breakdown::GeoIpError),
    /// A file cut short or replaced while it was read.
    #[error("{path} changed while the report read it: it was {how} (logrotate's copytruncate, or `> file`?); no report was made, run it again")]
    Changed {
        /// Which.
        path: PathBuf,
        /// What happened to it.
        how: String,
    },
}

impl ReportError {
    fn read(path: &Path, source: std::io::Error) -> ReportError {
        ReportError::Read { path: path.to_owned(), source }
    }
}

/// Reads the logs that `paths` name (files, or directories of access logs) and counts them,
/// files and pieces of large files on all cores. Any unreadable file fails the whole report.
pub fn run(paths: &[PathBuf], options: &Options) -> Result<Report, ReportError> {
    run_in_pieces(paths, options, read::CHUNK)
}

/// [`run`], with plain files read in pieces of `chunk` bytes.
fn run_in_pieces(paths: &[PathBuf], options: &Options, chunk: u64) -> Result<Report, ReportError> {
    let mut sources = read::sources(paths)?;
    sources.retain(|s| options.may_include(s));
    let pieces = read::pieces(&sources, chunk);
    // Gzipped files first: each is one stream for one thread, the longest pieces to wait for.
    let mut order: Vec<usize> = (0..pieces.len()).collect();
    order.sort_by_key(|&i| !sources[pieces[i].source].gzip);
    // One partial count per thread, each taking the next piece until none is left: threads
    // never wait on each other, and the partials are merged once, not once per piece.
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let partials = rayon::broadcast(|_| {
        let mut partial = count::Partial::default();
        let mut buf = Vec::new();
        while let Some(&i) = order.get(next.fetch_add(1, Ordering::Relaxed)) {
            if failed.load(Ordering::Relaxed) {
                break;
            }
            let piece = pieces[i];
            let mut counter = partial.piece(i, options);
            read::read_piece(&sources[piece.source], piece, &mut buf, |line, terminated| {
                counter.line(line, terminated)
            })
            .inspect_err(|_| failed.store(true, Ordering::Relaxed))?;
            counter.finish();
        }
        partial.close();
        Ok::<_, ReportError>(partial)
    });
    let mut partials = partials.into_iter().collect::<Result<Vec<_>, _>>()?;
    if let Some(failure) = partials.iter_mut().find_map(|p| p.failure()) {
        return Err(failure.into());
    }
    let tally = count::Partial::merge_all(partials).finish();
    Ok(Report::new(tally, &sources, &pieces, options))
}
