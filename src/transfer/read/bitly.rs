//! Bitly: the API v4 list of a group's links (`GET /v4/groups/{group_guid}/bitlinks`, one
//! page per file), items like `{"link": "https://bit.ly/3AbCdEf", "id": "bit.ly/3AbCdEf",
//! "long_url": ..., "title": ..., "created_at": "2021-02-12T18:37:26+0000", "archived": false,
//! "tags": [...]}`; or a CSV of links whose header uses those names (`id` or `link`,
//! `long_url`, `title`, `created_at`, `archived`, `tags`), as the export tools built on the API
//! write it (Bitly documents no column names for the CSV its web app exports). Archived links
//! arrive inactive.

use serde_json::Value;

use super::{tags, tags_cell, text, time_field, BadEntry};
use crate::domain::LinkWrite;
use crate::transfer::entry::{Entry, Place};

pub(super) fn entry(item: &Value, place: Place) -> Result<Entry, BadEntry> {
    let url = text(item, "long_url").ok_or(BadEntry::NoField("long_url"))?;
    let short_url = text(item, "link")
        .map(str::to_owned)
        .or_else(|| text(item, "id").map(|id| format!("https://{id}")))
        .ok_or(BadEntry::NoBitlink)?;
    // The back-half: what follows the domain.
    let code = short_url.splitn(4, '/').nth(3).filter(|c| !c.is_empty()).ok_or(BadEntry::NoBackHalf)?;
    let mut entry = Entry::new(place, url);
    entry.code = Some(code.to_owned());
    entry.created = time_field(item, "created_at")?;
    entry.short_url = Some(short_url);
    entry.write(&LinkWrite {
        title: item.get("title").and_then(Value::as_str).map(str::to_owned),
        tags: Some(tags(item, "tags")),
        inactive: archived(item.get("archived"))?.then_some(true),
        ..LinkWrite::default()
    });
    Ok(entry)
}

/// `archived`: a JSON boolean, or a CSV cell's `true`/`false` (`1`/`0`, `yes`/`no`).
fn archived(value: Option<&Value>) -> Result<bool, BadEntry> {
    match value {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(Value::String(s)) => match s.trim().to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" => Ok(true),
            "false" | "0" | "no" | "" => Ok(false),
            other => Err(BadEntry::ArchivedCell(other.to_owned())),
        },
        Some(other) => Err(BadEntry::ArchivedValue(other.clone())),
    }
}

/// A row of a CSV with the API's names, as the API item.
pub(super) fn from_csv(row: &Value, place: Place) -> Result<Entry, BadEntry> {
    let mut item = row.clone();
    item["tags"] = tags_cell(text(row, "tags"));
    entry(&item, place)
}
