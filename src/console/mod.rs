//! `couchlink console`: a page for the people who print the tags, and the CouchDB requests it
//! makes passed through under the same origin (so CouchDB's session cookie works without CORS).
//! One more CouchDB client, like Fauxton: no API, no account and no authority of its own,
//! nothing cached or stored; never on the redirect path (docs/console.md).
//!
//! Every request to CouchDB carries the visitor's own credentials (CouchDB's session cookie or
//! their `Authorization`) and nothing else: a visitor with neither is anonymous to CouchDB. What
//! the console makes itself (QR tags, print sheets, its list of databases) it makes only for a
//! visitor CouchDB lets read that database, asked with the same credentials.
//!
//! [`route`] decides what a request is (policy, no bytes); [`Console`] answers it; [`sheet`]
//! reads the page's request for a print sheet.

pub mod logins;
pub mod route;
pub mod sheet;

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{HeaderName, HeaderValue};
use hyper::http::request::Parts;
use hyper::{Request, Response, StatusCode};
use serde_json::json;
use tokio::sync::Semaphore;

use crate::client_ip::TrustedProxies;
use crate::couch;
use crate::http::accept::Service;
use crate::qr::render::{self, Look};
use logins::{Admit, Hashes, Logins};
pub use route::{ConsoleSite, Route, Source};

/// The largest request body passed to CouchDB (a link document is a few KB).
const MAX_BODY: usize = 1 << 20;

/// How long CouchDB may take to answer a passed request.
const COUCH_TIMEOUT: Duration = Duration::from_secs(30);

/// Print sheets made at once, in all (each takes a core for up to a second or two): a third is
/// told to come back ([`SHEET_RETRY_SECS`]), as is a visitor whose previous sheet is not done.
pub const SHEETS_AT_ONCE: usize = 2;
/// Link passwords hashed at once (each an Argon2id hash of 19 MiB, tens of milliseconds).
const HASHES_AT_ONCE: usize = 2;

/// The `Retry-After` of a sheet refused because others are being made.
const SHEET_RETRY_SECS: u32 = 2;

/// The page's own rules for the browser: its scripts and styles from itself only (no inline
/// script), never framed, tags drawn from itself (`img-src 'self' data:` for the PNG preview).
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; form-action 'none'; base-uri 'none'; frame-ancestors 'none'";

/// What the console serves.
pub struct Console {
    /// The links databases offered (several domains: each of them).
    pub sites: Vec<ConsoleSite>,
    /// CouchDB's base URL, without credentials.
    pub couchdb: url::Url,
    /// Behind the operator's TLS proxy: CouchDB's session cookie gains `Secure`.
    pub secure_cookies: bool,
    /// The proxies' live counts interval (`COUCHLINK_CLICKS_INTERVAL_SECS`): an open page asks
    /// for new counts once each, just after the proxies write them.
    pub clicks_interval_secs: u32,
    /// The operator's proxies in front of the console, whose forwarding header names the
    /// visitor's address (failed logins are counted per address).
    pub trusted_proxies: TrustedProxies,
    http: reqwest::Client,
    /// Logins passed on, kept below CouchDB's lockout.
    logins: Logins,
    /// Link passwords hashed per account.
    hashes_made: Hashes,
    /// `Authorization` credentials being tried, by their logins digest.
    trying: Mutex<HashMap<[u8; 16], Try>>,
    /// Print sheets being made, in all.
    sheets: Arc<Semaphore>,
    /// Places among [`HASHES_AT_ONCE`].
    hashes: Arc<Semaphore>,
    /// The accounts whose print sheet is being made (one at a time each).
    sheet_makers: Arc<Mutex<HashSet<String>>>,
}

/// Why a console cannot be made.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConsoleError {
    /// CouchDB's URL holds an account: the console would lend it to every visitor.
    #[error(
        "the CouchDB URL holds an account ({0}): the console holds none, each visitor logs in with their own \
         (an account in the URL would be lent to anyone who reaches the console); give the URL without it"
    )]
    AccountInUrl(String),
}

/// Connections the console takes at once, and how long a request head may take.
const CONNECTIONS: usize = 256;
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long open connections have at a stop (a sheet being made, say).
const DRAIN: Duration = Duration::from_secs(5);

/// Serves `console` on `listener` until `shutdown` completes, or until the process a SIGUSR2
/// starts serves in its place ([`crate::lifecycle::OneListener`]).
pub async fn serve(
    console: Console,
    listener: crate::lifecycle::OneListener,
    shutdown: impl std::future::Future<Output = ()>,
) -> std::io::Result<()> {
    let bound = listener.local_addr()?;
    println!("couchlink console on http://{bound}/ (CouchDB {}){}", console.couchdb, listener.origin());
    let limits = crate::http::accept::Limits::new(CONNECTIONS, HEADER_TIMEOUT);
    listener.serve(Arc::new(console), limits, DRAIN, shutdown).await
}

