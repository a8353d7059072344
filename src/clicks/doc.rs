//! The clicks database's documents (docs/reference.md, "Live counts"): one per proxy process and
//! interval, split in parts when an interval holds many links, each under an ID made of what
//! it counts (so that writing it again is a conflict, never a second count); and the design
//! document whose views add them up with CouchDB's built-in `_sum`.

use serde_json::{json, Map, Value};
use time::OffsetDateTime;

use super::Counts;

/// Links per document, at most: a document stays a few tens of kilobytes however busy the
/// interval (a link with a few versions is about 200 bytes of JSON).
pub const LINKS_PER_DOC: usize = 200;

/// The clicks database's design document (`_design/clicks`).
pub const DESIGN_DOC: &str = "clicks";

const VALIDATE_DOC_UPDATE: &str = include_str!("../../couchdb/clicks/validate_doc_update.js");
const BY_LINK: &str = include_str!("../../couchdb/clicks/by_link.js");
const BY_VERSION: &str = include_str!("../../couchdb/clicks/by_version.js");
const BY_DAY: &str = include_str!("../../couchdb/clicks/by_day.js");

/// Which proxy process wrote a document: its name (`COUCHLINK_PROXY_NAME`, the host's name by
/// default) and a random identity of this run, so that a restarted proxy never writes under
/// the IDs of the process before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Writer {
    /// The proxy's name: letters, digits, `.`, `_` and `-`.
    pub proxy: String,
    /// This process: 16 lower-case hex digits.
    pub run: String,
}

impl Writer {
    /// `proxy` (other characters replaced by `-`, at most 64), with a fresh run identity.
    pub fn new(proxy: &str) -> Writer {
        let mut name: String = proxy
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '-' })
            .take(64)
            .collect();
        if name.is_empty() {
            name = "couchlink".into();
        }
        Writer { proxy: name, run: format!("{:016x}", rand::random::<u64>()) }
    }
}

/// The documents of the interval that started at `start` and lasted `seconds`: none when
/// nothing was counted, else one per [`LINKS_PER_DOC`] links (the links in ID order, so that a
/// retry after a crash-free failure writes the same documents).
pub fn documents(writer: &Writer, start: OffsetDateTime, seconds: u32, counts: &Counts) -> Vec<Value> {
    if counts.is_empty() {
        return Vec::new();
    }
    let start = rfc3339_second(start);
    let mut links: Vec<_> = counts.links.iter().collect();
    links.sort_unstable_by_key(|(id, _)| **id);
    let chunks: Vec<_> = if links.is_empty() { vec![&links[..]] } else { links.chunks(LINKS_PER_DOC).collect() };
    chunks
        .into_iter()
        .enumerate()
        .map(|(part, chunk)| {
            let mut map = Map::new();
            for (id, c) in chunk {
                let mut link = json!({
                    "redirects": c.redirects,
                    "bot_redirects": c.bot_redirects,
                    "new_visitors": c.new_visitors,
                    "not_found": c.not_found,
                });
                if !c.versions.is_empty() {
                    link["versions"] =
                        c.versions.iter().map(|(l, n)| (l.to_owned(), json!(n))).collect::<Map<_, _>>().into();
                }
                map.insert(id.to_string(), link);
            }
            json!({
                "_id": format!("{start}/{}/{}/{part}", writer.proxy, writer.run),
                "type": "clicks",
                "proxy": writer.proxy,
                "run": writer.run,
                "start": start,
                "seconds": seconds,
                "part": part,
                "links": map,
                // The total of the strangers' guesses goes with the first part only.
                "unknown_not_found": if part == 0 { counts.unknown_not_found } else { 0 },
            })
        })
        .collect()
}

/// `time` to the second, as `2026-11-26T15:31:00Z`.
pub fn rfc3339_second(time: OffsetDateTime) -> String {
    let t = time.to_offset(time::UtcOffset::UTC);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    )
}

/// A function's source as stored: the file without its leading comment lines (CouchDB compiles
/// the stored source as one function expression).
fn function(file: &str) -> String {
    file.lines().skip_while(|l| l.starts_with("//")).collect::<Vec<_>>().join("\n").trim().to_owned()
}

