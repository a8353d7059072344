//! couchlink's own export (`couchlink export --format jsonl`): one document per line, each
//! restored as it is, under its own ID.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::{BadEntry, BadFile, Row};
use crate::transfer::entry::{Entry, Invalid, Place};

pub(super) fn read(text: &str, file: &Arc<str>) -> Result<Vec<Row>, BadFile> {
    let mut rows = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let place = Place { file: file.clone(), line: n as u64 + 1 };
        let row = (|| {
            let doc: Map<String, Value> = serde_json::from_str(line).map_err(BadEntry::NotAnObject)?;
            let mut fields = Map::new();
            let mut id = None;
            for (name, value) in doc {
                match name.as_str() {
                    "_id" => id = Some(value.as_str().ok_or(BadEntry::IdNotAString)?.to_owned()),
                    // The source database's revision means nothing in this one.
                    "_rev" => {}
                    _ if name.starts_with('_') => return Err(BadEntry::Underscore(name)),
                    _ => {
                        fields.insert(name, value);
                    }
                }
            }
            Ok(Entry {
                place: place.clone(),
                code: Some(id.ok_or(BadEntry::NoField("_id"))?),
                short_url: None,
                created: None,
                fields,
            })
        })();
        rows.push(row.map_err(|bad: BadEntry| Invalid { place, reason: bad.to_string() }));
    }
    Ok(rows)
}
