//! `LinkWrite`: the fields couchlink writes to a link document (docs/reference.md, "Link
//! documents"), as one type for every writer: `create`, the DIDComm agent, `import`, bulk
//! changes and `restore`. [`super::LinkDoc`] is the other way: what the proxy reads.
//!
//! A new document is a `LinkWrite` alone ([`LinkWrite::to_doc`]). A writer that changes an
//! existing document ([`LinkEdit`]) writes onto the document as it was read, so that every
//! field couchlink does not know, or does not change, is written back exactly as it was read:
//! never through a type of couchlink's, which could not hold a field of another type than its
//! own (`"max_visits": 500.0`, `"tags": "x"`).

use serde::Serialize;
use serde_json::{Map, Value};

use super::edit::EditStamp;

/// What couchlink writes to a link document: each `None` not written. The fields are in the
/// order a JSON object of `serde_json` sorts them, so a document's text is the same whether
/// written from this type or from the object it makes.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LinkWrite {
    /// Who wrote it, when, as part of what (docs/reference.md, "History").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub edit: Option<EditStamp>,
    /// RFC 3339 instant from which the link answers 404 (or its fallback).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires: Option<String>,
    /// Where people go while the link does not work, instead of a 404.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
    /// Where `import` read it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub imported_from: Option<ImportedFrom>,
    /// `true` turns the link off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inactive: Option<bool>,
    /// Counted redirects after which the link acts as expired. A number as written (an import
    /// passes on what its source says, for CouchDB's validation to judge).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_visits: Option<serde_json::Number>,
    /// `true`: bots' redirects count toward `max_visits` too.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_visits_bots: Option<bool>,
    /// `true`: the `url` carries an out-of-band invitation (the agent's `goal` other than
    /// `shorten`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oob: Option<bool>,
    /// The hash of the password a visitor must give.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
    /// Who asked the DIDComm agent for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requested_by: Option<RequestedBy>,
    /// Tags, as the console and bulk changes select links by them (a stored list's items kept
    /// whatever they are).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tags: Option<Vec<Value>>,
    /// Rules sending some visitors elsewhere, each as a document holds it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub targets: Option<Vec<Value>>,
    /// A title, as an import's source gives it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The target.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// RFC 3339 instant before which the link acts as inactive.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub valid_from: Option<String>,
}

/// `imported_from`: the system an import read the link from, and what it said of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ImportedFrom {
    /// The source's short code.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// When the source created it (RFC 3339, UTC).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created: Option<String>,
    /// The source's short URL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub short_url: Option<String>,
    /// The system (`shlink`, `bitly`, ...).
    pub system: &'static str,
}

/// `requested_by`: who asked the DIDComm agent for the link, in which thread.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RequestedBy {
    /// The requester's DID; `null` for an anonymous one (who may then never invalidate it).
    pub did: Option<String>,
    /// The DIDComm thread of the request (its `thid`, else its `id`), as the message gave it.
    pub thid: Value,
    /// Always `didcomm`.
    pub via: &'static str,
}

impl LinkWrite {
    /// A new link to `url`, switched on (`inactive: false`, as every writer of a new link has
    /// always said it), with nothing else.
    pub fn new_link(url: &str) -> LinkWrite {
        LinkWrite { url: Some(url.to_owned()), inactive: Some(false), ..LinkWrite::default() }
    }

    /// Its fields as a JSON object.
    pub fn to_map(&self) -> Map<String, Value> {
        match serde_json::to_value(self) {
            Ok(Value::Object(map)) => map,
            // A struct of strings, booleans, numbers and JSON values always is one.
            _ => unreachable!("a LinkWrite serialises as an object"),
        }
    }

    /// The new document these fields make.
    pub fn to_doc(&self) -> Value {
        Value::Object(self.to_map())
    }
}

/// A field of a link document a [`LinkEdit`] may remove.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkField {
    /// `expires`.
    Expires,
    /// `valid_from`.
    ValidFrom,
    /// `password`.
    Password,
    /// `max_visits`.
    MaxVisits,
    /// `max_visits_bots`.
    MaxVisitsBots,
    /// `targets`.
    Targets,
    /// `tags`.
    Tags,
}

impl LinkField {
    /// Its name in the document (the name [`LinkWrite`] writes it under).
    pub fn name(self) -> &'static str {
        match self {
            LinkField::Expires => "expires",
            LinkField::ValidFrom => "valid_from",
            LinkField::Password => "password",
            LinkField::MaxVisits => "max_visits",
            LinkField::MaxVisitsBots => "max_visits_bots",
            LinkField::Targets => "targets",
            LinkField::Tags => "tags",
        }
    }
}

