//! Shlink: the REST API list of short URLs (`GET /rest/v3/short-urls`, one page per file),
//! items like `{"shortCode": "abc123", "shortUrl": "https://s.test/abc123", "longUrl": ...,
//! "deviceLongUrls": {"android": ..., "ios": ..., "desktop": ...}, "dateCreated": ...,
//! "tags": [...], "meta": {"validSince": ..., "validUntil": ..., "maxVisits": ...},
//! "domain": null, "title": ...}`; or the CSV the web client's "Export" button downloads
//! (`short_urls.csv`, shlink-web-component's `ExportShortUrlsBtn`): `createdAt, domain,
//! shortCode, shortUrl, longUrl, title, tags, visits`, tags joined by `|` (older clients wrote
//! `createdAt, shortUrl, longUrl, title, tags, visits`, tags joined by `,`).

use serde_json::{json, Value};

use super::{tags, tags_cell, text, time_field, BadEntry};
use crate::domain::LinkWrite;
use crate::transfer::entry::{Entry, Place};

pub(super) fn entry(item: &Value, place: Place) -> Result<Entry, BadEntry> {
    let url = text(item, "longUrl").ok_or(BadEntry::NoField("longUrl"))?;
    let mut entry = Entry::new(place, url);
    entry.code = Some(text(item, "shortCode").ok_or(BadEntry::NoField("shortCode"))?.to_owned());
    entry.short_url = text(item, "shortUrl").map(str::to_owned);
    entry.created = time_field(item, "dateCreated")?;
    let meta = item.get("meta").cloned().unwrap_or_default();
    let mut link = LinkWrite {
        valid_from: time_field(&meta, "validSince")?,
        expires: time_field(&meta, "validUntil")?,
        // Shlink's limit is couchlink's (docs/reference.md, "Visit limits").
        max_visits: meta.get("maxVisits").and_then(Value::as_number).cloned(),
        ..LinkWrite::default()
    };
    // Shlink's device long URLs are couchlink's targets.
    let devices = item.get("deviceLongUrls").cloned().unwrap_or_default();
    let rules: Vec<Value> = [("android", "os"), ("ios", "os"), ("desktop", "device")]
        .into_iter()
        .filter_map(|(device, condition)| {
            let url = text(&devices, device)?;
            Some(json!({"when": {condition: [device]}, "url": url}))
        })
        .collect();
    link.targets = Some(rules);
    link.title = text(item, "title").map(str::to_owned);
    link.tags = Some(tags(item, "tags"));
    entry.write(&link);
    Ok(entry)
}

/// A row of the web client's CSV, as the API item it was made from.
pub(super) fn from_csv(row: &Value, place: Place) -> Result<Entry, BadEntry> {
    let short_url = text(row, "shortUrl").ok_or(BadEntry::NoCell("shortUrl"))?;
    // The client takes the code from the short URL's path, as here when the column is absent.
    let code = text(row, "shortCode").map(str::to_owned).or_else(|| {
        url::Url::parse(short_url).ok().map(|u| u.path().trim_start_matches('/').to_owned()).filter(|c| !c.is_empty())
    });
    let item = json!({
        "shortUrl": short_url,
        "shortCode": code,
        "longUrl": text(row, "longUrl"),
        "dateCreated": text(row, "createdAt"),
        "title": text(row, "title"),
        "tags": tags_cell(text(row, "tags")),
    });
    entry(&item, place)
}
