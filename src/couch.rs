//! A typed client for the CouchDB HTTP API: the few calls couchlink makes, with timeouts and
//! CouchDB's JSON errors mapped to [`CouchError`].
//!
//! Written for Apache CouchDB 3's documented API (docs.couchdb.org, "API Reference");
//! pouchdb-server, used for local runs, speaks the same API with the quirks noted inline.

use std::time::Duration;

use bytes::{Buf, BytesMut};
use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
use reqwest::{Method, RequestBuilder, Response, StatusCode};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::Value;

use crate::domain::{LinkDoc, LinkId};

/// How long a single document request may take before CouchDB counts as unreachable.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Idle pooled connections are dropped before Node's 5 s keep-alive timeout closes them
/// under us (pouchdb-server); harmless against CouchDB itself.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(4);

/// What went wrong talking to CouchDB.
#[derive(Debug, thiserror::Error)]
pub enum CouchError {
    /// No answer: connection refused, timed out, reset.
    #[error("cannot reach CouchDB at {url}: {source}")]
    Unreachable {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    /// CouchDB answered with an error status and its JSON `{"error","reason"}` body.
    #[error("CouchDB refused ({status}): {error}: {reason}")]
    Refused { status: u16, error: String, reason: String },
    /// CouchDB answered something couchlink cannot read.
    #[error("unexpected answer from CouchDB: {0}")]
    Protocol(String),
    /// A feed sent nothing, not even a heartbeat, for this long.
    #[error("no data or heartbeat for {0:?}")]
    Stalled(Duration),
}

impl CouchError {
    /// The HTTP status CouchDB answered with, if it answered.
    pub fn status(&self) -> Option<u16> {
        match self {
            CouchError::Refused { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// CouchDB's `reason`, meant for people (a `validate_doc_update` refusal, say).
    pub fn reason(&self) -> Option<&str> {
        match self {
            CouchError::Refused { reason, .. } => Some(reason),
            _ => None,
        }
    }
}

/// Where CouchDB is and who to be there.
#[derive(Debug, Clone)]
pub struct CouchConfig {
    /// Server URL, e.g. `http://127.0.0.1:5984`.
    pub url: String,
    /// Basic-auth user, if any.
    pub user: Option<String>,
    /// Basic-auth password.
    pub password: Option<String>,
    /// The links database.
    pub db: String,
}

/// One CouchDB server and database, as one account.
#[derive(Clone)]
pub struct CouchClient {
    http: reqwest::Client,
    /// Without a total timeout: `_changes` feeds stay open indefinitely.
    feed_http: reqwest::Client,
    base: String,
    db_path: String,
    user: Option<String>,
    password: Option<String>,
}

/// How a `PUT` of a new document ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Created {
    /// Stored, with this revision.
    Stored(String),
    /// The ID is taken (409).
    Conflict,
}

/// One event of a `_changes` feed.
#[derive(Debug, Clone, PartialEq)]
pub enum FeedEvent {
    /// A document changed; `doc` is its winning revision, `None` when deleted.
    Change { seq: Value, id: String, doc: Option<Value> },
    /// The server closed the feed at this sequence (resume from it).
    End { last_seq: Value },
}

/// A continuous `_changes` feed being read.
pub struct ChangesFeed {
    response: Response,
    buffer: BytesMut,
}

/// Who CouchDB takes the client's credentials for (`GET /_session`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct Session {
    /// The account name; `None` for anonymous.
    pub name: Option<String>,
    /// Its roles; server admins have `_admin`.
    pub roles: Vec<String>,
}

impl Session {
    /// Whether the account has `role`.
    pub fn has_role(&self, role: &str) -> bool {
        self.roles.iter().any(|r| r == role)
    }
}

#[derive(Deserialize)]
struct SessionBody {
    #[serde(rename = "userCtx")]
    user_ctx: Session,
}

#[derive(Deserialize)]
struct ErrorBody {
    #[serde(default)]
    error: String,
    #[serde(default)]
    reason: String,
}

#[derive(Deserialize)]
struct ChangeRow {
    seq: Value,
    id: String,
    #[serde(default)]
    deleted: bool,
    #[serde(default)]
    doc: Option<Value>,
}

#[derive(Deserialize)]
struct LastSeq {
    last_seq: Value,
}

/// Percent-encodes one path segment (a database name may hold `/`, `+`, `$`...).
pub fn segment(s: &str) -> String {
    utf8_percent_encode(s, NON_ALPHANUMERIC).to_string()
}

impl CouchClient {
    /// A client for `config`; no request is made yet.
    pub fn new(config: &CouchConfig) -> Result<Self, CouchError> {
        let build = |timeout: Option<Duration>| {
            let mut b = reqwest::Client::builder()
                .connect_timeout(CONNECT_TIMEOUT)
                .pool_idle_timeout(POOL_IDLE_TIMEOUT)
                .tcp_nodelay(true);
            if let Some(t) = timeout {
                b = b.timeout(t);
            }
            b.build().map_err(|e| CouchError::Protocol(format!("cannot build an HTTP client: {e}")))
        };
        let base = config.url.trim_end_matches('/').to_owned();
        reqwest::Url::parse(&base).map_err(|e| CouchError::Protocol(format!("bad CouchDB URL {base:?}: {e}")))?;
        Ok(CouchClient {
            http: build(Some(REQUEST_TIMEOUT))?,
            feed_http: build(None)?,
            db_path: format!("{base}/{}", segment(&config.db)),
            base,
            user: config.user.clone(),
            password: config.password.clone(),
        })
    }

