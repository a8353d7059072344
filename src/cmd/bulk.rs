//! `couchlink bulk`: one change to many links (picked by ID, by tag, or by a word of the
//! console's search), previewed link by link before anything is written, then written through
//! `_bulk_docs` (CouchDB checks each) and reported link by link; `couchlink undo BATCH` puts
//! every link of a bulk change back as it was, sparing links edited since. Both exit 0 only
//! when every link was applied.

use std::collections::HashMap;
use std::io::Write;

use clap::Args;
use serde_json::{json, Value};

use super::CouchArgs;
use crate::bulk::{plan, plan_undo, put_back, read_record, write, BulkError, Change, Outcome, Planned, UndoStep};
use crate::couch::{CouchClient, CouchError, IdState};
use crate::history::entry::own_fields;
use crate::history::read::changed_fields;

/// Flags of `couchlink bulk`.
#[derive(Debug, Clone, Args)]
#[command(mut_arg("couchdb_user", |a| a.help("A CouchDB account that may edit links (an editor)")))]
pub struct BulkArgs {
    /// The links, by ID (comma-separated).
    #[arg(long, value_delimiter = ',', required_unless_present_any = ["tag", "search"])]
    pub ids: Vec<String>,
    /// Every link with this tag.
    #[arg(long)]
    pub tag: Option<String>,
    /// Every link the console's search finds for this word (its ID, a tag, a word of its title
    /// or URL).
    #[arg(long)]
    pub search: Option<String>,
    /// Point every link to this URL.
    #[arg(long, value_parser = super::target_flag)]
    pub set_url: Option<String>,
    /// Add this tag (repeatable).
    #[arg(long)]
    pub add_tag: Vec<String>,
    /// Remove this tag (repeatable).
    #[arg(long)]
    pub remove_tag: Vec<String>,
    /// Deactivate every link.
    #[arg(long, conflicts_with = "reactivate")]
    pub deactivate: bool,
    /// Reactivate every link.
    #[arg(long)]
    pub reactivate: bool,
    /// Set `expires` (RFC 3339), or `none` to remove it.
    #[arg(long)]
    pub expires: Option<String>,
    /// Set `valid_from` (RFC 3339), or `none` to remove it.
    #[arg(long)]
    pub valid_from: Option<String>,
    /// Add this rule after the others (JSON, as in `targets`).
    #[arg(long, value_parser = parse_json)]
    pub add_rule: Option<Value>,
    /// Replace the rules with this list (JSON; `[]` removes them).
    #[arg(long, value_parser = parse_json, conflicts_with = "add_rule")]
    pub replace_rules: Option<Value>,
    /// Ask every link's visitors for this password, read from this file (`-`: standard input;
    /// one trailing line end dropped); only its Argon2id hash is stored.
    #[arg(long, value_name = "FILE", conflicts_with = "remove_password")]
    pub password_file: Option<std::path::PathBuf>,
    /// Remove every link's password.
    #[arg(long)]
    pub remove_password: bool,
    /// Set `max_visits` (after that many redirects a link acts as expired), or `none` to remove
    /// it.
    #[arg(long)]
    pub max_visits: Option<String>,
    /// Show what would change, write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// The history database, where the change is recorded for undo [default: <db>_history];
    /// `off`: none (the change cannot be undone).
    #[arg(long, env = "COUCHLINK_HISTORY_DB", value_parser = crate::domain::CompanionDb::parse)]
    pub history_db: Option<crate::domain::CompanionDb>,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub couch: CouchArgs,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub on: super::DomainChoice,
}

/// Flags of `couchlink undo`.
#[derive(Debug, Clone, Args)]
#[command(mut_arg("couchdb_user", |a| a.help("A CouchDB account that may edit links (an editor)")))]
pub struct UndoArgs {
    /// The bulk change, as `couchlink bulk` named it (`bulk-20261128T090000-a1b2c3d4`).
    pub batch: String,
    /// Show what would change, write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// The history database [default: <db>_history].
    #[arg(long, env = "COUCHLINK_HISTORY_DB", value_parser = crate::domain::CompanionDb::parse)]
    pub history_db: Option<crate::domain::CompanionDb>,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub couch: CouchArgs,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub on: super::DomainChoice,
}

