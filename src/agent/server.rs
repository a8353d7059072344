//! The agent's HTTP listener: DIDComm messages in by `POST`, the out-of-band invitation at
//! `GET /invitation`. Each message is opened, checked against the allow list, handled through
//! CouchDB's HTTP API with the agent's editor account, and answered: in the HTTP response when
//! the sender asks for `return_route: all`, else at the sender's own DIDComm endpoint.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::http::request::Parts;
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{json, Value};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use super::delivery::Delivery;
use super::envelope::{self, KidStyle, Opened, Sender};
use super::identity::Identity;
use super::peer_did::PeerDid;
use super::protocol::{self, LinkState, Problem, ShortenRequest};
use crate::couch::{CouchClient, CouchError, Created};
use crate::domain::{LinkEdit, LinkId, LinkWrite, PublicUrl, RequestedBy};
use crate::links::{store_new, NewLinkError};

/// The media types of DIDComm v2 messages.
pub const ENCRYPTED: &str = "application/didcomm-encrypted+json";
/// A signed (JWS) message.
pub const SIGNED: &str = "application/didcomm-signed+json";
/// A plaintext message (only with the development flag).
pub const PLAIN: &str = "application/didcomm-plain+json";

/// The largest message accepted: a request holds one URL of at most 2 KiB.
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024;

/// Who may ask the agent for short URLs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Allow {
    /// Anyone, anonymous senders included.
    Anyone,
    /// These DIDs, authenticated.
    Dids(Vec<String>),
}

impl Allow {
    /// `*`, or DIDs separated by commas or spaces.
    pub fn parse(text: &str) -> Allow {
        if text.trim() == "*" {
            return Allow::Anyone;
        }
        Allow::Dids(text.split([',', ' ', '\n']).filter(|s| !s.is_empty()).map(str::to_owned).collect())
    }

    fn admits(&self, sender: &Sender) -> bool {
        match (self, sender) {
            (Allow::Anyone, _) => true,
            (Allow::Dids(dids), Sender::Authenticated(did)) => dids.iter().any(|d| d == did),
            (Allow::Dids(_), Sender::Anonymous) => false,
        }
    }
}

/// The agent: its keys and DID, where links go, and its rules.
pub struct Agent {
    /// Its keys.
    pub identity: Identity,
    /// Its DID, resolved.
    pub me: PeerDid,
    /// CouchDB, as the agent's editor account.
    pub editor: CouchClient,
    /// The short links' base URL.
    pub short_base: PublicUrl,
    /// Who may ask.
    pub allow: Allow,
    /// The longest validity granted, in seconds; `None`: any, and links that never expire.
    pub max_validity: Option<u64>,
    /// Plaintext messages accepted (development only: they prove no sender).
    pub accept_plaintext: bool,
    /// Replies sent to senders' endpoints, under the endpoint policy.
    pub delivery: Delivery,
}

/// What the agent answers a message with, before sealing.
struct Reply {
    message: Value,
}

impl Agent {
    /// The Out-of-Band 2.0 invitation to talk to this agent.
    pub fn invitation(&self) -> Value {
        json!({
            "type": "https://didcomm.org/out-of-band/2.0/invitation",
            "id": uuid::Uuid::new_v4().to_string(),
            "from": self.me.did,
            "body": {
                "goal_code": "shorten",
                "goal": "Request short URLs (https://didcomm.org/shorten-url/1.0)",
                "accept": ["didcomm/v2"],
            },
        })
    }

