//! The Shorten URL protocol (`https://didcomm.org/shorten-url/1.0`), without keys,
//! network or CouchDB: requests checked field by field into what to store or the problem to
//! report, and the replies (`shortened-url`, the empty `ack`, `problem-report`) built.

use base64::engine::general_purpose::{URL_SAFE, URL_SAFE_NO_PAD};
use base64::Engine;
use serde_json::{json, Value};
use url::Url;

use crate::domain::{LinkId, PublicUrl};

/// The protocol's messages.
pub const REQUEST_SHORTENED_URL: &str = "https://didcomm.org/shorten-url/1.0/request-shortened-url";
/// The reply with the short URL.
pub const SHORTENED_URL: &str = "https://didcomm.org/shorten-url/1.0/shortened-url";
/// A request to switch a short URL off.
pub const INVALIDATE_SHORTENED_URL: &str = "https://didcomm.org/shorten-url/1.0/invalidate-shortened-url";
/// DIDComm v2's problem report.
pub const PROBLEM_REPORT: &str = "https://didcomm.org/report-problem/2.0/problem-report";
/// DIDComm v2's empty message, which carries the `ack` of an invalidation.
pub const EMPTY: &str = "https://didcomm.org/empty/1.0/empty";

/// The longest URL a link may hold (the validation function's limit: docs/reference.md, "Link documents").
pub const MAX_URL_BYTES: usize = 2048;

/// What a `request-shortened-url` asks for, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShortenRequest {
    /// The long URL, http or https.
    pub url: String,
    /// Seconds until it expires; `None`: never.
    pub validity_seconds: Option<u64>,
    /// Its goal code.
    pub goal: Goal,
    /// The ID asked for, if any.
    pub slug: Option<LinkId>,
    /// For `shorten.oobv2`: the out-of-band message's `id`, which the short URL carries as
    /// `_oobid`.
    pub oob_id: Option<String>,
}

/// The goal codes this url-shortener supports (all the seed defines).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Goal {
    /// `shorten`: any URL.
    Shorten,
    /// `shorten.oobv1`: an Aries RFC 0434 invitation URL, with its `oob` parameter.
    OobV1,
    /// `shorten.oobv2`: a DIDComm v2 out-of-band URL, with its `_oob` parameter.
    OobV2,
}

/// A problem the seed defines a code for, with what to tell the requester.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    /// The validity asked for is longer than allowed (or unlimited where it may not be).
    #[error("the longest validity allowed is {max} seconds (and 0, no expiry, is not allowed)")]
    ValidityTooLong {
        /// The most seconds allowed.
        max: u64,
    },
    /// The URL is not one couchlink can redirect to.
    #[error("{0}")]
    InvalidUrl(String),
    /// The URL's scheme is not http or https.
    #[error("only http and https URLs can be shortened, not {0:?}")]
    InvalidProtocolScheme(String),
    /// The goal code is not one of `shorten`, `shorten.oobv1`, `shorten.oobv2`.
    #[error("goal_code must be \"shorten\", \"shorten.oobv1\" or \"shorten.oobv2\", not {0}")]
    InvalidGoalCode(String),
    /// The slug cannot be the link's ID.
    #[error("{0}")]
    InvalidSlug(String),
    /// The short URL is unknown, expired or already invalidated.
    #[error("the short URL is unknown, expired or already invalidated")]
    ShortUrlInvalid,
    /// A field the seed defines no code for is malformed: DIDComm v2's generic descriptor
    /// `msg` ("something is wrong with the message").
    #[error("{0}")]
    BadMessage(String),
    /// Another DID asked for the short URL.
    #[error(
        "only the DID that requested this short URL may invalidate it; send the request from \
         that DID, or ask the url-shortener's operator"
    )]
    RejectedInvalidation,
}