    /// The same server and database as another account.
    pub fn with_credentials(&self, user: &str, password: &str) -> Self {
        CouchClient { user: Some(user.to_owned()), password: Some(password.to_owned()), ..self.clone() }
    }

    fn request(&self, client: &reqwest::Client, method: Method, url: &str) -> RequestBuilder {
        // pouchdb-server answers text/plain unless JSON is asked for; CouchDB ignores it.
        let req = client.request(method, url).header("Accept", "application/json");
        match &self.user {
            Some(user) => req.basic_auth(user, self.password.as_deref()),
            None => req,
        }
    }

    async fn send(&self, req: RequestBuilder, url: &str) -> Result<Response, CouchError> {
        req.send().await.map_err(|source| CouchError::Unreachable { url: url.to_owned(), source })
    }

    /// Turns an error status into [`CouchError::Refused`] with CouchDB's own words.
    async fn refused(response: Response) -> CouchError {
        let status = response.status().as_u16();
        let body = response.bytes().await.unwrap_or_default();
        match serde_json::from_slice::<ErrorBody>(&body) {
            Ok(e) => CouchError::Refused { status, error: e.error, reason: e.reason },
            Err(_) => CouchError::Refused {
                status,
                error: "unknown".into(),
                reason: String::from_utf8_lossy(&body).chars().take(200).collect(),
            },
        }
    }

    async fn json<T: DeserializeOwned>(response: Response) -> Result<T, CouchError> {
        let body = response.bytes().await.map_err(|e| CouchError::Protocol(e.to_string()))?;
        serde_json::from_slice(&body)
            .map_err(|e| CouchError::Protocol(format!("{e} in {}", String::from_utf8_lossy(&body))))
    }

    /// `GET {path}` (relative to the server) as JSON; `Ok(None)` on 404.
    pub async fn get_json(&self, path: &str) -> Result<Option<Value>, CouchError> {
        let url = format!("{}/{path}", self.base);
        let response = self.send(self.request(&self.http, Method::GET, &url), &url).await?;
        match response.status() {
            StatusCode::NOT_FOUND => Ok(None),
            s if s.is_success() => Self::json(response).await.map(Some),
            _ => Err(Self::refused(response).await),
        }
    }

