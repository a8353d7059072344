//! `couchlink create`: stores a link under a fresh random ID and prints its short URL.

use std::net::SocketAddr;

use clap::Args;
use serde_json::json;

use super::{BadCredentials, CouchArgs};
use crate::couch::CouchClient;
use crate::domain::{BadRule, LinkId, LinkWrite, NotCanonical, PublicUrl};
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
            crate::domain::Rule::from_value(&rule).map_err(CreateError::Split)?;
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

    /// The document's fields: `{url, inactive: false, expires?, valid_from?, fallback?,
    /// password?, targets?, max_visits?, max_visits_bots?}` (no empty `targets`, and
    /// `max_visits_bots` only as `true`, only with `max_visits`).
    pub fn to_write(&self) -> LinkWrite {
        LinkWrite {
            expires: self.expires.clone(),
            valid_from: self.valid_from.clone(),
            fallback: self.fallback.clone(),
            password: self.password.clone(),
            targets: (!self.targets.is_empty()).then(|| self.targets.clone()),
            max_visits: self.max_visits.map(serde_json::Number::from),
            max_visits_bots: (self.max_visits.is_some() && self.max_visits_bots).then_some(true),
            ..LinkWrite::new_link(&self.url)
        }
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
    #[error("--split: {0}")]
    Split(BadRule),
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

/// Stores `link` ([`NewLink::to_write`]) under the first ID from `ids` that has never been
/// used, and returns it (see [`store_new`]).
pub async fn run(
    editor: &CouchClient,
    link: &NewLink,
    ids: impl IntoIterator<Item = LinkId>,
) -> Result<LinkId, CreateError> {
    Ok(store_new(editor, &link.to_write(), ids).await?)
}

/// How `--target` is written.
const TARGET_USAGE: &str = "write CONDITIONS=URL, like os=ios=https://apps.apple.com/app/id1 or 'device=desktop;lang=fr=https://example.com/fr/'";
/// How `--split` is written.
const SPLIT_USAGE: &str = "write WEIGHT=URL, like 70=https://example.com/a";

/// Why a flag of `create` cannot be read (clap says it of the flag and its value).
#[derive(Debug, thiserror::Error)]
pub enum BadFlag {
    /// `--target` not in the form `CONDITIONS=URL`.
    #[error("{TARGET_USAGE}")]
    TargetForm,
    /// `--target` is no rule the proxy follows.
    #[error("{0}; {TARGET_USAGE}")]
    Rule(BadRule),
    /// `--split` not in the form `WEIGHT=URL`.
    #[error("{SPLIT_USAGE}")]
    SplitForm,
    /// A `--split` weight that is no whole number.
    #[error("the weight is a whole number; {SPLIT_USAGE}")]
    Weight,
    /// A `--split` URL the proxy would not send.
    #[error(transparent)]
    Target(NotCanonical),
    /// An `--expires` already past.
    #[error("{0} is already past: the link would never work")]
    Past(String),
    /// A date with no day after it.
    #[error("no day after {0}")]
    NoNextDay(String),
    /// Neither a date nor an RFC 3339 time.
    #[error("{0:?} is neither a date (2026-12-31) nor an RFC 3339 time (2026-12-31T23:59:59Z)")]
    NotATime(String),
    /// A time that cannot be written in RFC 3339 (a year past 9999).
    #[error(transparent)]
    Format(time::error::Format),
}

/// `--target CONDITIONS=URL` as a document holds the rule, checked as the proxy reads it.
fn target_rule(text: &str) -> Result<serde_json::Value, BadFlag> {
    let at = ["=https://", "=http://", "=/"].iter().filter_map(|p| text.find(p)).min().ok_or(BadFlag::TargetForm)?;
    let (conditions, url) = (&text[..at], &text[at + 1..]);
    let mut when = serde_json::Map::new();
    for condition in conditions.split(';') {
        let (key, values) = condition.split_once('=').ok_or(BadFlag::TargetForm)?;
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
    crate::domain::Rule::from_value(&rule).map(|_| rule).map_err(BadFlag::Rule)
}

/// `--split WEIGHT=URL` as a split's variant holds it.
fn split_variant(text: &str) -> Result<serde_json::Value, BadFlag> {
    let (weight, url) = text.split_once('=').ok_or(BadFlag::SplitForm)?;
    let weight: u32 = weight.trim().parse().map_err(|_| BadFlag::Weight)?;
    crate::domain::check_target(url).map_err(BadFlag::Target)?;
    Ok(json!({"weight": weight, "url": url}))
}

/// `--expires` as the document holds it (RFC 3339, UTC): a date's end (the next day's midnight)
/// or the instant given, refused when it is already past, since the link would be dead on
/// arrival.
fn expires(text: &str) -> Result<String, BadFlag> {
    let at = instant(text, |date| date.next_day())?;
    if at <= time::OffsetDateTime::now_utc() {
        return Err(BadFlag::Past(text.to_owned()));
    }
    utc_text(at)
}

/// `--valid-from` as the document holds it (RFC 3339, UTC): a date's start, or the instant given.
fn valid_from(text: &str) -> Result<String, BadFlag> {
    utc_text(instant(text, Some)?)
}

/// A UTC date (the midnight `day` picks) or an RFC 3339 time.
fn instant(text: &str, day: impl FnOnce(time::Date) -> Option<time::Date>) -> Result<time::OffsetDateTime, BadFlag> {
    let format = time::macros::format_description!("[year]-[month]-[day]");
    match time::Date::parse(text, &format) {
        Ok(date) => Ok(day(date).ok_or_else(|| BadFlag::NoNextDay(text.to_owned()))?.midnight().assume_utc()),
        Err(_) => time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339)
            .map_err(|_| BadFlag::NotATime(text.to_owned())),
    }
}

fn utc_text(at: time::OffsetDateTime) -> Result<String, BadFlag> {
    let at = at.to_offset(time::UtcOffset::UTC);
    at.replace_nanosecond(0)
        .unwrap_or(at)
        .format(&time::format_description::well_known::Rfc3339)
        .map_err(BadFlag::Format)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_link_writes_what_create_always_wrote() {
        assert_eq!(
            NewLink::to("https://a.example/").to_write().to_doc(),
            json!({"url": "https://a.example/", "inactive": false})
        );
        let link = NewLink {
            url: "https://a.example/".into(),
            expires: Some("2030-01-01T00:00:00Z".into()),
            valid_from: Some("2029-01-01T00:00:00Z".into()),
            fallback: Some("/Other".into()),
            targets: vec![json!({"when": {"os": ["ios"]}, "url": "/x"})],
            password: Some("$argon2id$v=19$...".into()),
            max_visits: Some(500),
            max_visits_bots: true,
        };
        assert_eq!(
            link.to_write().to_doc().to_string(),
            r#"{"expires":"2030-01-01T00:00:00Z","fallback":"/Other","inactive":false,"max_visits":500,"max_visits_bots":true,"password":"$argon2id$v=19$...","targets":[{"url":"/x","when":{"os":["ios"]}}],"url":"https://a.example/","valid_from":"2029-01-01T00:00:00Z"}"#
        );
        let bots_without_a_limit = NewLink { max_visits: None, ..link.clone() }.to_write().to_doc();
        assert!(bots_without_a_limit.get("max_visits_bots").is_none());
        let people_only = NewLink { max_visits_bots: false, ..link }.to_write().to_doc();
        assert!(people_only.get("max_visits_bots").is_none() && people_only["max_visits"] == 500);
    }

    #[test]
    fn a_flag_that_cannot_be_read_says_how_to_write_it() {
        assert_eq!(target_rule("ios").unwrap_err().to_string(), TARGET_USAGE);
        assert_eq!(
            target_rule("os=beos=https://a.example/").unwrap_err().to_string(),
            format!(
                "\"when\".\"os\" holds \"beos\"; allowed: {}; {TARGET_USAGE}",
                crate::visitor::Os::NAMES.join(", ")
            )
        );
        assert_eq!(
            target_rule("os=ios=https://a.example/").unwrap(),
            json!({"when": {"os": ["ios"]}, "url": "https://a.example/"})
        );
        assert_eq!(
            split_variant("x=https://a.example/").unwrap_err().to_string(),
            format!("the weight is a whole number; {SPLIT_USAGE}")
        );
        assert_eq!(split_variant("70").unwrap_err().to_string(), SPLIT_USAGE);
        assert!(matches!(split_variant("70=ftp://a.example/"), Err(BadFlag::Target(_))));
        assert_eq!(
            expires("2020-01-01").unwrap_err().to_string(),
            "2020-01-01 is already past: the link would never work"
        );
        assert_eq!(valid_from("2026-12-01").unwrap(), "2026-12-01T00:00:00Z");
        assert_eq!(
            valid_from("soon").unwrap_err().to_string(),
            "\"soon\" is neither a date (2026-12-31) nor an RFC 3339 time (2026-12-31T23:59:59Z)"
        );
    }
}
