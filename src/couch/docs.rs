//! Documents: links read and written, pages of `_all_docs`, what a database holds under each
//! of many IDs, `_bulk_docs` and `_bulk_get`, local documents.

use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
use reqwest::{Method, StatusCode};
use serde::Deserialize;
use serde_json::{json, Value};

use super::url::segment;
use super::{CouchClient, CouchError};
use crate::domain::{LinkDoc, LinkId};

/// How a `PUT` of a new document ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Created {
    /// Stored, with this revision.
    Stored(String),
    /// The ID is taken (409).
    Conflict,
}

/// What a database holds under one ID (`POST /{db}/_all_docs` with `keys`).
#[derive(Debug, Clone, PartialEq)]
pub enum IdState {
    /// Never used.
    Free,
    /// Used once, now deleted: never handed out again (its short URL may be printed).
    Deleted,
    /// A document, as stored (`_rev` included).
    Taken(Value),
}

/// How one document of a `_bulk_docs` request ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BulkOutcome {
    /// Stored, as this revision.
    Stored(String),
    /// The ID was taken meanwhile.
    Conflict,
    /// Refused, in CouchDB's words (`forbidden` and the validation function's reason, say).
    Refused {
        /// CouchDB's `error` word.
        error: String,
        /// CouchDB's `reason`.
        reason: String,
    },
}

#[derive(Deserialize)]
struct AllDocs {
    rows: Vec<AllDocsRow>,
}

/// `_all_docs` with `include_docs`: each row's ID and document.
#[derive(Deserialize)]
pub(super) struct AllDocsWithDocs {
    pub(super) rows: Vec<DocRow>,
}

#[derive(Deserialize)]
pub(super) struct DocRow {
    pub(super) id: String,
    #[serde(default)]
    pub(super) doc: Option<Value>,
}

#[derive(Deserialize)]
struct BulkGet {
    results: Vec<BulkGetResult>,
}

#[derive(Deserialize)]
struct BulkGetResult {
    docs: Vec<Value>,
}

#[derive(Deserialize)]
struct KeyRows {
    rows: Vec<KeyRow>,
}

/// A row of `_all_docs` asked by key: `error` when the key was never used, `value.deleted`
/// when deleted, `doc` otherwise.
#[derive(Deserialize)]
struct KeyRow {
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    value: Option<Value>,
    #[serde(default)]
    doc: Option<Value>,
}

#[derive(Deserialize)]
struct BulkRow {
    #[serde(default)]
    id: String,
    #[serde(default)]
    rev: String,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    reason: Option<String>,
}

/// A row of `_all_docs` with `keys`: `value` is present for documents that exist or existed
/// (`{"rev":..., "deleted": true}`), absent (with `error: not_found`) for IDs never used.
#[derive(Deserialize)]
struct AllDocsRow {
    #[serde(default)]
    value: Option<Value>,
}

/// A bulk answer with as many rows as were asked for, else a refusal saying so.
fn answered(asked: usize, got: usize, what: &str) -> Result<(), CouchError> {
    if asked == got {
        return Ok(());
    }
    Err(CouchError::Refused {
        status: 200,
        error: "bad_answer".into(),
        reason: format!("asked for {asked} {what}, got {got} rows"),
    })
}

impl CouchClient {
    /// Reads link `id`. `Ok(None)` when there is no such document (or it was deleted).
    /// A 404 for a missing *database* is an error, not "no such link".
    pub async fn get_link(&self, id: &LinkId) -> Result<Option<LinkDoc>, CouchError> {
        let url = self.in_db(id.as_str());
        let response = self.send(self.request(&self.http, Method::GET, &url)).await?;
        match response.status() {
            s if s.is_success() => Self::json(response, &url).await.map(Some),
            StatusCode::NOT_FOUND => match self.refused(response).await {
                // {"error":"not_found","reason":"missing"|"deleted"}; a missing database says
                // "Database does not exist." (CouchDB 3) or "no_db_file".
                CouchError::Refused { reason, .. } if reason == "missing" || reason == "deleted" => Ok(None),
                other => Err(other),
            },
            _ => Err(self.refused(response).await),
        }
    }

    /// Up to `limit` documents in ID order, from `from` on (inclusive: a caller paging on
    /// drops the row it already has, rather than `skip=1`, which would skip another document
    /// if that one were deleted in between). `_all_docs` with `include_docs`.
    pub async fn docs_page(&self, from: Option<&str>, limit: usize) -> Result<Vec<(String, Value)>, CouchError> {
        let mut url = format!("{}?include_docs=true&limit={limit}", self.in_db("_all_docs"));
        if let Some(from) = from {
            let key = serde_json::to_string(from).expect("a string serialises");
            url.push_str("&startkey=");
            url.push_str(&utf8_percent_encode(&key, NON_ALPHANUMERIC).to_string());
        }
        let page: AllDocsWithDocs = self.get(&url).await?;
        Ok(page.rows.into_iter().filter_map(|row| Some((row.id, row.doc?))).collect())
    }

