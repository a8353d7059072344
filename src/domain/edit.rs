//! `Stated`: what a write says of itself in a link's `edit` field (docs/reference.md,
//! "History"): the account that wrote it, the time the client says it wrote it, the bulk change
//! it belongs to, the revision it restores.
//!
//! The links' validation function refuses a malformed `edit`, but a document can still hold
//! one (an `edit` carried over from a revision written before the function checked it, or by
//! replication), and the history records what a write states: so the recorder keeps only the
//! fields of a form the history's validation function accepts, and both functions accept
//! exactly what [`Stated::of`] keeps. `tests/edit_cases.json` holds all three to the same
//! cases. A stated time is the client's word: shown as stated, never used to order anything.

use serde::Serialize;
use serde_json::Value;

/// The `edit` a write states of itself: the account writing (CouchDB refuses another), the
/// time the client says it writes, and the bulk change it belongs to or the revision it
/// restores. Fields in the order a `serde_json` object sorts them (see [`super::LinkWrite`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EditStamp {
    /// When (RFC 3339).
    pub at: String,
    /// The bulk change (`edit.batch`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch: Option<String>,
    /// The account.
    pub by: String,
    /// The revision restored (`edit.restores`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restores: Option<String>,
}

impl EditStamp {
    /// A write by `by` at `at`, of no bulk change and restoring nothing.
    pub fn new(by: &str, at: &str) -> EditStamp {
        EditStamp { at: at.to_owned(), batch: None, by: by.to_owned(), restores: None }
    }

    /// The same, as part of bulk change `batch`.
    pub fn in_batch(self, batch: &str) -> EditStamp {
        EditStamp { batch: Some(batch.to_owned()), ..self }
    }

    /// The same, restoring revision `rev`.
    pub fn restoring(self, rev: &str) -> EditStamp {
        EditStamp { restores: Some(rev.to_owned()), ..self }
    }

    /// As a document holds it.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).expect("strings serialise")
    }
}

/// The fields of an `edit` that are of the form both validation functions accept; `None` for
/// each one absent or malformed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Stated {
    /// The writer's account (the links' validation refuses any other than the one writing).
    pub by: Option<String>,
    /// When the client says it wrote it (RFC 3339).
    pub at: Option<String>,
    /// The bulk change it says it belongs to.
    pub batch: Option<String>,
    /// The revision it says it restores.
    pub restores: Option<String>,
}

impl Stated {
    /// What `edit` states, field by field.
    pub fn of(edit: &Value) -> Stated {
        let text = |name: &str, valid: fn(&str) -> bool| {
            edit.get(name).and_then(Value::as_str).filter(|s| valid(s)).map(str::to_owned)
        };
        Stated {
            by: text("by", is_account),
            at: text("at", is_stated_time),
            batch: text("batch", is_batch_name),
            restores: text("restores", is_restored_revision),
        }
    }
}

/// An account's name as a write may state it: any text but the empty one (CouchDB's names).
pub fn is_account(s: &str) -> bool {
    !s.is_empty()
}

/// A bulk change's name: 1 to 64 letters, digits, `.`, `_`, `:` or `-`.
pub fn is_batch_name(s: &str) -> bool {
    (1..=64).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"._:-".contains(&b))
}

/// The revision a restore names, as couchlink writes it: `3-a1b2` (a number from 1, a dash,
/// lower-case letters and digits).
pub fn is_restored_revision(s: &str) -> bool {
    let Some((number, hash)) = s.split_once('-') else { return false };
    !number.is_empty()
        && !number.starts_with('0')
        && number.bytes().all(|b| b.is_ascii_digit())
        && !hash.is_empty()
        && hash.bytes().all(|b| b.is_ascii_digit() || b.is_ascii_lowercase())
}

/// An RFC 3339 date and time as the validation functions check it (their regular expression,
/// field by field: month 01-12, day 01-31, hour 00-23, minute 00-59, second 00-60, `T` or `t`,
/// `Z`, `z` or an offset of hours 00-23), nothing more: the form of what was stated.
pub fn is_stated_time(s: &str) -> bool {
    let b = s.as_bytes();
    let digits = |from: usize, n: usize| b.len() >= from + n && b[from..from + n].iter().all(u8::is_ascii_digit);
    let number = |from: usize| u32::from(b[from] - b'0') * 10 + u32::from(b[from + 1] - b'0');
    if !(digits(0, 4) && b.get(4) == Some(&b'-') && digits(5, 2) && b.get(7) == Some(&b'-') && digits(8, 2)) {
        return false;
    }
    if !(matches!(b.get(10), Some(b'T' | b't')) && digits(11, 2) && b.get(13) == Some(&b':') && digits(14, 2)) {
        return false;
    }
    if !(b.get(16) == Some(&b':') && digits(17, 2)) {
        return false;
    }
    let (month, day, hour, minute, second) = (number(5), number(8), number(11), number(14), number(17));
    if !((1..=12).contains(&month) && (1..=31).contains(&day) && hour <= 23 && minute <= 59 && second <= 60) {
        return false;
    }
    let mut i = 19;
    if b.get(i) == Some(&b'.') {
        let fraction = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
        if fraction == 0 {
            return false;
        }
        i += 1 + fraction;
    }
    match &b[i..] {
        [b'Z' | b'z'] => true,
        [b'+' | b'-', ..] if b.len() == i + 6 && digits(i + 1, 2) && b[i + 3] == b':' && digits(i + 4, 2) => {
            number(i + 1) <= 23 && number(i + 4) <= 59
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The cases both validation functions are held to as well (src/transfer/validate.rs).
    #[test]
    fn what_is_kept_is_as_the_shared_table_says() {
        let table: Value = serde_json::from_str(include_str!("../../tests/edit_cases.json")).unwrap();
        let cases = table["cases"].as_array().unwrap();
        assert!(cases.len() >= 20);
        for case in cases {
            let field = case["field"].as_str().unwrap();
            let stated = Stated::of(&json!({ field: case["value"] }));
            let kept = match field {
                "by" => stated.by,
                "at" => stated.at,
                "batch" => stated.batch,
                "restores" => stated.restores,
                other => panic!("no field {other}"),
            };
            assert_eq!(kept.is_some(), case["valid"] == true, "{case}");
        }
    }
}
