//! Bitly: the API v4 list of a group's links (`GET /v4/groups/{group_guid}/bitlinks`, one
//! page per file), items like `{"link": "https://bit.ly/3AbCdEf", "id": "bit.ly/3AbCdEf",
//! "long_url": ..., "title": ..., "created_at": "2021-02-12T18:37:26+0000", "tags": [...]}`.

use serde_json::Value;

use super::{tags, text, time_field};
use crate::transfer::entry::{Entry, Place};

pub(super) fn entry(item: &Value, place: Place) -> Result<Entry, String> {
    let url = text(item, "long_url").ok_or("no \"long_url\"")?;
    let short_url = text(item, "link")
        .map(str::to_owned)
        .or_else(|| text(item, "id").map(|id| format!("https://{id}")))
        .ok_or("no \"link\" or \"id\": the bitlink")?;
    // The back-half: what follows the domain.
    let code = short_url.splitn(4, '/').nth(3).filter(|c| !c.is_empty()).ok_or("the bitlink has no back-half")?;
    let mut entry = Entry::new(place, url);
    entry.code = Some(code.to_owned());
    entry.created = time_field(item, "created_at")?;
    entry.short_url = Some(short_url);
    entry.set("title", item.get("title").cloned().unwrap_or_default());
    entry.set("tags", tags(item, "tags"));
    Ok(entry)
}
