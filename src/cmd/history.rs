//! `couchlink history ID`: every recorded change to a link (who, when, what changed, gaps), as
//! the proxies recorded it in the history database; `couchlink restore ID --rev REV|--at TIME`
//! writes a recorded version back as a new revision.

use std::io::Write;

use clap::Args;
use serde_json::{json, Value};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use super::CouchArgs;
use crate::couch::{CouchClient, CouchError, Created};
use crate::domain::{CompanionDb, LinkId};
use crate::history::entry::own_fields;
use crate::history::read::{changed_fields, link_entries};

/// Flags of `couchlink history`.
#[derive(Debug, Clone, Args)]
#[command(mut_arg("couchdb_user", |a| a.help("A CouchDB account that may read links (a reader will do)")))]
pub struct HistoryArgs {
    /// The link's ID.
    #[arg(value_parser = parse_id)]
    pub id: LinkId,
    /// Print the entries as JSON lines, as stored.
    #[arg(long)]
    pub json: bool,
    /// The history database [default: <db>_history].
    #[arg(long, env = "COUCHLINK_HISTORY_DB", value_parser = CompanionDb::parse)]
    pub history_db: Option<CompanionDb>,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub couch: CouchArgs,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub on: super::DomainChoice,
}

/// Flags of `couchlink restore`.
#[derive(Debug, Clone, Args)]
#[command(mut_arg("couchdb_user", |a| a.help("A CouchDB account that may edit links (an editor)")))]
pub struct RestoreArgs {
    /// The link's ID.
    #[arg(value_parser = parse_id)]
    pub id: LinkId,
    /// The recorded revision to put back, as `couchlink history` lists it (`3-a1b2...`).
    #[arg(long, conflicts_with = "at", required_unless_present = "at")]
    pub rev: Option<String>,
    /// Put back the link as it was at this time (RFC 3339): the last version recorded before it.
    #[arg(long, value_parser = parse_time)]
    pub at: Option<OffsetDateTime>,
    /// Say what would change, write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// The history database [default: <db>_history].
    #[arg(long, env = "COUCHLINK_HISTORY_DB", value_parser = CompanionDb::parse)]
    pub history_db: Option<CompanionDb>,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub couch: CouchArgs,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub on: super::DomainChoice,
}

fn parse_id(s: &str) -> Result<LinkId, String> {
    LinkId::parse(s).map_err(|e| e.to_string())
}

fn parse_time(s: &str) -> Result<OffsetDateTime, String> {
    OffsetDateTime::parse(s, &Rfc3339).map_err(|_| format!("{s:?} is not a time like 2026-11-28T09:00:00Z"))
}

