//! Old intervals rolled up into daily documents (docs/operations.md, "Live counts on disk"): a
//! busy database's minute documents, a few thousand a day, become a few per day, which is what
//! their views' index mostly costs. An admin runs it (`couchlink clicks --roll-up-until DAY`).
//!
//! For each UTC day: every document of the day is read; the day's roll-up (`proxy` `rollup`,
//! one day long, parts of [`super::doc::LINKS_PER_DOC`] links) is written with the sum, its
//! first part listing the IDs it includes; then those originals are deleted. Run again after an
//! interruption, it never counts an original twice: one the roll-up lists is only deleted, and
//! one it does not (written later, from a proxy's backlog) is added to it. Between the two
//! writes of a day (a moment) its views count both.

use std::collections::BTreeSet;

use serde_json::{json, Value};
use time::Date;

use super::doc::{documents, Writer, DESIGN_DOC};
use super::{Counts, LinkCounts};
use crate::couch::{BulkOutcome, CouchClient, CouchError, ViewQuery};
use crate::domain::LinkId;

/// The roll-ups' `proxy` and `run`.
const ROLLUP: &str = "rollup";
const ROLLUP_RUN: &str = "0000000000000000";
/// Documents read per request (a busy interval's is a few tens of kilobytes), and deleted per
/// page at most.
const PAGE: usize = 100;
/// Links' counts deleted per page at most (see [`delete_paced`]).
const LINKS_PER_PAGE: usize = 2_000;

/// Why a roll-up stopped.
#[derive(Debug, thiserror::Error)]
pub enum RollupError {
    /// CouchDB refused or could not be reached.
    #[error("cannot roll up the counts")]
    Couch(#[from] CouchError),
    /// CouchDB refused a document of the roll-up.
    #[error("CouchDB refused a document of the roll-up of {day}: {reason}")]
    Refused {
        /// The day.
        day: String,
        /// CouchDB's words.
        reason: String,
    },
}

/// What rolling up one day did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RolledDay {
    /// The day, `2026-11-26`.
    pub day: String,
    /// Interval documents deleted.
    pub deleted: usize,
    /// Roll-up documents it has now.
    pub parts: usize,
}

/// Rolls every day before `until` into daily documents, oldest first.
pub async fn roll_up(clicks: &CouchClient, until: Date) -> Result<Vec<RolledDay>, RollupError> {
    let mut done = Vec::new();
    let mut from: Option<String> = None;
    loop {
        // The next document not yet rolled up: the day it is in is next.
        let page = clicks.docs_page(from.as_deref(), 1).await?;
        let Some((id, _)) = page.into_iter().next() else { break };
        if id.starts_with('_') {
            break; // `_design/`: after every dated ID
        }
        let Some(day) = id.get(..10).filter(|d| d.as_bytes().get(4) == Some(&b'-')) else {
            from = Some(format!("{id}\u{0}"));
            continue;
        };
        let format = time::macros::format_description!("[year]-[month]-[day]");
        match Date::parse(day, format) {
            Ok(date) if date < until => {}
            _ => break,
        }
        let day = day.to_owned();
        done.push(roll_up_day(clicks, &day).await?);
        // Past every ID of this day.
        from = Some(format!("{day}\u{10ffff}"));
    }
    Ok(done)
}

/// Rolls up the documents of `day` (`2026-11-26`).
pub async fn roll_up_day(clicks: &CouchClient, day: &str) -> Result<RolledDay, RollupError> {
    let docs = day_documents(clicks, day).await?;
    let (rollups, originals): (Vec<Value>, Vec<Value>) = docs.into_iter().partition(|d| d["proxy"] == ROLLUP);
    let included: BTreeSet<String> = rollups
        .iter()
        .flat_map(|d| d["rolled_up"].as_array().into_iter().flatten())
        .filter_map(|id| id.as_str().map(str::to_owned))
        .collect();
    let (counted, new): (Vec<&Value>, Vec<&Value>) = originals.iter().partition(|d| included.contains(id_of(d)));
    if !new.is_empty() || rollups.is_empty() {
        // The roll-up as it is, and what it did not include yet.
        let mut counts = Counts::default();
        for doc in rollups.iter().chain(new.iter().copied()) {
            counts.merge(counts_of(doc));
        }
        let mut ids: Vec<String> = included.into_iter().collect();
        ids.extend(new.iter().map(|d| id_of(d).to_owned()));
        let writer = Writer { proxy: ROLLUP.into(), run: ROLLUP_RUN.into() };
        let start = Date::parse(day, time::macros::format_description!("[year]-[month]-[day]"))
            .map_err(|_| RollupError::Refused { day: day.into(), reason: "not a day".into() })?
            .midnight()
            .assume_utc();
        // The list of what it includes goes with the first part: room is left for it.
        let max = clicks.max_document_size().await.unwrap_or(super::doc::DEFAULT_MAX_DOCUMENT_SIZE);
        let bound = super::doc::size_bound(max).saturating_sub(json!(ids).to_string().len() + 16);
        let mut wanted: Vec<Value> =
            documents(&writer, start, 86_400, &counts, bound).iter().map(|d| d.to_value()).collect();
        if wanted.is_empty() {
            wanted = vec![json!({"_id": format!("{day}T00:00:00Z/{ROLLUP}/{ROLLUP_RUN}/0"), "type": "clicks",
                "proxy": ROLLUP, "run": ROLLUP_RUN, "start": format!("{day}T00:00:00Z"), "seconds": 86_400,
                "part": 0, "links": {}, "unknown_not_found": 0})];
        }
        wanted[0]["rolled_up"] = json!(ids);
        // Replacing the roll-up's parts (by their revisions); parts no longer needed deleted.
        for doc in &mut wanted {
            if let Some(old) = rollups.iter().find(|r| r["_id"] == doc["_id"]) {
                doc["_rev"] = old["_rev"].clone();
            }
        }
        let gone = rollups.iter().filter(|r| !wanted.iter().any(|w| w["_id"] == r["_id"])).map(deletion);
        let writes: Vec<Value> = wanted.iter().cloned().chain(gone).collect();
        check(day, clicks.bulk_create(&writes).await?)?;
        let parts = wanted.len();
        let deletions: Vec<&Value> = originals.iter().collect();
        delete_paced(clicks, day, &deletions).await?;
        return Ok(RolledDay { day: day.into(), deleted: deletions.len(), parts });
    }
    // Every original is in the roll-up already (an earlier run stopped before deleting them).
    delete_paced(clicks, day, &counted).await?;
    Ok(RolledDay { day: day.into(), deleted: counted.len(), parts: rollups.len() })
}

