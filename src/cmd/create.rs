//! `couchlink create`: stores a link under a fresh random ID and prints its short URL.

use std::net::SocketAddr;

use clap::Args;
use serde_json::json;

use super::{BadCredentials, CouchArgs};
use crate::couch::CouchClient;
use crate::domain::{LinkId, PublicUrl};
use crate::links::{store_new, NewLinkError};

/// Flags of `couchlink create`.
#[derive(Debug, Clone, Args)]
#[command(mut_arg("couchdb_user", |a| a.help("A CouchDB account with the editor role (it writes the link)")))]
pub struct CreateArgs {
    #[command(flatten)]
    #[allow(missing_docs)]
    pub couch: CouchArgs,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub on: super::DomainChoice,
    /// The target: an http(s) URL, or an internal redirect such as /H83if/spring.
    pub url: String,
    /// When the link stops working: a UTC date (2026-12-31: it works through that day) or an
    /// RFC 3339 time (2026-12-31T23:59:59Z: from that instant on); never one already past.
    #[arg(long, value_parser = expires)]
    pub expires: Option<String>,
    /// When the link starts working (before, it acts as inactive): a UTC date (2026-12-01: from
    /// that day's start) or an RFC 3339 time (2026-12-01T09:00:00+01:00).
    #[arg(long, value_parser = valid_from)]
    pub valid_from: Option<String>,
    /// Where people go while the link is inactive, expired or not yet started, instead of a
    /// 404: written as the URL is.
    #[arg(long, value_parser = super::target_flag)]
    pub fallback: Option<String>,
    /// A rule sending some visitors elsewhere, repeatable (the first that matches wins):
    /// CONDITIONS=URL, conditions `os=`, `device=`, `lang=`, `country=` and `query.NAME=` with
    /// comma-separated values, joined by `;`. For example --target os=ios=https://apps.apple.com/app/id1,
    /// --target 'device=desktop;lang=fr=https://example.com/fr/' or
    /// --target 'country=IE,GB;query.utm_source=flyer=https://example.com/print'.
    #[arg(long = "target", value_parser = target_rule)]
    pub targets: Vec<serde_json::Value>,
    /// A variant of a split for every visitor no --target takes, repeatable (two or more):
    /// WEIGHT=URL, e.g. --split 70=https://example.com/a --split 30=https://example.com/b. Each
    /// visitor keeps the variant they first got.
    #[arg(long = "split", value_parser = split_variant)]
    pub split: Vec<serde_json::Value>,
    /// A password visitors must give (their browser asks for it): read from this file, `-` for
    /// standard input, its one trailing line end dropped. Only its Argon2id hash is stored.
    #[arg(long, value_name = "FILE")]
    pub password_file: Option<std::path::PathBuf>,
    /// After this many redirects the link acts as expired (its fallback, or 404).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=i64::from(crate::domain::MAX_VISITS)))]
    pub max_visits: Option<u32>,
    /// Bots' redirects count toward --max-visits too.
    #[arg(long, requires = "max_visits")]
    pub max_visits_bots: bool,
    /// Address redirects are served on (the base of the printed URL when no public URL is set).
    #[arg(long, env = "COUCHLINK_LISTEN", default_value = "0.0.0.0:8080")]
    pub listen: SocketAddr,
    /// The short links' base URL, e.g. https://0x1f.ie.
    #[arg(long, env = "COUCHLINK_PUBLIC_URL")]
    pub public_url: Option<PublicUrl>,
}

impl CreateArgs {
    /// Creates the link and prints its short URL on stdout.
    pub fn execute(self) -> Result<(), CreateError> {
        let mut link = self.new_link();
        link.targets = self.rules()?;
        if let Some(file) = &self.password_file {
            link.password = Some(password_hash(file)?.as_str().to_owned());
        }
        let editor = CouchClient::new(&self.couch.into()).map_err(|e| CreateError::Store(e.into()))?;
        let ids = std::iter::repeat_with(LinkId::random);
        let id = super::current_thread_runtime()
            .map_err(CreateError::Runtime)?
            .block_on(run(&editor, &link, ids))
            .map_err(|e| match &e {
                CreateError::Refused { status, reason } => {
                    BadCredentials::of(&editor, *status, reason).map_or(e, CreateError::Credentials)
                }
                _ => e,
            })?;
        let public_url = self.public_url.unwrap_or_else(|| {
            let local = PublicUrl::from_listen(self.listen);
            tracing::warn!(
                "COUCHLINK_PUBLIC_URL is not set, so this is a URL on this machine; set it (or --public-url) to the address people reach, e.g. https://0x1f.ie"
            );
            local
        });
        println!("{}", public_url.short_url(&id));
        Ok(())
    }

