//! Any CSV with a header row (comma, semicolon or tab separated), its columns named by flags;
//! the columns not named are kept as fields of the same name.

use std::sync::Arc;

use serde_json::{json, Value};

use super::{records, BadEntry, BadFile, Row};
use crate::domain::LinkWrite;
use crate::transfer::entry::{utc_time, Entry, Invalid};

/// Which columns hold what (`--url-column` and the others); header names match without regard
/// to case. A column named by a flag must exist; one left at its default may be absent.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Columns {
    /// CSV: the column of the target [default: url].
    #[arg(long)]
    pub url_column: Option<String>,
    /// CSV: the column of the short code, kept as the ID when it is 5 letters or digits [default: code].
    #[arg(long)]
    pub code_column: Option<String>,
    /// CSV: the column of the title [default: title].
    #[arg(long)]
    pub title_column: Option<String>,
    /// CSV: the column of tags, separated by `|` or `,` [default: tags].
    #[arg(long)]
    pub tags_column: Option<String>,
    /// CSV: the column of the creation time [default: created].
    #[arg(long)]
    pub created_column: Option<String>,
    /// CSV: the column of the expiry time [default: expires].
    #[arg(long)]
    pub expires_column: Option<String>,
}

/// The fields couchlink gives a meaning to: never taken from a column of the same name.
const RESERVED: &[&str] = &["url", "inactive", "expires", "valid_from", "fallback", "targets", "oob", "imported_from"];

pub(super) fn read(text: &str, file: &Arc<str>, columns: &Columns) -> Result<Vec<Row>, BadFile> {
    let mut reader = reader(text);
    let header: Vec<String> = reader.headers()?.iter().map(|h| h.trim().to_owned()).collect();
    let find = |given: &Option<String>, default: &str| -> Result<Option<usize>, BadFile> {
        let name = given.as_deref().unwrap_or(default);
        match header.iter().position(|h| h.eq_ignore_ascii_case(name)) {
            Some(at) => Ok(Some(at)),
            None if given.is_some() => Err(BadFile::NoNamedColumn { column: name.to_owned(), header: header.clone() }),
            None => Ok(None),
        }
    };
    let url = find(&columns.url_column, "url")?.ok_or_else(|| BadFile::NoUrlColumn(header.clone()))?;
    let code = find(&columns.code_column, "code")?;
    let title = find(&columns.title_column, "title")?;
    let tags = find(&columns.tags_column, "tags")?;
    let created = find(&columns.created_column, "created")?;
    let expires = find(&columns.expires_column, "expires")?;
    let named = [Some(url), code, title, tags, created, expires];
    let mut rows = Vec::new();
    for (place, record) in records(reader, text, file)? {
        let cell = |at: Option<usize>| at.and_then(|at| record.get(at)).map(str::trim).filter(|v| !v.is_empty());
        let row = (|| {
            let mut entry = Entry::new(place.clone(), cell(Some(url)).ok_or(BadEntry::EmptyCell("url"))?);
            entry.code = cell(code).map(str::to_owned);
            entry.created = cell(created).map(utc_time).transpose()?;
            let mut link = LinkWrite {
                expires: cell(expires).map(utc_time).transpose()?,
                title: cell(title).map(str::to_owned),
                ..LinkWrite::default()
            };
            let tags: Vec<&str> = cell(tags)
                .into_iter()
                .flat_map(|t| t.split(['|', ',']))
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .collect();
            link.tags = Some(tags.into_iter().map(Value::from).collect());
            entry.write(&link);
            for (at, name) in header.iter().enumerate() {
                if named.contains(&Some(at))
                    || name.is_empty()
                    || name.starts_with('_')
                    || RESERVED.contains(&name.as_str())
                {
                    continue;
                }
                entry.set(name, cell(Some(at)).map_or(Value::Null, |v| json!(v)));
            }
            Ok::<_, BadEntry>(entry)
        })();
        rows.push(row.map_err(|bad| Invalid { place, reason: bad.to_string() }));
    }
    Ok(rows)
}

/// A reader for `text`, separated by what its header line holds most of.
pub(super) fn reader(text: &str) -> ::csv::Reader<&[u8]> {
    let header = text.lines().next().unwrap_or_default();
    let delimiter =
        [b',', b';', b'\t'].into_iter().max_by_key(|d| header.bytes().filter(|b| b == d).count()).unwrap_or(b',');
    ::csv::ReaderBuilder::new().delimiter(delimiter).flexible(true).from_reader(text.as_bytes())
}