    /// Handles one message body of media type `media`: the HTTP response to give.
    pub async fn receive(&self, body: &[u8], media: &str) -> Response<Full<Bytes>> {
        let Ok(text) = std::str::from_utf8(body) else {
            return plain(StatusCode::BAD_REQUEST, "the message is not UTF-8 JSON");
        };
        let opened = match media {
            ENCRYPTED | SIGNED => envelope::open(text, &self.identity, &self.me),
            PLAIN if self.accept_plaintext => match serde_json::from_str::<Value>(text) {
                // Development only: the `from` is taken on trust.
                Ok(message) => {
                    let sender =
                        message["from"].as_str().map_or(Sender::Anonymous, |d| Sender::Authenticated(d.to_owned()));
                    Ok(Opened { message, sender, style: KidStyle::Numbered })
                }
                Err(e) => Err(envelope::EnvelopeError::Malformed(e.to_string())),
            },
            _ => {
                return plain(
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    &format!("send DIDComm v2 messages as {ENCRYPTED} or {SIGNED}, not {media:?}"),
                )
            }
        };
        let opened = match opened {
            Ok(opened) => opened,
            Err(e @ envelope::EnvelopeError::NotForUs) => return plain(StatusCode::NOT_FOUND, &e.to_string()),
            Err(e @ envelope::EnvelopeError::UnknownSender { .. }) => {
                // A DID that does not resolve offline: no key to encrypt an answer to, so the
                // problem report goes back in plaintext (it holds nothing but the reason).
                let comment = format!("{e}; this agent resolves did:peer:2 and did:key DIDs");
                return plaintext_problem(StatusCode::BAD_REQUEST, "e.p.did", &comment);
            }
            Err(e) => return plain(StatusCode::BAD_REQUEST, &e.to_string()),
        };
        let addressed = opened.message["to"].as_array().is_none_or(|to| to.iter().any(|d| d == &json!(self.me.did)));
        if !addressed {
            return plain(StatusCode::BAD_REQUEST, "the message's \"to\" does not name this agent");
        }
        if !opened.message["from"].is_string() {
            // Nobody could be told the short URL, so none is made.
            return plaintext_problem(
                StatusCode::BAD_REQUEST,
                "e.p.msg.no-sender",
                "the message has no \"from\": nobody could be told the answer, so nothing was done",
            );
        }
        if !self.allow.admits(&opened.sender) {
            // A refused sender never makes the agent send anything anywhere: its report goes
            // back in this response only.
            let report = json!({"type": protocol::PROBLEM_REPORT, "id": uuid::Uuid::new_v4().to_string(),
                "pthid": protocol::thread_of(&opened.message),
                "body": {"code": "e.p.trust", "comment": "this url-shortener does not take requests from this sender (COUCHLINK_AGENT_ALLOW)"}});
            return self.answer(&opened, Ok(Reply { message: report }), media == PLAIN, true).await;
        }
        let reply = self.handle(&opened).await;
        self.answer(&opened, reply, media == PLAIN, false).await
    }

    /// The reply to an opened message: a protocol message or a problem report.
    async fn handle(&self, opened: &Opened) -> Result<Reply, Box<CouchError>> {
        let message = &opened.message;
        let id = || uuid::Uuid::new_v4().to_string();
        let problem = |p: Problem| Ok(Reply { message: p.report(id(), message) });
        let body = &message["body"];
        match message["type"].as_str() {
            Some(protocol::REQUEST_SHORTENED_URL) => {
                let request = match protocol::check_request(body, self.max_validity) {
                    Ok(r) => r,
                    Err(p) => return problem(p),
                };
                match self.shorten(&request, opened).await {
                    Ok((link, expires)) => {
                        let short = protocol::short_url(&self.short_base, &link, &request);
                        Ok(Reply { message: protocol::shortened_url(id(), message, &short, expires) })
                    }
                    Err(Shorten::Problem(p)) => problem(p),
                    Err(Shorten::Couch(e)) => Err(Box::new(e)),
                }
            }
            Some(protocol::INVALIDATE_SHORTENED_URL) => {
                let requester = match &opened.sender {
                    Sender::Authenticated(did) => did.clone(),
                    // Anoncrypt proves no one: never the owner.
                    Sender::Anonymous => return problem(Problem::RejectedInvalidation),
                };
                let link = match protocol::invalidated_link(body, &self.short_base) {
                    Ok(link) => link,
                    Err(p) => return problem(p),
                };
                match self.invalidate(link, &requester).await {
                    Ok(Ok(())) => Ok(Reply { message: protocol::ack(id(), message) }),
                    Ok(Err(p)) => problem(p),
                    Err(e) => Err(Box::new(e)),
                }
            }
            other => Ok(Reply {
                message: json!({"type": protocol::PROBLEM_REPORT, "id": id(), "pthid": protocol::thread_of(message),
                    "body": {"code": "e.p.msg.unsupported", "comment": format!("this agent speaks https://didcomm.org/shorten-url/1.0, not {other:?}")}}),
            }),
        }
    }