    /// `PUT {path}` (relative to the server) with a JSON body; the answer's JSON on success.
    pub async fn put_json(&self, path: &str, body: &Value) -> Result<Value, CouchError> {
        let url = format!("{}/{path}", self.base);
        let response = self.send(self.request(&self.http, Method::PUT, &url).json(body), &url).await?;
        if response.status().is_success() {
            Self::json(response).await
        } else {
            Err(Self::refused(response).await)
        }
    }

    /// Who CouchDB takes this client's credentials for (docs.couchdb.org, `GET /_session`).
    pub async fn session(&self) -> Result<Session, CouchError> {
        let body = self.get_json("_session").await?.unwrap_or_default();
        serde_json::from_value::<SessionBody>(body)
            .map(|b| b.user_ctx)
            .map_err(|e| CouchError::Protocol(format!("bad _session answer: {e}")))
    }

    /// The path of the links database, relative to the server (for `get_json`/`put_json`).
    pub fn db_relative(&self, rest: &str) -> String {
        let db = &self.db_path[self.base.len() + 1..];
        if rest.is_empty() {
            db.to_owned()
        } else {
            format!("{db}/{rest}")
        }
    }

    /// Reads link `id`. `Ok(None)` when there is no such document (or it was deleted).
    /// A 404 for a missing *database* is an error, not "no such link".
    pub async fn get_link(&self, id: &LinkId) -> Result<Option<LinkDoc>, CouchError> {
        let url = format!("{}/{}", self.db_path, id);
        let response = self.send(self.request(&self.http, Method::GET, &url), &url).await?;
        match response.status() {
            s if s.is_success() => Self::json(response).await.map(Some),
            StatusCode::NOT_FOUND => match Self::refused(response).await {
                // {"error":"not_found","reason":"missing"|"deleted"}; a missing database says
                // "Database does not exist." (CouchDB 3) or "no_db_file".
                CouchError::Refused { reason, .. } if reason == "missing" || reason == "deleted" => Ok(None),
                other => Err(other),
            },
            _ => Err(Self::refused(response).await),
        }
    }

    /// `PUT` a new document under `id`: [`Created::Conflict`] when the ID is taken.
    pub async fn create_doc(&self, id: &str, doc: &Value) -> Result<Created, CouchError> {
        let url = format!("{}/{}", self.db_path, segment(id));
        let response = self.send(self.request(&self.http, Method::PUT, &url).json(doc), &url).await?;
        match response.status() {
            StatusCode::CONFLICT => Ok(Created::Conflict),
            s if s.is_success() => {
                let v: Value = Self::json(response).await?;
                Ok(Created::Stored(v.get("rev").and_then(Value::as_str).unwrap_or_default().to_owned()))
            }
            _ => Err(Self::refused(response).await),
        }
    }

    /// The current end of the database's `_changes` (an opaque sequence to resume from).
    pub async fn current_seq(&self) -> Result<Value, CouchError> {
        let url = format!("{}/_changes?since=now&limit=0", self.db_path);
        let response = self.send(self.request(&self.http, Method::GET, &url), &url).await?;
        if !response.status().is_success() {
            return Err(Self::refused(response).await);
        }
        Ok(Self::json::<LastSeq>(response).await?.last_seq)
    }

