//! `couchlink import`: links from another shortener's export (or couchlink's own), written as
//! the editor account; safe to run again.

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};

use super::{BadCredentials, CouchArgs};
use crate::couch::{CouchClient, CouchError};
use crate::domain::PublicUrl;
use crate::transfer::entry::System;
use crate::transfer::import::{import, Import, ImportError, Outcome, Progress};
use crate::transfer::read::{self, Columns, ReadError};

/// Flags of `couchlink import`.
#[derive(Debug, Clone, Args)]
#[command(mut_arg("couchdb_user", |a| a.help("A CouchDB account with the editor role (it writes the links)")))]
pub struct ImportArgs {
    /// Export files, all written by the system --from names.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// What wrote them (docs/import.md shows how to get each export).
    #[arg(long, value_enum)]
    pub from: System,
    /// Check every row (the database's validation included) and say what would happen; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Import the valid rows even when others are not (each is listed with its reason).
    #[arg(long)]
    pub skip_invalid: bool,
    /// Where the links given new IDs are listed (old short URL, new short URL) [default: FILE.mapping.csv, beside the first file].
    #[arg(long, value_name = "FILE")]
    pub mapping: Option<PathBuf>,
    /// The old short links' base URL, for exports that give codes only (YOURLS, CSV), e.g.
    /// https://sho.rt: the mapping file then lists whole short URLs.
    #[arg(long, value_name = "URL")]
    pub old_base: Option<String>,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub columns: Columns,
    /// Address redirects are served on (the base of new short URLs when no public URL is set).
    #[arg(long, env = "COUCHLINK_LISTEN", default_value = "0.0.0.0:8080")]
    pub listen: SocketAddr,
    /// The short links' base URL, e.g. https://0x1f.ie.
    #[arg(long, env = "COUCHLINK_PUBLIC_URL")]
    pub public_url: Option<PublicUrl>,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub couch: CouchArgs,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub on: super::DomainChoice,
}