    /// Stores the link asked for: `(its ID, its expiry in epoch seconds)`.
    async fn shorten(&self, request: &ShortenRequest, opened: &Opened) -> Result<(LinkId, Option<i64>), Shorten> {
        let now = OffsetDateTime::now_utc();
        let expires = request.validity_seconds.map(|s| now + Duration::from_secs(s));
        let did = match &opened.sender {
            Sender::Authenticated(did) => Some(did.clone()),
            Sender::Anonymous => None,
        };
        let link = LinkWrite {
            // An agent that asks for JSON gets the invitation itself (RFC 0434).
            oob: (request.goal != protocol::Goal::Shorten).then_some(true),
            expires: expires
                .map(|at| at.replace_nanosecond(0).unwrap_or(at).format(&Rfc3339).expect("a UTC time formats")),
            requested_by: Some(RequestedBy { did, thid: protocol::thread_of(&opened.message), via: "didcomm" }),
            ..LinkWrite::new_link(&request.url)
        };
        let stored = match request.slug {
            Some(slug) => {
                if self.editor.ever_used(&slug).await.map_err(Shorten::Couch)? {
                    return Err(Shorten::Problem(Problem::InvalidSlug(format!("{slug} is taken"))));
                }
                match self.editor.create_doc(&slug, &link.to_doc()).await {
                    Ok(Created::Stored(_)) => Ok(slug),
                    Ok(Created::Conflict) => Err(Shorten::Problem(Problem::InvalidSlug(format!("{slug} is taken")))),
                    Err(e) => Err(refused_or(e)),
                }
            }
            None => {
                store_new(&self.editor, &link, std::iter::repeat_with(LinkId::random)).await.map_err(|e| match e {
                    NewLinkError::Couch(e) => Shorten::Couch(e),
                    NewLinkError::Refused { status, reason } => {
                        refused_or(CouchError::Refused { status, error: "refused".into(), reason })
                    }
                    // No free ID after many tries: the agent's trouble, not the request's (503,
                    // and a warning for the operator).
                    NewLinkError::NoFreeId => Shorten::Couch(CouchError::Refused {
                        status: 409,
                        error: "conflict".into(),
                        reason: NewLinkError::NoFreeId.to_string(),
                    }),
                })
            }
        }?;
        Ok((stored, expires.map(OffsetDateTime::unix_timestamp)))
    }

    /// Switches link `id` off for `requester`, if it may.
    async fn invalidate(&self, id: LinkId, requester: &str) -> Result<Result<(), Problem>, CouchError> {
        // A conflict means someone edited it meanwhile: read it again and decide again.
        for _ in 0..3 {
            let Some(doc) = self.editor.link_doc(&id).await? else {
                return Ok(protocol::check_invalidation(None, requester));
            };
            let state = LinkState {
                requested_by: doc.pointer("/requested_by/did").and_then(Value::as_str).map(str::to_owned),
                inactive: doc["inactive"] == json!(true),
                expired: doc["expires"]
                    .as_str()
                    .and_then(|e| OffsetDateTime::parse(e, &Rfc3339).ok())
                    .is_some_and(|at| at <= OffsetDateTime::now_utc()),
            };
            if let Err(p) = protocol::check_invalidation(Some(&state), requester) {
                return Ok(Err(p));
            }
            // Switched off, never deleted: the short URL may be printed somewhere. Every other
            // field (the `_rev` read, fields couchlink does not know) is written back as read.
            let Value::Object(fields) = doc else {
                return Ok(protocol::check_invalidation(None, requester));
            };
            let off = LinkEdit { set: LinkWrite { inactive: Some(true), ..LinkWrite::default() }, remove: Vec::new() };
            match self.editor.create_doc(&id, &Value::Object(off.onto(fields))).await? {
                Created::Stored(_) => return Ok(Ok(())),
                Created::Conflict => continue,
            }
        }
        Err(CouchError::Refused { status: 409, error: "conflict".into(), reason: format!("{id} keeps changing") })
    }

