//! The clicks database's documents (docs/reference.md, "Live counts"): one per proxy process and
//! interval, split in parts when an interval holds many links, each under an ID made of what
//! it counts (so that writing it again is a conflict, never a second count); and the design
//! document whose views add them up with CouchDB's built-in `_sum`.

use serde_json::{json, Value};
use time::OffsetDateTime;

use super::Counts;
use crate::design::{function, with_roles};
use crate::domain::LinkId;

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

/// One document of an interval's counts, as the JSON text written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Document {
    /// Its `_id`.
    pub id: String,
    /// The whole document.
    pub json: String,
    /// The responses it counts (what losing it loses).
    pub responses: u64,
}

impl Document {
    /// The document as a JSON value (for the roll-up, which adds to it, and for tests).
    pub fn to_value(&self) -> Value {
        serde_json::from_str(&self.json).expect("a document's text is JSON")
    }
}

/// How much of a link's counts a document keeps by name: all, or, for a link whose counts alone
/// pass the bound, its versions and then its breakdowns each as one number.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Folded {
    Nothing,
    Versions,
    VersionsAndBreakdowns,
}

/// Appends `"text"`, escaped as JSON.
fn push_str(out: &mut Vec<u8>, text: &str) {
    serde_json::to_writer(&mut *out, text).expect("a string serialises");
}

/// Appends `n`.
fn push_number(out: &mut Vec<u8>, n: impl itoa::Integer) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// Appends `{"value":n,...}`.
fn push_counts<'a>(out: &mut Vec<u8>, values: impl IntoIterator<Item = (&'a str, u64)>) {
    out.push(b'{');
    for (k, (value, n)) in values.into_iter().enumerate() {
        if k > 0 {
            out.push(b',');
        }
        push_str(out, value);
        out.push(b':');
        push_number(out, n);
    }
    out.push(b'}');
}

/// Appends `"ID":{...}`: one link's counts, as much of them by name as `folded` says.
fn push_link(out: &mut Vec<u8>, id: &LinkId, c: &super::LinkCounts, folded: Folded) {
    push_str(out, id.as_str());
    out.extend_from_slice(b":{\"redirects\":");
    push_number(out, c.redirects);
    out.extend_from_slice(b",\"bot_redirects\":");
    push_number(out, c.bot_redirects);
    out.extend_from_slice(b",\"new_visitors\":");
    push_number(out, c.new_visitors);
    out.extend_from_slice(b",\"not_found\":");
    push_number(out, c.not_found);
    if !c.versions.is_empty() {
        out.extend_from_slice(b",\"versions\":");
        if folded >= Folded::Versions {
            push_counts(out, [(super::OTHER_VERSIONS, c.versions.iter().map(|(_, n)| n).sum())]);
        } else {
            push_counts(out, c.versions.iter());
        }
    }
    if c.redirects > 0 {
        out.extend_from_slice(b",\"by\":{");
        let mut first = true;
        for d in super::by::Dimension::ALL {
            let values = c.by.values(d, &c.versions, c.redirects);
            if values.is_empty() {
                continue;
            }
            if !std::mem::take(&mut first) {
                out.push(b',');
            }
            push_str(out, d.name());
            out.push(b':');
            if folded == Folded::VersionsAndBreakdowns {
                // Each breakdown as one number under `(other)`: totals stay exact.
                push_counts(out, [(super::OTHER_VERSIONS, values.iter().map(|(_, n)| n).sum())]);
            } else {
                push_counts(out, values.iter().map(|(v, n)| (v.as_str(), *n)));
            }
        }
        out.push(b'}');
    }
    out.push(b'}');
}

