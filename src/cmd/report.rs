//! `couchlink report`: link analytics from the access log files alone (no CouchDB, no network).

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::os::fd::AsFd;
use std::path::PathBuf;

use clap::{Args, ValueEnum};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use crate::domain::LinkId;
use crate::report::breakdown::{Breakdowns, Dimension, GeoIp};
use crate::report::line::Day;
use crate::report::{self, print, Options, ReportError, Schema, Stamp};

/// Flags of `couchlink report`.
#[derive(Debug, Clone, Args)]
pub struct ReportArgs {
    /// Log files (plain or gzipped) or directories of access.*.log[.gz]; default: --log-dir.
    pub paths: Vec<PathBuf>,
    /// The access log directory read when no path is given.
    #[arg(long, env = "COUCHLINK_LOG_DIR", default_value = "logs")]
    pub log_dir: PathBuf,
    /// Lines from this UTC date (YYYY-MM-DD: from its midnight) or RFC 3339 time on.
    #[arg(long, value_parser = since)]
    pub since: Option<Stamp>,
    /// Lines up to this UTC date (YYYY-MM-DD: that whole day included) or before this RFC 3339 time.
    #[arg(long, value_parser = until)]
    pub until: Option<Stamp>,
    /// Only this link in the per-link part (repeat for more); totals still cover every line.
    #[arg(long = "link", value_name = "ID", value_parser = LinkId::parse)]
    pub links: Vec<LinkId>,
    /// Break each link's and version's redirects down by campaign (utm_*), device (and OS), or
    /// country (needs --geoip); repeat for more.
    #[arg(long = "by", value_enum, value_name = "DIMENSION")]
    pub by: Vec<By>,
    /// A MaxMind-format database for countries (GeoLite2 Country or City, DB-IP Lite); implies --by country.
    #[arg(long, value_name = "FILE.mmdb")]
    pub geoip: Option<PathBuf>,
    /// Output format (CSV and JSON schemas: docs/report.md, "Link analytics").
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// The JSON schema: 2 (couchlink-report/2), or 1 as before breakdowns (for one release).
    #[arg(long, value_parser = ["1", "2"], default_value = "2")]
    pub schema: String,
    /// Write the report to this file instead of standard output.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// With several domains (COUCHLINK_DOMAINS): report this one's logs, in its folder under
    /// --log-dir; repeat for several, reported apart (JSON: under "domains"; table: a section
    /// each; CSV: a domain column first).
    #[arg(long = "domain", value_name = "HOST", value_parser = parse_host, conflicts_with = "paths")]
    pub domains: Vec<crate::domain::Host>,
    /// Print the bot list as one regular expression (for ClickHouse: docs/clickhouse.md) and exit.
    #[arg(long, conflicts_with_all = ["paths", "by", "geoip", "since", "until", "links", "out"])]
    pub bot_pattern: bool,
}

/// What `--by` takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum By {
    /// utm_source, utm_medium, utm_campaign, utm_term and utm_content, from the request or the Location.
    Campaign,
    /// The kind of device (mobile, tablet, desktop, bot, other) and the operating system.
    Device,
    /// The country of the client address (with --geoip).
    Country,
}

/// Report formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Aligned columns, for a terminal.
    Table,
    /// One row per link and per target version (with --by: per value of each breakdown).
    Csv,
    /// Everything, schema couchlink-report/2.
    Json,
    /// One self-contained page with charts.
    Html,
}

