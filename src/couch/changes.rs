//! `_changes`: the continuous feed the cache and the history follow, its pages with and without
//! content, and where it ends now.

use std::time::Duration;

use bytes::{Buf, BytesMut};
use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
use reqwest::{Method, Response};
use serde::Deserialize;
use serde_json::Value;

use super::json::decode;
use super::url::segment;
use super::{CouchClient, CouchError, BULK_TIMEOUT};

/// One event of a `_changes` feed.
#[derive(Debug, Clone, PartialEq)]
pub enum FeedEvent {
    /// A document changed; `doc` is its winning revision, `None` when deleted.
    Change {
        /// Where the feed stands after this change (opaque).
        seq: Value,
        /// The document's ID.
        id: String,
        /// The document, `None` when deleted.
        doc: Option<Value>,
    },
    /// A heartbeat: nothing changed for a heartbeat's interval, so the feed has sent all it had.
    Idle,
    /// The server closed the feed at this sequence (resume from it).
    End {
        /// Where to resume (opaque).
        last_seq: Value,
    },
}

/// A continuous `_changes` feed being read.
pub struct ChangesFeed {
    response: Response,
    url: String,
    buffer: BytesMut,
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

/// One page of `_changes` ([`CouchClient::changes_page`]).
#[derive(Debug, Deserialize)]
pub struct ChangesPage {
    /// Each document changed, once, at its latest revision.
    pub results: Vec<ChangeOfDoc>,
    /// Where to ask for the next page.
    pub last_seq: Value,
}

/// A document as a `_changes` page lists it.
#[derive(Debug, Deserialize)]
pub struct ChangeOfDoc {
    /// Its ID.
    pub id: String,
    /// Whether it is deleted.
    #[serde(default)]
    pub deleted: bool,
    /// Its latest revision (a deleted one holds only `_id`, `_rev`, `_deleted`).
    #[serde(default)]
    pub doc: Option<Value>,
}

/// A page of `_changes` without content: each document's ID and its leaf revisions.
#[derive(Debug)]
pub struct RevsPage {
    /// `(ID, revision, first)`: each leaf revision of each document, each document once, and
    /// whether it is the one listed first (CouchDB 3 lists the one it serves first;
    /// pouchdb-server in order of their revisions).
    pub results: Vec<(String, String, bool)>,
    /// Where to ask for the next page.
    pub last_seq: Value,
}

#[derive(Deserialize)]
struct RawRevsPage {
    results: Vec<RawRevsRow>,
    last_seq: Value,
}

#[derive(Deserialize)]
struct RawRevsRow {
    id: String,
    changes: Vec<RevOnly>,
}

#[derive(Deserialize)]
struct RevOnly {
    rev: String,
}

impl CouchClient {
    /// Up to `limit` documents from `_changes` after `since` (from the start when `None`), each
    /// once at its latest revision with its content, deleted ones included: the one listing
    /// that shows every ID a database ever used.
    pub async fn changes_page(&self, since: Option<&Value>, limit: usize) -> Result<ChangesPage, CouchError> {
        let mut url = format!("{}?style=main_only&include_docs=true&limit={limit}", self.in_db("_changes"));
        if let Some(since) = since {
            let since = match since {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            url.push_str("&since=");
            url.push_str(&utf8_percent_encode(&since, NON_ALPHANUMERIC).to_string());
        }
        let req = self.request(&self.feed_http, Method::GET, &url).timeout(BULK_TIMEOUT);
        let response = self.send(req).await?;
        if !response.status().is_success() {
            return Err(self.refused(response).await);
        }
        Self::json(response, &url).await
    }

    /// Up to `limit` changes after `since` (from the start when `None`): each document's ID and
    /// leaf revisions (`style=all_docs`: any conflicting ones too), without their content. With `wait`, a long poll: CouchDB answers as
    /// soon as there is one, or after `wait` with none.
    pub async fn change_revs(
        &self,
        since: Option<&Value>,
        limit: usize,
        wait: Option<Duration>,
    ) -> Result<RevsPage, CouchError> {
        let mut url = format!("{}?style=all_docs&limit={limit}", self.in_db("_changes"));
        if let Some(wait) = wait {
            url.push_str(&format!("&feed=longpoll&timeout={}", wait.as_millis()));
        }
        if let Some(since) = since {
            let since = match since {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            url.push_str("&since=");
            url.push_str(&utf8_percent_encode(&since, NON_ALPHANUMERIC).to_string());
        }
        let timeout = BULK_TIMEOUT + wait.unwrap_or_default();
        let req = self.request(&self.feed_http, Method::GET, &url).timeout(timeout);
        let response = self.send(req).await?;
        if !response.status().is_success() {
            return Err(self.refused(response).await);
        }
        let page: RawRevsPage = Self::json(response, &url).await?;
        let results = page
            .results
            .into_iter()
            .flat_map(|row| {
                let id = row.id;
                row.changes.into_iter().enumerate().map(move |(i, c)| (id.clone(), c.rev, i == 0))
            })
            .collect();
        Ok(RevsPage { results, last_seq: page.last_seq })
    }

    /// The current end of the database's `_changes` (an opaque sequence to resume from).
    pub async fn current_seq(&self) -> Result<Value, CouchError> {
        Ok(self.get::<LastSeq>(&self.in_db("_changes?since=now&limit=0")).await?.last_seq)
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
        let url = self.in_db(&format!(
            "_changes?feed=continuous&include_docs=true&heartbeat={}&since={}",
            heartbeat.as_millis(),
            segment(&since)
        ));
        let response = self.send_anyway(self.request(&self.feed_http, Method::GET, &url)).await?;
        if !response.status().is_success() {
            return Err(self.refused(response).await);
        }
        Ok(ChangesFeed { response, url, buffer: BytesMut::new() })
    }
}

impl ChangesFeed {
    /// The next event; `Ok(None)` when the connection closed without a `last_seq` line.
    /// Heartbeat blank lines are [`FeedEvent::Idle`]; only `idle` without a single byte is
    /// [`CouchError::Stalled`].
    pub async fn next(&mut self, idle: Duration) -> Result<Option<FeedEvent>, CouchError> {
        loop {
            if let Some(newline) = self.buffer.iter().position(|&b| b == b'\n') {
                let line = self.buffer.split_to(newline + 1);
                let line = line.strip_suffix(b"\n").unwrap_or(&line);
                if line.iter().all(u8::is_ascii_whitespace) {
                    return Ok(Some(FeedEvent::Idle));
                }
                return parse_feed_line(line, &self.url).map(Some);
            }
            let chunk =
                tokio::time::timeout(idle, self.response.chunk()).await.map_err(|_| CouchError::Stalled(idle))?;
            match chunk {
                Ok(Some(chunk)) => self.buffer.extend_from_slice(chunk.chunk()),
                Ok(None) if self.buffer.iter().all(u8::is_ascii_whitespace) => return Ok(None),
                Ok(None) => {
                    let rest = std::mem::take(&mut self.buffer);
                    return parse_feed_line(&rest, &self.url).map(Some);
                }
                Err(source) => return Err(CouchError::Read { url: self.url.clone(), source }),
            }
        }
    }
}

fn parse_feed_line(line: &[u8], url: &str) -> Result<FeedEvent, CouchError> {
    let bad = |source: serde_json::Error| CouchError::Decode {
        url: url.to_owned(),
        body: String::from_utf8_lossy(line).chars().take(200).collect(),
        source,
    };
    let value: Value = decode(line).map_err(bad)?;
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
    use super::super::json::{decode, depth, MAX_DEPTH};
    use super::*;
    use serde_json::json;

    fn parse(line: &[u8]) -> Result<FeedEvent, CouchError> {
        parse_feed_line(line, "http://couch/links/_changes")
    }

    #[test]
    fn change_rows_deletions_and_the_end_line_parse() {
        let change = parse(br#"{"seq":"12-g1AAAA","id":"H83if","changes":[{"rev":"2-a"}],"doc":{"_id":"H83if","url":"https://a.example"}}"#).unwrap();
        assert_eq!(
            change,
            FeedEvent::Change {
                seq: json!("12-g1AAAA"),
                id: "H83if".into(),
                doc: Some(json!({"_id":"H83if","url":"https://a.example"}))
            }
        );
        let deleted = parse(br#"{"seq":7,"id":"H83if","changes":[{"rev":"3-b"}],"deleted":true,"doc":{"_id":"H83if","_rev":"3-b","_deleted":true}}"#).unwrap();
        assert_eq!(deleted, FeedEvent::Change { seq: json!(7), id: "H83if".into(), doc: None });
        let end = parse(br#"{"last_seq":"99-xyz","pending":0}"#).unwrap();
        assert_eq!(end, FeedEvent::End { last_seq: json!("99-xyz") });
        assert!(matches!(parse(b"{not json"), Err(CouchError::Decode { .. })));
    }

    #[test]
    fn a_document_nested_past_serde_json_s_limit_is_read_up_to_its_own() {
        let nested = |n: usize| format!("{}1{}", "{\"a\":[".repeat(n / 2), "]}".repeat(n / 2));
        let line = format!(
            r#"{{"seq":7,"id":"H83if","changes":[{{"rev":"1-a"}}],"doc":{{"_id":"H83if","n":{}}}}}"#,
            nested(300)
        );
        let event = parse(line.as_bytes()).unwrap();
        assert!(matches!(event, FeedEvent::Change { ref id, doc: Some(_), .. } if id == "H83if"), "{event:?}");
        assert_eq!(depth(br#"{"a":"{[[[","b":[1,{"c":"\"]"}]}"#), 3);
        let too_deep = nested(MAX_DEPTH + 10);
        assert!(decode::<Value>(too_deep.as_bytes()).is_err());
        assert!(decode::<Value>(nested(200).as_bytes()).unwrap()["a"][0]["a"][0]["a"][0]["a"][0]["a"][0].is_object());
    }
}