/// The design document, with `writer_roles` (the proxies') written into its validation.
pub fn design(writer_roles: &[&str]) -> Value {
    let validate = function(VALIDATE_DOC_UPDATE);
    let template = r#"var WRITER_ROLES = ["links:proxy"];"#;
    assert!(validate.contains(template), "couchdb/clicks/validate_doc_update.js declares WRITER_ROLES");
    let roles = format!("var WRITER_ROLES = {};", serde_json::to_string(writer_roles).expect("strings serialise"));
    json!({
        "language": "javascript",
        "validate_doc_update": validate.replacen(template, &roles, 1),
        "views": {
            "by_link": {"map": function(BY_LINK), "reduce": "_sum"},
            "by_version": {"map": function(BY_VERSION), "reduce": "_sum"},
            "by_day": {"map": function(BY_DAY), "reduce": "_sum"},
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clicks::{Click, Tally};
    use crate::domain::LinkId;
    use time::macros::datetime;

    fn writer() -> Writer {
        Writer { proxy: "web-1".into(), run: "00000000000000ff".into() }
    }

    #[test]
    fn an_interval_is_one_document_named_by_what_it_counts() {
        let tally = Tally::default();
        let id = LinkId::parse("H83if").unwrap();
        tally.record(Click::Redirect { id, version: "https://a.example/", bot: false, new_visitor: true });
        tally.record(Click::Unknown);
        let docs = documents(&writer(), datetime!(2026-11-26 15:31:00 UTC), 60, &tally.take());
        assert_eq!(
            docs,
            [json!({
                "_id": "2026-11-26T15:31:00Z/web-1/00000000000000ff/0",
                "type": "clicks", "proxy": "web-1", "run": "00000000000000ff",
                "start": "2026-11-26T15:31:00Z", "seconds": 60, "part": 0,
                "links": {"H83if": {"redirects": 1, "bot_redirects": 0, "new_visitors": 1, "not_found": 0,
                    "versions": {"https://a.example/": 1}}},
                "unknown_not_found": 1,
            })]
        );
        assert!(documents(&writer(), datetime!(2026-11-26 15:31:00 UTC), 60, &Counts::default()).is_empty());
    }

    #[test]
    fn a_busy_interval_is_split_and_each_link_is_in_one_part() {
        let tally = Tally::default();
        let ids: Vec<LinkId> = (0..LINKS_PER_DOC * 2 + 1).map(|_| LinkId::random()).collect();
        for id in &ids {
            tally.record(Click::NotFound(*id));
        }
        tally.record(Click::Unknown);
        let docs = documents(&writer(), datetime!(2026-11-26 15:31:00 UTC), 60, &tally.take());
        let distinct: std::collections::HashSet<_> = ids.iter().collect();
        assert_eq!(docs.len(), distinct.len().div_ceil(LINKS_PER_DOC));
        let in_docs: usize = docs.iter().map(|d| d["links"].as_object().unwrap().len()).sum();
        assert_eq!(in_docs, distinct.len());
        let unknown: u64 = docs.iter().map(|d| d["unknown_not_found"].as_u64().unwrap()).sum();
        assert_eq!(unknown, 1);
        assert!(docs.iter().enumerate().all(|(n, d)| d["_id"].as_str().unwrap().ends_with(&format!("/{n}"))));
    }

    #[test]
    fn names_are_made_safe_and_runs_differ() {
        let (a, b) = (Writer::new("web 1/é"), Writer::new("web 1/é"));
        assert_eq!(a.proxy, "web-1--");
        assert_ne!(a.run, b.run);
        assert_eq!(a.run.len(), 16);
        assert_eq!(Writer::new("").proxy, "couchlink");
    }

    #[test]
    fn the_design_carries_the_writer_roles_and_plain_functions() {
        let design = design(&["acme:proxy"]);
        let validate = design["validate_doc_update"].as_str().unwrap();
        assert!(validate.starts_with("function (newDoc, oldDoc, userCtx, secObj) {"), "{validate}");
        assert!(validate.contains(r#"var WRITER_ROLES = ["acme:proxy"];"#));
        for view in ["by_link", "by_version", "by_day"] {
            assert!(design["views"][view]["map"].as_str().unwrap().starts_with("function (doc) {"));
            assert_eq!(design["views"][view]["reduce"], "_sum");
        }
    }
}