impl Console {
    /// A console for `sites` of the CouchDB at `couchdb`, which must hold no account.
    pub fn new(sites: Vec<ConsoleSite>, couchdb: url::Url, secure_cookies: bool) -> Result<Console, ConsoleError> {
        if !couchdb.username().is_empty() || couchdb.password().is_some() {
            let mut shown = couchdb.clone();
            let _ = shown.set_password(None);
            let _ = shown.set_username("");
            let user = percent_encoding::percent_decode_str(couchdb.username()).decode_utf8_lossy().into_owned();
            return Err(ConsoleError::AccountInUrl(format!("user {user:?} in {shown}")));
        }
        let http = reqwest::Client::builder()
            .timeout(COUCH_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("a plain HTTP client builds");
        Ok(Console {
            sites,
            couchdb,
            secure_cookies,
            clicks_interval_secs: crate::clicks::writer::DEFAULT_INTERVAL_SECS,
            trusted_proxies: TrustedProxies::default(),
            http,
            logins: Logins::new(Vec::new()),
            hashes_made: Hashes::default(),
            trying: Mutex::default(),
            sheets: Arc::new(Semaphore::new(SHEETS_AT_ONCE)),
            hashes: Arc::new(Semaphore::new(HASHES_AT_ONCE)),
            sheet_makers: Arc::default(),
        })
    }

    /// The console with logins as the accounts `proxies` (the proxies' own) refused.
    pub fn refusing_logins_as(mut self, proxies: Vec<String>) -> Console {
        self.logins = Logins::new(proxies);
        self
    }

    async fn answer(&self, parts: Parts, body: Bytes, peer: SocketAddr) -> Response<Full<Bytes>> {
        let target = parts.uri.path_and_query().map_or("/", |p| p.as_str());
        let route = match route::route(parts.method.as_str(), target, source(&parts), &self.sites) {
            Ok(route) => route,
            Err(refusal) => return json_error(refusal.status, "forbidden", &refusal.reason),
        };
        if let Route::Asset(name) = route {
            let (_, content_type, bytes) =
                route::ASSETS.iter().find(|(n, _, _)| *n == name).expect("routes name known assets");
            return respond(200, content_type, Bytes::from_static(bytes));
        }
        let header = self.trusted_proxies.header();
        let visitor =
            self.trusted_proxies.client_ip(peer.ip(), parts.headers.get_all(header).iter().map(HeaderValue::as_bytes));
        // A password in `Authorization` is tried once, alone, before the request it comes with
        // (which may ask CouchDB several things), so that each request is at most one failure;
        // CouchDB gets it as the console read it.
        let mut parts = parts;
        match credential(&parts) {
            Err(refused) => return refused,
            Ok(Some(Credential::Basic(name, password))) => {
                use base64::Engine as _;
                let encoded = base64::engine::general_purpose::STANDARD.encode(format!("{name}:{password}"));
                let value = HeaderValue::from_str(&format!("Basic {encoded}")).expect("base64 is a header value");
                parts.headers.insert(hyper::header::AUTHORIZATION, value);
                if let Err(refused) = self.try_basic(&parts, &(name, password), visitor).await {
                    return refused;
                }
            }
            Ok(Some(Credential::Bearer) | None) => {}
        }
        // A login is read and counted here, and passed on as read.
        if matches!(&route, Route::Couch { path, .. } if path == "/_session") && parts.method == hyper::Method::POST {
            return self.log_in(parts, body, visitor).await;
        }
        match route {
            Route::Asset(_) => unreachable!("answered above"),
            Route::Sites => {
                // Only the databases this visitor may read; none: CouchDB's refusal (401 for a
                // visitor not logged in).
                let mut sites = Vec::new();
                let mut refusal = None;
                for s in &self.sites {
                    match self.may_read(&parts, &s.db).await {
                        Ok(()) => sites.push(json!({"db": s.db, "public_url": s.public_url.as_str(),
                            "clicks_db": s.clicks_db, "history_db": s.history_db, "editor_role": s.editor_role,
                            "clicks_interval_secs": self.clicks_interval_secs})),
                        Err(refused) => refusal = refusal.or(Some(refused)),
                    }
                }
                match refusal {
                    Some(refused) if sites.is_empty() => refused,
                    _ => respond(200, "application/json", Bytes::from(json!({ "sites": sites }).to_string())),
                }
            }
            Route::Qr { site, id, png, colours } => {
                if let Err(refused) = self.may_read(&parts, &self.sites[site].db).await {
                    return refused;
                }
                let text = crate::qr::tag_text(&self.sites[site].public_url, &id);
                let look = Look { scale: 8, border: 4, colours };
                match crate::qr::encode(&text, None) {
                    Ok(tag) if png => respond(200, "image/png", render::png(&tag.code, look).into()),
                    Ok(tag) => respond(200, "image/svg+xml", render::svg(&tag.code, look, None).into()),
                    Err(e) => json_error(400, "bad_request", &e.to_string()),
                }
            }
            Route::Sheet { site } => {
                let who = match self.visitor_name(&parts).await {
                    Ok(who) => who,
                    Err(refused) => return refused,
                };
                if let Err(refused) = self.may_read(&parts, &self.sites[site].db).await {
                    return refused;
                }
                let Some(turn) = self.sheet_turn(&who) else {
                    let mut busy = json_error(
                        429,
                        "too_many_requests",
                        "other print sheets are being made (at most one per account, a few in all): try again shortly",
                    );
                    busy.headers_mut().insert("retry-after", HeaderValue::from(SHEET_RETRY_SECS));
                    return busy;
                };
                let public_url = self.sites[site].public_url.clone();
                let made = tokio::task::spawn_blocking(move || {
                    let _turn = turn;
                    sheet::make(&public_url, &body)
                })
                .await;
                match made {
                    Ok(Ok(pdf)) => {
                        let mut response = respond(200, "application/pdf", pdf.into());
                        response.headers_mut().insert(
                            hyper::header::CONTENT_DISPOSITION,
                            HeaderValue::from_static("attachment; filename=\"couchlink-sheet.pdf\""),
                        );
                        response
                    }
                    Ok(Err(reason)) => json_error(400, "bad_request", &reason),
                    Err(_) => json_error(500, "internal", "the sheet could not be made"),
                }
            }
            Route::PasswordHash => {
                // Only for someone CouchDB knows: the hash is work the console does for them.
                let who = match self.visitor_name(&parts).await {
                    Ok(who) => who,
                    Err(refused) => return refused,
                };
                if let Err(wait) = self.hashes_made.take(&who, Instant::now()) {
                    return too_many(wait, "this account has hashed many passwords lately: try again shortly");
                }
                let Ok(turn) = self.hashes.clone().try_acquire_owned() else {
                    let mut busy = json_error(429, "too_many_requests", "other passwords are being hashed: try again");
                    busy.headers_mut().insert("retry-after", HeaderValue::from(1));
                    return busy;
                };
                let Some(password) = serde_json::from_slice::<serde_json::Value>(&body)
                    .ok()
                    .and_then(|v| v.get("password").and_then(|p| p.as_str()).map(str::to_owned))
                else {
                    return json_error(400, "bad_request", "send {\"password\": \"...\"}");
                };
                let made = tokio::task::spawn_blocking(move || {
                    let _turn = turn;
                    crate::domain::PasswordHash::create(password.as_bytes())
                })
                .await;
                match made {
                    Ok(Ok(hash)) => {
                        respond(200, "application/json", Bytes::from(json!({"password": hash.as_str()}).to_string()))
                    }
                    Ok(Err(bad)) => json_error(400, "bad_request", &bad.to_string()),
                    Err(_) => json_error(500, "internal", "the password could not be hashed"),
                }
            }
            Route::Couch { path, body: rule } => {
                if let Err(refusal) = rule.check(&body) {
                    return json_error(refusal.status, "bad_request", &refusal.reason);
                }
                self.pass(parts, path, body).await
            }
        }
    }

    /// Tries the name and password in `Authorization` (CouchDB's `_session`, as the visitor),
    /// within the logins' bounds; `Err`: the answer to give instead of the request's. Requests
    /// with the same credential at once (a browser's, a script's) wait for one try.
    async fn try_basic(
        &self,
        parts: &Parts,
        login: &(String, String),
        visitor: std::net::IpAddr,
    ) -> Result<(), Response<Full<Bytes>>> {
        let key = self.logins.digest(&login.0, &login.1);
        let running = self.trying.lock().expect("logins tried").entry(key).or_default().clone();
        let tried = running.get_or_init(|| self.try_basic_once(parts, login, visitor)).await.clone();
        self.trying.lock().expect("logins tried").remove(&key);
        match tried {
            None => Ok(()),
            Some((status, retry_after, body)) => {
                let mut refused = respond(200, "application/json", body);
                *refused.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::UNAUTHORIZED);
                if let Some(wait) = retry_after {
                    refused.headers_mut().insert("retry-after", HeaderValue::from(wait));
                }
                Err(refused)
            }
        }
    }