    fn new_link(&self) -> NewLink {
        NewLink {
            url: self.url.clone(),
            expires: self.expires.clone(),
            valid_from: self.valid_from.clone(),
            fallback: self.fallback.clone(),
            targets: self.targets.clone(),
            password: None,
            max_visits: self.max_visits,
            max_visits_bots: self.max_visits_bots,
        }
    }

    /// The rules, the split last: checked as the proxy reads them.
    fn rules(&self) -> Result<Vec<serde_json::Value>, CreateError> {
        let mut rules = self.targets.clone();
        if !self.split.is_empty() {
            let rule = json!({"split": self.split});
            crate::domain::Rule::from_value(&rule)
                .map_err(|reason| CreateError::Split(format!("--split: {reason}")))?;
            rules.push(rule);
        }
        Ok(rules)
    }
}

/// The link `create` stores: a new document's fields.
#[derive(Debug, Clone, Default)]
pub struct NewLink {
    /// The target.
    pub url: String,
    /// `expires`, RFC 3339.
    pub expires: Option<String>,
    /// `valid_from`, RFC 3339.
    pub valid_from: Option<String>,
    /// `fallback`.
    pub fallback: Option<String>,
    /// `targets`, each as a document holds it.
    pub targets: Vec<serde_json::Value>,
    /// `password`: the hash of the password visitors must give.
    pub password: Option<String>,
    /// `max_visits`.
    pub max_visits: Option<u32>,
    /// `max_visits_bots: true`.
    pub max_visits_bots: bool,
}

impl NewLink {
    /// A link to `url`, with nothing else.
    pub fn to(url: &str) -> NewLink {
        NewLink { url: url.to_owned(), ..NewLink::default() }
    }
}

/// Why no link was created.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    /// CouchDB refused the document; `reason` is its own words (the validation's, for a bad URL,
    /// said with the field it names).
    #[error("CouchDB refused the link: {}", crate::domain::Refusal::parse(.reason))]
    Refused {
        /// The HTTP status.
        status: u16,
        /// CouchDB's reason, meant for people.
        reason: String,
    },
    /// CouchDB refused the account.
    #[error(transparent)]
    Credentials(BadCredentials),
    /// CouchDB could not be asked, answered something unreadable, or had no free ID.
    #[error("cannot create the link")]
    Store(#[source] NewLinkError),
    /// The async runtime could not start.
    #[error("cannot start the async runtime")]
    Runtime(#[source] std::io::Error),
    /// The `--split` variants do not make a split.
    #[error("{0}")]
    Split(String),
    /// The password file cannot be read, or holds no password couchlink sets.
    #[error("--password-file {}: {reason}", .file.display())]
    Password {
        /// The file named.
        file: std::path::PathBuf,
        /// Why.
        reason: String,
    },
}

/// The hash of the password in `file` (`-`: standard input), less one trailing line end.
pub(super) fn password_hash(file: &std::path::Path) -> Result<crate::domain::PasswordHash, CreateError> {
    let fail = |reason: String| CreateError::Password { file: file.to_owned(), reason };
    let mut bytes = if file.as_os_str() == "-" {
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin(), &mut bytes).map_err(|e| fail(e.to_string()))?;
        bytes
    } else {
        std::fs::read(file).map_err(|e| fail(e.to_string()))?
    };
    for end in [&b"\r\n"[..], b"\n"] {
        if bytes.ends_with(end) {
            bytes.truncate(bytes.len() - end.len());
            break;
        }
    }
    crate::domain::PasswordHash::create(&bytes).map_err(|e| fail(e.to_string()))
}

impl From<NewLinkError> for CreateError {
    fn from(e: NewLinkError) -> Self {
        match e {
            NewLinkError::Refused { status, reason } => CreateError::Refused { status, reason },
            e => CreateError::Store(e),
        }
    }
}

