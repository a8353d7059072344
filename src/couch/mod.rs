//! A typed client for the CouchDB HTTP API: every call couchlink makes, each URL built here and
//! nowhere else, with timeouts and CouchDB's JSON errors mapped to [`CouchError`].
//!
//! Written for Apache CouchDB 3's documented API (docs.couchdb.org, "API Reference");
//! pouchdb-server, used for local runs, speaks the same API with the quirks noted inline.
//!
//! One room per concern, every type re-exported here (`crate::couch::X` is the one path):
//! - this file: [`CouchClient`] itself: its account (a refused password not sent again), its
//!   connections, how a request is sent and its answer or refusal read;
//! - `error`: [`CouchError`]; `config`: [`CouchConfig`] and secret files;
//! - `url`: every URL, each path segment encoded once; `json`: answers nested past serde_json's
//!   own limit;
//! - `users`: sessions and `_users` accounts; `database`: the server and its databases, their
//!   information, identity, `_security` and design documents;
//! - `docs`: documents, one or many; `changes`: `_changes`, its feed and its pages; `views`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use reqwest::{Method, RequestBuilder, Response, StatusCode};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::Value;

mod changes;
mod config;
mod database;
mod docs;
mod error;
mod json;
mod url;
mod users;
mod views;

pub use changes::{ChangeOfDoc, ChangesFeed, ChangesPage, FeedEvent, RevsPage};
pub use config::{read_secret_file, CouchConfig, SecretError};
pub use database::{DatabaseInfo, DesignDoc};
pub use docs::{BulkOutcome, Created, IdState};
pub use error::CouchError;
pub use json::MAX_DEPTH;
pub use url::{redact_userinfo, server_path_url};
pub use users::{Session, UserDoc};
pub use views::ViewQuery;

use json::decode;

/// How long a single document request may take before CouchDB counts as unreachable.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// How long one `_bulk_docs` or many-key `_all_docs` request may take: CouchDB runs the
/// validation function once per document.
const BULK_TIMEOUT: Duration = Duration::from_secs(300);
/// Idle pooled connections are dropped before Node's 5 s keep-alive timeout closes them
/// under us (pouchdb-server); harmless against CouchDB itself.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(4);

/// One CouchDB server and its links database, as one account.
#[derive(Clone)]
pub struct CouchClient {
    http: reqwest::Client,
    /// Without a total timeout: `_changes` feeds stay open indefinitely.
    feed_http: reqwest::Client,
    /// The server URL, without a trailing `/`.
    base: String,
    db: String,
    account: Arc<Account>,
}

/// The account a client speaks as, shared by its clones: a password read again on SIGHUP
/// reaches every part of the proxy at once.
struct Account {
    user: Option<String>,
    password: RwLock<Option<String>>,
    /// CouchDB refused the password in use (401). Until it changes, only the `_changes` feed's
    /// slow retries send it again: CouchDB locks an account out after more than 5 failures in
    /// 5 minutes, and a proxy asking for every unknown link would lock its own account.
    refused: AtomicBool,
    /// What CouchDB said when it refused the password: `error: reason`.
    refusal: Mutex<String>,
    /// A refusal of this account has been said ([`CouchClient::first_refusal`]); it is said
    /// again only after CouchDB accepts the account again.
    said: AtomicBool,
    /// Signalled when the password changes.
    changed: tokio::sync::Notify,
    /// How many times the password changed: a response is the current password's only if it
    /// was sent with it. A 401 to a request sent just before SIGHUP (CouchDB 3.5 takes a while
    /// to refuse: it hashes the wrong password first) would otherwise mark the new password
    /// refused, and nothing would be asked of CouchDB until the feed's retry a minute later.
    generation: AtomicU64,
}

/// The password generation a response's request was sent with (see [`Account::generation`]).
#[derive(Clone, Copy)]
struct SentWith(u64);

impl Account {
    fn new(user: Option<String>, password: Option<String>) -> Arc<Account> {
        Arc::new(Account {
            user,
            password: RwLock::new(password),
            refused: AtomicBool::new(false),
            refusal: Mutex::new(String::new()),
            said: AtomicBool::new(false),
            changed: tokio::sync::Notify::new(),
            generation: AtomicU64::new(0),
        })
    }
}

#[derive(Deserialize)]
struct ErrorBody {
    #[serde(default)]
    error: String,
    #[serde(default)]
    reason: String,
}

#[derive(Deserialize)]
struct Revision {
    #[serde(default)]
    rev: String,
}

/// An HTTP client for CouchDB, with `timeout` for a whole request (none for feeds).
fn http_client(timeout: Option<Duration>) -> Result<reqwest::Client, CouchError> {
    let mut b = reqwest::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .pool_idle_timeout(POOL_IDLE_TIMEOUT)
        .tcp_nodelay(true);
    if let Some(t) = timeout {
        b = b.timeout(t);
    }
    b.build().map_err(CouchError::Client)
}