impl Problem {
    /// The seed's code, or `msg` for a malformed field the seed has none for.
    pub fn code(&self) -> &'static str {
        match self {
            Problem::ValidityTooLong { .. } => "validity_too_long",
            Problem::InvalidUrl(_) => "invalid_url",
            Problem::InvalidProtocolScheme(_) => "invalid_protocol_scheme",
            Problem::InvalidGoalCode(_) => "invalid_goal_code",
            Problem::InvalidSlug(_) => "invalid_slug",
            Problem::ShortUrlInvalid => "short_url_invalid",
            Problem::RejectedInvalidation => "rejected_invalidation",
            Problem::BadMessage(_) => "msg",
        }
    }

    /// The `problem-report` for it, threaded to the message `request` (DIDComm v2: `pthid`
    /// is the thread the problem is in, the request's `thid`, or its `id` when it starts one).
    /// The code is an error (`e`) that ends the protocol (`p`), with the seed's code as its
    /// descriptor; `problem_items` as the seed asks for `validity_too_long`.
    pub fn report(&self, id: String, request: &Value) -> Value {
        let mut body = json!({"code": format!("e.p.{}", self.code()), "comment": self.to_string()});
        if let Problem::ValidityTooLong { max } = self {
            body["problem_items"] = json!([{"max_validity_seconds": max}]);
        }
        json!({"type": PROBLEM_REPORT, "id": id, "pthid": thread_of(request), "body": body})
    }
}

/// The thread a message belongs to: its `thid`, or its own `id` when it starts one.
pub fn thread_of(message: &Value) -> Value {
    message.get("thid").or_else(|| message.get("id")).cloned().unwrap_or(Value::Null)
}

/// Checks a `request-shortened-url` body. `max_validity`: the most seconds a link may be
/// valid; `None` allows any, and links that never expire.
pub fn check_request(body: &Value, max_validity: Option<u64>) -> Result<ShortenRequest, Problem> {
    let goal = match body.get("goal_code") {
        Some(Value::String(code)) if code == "shorten" => Goal::Shorten,
        Some(Value::String(code)) if code == "shorten.oobv1" => Goal::OobV1,
        Some(Value::String(code)) if code == "shorten.oobv2" => Goal::OobV2,
        Some(other) => return Err(Problem::InvalidGoalCode(other.to_string())),
        None => return Err(Problem::InvalidGoalCode("nothing (goal_code is required)".into())),
    };
    let Some(Value::String(text)) = body.get("url") else {
        return Err(Problem::InvalidUrl("\"url\" is required, as a string".into()));
    };
    let url = check_url(text)?;
    let oob_id = match goal {
        Goal::Shorten => None,
        Goal::OobV1 => {
            oob_message(&url, "oob")?;
            None
        }
        Goal::OobV2 => {
            let message = oob_message(&url, "_oob")?;
            match message.get("id") {
                Some(Value::String(id)) if !id.is_empty() => Some(id.clone()),
                _ => return Err(Problem::InvalidUrl("the _oob message has no \"id\" for the _oobid".into())),
            }
        }
    };
    let validity_seconds = match (body.get("requested_validity_seconds"), max_validity) {
        // Not given: the url-shortener decides, and gives the most it allows.
        (None | Some(Value::Null), max) => max,
        (Some(v), max) => match v.as_u64() {
            Some(0) if max.is_none() => None,
            Some(0) => return Err(Problem::ValidityTooLong { max: max.unwrap_or_default() }),
            Some(n) if max.is_some_and(|max| n > max) => {
                return Err(Problem::ValidityTooLong { max: max.unwrap_or_default() })
            }
            Some(n) => Some(n),
            None => {
                return Err(Problem::BadMessage(format!(
                    "requested_validity_seconds must be a whole number of seconds, not {v}"
                )))
            }
        },
    };
    let slug = match body.get("short_url_slug") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() => None,
        Some(Value::String(s)) => Some(LinkId::parse(s).map_err(|_| {
            Problem::InvalidSlug(format!(
                "a slug here is the link's ID: exactly 5 letters or digits (A-Z, a-z, 0-9), not {s:?}"
            ))
        })?),
        Some(other) => return Err(Problem::InvalidSlug(format!("short_url_slug must be a string, not {other}"))),
    };
    Ok(ShortenRequest { url: text.clone(), validity_seconds, goal, slug, oob_id })
}

/// The URL rules of the links database's validation function (docs/reference.md, "Link documents"), said as the
/// seed's codes.
fn check_url(text: &str) -> Result<Url, Problem> {
    if text.len() > MAX_URL_BYTES {
        return Err(Problem::InvalidUrl(format!(
            "the url is {} bytes; at most {MAX_URL_BYTES} are allowed",
            text.len()
        )));
    }
    if text.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(Problem::InvalidUrl("the url must not contain spaces or control characters".into()));
    }
    if let Some((scheme, _)) = text.split_once(':') {
        if scheme != "http" && scheme != "https" && !scheme.is_empty() && !scheme.contains('/') {
            return Err(Problem::InvalidProtocolScheme(scheme.to_owned()));
        }
    }
    let url = Url::parse(text).map_err(|e| Problem::InvalidUrl(format!("not a URL: {e}")))?;
    if url.scheme() != "http" && url.scheme() != "https" {
        return Err(Problem::InvalidProtocolScheme(url.scheme().to_owned()));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(Problem::InvalidUrl("the url has no host".into()));
    }
    Ok(url)
}

