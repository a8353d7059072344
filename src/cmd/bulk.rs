//! `couchlink bulk`: one change to many links (picked by ID, by tag, or by a word of the
//! console's search), previewed link by link before anything is written, then written through
//! `_bulk_docs` (CouchDB checks each) and reported link by link; `couchlink undo BATCH` puts
//! every link of a bulk change back as it was, sparing links edited since. Both exit 0 only
//! when every link was applied.

use std::io::Write;

use clap::Args;
use serde_json::{json, Value};

use super::CouchArgs;
use crate::bulk::{batch_entries, plan, plan_undo, write, BulkError, Change, Outcome, Planned};
use crate::couch::{CouchClient, CouchError};
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
    #[arg(long, env = "COUCHLINK_HISTORY_DB")]
    pub history_db: Option<String>,
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
            let batch = crate::history::batch_name("bulk");
            let writer = links.account_name().unwrap_or("").to_owned();
            let outcomes = write(&links, &planned, &writer, &batch).await?;
            report(&mut out, &planned, &outcomes, &batch)
        })
    }
}

impl UndoArgs {
    /// Puts the batch's links back, sparing those edited since; reports each link.
    pub fn execute(self) -> Result<(), BulkCommandError> {
        let links = CouchClient::new(&self.couch.clone().into())?;
        let history = links
            .for_database(&self.history_db.clone().unwrap_or_else(|| crate::history::database_of(links.database())));
        let runtime = super::current_thread_runtime().map_err(BulkCommandError::Runtime)?;
        runtime.block_on(async {
            let entries = batch_entries(&history, &self.batch).await?;
            if entries.is_empty() {
                return Err(BulkCommandError::Usage(format!(
                    "no link of bulk change {} is recorded (a proxy records each within a second)",
                    self.batch
                )));
            }
            let ids: Vec<&str> = entries.iter().filter_map(|e| e["link"].as_str()).collect();
            let current = links.id_states(&ids).await?;
            let undo = plan_undo(&entries, &current);
            let mut out = std::io::stdout().lock();
            let spared: Vec<&str> = undo.iter().filter(|(_, edited)| *edited).map(|(p, _)| p.id.as_str()).collect();
            let planned: Vec<Planned> = undo.iter().filter(|(_, edited)| !edited).map(|(p, _)| p.clone()).collect();
            preview(&mut out, &planned)?;
            for id in &spared {
                writeln!(out, "{id}: edited since the bulk change; left as it is")?;
            }
            if self.dry_run {
                let changing = planned.iter().filter(|p| p.after.is_some()).count();
                writeln!(out, "dry run: {changing} link(s) would be put back; nothing written")?;
                return Ok(());
            }
            let writer = links.account_name().unwrap_or("").to_owned();
            let batch = format!("undo-{}", self.batch);
            let batch: String = batch.chars().take(64).collect();
            let outcomes = write(&links, &planned, &writer, &batch).await?;
            report(&mut out, &planned, &outcomes, &batch)?;
            if spared.is_empty() {
                Ok(())
            } else {
                Err(BulkCommandError::NotAll(spared.len(), undo.len()))
            }
        })
    }
}

/// Each link and what changes, before and after.
fn preview(out: &mut impl Write, planned: &[Planned]) -> std::io::Result<()> {
    for p in planned {
        match &p.after {
            None if p.before.is_null() => writeln!(out, "{}: no such link", p.id)?,
            None => writeln!(out, "{}: unchanged", p.id)?,
            Some(after) => {
                writeln!(out, "{}:", p.id)?;
                let strip = |d: &Value| {
                    let mut d = d.clone();
                    if let Some(o) = d.as_object_mut() {
                        o.retain(|k, _| !k.starts_with('_'));
                    }
                    d
                };
                for (field, before, after) in
                    changed_fields(&json!({"before": strip(&p.before), "after": strip(after)}))
                {
                    let show = |v: Option<Value>| v.map_or_else(|| "(none)".to_owned(), |v| v.to_string());
                    writeln!(out, "    {field}: {} -> {}", show(before), show(after))?;
                }
            }
        }
    }
    Ok(())
}

/// Each link's outcome, then the batch's name and whether everything applied.
fn report(
    out: &mut impl Write,
    planned: &[Planned],
    outcomes: &[Outcome],
    batch: &str,
) -> Result<(), BulkCommandError> {
    let mut applied = 0;
    let mut failed = 0;
    for (p, outcome) in planned.iter().zip(outcomes) {
        match outcome {
            Outcome::Applied => {
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
        }
    }
    writeln!(out, "bulk change {batch}: {applied} applied, {failed} not")?;
    if failed > 0 {
        return Err(BulkCommandError::NotAll(failed, planned.len()));
    }
    Ok(())
}
