//! Views: reduced and grouped rows, a key range's documents, the rows under many keys; each
//! query asked again while CouchDB is still bringing the index up to date.

use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
use reqwest::Method;
use serde::Deserialize;
use serde_json::{json, Value};

use super::docs::AllDocsWithDocs;
use super::url::segment;
use super::{CouchClient, CouchError, BULK_TIMEOUT};

/// A view's rows (`GET /{db}/_design/{d}/_view/{v}`).
#[derive(Deserialize)]
struct ViewRows {
    rows: Vec<ViewRow>,
}

#[derive(Deserialize)]
struct ViewRow {
    key: Value,
    value: Value,
}

/// A map view's rows with their documents' IDs.
#[derive(Deserialize)]
struct KeyIdRows {
    rows: Vec<KeyIdRow>,
}

#[derive(Deserialize)]
struct KeyIdRow {
    key: Value,
    id: String,
}

/// What a view is asked for: reduced, grouped to `group_level` (all of each key without one),
/// between two keys (`Value::Null`: from the first, to the last).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ViewQuery {
    /// How many elements of an array key rows are grouped by.
    pub group_level: Option<usize>,
    /// The first key (inclusive).
    pub start_key: Value,
    /// The last key (inclusive).
    pub end_key: Value,
    /// At most this many rows (a page); `None`: all.
    pub limit: Option<usize>,
}

impl CouchClient {
    /// The rows of view `view` of design document `design`, reduced and grouped as `query`
    /// says: each row's key and value. A design document or view that does not exist is a 404
    /// [`CouchError::Refused`].
    pub async fn view(&self, design: &str, view: &str, query: &ViewQuery) -> Result<Vec<(Value, Value)>, CouchError> {
        let mut url = format!("{}/_view/{}?reduce=true", self.design_doc_url(design), segment(view));
        match query.group_level {
            Some(level) => url.push_str(&format!("&group_level={level}")),
            None => url.push_str("&group=true"),
        }
        for (name, key) in [("startkey", &query.start_key), ("endkey", &query.end_key)] {
            if !key.is_null() {
                url.push_str(&format!("&{name}={}", utf8_percent_encode(&key.to_string(), NON_ALPHANUMERIC)));
            }
        }
        if let Some(limit) = query.limit {
            url.push_str(&format!("&limit={limit}"));
        }
        // A view's index is brought up to date by the query that finds it behind: after days of
        // counts, or a roll-up's thousands of deletions, that can take minutes, and CouchDB 3
        // answers `500 timeout` after its own request timeout (60 s, `fabric.request_timeout`)
        // while the indexer goes on; so the query is asked again, up to BULK_TIMEOUT in all.
        let began = std::time::Instant::now();
        loop {
            let req = self.request(&self.feed_http, Method::GET, &url).timeout(BULK_TIMEOUT);
            let response = self.send(req).await?;
            if response.status().is_success() {
                let rows: ViewRows = Self::json(response, &url).await?;
                return Ok(rows.rows.into_iter().map(|row| (row.key, row.value)).collect());
            }
            match self.refused(response).await {
                CouchError::Refused { error, .. } if error == "timeout" && began.elapsed() < BULK_TIMEOUT => continue,
                refused => return Err(refused),
            }
        }
    }

    /// The documents of map view `design/view`'s rows from `start_key` to `end_key`, in key
    /// order (`include_docs`, not reduced).
    pub async fn view_docs(
        &self,
        design: &str,
        view: &str,
        start_key: &Value,
        end_key: &Value,
    ) -> Result<Vec<Value>, CouchError> {
        let url = format!(
            "{}/_view/{}?include_docs=true&startkey={}&endkey={}",
            self.design_doc_url(design),
            segment(view),
            utf8_percent_encode(&start_key.to_string(), NON_ALPHANUMERIC),
            utf8_percent_encode(&end_key.to_string(), NON_ALPHANUMERIC)
        );
        let page: AllDocsWithDocs = self.get(&url).await?;
        Ok(page.rows.into_iter().filter_map(|row| row.doc).collect())
    }

    /// The rows map view `design/view` has under each of `keys` (`POST` with `keys`, one
    /// request): each row's key and its document's ID. `Ok(None)` when the design document or
    /// the view does not exist. A view behind is brought up to date by the query, asked again
    /// while CouchDB answers `timeout` (see [`CouchClient::view`]).
    pub async fn view_ids(
        &self,
        design: &str,
        view: &str,
        keys: &[Value],
    ) -> Result<Option<Vec<(Value, String)>>, CouchError> {
        let url = format!("{}/_view/{}", self.design_doc_url(design), segment(view));
        let began = std::time::Instant::now();
        loop {
            let req =
                self.request(&self.feed_http, Method::POST, &url).timeout(BULK_TIMEOUT).json(&json!({"keys": keys}));
            let response = self.send(req).await?;
            if response.status().is_success() {
                let rows: KeyIdRows = Self::json(response, &url).await?;
                return Ok(Some(rows.rows.into_iter().map(|row| (row.key, row.id)).collect()));
            }
            match self.refused(response).await {
                CouchError::Refused { status: 404, .. } => return Ok(None),
                CouchError::Refused { error, .. } if error == "timeout" && began.elapsed() < BULK_TIMEOUT => continue,
                refused => return Err(refused),
            }
        }
    }
}
