//! `couchlink import` as a library: rows read, planned ([`super::plan`]), every document
//! checked by the database's own validation functions ([`super::validate`]), then written
//! through `_bulk_docs`, in batches, as the editor account.

use std::collections::{HashMap, HashSet};

use futures_util::future::join_all;
use serde_json::{json, Value};

use super::entry::{stored_key, Entry, Invalid, Place, System};
use super::plan::{self, Fate};
use super::read::Row;
use super::validate::{Validator, ValidatorError};
use crate::couch::{BulkOutcome, CouchClient, CouchError, IdState};
use crate::design::{IMPORT_DESIGN_DOC, IMPORT_VIEW};
use crate::domain::LinkId;

/// IDs asked of `_all_docs` at once, and documents sent to `_bulk_docs` at once.
pub const BATCH: usize = 1000;
/// Requests in flight at once: CouchDB runs the validation functions of each `_bulk_docs` in a
/// JavaScript process of its own, so a second request keeps a second core busy.
pub const IN_FLIGHT: usize = 2;
/// Reading the whole database is chosen over asking for each row while it holds at most this
/// many documents per row: a `_changes` row with its document costs CouchDB 3.5 less than half
/// of a key looked up with `_all_docs` (docs/benchmarks.md). Past it, rows are looked up by key:
/// their codes in `_all_docs`, earlier runs' rows in the import's index (`_design/import`), and
/// fresh IDs in `_all_docs` again, so a larger database costs no more.
const SCAN_FACTOR: u64 = 2;
/// Documents per `_changes` page when reading the whole database.
const SCAN_PAGE: usize = 5000;
/// Rounds of writing for rows whose ID was taken meanwhile, before giving up on them.
const ROUNDS: usize = 5;
/// Fresh IDs offered to one row (its [`plan::candidate`]s) before giving up on it: each is taken
/// with a chance of the database's size over 916 million.
const CANDIDATES: u32 = 20;

/// How to import.
#[derive(Debug, Clone, Copy)]
pub struct Import {
    /// What wrote the files.
    pub system: System,
    /// Check everything, write nothing.
    pub dry_run: bool,
    /// Import the valid rows even when some are not.
    pub skip_invalid: bool,
}

/// How far an import is, for a progress bar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// Documents checked by the validation functions, of how many.
    Checking {
        /// Checked so far.
        done: u64,
        /// To check.
        total: u64,
    },
    /// Documents sent to CouchDB, of how many.
    Writing {
        /// Sent so far (in whole waves of batches).
        done: u64,
        /// To send.
        total: u64,
    },
}

/// A row that is (or would be, or already was) in the database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    /// Where it was read.
    pub place: Place,
    /// The source's code.
    pub code: Option<String>,
    /// The source's short URL.
    pub short_url: Option<String>,
    /// Its couchlink ID.
    pub id: LinkId,
    /// Whether that ID is the source's own code.
    pub kept: bool,
}

/// What an import did (or, dry, would do).
#[derive(Debug, Default)]
pub struct Outcome {
    /// Rows read.
    pub read: usize,
    /// Rows written now (dry: to be written).
    pub written: Vec<Stored>,
    /// Rows an earlier run (or the same document) already put there.
    pub already: Vec<Stored>,
    /// Rows refused, with their reasons.
    pub invalid: Vec<Invalid>,
}

impl Outcome {
    /// Every row in the database under an ID other than its code (now or earlier): the
    /// mapping file's rows.
    pub fn renamed(&self) -> impl Iterator<Item = &Stored> {
        self.written.iter().chain(&self.already).filter(|s| !s.kept)
    }
}

