//! Reading exports: one file per system, each turning what that system writes into
//! [`Entry`]s. A row that cannot become a link is an [`Invalid`] naming its file and line; a
//! file that is not of its format at all is a [`ReadError`].

use std::path::Path;
use std::sync::Arc;

use serde_json::value::RawValue;
use serde_json::Value;

use super::entry::{BadTime, Entry, Invalid, Place, System};

mod bitly;
mod csv;
mod jsonl;
mod kutt;
mod shlink;
mod yourls;

pub use self::csv::Columns;

/// A row read: a link, or why it is none.
pub type Row = Result<Entry, Invalid>;

/// Why a row of an export cannot become a link (said after its place, as an [`Invalid`]'s
/// reason).
#[derive(Debug, thiserror::Error)]
pub enum BadEntry {
    /// A field an item must have is absent, null or empty.
    #[error("no \"{0}\"")]
    NoField(&'static str),
    /// A CSV row without a cell it must fill (Shlink's `shortUrl`).
    #[error("no {0}")]
    NoCell(&'static str),
    /// A cell that must hold something is empty (`url`, YOURLS's `keyword`).
    #[error("the {0} is empty")]
    EmptyCell(&'static str),
    /// A time field that holds no time.
    #[error("\"{field}\": {why}")]
    TimeField {
        /// The field.
        field: &'static str,
        /// What is wrong with it.
        why: BadTime,
    },
    /// A time cell that holds no time (any CSV, YOURLS).
    #[error(transparent)]
    Time(#[from] BadTime),
    /// Kutt: an item without its `address`.
    #[error("no \"address\": the short code")]
    NoKuttCode,
    /// Kutt: a link behind a password, which couchlink would open to anyone.
    #[error("{0} is password-protected in Kutt, and couchlink links have no password")]
    Password(String),
    /// Bitly: an item with neither `link` nor `id`.
    #[error("no \"link\" or \"id\": the bitlink")]
    NoBitlink,
    /// Bitly: a bitlink with nothing after its domain.
    #[error("the bitlink has no back-half")]
    NoBackHalf,
    /// Bitly: a CSV cell `archived` that is no boolean (lower-cased and trimmed, as read).
    #[error("\"archived\" is {0:?}, not true or false")]
    ArchivedCell(String),
    /// Bitly: a JSON `archived` that is no boolean.
    #[error("\"archived\" is {0}, not true or false")]
    ArchivedValue(Value),
    /// couchlink's export: a line that is no JSON object.
    #[error("not a JSON object: {0}")]
    NotAnObject(serde_json::Error),
    /// couchlink's export: an `_id` that is no string.
    #[error("\"_id\" is not a string")]
    IdNotAString,
    /// couchlink's export: a CouchDB field other than `_id` and `_rev`.
    #[error("\"{0}\" cannot be restored: only \"_id\" is")]
    Underscore(String),
}

/// Why a file could not be read at all.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// It could not be opened or read.
    #[error("cannot read {file}")]
    Io {
        /// The file.
        file: String,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// It is not what `--from` says.
    #[error("{file} is not {expected}: {reason}")]
    Format {
        /// The file.
        file: String,
        /// What `--from` expects, in words.
        expected: &'static str,
        /// What is wrong (said in the message, so no source of it).
        reason: BadFile,
    },
}

/// What makes a file no export of its format (said after what `--from` expects).
#[derive(Debug, thiserror::Error)]
pub enum BadFile {
    /// Not CSV the csv crate reads.
    #[error(transparent)]
    Csv(#[from] ::csv::Error),
    /// Not JSON, or not of the shape of an API page.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// An API page without its list of items (the keys leading to it, joined by `.`).
    #[error("no \"{0}\" list")]
    NoList(String),
    /// A header without a column the format always has.
    #[error("no {column:?} column (the header has {})", .header.join(", "))]
    NoColumn {
        /// The column.
        column: &'static str,
        /// The header's names.
        header: Vec<String>,
    },
    /// A header without the column a flag names (`--url-column` and the others).
    #[error("no column {column:?} (the header has {})", .header.join(", "))]
    NoNamedColumn {
        /// The column named.
        column: String,
        /// The header's names.
        header: Vec<String>,
    },
    /// Any CSV: a header with no `url` column, and no `--url-column`.
    #[error("no \"url\" column: name the target's with --url-column (the header has {})", .0.join(", "))]
    NoUrlColumn(Vec<String>),
    /// YOURLS: a header without `keyword` and `url`.
    #[error("no \"keyword\" and \"url\" columns (the header has {})", .0.join(", "))]
    NoYourlsColumns(Vec<String>),
}

/// Every row of `path`, read as `system` exports it (`columns` for `csv`).
pub fn read(system: System, path: &Path, columns: &Columns) -> Result<Vec<Row>, ReadError> {
    let file: Arc<str> = path.display().to_string().into();
    let io = |source| ReadError::Io { file: file.to_string(), source };
    let text = std::fs::read_to_string(path).map_err(io)?;
    let name = file.to_string();
    let format = |expected: &'static str| {
        let file = name.clone();
        move |reason: BadFile| ReadError::Format { file, expected, reason }
    };
    match system {
        System::Csv => csv::read(&text, &file, columns).map_err(format("a CSV file with a header")),
        System::Yourls => yourls::read(&text, &file).map_err(format("YOURLS's yourls_url table with its header")),
        System::Jsonl => jsonl::read(&text, &file).map_err(format("couchlink's JSON lines export")),
        // Bitly and Shlink: an API page (JSON), or the CSV a person downloads, told apart by
        // content.
        System::Bitly if !is_json(&text) => csv_items(&text, &file, &["long_url"], bitly::from_csv).map_err(format(
            "a Bitly CSV of links (a header with the API's names: id or link, long_url, title, created_at, archived, tags)",
        )),
        System::Bitly => {
            json_items(&text, &file, &["links"], bitly::entry).map_err(format("a Bitly API v4 page of links"))
        }
        System::Kutt => json_items(&text, &file, &["data"], kutt::entry).map_err(format("a Kutt API v2 page of links")),
        System::Shlink if !is_json(&text) => csv_items(&text, &file, &["shortUrl", "longUrl"], shlink::from_csv)
            .map_err(format("a Shlink web client CSV export (short_urls.csv)")),
        System::Shlink => json_items(&text, &file, &["shortUrls", "data"], shlink::entry)
            .map_err(format("a Shlink REST API page of short URLs")),
    }
}

/// Whether `text` is JSON (an API page, or a list) rather than CSV: by its first character.
fn is_json(text: &str) -> bool {
    matches!(text.trim_start_matches('\u{feff}').trim_start().chars().next(), Some('{' | '['))
}

/// The records of a CSV export with a header, each as a JSON object of the header's names and
/// the cells' text (empty cells left out), turned into an entry by `entry` with the line it
/// starts on. The header must name every column of `required` (its case as written).
fn csv_items(
    text: &str,
    file: &Arc<str>,
    required: &[&'static str],
    entry: fn(&Value, Place) -> Result<Entry, BadEntry>,
) -> Result<Vec<Row>, BadFile> {
    let text = text.trim_start_matches('\u{feff}');
    let mut reader = csv::reader(text);
    let header: Vec<String> = reader.headers()?.iter().map(|h| h.trim().to_owned()).collect();
    if let Some(missing) = required.iter().find(|r| !header.iter().any(|h| h == *r)) {
        return Err(BadFile::NoColumn { column: missing, header });
    }
    let mut rows = Vec::new();
    for (place, record) in records(reader, text, file)? {
        let item: serde_json::Map<String, Value> = header
            .iter()
            .zip(record.iter())
            .filter(|(_, cell)| !cell.trim().is_empty())
            .map(|(name, cell)| (name.clone(), Value::String(cell.trim().to_owned())))
            .collect();
        rows.push(entry(&Value::Object(item), place.clone()).map_err(|bad| Invalid { place, reason: bad.to_string() }));
    }
    Ok(rows)
}

/// A list of tags as an export's CSV cell holds it: a JSON list, or names separated by `|` or
/// `,`.
fn tags_cell(cell: Option<&str>) -> Value {
    let Some(cell) = cell else { return Value::Array(Vec::new()) };
    if let Ok(list @ Value::Array(_)) = serde_json::from_str::<Value>(cell) {
        return list;
    }
    let names: Vec<&str> = cell.split(['|', ',']).map(str::trim).filter(|t| !t.is_empty()).collect();
    serde_json::json!(names)
}

/// The items of an API page (`{"links": [...]}`, the list under `path`) or of a bare list,
/// each turned into an entry by `entry` with the line it starts on.
fn json_items(
    text: &str,
    file: &Arc<str>,
    path: &[&str],
    entry: fn(&Value, Place) -> Result<Entry, BadEntry>,
) -> Result<Vec<Row>, BadFile> {
    let mut list: &RawValue = serde_json::from_str(text)?;
    if !list.get().starts_with('[') {
        for key in path {
            let object: std::collections::HashMap<String, &RawValue> = serde_json::from_str(list.get())?;
            list = object.get(*key).copied().ok_or_else(|| BadFile::NoList(path.join(".")))?;
        }
    }
    let items: Vec<&RawValue> = serde_json::from_str(list.get())?;
    let mut lines = Lines::of(text);
    let mut rows = Vec::with_capacity(items.len());
    for item in items {
        let line = lines.at(item.get().as_ptr() as usize - text.as_ptr() as usize);
        let place = Place { file: file.clone(), line };
        let value: Value = serde_json::from_str(item.get())?;
        rows.push(entry(&value, place.clone()).map_err(|bad| Invalid { place, reason: bad.to_string() }));
    }
    Ok(rows)
}

/// The line of each offset into a text, for offsets met in order (each byte counted once).
struct Lines<'a> {
    text: &'a [u8],
    line: u64,
    counted: usize,
}

impl<'a> Lines<'a> {
    fn of(text: &'a str) -> Self {
        Lines { text: text.as_bytes(), line: 1, counted: 0 }
    }

    /// The line (1-based) of byte `offset`, at or after the last one asked.
    fn at(&mut self, offset: usize) -> u64 {
        let offset = offset.min(self.text.len());
        self.line += memchr::memchr_iter(b'\n', &self.text[self.counted.min(offset)..offset]).count() as u64;
        self.counted = self.counted.max(offset);
        self.line
    }

    /// The line of the first byte at or after `offset` that is no line break (the csv crate
    /// may place a record of a CRLF file at the `\n` ending the one before).
    fn of_record(&mut self, mut offset: usize) -> u64 {
        while matches!(self.text.get(offset), Some(b'\r' | b'\n')) {
            offset += 1;
        }
        self.at(offset)
    }
}

/// Every record of a CSV reader over `text`, with where it starts (the csv crate's own line
/// numbers drift on CRLF files: counted here from each record's byte offset).
fn records(
    mut reader: ::csv::Reader<&[u8]>,
    text: &str,
    file: &Arc<str>,
) -> Result<Vec<(Place, ::csv::StringRecord)>, BadFile> {
    let mut lines = Lines::of(text);
    let mut records = Vec::new();
    for record in reader.records() {
        let record = record?;
        let line = lines.of_record(record.position().map_or(0, |p| p.byte() as usize));
        records.push((Place { file: file.clone(), line }, record));
    }
    Ok(records)
}

/// A string field of an API item, `None` when absent, null or empty.
fn text<'a>(item: &'a Value, name: &str) -> Option<&'a str> {
    item.get(name).and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty())
}

/// A time field of an API item as the document holds times.
fn time_field(item: &Value, name: &'static str) -> Result<Option<String>, BadEntry> {
    text(item, name)
        .map(|t| super::entry::utc_time(t).map_err(|why| BadEntry::TimeField { field: name, why }))
        .transpose()
}

/// The tags of an item: a list of strings.
fn tags(item: &Value, name: &str) -> Vec<Value> {
    let tags: Vec<&str> =
        item.get(name).and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    tags.into_iter().map(Value::from).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_of_a_page_carry_the_line_they_start_on() {
        let text = "{\n  \"data\": [\n    {\"address\": \"a\", \"target\": \"https://a.example/\"},\n\n    {\"address\": \"b\",\n     \"target\": \"https://b.example/\"}\n  ]\n}\n";
        let rows = json_items(text, &"k.json".into(), &["data"], kutt::entry).unwrap();
        let lines: Vec<u64> = rows.iter().map(|r| r.as_ref().unwrap().place.line).collect();
        assert_eq!(lines, [3, 5]);
        let bare = json_items(
            "[{\"address\": \"a\", \"target\": \"https://a.example/\"}]",
            &"k.json".into(),
            &["data"],
            kutt::entry,
        );
        assert_eq!(bare.unwrap().len(), 1);
        let no_list = json_items("{\"links\": []}", &"k.json".into(), &["data"], kutt::entry).unwrap_err();
        assert_eq!(no_list.to_string(), "no \"data\" list");
    }
}