impl CouchClient {
    /// A client for `config`; no request is made yet.
    pub fn new(config: &CouchConfig) -> Result<Self, CouchError> {
        let mut url = reqwest::Url::parse(config.url.trim_end_matches('/'))
            .map_err(|source| CouchError::BadUrl { url: redact_userinfo(&config.url), source })?;
        // Credentials written into the URL (`http://user:secret@host:5984`) become the
        // account, unless one is named apart, and leave the URL: it is shown in messages,
        // errors and /healthz, and must never show a password.
        let decode = |s: &str| percent_encoding::percent_decode_str(s).decode_utf8_lossy().into_owned();
        // An empty variable (`COUCHLINK_COUCHDB_USER=`) names no account.
        let given = |v: &Option<String>| v.clone().filter(|v| !v.is_empty());
        let (mut user, mut password) = (given(&config.user), given(&config.password));
        if !url.username().is_empty() || url.password().is_some() {
            if user.is_none() {
                user = Some(decode(url.username()));
                password = password.or_else(|| url.password().map(decode));
            }
            let _ = url.set_username("");
            let _ = url.set_password(None);
        }
        Ok(CouchClient {
            http: http_client(Some(REQUEST_TIMEOUT))?,
            feed_http: http_client(None)?,
            base: url.as_str().trim_end_matches('/').to_owned(),
            db: config.db.clone(),
            account: Account::new(user, password),
        })
    }

    /// The same server, account and connections, for database `db` (one short domain of
    /// several): one pool of connections and one password for all of them.
    pub fn for_database(&self, db: &str) -> Self {
        CouchClient { db: db.to_owned(), ..self.clone() }
    }

    /// The same server, database and account over connections of its own: for a task that
    /// runs on another runtime (a connection is driven by the runtime that opened it, so
    /// sharing a pool would tie one runtime's requests to the other's load and lifetime).
    pub fn with_own_connections(&self) -> Result<Self, CouchError> {
        Ok(CouchClient { http: http_client(Some(REQUEST_TIMEOUT))?, feed_http: http_client(None)?, ..self.clone() })
    }

    /// The same server and database as another account.
    pub fn with_credentials(&self, user: &str, password: &str) -> Self {
        CouchClient { account: Account::new(Some(user.to_owned()), Some(password.to_owned())), ..self.clone() }
    }

    /// Speaks with `password` from now on, in every clone of this client; a password CouchDB
    /// refused may be tried again.
    pub fn set_password(&self, password: String) {
        *self.account.password.write().expect("password lock") = Some(password);
        self.account.generation.fetch_add(1, Ordering::AcqRel);
        self.account.refused.store(false, Ordering::Release);
        self.account.changed.notify_waiters();
    }

    /// Whether CouchDB refused the password in use.
    pub fn account_refused(&self) -> bool {
        self.account.refused.load(Ordering::Acquire)
    }

    /// Whether `error` is CouchDB refusing this account (401: its password; 403: its rights) for
    /// the first time since it last accepted it: true once, for whoever says so. A 401 counts
    /// only while the password in use is refused (not one answering a password since changed).
    pub fn first_refusal(&self, error: &CouchError) -> bool {
        let refused = match error.status() {
            Some(401) => self.account_refused(),
            Some(403) => true,
            _ => false,
        };
        refused && !self.account.said.swap(true, Ordering::AcqRel)
    }

    /// Completes when the password changes (see [`CouchClient::set_password`]).
    pub async fn password_changed(&self) {
        self.account.changed.notified().await;
    }

    /// The server URL, for messages.
    pub fn server_url(&self) -> &str {
        &self.base
    }

    /// The links database's name.
    pub fn database(&self) -> &str {
        &self.db
    }

    /// The account this client speaks as, for messages.
    pub fn user(&self) -> &str {
        self.account.user.as_deref().unwrap_or("anonymous")
    }

    /// The account's name, as CouchDB knows the writer (`userCtx.name`); `None` when anonymous.
    pub fn account_name(&self) -> Option<&str> {
        self.account.user.as_deref().filter(|u| !u.is_empty())
    }

    // Requests.

    fn request(&self, client: &reqwest::Client, method: Method, url: &str) -> RequestBuilder {
        // pouchdb-server answers text/plain unless JSON is asked for; CouchDB ignores it.
        let req = client.request(method, url).header("Accept", "application/json");
        match &self.account.user {
            Some(user) => req.basic_auth(user, self.account.password.read().expect("password lock").as_deref()),
            None => req,
        }
    }

    /// Sends `req`, unless CouchDB refused the password in use (see [`Account::refused`]).
    async fn send(&self, req: RequestBuilder) -> Result<Response, CouchError> {
        if self.account_refused() {
            let said = self.account.refusal.lock().expect("refusal lock").clone();
            return Err(CouchError::AccountRefused { user: self.user().to_owned(), said });
        }
        self.send_anyway(req).await
    }