/// Deletes `originals` a page at a time, each page's removal from the views waited for before
/// the next: CouchDB 3.5's indexer took 72 s to remove a busy day's 4320 interval documents
/// (200 links each, without breakdowns) deleted 100 at a time this way, and more than 15
/// minutes of both cores and 1.7 GiB of memory when they arrived at once
/// (`bench/clicks-disk.sh`). A page holds at most [`LINKS_PER_PAGE`] links' counts, since
/// removing a document's rows costs CouchDB in proportion to them (with every breakdown, about
/// 40 rows a link); the wait is as long as the indexer takes, CouchDB's own request timeout
/// (`timeout`, after 60 s) asked through.
async fn delete_paced(clicks: &CouchClient, day: &str, originals: &[&Value]) -> Result<(), RollupError> {
    let settled = ViewQuery { group_level: Some(0), ..ViewQuery::default() };
    let mut page: Vec<Value> = Vec::new();
    let mut links = 0;
    for (i, doc) in originals.iter().enumerate() {
        page.push(deletion(doc));
        links += doc["links"].as_object().map_or(0, |l| l.len());
        if links < LINKS_PER_PAGE && page.len() < PAGE && i + 1 < originals.len() {
            continue;
        }
        check(day, clicks.bulk_create(&page).await?)?;
        page.clear();
        links = 0;
        loop {
            match clicks.view(DESIGN_DOC, "by_day", &settled).await {
                Ok(_) => break,
                Err(CouchError::Refused { error, .. }) if error == "timeout" => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }
    Ok(())
}

/// Every document of `day`, its roll-up included.
async fn day_documents(clicks: &CouchClient, day: &str) -> Result<Vec<Value>, CouchError> {
    let mut docs = Vec::new();
    let mut from = day.to_owned();
    loop {
        let page = clicks.docs_page(Some(&from), PAGE).await?;
        let full = page.len() == PAGE;
        let mut last = None;
        for (id, doc) in page {
            if !id.starts_with(day) {
                return Ok(docs);
            }
            last = Some(id);
            docs.push(doc);
        }
        match (full, last) {
            (true, Some(id)) => from = format!("{id}\u{0}"),
            _ => return Ok(docs),
        }
    }
}

fn id_of(doc: &Value) -> &str {
    doc["_id"].as_str().unwrap_or_default()
}

fn deletion(doc: &Value) -> Value {
    json!({"_id": doc["_id"], "_rev": doc["_rev"], "_deleted": true})
}

/// A document's counts, as the tally kept them.
fn counts_of(doc: &Value) -> Counts {
    let mut counts = Counts { unknown_not_found: doc["unknown_not_found"].as_u64().unwrap_or(0), ..Counts::default() };
    for (id, c) in doc["links"].as_object().into_iter().flatten() {
        let Ok(id) = LinkId::parse(id) else { continue };
        let number = |key: &str| c[key].as_u64().unwrap_or(0);
        let mut link = LinkCounts {
            redirects: number("redirects"),
            bot_redirects: number("bot_redirects"),
            new_visitors: number("new_visitors"),
            not_found: number("not_found"),
            ..LinkCounts::default()
        };
        let mut versioned = 0;
        for (location, n) in c["versions"].as_object().into_iter().flatten() {
            let n = n.as_u64().unwrap_or(0);
            link.versions.add(location, n);
            versioned += n;
        }
        if let Some(by) = c.get("by") {
            link.by = super::by::By::from_json(by);
        }
        // Documents from before `(other)` counted nothing past 32 versions: the rest is theirs.
        if link.redirects > versioned {
            link.versions.add(super::OTHER_VERSIONS, link.redirects - versioned);
        }
        counts.links.insert(id, link);
    }
    counts
}

fn check(day: &str, outcomes: Vec<BulkOutcome>) -> Result<(), RollupError> {
    match outcomes.into_iter().find(|o| !matches!(o, BulkOutcome::Stored(_))) {
        None => Ok(()),
        Some(BulkOutcome::Conflict) => {
            Err(RollupError::Refused { day: day.into(), reason: "a document changed meanwhile; run it again".into() })
        }
        Some(BulkOutcome::Refused { error, reason }) => {
            Err(RollupError::Refused { day: day.into(), reason: format!("{error}: {reason}") })
        }
        Some(BulkOutcome::Stored(_)) => Ok(()),
    }
}
