//! `couchlink export`: every link of the database, every field, as JSON lines or CSV.

use std::io::{BufWriter, Write};
use std::path::PathBuf;

use clap::Args;

use super::CouchArgs;
use crate::couch::CouchClient;
use crate::transfer::export::{export, ExportError, Format};

/// Flags of `couchlink export`.
#[derive(Debug, Clone, Args)]
#[command(mut_arg("couchdb_user", |a| a.help("A CouchDB account that may read links (the proxy's read-only one will do)")))]
pub struct ExportArgs {
    /// `jsonl` is what `couchlink import --from jsonl` restores; `csv` is for spreadsheets.
    #[arg(long, value_enum, default_value_t = Format::Jsonl)]
    pub format: Format,
    /// Write to this file (whole, or not at all) instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub couch: CouchArgs,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub on: super::DomainChoice,
}

/// Why an export failed.
#[derive(Debug, thiserror::Error)]
pub enum ExportCommandError {
    /// Reading or writing stopped.
    #[error(transparent)]
    Export(#[from] ExportError),
    /// The output file could not be made.
    #[error("cannot write {path}")]
    Out {
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

impl ExportArgs {
    /// Writes the export and says how many links it holds on stderr.
    pub fn execute(self) -> Result<(), ExportCommandError> {
        let reader = CouchClient::new(&self.couch.clone().into()).map_err(|e| ExportCommandError::Export(e.into()))?;
        let runtime = super::current_thread_runtime().map_err(ExportCommandError::Runtime)?;
        let count = match &self.out {
            None => runtime.block_on(export(&reader, self.format, &mut BufWriter::new(std::io::stdout().lock())))?,
            Some(path) => {
                // Written beside, then renamed: a failed export never leaves half a file under
                // the name a restore would read.
                let out_error = |source| ExportCommandError::Out { path: path.clone(), source };
                let mut partial = path.as_os_str().to_owned();
                partial.push(".partial");
                let partial = PathBuf::from(partial);
                let mut file = BufWriter::new(std::fs::File::create(&partial).map_err(out_error)?);
                let count = runtime.block_on(export(&reader, self.format, &mut file));
                let count = count.and_then(|count| {
                    file.into_inner().map_err(|e| e.into_error())?.sync_all()?;
                    Ok(count)
                });
                let count = match count {
                    Ok(count) => count,
                    Err(e) => {
                        let _ = std::fs::remove_file(&partial);
                        return Err(e.into());
                    }
                };
                std::fs::rename(&partial, path).map_err(out_error)?;
                count
            }
        };
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err, "exported {count} links");
        Ok(())
    }
}