    /// One try of [`Console::try_basic`]: `None` if CouchDB took it, else the refusal's status,
    /// `Retry-After` and body.
    async fn try_basic_once(
        &self,
        parts: &Parts,
        (name, password): &(String, String),
        visitor: std::net::IpAddr,
    ) -> Option<Kept> {
        let attempt = match self.logins.admit(name, password, visitor, Instant::now()) {
            Admit::Pass(attempt) => attempt,
            Admit::Refused => return kept(proxies_account(name)).await,
            Admit::Wait(wait) => return kept(logins_wait(wait)).await,
        };
        let url = couch::server_path_url(&self.couchdb, &["_session"]);
        let answer = self.as_visitor(hyper::Method::GET, url, parts).send().await;
        let (status, body) = match answer {
            Ok(answer) => {
                let status = answer.status().as_u16();
                (status, answer.bytes().await.unwrap_or_default())
            }
            // CouchDB may have counted it: the attempt, dropped, is a failure.
            Err(e) => return kept(unreachable(e)).await,
        };
        let named = serde_json::from_slice::<serde_json::Value>(&body)
            .ok()
            .is_some_and(|v| v["userCtx"]["name"].as_str() == Some(name.as_str()));
        let worked = status == 200 && named;
        attempt.settle(worked, Instant::now());
        if worked {
            return None;
        }
        let status = if matches!(status, 401 | 403) || status >= 500 { status } else { 401 };
        Some((status, None, body))
    }

