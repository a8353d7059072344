//! `couchlink export`: every link of the database, with every field, in a stable order:
//! links by ID as CouchDB lists them (`_all_docs`), and in each the fields `_id`, then
//! [`FIELDS`] in that order, then any other in the order of their names. `_rev` is left out:
//! it means nothing in another database.

use std::io::Write;

use serde_json::{Map, Value};

use crate::couch::{CouchClient, CouchError};

/// The fields couchlink gives a meaning to, in the order an export writes them.
pub const FIELDS: [&str; 8] =
    ["url", "inactive", "expires", "valid_from", "fallback", "targets", "oob", "imported_from"];

/// Documents read from CouchDB per request.
const PAGE: usize = 1000;

/// The export formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// One JSON document per line, as stored (`import --from jsonl` restores it).
    Jsonl,
    /// A header and one row per link: `id`, the fields of [`FIELDS`] (lists and objects as
    /// JSON), and `other`, every other field as one JSON object.
    Csv,
}

/// Why an export stopped.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// CouchDB could not be read.
    #[error("cannot read the links")]
    Couch(#[from] CouchError),
    /// The output could not be written.
    #[error("cannot write the export")]
    Write(#[from] std::io::Error),
}

/// Writes every link of `reader`'s database to `out` as `format`; the number of links.
pub async fn export(reader: &CouchClient, format: Format, out: &mut dyn Write) -> Result<usize, ExportError> {
    if format == Format::Csv {
        let header: Vec<&str> = ["id"].into_iter().chain(FIELDS).chain(["other"]).collect();
        writeln!(out, "{}", header.join(","))?;
    }
    let mut count = 0;
    reader
        .each_doc(PAGE, |id, doc| {
            let Value::Object(doc) = doc else { return Ok::<_, ExportError>(()) };
            if id.starts_with("_design/") {
                return Ok(());
            }
            match format {
                Format::Jsonl => writeln!(out, "{}", jsonl_line(doc))?,
                Format::Csv => writeln!(out, "{}", csv_row(doc))?,
            }
            count += 1;
            Ok(())
        })
        .await?;
    out.flush()?;
    Ok(count)
}

/// The document's fields in export order, `_rev` left out.
fn ordered(doc: &Map<String, Value>) -> Vec<(&str, &Value)> {
    let known = ["_id"].into_iter().chain(FIELDS).filter_map(|name| doc.get_key_value(name));
    let mut others: Vec<_> =
        doc.iter().filter(|(name, _)| *name != "_rev" && *name != "_id" && !FIELDS.contains(&name.as_str())).collect();
    others.sort_by(|a, b| a.0.cmp(b.0));
    known.chain(others).map(|(name, value)| (name.as_str(), value)).collect()
}

/// One line of JSON: the document, fields in export order.
pub fn jsonl_line(doc: &Map<String, Value>) -> String {
    let fields: Vec<String> =
        ordered(doc).into_iter().map(|(name, value)| format!("{}:{}", Value::from(name), value)).collect();
    format!("{{{}}}", fields.join(","))
}

/// One CSV row: `id`, the [`FIELDS`], `other`.
pub fn csv_row(doc: &Map<String, Value>) -> String {
    let cell = |value: Option<&Value>| match value {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    };
    let mut cells = vec![cell(doc.get("_id"))];
    cells.extend(FIELDS.iter().map(|name| cell(doc.get(*name))));
    let other: Map<String, Value> = ordered(doc)
        .into_iter()
        .filter(|(name, _)| *name != "_id" && !FIELDS.contains(name))
        .map(|(name, value)| (name.to_owned(), value.clone()))
        .collect();
    cells.push(if other.is_empty() { String::new() } else { Value::Object(other).to_string() });
    let mut writer = csv::WriterBuilder::new().terminator(csv::Terminator::Any(b'\n')).from_writer(Vec::new());
    writer.write_record(&cells).expect("writing to memory");
    let mut row = String::from_utf8(writer.into_inner().expect("writing to memory")).expect("UTF-8 cells");
    row.pop();
    row
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn doc(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn fields_come_in_the_documented_order_without_the_revision() {
        let d = doc(
            json!({"zeta": 1, "Note": "n", "url": "https://e.example/", "_rev": "3-x", "expires": "2026-12-31T00:00:00Z", "_id": "Ab3dE", "inactive": false}),
        );
        assert_eq!(
            jsonl_line(&d),
            r#"{"_id":"Ab3dE","url":"https://e.example/","inactive":false,"expires":"2026-12-31T00:00:00Z","Note":"n","zeta":1}"#
        );
        assert_eq!(
            csv_row(&d),
            r#"Ab3dE,https://e.example/,false,2026-12-31T00:00:00Z,,,,,,"{""Note"":""n"",""zeta"":1}""#
        );
    }
}
