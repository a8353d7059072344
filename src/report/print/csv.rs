//! CSV (RFC 4180): one row per link, then one per target version of it; with breakdowns, one
//! row per value of each breakdown of each link and version (long format).

use std::io::{self, Write};

use super::super::summary::{By, Counts};
use super::super::Report;

/// The header row; columns are only ever added at the end.
pub const HEADER: &str = "link,version,location,first_seen,last_seen,redirects,human_redirects,bot_redirects,\
visitors,new_visitors,human_visitors,bot_visitors";

/// The header row with breakdowns; columns are only ever added at the end.
pub const BY_HEADER: &str = "link,version,breakdown,value,redirects,visitors";

/// Writes the links as CSV: a row with `version` = `all` and an empty `location` for each link,
/// followed by a row per target version (`version` 1, 2, ...). Totals are in the other formats.
/// With breakdowns, their values instead ([`BY_HEADER`]): the link's (`version` = `all`), then
/// each version's.
pub fn csv(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    if !report.breakdowns.is_empty() {
        writeln!(out, "{BY_HEADER}")?;
        for link in &report.links {
            by_rows(out, &link.id, "all", &link.by)?;
            for v in &link.versions {
                by_rows(out, &link.id, &v.version.to_string(), &v.by)?;
            }
        }
        return Ok(());
    }
    writeln!(out, "{HEADER}")?;
    for link in &report.links {
        row(out, &link.id, "all", "", &link.first_seen, &link.last_seen, &link.counts)?;
        for v in &link.versions {
            row(out, &link.id, &v.version.to_string(), &v.location, &v.first_seen, &v.last_seen, &v.counts)?;
        }
    }
    Ok(())
}

fn row(
    out: &mut dyn Write,
    id: &str,
    version: &str,
    location: &str,
    first: &str,
    last: &str,
    c: &Counts,
) -> io::Result<()> {
    writeln!(
        out,
        "{id},{version},{},{first},{last},{},{},{},{},{},{},{}",
        quoted(location),
        c.redirects,
        c.human_redirects,
        c.bot_redirects,
        c.visitors,
        c.new_visitors,
        c.human_visitors,
        c.bot_visitors
    )
}

fn by_rows(out: &mut dyn Write, id: &str, version: &str, by: &By) -> io::Result<()> {
    for (breakdown, values) in by.iter() {
        for v in values {
            writeln!(out, "{id},{version},{},{},{},{}", breakdown.name(), quoted(&v.value), v.redirects, v.visitors)?;
        }
    }
    Ok(())
}

/// A field as RFC 4180 wants it: quoted, quotes doubled, when it holds a comma or a quote.
fn quoted(field: &str) -> std::borrow::Cow<'_, str> {
    if field.contains([',', '"', '\r', '\n']) {
        format!("\"{}\"", field.replace('"', "\"\"")).into()
    } else {
        field.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_with_commas_or_quotes_are_quoted() {
        assert_eq!(quoted("https://e.x/?a=1"), "https://e.x/?a=1");
        assert_eq!(quoted("https://e.x/?a=1,2"), "\"https://e.x/?a=1,2\"");
        assert_eq!(quoted("https://e.x/\"q\""), "\"https://e.x/\"\"q\"\"\"");
    }
}
