//! `couchlink console`: a page for the people who print the tags, and the CouchDB requests it
//! makes passed through under the same origin (so CouchDB's session cookie works without CORS).
//! One more CouchDB client, like Fauxton: no API and no authority of its own, nothing cached or
//! stored; never on the redirect path (docs/console.md).
//!
//! [`route`] decides what a request is (policy, no bytes); [`Console`] answers it; [`sheet`]
//! reads the page's request for a print sheet.

pub mod route;
pub mod sheet;

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{HeaderName, HeaderValue};
use hyper::http::request::Parts;
use hyper::{Request, Response, StatusCode};
use serde_json::json;

use crate::http::accept::Service;
use crate::qr::render::{self, Look};
pub use route::{ConsoleSite, Route, Source};

/// The largest request body passed to CouchDB (a link document is a few KB).
const MAX_BODY: usize = 1 << 20;

/// How long CouchDB may take to answer a passed request.
const COUCH_TIMEOUT: Duration = Duration::from_secs(30);

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
    http: reqwest::Client,
}

impl Console {
    /// A console for `sites` of the CouchDB at `couchdb`.
    pub fn new(sites: Vec<ConsoleSite>, couchdb: url::Url, secure_cookies: bool) -> Console {
        let http = reqwest::Client::builder()
            .timeout(COUCH_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("a plain HTTP client builds");
        Console { sites, couchdb, secure_cookies, http }
    }

    async fn answer(&self, parts: Parts, body: Bytes) -> Response<Full<Bytes>> {
        let target = parts.uri.path_and_query().map_or("/", |p| p.as_str());
        let route = match route::route(parts.method.as_str(), target, source(&parts), &self.sites) {
            Ok(route) => route,
            Err(refusal) => return json_error(refusal.status, "forbidden", &refusal.reason),
        };
        match route {
            Route::Asset(name) => {
                let (_, content_type, bytes) =
                    route::ASSETS.iter().find(|(n, _, _)| *n == name).expect("routes name known assets");
                respond(200, content_type, Bytes::from_static(bytes))
            }
            Route::Sites => {
                let sites: Vec<_> = self
                    .sites
                    .iter()
                    .map(|s| {
                        json!({"db": s.db, "public_url": s.public_url.as_str(), "clicks_db": s.clicks_db,
                        "editor_role": s.editor_role})
                    })
                    .collect();
                respond(200, "application/json", Bytes::from(json!({ "sites": sites }).to_string()))
            }
            Route::Qr { site, id, png, colours } => {
                let text = crate::qr::tag_text(&self.sites[site].public_url, &id);
                let look = Look { scale: 8, border: 4, colours };
                match crate::qr::encode(&text, None) {
                    Ok(tag) if png => respond(200, "image/png", render::png(&tag.code, look).into()),
                    Ok(tag) => respond(200, "image/svg+xml", render::svg(&tag.code, look, None).into()),
                    Err(e) => json_error(400, "bad_request", &e.to_string()),
                }
            }
            Route::Sheet { site } => {
                let public_url = self.sites[site].public_url.clone();
                let made = tokio::task::spawn_blocking(move || sheet::make(&public_url, &body)).await;
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
            Route::Couch { path } => self.pass(parts, path, body).await,
        }
    }

    /// Passes the request to CouchDB with the browser's credentials (its session cookie or
    /// basic authorization) and nothing else of its own, and CouchDB's answer back.
    async fn pass(&self, parts: Parts, path: String, body: Bytes) -> Response<Full<Bytes>> {
        let mut url = self.couchdb.clone();
        url.set_path(&path);
        url.set_query(parts.uri.query());
        let mut request = self.http.request(parts.method.clone(), url);
        for name in ["authorization", "content-type", "accept", "if-match"] {
            if let Some(value) = parts.headers.get(name) {
                request = request.header(name, value);
            }
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
        let answer = match request.body(body).send().await {
            Ok(answer) => answer,
            Err(e) => {
                return json_error(
                    502,
                    "couchdb_unreachable",
                    &format!("CouchDB did not answer: {}", crate::errors::Causes(&e)),
                )
            }
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
            let value = match (name, self.secure_cookies) {
                ("set-cookie", true) => secure(&value),
                _ => value,
            };
            response.headers_mut().append(HeaderName::from_static(name), value);
        }
        guard(&mut response);
        response
    }
}

impl Service for Console {
    async fn call(&self, request: Parts, _peer: SocketAddr) -> Response<Full<Bytes>> {
        self.answer(request, Bytes::new()).await
    }

    async fn call_with_body(
        &self,
        request: Request<hyper::body::Incoming>,
        _peer: SocketAddr,
    ) -> Response<Full<Bytes>> {
        let (parts, body) = request.into_parts();
        match Limited::new(body, MAX_BODY).collect().await {
            Ok(collected) => self.answer(parts, collected.to_bytes()).await,
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

/// CouchDB's `Set-Cookie` with `Secure` added (behind TLS).
fn secure(value: &HeaderValue) -> HeaderValue {
    match value.to_str() {
        Ok(v) if !v.to_ascii_lowercase().contains("; secure") => {
            HeaderValue::from_str(&format!("{v}; Secure")).unwrap_or_else(|_| value.clone())
        }
        _ => value.clone(),
    }
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