    /// Sends `reply` where the sender asked: in the HTTP response (`return_route: all`, or
    /// `in_response`), or to its DIDComm endpoint (then `202 Accepted` here, or `502` when it
    /// could not be delivered). Sealed for the sender, but for a plaintext message
    /// (development only), answered in plaintext. The message must have a `from`.
    async fn answer(
        &self,
        opened: &Opened,
        reply: Result<Reply, Box<CouchError>>,
        plaintext: bool,
        in_response: bool,
    ) -> Response<Full<Bytes>> {
        let reply = match reply {
            Ok(reply) => reply,
            Err(e) => return unavailable(&e),
        };
        let Some(to) = opened.message["from"].as_str() else {
            return plain(StatusCode::BAD_REQUEST, "the message has no \"from\" to answer");
        };
        let mut message = reply.message;
        message["from"] = json!(self.me.did);
        message["to"] = json!([to]);
        message["created_time"] = json!(OffsetDateTime::now_utc().unix_timestamp());
        let (sealed, media) = if plaintext {
            (message.to_string(), PLAIN)
        } else {
            match envelope::seal(&message, to, &self.identity, &self.me, opened.style) {
                Ok(sealed) => (sealed, ENCRYPTED),
                Err(e) => return plain(StatusCode::BAD_REQUEST, &format!("cannot answer {to}: {e}")),
            }
        };
        if opened.message["return_route"] == "all" || in_response {
            let mut response = Response::new(Full::new(Bytes::from(sealed)));
            response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(media));
            if opened.message["return_route"] != "all" {
                // Asked to be answered elsewhere, and refused: said in this response alone.
                *response.status_mut() = StatusCode::FORBIDDEN;
            }
            return response;
        }
        let endpoint = super::peer_did::resolve(to).ok().and_then(|p| p.services.into_iter().next()).map(|s| s.uri);
        let Some(endpoint) = endpoint else {
            return plain(
                StatusCode::BAD_REQUEST,
                "the sender has no DIDComm endpoint: ask with \"return_route\": \"all\"",
            );
        };
        // The sender learns "delivered" or "not delivered", never what its endpoint answered:
        // otherwise the agent would be a way to read addresses only it can reach.
        match self.delivery.deliver(&endpoint, media, sealed).await {
            Ok(()) => plain(StatusCode::ACCEPTED, "delivered"),
            Err(e) => {
                tracing::info!("agent: reply to {to} not delivered: {e}");
                plain(StatusCode::BAD_GATEWAY, "not delivered")
            }
        }
    }
}

/// Why a link was not stored.
enum Shorten {
    Problem(Problem),
    Couch(CouchError),
}

/// CouchDB's validation refusing a link is the requester's problem (its URL); anything else is
/// the agent's.
fn refused_or(e: CouchError) -> Shorten {
    match e {
        CouchError::Refused { status: 403, reason, .. } => {
            Shorten::Problem(Problem::InvalidUrl(crate::domain::Refusal::parse(&reason).message().to_owned()))
        }
        e => Shorten::Couch(e),
    }
}

fn unavailable(e: &CouchError) -> Response<Full<Bytes>> {
    tracing::warn!("agent: CouchDB: {}", crate::errors::Causes(e));
    let mut r = plain(StatusCode::SERVICE_UNAVAILABLE, "the link store is unavailable; try again shortly");
    r.headers_mut().insert(hyper::header::RETRY_AFTER, HeaderValue::from_static("5"));
    r
}

/// A problem report in plaintext, for a message that cannot be answered sealed.
fn plaintext_problem(status: StatusCode, code: &str, comment: &str) -> Response<Full<Bytes>> {
    let report = json!({"type": protocol::PROBLEM_REPORT, "id": uuid::Uuid::new_v4().to_string(),
        "body": {"code": code, "comment": comment}});
    let mut response = json_response(&report);
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(PLAIN));
    response
}

fn plain(status: StatusCode, text: &str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(format!("{text}\n"))));
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    response
}

fn json_response(value: &Value) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(value.to_string())));
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

impl crate::http::accept::Service for Agent {
    async fn call(&self, request: Parts, _peer: SocketAddr) -> Response<Full<Bytes>> {
        match (&request.method, request.uri.path()) {
            (&Method::GET, "/invitation") => json_response(&self.invitation()),
            (&Method::GET, "/did") => plain(StatusCode::OK, &self.me.did),
            (&Method::POST, _) => plain(StatusCode::LENGTH_REQUIRED, "a DIDComm message is needed"),
            _ => plain(StatusCode::NOT_FOUND, "POST DIDComm v2 messages here; GET /invitation for the invitation"),
        }
    }

    async fn call_with_body(&self, request: Request<hyper::body::Incoming>, peer: SocketAddr) -> Response<Full<Bytes>> {
        if request.method() != Method::POST {
            let (parts, _) = request.into_parts();
            return self.call(parts, peer).await;
        }
        let media = request
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.split(';').next().unwrap_or("").trim().to_ascii_lowercase())
            .unwrap_or_default();
        let body = match Limited::new(request.into_body(), MAX_MESSAGE_BYTES).collect().await {
            Ok(body) => body.to_bytes(),
            Err(_) => {
                return plain(StatusCode::PAYLOAD_TOO_LARGE, &format!("a message is at most {MAX_MESSAGE_BYTES} bytes"))
            }
        };
        self.receive(&body, &media).await
    }
}