/// The out-of-band message in query parameter `name`: base64url (padded or not) of a JSON
/// object, as RFC 0434 (`oob`) and DIDComm v2 (`_oob`) carry it.
fn oob_message(url: &Url, name: &str) -> Result<Value, Problem> {
    let missing = || Problem::InvalidUrl(format!("this goal code needs the invitation in the url's {name} parameter"));
    let (_, value) = url.query_pairs().find(|(k, _)| k == name).ok_or_else(missing)?;
    let bytes = URL_SAFE_NO_PAD
        .decode(value.trim_end_matches('='))
        .or_else(|_| URL_SAFE.decode(value.as_bytes()))
        .or_else(|_| base64::engine::general_purpose::STANDARD.decode(value.as_bytes()))
        .map_err(|_| Problem::InvalidUrl(format!("the {name} parameter is not base64url")))?;
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(message @ Value::Object(_)) => Ok(message),
        _ => Err(Problem::InvalidUrl(format!("the {name} parameter is not a JSON message"))),
    }
}

/// The short URL to answer for link `id`: `{base}/{id}`, and for `shorten.oobv2` with the
/// out-of-band message's ID as `_oobid`, as the DIDComm v2 spec's short-URL retrieval asks.
pub fn short_url(base: &PublicUrl, id: &LinkId, request: &ShortenRequest) -> String {
    let mut short = base.short_url(id);
    if let Some(oob_id) = &request.oob_id {
        let encoded: String = form_urlencoded::byte_serialize(oob_id.as_bytes()).collect();
        short.push_str("?_oobid=");
        short.push_str(&encoded);
    }
    short
}

/// The `shortened-url` reply to `request`; `expires_time` in UTC epoch seconds (DIDComm's
/// `_time` convention), left out for a link that never expires.
pub fn shortened_url(id: String, request: &Value, short_url: &str, expires_time: Option<i64>) -> Value {
    let mut body = json!({"shortened_url": short_url});
    if let Some(t) = expires_time {
        body["expires_time"] = json!(t);
    }
    json!({"type": SHORTENED_URL, "id": id, "thid": thread_of(request), "body": body})
}

/// The acknowledgement of an invalidation: DIDComm v2's empty message with an `ack` of it.
pub fn ack(id: String, request: &Value) -> Value {
    json!({"type": EMPTY, "id": id, "thid": thread_of(request), "ack": [request.get("id").cloned().unwrap_or(Value::Null)], "body": {}})
}

/// The link named by an `invalidate-shortened-url` body: a short URL of `base` (an `_oobid`
/// or other query, or a trailing slash, allowed), else [`Problem::ShortUrlInvalid`].
pub fn invalidated_link(body: &Value, base: &PublicUrl) -> Result<LinkId, Problem> {
    let Some(Value::String(short)) = body.get("shortened_url") else { return Err(Problem::ShortUrlInvalid) };
    let url = Url::parse(short).map_err(|_| Problem::ShortUrlInvalid)?;
    let ours = base.url();
    if url.scheme() != ours.scheme()
        || url.host_str() != ours.host_str()
        || url.port_or_known_default() != ours.port_or_known_default()
    {
        return Err(Problem::ShortUrlInvalid);
    }
    let prefix = ours.path().trim_end_matches('/');
    let rest = url.path().strip_prefix(prefix).and_then(|p| p.strip_prefix('/')).ok_or(Problem::ShortUrlInvalid)?;
    LinkId::parse(rest.trim_end_matches('/')).map_err(|_| Problem::ShortUrlInvalid)
}

/// What the agent knows of a link when asked to invalidate it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkState {
    /// The DID that requested it through the agent (`None`: made otherwise).
    pub requested_by: Option<String>,
    /// Switched off already.
    pub inactive: bool,
    /// Past its expiry.
    pub expired: bool,
}