    /// `POST /_session`: the login is read here and passed on as read (one name, one password),
    /// within the logins' bounds.
    async fn log_in(&self, parts: Parts, body: Bytes, visitor: std::net::IpAddr) -> Response<Full<Bytes>> {
        let (name, password) = match session_login(&parts, &body) {
            Ok(login) => login,
            Err(refused) => return refused,
        };
        let attempt = match self.logins.admit(&name, &password, visitor, Instant::now()) {
            Admit::Pass(attempt) => attempt,
            Admit::Refused => return proxies_account(&name),
            Admit::Wait(wait) => return logins_wait(wait),
        };
        let mut parts = parts;
        parts.headers.insert(hyper::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let login = Bytes::from(json!({"name": name, "password": password}).to_string());
        let response = self.pass(parts, "/_session".into(), login).await;
        attempt.settle(response.status() == StatusCode::OK, Instant::now());
        response
    }

    /// A request to CouchDB as the visitor: their `Authorization` and CouchDB's session
    /// cookie, of all they sent, and no credential of the console's (it has none).
    fn as_visitor(&self, method: hyper::Method, url: url::Url, parts: &Parts) -> reqwest::RequestBuilder {
        let mut request = self.http.request(method, url);
        if let Some(value) = parts.headers.get("authorization") {
            request = request.header("authorization", value);
        }
        // Of the browser's cookies, only CouchDB's session goes to CouchDB.
        let session: Vec<&str> = parts
            .headers
            .get_all("cookie")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .map(str::trim)
            .filter(|c| c.starts_with("AuthSession="))
            .collect();
        if !session.is_empty() {
            request = request.header("cookie", session.join("; "));
        }
        request
    }

    /// Whether CouchDB lets this visitor read database `db` (its info, as the visitor); else
    /// the answer to give them: CouchDB's refusal, or 502 when CouchDB did not answer.
    async fn may_read(&self, parts: &Parts, db: &str) -> Result<(), Response<Full<Bytes>>> {
        let url = couch::server_path_url(&self.couchdb, &[db]);
        let answer = self.as_visitor(hyper::Method::GET, url, parts).send().await.map_err(unreachable)?;
        match answer.status().as_u16() {
            200 => Ok(()),
            status => {
                let body: serde_json::Value = answer.json().await.unwrap_or_default();
                let text = |field: &str| body[field].as_str().map(str::to_owned);
                let reason = text("reason").unwrap_or_else(|| format!("CouchDB answered {status}"));
                // Anything but a refusal is CouchDB failing, not the visitor.
                let status = if matches!(status, 401 | 403 | 404) { status } else { 502 };
                Err(json_error(status, &text("error").unwrap_or_else(|| "forbidden".into()), &reason))
            }
        }
    }

    /// The account this visitor is logged in as (CouchDB's `_session`, as them), or 401.
    async fn visitor_name(&self, parts: &Parts) -> Result<String, Response<Full<Bytes>>> {
        let url = couch::server_path_url(&self.couchdb, &["_session"]);
        let answer = self.as_visitor(hyper::Method::GET, url, parts).send().await.map_err(unreachable)?;
        let body: serde_json::Value = answer.json().await.unwrap_or_default();
        match body["userCtx"]["name"].as_str() {
            Some(name) => Ok(name.to_owned()),
            None => Err(json_error(
                401,
                "unauthorized",
                "log in first: print sheets and password hashes are made for CouchDB accounts",
            )),
        }
    }

    /// A turn to make a print sheet for account `who`: `None` while theirs or
    /// [`SHEETS_AT_ONCE`] others are being made.
    fn sheet_turn(&self, who: &str) -> Option<SheetTurn> {
        let permit = self.sheets.clone().try_acquire_owned().ok()?;
        if !self.sheet_makers.lock().expect("sheet makers' lock").insert(who.to_owned()) {
            return None;
        }
        Some(SheetTurn { makers: self.sheet_makers.clone(), who: who.to_owned(), _permit: permit })
    }

    /// Passes the request to CouchDB with the visitor's credentials and nothing else of its
    /// own, and CouchDB's answer back. `path` is CouchDB's, from `/`, as `route::route`
    /// checked it (no escapes), under CouchDB's own base path like every URL of the passage.
    async fn pass(&self, parts: Parts, path: String, body: Bytes) -> Response<Full<Bytes>> {
        let segments: Vec<&str> = path.strip_prefix('/').unwrap_or(&path).split('/').collect();
        let mut url = couch::server_path_url(&self.couchdb, &segments);
        url.set_query(parts.uri.query());
        let mut request = self.as_visitor(parts.method.clone(), url, &parts);
        for name in ["content-type", "accept", "if-match"] {
            if let Some(value) = parts.headers.get(name) {
                request = request.header(name, value);
            }
        }
        let answer = match request.body(body).send().await {
            Ok(answer) => answer,
            Err(e) => return unreachable(e),
        };
        let status = answer.status().as_u16();
        let mut kept = Vec::new();
        for name in ["content-type", "etag", "set-cookie"] {
            for value in answer.headers().get_all(name) {
                kept.push((name, value.clone()));
            }
        }
        let bytes = match answer.bytes().await {
            Ok(bytes) => bytes,
            Err(e) => {
                return json_error(
                    502,
                    "couchdb_unreachable",
                    &format!("CouchDB's answer was cut: {}", crate::errors::Causes(&e)),
                )
            }
        };
        let mut response = Response::new(Full::new(bytes));
        *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
        for (name, value) in kept {
            let value = match name {
                "set-cookie" => for_browsers(&value, self.secure_cookies),
                _ => value,
            };
            response.headers_mut().append(HeaderName::from_static(name), value);
        }
        guard(&mut response);
        response
    }
}

/// A print sheet being made: its account's turn and a place among [`SHEETS_AT_ONCE`], both
/// given back when the sheet is made (held by the making itself, so that a visitor who goes
/// away frees nothing early).
struct SheetTurn {
    makers: Arc<Mutex<HashSet<String>>>,
    who: String,
    _permit: tokio::sync::OwnedSemaphorePermit,
}

impl Drop for SheetTurn {
    fn drop(&mut self) {
        self.makers.lock().expect("sheet makers' lock").remove(&self.who);
    }
}

/// A refusal as [`Console::try_basic_once`] keeps it for every request waiting on the try:
/// status, `Retry-After`, body.
type Kept = (u16, Option<u32>, Bytes);

/// A try of a credential: `None` once CouchDB took it, else its refusal kept.
type Try = Arc<tokio::sync::OnceCell<Option<Kept>>>;

/// A refusal made here, kept.
async fn kept(response: Response<Full<Bytes>>) -> Option<Kept> {
    let status = response.status().as_u16();
    let retry = response.headers().get("retry-after").and_then(|v| v.to_str().ok()?.parse().ok());
    let body = response.into_body().collect().await.map(|c| c.to_bytes()).unwrap_or_default();
    Some((status, retry, body))
}

/// The answer when CouchDB could not be asked.
fn unreachable(e: reqwest::Error) -> Response<Full<Bytes>> {
    json_error(502, "couchdb_unreachable", &format!("CouchDB did not answer: {}", crate::errors::Causes(&e)))
}

impl Service for Console {
    async fn call(&self, request: Parts, peer: SocketAddr) -> Response<Full<Bytes>> {
        self.answer(request, Bytes::new(), peer).await
    }

