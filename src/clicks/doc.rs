//! The clicks database's documents (docs/reference.md, "Live counts"): one per proxy process and
//! interval, split in parts when an interval holds many links, each under an ID made of what
//! it counts (so that writing it again is a conflict, never a second count); and the design
//! document whose views add them up with CouchDB's built-in `_sum`.

use serde_json::{json, Map, Value};
use time::OffsetDateTime;

use super::Counts;
use crate::design::function;

/// Links per document, at most: a document stays a few tens of kilobytes however busy the
/// interval (a link with a few versions is about 200 bytes of JSON).
pub const LINKS_PER_DOC: usize = 200;

/// CouchDB 3's default `max_document_size` (bytes), taken when the server's own cannot be read
/// (the proxy's account is no admin).
pub const DEFAULT_MAX_DOCUMENT_SIZE: u64 = 8_000_000;

/// The bytes of JSON a document may have where CouchDB accepts `max_document_size`: half of it,
/// a margin for a server that counts a document's size otherwise than its JSON text.
pub fn size_bound(max_document_size: u64) -> usize {
    usize::try_from(max_document_size / 2).unwrap_or(usize::MAX).max(MIN_SIZE_BOUND)
}

/// The least bound: a document of one link without its versions, and its ID, always fits.
const MIN_SIZE_BOUND: usize = 4096;

/// The clicks database's design document (`_design/clicks`).
pub const DESIGN_DOC: &str = "clicks";

const VALIDATE_DOC_UPDATE: &str = include_str!("../../couchdb/clicks/validate_doc_update.js");
const BY_LINK: &str = include_str!("../../couchdb/clicks/by_link.js");
const BY_VERSION: &str = include_str!("../../couchdb/clicks/by_version.js");
const BY_DAY: &str = include_str!("../../couchdb/clicks/by_day.js");
const BY_DAY_LINK: &str = include_str!("../../couchdb/clicks/by_day_link.js");
const BY_MONTH_LINK: &str = include_str!("../../couchdb/clicks/by_month_link.js");
const BY_DIMENSION: &str = include_str!("../../couchdb/clicks/by_dimension.js");

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
/// nothing was counted, else as few as hold every link at [`LINKS_PER_DOC`] links and
/// `max_bytes` bytes of JSON each at most (the links in ID order, so that a retry after a
/// crash-free failure writes the same documents). A link whose versions alone pass the bound
/// keeps its redirects under [`super::OTHER_VERSIONS`]: every number stays exact.
pub fn documents(
    writer: &Writer,
    start: OffsetDateTime,
    seconds: u32,
    counts: &Counts,
    max_bytes: usize,
) -> Vec<Value> {
    if counts.is_empty() {
        return Vec::new();
    }
    let start = rfc3339_second(start);
    let mut links: Vec<_> = counts.links.iter().collect();
    links.sort_unstable_by_key(|(id, _)| **id);
    let document = |part: usize, links: Map<String, Value>| {
        json!({
            "_id": format!("{start}/{}/{}/{part}", writer.proxy, writer.run),
            "type": "clicks",
            "proxy": writer.proxy,
            "run": writer.run,
            "start": start,
            "seconds": seconds,
            "part": part,
            "links": links,
            // The total of the strangers' guesses goes with the first part only.
            "unknown_not_found": if part == 0 { counts.unknown_not_found } else { 0 },
        })
    };
    // What a document holds besides its links, the largest part number and total included.
    let frame = json_len(&document(usize::MAX, Map::new())) + 24;
    let room = max_bytes.saturating_sub(frame);
    let mut parts = vec![Map::new()];
    let mut used = 0;
    for (id, c) in links {
        let mut link = json!({
            "redirects": c.redirects,
            "bot_redirects": c.bot_redirects,
            "new_visitors": c.new_visitors,
            "not_found": c.not_found,
        });
        // `"ID":{...},`
        let size = |link: &Value| id.as_str().len() + 4 + json_len(link);
        if !c.versions.is_empty() {
            link["versions"] = c.versions.iter().map(|(l, n)| (l.to_owned(), json!(n))).collect::<Map<_, _>>().into();
        }
        if c.redirects > 0 {
            link["by"] = c.by.to_json(&c.versions, c.redirects);
        }
        // Measured once when it fits (nearly always: a link's counts are a few hundred bytes);
        // else its versions, then its breakdowns, are folded as each needs to be.
        let mut measured = size(&link);
        if measured > room {
            if let Some(map) = link.as_object_mut() {
                map.remove("by");
            }
            if !c.versions.is_empty() && size(&link) > room {
                let all: u64 = c.versions.iter().map(|(_, n)| n).sum();
                link["versions"] = json!({ super::OTHER_VERSIONS: all });
            }
            if c.redirects > 0 {
                link["by"] = c.by.to_json(&c.versions, c.redirects);
                if size(&link) > room {
                    // Each breakdown as one number under `(other)`: totals stay exact.
                    let folded: Map<String, Value> = super::by::Dimension::ALL
                        .into_iter()
                        .filter_map(|d| {
                            let all: u64 = c.by.values(d, &c.versions, c.redirects).iter().map(|(_, n)| n).sum();
                            (all > 0).then(|| (d.name().to_owned(), json!({ super::OTHER_VERSIONS: all })))
                        })
                        .collect();
                    link["by"] = folded.into();
                }
            }
            measured = size(&link);
        }
        let current = parts.last().expect("one part at least");
        if !current.is_empty() && (current.len() == LINKS_PER_DOC || used + measured > room) {
            parts.push(Map::new());
            used = 0;
        }
        used += measured;
        parts.last_mut().expect("one part at least").insert(id.to_string(), link);
    }
    parts.into_iter().enumerate().map(|(part, links)| document(part, links)).collect()
}

