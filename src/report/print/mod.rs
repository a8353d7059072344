//! The report written out: a table for people at a terminal, CSV and JSON for programs, and
//! one self-contained HTML page with charts.

use std::io::{self, Write};

use super::Report;

mod csv;
mod html;
mod table;

pub use self::csv::csv;
pub use html::html;
pub use table::table;

/// The report as JSON on one line (schema `couchlink-report/1`): a month of a busy log is tens
/// of megabytes pretty-printed; `jq .` indents it when a person wants to read it.
pub fn json(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    // serde_json writes a few bytes at a time: buffered here, where the writer's type is known,
    // rather than through `dyn Write` per write.
    let mut out = io::BufWriter::with_capacity(1 << 16, out);
    serde_json::to_writer(&mut out, report)?;
    out.write_all(b"\n")?;
    out.flush()
}