/// Why `couchlink report` failed.
#[derive(Debug, thiserror::Error)]
pub enum ReportCommandError {
    /// The logs could not be read.
    #[error(transparent)]
    Report(#[from] ReportError),
    /// `--since` is not before `--until`.
    #[error("--since ({since}) is not before --until ({until}): no line can be in between")]
    EmptyRange {
        /// As given.
        since: Stamp,
        /// As given.
        until: Stamp,
    },
    /// Breakdowns asked of the old schema.
    #[error("couchlink-report/1 has no breakdowns: leave out --schema 1, or --by and --geoip")]
    OldSchema,
    /// An HTML page holds one domain.
    #[error("an HTML page reports one domain: give one --domain at a time")]
    HtmlOfDomains,
    /// An HTML page would go to the terminal.
    #[error("an HTML page would fill the terminal: write it with --out FILE, redirect stdout, or use --format table")]
    HtmlToTerminal,
    /// The output could not be written.
    #[error("cannot write the report to {where_}")]
    Write {
        /// The file, or standard output.
        where_: String,
        /// Why.
        #[source]
        source: io::Error,
    },
}

impl ReportArgs {
    /// Counts the logs and writes the report.
    pub fn execute(self) -> Result<(), ReportCommandError> {
        return_freed_memory_at_once();
        if self.bot_pattern {
            return match writeln!(io::stdout(), "{}", crate::visitor::bot::bot_pattern()) {
                Err(e) if e.kind() != io::ErrorKind::BrokenPipe => {
                    Err(ReportCommandError::Write { where_: "standard output".into(), source: e })
                }
                _ => Ok(()),
            };
        }
        if self.format == Format::Html && self.out.is_none() && std::io::IsTerminal::is_terminal(&io::stdout()) {
            return Err(ReportCommandError::HtmlToTerminal);
        }
        if let (Some(since), Some(until)) = (self.since, self.until) {
            if since >= until {
                return Err(ReportCommandError::EmptyRange { since, until });
            }
        }
        // Small pages for this process from here on: a report's memory is mostly touched once,
        // and a transparent huge page zeroes 2 MiB at the first touch of any of it. A kernel
        // that refuses only leaves the report as it was.
        #[cfg(target_os = "linux")]
        let _ = rustix::thread::disable_transparent_huge_pages(true);
        let schema = if self.schema == "1" { Schema::V1 } else { Schema::V2 };
        if schema == Schema::V1 && (!self.by.is_empty() || self.geoip.is_some()) {
            return Err(ReportCommandError::OldSchema);
        }
        let mut dimensions: Vec<Dimension> = self
            .by
            .iter()
            .map(|b| match b {
                By::Campaign => Dimension::Campaign,
                By::Device => Dimension::Device,
                By::Country => Dimension::Country,
            })
            .collect();
        if self.geoip.is_some() {
            dimensions.push(Dimension::Country);
        }
        let geoip = self.geoip.as_deref().map(GeoIp::open).transpose().map_err(ReportError::from)?;
        let breakdowns = Breakdowns::new(&dimensions, geoip).map_err(ReportError::from)?;
        if self.format == Format::Html && self.domains.len() > 1 {
            return Err(ReportCommandError::HtmlOfDomains);
        }
        // Each domain's folder, reported apart; or the paths (the log directory) as one.
        let sets: Vec<(Option<String>, Vec<PathBuf>)> = if self.domains.is_empty() {
            vec![(None, if self.paths.is_empty() { vec![self.log_dir.clone()] } else { self.paths.clone() })]
        } else {
            self.domains.iter().map(|d| (Some(d.to_string()), vec![self.log_dir.join(d.as_str())])).collect()
        };
        let apart = sets.len() > 1;
        let options = Options {
            since: self.since,
            until: self.until,
            links: self.links.iter().copied().collect(),
            breakdowns: breakdowns.into(),
            schema,
        };
        // On one of the pool's threads, not on this one: a step done in one thread (merging,
        // writing the JSON) would otherwise share a core with a pool thread spinning for work.
        rayon::scope(|_| {
            let where_ = self.out.as_ref().map_or("standard output".to_owned(), |p| p.display().to_string());
            let fail = |source| ReportCommandError::Write { where_: where_.clone(), source };
            let mut out: Box<dyn Write> = match &self.out {
                Some(path) => Box::new(BufWriter::new(File::create(path).map_err(fail)?)),
                // Standard output's own file descriptor, not `io::stdout()`: that looks for the
                // last newline in everything written through it, to flush lines as they end.
                None => {
                    let fd = io::stdout().as_fd().try_clone_to_owned().map_err(fail)?;
                    Box::new(BufWriter::with_capacity(1 << 16, File::from(fd)))
                }
            };
            let mut printed = Ok(());
            for (n, (domain, paths)) in sets.iter().enumerate() {
                let report = report::run(paths, &options)?;
                let malformed = &report.totals.malformed_lines;
                if let Some(first) = malformed.first() {
                    tracing::warn!(
                        "{} malformed lines, counted in the report (first: {}:{}: {})",
                        report.totals.malformed,
                        first.file,
                        first.line,
                        first.reason
                    );
                }
                printed = printed.and_then(|()| match (apart, domain) {
                    (true, Some(domain)) => self.print_apart(&report, domain, n, sets.len(), &mut out),
                    _ => self.print(&report, &mut out),
                });
                // The process ends next: freeing the report's hundreds of thousands of small
                // pieces one by one would only make it end later.
                std::mem::forget(report);
            }
            match printed.and_then(|()| out.flush()) {
                // A reader that has seen enough (`couchlink report | head`) is not a failure.
                Err(e) if e.kind() == io::ErrorKind::BrokenPipe && self.out.is_none() => {}
                done => done.map_err(fail)?,
            }
            Ok(())
        })
    }