    async fn call_with_body(&self, request: Request<hyper::body::Incoming>, peer: SocketAddr) -> Response<Full<Bytes>> {
        let (parts, body) = request.into_parts();
        match Limited::new(body, MAX_BODY).collect().await {
            Ok(collected) => self.answer(parts, collected.to_bytes(), peer).await,
            Err(_) => json_error(413, "too_large", "a request through the console is at most 1 MiB"),
        }
    }
}

/// Where the browser says the request comes from. `Origin` equal to `http(s)://` and the `Host`
/// asked (or `X-Forwarded-Host`) is the console's own page; any other `Origin` is another
/// site's. Without `Origin` (browsers leave it out of a same-origin `GET`), `Sec-Fetch-Site`,
/// which browsers send with every request, tells another site's page (`cross-site`,
/// `same-site`) from the console's own and from the user's own navigation.
fn source(parts: &Parts) -> Source {
    let header = |name: &str| parts.headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(origin) = parts.headers.get("origin") {
        let own = origin.to_str().is_ok_and(|origin| {
            [header("host"), header("x-forwarded-host")]
                .into_iter()
                .flatten()
                .any(|h| origin == format!("http://{h}") || origin == format!("https://{h}"))
        });
        return if own { Source::OwnPage } else { Source::Elsewhere };
    }
    match header("sec-fetch-site") {
        Some("cross-site" | "same-site") => Source::Elsewhere,
        _ => Source::Unsaid,
    }
}

/// CouchDB's `Set-Cookie` as the browser gets it: `SameSite=Lax` unless CouchDB set a
/// `SameSite` of its own (`[chttpd_auth] same_site`), so another site's page cannot make a
/// request with the visitor's session, and `Secure` behind TLS.
fn for_browsers(value: &HeaderValue, secure: bool) -> HeaderValue {
    let Ok(v) = value.to_str() else { return value.clone() };
    let attributes: Vec<String> = v.split(';').skip(1).map(|a| a.trim().to_ascii_lowercase()).collect();
    let mut out = v.to_owned();
    if !attributes.iter().any(|a| a.starts_with("samesite")) {
        out.push_str("; SameSite=Lax");
    }
    if secure && !attributes.iter().any(|a| a == "secure") {
        out.push_str("; Secure");
    }
    HeaderValue::from_str(&out).unwrap_or_else(|_| value.clone())
}

/// What a visitor's `Authorization` holds.
#[derive(Debug, PartialEq, Eq)]
enum Credential {
    /// `Basic`: a name and password (split at the first `:`, as CouchDB does).
    Basic(String, String),
    /// `Bearer`: a token, passed on as sent (CouchDB's JWT handler; no lockout counts tokens).
    Bearer,
}

/// The visitor's credential, read strictly: a `Basic` one the console could not read as CouchDB
/// would (whitespace inside the base64, no `:`, not UTF-8) is refused, never passed on, since
/// CouchDB might read a login in it the console did not count; one it reads is passed on
/// re-encoded from what it read. Any other scheme is refused.
#[allow(clippy::result_large_err)]
fn credential(parts: &Parts) -> Result<Option<Credential>, Response<Full<Bytes>>> {
    use base64::Engine as _;
    let refuse = |why: &str| json_error(400, "bad_request", why);
    let mut values = parts.headers.get_all(hyper::header::AUTHORIZATION).iter();
    let Some(value) = values.next() else { return Ok(None) };
    if values.next().is_some() {
        return Err(refuse("one Authorization header at most"));
    }
    let value = value.to_str().map_err(|_| refuse("Authorization is not plain text"))?.trim();
    let (scheme, rest) = value.split_once(' ').unwrap_or((value, ""));
    if scheme.eq_ignore_ascii_case("bearer") {
        return Ok(Some(Credential::Bearer));
    }
    if !scheme.eq_ignore_ascii_case("basic") {
        return Err(refuse("Authorization is Basic (a CouchDB name and password) or Bearer"));
    }
    let malformed = || refuse("Authorization: Basic holds the base64 of name:password, in one piece");
    let encoded = rest.trim();
    if encoded.is_empty() || encoded.bytes().any(|b| !(b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='))) {
        return Err(malformed());
    }
    let decoded = base64::engine::general_purpose::STANDARD.decode(encoded).map_err(|_| malformed())?;
    let text = String::from_utf8(decoded).map_err(|_| malformed())?;
    let (name, password) = text.split_once(':').ok_or_else(malformed)?;
    Ok(Some(Credential::Basic(name.to_owned(), password.to_owned())))
}

/// The name and password of a `POST /_session`, as JSON or a form (what CouchDB reads);
/// anything else, a compressed body included, is refused, since CouchDB might read a login in
/// it that the console did not count.
#[allow(clippy::result_large_err)]
fn session_login(parts: &Parts, body: &[u8]) -> Result<(String, String), Response<Full<Bytes>>> {
    let refuse = |why: &str| json_error(400, "bad_request", why);
    if parts.headers.get(hyper::header::CONTENT_ENCODING).is_some_and(|e| e.as_bytes() != b"identity") {
        return Err(json_error(415, "bad_content_type", "a login through the console is sent uncompressed"));
    }
    let content_type = parts.headers.get(hyper::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    let content_type = content_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    let (name, password) = match content_type.as_str() {
        "application/json" => {
            let login: serde_json::Value = serde_json::from_slice(body).map_err(|_| refuse("the login is not JSON"))?;
            let field = |f: &str| login.get(f).and_then(|v| v.as_str()).map(str::to_owned);
            (field("name"), field("password"))
        }
        "application/x-www-form-urlencoded" => {
            // The first of a repeated field, as CouchDB takes it.
            let field = |f: &str| url::form_urlencoded::parse(body).find(|(k, _)| k == f).map(|(_, v)| v.into_owned());
            (field("name"), field("password"))
        }
        _ => {
            return Err(json_error(
                415,
                "bad_content_type",
                "send the login as application/json: {\"name\": ..., \"password\": ...}",
            ))
        }
    };
    match (name, password) {
        (Some(name), Some(password)) => Ok((name, password)),
        _ => Err(refuse("a login has a name and a password, each a string")),
    }
}

/// The answer to a login as one of the proxies' accounts.
fn proxies_account(name: &str) -> Response<Full<Bytes>> {
    json_error(
        403,
        "forbidden",
        &format!(
            "{name} is the proxies' account: the console never logs in as it (a stranger's wrong passwords here \
             would lock the proxies out of CouchDB); log in with your own account"
        ),
    )
}

/// The answer to a login past the bounds of [`logins`].
fn logins_wait(wait: u32) -> Response<Full<Bytes>> {
    too_many(
        wait,
        "too many failed logins for this account or from this address lately (the console keeps each account \
         below CouchDB's lockout): try again later",
    )
}

/// `429` with `Retry-After`.
fn too_many(wait: u32, reason: &str) -> Response<Full<Bytes>> {
    let mut busy = json_error(429, "too_many_requests", reason);
    busy.headers_mut().insert("retry-after", HeaderValue::from(wait));
    busy
}

/// Headers every answer carries: nothing cached, the page's rules, no sniffing.
fn guard(response: &mut Response<Full<Bytes>>) {
    let headers = response.headers_mut();
    headers.insert("cache-control", HeaderValue::from_static("no-store"));
    headers.insert("content-security-policy", HeaderValue::from_static(CSP));
    headers.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    headers.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
}

fn respond(status: u16, content_type: &str, body: Bytes) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = StatusCode::from_u16(status).expect("a valid status");
    response.headers_mut().insert("content-type", HeaderValue::from_str(content_type).expect("a valid type"));
    guard(&mut response);
    response
}

/// A refusal in CouchDB's own shape, so the page shows every refusal the same way.
fn json_error(status: u16, error: &str, reason: &str) -> Response<Full<Bytes>> {
    respond(status, "application/json", Bytes::from(json!({"error": error, "reason": reason}).to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn console() -> Console {
        Console::new(Vec::new(), url::Url::parse("http://127.0.0.1:5984/").unwrap(), false).unwrap()
    }

    #[test]
    fn a_print_sheet_is_made_one_at_a_time_per_account_and_a_few_in_all() {
        let console = console();
        let first = console.sheet_turn("ann").expect("ann's turn");
        assert!(console.sheet_turn("ann").is_none(), "ann's second sheet at once");
        let second = console.sheet_turn("bob").expect("bob's turn");
        assert_eq!(SHEETS_AT_ONCE, 2);
        assert!(console.sheet_turn("cyd").is_none(), "a third sheet at once");
        drop(first);
        let third = console.sheet_turn("ann").expect("ann's turn again once hers is made");
        drop((second, third));
        assert!(console.sheet_turn("cyd").is_some());
    }

    /// What the console may pass to CouchDB, written out apart from the router (docs/console.md,
    /// "What the console lets through"): method and CouchDB path, for the one database `links`
    /// and its clicks database.
    fn allowed(method: &str, path: &str) -> bool {
        let link_id = |s: &str| s.len() == 5 && s.bytes().all(|b| b.is_ascii_alphanumeric());
        match (method, path) {
            ("GET" | "POST" | "DELETE", "/_session") => true,
            ("GET" | "HEAD", "/links" | "/links/_all_docs") => true,
            ("GET" | "HEAD", "/links/_design/console/_view/recent" | "/links/_design/console/_view/search") => true,
            (
                "GET" | "HEAD",
                "/links_clicks/_design/clicks/_view/by_link"
                | "/links_clicks/_design/clicks/_view/by_version"
                | "/links_clicks/_design/clicks/_view/by_day_link"
                | "/links_clicks/_design/clicks/_view/by_month_link",
            ) => true,
            ("GET" | "HEAD" | "PUT", p) => p.strip_prefix("/links/").is_some_and(link_id),
            _ => false,
        }
    }

    fn parts(method: &str, target: &str, headers: &[(&str, &str)]) -> Option<Parts> {
        let mut request = Request::builder().method(method).uri(target).header("host", "console.example");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        Some(request.body(()).ok()?.into_parts().0)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4000))]
        #[test]
        fn nothing_outside_the_allow_list_reaches_couchdb_and_only_the_page_itself_writes(
            method in proptest::sample::select(vec!["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "COPY", "OPTIONS", "get"]),
            // The page's own requests and their near misses, half the time; anything, else.
            known in proptest::sample::select(vec![
                "/couch/_session", "/couch/links", "/couch/links/_all_docs", "/couch/links/H83if",
                "/couch/links/_design/console/_view/recent", "/couch/links/_design/console/_view/search",
                "/couch/links_clicks/_design/clicks/_view/by_link", "/couch/links_clicks/_design/clicks/_view/by_version",
                "/couch/links/_design/console/_view/recent/x", "/couch/links/_design/links",
                "/couch/links_clicks/_design/clicks/_view/by_day", "/couch/links/H83if/att", "/couch/links/_security",
                "/couch/links_clicks/_design/clicks/_view/by_day_link", "/couch/links/_design/clicks/_view/by_month_link",
                "/couch/links/../_users", "/couch/links/%48%38%33if", "/couch//links", "/couch/links/",
                "/couch/_session/x", "/couch/links_clicks/H83if", "/couch/other/H83if", "/qr/links/sheet.pdf",
                "/qr/links/H83if.svg", "/console.json", "/", "/app.js", "/couch", "/couchlinks/H83if", "/password",
            ]),
            prefix in proptest::sample::select(vec!["/couch", "/couch/", "/qr", "/", "", "/couch/.."]),
            segments in proptest::collection::vec(proptest::sample::select(vec![
                "links", "links_clicks", "other", "_session", "_all_docs", "_design", "console", "clicks", "_view",
                "recent", "search", "by_link", "by_version", "by_day", "by_day_link", "by_month_link", "H83if", "Zz999", "toolong", "_users",
                "_security", "_bulk_docs", "..", ".", "%2e%2e", "%2F", "_all_dbs", "sheet.pdf", "H83if.svg", "",
            ]), 0..7),
            use_known in proptest::bool::ANY,
            query in "(\\?[a-z_=&%.]{0,12})?",
            origin in proptest::option::of(proptest::sample::select(vec![
                "http://console.example", "https://console.example", "http://evil.example", "null",
                "http://console.example.evil.example", "http://console.example:80", "",
            ])),
            fetch_site in proptest::option::of(proptest::sample::select(vec![
                "same-origin", "same-site", "cross-site", "none", "CROSS-SITE", "",
            ])),
        ) {
            let path = if use_known {
                known.to_owned()
            } else {
                format!("{prefix}{}", segments.iter().map(|s| format!("/{s}")).collect::<String>())
            };
            let target = format!("{path}{query}");
            let mut headers = Vec::new();
            headers.extend(origin.map(|o| ("origin", o)));
            headers.extend(fetch_site.map(|f| ("sec-fetch-site", f)));
            let Some(parts) = parts(method, &target, &headers) else { return Ok(()) };
            let sites = vec![ConsoleSite {
                db: "links".into(),
                public_url: crate::domain::PublicUrl::parse("http://0x1f.ie").unwrap(),
                clicks_db: Some("links_clicks".into()),
                history_db: None,
                editor_role: "links:editor".into(),
            }];
            let said = source(&parts);
            let own = matches!(origin, Some("http://console.example" | "https://console.example"));
            // The source is the page's own only when its Origin is; another's whenever a
            // browser says so.
            proptest::prop_assert_eq!(said == Source::OwnPage, own);
            if origin.is_some() && !own || origin.is_none() && matches!(fetch_site, Some("same-site" | "cross-site")) {
                proptest::prop_assert_eq!(said, Source::Elsewhere);
            }
            let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
            match route::route(parts.method.as_str(), path, said, &sites) {
                Ok(Route::Couch { path: passed, .. }) => {
                    proptest::prop_assert!(allowed(method, &passed), "{} {} passed as {}", method, target, passed);
                    proptest::prop_assert!(said != Source::Elsewhere, "{} {} from elsewhere", method, target);
                    proptest::prop_assert!(matches!(method, "GET" | "HEAD") || own, "{} {} written without Origin", method, target);
                    proptest::prop_assert_eq!(format!("/couch{passed}"), parts.uri.path());
                }
                Ok(Route::Sheet { .. } | Route::PasswordHash) => proptest::prop_assert!(method == "POST" && own),
                Ok(Route::Qr { .. } | Route::Asset(_) | Route::Sites) => {
                    proptest::prop_assert!(matches!(method, "GET" | "HEAD"), "{} {}", method, target)
                }
                Err(refusal) => proptest::prop_assert!([403, 404, 405, 400].contains(&refusal.status)),
            }
        }
    }

    #[test]
    #[allow(clippy::result_large_err)]
    fn a_basic_credential_is_read_strictly_and_what_cannot_be_read_is_never_passed_on() {
        let read = |value: &str| credential(&parts("GET", "/console.json", &[("authorization", value)]).unwrap());
        let basic = |n: &str, p: &str| Some(Credential::Basic(n.into(), p.into()));
        // couchlink-reader:guess, as sent and as the stranger's pass spelt it.
        assert_eq!(read("Basic Y291Y2hsaW5rLXJlYWRlcjpndWVzcw==").unwrap(), basic("couchlink-reader", "guess"));
        assert_eq!(read("basic  Y291Y2hsaW5rLXJlYWRlcjpndWVzcw== ").unwrap(), basic("couchlink-reader", "guess"));
        assert_eq!(read("Basic YTpiOmM=").unwrap(), basic("a", "b:c"), "split at the first colon");
        for odd in [
            "Basic Y291 Y2hsaW5rLXJlYWRlcjpndWVzcw==",
            "Basic Y291\tY2hsaW5rLXJlYWRlcjpndWVzcw==",
            "Basic Y291Y2hsaW5rLXJlYWRlcjpndWVzc w==",
            "Basic Y291Y2hsaW5rLXJlYWRlcjpndWVzcw",
            "Basic Y291Y2hsaW5r*LXJlYWRlcjpndWVzcw==",
            "Basic bm9jb2xvbg==",
            "Basic",
            "Digest username=\"x\"",
        ] {
            let refused = read(odd).expect_err(odd);
            assert_eq!(refused.status(), 400, "{odd}");
        }
        assert_eq!(read("Bearer eyJhbGciOi.x.y").unwrap(), Some(Credential::Bearer));
        let two = parts("GET", "/", &[("authorization", "Basic YTpi"), ("authorization", "Basic YzpkCg==")]).unwrap();
        assert_eq!(credential(&two).expect_err("two").status(), 400);
        assert_eq!(credential(&parts("GET", "/", &[]).unwrap()).unwrap(), None);
    }

    #[test]
    fn an_account_in_the_url_is_refused() {
        for url in ["http://admin:password@127.0.0.1:5984/", "http://admin@127.0.0.1:5984/", "http://:pw@127.0.0.1/"] {
            let refused = Console::new(Vec::new(), url::Url::parse(url).unwrap(), false).err();
            assert!(refused.is_some_and(|e| !e.to_string().contains("password")), "{url}");
        }
    }
}