/// The length of `value` as JSON text, counted without building the text (an interval's
/// documents are sized link by link, and a text built only to be measured is thrown away).
pub fn json_len(value: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    serde_json::to_writer(&mut count, value).expect("a JSON value serialises");
    count.0
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
            "by_day_link": {"map": function(BY_DAY_LINK), "reduce": "_sum"},
            "by_month_link": {"map": function(BY_MONTH_LINK), "reduce": "_sum"},
            "by_dimension": {"map": function(BY_DIMENSION), "reduce": "_sum"},
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clicks::{Click, Tally};
    use crate::domain::LinkId;
    use time::macros::datetime;

    const BOUND: usize = DEFAULT_MAX_DOCUMENT_SIZE as usize / 2;

    fn writer() -> Writer {
        Writer { proxy: "web-1".into(), run: "00000000000000ff".into() }
    }

    /// Every number of `docs` added up: per link (redirects, bots, new, 404s, versions' sum),
    /// and the unknown 404s.
    fn totals(docs: &[Value]) -> (std::collections::BTreeMap<String, [u64; 5]>, u64) {
        let mut links = std::collections::BTreeMap::new();
        for doc in docs {
            for (id, c) in doc["links"].as_object().unwrap() {
                let n = |k: &str| c[k].as_u64().unwrap();
                let versions = c["versions"].as_object().map_or(0, |v| v.values().map(|n| n.as_u64().unwrap()).sum());
                let sum: &mut [u64; 5] = links.entry(id.clone()).or_default();
                for (s, v) in sum.iter_mut().zip([
                    n("redirects"),
                    n("bot_redirects"),
                    n("new_visitors"),
                    n("not_found"),
                    versions,
                ]) {
                    *s += v;
                }
            }
        }
        (links, docs.iter().map(|d| d["unknown_not_found"].as_u64().unwrap()).sum())
    }

    #[test]
    fn documents_stay_under_the_bound_whatever_the_versions_and_every_count_is_kept() {
        // 60 links, each with 32 versions of 7.4 KB (the burst that once made a document CouchDB
        // refused), under a small bound.
        let tally = Tally::default();
        let long: Vec<String> = (0..40).map(|n| format!("https://a.example/?q={n}{}", "x".repeat(7400))).collect();
        for n in 0..60 {
            let id = LinkId::parse(&format!("L{n:04}")).unwrap();
            for version in &long {
                tally.record(Click::Redirect {
                    id,
                    version,
                    bot: n % 2 == 0,
                    new_visitor: true,
                    seen: &crate::clicks::by::Seen::NOTHING,
                });
            }
        }
        let counts = tally.take();
        for bound in [size_bound(1 << 20), size_bound(64 << 10), size_bound(0)] {
            let docs = documents(&writer(), datetime!(2026-11-26 15:31:00 UTC), 60, &counts, bound);
            assert!(docs.iter().all(|d| d.to_string().len() <= bound), "{bound}");
            assert!(docs.iter().enumerate().all(|(n, d)| d["part"] == n));
            let (links, unknown) = totals(&docs);
            assert_eq!((links.len(), unknown), (60, 0));
            assert!(links.values().all(|t| *t == [40, t[1], 40, 0, 40] && (t[1] == 0 || t[1] == 40)), "{links:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn any_ids_and_versions_make_documents_within_the_bound_with_exact_totals(
            clicks in proptest::collection::vec((0usize..40, "[a-z/:?=&%.]{0,300}", proptest::bool::ANY), 0..200),
            unknown in 0u64..3,
            bound_kb in 4usize..64,
        ) {
            let ids: Vec<LinkId> = (0..40).map(|n| LinkId::parse(&format!("P{n:04}")).unwrap()).collect();
            let tally = Tally::default();
            for (link, version, bot) in &clicks {
                let id = ids[*link];
                tally.record(Click::Redirect { id, version, bot: *bot, new_visitor: false, seen: &crate::clicks::by::Seen::NOTHING });
                if *bot {
                    tally.record(Click::NotFound(id));
                }
            }
            for _ in 0..unknown {
                tally.record(Click::Unknown);
            }
            let bound = bound_kb << 10;
            let docs = documents(&writer(), datetime!(2026-11-26 15:31:00 UTC), 60, &tally.take(), bound);
            proptest::prop_assert_eq!(docs.is_empty(), clicks.is_empty() && unknown == 0);
            for doc in &docs {
                proptest::prop_assert!(doc.to_string().len() <= bound);
            }
            let (links, unknown_counted) = totals(&docs);
            proptest::prop_assert_eq!(unknown_counted, unknown);
            for (n, id) in ids.iter().enumerate() {
                let redirects = clicks.iter().filter(|c| c.0 == n).count() as u64;
                let bots = clicks.iter().filter(|c| c.0 == n && c.2).count() as u64;
                let got = links.get(id.as_str()).copied().unwrap_or_default();
                proptest::prop_assert_eq!(got, [redirects, bots, 0, bots, redirects]);
            }
        }
    }

    #[test]
    fn an_interval_is_one_document_named_by_what_it_counts() {
        let tally = Tally::default();
        let id = LinkId::parse("H83if").unwrap();
        tally.record(Click::Redirect {
            id,
            version: "https://a.example/",
            bot: false,
            new_visitor: true,
            seen: &crate::clicks::by::Seen::NOTHING,
        });
        tally.record(Click::Unknown);
        let docs = documents(&writer(), datetime!(2026-11-26 15:31:00 UTC), 60, &tally.take(), BOUND);
        assert_eq!(
            docs,
            [json!({
                "_id": "2026-11-26T15:31:00Z/web-1/00000000000000ff/0",
                "type": "clicks", "proxy": "web-1", "run": "00000000000000ff",
                "start": "2026-11-26T15:31:00Z", "seconds": 60, "part": 0,
                "links": {"H83if": {"redirects": 1, "bot_redirects": 0, "new_visitors": 1, "not_found": 0,
                    "versions": {"https://a.example/": 1},
                    "by": {"device": {"other": 1}, "os": {"other": 1}, "browser": {"other": 1},
                        "referrer": {"(none)": 1}, "utm_source": {"(none)": 1}, "utm_medium": {"(none)": 1},
                        "utm_campaign": {"(none)": 1}, "variant": {"(none)": 1}}}},
                "unknown_not_found": 1,
            })]
        );
        assert!(documents(&writer(), datetime!(2026-11-26 15:31:00 UTC), 60, &Counts::default(), BOUND).is_empty());
    }

    #[test]
    fn a_busy_interval_is_split_and_each_link_is_in_one_part() {
        let tally = Tally::default();
        let ids: Vec<LinkId> = (0..LINKS_PER_DOC * 2 + 1).map(|_| LinkId::random()).collect();
        for id in &ids {
            tally.record(Click::NotFound(*id));
        }
        tally.record(Click::Unknown);
        let docs = documents(&writer(), datetime!(2026-11-26 15:31:00 UTC), 60, &tally.take(), BOUND);
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
        for view in ["by_link", "by_version", "by_day", "by_day_link", "by_month_link", "by_dimension"] {
            assert!(design["views"][view]["map"].as_str().unwrap().starts_with("function (doc) {"));
            assert_eq!(design["views"][view]["reduce"], "_sum");
        }
    }
}
