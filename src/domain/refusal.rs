//! A refusal of the links database's validation function, read by the field it names.
//!
//! `couchdb/validate_doc_update.js` starts every refusal of a field with that field's path in
//! brackets: `[url] Only "http://" ...`, `[targets.2] ...`, `[targets.2.split.1.url] ...` (rules
//! and variants counted from 1, as its words count them). Clients place a refusal by that path,
//! never by its wording, so that rewording a message cannot move it to another field. A refusal
//! of the write itself (the account, a deletion) has no path. The console's model reads the same
//! form (`console/link.js`, `refusalOf`); `tests/refusal_fields.json` holds the cases both
//! sides, and the validation function, are held to.

use std::fmt;

/// CouchDB's `reason` for a refused write, split into the field it concerns and its words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    field: Option<String>,
    message: String,
}

impl Refusal {
    /// Reads `reason`: a bracketed path of letters, digits, `_` and `.` then one space, or none.
    pub fn parse(reason: &str) -> Refusal {
        let field = reason.strip_prefix('[').and_then(|rest| {
            let (path, message) = rest.split_once("] ")?;
            let plain = !path.is_empty()
                && path.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.')
                && !path.starts_with('.')
                && !path.ends_with('.');
            plain.then(|| (path.to_owned(), message.to_owned()))
        });
        match field {
            Some((path, message)) => Refusal { field: Some(path), message },
            None => Refusal { field: None, message: reason.to_owned() },
        }
    }

    /// The path of the field refused (`url`, `targets.2.split.1.url`), or `None` for the write
    /// itself.
    pub fn field(&self) -> Option<&str> {
        self.field.as_deref()
    }

    /// The validation function's words, without the path.
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// `"url": words`, or the words alone for a refusal of the write itself.
impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.field {
            Some(path) => write!(f, "\"{path}\": {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bracketed_path_is_the_field_and_anything_else_is_the_write() {
        let r = Refusal::parse("[targets.2.split.1.url] In the \"url\" of variant 1: no host.");
        assert_eq!(r.field(), Some("targets.2.split.1.url"));
        assert_eq!(r.message(), "In the \"url\" of variant 1: no host.");
        assert_eq!(r.to_string(), "\"targets.2.split.1.url\": In the \"url\" of variant 1: no host.");
        for plain in ["Your account \"x\" may not change links.", "[not a path] x", "[] x", "[url]x", "[.url] x"] {
            let r = Refusal::parse(plain);
            assert_eq!((r.field(), r.message()), (None, plain), "{plain}");
        }
    }
}
