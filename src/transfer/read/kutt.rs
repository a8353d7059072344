//! Kutt: the API v2 list of links (`GET /api/v2/links`, one page per file), items like
//! `{"address": "x7Kp2", "link": "https://kutt.it/x7Kp2", "target": ..., "description": ...,
//! "created_at": ..., "expire_in": ..., "banned": false, "password": false}`.

use serde_json::Value;

use super::{text, time_field, BadEntry};
use crate::domain::LinkWrite;
use crate::transfer::entry::{Entry, Place};

pub(super) fn entry(item: &Value, place: Place) -> Result<Entry, BadEntry> {
    let url = text(item, "target").ok_or(BadEntry::NoField("target"))?;
    let code = text(item, "address").ok_or(BadEntry::NoKuttCode)?;
    // couchlink has no passwords: imported, the link would open to anyone holding it.
    if item.get("password") == Some(&Value::Bool(true)) {
        return Err(BadEntry::Password(code.to_owned()));
    }
    let mut entry = Entry::new(place, url);
    entry.code = Some(code.to_owned());
    entry.short_url = text(item, "link").map(str::to_owned);
    entry.created = time_field(item, "created_at")?;
    // A banned link stays off.
    let banned = item.get("banned") == Some(&Value::Bool(true));
    entry.write(&LinkWrite {
        inactive: banned.then_some(true),
        expires: time_field(item, "expire_in")?,
        title: text(item, "description").map(str::to_owned),
        ..LinkWrite::default()
    });
    Ok(entry)
}