/// Whether `requester` may invalidate a link in `state` (`None`: no such link). Unknown,
/// expired or inactive links are [`Problem::ShortUrlInvalid`] whoever asks, so a stranger
/// learns nothing more than the owner would; a live link of another DID (or of no DID) is
/// [`Problem::RejectedInvalidation`].
pub fn check_invalidation(state: Option<&LinkState>, requester: &str) -> Result<(), Problem> {
    match state {
        None => Err(Problem::ShortUrlInvalid),
        Some(s) if s.inactive || s.expired => Err(Problem::ShortUrlInvalid),
        Some(s) if s.requested_by.as_deref() == Some(requester) => Ok(()),
        Some(_) => Err(Problem::RejectedInvalidation),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(body: Value) -> Result<ShortenRequest, Problem> {
        check_request(&body, Some(86_400))
    }

    fn b64(v: &Value) -> String {
        URL_SAFE_NO_PAD.encode(v.to_string())
    }

    #[test]
    fn a_plain_request_is_accepted_with_its_validity_and_slug() {
        let r = request(json!({"url": "https://example.com/x?a=1", "requested_validity_seconds": 3600, "goal_code": "shorten", "short_url_slug": "Ab3dE"})).unwrap();
        assert_eq!(r.validity_seconds, Some(3600));
        assert_eq!(r.slug, Some(LinkId::parse("Ab3dE").unwrap()));
        assert_eq!(r.goal, Goal::Shorten);
        // No validity asked for: the most allowed. An empty slug (the seed's example): none.
        let r = request(json!({"url": "http://e.x/", "goal_code": "shorten", "short_url_slug": ""})).unwrap();
        assert_eq!((r.validity_seconds, r.slug), (Some(86_400), None));
        // Without a limit, 0 means never expires.
        let r = check_request(
            &json!({"url": "http://e.x/", "goal_code": "shorten", "requested_validity_seconds": 0}),
            None,
        )
        .unwrap();
        assert_eq!(r.validity_seconds, None);
    }

    #[test]
    fn every_problem_code_of_a_request() {
        let long = format!("https://e.x/{}", "a".repeat(MAX_URL_BYTES));
        let cases = [
            (
                json!({"url": "https://e.x/", "goal_code": "shorten", "requested_validity_seconds": 86_401}),
                "validity_too_long",
            ),
            (
                json!({"url": "https://e.x/", "goal_code": "shorten", "requested_validity_seconds": 0}),
                "validity_too_long",
            ),
            (json!({"url": "https://e.x/", "goal_code": "shorten", "requested_validity_seconds": -5}), "msg"),
            (json!({"url": "wss://e.x/", "goal_code": "shorten"}), "invalid_protocol_scheme"),
            (json!({"url": "ftp://e.x/", "goal_code": "shorten"}), "invalid_protocol_scheme"),
            (json!({"url": "HTTP://e.x/", "goal_code": "shorten"}), "invalid_protocol_scheme"),
            (json!({"url": "not a url", "goal_code": "shorten"}), "invalid_url"),
            (json!({"url": "https://", "goal_code": "shorten"}), "invalid_url"),
            (json!({"url": long, "goal_code": "shorten"}), "invalid_url"),
            (json!({"url": 7, "goal_code": "shorten"}), "invalid_url"),
            (json!({"url": "https://e.x/", "goal_code": "shorten.v3"}), "invalid_goal_code"),
            (json!({"url": "https://e.x/"}), "invalid_goal_code"),
            (json!({"url": "https://e.x/?x=1", "goal_code": "shorten.oobv1"}), "invalid_url"),
            (json!({"url": "https://e.x/?_oob=%%%", "goal_code": "shorten.oobv2"}), "invalid_url"),
            (
                json!({"url": format!("https://e.x/?_oob={}", b64(&json!({"type": "x"}))), "goal_code": "shorten.oobv2"}),
                "invalid_url",
            ),
            (json!({"url": "https://e.x/", "goal_code": "shorten", "short_url_slug": "oob-invite-28"}), "invalid_slug"),
            (json!({"url": "https://e.x/", "goal_code": "shorten", "short_url_slug": 12345}), "invalid_slug"),
        ];
        for (body, code) in cases {
            let problem = request(body.clone()).expect_err(&body.to_string());
            assert_eq!(problem.code(), code, "{body}: {problem}");
        }
    }

    #[test]
    fn oob_urls_carry_their_message_and_oobv2_short_urls_its_id() {
        let invitation = json!({"type": "https://didcomm.org/out-of-band/2.0/invitation", "id": "69212a3a-d068-4f9d-a2dd-4741bca89af3", "from": "did:peer:2.x", "body": {}});
        let url = format!("https://wallet.example/path?_oob={}", b64(&invitation));
        let r = request(json!({"url": url, "goal_code": "shorten.oobv2"})).unwrap();
        assert_eq!(r.oob_id.as_deref(), Some("69212a3a-d068-4f9d-a2dd-4741bca89af3"));
        let base = PublicUrl::parse("https://0x1f.ie").unwrap();
        let id = LinkId::parse("H83if").unwrap();
        assert_eq!(short_url(&base, &id, &r), "https://0x1f.ie/H83if?_oobid=69212a3a-d068-4f9d-a2dd-4741bca89af3");
        // RFC 0434's oob, padded base64url as some agents send it.
        let v1 = json!({"@type": "https://didcomm.org/out-of-band/1.1/invitation", "@id": "x"});
        let padded = URL_SAFE.encode(v1.to_string());
        let r =
            request(json!({"url": format!("https://w.example/?oob={padded}"), "goal_code": "shorten.oobv1"})).unwrap();
        assert_eq!((r.goal, short_url(&base, &id, &r)), (Goal::OobV1, "https://0x1f.ie/H83if".to_owned()));
    }

    #[test]
    fn replies_are_threaded_to_the_request() {
        let req = json!({"type": REQUEST_SHORTENED_URL, "id": "req-1", "body": {}});
        let reply = shortened_url("r".into(), &req, "https://0x1f.ie/H83if", Some(1_800_000_000));
        assert_eq!(
            (reply["thid"].as_str(), reply["body"]["expires_time"].as_i64()),
            (Some("req-1"), Some(1_800_000_000))
        );
        assert!(shortened_url("r".into(), &req, "s", None)["body"].get("expires_time").is_none());
        let report = Problem::ValidityTooLong { max: 60 }.report("p".into(), &req);
        assert_eq!(report["pthid"], "req-1");
        assert_eq!(report["body"]["code"], "e.p.validity_too_long");
        assert_eq!(report["body"]["problem_items"], json!([{"max_validity_seconds": 60}]));
        // In a thread already: the thread's ID.
        let threaded = json!({"id": "m-2", "thid": "t-1"});
        assert_eq!(Problem::ShortUrlInvalid.report("p".into(), &threaded)["pthid"], "t-1");
        let inv = json!({"type": INVALIDATE_SHORTENED_URL, "id": "inv-1"});
        assert_eq!(ack("a".into(), &inv)["ack"], json!(["inv-1"]));
    }

    #[test]
    fn invalidation_names_one_of_our_links_and_only_its_requester_may_switch_it_off() {
        let base = PublicUrl::parse("https://0x1f.ie").unwrap();
        let named = |s: &str| invalidated_link(&json!({"shortened_url": s}), &base);
        assert_eq!(named("https://0x1f.ie/H83if").unwrap().as_str(), "H83if");
        assert_eq!(named("https://0x1f.ie/H83if?_oobid=x").unwrap().as_str(), "H83if");
        for other in [
            "https://evil.example/H83if",
            "http://0x1f.ie/H83if",
            "https://0x1f.ie/H83if/x",
            "https://0x1f.ie/",
            "nope",
        ] {
            assert_eq!(named(other), Err(Problem::ShortUrlInvalid), "{other}");
        }
        let live = LinkState { requested_by: Some("did:peer:2.owner".into()), inactive: false, expired: false };
        assert_eq!(check_invalidation(Some(&live), "did:peer:2.owner"), Ok(()));
        assert_eq!(check_invalidation(Some(&live), "did:peer:2.other"), Err(Problem::RejectedInvalidation));
        let by_editor = LinkState { requested_by: None, ..live.clone() };
        assert_eq!(check_invalidation(Some(&by_editor), "did:peer:2.owner"), Err(Problem::RejectedInvalidation));
        for gone in [LinkState { inactive: true, ..live.clone() }, LinkState { expired: true, ..live.clone() }] {
            assert_eq!(check_invalidation(Some(&gone), "did:peer:2.owner"), Err(Problem::ShortUrlInvalid));
            assert_eq!(check_invalidation(Some(&gone), "did:peer:2.other"), Err(Problem::ShortUrlInvalid));
        }
        assert_eq!(check_invalidation(None, "did:peer:2.owner"), Err(Problem::ShortUrlInvalid));
    }
}