    /// Sends `req` even when CouchDB refused the password in use (the feed's retries).
    async fn send_anyway(&self, req: RequestBuilder) -> Result<Response, CouchError> {
        let sent_with = SentWith(self.account.generation.load(Ordering::Acquire));
        let mut response = req
            .send()
            .await
            .map_err(|source| CouchError::Unreachable { url: self.base.clone(), source: source.without_url() })?;
        response.extensions_mut().insert(sent_with);
        if response.status().is_success() && self.is_current(&response) {
            self.account.refused.store(false, Ordering::Release);
            if self.account.said.swap(false, Ordering::AcqRel) {
                tracing::info!("CouchDB accepts the account {} again", self.user());
            }
        }
        Ok(response)
    }

    /// Turns an error status into [`CouchError::Refused`] with CouchDB's own words, noting a
    /// refused password (401).
    async fn refused(&self, response: Response) -> CouchError {
        let status = response.status().as_u16();
        let current = self.is_current(&response);
        let body = response.bytes().await.unwrap_or_default();
        let (error, reason) = match serde_json::from_slice::<ErrorBody>(&body) {
            Ok(e) => (e.error, e.reason),
            Err(_) => ("unknown".into(), String::from_utf8_lossy(&body).chars().take(200).collect()),
        };
        if status == 401 && current {
            *self.account.refusal.lock().expect("refusal lock") = format!("{error}: {reason}");
            self.account.refused.store(true, Ordering::Release);
        }
        CouchError::Refused { status, error, reason }
    }

    /// Whether `response` answers a request sent with the password in use now.
    fn is_current(&self, response: &Response) -> bool {
        let now = self.account.generation.load(Ordering::Acquire);
        response.extensions().get::<SentWith>().is_none_or(|sent| sent.0 == now)
    }

    async fn json<T: DeserializeOwned>(response: Response, url: &str) -> Result<T, CouchError> {
        let body = response.bytes().await.map_err(|source| CouchError::Read { url: url.to_owned(), source })?;
        decode(&body).map_err(|source| CouchError::Decode {
            url: url.to_owned(),
            body: String::from_utf8_lossy(&body).chars().take(200).collect(),
            source,
        })
    }

    /// `GET url` as JSON; `Ok(None)` on 404.
    async fn get_optional<T: DeserializeOwned>(&self, url: &str) -> Result<Option<T>, CouchError> {
        let response = self.send(self.request(&self.http, Method::GET, url)).await?;
        match response.status() {
            StatusCode::NOT_FOUND => Ok(None),
            s if s.is_success() => Self::json(response, url).await.map(Some),
            _ => Err(self.refused(response).await),
        }
    }

    /// `GET url` as JSON; a 404 is an error like any other refusal.
    async fn get<T: DeserializeOwned>(&self, url: &str) -> Result<T, CouchError> {
        let response = self.send(self.request(&self.http, Method::GET, url)).await?;
        if response.status().is_success() {
            Self::json(response, url).await
        } else {
            Err(self.refused(response).await)
        }
    }

    /// `PUT url` with a JSON body; the new revision, if the answer names one.
    async fn put(&self, url: &str, body: &Value) -> Result<String, CouchError> {
        self.put_text(url, body.to_string()).await
    }

    /// [`CouchClient::put`] of a body already written as JSON text.
    async fn put_text(&self, url: &str, body: String) -> Result<String, CouchError> {
        let request = self.request(&self.http, Method::PUT, url).header("Content-Type", "application/json").body(body);
        let response = self.send(request).await?;
        if response.status().is_success() {
            Ok(Self::json::<Revision>(response, url).await.map(|r| r.rev).unwrap_or_default())
        } else {
            Err(self.refused(response).await)
        }
    }

    /// `POST url` with a JSON body, on the feed's client with the bulk timeout; the answer as
    /// JSON, or CouchDB's refusal.
    async fn post_bulk<T: DeserializeOwned>(&self, url: &str, body: &Value) -> Result<T, CouchError> {
        let req = self.request(&self.feed_http, Method::POST, url).timeout(BULK_TIMEOUT).json(body);
        let response = self.send(req).await?;
        if !response.status().is_success() {
            return Err(self.refused(response).await);
        }
        Self::json(response, url).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_server_url_is_refused_with_its_cause() {
        let config = CouchConfig {
            url: "not a url".into(),
            user: None,
            password: None,
            password_file: None,
            db: "links".into(),
        };
        let err = CouchClient::new(&config).err().expect("refused");
        assert!(matches!(err, CouchError::BadUrl { .. }));
        assert!(std::error::Error::source(&err).is_some(), "the parse error is kept");
    }
}