/// The documents of the interval that started at `start` and lasted `seconds`: none when
/// nothing was counted, else as few as hold every link at [`LINKS_PER_DOC`] links and
/// `max_bytes` bytes of JSON each at most (the links in ID order, so that a retry after a
/// crash-free failure writes the same documents). A link whose versions alone pass the bound
/// keeps its redirects under [`super::OTHER_VERSIONS`]: every number stays exact.
///
/// Written as text straight from the counts: an interval of 20,000 links was tens of MB of
/// `serde_json` values built and freed, most of its cost the kernel zeroing their fresh pages
/// (docs/benchmarks.md, "Wake-ups").
pub fn documents(
    writer: &Writer,
    start: OffsetDateTime,
    seconds: u32,
    counts: &Counts,
    max_bytes: usize,
) -> Vec<Document> {
    if counts.is_empty() {
        return Vec::new();
    }
    let start = rfc3339_second(start);
    let mut links: Vec<_> = counts.links.iter().collect();
    links.sort_unstable_by_key(|(id, _)| **id);
    let id_of = |part: usize| format!("{start}/{}/{}/{part}", writer.proxy, writer.run);
    // `{"_id":...,"links":{` and, after the links, `},"unknown_not_found":N}`.
    let head = |part: usize| {
        let mut out = Vec::new();
        out.extend_from_slice(b"{\"_id\":");
        push_str(&mut out, &id_of(part));
        out.extend_from_slice(b",\"type\":\"clicks\",\"proxy\":");
        push_str(&mut out, &writer.proxy);
        out.extend_from_slice(b",\"run\":");
        push_str(&mut out, &writer.run);
        out.extend_from_slice(b",\"start\":");
        push_str(&mut out, &start);
        out.extend_from_slice(b",\"seconds\":");
        push_number(&mut out, seconds);
        out.extend_from_slice(b",\"part\":");
        push_number(&mut out, part);
        out.extend_from_slice(b",\"links\":{");
        out
    };
    let tail = |out: &mut Vec<u8>, part: usize| {
        // The total of the strangers' guesses goes with the first part only.
        out.extend_from_slice(b"},\"unknown_not_found\":");
        push_number(out, if part == 0 { counts.unknown_not_found } else { 0 });
        out.push(b'}');
    };
    // What a document holds besides its links, the largest part number and total included.
    let frame = {
        let mut out = head(usize::MAX);
        out.extend_from_slice(b"},\"unknown_not_found\":");
        push_number(&mut out, u64::MAX);
        out.len() + 2
    };
    let room = max_bytes.saturating_sub(frame);
    let mut docs = Vec::new();
    let (mut out, mut in_part, mut used, mut responses) = (head(0), 0, 0, counts.unknown_not_found);
    let mut link = Vec::new();
    for (id, c) in links {
        // Written whole when it fits (nearly always: a link's counts are a few hundred bytes);
        // else its versions, then its breakdowns, are folded as each needs to be.
        for folded in [Folded::Nothing, Folded::Versions, Folded::VersionsAndBreakdowns] {
            link.clear();
            push_link(&mut link, id, c, folded);
            if link.len() < room {
                break;
            }
        }
        // `"ID":{...},`
        let size = link.len() + 1;
        if in_part > 0 && (in_part == LINKS_PER_DOC || used + size > room) {
            let part = docs.len();
            tail(&mut out, part);
            docs.push(Document { id: id_of(part), json: String::from_utf8(out).expect("JSON text"), responses });
            (out, in_part, used, responses) = (head(part + 1), 0, 0, 0);
        }
        if in_part > 0 {
            out.push(b',');
        }
        out.extend_from_slice(&link);
        in_part += 1;
        used += size;
        responses += c.redirects + c.not_found;
    }
    let part = docs.len();
    tail(&mut out, part);
    docs.push(Document { id: id_of(part), json: String::from_utf8(out).expect("JSON text"), responses });
    docs
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
    let validate = with_roles(&function(VALIDATE_DOC_UPDATE), &[("WRITER_ROLES", writer_roles)]);
    json!({
        "language": "javascript",
        "validate_doc_update": validate,
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

    /// [`documents`] as JSON values, each document's text checked: within `max_bytes`, JSON,
    /// its ID and the responses it says it counts those of its value.
    fn written(writer: &Writer, start: OffsetDateTime, seconds: u32, counts: &Counts, max_bytes: usize) -> Vec<Value> {
        let docs = documents(writer, start, seconds, counts, max_bytes);
        docs.iter()
            .map(|doc| {
                assert!(doc.json.len() <= max_bytes, "{} bytes over {max_bytes}", doc.json.len());
                let value = doc.to_value();
                assert_eq!(value["_id"], doc.id);
                let counted = |c: &Value| c["redirects"].as_u64().unwrap() + c["not_found"].as_u64().unwrap();
                let links = value["links"].as_object().unwrap();
                let responses = value["unknown_not_found"].as_u64().unwrap() + links.values().map(counted).sum::<u64>();
                assert_eq!(doc.responses, responses);
                value
            })
            .collect()
    }

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
            let docs = written(&writer(), datetime!(2026-11-26 15:31:00 UTC), 60, &counts, bound);
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
            let docs = written(&writer(), datetime!(2026-11-26 15:31:00 UTC), 60, &tally.take(), bound);
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
        let docs = written(&writer(), datetime!(2026-11-26 15:31:00 UTC), 60, &tally.take(), BOUND);
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
        assert!(written(&writer(), datetime!(2026-11-26 15:31:00 UTC), 60, &Counts::default(), BOUND).is_empty());
    }

    #[test]
    fn a_busy_interval_is_split_and_each_link_is_in_one_part() {
        let tally = Tally::default();
        let ids: Vec<LinkId> = (0..LINKS_PER_DOC * 2 + 1).map(|_| LinkId::random()).collect();
        for id in &ids {
            tally.record(Click::NotFound(*id));
        }
        tally.record(Click::Unknown);
        let docs = written(&writer(), datetime!(2026-11-26 15:31:00 UTC), 60, &tally.take(), BOUND);
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