    /// Every document in ID order, `page` at a time (`_all_docs` with `include_docs`, each page
    /// starting at the last row of the one before), each given to `each` with its ID.
    pub async fn each_doc<E: From<CouchError>>(
        &self,
        page: usize,
        mut each: impl FnMut(&str, &Value) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut from: Option<String> = None;
        loop {
            let rows = self.docs_page(from.as_deref(), page).await?;
            for (id, doc) in rows.iter().skip(usize::from(from.is_some())) {
                each(id, doc)?;
            }
            if rows.len() < page {
                return Ok(());
            }
            from = rows.last().map(|(id, _)| id.clone());
        }
    }

    /// Whether `id` exists or existed: `_all_docs` lists deleted documents with `deleted: true`
    /// where a plain GET says only "not found" (docs.couchdb.org, `POST /{db}/_all_docs`).
    pub async fn ever_used(&self, id: &LinkId) -> Result<bool, CouchError> {
        let url = self.in_db("_all_docs");
        let req = self.request(&self.http, Method::POST, &url).json(&json!({"keys": [id.as_str()]}));
        let response = self.send(req).await?;
        if !response.status().is_success() {
            return Err(self.refused(response).await);
        }
        let listing: AllDocs = Self::json(response, &url).await?;
        Ok(listing.rows.first().is_some_and(|row| row.value.is_some()))
    }

    /// What the database holds under each of `ids`, in their order: one request, however many
    /// (`_all_docs` with `keys` and `include_docs`).
    pub async fn id_states(&self, ids: &[&str]) -> Result<Vec<IdState>, CouchError> {
        let url = format!("{}?include_docs=true", self.in_db("_all_docs"));
        let listing: KeyRows = self.post_bulk(&url, &json!({"keys": ids})).await?;
        answered(ids.len(), listing.rows.len(), "IDs")?;
        Ok(listing
            .rows
            .into_iter()
            .map(|row| match (row.error, row.value, row.doc) {
                (Some(_), _, _) | (None, None, _) => IdState::Free,
                (None, Some(value), _) if value.get("deleted") == Some(&Value::Bool(true)) => IdState::Deleted,
                (None, Some(_), Some(doc)) if !doc.is_null() => IdState::Taken(doc),
                // A live row without its document (a stale index): taken, content unknown.
                (None, Some(_), _) => IdState::Taken(Value::Null),
            })
            .collect())
    }

    /// Creates `docs` (each with its `_id`, none with a `_rev`) in one `_bulk_docs` request, and
    /// says how each ended, in their order. The request is one call: it may fail as a whole
    /// (unreachable, timed out) after CouchDB stored some of them.
    pub async fn bulk_create(&self, docs: &[Value]) -> Result<Vec<BulkOutcome>, CouchError> {
        let url = self.in_db("_bulk_docs");
        let mut rows: Vec<BulkRow> = self.post_bulk(&url, &json!({"docs": docs})).await?;
        // CouchDB answers in the documents' order; pouchdb-server answers a refused document
        // first. Put back in the documents' order by ID, where every ID is named once.
        let ids: Vec<&str> = docs.iter().map(|d| d["_id"].as_str().unwrap_or("")).collect();
        let unique: std::collections::HashSet<&str> = ids.iter().copied().collect();
        if unique.len() == ids.len() && rows.len() == ids.len() && !unique.contains("") {
            let mut by_id: std::collections::HashMap<String, BulkRow> =
                rows.drain(..).map(|row| (row.id.clone(), row)).collect();
            if by_id.len() == ids.len() && ids.iter().all(|id| by_id.contains_key(*id)) {
                rows = ids.iter().map(|id| by_id.remove(*id).expect("checked above")).collect();
            } else {
                rows = by_id.into_values().collect();
                return Err(CouchError::Refused {
                    status: 201,
                    error: "bad_answer".into(),
                    reason: format!("sent {} documents, got results for other IDs ({})", docs.len(), rows.len()),
                });
            }
        }
        if rows.len() != docs.len() {
            return Err(CouchError::Refused {
                status: 201,
                error: "bad_answer".into(),
                reason: format!("sent {} documents, got {} results", docs.len(), rows.len()),
            });
        }
        Ok(rows
            .into_iter()
            .map(|row| match row.error.as_deref() {
                None => BulkOutcome::Stored(row.rev),
                Some("conflict") => BulkOutcome::Conflict,
                Some(error) => BulkOutcome::Refused {
                    error: error.to_owned(),
                    reason: row.reason.unwrap_or_else(|| format!("document {}", row.id)),
                },
            })
            .collect())
    }