fn parse_json(s: &str) -> Result<Value, String> {
    serde_json::from_str(s).map_err(|e| format!("not JSON: {e}"))
}

/// Why `bulk` or `undo` failed.
#[derive(Debug, thiserror::Error)]
pub enum BulkCommandError {
    /// CouchDB refused or could not be reached.
    #[error(transparent)]
    Bulk(#[from] BulkError),
    /// The flags ask for nothing, or for something unusable.
    #[error("{0}")]
    Usage(String),
    /// Some links were not applied (each said above).
    #[error("{0} of {1} link(s) not applied (see above)")]
    NotAll(usize, usize),
    /// Some links of the change undone were not put back (each said above).
    #[error("{0} of the change's {1} link(s) not put back (see above)")]
    NotPutBack(usize, usize),
    /// Writing stdout failed.
    #[error("cannot write the output")]
    Output(#[from] std::io::Error),
    /// The async runtime could not start.
    #[error("cannot start the async runtime")]
    Runtime(#[source] std::io::Error),
}

impl From<CouchError> for BulkCommandError {
    fn from(e: CouchError) -> Self {
        BulkCommandError::Bulk(e.into())
    }
}

impl BulkArgs {
    fn change(&self) -> Result<Change, BulkCommandError> {
        let instant = |v: &Option<String>, name: &str| -> Result<Option<Option<String>>, BulkCommandError> {
            match v.as_deref() {
                None => Ok(None),
                Some("none") => Ok(Some(None)),
                Some(t) => time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339)
                    .map(|_| Some(Some(t.to_owned())))
                    .map_err(|_| {
                        BulkCommandError::Usage(format!("--{name} {t:?} is not a time like 2026-12-31T23:59:59Z"))
                    }),
            }
        };
        let rules = match &self.replace_rules {
            None => None,
            Some(Value::Array(rules)) => Some(rules.clone()),
            Some(_) => return Err(BulkCommandError::Usage("--replace-rules takes a JSON list of rules".into())),
        };
        let change = Change {
            url: self.set_url.clone(),
            add_tags: self.add_tag.clone(),
            remove_tags: self.remove_tag.clone(),
            inactive: if self.deactivate {
                Some(true)
            } else if self.reactivate {
                Some(false)
            } else {
                None
            },
            expires: instant(&self.expires, "expires")?,
            valid_from: instant(&self.valid_from, "valid-from")?,
            add_rule: self.add_rule.clone(),
            replace_rules: rules,
            password: match (&self.password_file, self.remove_password) {
                (Some(file), _) => Some(Some(
                    super::create::password_hash(file)
                        .map_err(|e| BulkCommandError::Usage(e.to_string()))?
                        .as_str()
                        .to_owned(),
                )),
                (None, true) => Some(None),
                (None, false) => None,
            },
            max_visits: match self.max_visits.as_deref() {
                None => None,
                Some("none") => Some(None),
                Some(n) => Some(Some(
                    n.parse().ok().filter(|n| (1..=crate::domain::MAX_VISITS).contains(n)).ok_or_else(|| {
                        BulkCommandError::Usage(format!(
                            "--max-visits {n}: a whole number from 1 to 1000000000, or none"
                        ))
                    })?,
                )),
            },
        };
        if change.is_empty() {
            return Err(BulkCommandError::Usage(
                "say what to change: --set-url, --add-tag, --remove-tag, --deactivate, --reactivate, --expires, \
                 --valid-from, --add-rule or --replace-rules"
                    .into(),
            ));
        }
        Ok(change)
    }

    /// The IDs picked: by ID, by tag (the search view's word, then the tag itself checked), or
    /// by search word.
    async fn picked(&self, links: &CouchClient) -> Result<Vec<String>, BulkCommandError> {
        let mut ids: Vec<String> = self.ids.clone();
        for (word, exact_tag) in [(self.tag.as_ref(), true), (self.search.as_ref(), false)] {
            let Some(word) = word else { continue };
            // The search view keeps words (and tags) of at most 64 characters.
            if word.chars().count() > 64 {
                let flag = if exact_tag { "--tag" } else { "--search" };
                return Err(BulkCommandError::Usage(format!(
                    "{flag} finds words of at most 64 characters: name these links with --ids"
                )));
            }
            let key = json!(word.to_lowercase());
            let rows = links.view_ids(crate::design::CONSOLE_DESIGN_DOC, "search", &[key]).await?.ok_or_else(|| {
                BulkCommandError::Usage("the database has no console views: run `couchlink setup`".into())
            })?;
            let found: Vec<String> = rows.into_iter().map(|(_, id)| id).collect();
            if exact_tag {
                let refs: Vec<&str> = found.iter().map(String::as_str).collect();
                let states = links.id_states(&refs).await?;
                ids.extend(found.iter().zip(states).filter_map(|(id, state)| match state {
                    crate::couch::IdState::Taken(doc)
                        if doc["tags"].as_array().is_some_and(|t| t.iter().any(|t| t == word.as_str())) =>
                    {
                        Some(id.clone())
                    }
                    _ => None,
                }));
            } else {
                ids.extend(found);
            }
        }
        ids.sort();
        ids.dedup();
        Ok(ids)
    }

    /// Previews, then (unless `--dry-run`) writes, and reports each link.
    pub fn execute(self) -> Result<(), BulkCommandError> {
        let change = self.change()?;
        let links = CouchClient::new(&self.couch.clone().into())?;
        let history =
            super::history_of(&links, self.history_db.as_ref()).map_err(|e| BulkCommandError::Usage(e.to_string()))?;
        let runtime = super::current_thread_runtime().map_err(BulkCommandError::Runtime)?;
        runtime.block_on(async {
            let ids = self.picked(&links).await?;
            if ids.is_empty() {
                return Err(BulkCommandError::Usage("no link picked".into()));
            }
            let planned = plan(&links, &ids, &change).await?;
            let mut out = std::io::stdout().lock();
            preview(&mut out, &planned)?;
            let changing = planned.iter().filter(|p| p.after.is_some()).count();
            if self.dry_run {
                writeln!(out, "dry run: {changing} of {} link(s) would change; nothing written", planned.len())?;
                return Ok(());
            }
            let writer = links.account_name().unwrap_or("").to_owned();
            let (batch, written) = write_named("bulk", &links, history.as_ref(), &planned, &writer, None).await?;
            let undo = history.as_ref().map(|_| undo_command(&batch, &self.couch, &self.on, self.history_db.as_ref()));
            report(&mut out, &planned, &written, &batch, undo.as_deref())
        })
    }
}

/// The command that undoes `batch`, with the database chosen as this command's was.
fn undo_command(
    batch: &str,
    couch: &CouchArgs,
    on: &super::DomainChoice,
    history_db: Option<&crate::domain::CompanionDb>,
) -> String {
    let mut command = format!("couchlink undo {batch}");
    if let Some(domain) = &on.domain {
        command.push_str(&format!(" --domain {}", shell_word(domain)));
    } else if couch.db != "links" {
        command.push_str(&format!(" --db {}", shell_word(&couch.db)));
    }
    let beside = crate::domain::Companion::History.beside(&couch.db);
    if let Some(history) = history_db.and_then(|h| h.named()).filter(|h| *h != beside) {
        command.push_str(&format!(" --history-db {}", shell_word(history)));
    }
    command
}

/// `word` as a POSIX shell reads it back: as it is when plain, else in single quotes (a
/// database may be named `a$(1)+x`).
fn shell_word(word: &str) -> String {
    if !word.is_empty() && word.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_./:@%+=,".contains(&b)) {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// Writes `planned` as a fresh bulk change named `{kind}-<time>-<random>` (another name where
/// one is taken): its name and what it wrote.
async fn write_named(
    kind: &str,
    links: &CouchClient,
    history: Option<&CouchClient>,
    planned: &[Planned],
    writer: &str,
    undoes: Option<&str>,
) -> Result<(String, crate::bulk::Written), BulkCommandError> {
    for _ in 0..5 {
        let batch = crate::history::batch_name(kind);
        if let Some(written) = write(links, history, planned, writer, &batch, undoes).await? {
            return Ok((batch, written));
        }
    }
    Err(BulkCommandError::Usage("five fresh names for the bulk change were all taken: run it again".into()))
}

impl UndoArgs {
    /// Puts the batch's links back, sparing those changed since; reports each link.
    pub fn execute(self) -> Result<(), BulkCommandError> {
        if !crate::domain::is_batch_name(&self.batch) {
            return Err(BulkCommandError::Usage(format!(
                "{:?} is no bulk change's name (as couchlink bulk prints it: bulk-20261128T090000-a1b2c3d4)",
                self.batch
            )));
        }
        let links = CouchClient::new(&self.couch.clone().into())?;
        let history = super::history_of(&links, self.history_db.as_ref())
            .map_err(|e| BulkCommandError::Usage(e.to_string()))?
            .ok_or_else(|| {
                BulkCommandError::Usage(
                    "the history is off (--history-db off): a bulk change is undone from its record there".into(),
                )
            })?;
        let runtime = super::current_thread_runtime().map_err(BulkCommandError::Runtime)?;
        runtime.block_on(async {
            let docs = history.docs_with_prefix(&format!("~batch:{}:", self.batch)).await?;
            let Some(record) = read_record(&self.batch, &docs) else {
                return Err(BulkCommandError::Usage(format!(
                    "no bulk change {} is recorded in {} (a change made before couchlink recorded them is put back \
                     link by link: couchlink history ID, then couchlink restore ID --rev REV)",
                    self.batch,
                    history.database()
                )));
            };
            let mut out = std::io::stdout().lock();
            for id in &record.ignored {
                writeln!(
                    out,
                    "{id}: not part of the change as its first part records it (written by another account than {}, \
                     past its last part, or over by a revision a client named); not believed",
                    record.by
                )?;
            }
            let current = now_with_ancestry(&links, &record.members).await?;
            let steps = plan_undo(&record, &current);
            // What the record says each link was is its writer's word: held to the revision it
            // names, as CouchDB holds it, else as the history recorded it.
            let (steps, disbelieved) = held_to_the_revisions(&links, &history, &record.members, steps).await?;
            for said in &disbelieved {
                writeln!(out, "{said}")?;
            }
            // Links too long to keep in the record: read back as the change found them.
            let read_back: Vec<(String, String)> = steps
                .iter()
                .filter_map(|(id, step)| match step {
                    UndoStep::ReadBack { rev, .. } => Some((id.clone(), rev.clone())),
                    _ => None,
                })
                .collect();
            let mut bodies =
                if read_back.is_empty() { Vec::new() } else { links.revisions(&read_back).await? }.into_iter();
            let mut planned = Vec::new();
            let mut left = Vec::new();
            let mut unchanged = Vec::new();
            for ((id, step), now) in steps.into_iter().zip(current) {
                let now = now.unwrap_or(Value::Null);
                match step {
                    UndoStep::Restore(doc) => planned.push(Planned { id, before: now, after: Some(doc) }),
                    UndoStep::ReadBack { rev, current } => match bodies.next().flatten() {
                        Some(body) => {
                            let after = put_back(&id, &body, &current);
                            planned.push(Planned { id, before: now, after: Some(after) });
                        }
                        None => left.push(format!(
                            "{id}: too long to keep in the record, and CouchDB no longer holds revision {rev} as the \
                             change found it; left as it is (couchlink history {id})"
                        )),
                    },
                    UndoStep::ChangedSince => left.push(format!(
                        "{id}: changed since the bulk change read it, and not by the change alone (edited since, or \
                         written by someone else instead); left as it is"
                    )),
                    UndoStep::Missing => left.push(format!("{id}: no such link any more; left as it is")),
                    UndoStep::Unverified(rev) => left.push(format!(
                        "{id}: CouchDB no longer holds revision {rev}, and the history does not record it as the \
                         change's record says it was; left as it is (couchlink history {id}, then couchlink restore \
                         {id} --rev REV)"
                    )),
                    UndoStep::NotChanged => unchanged.push(id),
                }
            }
            preview(&mut out, &planned)?;
            for id in &unchanged {
                writeln!(out, "{id}: as the bulk change found it (the change did not write it); nothing to undo")?;
            }
            for said in &left {
                writeln!(out, "{said}")?;
            }
            let spared = || {
                if left.is_empty() {
                    Ok(())
                } else {
                    Err(BulkCommandError::NotPutBack(left.len(), record.members.len()))
                }
            };
            if self.dry_run {
                writeln!(
                    out,
                    "dry run: {} link(s) would be put back, {} left as they are; nothing written",
                    planned.len(),
                    left.len()
                )?;
                return spared();
            }
            if planned.is_empty() {
                writeln!(out, "undo of {}: nothing to put back, {} link(s) left as they are", self.batch, left.len())?;
                return spared();
            }
            let writer = links.account_name().unwrap_or("").to_owned();
            let (batch, written) =
                write_named("undo", &links, Some(&history), &planned, &writer, Some(&self.batch)).await?;
            let undo = undo_command(&batch, &self.couch, &self.on, self.history_db.as_ref());
            let reported = report(&mut out, &planned, &written, &batch, Some(&undo));
            if !left.is_empty() {
                writeln!(out, "undo of {}: {} link(s) left as they are (each said above)", self.batch, left.len())?;
            }
            match reported {
                Err(BulkCommandError::NotAll(n, _)) => {
                    Err(BulkCommandError::NotPutBack(n + left.len(), record.members.len()))
                }
                Err(e) => Err(e),
                Ok(()) => spared(),
            }
        })
    }
}

/// `steps` with each restore held to the revision its member names: put back as CouchDB holds
/// that revision (said where the record's fields differ), or, where CouchDB no longer holds it,
/// as the record says only when the history's entry of that revision says the same; else
/// [`UndoStep::Unverified`]. The second list says where the record was not believed. (Anyone who may write a change's record may write what it says a
/// link was: undo writes nothing a revision of the link never held.)
async fn held_to_the_revisions(
    links: &CouchClient,
    history: &CouchClient,
    members: &[crate::bulk::Member],
    steps: Vec<(String, UndoStep)>,
) -> Result<(Vec<(String, UndoStep)>, Vec<String>), CouchError> {
    let restoring: Vec<usize> =
        steps.iter().enumerate().filter(|(_, (_, s))| matches!(s, UndoStep::Restore(_))).map(|(i, _)| i).collect();
    let mut held = Vec::with_capacity(restoring.len());
    for chunk in restoring.chunks(500) {
        let wanted: Vec<(String, String)> =
            chunk.iter().map(|&i| (members[i].id.clone(), members[i].rev.clone())).collect();
        held.extend(links.revisions(&wanted).await?);
    }
    // Where CouchDB no longer holds the revision, the history's entry of it.
    let gone: Vec<String> = restoring
        .iter()
        .zip(&held)
        .filter(|(_, body)| body.is_none())
        .map(|(&i, _)| crate::history::entry::entry_id(&members[i].id, &members[i].rev))
        .collect();
    let mut recorded: HashMap<String, Value> = HashMap::new();
    for chunk in gone.chunks(500) {
        let refs: Vec<&str> = chunk.iter().map(String::as_str).collect();
        for (key, state) in refs.iter().zip(history.id_states(&refs).await?) {
            if let IdState::Taken(entry) = state {
                recorded.insert((*key).to_owned(), entry);
            }
        }
    }
    let mut bodies = held.into_iter();
    let mut said = Vec::new();
    let mut out = Vec::with_capacity(steps.len());
    for (i, (id, step)) in steps.into_iter().enumerate() {
        let UndoStep::Restore(doc) = step else {
            out.push((id, step));
            continue;
        };
        let member = &members[i];
        let current = doc["_rev"].as_str().unwrap_or_default().to_owned();
        match bodies.next().flatten() {
            Some(body) => {
                let back = put_back(&id, &body, &current);
                if back != doc {
                    said.push(format!(
                        "{id}: the change's record says otherwise of revision {} than CouchDB holds; put back as \
                         CouchDB holds it (the record is not believed)",
                        member.rev
                    ));
                }
                out.push((id, UndoStep::Restore(back)));
            }
            None => {
                let entry = recorded.get(&crate::history::entry::entry_id(&id, &member.rev));
                let agrees = entry.is_some_and(|e| {
                    e["after"].is_object()
                        && e["large"]["after"].as_object().is_none_or(|l| l.is_empty())
                        && put_back(&id, &e["after"], &current) == doc
                });
                if agrees {
                    out.push((id, UndoStep::Restore(doc)));
                } else {
                    out.push((id.clone(), UndoStep::Unverified(member.rev.clone())));
                }
            }
        }
    }
    Ok((out, said))
}

/// Each member of a change as it is now, with its ancestry (`None`: no such link), in order.
async fn now_with_ancestry(
    links: &CouchClient,
    members: &[crate::bulk::Member],
) -> Result<Vec<Option<Value>>, CouchError> {
    let mut out = Vec::with_capacity(members.len());
    for chunk in members.chunks(500) {
        let refs: Vec<&str> = chunk.iter().map(|m| m.id.as_str()).collect();
        let states = links.id_states(&refs).await?;
        let wanted: Vec<(String, String)> = chunk
            .iter()
            .zip(&states)
            .filter_map(|(m, state)| match state {
                IdState::Taken(doc) => Some((m.id.clone(), doc["_rev"].as_str().unwrap_or_default().to_owned())),
                _ => None,
            })
            .collect();
        let mut bodies = links.revisions(&wanted).await?.into_iter();
        for state in states {
            out.push(match state {
                // Changed again between the two reads: as it is now, its ancestry unknown (so
                // never taken for the change's own write).
                IdState::Taken(doc) => Some(bodies.next().flatten().unwrap_or(doc)),
                _ => None,
            });
        }
    }
    Ok(out)
}

/// Each link and what changes, before and after.
fn preview(out: &mut impl Write, planned: &[Planned]) -> std::io::Result<()> {
    for p in planned {
        match &p.after {
            None if p.before.is_null() => writeln!(out, "{}: no such link", p.id)?,
            None => writeln!(out, "{}: unchanged", p.id)?,
            Some(after) => {
                writeln!(out, "{}:", p.id)?;
                for (field, before, after) in
                    changed_fields(&json!({"before": own_fields(&p.before), "after": own_fields(after)}))
                {
                    let show = |v: Option<Value>| v.map_or_else(|| "(none)".to_owned(), |v| v.to_string());
                    writeln!(out, "    {field}: {} -> {}", show(before), show(after))?;
                }
            }
        }
    }
    Ok(())
}

/// Each link's outcome, then the batch's name, whether everything applied, and the command that
/// undoes it.
fn report(
    out: &mut impl Write,
    planned: &[Planned],
    written: &crate::bulk::Written,
    batch: &str,
    undo: Option<&str>,
) -> Result<(), BulkCommandError> {
    let mut applied = 0;
    let mut failed = 0;
    for (p, outcome) in planned.iter().zip(&written.outcomes) {
        match outcome {
            Outcome::Applied(_) => {
                applied += 1;
                writeln!(out, "{}: applied", p.id)?;
            }
            Outcome::Unchanged => {}
            Outcome::Missing => failed += 1,
            Outcome::Conflict => {
                failed += 1;
                writeln!(out, "{}: edited by someone else meanwhile; nothing written over (run it again)", p.id)?;
            }
            Outcome::Refused(reason) => {
                failed += 1;
                writeln!(out, "{}: refused by CouchDB: {reason}", p.id)?;
            }
            Outcome::NotWritten => {
                failed += 1;
                writeln!(out, "{}: not written", p.id)?;
            }
        }
    }
    if let Some(why) = &written.stopped {
        writeln!(out, "stopped: {why}")?;
    }
    writeln!(out, "bulk change {batch}: {applied} applied, {failed} not")?;
    match undo {
        Some(undo) if applied > 0 => writeln!(out, "to undo it: {undo}")?,
        None if applied > 0 => writeln!(out, "it cannot be undone: the history is off")?,
        _ => {}
    }
    if failed > 0 {
        return Err(BulkCommandError::NotAll(failed, planned.len()));
    }
    Ok(())
}
