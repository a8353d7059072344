//! A typed client for the CouchDB HTTP API: every call couchlink makes, each URL built here and
//! nowhere else, with timeouts and CouchDB's JSON errors mapped to [`CouchError`].
//!
//! Written for Apache CouchDB 3's documented API (docs.couchdb.org, "API Reference");
//! pouchdb-server, used for local runs, speaks the same API with the quirks noted inline.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use bytes::{Buf, BytesMut};
use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
use reqwest::{Method, RequestBuilder, Response, StatusCode};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::domain::{LinkDoc, LinkId};

/// How long a single document request may take before CouchDB counts as unreachable.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// How long one `_bulk_docs` or many-key `_all_docs` request may take: CouchDB runs the
/// validation function once per document.
const BULK_TIMEOUT: Duration = Duration::from_secs(300);
/// Idle pooled connections are dropped before Node's 5 s keep-alive timeout closes them
/// under us (pouchdb-server); harmless against CouchDB itself.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(4);

/// What went wrong talking to CouchDB.
#[derive(Debug, thiserror::Error)]
pub enum CouchError {
    /// The configured server URL cannot be used.
    #[error("bad CouchDB URL {url:?}")]
    BadUrl {
        /// The URL as configured.
        url: String,
        /// Why it does not parse.
        #[source]
        source: url::ParseError,
    },
    /// The HTTP client could not be built (TLS backend, say).
    #[error("cannot set up an HTTP client")]
    Client(#[source] reqwest::Error),
    /// No answer: connection refused, timed out, reset.
    #[error("cannot reach CouchDB at {url}")]
    Unreachable {
        /// The server asked.
        url: String,
        /// What the connection did.
        #[source]
        source: reqwest::Error,
    },
    /// CouchDB answered with an error status and its JSON `{"error","reason"}` body.
    #[error("CouchDB refused ({status}): {error}: {reason}")]
    Refused {
        /// The HTTP status.
        status: u16,
        /// CouchDB's `error` word (`not_found`, `forbidden`...).
        error: String,
        /// CouchDB's `reason`, meant for people.
        reason: String,
    },
    /// CouchDB's answer broke off while it was read.
    #[error("CouchDB's answer from {url} broke off")]
    Read {
        /// The resource read.
        url: String,
        /// What the connection did.
        #[source]
        source: reqwest::Error,
    },
    /// CouchDB answered something couchlink cannot read.
    #[error("unexpected answer from CouchDB at {url}: {body}")]
    Decode {
        /// The resource read.
        url: String,
        /// The start of what it said.
        body: String,
        /// Why it does not parse.
        #[source]
        source: serde_json::Error,
    },
    /// A feed sent nothing, not even a heartbeat, for this long.
    #[error("no data or heartbeat for {0:?}")]
    Stalled(Duration),
    /// Not asked: CouchDB refused this account's password, which has not changed since.
    #[error("CouchDB refused the account {user} ({said}); not asked again until its password changes (SIGHUP reads the password file again)")]
    AccountRefused {
        /// The account.
        user: String,
        /// What CouchDB said when it refused it.
        said: String,
    },
}

impl CouchError {
    /// The HTTP status CouchDB answered with, if it answered.
    pub fn status(&self) -> Option<u16> {
        match self {
            CouchError::Refused { status, .. } => Some(*status),
            CouchError::AccountRefused { .. } => Some(401),
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

    /// Whether CouchDB could not be asked at all (as opposed to saying no).
    pub fn is_unreachable(&self) -> bool {
        matches!(self, CouchError::Unreachable { .. } | CouchError::Stalled(_))
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
    /// The file the password was read from, read again on SIGHUP by `serve`.
    pub password_file: Option<std::path::PathBuf>,
    /// The links database.
    pub db: String,
}

/// Reads a secret from `path` (the `..._FILE` form of a secret, as containers and systemd's
/// credentials hand them over), less one trailing newline.
pub fn read_secret_file(path: &std::path::Path) -> Result<String, String> {
    let shown = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read the secret file {shown}: {e}"))?;
    let secret = text.strip_suffix('\n').map(|t| t.strip_suffix('\r').unwrap_or(t)).unwrap_or(&text).to_owned();
    if secret.is_empty() {
        return Err(format!("the secret file {shown} is empty"));
    }
    Ok(secret)
}

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
struct LocalIdentity {
    identity: String,
}

#[derive(Deserialize)]
struct LastSeq {
    last_seq: Value,
}

#[derive(Deserialize)]
struct Revision {
    #[serde(default)]
    rev: String,
}

#[derive(Deserialize)]
struct AllDocs {
    rows: Vec<AllDocsRow>,
}

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

/// `_all_docs` with `include_docs`: each row's ID and document.
#[derive(Deserialize)]
struct AllDocsWithDocs {
    rows: Vec<DocRow>,
}

#[derive(Deserialize)]
struct DocRow {
    id: String,
    #[serde(default)]
    doc: Option<Value>,
}

/// A row of `_all_docs` with `keys`: `value` is present for documents that exist or existed
/// (`{"rev":..., "deleted": true}`), absent (with `error: not_found`) for IDs never used.
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

#[derive(Deserialize)]
struct AllDocsRow {
    #[serde(default)]
    value: Option<Value>,
}

/// Percent-encodes one path segment (a database name may hold `/`, `+`, `$`...).
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

fn segment(s: &str) -> String {
    utf8_percent_encode(s, PATH_SEGMENT).to_string()
}

/// What a path segment must have percent-encoded (RFC 3986, 3.3: a segment is unreserved
/// characters, sub-delims, `:` and `@` as they are), and `+`: CouchDB decodes a `+` in a path
/// as a space (seen on 3.5: `PUT /a+b` is refused as the name "a b"). So `links_history`,
/// `acme-links`, `p(1)$` go as they are, `/` and `+` as `%2F` and `%2B`.
const PATH_SEGMENT: &percent_encoding::AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~')
    .remove(b'!')
    .remove(b'$')
    .remove(b'&')
    .remove(b'\'')
    .remove(b'(')
    .remove(b')')
    .remove(b'*')
    .remove(b',')
    .remove(b';')
    .remove(b'=')
    .remove(b':')
    .remove(b'@');

/// `url` with any password it holds replaced by `***`, for messages; also for text that does
/// not parse as a URL (the userinfo is whatever stands between `://` and the authority's last
/// `@`).
///
/// ```
/// use couchlink::couch::redact_userinfo;
/// assert_eq!(redact_userinfo("http://me:secret@db:5984/"), "http://me:***@db:5984/");
/// assert_eq!(redact_userinfo("http://me:sec ret@db:5984/"), "http://me:***@db:5984/");
/// assert_eq!(redact_userinfo("http://db:5984/"), "http://db:5984/");
/// ```
pub fn redact_userinfo(url: &str) -> String {
    let Some(start) = url.find("://").map(|i| i + 3) else { return url.to_owned() };
    let authority_end = url[start..].find(['/', '?', '#']).map_or(url.len(), |i| start + i);
    let Some(at) = url[start..authority_end].rfind('@').map(|i| start + i) else { return url.to_owned() };
    let user = url[start..at].split(':').next().unwrap_or_default();
    let hidden = if url[start..at].contains(':') { ":***" } else { "" };
    format!("{}{user}{hidden}{}", &url[..start], &url[at..])
}

/// The `_users` document ID of an account.
fn user_doc_id(name: &str) -> String {
    format!("org.couchdb.user:{name}")
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

    // URLs: the only place they are built.

    fn server(&self, path: &str) -> String {
        format!("{}/{path}", self.base)
    }

    fn in_db(&self, path: &str) -> String {
        if path.is_empty() {
            format!("{}/{}", self.base, segment(&self.db))
        } else {
            format!("{}/{}/{path}", self.base, segment(&self.db))
        }
    }

    fn doc_url(&self, id: &str) -> String {
        self.in_db(&segment(id))
    }

    fn design_doc_url(&self, name: &str) -> String {
        self.in_db(&format!("_design/{}", segment(name)))
    }

    fn user_url(&self, name: &str) -> String {
        self.server(&format!("_users/{}", segment(&user_doc_id(name))))
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

    // Server.

    /// The server's welcome (`GET /`): whether it answers at all.
    pub async fn ping(&self) -> Result<(), CouchError> {
        self.get::<Value>(&self.server("")).await.map(drop)
    }

    /// Who CouchDB takes this client's credentials for (docs.couchdb.org, `GET /_session`).
    pub async fn session(&self) -> Result<Session, CouchError> {
        Ok(self.get::<SessionBody>(&self.server("_session")).await?.user_ctx)
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
        if self.get_optional::<Value>(&url).await?.is_some() {
            return Ok(false);
        }
        match self.put(&url, &json!({})).await {
            Ok(_) => Ok(true),
            // Created by someone else meanwhile.
            Err(CouchError::Refused { status: 412, .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The `_users` document of account `name`, if there is one (admin only).
    pub async fn user_doc(&self, name: &str) -> Result<Option<Value>, CouchError> {
        self.get_optional(&self.user_url(name)).await
    }

    /// Creates or replaces (with `rev`) the account `name` with exactly `roles`.
    pub async fn put_user(
        &self,
        name: &str,
        password: &str,
        roles: &[&str],
        rev: Option<&Value>,
    ) -> Result<(), CouchError> {
        let mut doc =
            json!({"_id": user_doc_id(name), "name": name, "type": "user", "roles": roles, "password": password});
        if let Some(rev) = rev {
            doc["_rev"] = rev.clone();
        }
        self.put(&self.user_url(name), &doc).await.map(drop)
    }

    // The links database.

    /// The links database's information; `Ok(None)` when it does not exist.
    pub async fn database_info(&self) -> Result<Option<Value>, CouchError> {
        self.get_optional(&self.in_db("")).await
    }

    /// The database's `_security` object.
    pub async fn security(&self) -> Result<Value, CouchError> {
        self.get(&self.in_db("_security")).await
    }

    /// Replaces the database's `_security` object.
    pub async fn put_security(&self, security: &Value) -> Result<(), CouchError> {
        self.put(&self.in_db("_security"), security).await.map(drop)
    }

    /// Design document `_design/{name}`, if it exists.
    pub async fn design_doc(&self, name: &str) -> Result<Option<Value>, CouchError> {
        self.get_optional(&self.design_doc_url(name)).await
    }

    /// Creates or replaces design document `_design/{name}` (`doc` carries `_rev` to replace).
    pub async fn put_design_doc(&self, name: &str, doc: &Value) -> Result<(), CouchError> {
        self.put(&self.design_doc_url(name), doc).await.map(drop)
    }

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

    /// `_all_docs` over the IDs that start with `prefix`: the query's range.
    fn prefix_range(prefix: &str) -> String {
        let key = |k: String| utf8_percent_encode(&Value::String(k).to_string(), NON_ALPHANUMERIC).to_string();
        format!("startkey={}&endkey={}", key(prefix.to_owned()), key(format!("{prefix}\u{fff0}")))
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
        let made = info?
            .and_then(|info| info["instance_start_time"].as_str().map(str::to_owned))
            .filter(|t| !t.is_empty() && t != "0");
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

/// How deep CouchDB's answers may nest. serde_json stops at 128 levels, and a document nested
/// deeper (the links' validation function refuses it from editors, but an admin or a
/// replication may write one) would stop the feed and the history at it; past this the
/// answer is refused as undecodable.
pub const MAX_DEPTH: usize = 512;

/// JSON as CouchDB answers it, nested up to [`MAX_DEPTH`] levels.
fn decode<T: DeserializeOwned>(bytes: &[u8]) -> serde_json::Result<T> {
    match serde_json::from_slice(bytes) {
        Err(e) if e.to_string().starts_with("recursion limit exceeded") && depth(bytes) <= MAX_DEPTH => {
            let mut deserializer = serde_json::Deserializer::from_slice(bytes);
            deserializer.disable_recursion_limit();
            let value = T::deserialize(&mut deserializer)?;
            deserializer.end()?;
            Ok(value)
        }
        decoded => decoded,
    }
}

/// The deepest nesting of arrays and objects in JSON text (brackets within strings not counted).
fn depth(bytes: &[u8]) -> usize {
    let (mut level, mut deepest, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for &b in bytes {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                level += 1;
                deepest = deepest.max(level);
            }
            b']' | b'}' => level = level.saturating_sub(1),
            _ => {}
        }
    }
    deepest
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

/// The URL of `segments` on the CouchDB server at `server`, for a client that holds the server
/// as a parsed URL (the console's passage): each segment encoded as [`CouchClient`] encodes its
/// own (`+` too), under the path the server's URL has of its own, as `CouchClient` keeps it. A
/// CouchDB behind a proxy at `http://host/db/` is asked `http://host/db/_session`, never
/// `http://host/_session`; the server's query and fragment are not kept.
///
/// ```
/// let at = |server: &str, segments: &[&str]| {
///     couchlink::couch::server_path_url(&reqwest::Url::parse(server).unwrap(), segments).to_string()
/// };
/// assert_eq!(at("http://127.0.0.1:5984/", &["_session"]), "http://127.0.0.1:5984/_session");
/// assert_eq!(at("http://127.0.0.1:8080/db/", &["links", "H83if"]), "http://127.0.0.1:8080/db/links/H83if");
/// assert_eq!(at("http://127.0.0.1:8080/db", &["a+b/c"]), "http://127.0.0.1:8080/db/a%2Bb%2Fc");
/// ```
pub fn server_path_url(server: &reqwest::Url, segments: &[&str]) -> reqwest::Url {
    let mut path = server.path().trim_end_matches('/').to_owned();
    for s in segments {
        path.push('/');
        path.push_str(&segment(s));
    }
    let mut url = server.clone();
    url.set_path(&path);
    url.set_query(None);
    url.set_fragment(None);
    url
}

#[cfg(test)]
mod tests {
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

    #[test]
    fn urls_encode_each_segment_once() {
        let config = CouchConfig {
            url: "http://127.0.0.1:5984/".into(),
            user: None,
            password: None,
            password_file: None,
            db: "links/test+1".into(),
        };
        let client = CouchClient::new(&config).unwrap();
        assert_eq!(client.in_db("_security"), "http://127.0.0.1:5984/links%2Ftest%2B1/_security");
        assert_eq!(client.design_doc_url("couchlink"), "http://127.0.0.1:5984/links%2Ftest%2B1/_design/couchlink");
        assert_eq!(client.user_url("maria"), "http://127.0.0.1:5984/_users/org.couchdb.user:maria");
        // Only what RFC 3986 asks to be escaped in a segment, and `+` (CouchDB reads it as a space).
        let named = |db: &str| CouchClient::new(&CouchConfig { db: db.into(), ..config.clone() }).unwrap().in_db("x");
        assert_eq!(named("links_history"), "http://127.0.0.1:5984/links_history/x");
        assert_eq!(named("acme-links$(1)"), "http://127.0.0.1:5984/acme-links$(1)/x");
        assert_eq!(named("a+b/c"), "http://127.0.0.1:5984/a%2Bb%2Fc/x");
        assert_eq!(
            client.doc_url("H83if/0000000001-~ab"),
            "http://127.0.0.1:5984/links%2Ftest%2B1/H83if%2F0000000001-~ab"
        );
    }

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