    /// Opens a continuous `_changes` feed with documents, from `since` (an opaque sequence as
    /// CouchDB gave it: sent back as is, never parsed or compared), with a heartbeat.
    /// No content filter: a filter on `inactive`/`url` would hide deactivations and deletions.
    pub async fn changes(&self, since: &Value, heartbeat: Duration) -> Result<ChangesFeed, CouchError> {
        // CouchDB 3 sequences are strings; pouchdb-server's are integers. Either goes back as text.
        let since = match since {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let url = format!(
            "{}/_changes?feed=continuous&include_docs=true&heartbeat={}&since={}",
            self.db_path,
            heartbeat.as_millis(),
            segment(&since)
        );
        let response = self.send(self.request(&self.feed_http, Method::GET, &url), &url).await?;
        if !response.status().is_success() {
            return Err(Self::refused(response).await);
        }
        Ok(ChangesFeed { response, buffer: BytesMut::new() })
    }
}

impl ChangesFeed {
    /// The next event; `Ok(None)` when the connection closed without a `last_seq` line.
    /// Heartbeat blank lines are skipped, but count as life: only `idle` without a single byte
    /// is [`CouchError::Stalled`].
    pub async fn next(&mut self, idle: Duration) -> Result<Option<FeedEvent>, CouchError> {
        loop {
            if let Some(newline) = self.buffer.iter().position(|&b| b == b'\n') {
                let line = self.buffer.split_to(newline + 1);
                let line = line.strip_suffix(b"\n").unwrap_or(&line);
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                return parse_feed_line(line).map(Some);
            }
            let chunk =
                tokio::time::timeout(idle, self.response.chunk()).await.map_err(|_| CouchError::Stalled(idle))?;
            match chunk {
                Ok(Some(chunk)) => self.buffer.extend_from_slice(chunk.chunk()),
                Ok(None) if self.buffer.iter().all(u8::is_ascii_whitespace) => return Ok(None),
                Ok(None) => {
                    let rest = std::mem::take(&mut self.buffer);
                    return parse_feed_line(&rest).map(Some);
                }
                Err(e) => return Err(CouchError::Protocol(format!("changes feed broke: {e}"))),
            }
        }
    }
}

fn parse_feed_line(line: &[u8]) -> Result<FeedEvent, CouchError> {
    let bad = |e: serde_json::Error| {
        CouchError::Protocol(format!("bad _changes line ({e}): {}", String::from_utf8_lossy(line)))
    };
    let value: Value = serde_json::from_slice(line).map_err(bad)?;
    if value.get("last_seq").is_some() && value.get("id").is_none() {
        return Ok(FeedEvent::End { last_seq: serde_json::from_value::<LastSeq>(value).map_err(bad)?.last_seq });
    }
    if let Some(error) = value.get("error") {
        return Err(CouchError::Refused {
            status: 200,
            error: error.to_string(),
            reason: value.get("reason").map(Value::to_string).unwrap_or_default(),
        });
    }
    let row: ChangeRow = serde_json::from_value(value).map_err(bad)?;
    let doc = if row.deleted {
        None
    } else {
        row.doc.filter(|d| !d.get("_deleted").and_then(Value::as_bool).unwrap_or(false))
    };
    Ok(FeedEvent::Change { seq: row.seq, id: row.id, doc })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn change_rows_deletions_and_the_end_line_parse() {
        let change = parse_feed_line(br#"{"seq":"12-g1AAAA","id":"H83if","changes":[{"rev":"2-a"}],"doc":{"_id":"H83if","url":"https://a.example"}}"#).unwrap();
        assert_eq!(
            change,
            FeedEvent::Change {
                seq: json!("12-g1AAAA"),
                id: "H83if".into(),
                doc: Some(json!({"_id":"H83if","url":"https://a.example"}))
            }
        );
        let deleted = parse_feed_line(br#"{"seq":7,"id":"H83if","changes":[{"rev":"3-b"}],"deleted":true,"doc":{"_id":"H83if","_rev":"3-b","_deleted":true}}"#).unwrap();
        assert_eq!(deleted, FeedEvent::Change { seq: json!(7), id: "H83if".into(), doc: None });
        let end = parse_feed_line(br#"{"last_seq":"99-xyz","pending":0}"#).unwrap();
        assert_eq!(end, FeedEvent::End { last_seq: json!("99-xyz") });
        assert!(parse_feed_line(b"{not json").is_err());
    }

    #[test]
    fn database_names_are_encoded_as_one_segment() {
        assert_eq!(segment("links/test+1"), "links%2Ftest%2B1");
    }
}