/// A change to an existing link document: fields written, fields removed, every other field
/// (`_id`, `_rev`, fields couchlink does not know) left exactly as read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LinkEdit {
    /// What is written (over the field as it was).
    pub set: LinkWrite,
    /// What is removed (after what is written: a field both set and removed is removed).
    pub remove: Vec<LinkField>,
}

impl LinkEdit {
    /// `doc` (a document as read, or a revision's fields) with the change made.
    pub fn onto(&self, mut doc: Map<String, Value>) -> Map<String, Value> {
        doc.extend(self.set.to_map());
        for field in &self.remove {
            doc.remove(field.name());
        }
        doc
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn every_field() -> LinkWrite {
        LinkWrite {
            edit: Some(EditStamp::new("maria", "2026-12-01T10:00:00Z").in_batch("b").restoring("2-b")),
            expires: Some("2026-12-31T00:00:00Z".into()),
            fallback: Some("/Other".into()),
            imported_from: Some(ImportedFrom {
                code: Some("abc".into()),
                created: None,
                short_url: None,
                system: "kutt",
            }),
            inactive: Some(false),
            max_visits: Some(500.into()),
            max_visits_bots: Some(true),
            oob: Some(true),
            password: Some("$argon2id$...".into()),
            requested_by: Some(RequestedBy { did: None, thid: json!("t-1"), via: "didcomm" }),
            tags: Some(vec![json!("print")]),
            targets: Some(vec![json!({"when": {"os": ["ios"]}, "url": "/x"})]),
            title: Some("Spring".into()),
            url: Some("https://a.example/".into()),
            valid_from: Some("2026-12-01T00:00:00Z".into()),
        }
    }

    #[test]
    fn its_text_is_the_text_of_the_object_it_makes() {
        // Written straight or through a `Value`, the same bytes: the fields are in the order
        // a `serde_json` object sorts them.
        for link in [every_field(), LinkWrite::new_link("https://a.example/"), LinkWrite::default()] {
            assert_eq!(serde_json::to_string(&link).unwrap(), link.to_doc().to_string());
        }
        assert_eq!(LinkWrite::new_link("/H83if").to_doc(), json!({"url": "/H83if", "inactive": false}));
        assert_eq!(
            every_field().to_map()["requested_by"],
            json!({"did": null, "thid": "t-1", "via": "didcomm"}),
            "an anonymous requester is said as null"
        );
    }

    #[test]
    fn every_removable_field_is_one_it_writes() {
        let names = every_field().to_map();
        for field in [
            LinkField::Expires,
            LinkField::ValidFrom,
            LinkField::Password,
            LinkField::MaxVisits,
            LinkField::MaxVisitsBots,
            LinkField::Targets,
            LinkField::Tags,
        ] {
            assert!(names.contains_key(field.name()), "{field:?}");
        }
    }

    #[test]
    fn an_edit_leaves_what_it_does_not_change_exactly_as_read() {
        // Numbers past what a couchlink type holds, of every kind serde_json reads without
        // arbitrary precision, and fields of other types than couchlink's own.
        let text = r#"{"_id":"H83if","_rev":"3-c","url":"https://a.example/","big":12345678901234567890,
            "small":-9223372036854775808,"tiny":5e-324,"huge":1.7976931348623157e+308,"tenth":0.1,
            "max_visits":500.0,"tags":"not a list","nested":{"z":[1,2.5,{"a":null}],"a":"é\n"}}"#;
        let doc: Value = serde_json::from_str(text).unwrap();
        let edit = LinkEdit {
            set: LinkWrite { url: Some("https://b.example/".into()), inactive: Some(true), ..LinkWrite::default() },
            remove: vec![LinkField::Expires],
        };
        let after = Value::Object(edit.onto(doc.as_object().unwrap().clone()));
        let mut wanted = doc.clone();
        wanted["url"] = json!("https://b.example/");
        wanted["inactive"] = json!(true);
        assert_eq!(after, wanted);
        let written = after.to_string();
        for kept in [
            r#""big":12345678901234567890"#,
            r#""small":-9223372036854775808"#,
            r#""tiny":5e-324"#,
            r#""huge":1.7976931348623157e+308"#,
            r#""tenth":0.1"#,
            r#""max_visits":500.0"#,
            r#""tags":"not a list""#,
        ] {
            assert!(written.contains(kept), "{kept} in {written}");
        }
        let removed = LinkEdit { remove: vec![LinkField::MaxVisits, LinkField::Tags], ..LinkEdit::default() };
        let after = removed.onto(doc.as_object().unwrap().clone());
        assert!(!after.contains_key("max_visits") && !after.contains_key("tags") && after["big"] == doc["big"]);
    }
}
