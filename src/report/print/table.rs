//! A plain-text table, for a terminal: links with their versions beneath, then the totals.

use std::io::{self, Write};

use super::super::summary::{By, Counts};
use super::super::Report;

/// Not-found paths listed (the JSON has them all).
const TOP_NOT_FOUND: usize = 10;
/// Values listed per breakdown (the JSON has them all).
const TOP_VALUES: usize = 5;

/// Writes the report as aligned columns.
pub fn table(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    let t = &report.totals;
    let range = match (&report.since, &report.until) {
        (None, None) => String::new(),
        (since, until) => format!(
            ", from {} until {}",
            since.as_deref().unwrap_or("the start"),
            until.as_deref().unwrap_or("the end")
        ),
    };
    writeln!(
        out,
        "{} lines in {} files{range}: {} in range, {} malformed",
        t.lines,
        report.files.len(),
        t.in_range,
        t.malformed
    )?;
    writeln!(out)?;
    writeln!(
        out,
        "{:<7} {:>9} {:>8} {:>8} {:>9} {:>8} {:>8} {:>8}  {:<22}  {:<22}  LOCATION",
        "LINK", "REDIRECTS", "HUMAN", "BOT", "VISITORS", "NEW", "HUMAN-V", "BOT-V", "FIRST", "LAST"
    )?;
    for link in &report.links {
        row(out, &link.id, &link.counts, &link.first_seen, &link.last_seen, "")?;
        for v in &link.versions {
            row(out, &format!("  v{}", v.version), &v.counts, &v.first_seen, &v.last_seen, &v.location)?;
        }
    }
    if report.links.is_empty() {
        writeln!(out, "(no redirects)")?;
    }
    if !report.breakdowns.is_empty() && !report.links.is_empty() {
        writeln!(out)?;
        writeln!(out, "Breakdowns (value redirects/visitors, the top {TOP_VALUES}):")?;
        for link in &report.links {
            writeln!(out, "{}", link.id)?;
            by(out, "", &link.by)?;
            for v in &link.versions {
                by(out, &format!("v{} ", v.version), &v.by)?;
            }
        }
    }
    writeln!(out)?;
    let statuses: Vec<String> = t.statuses.iter().map(|(s, n)| format!("{s}: {n}")).collect();
    writeln!(out, "Responses by status: {}", if statuses.is_empty() { "none".into() } else { statuses.join(", ") })?;
    if !t.not_found.is_empty() {
        writeln!(out, "Not found, by path (top {} of {}):", TOP_NOT_FOUND.min(t.not_found.len()), t.not_found.len())?;
        for p in t.not_found.iter().take(TOP_NOT_FOUND) {
            writeln!(out, "{:>9}  {}", p.count, p.path)?;
        }
    }
    if t.malformed > 0 {
        writeln!(out, "Malformed lines: {} (the first {}):", t.malformed, t.malformed_lines.len())?;
        for m in &t.malformed_lines {
            writeln!(out, "  {}:{}: {}: {}", m.file, m.line, m.reason, m.text)?;
        }
    }
    Ok(())
}

/// A line per breakdown: its top values, and how many others.
fn by(out: &mut dyn Write, version: &str, by: &By) -> io::Result<()> {
    for (breakdown, values) in by.iter() {
        let top: Vec<String> =
            values.iter().take(TOP_VALUES).map(|v| format!("{} {}/{}", v.value, v.redirects, v.visitors)).collect();
        let more = values.len().saturating_sub(TOP_VALUES);
        let more = if more > 0 { format!(", {more} more") } else { String::new() };
        let name = format!("{version}{}", breakdown.name());
        writeln!(out, "  {name:<16} {}{more}", top.join(", "))?;
    }
    Ok(())
}

fn row(out: &mut dyn Write, name: &str, c: &Counts, first: &str, last: &str, location: &str) -> io::Result<()> {
    let line = format!(
        "{name:<7} {:>9} {:>8} {:>8} {:>9} {:>8} {:>8} {:>8}  {first:<22}  {last:<22}  {location}",
        c.redirects, c.human_redirects, c.bot_redirects, c.visitors, c.new_visitors, c.human_visitors, c.bot_visitors
    );
    writeln!(out, "{}", line.trim_end())
}