/// Stores `{url, inactive: false, expires?, valid_from?, fallback?, password?}` under the first ID from
/// `ids` that has never been used, and returns it (see [`store_new`]).
pub async fn run(
    editor: &CouchClient,
    link: &NewLink,
    ids: impl IntoIterator<Item = LinkId>,
) -> Result<LinkId, CreateError> {
    let mut doc = json!({"url": link.url, "inactive": false});
    let fields = [
        ("expires", &link.expires),
        ("valid_from", &link.valid_from),
        ("fallback", &link.fallback),
        ("password", &link.password),
    ];
    for (name, value) in fields {
        if let Some(value) = value {
            doc[name] = json!(value);
        }
    }
    if !link.targets.is_empty() {
        doc["targets"] = json!(link.targets);
    }
    if let Some(max) = link.max_visits {
        doc["max_visits"] = json!(max);
        if link.max_visits_bots {
            doc["max_visits_bots"] = json!(true);
        }
    }
    Ok(store_new(editor, &doc, ids).await?)
}

/// `--target CONDITIONS=URL` as a document holds the rule, checked as the proxy reads it.
fn target_rule(text: &str) -> Result<serde_json::Value, String> {
    let usage = "write CONDITIONS=URL, like os=ios=https://apps.apple.com/app/id1 or 'device=desktop;lang=fr=https://example.com/fr/'";
    let at = ["=https://", "=http://", "=/"].iter().filter_map(|p| text.find(p)).min().ok_or(usage)?;
    let (conditions, url) = (&text[..at], &text[at + 1..]);
    let mut when = serde_json::Map::new();
    for condition in conditions.split(';') {
        let (key, values) = condition.split_once('=').ok_or(usage)?;
        let values: Vec<&str> = values.split(',').map(str::trim).collect();
        match key.trim().strip_prefix("query.") {
            Some(name) => {
                let query = when.entry("query").or_insert_with(|| json!({}));
                query[name] = json!(values);
            }
            None => {
                when.insert(key.trim().to_owned(), json!(values));
            }
        }
    }
    let rule = json!({"when": when, "url": url});
    crate::domain::Rule::from_value(&rule).map(|_| rule).map_err(|reason| format!("{reason}; {usage}"))
}

/// `--split WEIGHT=URL` as a split's variant holds it.
fn split_variant(text: &str) -> Result<serde_json::Value, String> {
    let usage = "write WEIGHT=URL, like 70=https://example.com/a";
    let (weight, url) = text.split_once('=').ok_or(usage)?;
    let weight: u32 = weight.trim().parse().map_err(|_| format!("the weight is a whole number; {usage}"))?;
    super::target_flag(url)?;
    Ok(json!({"weight": weight, "url": url}))
}

/// `--expires` as the document holds it (RFC 3339, UTC): a date's end (the next day's midnight)
/// or the instant given, refused when it is already past, since the link would be dead on
/// arrival.
fn expires(text: &str) -> Result<String, String> {
    let at = instant(text, |date| date.next_day())?;
    if at <= time::OffsetDateTime::now_utc() {
        return Err(format!("{text} is already past: the link would never work"));
    }
    utc_text(at)
}

/// `--valid-from` as the document holds it (RFC 3339, UTC): a date's start, or the instant given.
fn valid_from(text: &str) -> Result<String, String> {
    utc_text(instant(text, Some)?)
}

/// A UTC date (the midnight `day` picks) or an RFC 3339 time.
fn instant(text: &str, day: impl FnOnce(time::Date) -> Option<time::Date>) -> Result<time::OffsetDateTime, String> {
    let format = time::macros::format_description!("[year]-[month]-[day]");
    match time::Date::parse(text, &format) {
        Ok(date) => Ok(day(date).ok_or_else(|| format!("no day after {text}"))?.midnight().assume_utc()),
        Err(_) => time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339).map_err(|_| {
            format!("{text:?} is neither a date (2026-12-31) nor an RFC 3339 time (2026-12-31T23:59:59Z)")
        }),
    }
}

fn utc_text(at: time::OffsetDateTime) -> Result<String, String> {
    let at = at.to_offset(time::UtcOffset::UTC);
    at.replace_nanosecond(0)
        .unwrap_or(at)
        .format(&time::format_description::well_known::Rfc3339)
        .map_err(|e| e.to_string())
}
