//! The server and its databases as a whole: whether the server answers, its limits, databases
//! made, a database's information and identity, its `_security` object, its design documents
//! and the validation functions they hold.

use reqwest::Method;
use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::docs::AllDocsWithDocs;
use super::url::segment;
use super::{CouchClient, CouchError};

/// What couchlink reads of a database's information (`GET /{db}`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct DatabaseInfo {
    /// How many documents it holds (design documents included).
    #[serde(default)]
    pub doc_count: u64,
    /// How many it held that are deleted now.
    #[serde(default)]
    pub doc_del_count: u64,
    /// When CouchDB made the database: the same on every node of a cluster, new when a database
    /// is made again under its name (pouchdb-server says `"0"`).
    #[serde(default)]
    pub instance_start_time: Option<String>,
}

/// A design document as stored: its revision, and every other field as it is (those couchlink
/// writes and any an admin added): setup compares it field by field with the one it wants.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct DesignDoc {
    /// The revision, to replace it.
    #[serde(rename = "_rev")]
    pub rev: String,
    /// Every other field, `_id` included.
    #[serde(flatten)]
    pub fields: Map<String, Value>,
}

#[derive(Deserialize)]
struct LocalIdentity {
    identity: String,
}

impl CouchClient {
    /// The server's welcome (`GET /`): whether it answers at all.
    pub async fn ping(&self) -> Result<(), CouchError> {
        self.get::<IgnoredAny>(&self.server("")).await.map(drop)
    }

    /// The largest document CouchDB accepts (`[couchdb] max_document_size`, bytes), when this
    /// account may read the server's configuration (an admin); `None` when it may not, or the
    /// server does not say (pouchdb-server has no such setting).
    pub async fn max_document_size(&self) -> Option<u64> {
        let url = self.server("_node/_local/_config/couchdb/max_document_size");
        // Asked as is, not through `get`: CouchDB answers a non-admin 401, which must not mark
        // this account's password as refused.
        let response = self.send(self.request(&self.http, Method::GET, &url)).await.ok()?;
        if !response.status().is_success() {
            return None;
        }
        let value = Self::json::<Value>(response, &url).await.ok()?;
        value.as_str().and_then(|v| v.trim().parse().ok()).or_else(|| value.as_u64())
    }

    /// Creates database `name` unless it exists; `true` when this call created it.
    pub async fn ensure_database(&self, name: &str) -> Result<bool, CouchError> {
        let url = self.server(&segment(name));
        if self.get_optional::<IgnoredAny>(&url).await?.is_some() {
            return Ok(false);
        }
        match self.put(&url, &json!({})).await {
            Ok(_) => Ok(true),
            // Created by someone else meanwhile.
            Err(CouchError::Refused { status: 412, .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The links database's information; `Ok(None)` when it does not exist.
    pub async fn database_info(&self) -> Result<Option<DatabaseInfo>, CouchError> {
        self.get_optional(&self.in_db("")).await
    }

    /// The database's `_security` object, as it is. Left as JSON, not a struct: setup writes it
    /// back with every part an admin put there, and mends parts of the wrong shape (a `names`
    /// that is not a list) where a struct would refuse them; the import hands it to the
    /// validation functions as `secObj`, as CouchDB would.
    pub async fn security(&self) -> Result<Value, CouchError> {
        self.get(&self.in_db("_security")).await
    }

    /// Replaces the database's `_security` object.
    pub async fn put_security(&self, security: &Value) -> Result<(), CouchError> {
        self.put(&self.in_db("_security"), security).await.map(drop)
    }

    /// Design document `_design/{name}`, if it exists.
    pub async fn design_doc(&self, name: &str) -> Result<Option<DesignDoc>, CouchError> {
        self.get_optional(&self.design_doc_url(name)).await
    }

    /// Creates or replaces design document `_design/{name}` (`doc` carries `_rev` to replace).
    pub async fn put_design_doc(&self, name: &str, doc: &Value) -> Result<(), CouchError> {
        self.put(&self.design_doc_url(name), doc).await.map(drop)
    }

    /// Every design document's `validate_doc_update` source, by document ID (CouchDB runs
    /// them all on every write).
    pub async fn validation_functions(&self) -> Result<Vec<(String, String)>, CouchError> {
        let url =
            format!("{}?include_docs=true&startkey=%22_design%2F%22&endkey=%22_design0%22", self.in_db("_all_docs"));
        let page: AllDocsWithDocs = self.get(&url).await?;
        Ok(page
            .rows
            .into_iter()
            .filter_map(|row| Some((row.id, row.doc?.get("validate_doc_update")?.as_str()?.to_owned())))
            .collect())
    }

    /// What tells this database from any other of its name, past or future: a random identity
    /// in the local (never replicated) document `_local/couchlink`, made by the first caller that
    /// finds none (`setup`, or a proxy: CouchDB 3 lets a database's members write local
    /// documents), and when CouchDB made the database. A database deleted and created again under
    /// the same name gets a new one.
    pub async fn database_identity(&self) -> Result<String, CouchError> {
        // CouchDB 3 also tells when the database was made (`instance_start_time`, the same on
        // every node of a cluster), which no member can write as they can a local document:
        // a database made again under its name, its old identity written back, is still
        // another. pouchdb-server says "0".
        let url = self.in_db("_local/couchlink");
        let (info, mut local) = tokio::join!(self.database_info(), self.get_optional::<LocalIdentity>(&url));
        let made = info?.and_then(|info| info.instance_start_time).filter(|t| !t.is_empty() && t != "0");
        let identity_of = |local: String| match &made {
            Some(made) => format!("{local}:{made}"),
            None => local,
        };
        for _ in 0..3 {
            if let Some(doc) = local? {
                return Ok(identity_of(doc.identity));
            }
            let identity = format!("{:032x}", rand::random::<u128>());
            match self.put(&url, &json!({"identity": identity})).await {
                Ok(_) => return Ok(identity_of(identity)),
                // Another proxy made one first: read it.
                Err(CouchError::Refused { status: 409, .. }) => local = self.get_optional(&url).await,
                Err(e) => return Err(e),
            }
        }
        Err(CouchError::Refused {
            status: 409,
            error: "conflict".into(),
            reason: "_local/couchlink kept changing while it was read".into(),
        })
    }
}
