//! One link as another system exported it, turned into the fields of a couchlink document.

use std::fmt;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::domain::{ImportedFrom, LinkWrite};

/// The systems `couchlink import` reads (`--from`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum System {
    /// Any CSV with a header; columns chosen by flags.
    Csv,
    /// Shlink's REST API pages (`GET /rest/v3/short-urls`).
    Shlink,
    /// YOURLS's `yourls_url` table, as CSV or tab-separated with its header.
    Yourls,
    /// Bitly's API v4 pages (`GET /v4/groups/{group}/bitlinks`).
    Bitly,
    /// Kutt's API v2 pages (`GET /api/v2/links`).
    Kutt,
    /// couchlink's own `export --format jsonl`: a restore.
    Jsonl,
}

impl System {
    /// The name written in `imported_from.system`.
    pub fn as_str(self) -> &'static str {
        match self {
            System::Csv => "csv",
            System::Shlink => "shlink",
            System::Yourls => "yourls",
            System::Bitly => "bitly",
            System::Kutt => "kutt",
            System::Jsonl => "couchlink",
        }
    }
}

/// Where a row was read: file and line (1-based), as messages name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    /// The file as given on the command line.
    pub file: Arc<str>,
    /// Its line.
    pub line: u64,
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

/// A row that cannot be imported, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    /// Where it was read.
    pub place: Place,
    /// Why, for people (the validation function's own words where it refused).
    pub reason: String,
}

/// One link read from an export.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// Where it was read.
    pub place: Place,
    /// The source's short code (`3AbCdEf`, `spring-sale`), or the document ID of a restore.
    pub code: Option<String>,
    /// The source's short URL (`https://bit.ly/3AbCdEf`), when the export says it.
    pub short_url: Option<String>,
    /// When the source created it (RFC 3339, UTC), when known.
    pub created: Option<String>,
    /// The document's fields, without `_id` and `imported_from`.
    pub fields: Map<String, Value>,
}

impl Entry {
    /// An entry for `url` read at `place`, with `inactive: false` and nothing else.
    pub fn new(place: Place, url: &str) -> Entry {
        Entry { place, code: None, short_url: None, created: None, fields: LinkWrite::new_link(url).to_map() }
    }

    /// Writes the fields `link` has, each unless it is empty (`""`, `[]`).
    pub fn write(&mut self, link: &LinkWrite) {
        for (name, value) in link.to_map() {
            self.set(&name, value);
        }
    }

    /// Sets field `name`, one couchlink gives no meaning to (a CSV's other columns), to `value`
    /// unless the value is empty (`""`, `[]`, `null`).
    pub fn set(&mut self, name: &str, value: Value) {
        let empty = match &value {
            Value::Null => true,
            Value::String(s) => s.is_empty(),
            Value::Array(a) => a.is_empty(),
            _ => false,
        };
        if !empty {
            self.fields.insert(name.to_owned(), value);
        }
    }

    /// What tells this link from the source's others, to find it again on a second run: its
    /// short URL where the export gives one (Shlink's codes are unique per domain only), else
    /// its code, else its target.
    pub fn key(&self) -> &str {
        self.short_url
            .as_deref()
            .or(self.code.as_deref())
            .unwrap_or_else(|| self.fields.get("url").and_then(Value::as_str).unwrap_or_default())
    }

    /// `imported_from` for this entry: the system, and the code, short URL and creation time
    /// the source gave.
    pub fn imported_from(&self, system: System) -> ImportedFrom {
        ImportedFrom {
            code: self.code.clone(),
            created: self.created.clone(),
            short_url: self.short_url.clone(),
            system: system.as_str(),
        }
    }
}

/// The key [`Entry::key`] gives for a document an earlier import stored, if it came from
/// `system`.
pub fn stored_key(system: System, doc: &Value) -> Option<&str> {
    let from = doc.get("imported_from")?;
    if from.get("system")?.as_str()? != system.as_str() {
        return None;
    }
    from.get("short_url").or_else(|| from.get("code")).or_else(|| doc.get("url")).and_then(Value::as_str)
}

/// Why an export's time is none the document can hold.
#[derive(Debug, thiserror::Error)]
pub enum BadTime {
    /// In none of the forms [`utc_time`] reads (the text as written, trimmed).
    #[error("{0:?} is not a date and time (like 2024-03-05T10:00:00Z)")]
    Unreadable(String),
    /// Read, but not writable in RFC 3339 once in UTC (a year past 9999).
    #[error(transparent)]
    Format(#[from] time::error::Format),
}

/// An export's time as the document holds times (RFC 3339, UTC, whole seconds): RFC 3339
/// (`2024-03-05T10:00:00+01:00`, `...Z`, with fractions), ISO 8601 with a `+0000` offset
/// (Bitly), a MySQL `2024-03-05 10:00:00` (YOURLS; taken as UTC), or a date alone.
pub fn utc_time(text: &str) -> Result<String, BadTime> {
    use time::format_description::well_known::{Iso8601, Rfc3339};
    use time::macros::format_description;
    use time::{OffsetDateTime, PrimitiveDateTime, UtcOffset};
    let text = text.trim();
    let at = OffsetDateTime::parse(text, &Rfc3339)
        .or_else(|_| OffsetDateTime::parse(text, &Iso8601::DEFAULT))
        .or_else(|_| {
            PrimitiveDateTime::parse(text, format_description!("[year]-[month]-[day] [hour]:[minute]:[second]"))
                .map(PrimitiveDateTime::assume_utc)
        })
        .or_else(|_| {
            time::Date::parse(text, format_description!("[year]-[month]-[day]")).map(|d| d.midnight().assume_utc())
        })
        .map_err(|_| BadTime::Unreadable(text.to_owned()))?;
    let at = at.to_offset(UtcOffset::UTC);
    Ok(at.replace_nanosecond(0).unwrap_or(at).format(&Rfc3339)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_from_each_export_become_utc_rfc3339() {
        for (given, wanted) in [
            ("2024-03-05T10:00:00+01:00", "2024-03-05T09:00:00Z"),
            ("2024-03-05T10:00:00.123Z", "2024-03-05T10:00:00Z"),
            ("2021-02-12T18:37:26+0000", "2021-02-12T18:37:26Z"),
            ("2019-08-21 14:40:03", "2019-08-21T14:40:03Z"),
            ("2026-12-31", "2026-12-31T00:00:00Z"),
        ] {
            assert_eq!(utc_time(given).unwrap(), wanted, "{given}");
        }
        assert_eq!(
            utc_time(" yesterday ").unwrap_err().to_string(),
            "\"yesterday\" is not a date and time (like 2024-03-05T10:00:00Z)"
        );
    }

    #[test]
    fn the_key_prefers_the_short_url_then_the_code_then_the_target() {
        let place = Place { file: "f".into(), line: 1 };
        let mut entry = Entry::new(place, "https://example.com/");
        assert_eq!(entry.key(), "https://example.com/");
        entry.code = Some("abc".into());
        assert_eq!(entry.key(), "abc");
        entry.short_url = Some("https://s.example/abc".into());
        assert_eq!(entry.key(), "https://s.example/abc");
        let mut doc = Value::Object(entry.fields.clone());
        doc["imported_from"] = serde_json::to_value(entry.imported_from(System::Kutt)).unwrap();
        assert_eq!(stored_key(System::Kutt, &doc), Some(entry.key()));
        assert_eq!(stored_key(System::Bitly, &doc), None);
    }
}