    fn print(&self, report: &report::Report, out: &mut dyn Write) -> io::Result<()> {
        match self.format {
            Format::Table => print::table(report, out),
            Format::Csv => print::csv(report, out),
            Format::Json => print::json(report, out),
            Format::Html => print::html(report, out),
        }
    }

    /// Domain `domain`'s report, the `n`th of `of`, printed apart from the others'.
    fn print_apart(
        &self,
        report: &report::Report,
        domain: &str,
        n: usize,
        of: usize,
        out: &mut dyn Write,
    ) -> io::Result<()> {
        let mut own = Vec::new();
        self.print(report, &mut own)?;
        match self.format {
            Format::Json => {
                let opening = if n == 0 { "{\"domains\":{" } else { "," };
                write!(out, "{opening}{}:", serde_json::Value::from(domain))?;
                out.write_all(own.trim_ascii_end())?;
                if n + 1 == of {
                    writeln!(out, "}}}}")?;
                }
            }
            Format::Csv => {
                let mut rows = csv::Reader::from_reader(own.as_slice());
                let mut writer = csv::WriterBuilder::new().terminator(csv::Terminator::Any(b'\n')).from_writer(out);
                if n == 0 {
                    let header = rows.headers().map_err(io::Error::other)?;
                    writer.write_record(std::iter::once("domain").chain(header.iter()))?;
                }
                for row in rows.records() {
                    let row = row.map_err(io::Error::other)?;
                    writer.write_record(std::iter::once(domain).chain(row.iter()))?;
                }
                writer.flush()?;
            }
            Format::Table | Format::Html => {
                if n > 0 {
                    writeln!(out)?;
                }
                writeln!(out, "== {domain}")?;
                out.write_all(&own)?;
            }
        }
        Ok(())
    }
}

fn parse_host(text: &str) -> Result<crate::domain::Host, String> {
    crate::domain::Host::parse(text).map_err(|e| e.to_string())
}

fn since(text: &str) -> Result<Stamp, String> {
    match Day::parse_iso(text) {
        Some(day) => Ok(day.start()),
        None => instant(text),
    }
}

fn until(text: &str) -> Result<Stamp, String> {
    match Day::parse_iso(text) {
        Some(day) => day
            .date()
            .and_then(|d| d.next_day())
            .map(|d| Day::of(d).start())
            .ok_or_else(|| format!("no day after {text}")),
        None => instant(text),
    }
}

fn instant(text: &str) -> Result<Stamp, String> {
    OffsetDateTime::parse(text, &Rfc3339)
        .map(Stamp::at)
        .map_err(|_| format!("{text:?} is neither a date (2026-11-22) nor an RFC 3339 time (2026-11-22T10:00:00Z)"))
}

/// The allocator couchlink is built with (mimalloc, for the proxy) keeps memory a thread freed
/// for 10 ms before giving it back to the system, and reads its options once, at the process's
/// first allocation. The report frees most of what its reading threads allocated just before it
/// counts visitors per value, so that memory stayed counted in its peak: with every breakdown,
/// up to 125 MB against 77 MB for the same work (500k lines). So the report starts itself
/// again, once, with `MIMALLOC_PURGE_DELAY=1` (mimalloc's own setting; an operator's value is
/// kept): 1 ms rather than 0, which gives back 2 MB more but took 5% longer, against 2% for 1
/// ms (the second start itself is 2.3 ms). If the start fails, the report runs as it is.
fn return_freed_memory_at_once() {
    use std::os::unix::process::CommandExt;
    const PURGE_DELAY: &str = "MIMALLOC_PURGE_DELAY";
    if std::env::var_os(PURGE_DELAY).is_some() {
        return;
    }
    let Ok(exe) = std::env::current_exe() else { return };
    // `exec` returns only when it failed.
    let failed = std::process::Command::new(exe).args(std::env::args_os().skip(1)).env(PURGE_DELAY, "1").exec();
    tracing::debug!("the report runs without {PURGE_DELAY}=1: {failed}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_date_is_a_whole_utc_day_and_a_time_an_instant() {
        assert_eq!(since("2026-11-22").unwrap().to_string(), "2026-11-22T00:00:00.0Z");
        assert_eq!(until("2026-11-22").unwrap().to_string(), "2026-11-23T00:00:00.0Z");
        assert_eq!(until("2026-12-31").unwrap().to_string(), "2027-01-01T00:00:00.0Z");
        assert_eq!(until("2026-11-22T10:00:00+01:00").unwrap().to_string(), "2026-11-22T09:00:00.0Z");
        assert!(since("yesterday").unwrap_err().contains("RFC 3339"));
    }
}