    /// `_all_docs` over the IDs that start with `prefix`: the query's range.
    fn prefix_range(prefix: &str) -> String {
        let key = |k: String| utf8_percent_encode(&Value::String(k).to_string(), NON_ALPHANUMERIC).to_string();
        format!("startkey={}&endkey={}", key(prefix.to_owned()), key(format!("{prefix}\u{fff0}")))
    }

    /// The documents at the given `(ID, revision)` pairs, in their order, each with its
    /// ancestry (`_revisions`, newest first): one `_bulk_get` request. `None` where CouchDB no
    /// longer holds that revision (compaction keeps only the latest ones' content).
    pub async fn revisions(&self, wanted: &[(String, String)]) -> Result<Vec<Option<Value>>, CouchError> {
        let url = format!("{}?revs=true", self.in_db("_bulk_get"));
        let docs: Vec<Value> = wanted.iter().map(|(id, rev)| json!({"id": id, "rev": rev})).collect();
        let answer: BulkGet = self.post_bulk(&url, &json!({"docs": docs})).await?;
        answered(wanted.len(), answer.results.len(), "revisions")?;
        Ok(answer
            .results
            .into_iter()
            .map(|result| result.docs.into_iter().find_map(|d| d.get("ok").filter(|ok| ok.is_object()).cloned()))
            .collect())
    }

    /// The documents whose IDs start with `prefix`, in order, with their content and the
    /// conflicting revisions each has (`_conflicts`, where it has any).
    pub async fn docs_with_prefix(&self, prefix: &str) -> Result<Vec<Value>, CouchError> {
        let url =
            format!("{}?include_docs=true&conflicts=true&{}", self.in_db("_all_docs"), Self::prefix_range(prefix));
        let page: AllDocsWithDocs = self.get(&url).await?;
        Ok(page.rows.into_iter().filter_map(|row| row.doc).collect())
    }

    /// Whether any document's ID lies between `start` and `end` (`_all_docs`, which orders IDs
    /// by their code points).
    pub async fn any_id_between(&self, start: &str, end: &str) -> Result<bool, CouchError> {
        let key = |k: &str| utf8_percent_encode(&Value::String(k.to_owned()).to_string(), NON_ALPHANUMERIC).to_string();
        let url = format!("{}?limit=1&startkey={}&endkey={}", self.in_db("_all_docs"), key(start), key(end));
        let page: AllDocsWithDocs = self.get(&url).await?;
        Ok(!page.rows.is_empty())
    }

    /// Document `id` as stored (`_rev` included), whatever its ID; `None` when there is none.
    pub async fn doc(&self, id: &str) -> Result<Option<Value>, CouchError> {
        self.get_optional(&self.doc_url(id)).await
    }

    /// Local (never replicated) document `_local/{name}`, `None` when there is none.
    pub async fn local_doc(&self, name: &str) -> Result<Option<Value>, CouchError> {
        self.get_optional(&self.in_db(&format!("_local/{}", segment(name)))).await
    }

    /// Writes local document `_local/{name}` (with the `_rev` of the one it replaces).
    pub async fn put_local_doc(&self, name: &str, doc: &Value) -> Result<String, CouchError> {
        self.put(&self.in_db(&format!("_local/{}", segment(name))), doc).await
    }

    /// Link document `id` as stored, `_rev` included, to edit it; `Ok(None)` when there is none.
    pub async fn link_doc(&self, id: &LinkId) -> Result<Option<Value>, CouchError> {
        self.get_optional(&self.in_db(id.as_str())).await
    }

    /// `PUT` a new document under `id`: [`Created::Conflict`] when the ID is taken. With the
    /// `_rev` of the current document in `doc`, a replacement: [`Created::Conflict`] when
    /// someone changed it first.
    pub async fn create_doc(&self, id: &LinkId, doc: &Value) -> Result<Created, CouchError> {
        self.create_doc_raw(id.as_str(), doc).await
    }

    /// [`CouchClient::create_doc`] under any ID, even one couchlink would never pick (to check
    /// that CouchDB's validation refuses it).
    pub async fn create_doc_raw(&self, id: &str, doc: &Value) -> Result<Created, CouchError> {
        self.create_doc_text(id, doc.to_string()).await
    }

    /// [`CouchClient::create_doc_raw`] of a document already written as JSON text.
    pub async fn create_doc_text(&self, id: &str, json: String) -> Result<Created, CouchError> {
        match self.put_text(&self.doc_url(id), json).await {
            Ok(rev) => Ok(Created::Stored(rev)),
            Err(CouchError::Refused { status: 409, .. }) => Ok(Created::Conflict),
            Err(e) => Err(e),
        }
    }
}