/// Why an import stopped.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// CouchDB could not be asked what it holds; nothing was written.
    #[error("cannot read the database (nothing was written)")]
    Lookup(#[source] CouchError),
    /// The validation functions cannot be run; nothing was written.
    #[error(transparent)]
    Validator(#[from] ValidatorError),
    /// Some rows are invalid and `--skip-invalid` was not given; nothing was written.
    #[error("{} of {} rows cannot be imported (each is listed above with its reason), so nothing was written; fix them, or give --skip-invalid to import the others", .0.invalid.len(), .0.read)]
    Invalid(Box<Outcome>),
    /// CouchDB refused rows while writing that had passed the check before; the others are
    /// written.
    #[error("CouchDB refused rows that had passed its validation functions before writing (each is listed above; they may have changed meanwhile); the other {} were written", .0.written.len())]
    RefusedWhileWriting(Box<Outcome>),
    /// CouchDB failed mid-way: `outcome.written` are stored, the rest are not.
    #[error("CouchDB failed after {written} of {total} links were written; the batch that failed (from the row at {from}) may be partly written, and no later batch was sent; run the same command again to write the rest (it skips what is there)", written = .outcome.written.len())]
    Interrupted {
        /// What was written before.
        outcome: Box<Outcome>,
        /// How many were to be written.
        total: usize,
        /// A row of the batch that failed (batches go in ID order, not file order).
        from: Place,
        /// What CouchDB did.
        #[source]
        source: CouchError,
    },
}

/// Imports `rows` through `editor`; `progress` is told how far the check and the writing are.
pub async fn import(
    editor: &CouchClient,
    how: Import,
    rows: Vec<Row>,
    progress: &dyn Fn(Progress),
) -> Result<Outcome, ImportError> {
    let mut outcome = Outcome { read: rows.len(), ..Outcome::default() };
    let mut entries = Vec::with_capacity(rows.len());
    for row in rows {
        match row {
            Ok(entry) => entries.push(entry),
            Err(invalid) => outcome.invalid.push(invalid),
        }
    }
    let entries = plan::without_duplicates(entries, &mut outcome.invalid);
    let to_write = assign_ids(editor, how.system, entries, &mut outcome).await?;
    let mut chosen: HashSet<LinkId> = to_write.iter().map(|(_, id, _, _)| *id).collect();
    let mut valid = check(editor, how.system, to_write, &mut outcome, progress).await?;
    outcome.invalid.sort_by(|a, b| (&a.place.file, a.place.line).cmp(&(&b.place.file, b.place.line)));
    if !outcome.invalid.is_empty() && !how.skip_invalid {
        return Err(ImportError::Invalid(Box::new(outcome)));
    }
    if how.dry_run {
        outcome.written = valid.iter().map(|(entry, id, kept, _, _)| stored(entry, *id, *kept)).collect();
        return Ok(outcome);
    }
    // In ID order: CouchDB 3 stores a batch of neighbouring IDs in fewer B-tree updates
    // (docs/benchmarks.md).
    valid.sort_unstable_by_key(|(_, id, _, _, _)| *id);
    let refused_before = outcome.invalid.len();
    let outcome = write(editor, how.system, valid, &mut chosen, outcome, progress).await?;
    // CouchDB refused rows its validation functions passed here (they changed meanwhile, say):
    // the others are written, and the run must not look like a success.
    if outcome.invalid.len() > refused_before && !how.skip_invalid {
        return Err(ImportError::RefusedWhileWriting(Box::new(outcome)));
    }
    Ok(outcome)
}

/// A row to write: its entry, its ID, whether that is the source's own code, and which of its
/// fresh IDs it is (for a fresh one).
type ToWrite = (Entry, LinkId, bool, u32);
/// A row to write with its document, checked.
type Checked = (Entry, LinkId, bool, u32, Value);

/// Each row's fate: an ID to write it under (the rows returned), already imported or invalid
/// (into `outcome`).
async fn assign_ids(
    editor: &CouchClient,
    system: System,
    entries: Vec<Entry>,
    outcome: &mut Outcome,
) -> Result<Vec<ToWrite>, ImportError> {
    // What the database holds under each code that could be kept: read whole when that is
    // cheaper than asking for each row.
    let wanted: Vec<LinkId> = entries.iter().filter_map(plan::wanted_id).collect();
    let size = database_size(editor).await.map_err(ImportError::Lookup)?;
    let mut known = if size <= SCAN_FACTOR * entries.len() as u64 {
        Some(scan(editor, system, &wanted).await.map_err(ImportError::Lookup)?)
    } else {
        None
    };
    let states = match &mut known {
        Some(known) => std::mem::take(&mut known.states),
        None => id_states(editor, &wanted).await.map_err(ImportError::Lookup)?,
    };
    let mut to_write = Vec::with_capacity(entries.len());
    let mut fresh = Vec::new();
    for entry in entries {
        let state = plan::wanted_id(&entry).map(|id| states.get(&id).unwrap_or(&IdState::Free));
        match plan::fate(system, &entry, state) {
            Ok(Fate::Keep(id)) => to_write.push((entry, id, true, 0)),
            Ok(Fate::Already(id)) => outcome.already.push(stored(&entry, id, true)),
            Ok(Fate::Fresh) => fresh.push(entry),
            Err(refused) => outcome.invalid.push(Invalid { place: entry.place, reason: refused.to_string() }),
        }
    }
    if fresh.is_empty() {
        return Ok(to_write);
    }
    // Rows without an ID of their own may be in the database from an earlier run, under the
    // ID given then: found by their `imported_from`, in the import's index.
    let earlier = match &mut known {
        Some(known) => std::mem::take(&mut known.earlier),
        None => match imported(editor, system, &fresh).await.map_err(ImportError::Lookup)? {
            Some(earlier) => earlier,
            None => {
                tracing::warn!(
                    "{} has no import index (_design/{IMPORT_DESIGN_DOC}): reading the whole database to find earlier imports; run `couchlink setup` to add it",
                    editor.database()
                );
                let whole = scan(editor, system, &wanted).await.map_err(ImportError::Lookup)?;
                let earlier = whole.earlier.clone();
                known = Some(whole);
                earlier
            }
        },
    };
    let mut unseen = Vec::with_capacity(fresh.len());
    for entry in fresh {
        match earlier.get(entry.key()) {
            Some(id) => outcome.already.push(stored(&entry, *id, false)),
            None => unseen.push((entry, 0)),
        }
    }
    let mut chosen: HashSet<LinkId> = to_write.iter().map(|(_, id, _, _)| *id).collect();
    let used = known.as_ref().map(|k| &k.used);
    let placed = place(editor, system, unseen, used, &mut chosen, outcome).await.map_err(ImportError::Lookup)?;
    to_write.extend(placed);
    Ok(to_write)
}

/// Fresh IDs for `rows` (each with the first of its [`plan::candidate`]s to try): each row's
/// first candidate that the database never used (known from `used`, the whole database's IDs,
/// or else asked in batches) and no other row of this run has. A candidate that holds this very
/// row (an import running beside this one stored it) makes the row already imported.
async fn place(
    editor: &CouchClient,
    system: System,
    mut rows: Vec<(Entry, u32)>,
    used: Option<&HashSet<LinkId>>,
    chosen: &mut HashSet<LinkId>,
    outcome: &mut Outcome,
) -> Result<Vec<ToWrite>, CouchError> {
    let mut placed = Vec::with_capacity(rows.len());
    while !rows.is_empty() {
        let ids: Vec<LinkId> = rows.iter().map(|(entry, n)| plan::candidate(system, entry.key(), *n)).collect();
        let states = match used {
            Some(used) => {
                ids.iter().map(|id| (*id, if used.contains(id) { IdState::Deleted } else { IdState::Free })).collect()
            }
            None => id_states(editor, &ids).await?,
        };
        let mut next = Vec::new();
        for ((entry, n), id) in rows.into_iter().zip(ids) {
            match states.get(&id) {
                Some(IdState::Free) if chosen.insert(id) => placed.push((entry, id, false, n)),
                Some(IdState::Taken(doc)) if stored_key(system, doc) == Some(entry.key()) => {
                    outcome.already.push(stored(&entry, id, false))
                }
                _ if n + 1 >= CANDIDATES => outcome.invalid.push(Invalid {
                    place: entry.place,
                    reason: format!("no free ID among its {CANDIDATES} fresh ones (last tried {id})"),
                }),
                _ => next.push((entry, n + 1)),
            }
        }
        rows = next;
    }
    Ok(placed)
}

/// The ID of each row of `rows` an earlier import from `system` stored, by key, from the
/// import's index; `None` when the database has no such index.
async fn imported(
    editor: &CouchClient,
    system: System,
    rows: &[Entry],
) -> Result<Option<HashMap<String, LinkId>>, CouchError> {
    let mut found = HashMap::new();
    for wave in rows.chunks(BATCH * IN_FLIGHT) {
        let asked = join_all(wave.chunks(BATCH).map(|batch| async move {
            let keys: Vec<Value> = batch.iter().map(|e| json!([system.as_str(), e.key()])).collect();
            editor.view_ids(IMPORT_DESIGN_DOC, IMPORT_VIEW, &keys).await
        }));
        for rows in asked.await {
            let Some(rows) = rows? else { return Ok(None) };
            for (key, id) in rows {
                if let (Some(key), Ok(id)) = (key.get(1).and_then(Value::as_str), LinkId::parse(&id)) {
                    found.insert(key.to_owned(), id);
                }
            }
        }
    }
    Ok(Some(found))
}

/// The documents of `to_write` that the database's validation functions accept, as this
/// account; the others into `outcome.invalid`.
async fn check(
    editor: &CouchClient,
    system: System,
    to_write: Vec<ToWrite>,
    outcome: &mut Outcome,
    progress: &dyn Fn(Progress),
) -> Result<Vec<Checked>, ImportError> {
    let validator = validator(editor).await?;
    // Every document of this run states its writer and the run, so that the history shows the
    // import as one bulk change.
    let edit = crate::history::edit(editor.account_name().unwrap_or(""), Some(&crate::history::batch_name("import")));
    let mut valid = Vec::with_capacity(to_write.len());
    let total = to_write.len() as u64;
    for (done, (entry, id, kept, n)) in to_write.into_iter().enumerate() {
        if done % BATCH == 0 {
            progress(Progress::Checking { done: done as u64, total });
        }
        let doc = plan::document(system, &entry, &id, edit.as_ref());
        match validator.check(&doc) {
            Ok(()) => valid.push((entry, id, kept, n, doc)),
            // Said with the field it names: `"targets.2.url": ...`.
            Err(rejected) => {
                let reason = crate::domain::Refusal::parse(&rejected.to_string()).to_string();
                outcome.invalid.push(Invalid { place: entry.place, reason })
            }
        }
    }
    Ok(valid)
}

fn stored(entry: &Entry, id: LinkId, kept: bool) -> Stored {
    Stored { place: entry.place.clone(), code: entry.code.clone(), short_url: entry.short_url.clone(), id, kept }
}

/// The documents, in batches. A row whose ID was taken meanwhile is looked at again: already
/// there when the document under its ID is this very row (an import of the same file running
/// beside this one), else given its next fresh ID for a later round.
async fn write(
    editor: &CouchClient,
    system: System,
    mut pending: Vec<Checked>,
    chosen: &mut HashSet<LinkId>,
    mut outcome: Outcome,
    progress: &dyn Fn(Progress),
) -> Result<Outcome, ImportError> {
    let total = pending.len();
    let mut sent = 0;
    for _ in 0..ROUNDS {
        let mut taken = Vec::new();
        // Batches go in waves of IN_FLIGHT, each wave finished before the next starts: when
        // one fails, every batch is known written, failed, or never sent.
        for wave in pending.chunks(BATCH * IN_FLIGHT) {
            let batches: Vec<_> = wave.chunks(BATCH).collect();
            let results = join_all(batches.iter().map(|batch| {
                let docs: Vec<Value> = batch.iter().map(|(_, _, _, _, doc)| doc.clone()).collect();
                async move { editor.bulk_create(&docs).await }
            }))
            .await;
            let mut failed = None;
            for (batch, results) in batches.iter().zip(results) {
                let results = match results {
                    Ok(results) => results,
                    Err(source) => {
                        failed.get_or_insert((batch[0].0.place.clone(), source));
                        continue;
                    }
                };
                for ((entry, id, kept, n, _), result) in batch.iter().zip(results) {
                    match result {
                        BulkOutcome::Stored(_) => outcome.written.push(stored(entry, *id, *kept)),
                        BulkOutcome::Conflict if system == System::Jsonl => outcome.invalid.push(Invalid {
                            place: entry.place.clone(),
                            reason: format!("{id} was taken by another link while this import ran"),
                        }),
                        BulkOutcome::Conflict => taken.push((entry.clone(), *id, *kept, *n)),
                        BulkOutcome::Refused { reason, .. } => {
                            let reason = crate::domain::Refusal::parse(&reason).to_string();
                            outcome.invalid.push(Invalid { place: entry.place.clone(), reason })
                        }
                    }
                }
            }
            if let Some((from, source)) = failed {
                return Err(ImportError::Interrupted { outcome: Box::new(outcome), total, from, source });
            }
            sent += wave.len();
            progress(Progress::Writing { done: sent.min(total) as u64, total: total as u64 });
        }
        if taken.is_empty() {
            return Ok(outcome);
        }
        let interrupted = |outcome: &mut Outcome, from: &Place, source| ImportError::Interrupted {
            total,
            from: from.clone(),
            outcome: Box::new(std::mem::take(outcome)),
            source,
        };
        let ids: Vec<LinkId> = taken.iter().map(|(_, id, _, _)| *id).collect();
        let states = match id_states(editor, &ids).await {
            Ok(states) => states,
            Err(source) => return Err(interrupted(&mut outcome, &taken[0].0.place, source)),
        };
        let mut again = Vec::new();
        for (entry, id, kept, n) in taken {
            match states.get(&id) {
                Some(IdState::Taken(doc)) if stored_key(system, doc) == Some(entry.key()) => {
                    outcome.already.push(stored(&entry, id, kept))
                }
                // A kept code taken by another link: the row gets a fresh ID instead.
                _ => again.push((entry, if kept { 0 } else { n + 1 })),
            }
        }
        let from = again.first().map(|(entry, _)| entry.place.clone());
        let placed = match place(editor, system, again, None, chosen, &mut outcome).await {
            Ok(placed) => placed,
            Err(source) => return Err(interrupted(&mut outcome, &from.expect("a row failed"), source)),
        };
        pending = placed
            .into_iter()
            .map(|(entry, id, kept, n)| {
                // As before this type: a row given a fresh ID in a later round states no `edit`.
                let doc = plan::document(system, &entry, &id, None);
                (entry, id, kept, n, doc)
            })
            .collect();
        if pending.is_empty() {
            return Ok(outcome);
        }
    }
    for (entry, id, _, _, _) in pending {
        outcome.invalid.push(Invalid { place: entry.place, reason: format!("no free ID found (last tried {id})") });
    }
    Ok(outcome)
}

/// What the database holds under each of `ids`.
async fn id_states(editor: &CouchClient, ids: &[LinkId]) -> Result<HashMap<LinkId, IdState>, CouchError> {
    let mut states = HashMap::with_capacity(ids.len());
    for wave in ids.chunks(BATCH * IN_FLIGHT) {
        let asked = join_all(wave.chunks(BATCH).map(|batch| async move {
            let keys: Vec<&str> = batch.iter().map(LinkId::as_str).collect();
            editor.id_states(&keys).await.map(|found| batch.iter().copied().zip(found))
        }));
        for found in asked.await {
            states.extend(found?);
        }
    }
    Ok(states)
}

/// The database read whole, as far as an import needs it.
struct Known {
    /// What it holds under each wanted ID that is not free.
    states: HashMap<LinkId, IdState>,
    /// Every ID it ever used, deleted ones included.
    used: HashSet<LinkId>,
    /// The ID of each document an earlier import from this system stored, by key.
    earlier: HashMap<String, LinkId>,
}

/// The database read whole through `_changes` (the one listing with deleted documents).
async fn scan(editor: &CouchClient, system: System, wanted: &[LinkId]) -> Result<Known, CouchError> {
    let wanted: HashSet<LinkId> = wanted.iter().copied().collect();
    let (mut states, mut used, mut earlier) = (HashMap::new(), HashSet::new(), HashMap::new());
    let mut since = None;
    loop {
        let page = editor.changes_page(since.as_ref(), SCAN_PAGE).await?;
        let last = page.results.len() < SCAN_PAGE;
        for change in page.results {
            let Ok(id) = LinkId::parse(&change.id) else { continue };
            used.insert(id);
            let doc = change.doc.filter(|_| !change.deleted);
            if let Some(key) = doc.as_ref().and_then(|doc| stored_key(system, doc)) {
                earlier.insert(key.to_owned(), id);
            }
            if wanted.contains(&id) {
                states.insert(id, doc.map_or(IdState::Deleted, IdState::Taken));
            }
        }
        if last {
            return Ok(Known { states, used, earlier });
        }
        since = Some(page.last_seq);
    }
}

/// How many documents the database holds and held (deleted ones count: `_changes` lists them).
async fn database_size(editor: &CouchClient) -> Result<u64, CouchError> {
    let info = editor.database_info().await?.unwrap_or_default();
    Ok(info.doc_count + info.doc_del_count)
}

/// The database's validation functions, to run as `editor` would be run by CouchDB.
async fn validator(editor: &CouchClient) -> Result<Validator, ImportError> {
    let functions = editor.validation_functions().await.map_err(ImportError::Lookup)?;
    let session = editor.session().await.map_err(ImportError::Lookup)?;
    let user_ctx = json!({"db": editor.database(), "name": session.name, "roles": session.roles});
    // An editor may not be allowed to read `_security`: the functions then see none, which
    // only matters to them for database admins, who need no import to write.
    let sec_obj = editor.security().await.unwrap_or_else(|_| json!({}));
    Ok(Validator::new(&functions, &user_ctx, &sec_obj)?)
}