/// Why `history` or `restore` failed.
#[derive(Debug, thiserror::Error)]
pub enum HistoryCommandError {
    /// CouchDB refused or could not be reached.
    #[error("cannot read or write the link's history")]
    Couch(#[from] CouchError),
    /// Nothing recorded for the link.
    #[error("no history recorded for {0} (is `couchlink setup` run, and a proxy running to record it?)")]
    Nothing(String),
    /// The history database cannot be used (the links database itself, say).
    #[error(transparent)]
    Companion(#[from] crate::domain::CompanionError),
    /// `--history-db off`.
    #[error("the history is off (--history-db off, COUCHLINK_HISTORY_DB): nothing is recorded to read or restore")]
    Off,
    /// The version asked for is not recorded.
    #[error("{0}")]
    NoSuchVersion(String),
    /// Someone changed the link while it was being restored.
    #[error("{0} changed while it was restored; nothing written: run it again")]
    Conflict(String),
    /// Writing stdout failed.
    #[error("cannot write the output")]
    Output(#[from] std::io::Error),
    /// The async runtime could not start.
    #[error("cannot start the async runtime")]
    Runtime(#[source] std::io::Error),
}

fn history_client(couch: &CouchArgs, history_db: Option<&CompanionDb>) -> Result<CouchClient, HistoryCommandError> {
    let links = CouchClient::new(&couch.clone().into())?;
    super::history_of(&links, history_db)?.ok_or(HistoryCommandError::Off)
}
impl HistoryArgs {
    /// Prints the link's history, oldest first.
    pub fn execute(self) -> Result<(), HistoryCommandError> {
        let history = history_client(&self.couch, self.history_db.as_ref())?;
        let runtime = super::current_thread_runtime().map_err(HistoryCommandError::Runtime)?;
        let entries = runtime.block_on(link_entries(&history, &self.id))?;
        if entries.is_empty() {
            return Err(HistoryCommandError::Nothing(self.id.to_string()));
        }
        let mut out = std::io::stdout().lock();
        for entry in &entries {
            if self.json {
                writeln!(out, "{entry}")?;
            } else {
                out.write_all(describe(entry).as_bytes())?;
            }
        }
        Ok(())
    }
}

/// An entry as `couchlink history` prints it: a heading line, then one line per field changed.
pub fn describe(entry: &Value) -> String {
    let text = |v: &Value| v.as_str().unwrap_or("").to_owned();
    if entry["type"] == "gap" {
        if entry["reason"] == "refused" {
            return format!(
                "{}  gap: revision {} not recorded: CouchDB refused its entry ({})\n",
                text(&entry["to"]),
                text(&entry["first"]),
                text(&entry["detail"]),
            );
        }
        return format!(
            "{}  gap: {} revision(s) not recorded ({} to {}), written between {} and {} and compacted away by CouchDB \
             before they were recorded\n",
            text(&entry["to"]),
            entry["missing"],
            text(&entry["first"]),
            text(&entry["last"]),
            text(&entry["from"]),
            text(&entry["to"]),
        );
    }
    let by = entry["by"].as_str().map_or_else(|| "writer not stated".to_owned(), |b| format!("by {b}"));
    // When it was recorded: the writer's own word on when it wrote is shown beside, as stated.
    let when = text(&entry["recorded_at"]);
    let late = if entry["late"] == true { " (recorded late)" } else { "" };
    let stated = entry["at"].as_str().map(|at| format!(", stated {at}")).unwrap_or_default();
    // What the write says of itself, as it says it (the bulk change it names may be another's).
    let batch = entry["batch"].as_str().map(|b| format!(", stating bulk change {b}")).unwrap_or_default();
    let restores = entry["after"]["edit"]["restores"]
        .as_str()
        .filter(|_| entry["by"].is_string())
        .map(|r| format!(", restores {r}"))
        .unwrap_or_default();
    let mut s =
        format!("{when}  {}  {}  {by}{stated}{batch}{restores}{late}\n", text(&entry["rev"]), text(&entry["kind"]));
    if entry["kind"] == "baseline" || entry["before"].is_null() && entry["kind"] == "changed" {
        // Nothing to compare with: the version as it was.
        if let Some(after) = entry["after"].as_object() {
            for (k, v) in after.iter().filter(|(k, _)| *k != "edit") {
                s.push_str(&format!("    {k}: {v}\n"));
            }
        }
        return s;
    }
    for (field, before, after) in changed_fields(entry) {
        s.push_str(&format!("    {field}: {} -> {}\n", shown(before.as_ref()), shown(after.as_ref())));
    }
    s
}

/// A field's value as `history` prints it; one kept as its size and digest says so.
fn shown(value: Option<&Value>) -> String {
    match value {
        None => "(none)".to_owned(),
        Some(Value::Object(o)) if o.len() == 1 && o["large"].is_object() => format!(
            "({} bytes, too long to keep: its digest {}...)",
            o["large"]["bytes"],
            o["large"]["blake2b"].as_str().unwrap_or_default().chars().take(12).collect::<String>()
        ),
        Some(v) => v.to_string(),
    }
}

impl RestoreArgs {
    /// Writes the chosen version back as a new revision, stating the writer.
    pub fn execute(self) -> Result<(), HistoryCommandError> {
        let history = history_client(&self.couch, self.history_db.as_ref())?;
        let links = CouchClient::new(&self.couch.clone().into())?;
        let runtime = super::current_thread_runtime().map_err(HistoryCommandError::Runtime)?;
        runtime.block_on(async {
            let entries = link_entries(&history, &self.id).await?;
            let version = pick(&entries, self.rev.as_deref(), self.at)?;
            // What follows the version picked by time, recorded late or lost, may have been live
            // before it was recorded: said, since `--at` goes by when changes were recorded.
            let next = entries.iter().skip_while(|e| !std::ptr::eq(*e, version)).nth(1);
            let uncertain = next.filter(|e| self.at.is_some() && (e["late"] == true || e["type"] == "gap"));
            if let Some(next) = uncertain {
                let name = next["rev"].as_str().or(next["first"].as_str()).unwrap_or_default();
                println!(
                    "note: what came after it ({name}) was recorded only at {} ({}): it may have been live before that",
                    next["recorded_at"].as_str().unwrap_or_default(),
                    if next["type"] == "gap" { "a gap" } else { "recorded late, while no proxy recorded" }
                );
            }
            let Some(mut doc) = links.link_doc(&self.id).await? else {
                return Err(HistoryCommandError::NoSuchVersion(format!("{} does not exist any more", self.id)));
            };
            let rev = version["rev"].as_str().unwrap_or("").to_owned();
            let mut fields = version["after"].as_object().cloned().unwrap_or_default();
            // Fields too long for the history are read from the revision itself, while CouchDB
            // holds it.
            if let Some(large) = version["large"]["after"].as_object().filter(|l| !l.is_empty()) {
                let held = links.revisions(&[(self.id.as_str().to_owned(), rev.clone())]).await?;
                let Some(body) = held.into_iter().next().flatten() else {
                    let names: Vec<&str> = large.keys().map(String::as_str).collect();
                    return Err(HistoryCommandError::NoSuchVersion(format!(
                        "version {rev} held fields too long for the history ({}), kept as their size and digest, and \
                         CouchDB no longer holds that revision: nothing written",
                        names.join(", ")
                    )));
                };
                for name in large.keys() {
                    if let Some(value) = body.get(name) {
                        fields.insert(name.clone(), value.clone());
                    }
                }
            }
            let name = links.session().await?.name.unwrap_or_default();
            let stamp = crate::domain::EditStamp::new(&name, &crate::history::now()).restoring(&rev);
            let restored = crate::history::restored(self.id.as_str(), &doc["_rev"], &fields, stamp);
            let preview = json!({"before": own_fields(&doc), "after": own_fields(&restored)});
            let changes = changed_fields(&preview);
            let mut out = std::io::stdout().lock();
            if changes.is_empty() {
                writeln!(out, "{} is already as at {rev}: nothing to write", self.id)?;
                return Ok(());
            }
            for (field, before, after) in &changes {
                let show = |v: &Option<Value>| v.as_ref().map_or_else(|| "(none)".to_owned(), Value::to_string);
                writeln!(out, "    {field}: {} -> {}", show(before), show(after))?;
            }
            if self.dry_run {
                writeln!(out, "{}: would restore {rev} (dry run: nothing written)", self.id)?;
                return Ok(());
            }
            doc = restored;
            match links.create_doc(&self.id, &doc).await? {
                Created::Stored(new) => writeln!(out, "{}: restored {rev} as {new}", self.id)?,
                Created::Conflict => return Err(HistoryCommandError::Conflict(self.id.to_string())),
            }
            Ok(())
        })
    }
}

/// The recorded version `rev` names, or the last one recorded at or before `at`.
fn pick<'a>(
    entries: &'a [Value],
    rev: Option<&str>,
    at: Option<OffsetDateTime>,
) -> Result<&'a Value, HistoryCommandError> {
    let mut versions = entries.iter().rev().filter(|e| e["type"] == "change" && e["after"].is_object());
    let found = match (rev, at) {
        (Some(rev), _) => versions.find(|e| e["rev"] == rev),
        // Newest first: the first recorded at or before `at` (when it was recorded, never when
        // its writer says it wrote it); a conflict's losing leaf was never what CouchDB served.
        (None, Some(at)) => versions.find(|e| {
            let when = e["recorded_at"].as_str().unwrap_or("");
            e["kind"] != "conflict" && OffsetDateTime::parse(when, &Rfc3339).is_ok_and(|t| t <= at)
        }),
        (None, None) => None,
    };
    found.ok_or_else(|| {
        HistoryCommandError::NoSuchVersion(match rev {
            Some(rev) => format!("no recorded version {rev} (see `couchlink history`)"),
            None => "no version recorded at or before that time (see `couchlink history`)".into(),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(rev: &str, recorded_at: &str, url: &str) -> Value {
        json!({"type": "change", "rev": rev, "kind": "changed", "at": null, "recorded_at": recorded_at,
            "before": null, "after": {"url": url}, "by": null, "batch": null, "late": false})
    }

    #[test]
    fn a_version_is_picked_by_revision_or_by_time() {
        let entries = [
            change("1-a", "2026-11-01T00:00:00Z", "https://a.example/"),
            json!({"type": "gap", "first": "2-b", "last": "2-b", "missing": 1}),
            change("3-c", "2026-11-20T00:00:00Z", "https://c.example/"),
        ];
        assert_eq!(pick(&entries, Some("1-a"), None).unwrap()["after"]["url"], "https://a.example/");
        let at = OffsetDateTime::parse("2026-11-10T00:00:00Z", &Rfc3339).unwrap();
        assert_eq!(pick(&entries, None, Some(at)).unwrap()["rev"], "1-a");
        let later = OffsetDateTime::parse("2026-11-25T00:00:00Z", &Rfc3339).unwrap();
        assert_eq!(pick(&entries, None, Some(later)).unwrap()["rev"], "3-c");
        assert!(pick(&entries, Some("2-b"), None).is_err(), "a gap has no version to restore");
        let before = OffsetDateTime::parse("2026-10-01T00:00:00Z", &Rfc3339).unwrap();
        assert!(pick(&entries, None, Some(before)).is_err());
        // A write that states it was made in 2020, recorded on the 25th: it was not live before.
        let mut backdated = change("4-d", "2026-11-25T00:00:00Z", "https://bad.example/");
        backdated["at"] = json!("2020-01-01T00:00:00Z");
        let entries = [entries[0].clone(), entries[2].clone(), backdated];
        let at = OffsetDateTime::parse("2026-11-22T00:00:00Z", &Rfc3339).unwrap();
        assert_eq!(pick(&entries, None, Some(at)).unwrap()["after"]["url"], "https://c.example/");
        let text = describe(&entries[2]);
        assert!(
            text.starts_with("2026-11-25T00:00:00Z  4-d  changed  writer not stated, stated 2020-01-01T00:00:00Z"),
            "{text}"
        );
        // Two leaves recorded at one instant: by time, the one CouchDB serves, never the
        // conflict's losing leaf (recorded after it, or before).
        let mut losing = change("2-ABCDEF", "2026-11-25T00:00:00Z", "https://lost.example/");
        losing["kind"] = json!("conflict");
        let winning = change("2-zzzz", "2026-11-25T00:00:00Z", "https://served.example/");
        for leaves in [[winning.clone(), losing.clone()], [losing, winning]] {
            assert_eq!(pick(&leaves, None, Some(later)).unwrap()["rev"], "2-zzzz");
        }
    }

    #[test]
    fn a_gap_and_a_change_read_as_sentences() {
        let gap = json!({"type": "gap", "first": "2-b", "last": "3-c", "missing": 2,
            "from": "2026-11-01T00:00:00Z", "to": "2026-11-02T00:00:00Z"});
        assert!(describe(&gap).contains("2 revision(s) not recorded"), "{}", describe(&gap));
        let refused = json!({"type": "gap", "first": "2-b", "last": "2-b", "missing": 1, "reason": "refused",
            "detail": "forbidden: not this one", "from": "2026-11-02T00:00:00Z", "to": "2026-11-02T00:00:00Z"});
        assert!(
            describe(&refused).contains("CouchDB refused its entry (forbidden: not this one)"),
            "{}",
            describe(&refused)
        );
        let edit = json!({"type": "change", "rev": "2-b", "kind": "changed", "by": "maria", "at": null,
            "recorded_at": "2026-11-02T00:00:00Z", "late": false, "batch": null,
            "before": {"url": "https://a.example/"}, "after": {"url": "https://b.example/"}});
        let text = describe(&edit);
        assert!(text.contains("by maria"), "{text}");
        assert!(text.contains(r#"url: "https://a.example/" -> "https://b.example/""#), "{text}");
    }
}