/// Why an import failed.
#[derive(Debug, thiserror::Error)]
pub enum ImportCommandError {
    /// A file could not be read as its format.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// CouchDB refused the account.
    #[error(transparent)]
    Credentials(BadCredentials),
    /// The import stopped.
    #[error(transparent)]
    Import(ImportError),
    /// CouchDB cannot be talked to.
    #[error("cannot talk to CouchDB")]
    Couch(#[source] CouchError),
    /// The mapping file could not be written.
    #[error("cannot write the mapping file {path}")]
    Mapping {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The async runtime could not start.
    #[error("cannot start the async runtime")]
    Runtime(#[source] std::io::Error),
}

impl ImportArgs {
    /// Reads every file, imports, writes the mapping file and prints what was done.
    pub fn execute(self) -> Result<(), ImportCommandError> {
        let mut rows = Vec::new();
        for file in &self.files {
            rows.extend(read::read(self.from, file, &self.columns)?);
        }
        let editor = CouchClient::new(&self.couch.clone().into()).map_err(ImportCommandError::Couch)?;
        let how = Import { system: self.from, dry_run: self.dry_run, skip_invalid: self.skip_invalid };
        let bar = ProgressBar::new(0).with_style(
            ProgressStyle::with_template("{bar:40} {pos}/{len} links {msg}, {eta} left").expect("a valid template"),
        );
        let progress = |progress: Progress| {
            let (step, done, total) = match progress {
                Progress::Checking { done, total } => ("checked", done, total),
                Progress::Writing { done, total } => ("written", done, total),
            };
            if bar.message() != step {
                bar.reset();
                bar.set_length(total);
                bar.set_message(step);
            }
            bar.set_length(total);
            bar.set_position(done);
        };
        let runtime = super::current_thread_runtime().map_err(ImportCommandError::Runtime)?;
        let result = runtime.block_on(import(&editor, how, rows, &progress));
        bar.finish_and_clear();
        let outcome = match result {
            Ok(outcome) => outcome,
            Err(ImportError::Invalid(outcome)) => {
                list_invalid(&outcome, "");
                return Err(ImportCommandError::Import(ImportError::Invalid(outcome)));
            }
            Err(ImportError::RefusedWhileWriting(outcome)) => {
                list_invalid(&outcome, "");
                self.write_mapping(&outcome)?;
                return Err(ImportCommandError::Import(ImportError::RefusedWhileWriting(outcome)));
            }
            Err(ImportError::Interrupted { outcome, total, from, source }) => {
                list_invalid(&outcome, "skipped ");
                self.write_mapping(&outcome)?;
                return Err(ImportCommandError::Import(ImportError::Interrupted { outcome, total, from, source }));
            }
            Err(ImportError::Lookup(CouchError::Refused { status, reason, .. })) if status == 401 => {
                let e = BadCredentials::of(&editor, status, &reason).expect("a 401");
                return Err(ImportCommandError::Credentials(e));
            }
            Err(e) => return Err(ImportCommandError::Import(e)),
        };
        list_invalid(&outcome, "skipped ");
        let mapping = if self.dry_run { None } else { self.write_mapping(&outcome)? };
        println!("{}", self.summary(&outcome, mapping.as_deref()));
        Ok(())
    }

    /// The one line that says what was done.
    fn summary(&self, outcome: &Outcome, mapping: Option<&Path>) -> String {
        let files = match self.files.len() {
            1 => "1 file".to_owned(),
            n => format!("{n} files"),
        };
        let renamed = outcome.written.iter().filter(|s| !s.kept).count();
        let mut line = if self.dry_run {
            format!(
                "dry run, nothing written: {} of {} rows from {files} would be imported",
                outcome.written.len(),
                outcome.read
            )
        } else {
            format!("imported {} of {} rows from {files}", outcome.written.len(), outcome.read)
        };
        if renamed > 0 {
            line.push_str(&format!(", {renamed} under new IDs"));
        }
        if let Some(mapping) = mapping {
            line.push_str(&format!(" (old and new short URLs in {})", mapping.display()));
        }
        if !outcome.already.is_empty() {
            line.push_str(&format!("; {} already imported, skipped", outcome.already.len()));
        }
        if !outcome.invalid.is_empty() {
            line.push_str(&format!("; {} invalid, skipped", outcome.invalid.len()));
        }
        line
    }

    /// Writes the mapping file when any link is under an ID other than its code (now or on an
    /// earlier run); its path.
    fn write_mapping(&self, outcome: &Outcome) -> Result<Option<PathBuf>, ImportCommandError> {
        if outcome.renamed().next().is_none() {
            return Ok(None);
        }
        let path = self.mapping.clone().unwrap_or_else(|| {
            let mut name = self.files[0].as_os_str().to_owned();
            name.push(".mapping.csv");
            PathBuf::from(name)
        });
        let public_url = self.public_url.clone().unwrap_or_else(|| PublicUrl::from_listen(self.listen));
        let base = self.old_base.as_deref().map(|b| b.trim_end_matches('/'));
        let write = || -> std::io::Result<()> {
            let partial = path.with_extension("csv.partial");
            let mut out = csv::Writer::from_writer(std::io::BufWriter::new(std::fs::File::create(&partial)?));
            out.write_record(["old_short_url", "new_short_url"])?;
            for stored in outcome.renamed() {
                let code = stored.code.as_deref().unwrap_or_default();
                let old = match (&stored.short_url, base) {
                    (Some(url), _) => url.clone(),
                    (None, Some(base)) => format!("{base}/{code}"),
                    (None, None) => code.to_owned(),
                };
                out.write_record([old, public_url.short_url(&stored.id)])?;
            }
            out.into_inner().map_err(|e| e.into_error())?.flush()?;
            std::fs::rename(&partial, &path)
        };
        write().map_err(|source| ImportCommandError::Mapping { path: path.clone(), source })?;
        Ok(Some(path))
    }
}

/// Each invalid row on stderr, with its file, line and reason.
fn list_invalid(outcome: &Outcome, prefix: &str) {
    let mut err = std::io::stderr().lock();
    for invalid in &outcome.invalid {
        let _ = writeln!(err, "{prefix}{}: {}", invalid.place, invalid.reason);
    }
}
