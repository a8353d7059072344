//! YOURLS: its `yourls_url` table (`keyword, url, title, timestamp, ip, clicks`) as a CSV
//! export with its header (phpMyAdmin, or `mysql --batch`'s tab-separated output with
//! backslash escapes). The timestamp is the database server's local time, taken as UTC; the
//! visitor's IP and the click count are left behind.

use std::sync::Arc;

use super::{records, BadEntry, BadFile, Row};
use crate::domain::LinkWrite;
use crate::transfer::entry::{utc_time, Entry, Invalid};

pub(super) fn read(text: &str, file: &Arc<str>) -> Result<Vec<Row>, BadFile> {
    let tabs = text.lines().next().is_some_and(|h| h.contains('\t'));
    let mut reader = if tabs {
        ::csv::ReaderBuilder::new().delimiter(b'\t').quoting(false).flexible(true).from_reader(text.as_bytes())
    } else {
        super::csv::reader(text)
    };
    let header: Vec<String> = reader.headers()?.iter().map(|h| h.trim().to_lowercase()).collect();
    let column = |name: &str| header.iter().position(|h| h == name);
    let (keyword, url) = match (column("keyword"), column("url")) {
        (Some(k), Some(u)) => (k, u),
        _ => return Err(BadFile::NoYourlsColumns(header)),
    };
    let (title, timestamp) = (column("title"), column("timestamp"));
    let mut rows = Vec::new();
    for (place, record) in records(reader, text, file)? {
        let cell = |at: Option<usize>| {
            let value =
                at.and_then(|at| record.get(at)).map(str::trim).filter(|v| !(v.is_empty() || tabs && *v == "NULL"));
            value.map(|v| if tabs { unescape(v) } else { v.to_owned() })
        };
        let row = (|| {
            let mut entry = Entry::new(place.clone(), &cell(Some(url)).ok_or(BadEntry::EmptyCell("url"))?);
            entry.code = Some(cell(Some(keyword)).ok_or(BadEntry::EmptyCell("keyword"))?);
            entry.created = cell(timestamp).map(|t| utc_time(&t)).transpose()?;
            entry.write(&LinkWrite { title: cell(title), ..LinkWrite::default() });
            Ok::<_, BadEntry>(entry)
        })();
        rows.push(row.map_err(|bad| Invalid { place, reason: bad.to_string() }));
    }
    Ok(rows)
}

/// `mysql --batch`'s escapes undone: `\t`, `\n`, `\\`, `\0`.
fn unescape(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    let mut chars = v.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('0') => out.push('\0'),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `mysql --batch -e 'SELECT * FROM yourls_url'`: tabs, backslash escapes, NULL.
    #[test]
    fn the_tab_separated_output_of_mysql_batch() {
        let text = "keyword\turl\ttitle\ttimestamp\tip\tclicks\nab\thttps://example.com/\tTab\\there\t2019-08-21 14:40:03\t192.0.2.1\t4\ncd\thttps://example.org/\tNULL\tNULL\t192.0.2.2\t0\n";
        let rows = read(text, &"y.tsv".into()).unwrap();
        let first = rows[0].as_ref().unwrap();
        assert_eq!((first.code.as_deref(), first.place.line), (Some("ab"), 2));
        assert_eq!(first.fields["title"], "Tab\there");
        assert_eq!(first.created.as_deref(), Some("2019-08-21T14:40:03Z"));
        let second = rows[1].as_ref().unwrap();
        assert!(!second.fields.contains_key("title") && second.created.is_none());
        assert!(!first.fields.contains_key("ip") && !first.fields.contains_key("clicks"));
    }
}
