//! The DIDComm agent's envelopes against an independent implementation (didcomm-python with
//! peerdid-python, tests/support/didcomm_peer.rs): what a wallet sends opens with its sender
//! proven, and what the agent answers opens in the wallet.

use couchlink::agent::envelope::{self, EnvelopeError, KidStyle, Sender};
use couchlink::agent::identity::Identity;
use couchlink::agent::peer_did;
use serde_json::{json, Value};

use crate::support::didcomm_peer::Peer;

const ENDPOINT: &str = "https://agent.example/didcomm";

fn agent() -> (Identity, peer_did::PeerDid, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let (identity, _) = Identity::load_or_create(&dir.path().join("keys.json")).unwrap();
    let me = peer_did::resolve(&identity.did(ENDPOINT)).unwrap();
    (identity, me, dir)
}

fn request(from: Option<&str>, to: &str) -> Value {
    let mut m = json!({
        "id": "5f1c7a0e-1d1b-4c8e-9a57-3c2f1b0e9d11",
        "type": couchlink::agent::protocol::REQUEST_SHORTENED_URL,
        "to": [to],
        "body": {"url": "https://example.com/a", "goal_code": "shorten", "requested_validity_seconds": 60},
    });
    if let Some(from) = from {
        m["from"] = json!(from);
    }
    m
}

#[test]
fn authcrypt_from_a_wallet_opens_with_its_sender_proven_and_the_reply_opens_in_the_wallet() {
    let (identity, me, _dir) = agent();
    let wallet = Peer::new("http://127.0.0.1:9/wallet");
    let packed = wallet.pack("authcrypt", &request(Some(&wallet.did), &me.did), &me.did);
    let opened = envelope::open(&packed, &identity, &me).unwrap();
    assert_eq!(opened.sender, Sender::Authenticated(wallet.did.clone()));
    assert_eq!(opened.message["body"]["url"], "https://example.com/a");
    // peerdid-python names keys by 8 characters of their multibase value.
    assert_eq!(opened.style, KidStyle::Multibase(8));

    let reply = json!({"id": "r-1", "type": couchlink::agent::protocol::SHORTENED_URL, "from": me.did, "to": [wallet.did],
        "thid": opened.message["id"], "body": {"shortened_url": "https://0x1f.ie/H83if"}});
    let sealed = envelope::seal(&reply, &wallet.did, &identity, &me, opened.style).unwrap();
    let got = wallet.unpack(&sealed);
    assert_eq!(got["message"]["body"]["shortened_url"], "https://0x1f.ie/H83if");
    assert_eq!(got["metadata"]["authenticated"], true);
    assert!(got["metadata"]["encrypted_from"].as_str().unwrap().starts_with(&me.did), "{got}");
}

#[test]
fn anoncrypt_opens_but_proves_no_sender_and_signed_proves_its_signer() {
    let (identity, me, _dir) = agent();
    let wallet = Peer::new("http://127.0.0.1:9/wallet");
    // Anoncrypt: whatever `from` says, nobody is proven.
    let packed = wallet.pack("anoncrypt", &request(Some(&wallet.did), &me.did), &me.did);
    assert_eq!(envelope::open(&packed, &identity, &me).unwrap().sender, Sender::Anonymous);
    // Signed (JWS): the signer is proven.
    let signed = wallet.pack("signed", &request(Some(&wallet.did), &me.did), &me.did);
    let opened = envelope::open(&signed, &identity, &me).unwrap();
    assert_eq!(opened.sender, Sender::Authenticated(wallet.did.clone()));
}

#[test]
fn messages_for_others_tampered_or_in_plaintext_are_refused() {
    let (identity, me, _dir) = agent();
    let wallet = Peer::new("http://127.0.0.1:9/wallet");
    let stranger = Peer::new("http://127.0.0.1:9/other");
    // Encrypted for another agent.
    let elsewhere = wallet.pack("authcrypt", &request(Some(&wallet.did), &stranger.did), &stranger.did);
    assert_eq!(envelope::open(&elsewhere, &identity, &me), Err(EnvelopeError::NotForUs));
    // A ciphertext changed in transit.
    let packed = wallet.pack("authcrypt", &request(Some(&wallet.did), &me.did), &me.did);
    let mut jwe: Value = serde_json::from_str(&packed).unwrap();
    let ciphertext = jwe["ciphertext"].as_str().unwrap();
    let flipped = if ciphertext.starts_with('A') { "B" } else { "A" };
    jwe["ciphertext"] = json!(format!("{flipped}{}", &ciphertext[1..]));
    assert!(matches!(envelope::open(&jwe.to_string(), &identity, &me), Err(EnvelopeError::Crypto(_))));
    // A signature over a changed payload.
    let signed = wallet.pack("signed", &request(Some(&wallet.did), &me.did), &me.did);
    let mut jws: Value = serde_json::from_str(&signed).unwrap();
    jws["payload"] = json!(base64_url(&request(Some(&wallet.did), "did:peer:2.other").to_string()));
    assert!(envelope::open(&jws.to_string(), &identity, &me).is_err());
    // Plaintext proves nothing, and garbage is not a message.
    let plaintext = request(Some(&wallet.did), &me.did).to_string();
    assert!(matches!(envelope::open(&plaintext, &identity, &me), Err(EnvelopeError::Malformed(_))));
    assert!(matches!(envelope::open("{not json", &identity, &me), Err(EnvelopeError::Malformed(_))));
}

fn base64_url(text: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(text)
}

/// `couchlink agent` in this process, on port 0, writing to `app`'s database as the editor.
struct TestAgent {
    url: String,
    did: String,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    _keys: tempfile::TempDir,
}

impl Drop for TestAgent {
    fn drop(&mut self) {
        let _ = self.shutdown.take().map(|tx| tx.send(()));
    }
}

async fn spawn_agent(app: &TestApp, overrides: &[(&str, &str)]) -> TestAgent {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let keys = tempfile::tempdir().unwrap();
    let keys_path = keys.path().join("agent-keys.json").display().to_string();
    let mut flags: std::collections::BTreeMap<&str, String> = [
        ("--agent-public-url", url.clone()),
        ("--keys", keys_path.clone()),
        ("--couchdb-url", app.db.couch.url.clone()),
        ("--couchdb-user", EDITOR.0.to_owned()),
        ("--couchdb-password", EDITOR.1.to_owned()),
        ("--db", app.db.name.clone()),
        ("--public-url", app.base.clone()),
        ("--allow", "*".to_owned()),
        ("--max-validity", "3600".to_owned()),
    ]
    .into_iter()
    .collect();
    for (flag, value) in overrides {
        flags.insert(flag, (*value).to_owned());
    }
    let mut argv = vec!["couchlink".to_owned(), "agent".to_owned()];
    for (flag, value) in flags {
        // An empty value: a switch (`--dev-plaintext`).
        argv.push(flag.to_owned());
        if !value.is_empty() {
            argv.push(value);
        }
    }
    let args = match couchlink::cmd::Cli::try_parse_from(&argv).unwrap().command {
        couchlink::cmd::Command::Agent(args) => args,
        other => panic!("{other:?}"),
    };
    let (identity, _) = Identity::load_or_create(std::path::Path::new(&keys_path)).unwrap();
    let did = identity.did(&url);
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let listener = couchlink::lifecycle::OneListener::plain(listener.into_std().unwrap());
    tokio::spawn(couchlink::cmd::agent::run(args, identity, listener, async {
        let _ = rx.await;
    }));
    TestAgent { url, did, shutdown: Some(tx), _keys: keys }
}

impl TestAgent {
    async fn post(&self, media: &str, body: String) -> (u16, String) {
        let r = http().post(&self.url).header("Content-Type", media).body(body).send().await.unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    }

    /// `message` from `wallet` (packed `mode`, answer in the response), and the answer opened.
    async fn ask(&self, wallet: &Peer, mode: &str, message: Value) -> Value {
        let (status, body) =
            self.post(couchlink::agent::server::ENCRYPTED, wallet.pack(mode, &message, &self.did)).await;
        assert_eq!(status, 200, "{body}");
        wallet.unpack(&body)["message"].clone()
    }
}

/// How many documents the links database holds.
async fn documents(app: &TestApp) -> u64 {
    let all: Value = app.db.admin(reqwest::Method::GET, "_all_docs", None).await.json().await.unwrap();
    all["total_rows"].as_u64().unwrap()
}

fn message(kind: &str, id: &str, from: &Peer, to: &str, body: Value) -> Value {
    json!({"id": id, "type": kind, "from": from.did, "to": [to], "return_route": "all", "body": body})
}

use crate::support::*;
use clap::Parser;
use couchlink::agent::protocol::{INVALIDATE_SHORTENED_URL as INVALIDATE, REQUEST_SHORTENED_URL as REQUEST};

#[tokio::test]
async fn a_wallet_gets_a_short_url_couchlink_serves_and_only_it_can_switch_it_off() {
    let app = spawn_app().await;
    let agent = spawn_agent(&app, &[]).await;
    let (wallet, stranger) = (Peer::new("http://127.0.0.1:9/w"), Peer::new("http://127.0.0.1:9/s"));
    let body =
        json!({"url": "https://example.com/campaign?x=1", "goal_code": "shorten", "requested_validity_seconds": 600});
    let answer = agent.ask(&wallet, "authcrypt", message(REQUEST, "req-1", &wallet, &agent.did, body)).await;
    assert_eq!(answer["type"], couchlink::agent::protocol::SHORTENED_URL, "{answer}");
    assert_eq!(answer["thid"], "req-1");
    let short = answer["body"]["shortened_url"].as_str().unwrap().to_owned();
    let path = short.strip_prefix(&app.base).expect("a short URL of couchlink's");
    let expires = answer["body"]["expires_time"].as_i64().unwrap();
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    assert!((now + 590..=now + 610).contains(&expires), "{expires} vs {now}");
    app.wait_until_served(path, 302, Some("https://example.com/campaign?x=1")).await;
    // Stored through CouchDB with who asked.
    let doc: Value = app.db.admin(reqwest::Method::GET, &path[1..], None).await.json().await.unwrap();
    assert_eq!(doc["requested_by"]["did"], wallet.did);

    let invalidate = |from: &Peer, id: &str| message(INVALIDATE, id, from, &agent.did, json!({"shortened_url": short}));
    let refused = agent.ask(&stranger, "authcrypt", invalidate(&stranger, "inv-1")).await;
    assert_eq!(refused["body"]["code"], "e.p.rejected_invalidation", "{refused}");
    assert_eq!(refused["pthid"], "inv-1");
    let acked = agent.ask(&wallet, "authcrypt", invalidate(&wallet, "inv-2")).await;
    assert_eq!(acked["ack"], json!(["inv-2"]), "{acked}");
    // Within a second (the feed), the short URL is no longer served; the document stays.
    let gone = app.wait_until_served(path, 404, None).await;
    assert!(gone < std::time::Duration::from_secs(1), "{gone:?}");
    let doc: Value = app.db.admin(reqwest::Method::GET, &path[1..], None).await.json().await.unwrap();
    assert_eq!(doc["inactive"], true);
    let again = agent.ask(&wallet, "authcrypt", invalidate(&wallet, "inv-3")).await;
    assert_eq!(again["body"]["code"], "e.p.short_url_invalid", "{again}");
}

#[tokio::test]
async fn every_problem_code_comes_back_threaded_and_nothing_is_stored() {
    let app = spawn_app().await;
    let agent = spawn_agent(&app, &[]).await;
    let wallet = Peer::new("http://127.0.0.1:9/w");
    // A slug: used when free, refused when taken.
    let slug = json!({"url": "https://example.com/s", "goal_code": "shorten", "requested_validity_seconds": 60, "short_url_slug": "Sl0g1"});
    let first = agent.ask(&wallet, "authcrypt", message(REQUEST, "s-1", &wallet, &agent.did, slug.clone())).await;
    assert_eq!(first["body"]["shortened_url"], format!("{}/Sl0g1", app.base), "{first}");
    let before = documents(&app).await;
    let cases = [
        (slug, "e.p.invalid_slug"),
        (
            json!({"url": "https://e.x/", "goal_code": "shorten", "requested_validity_seconds": 3601}),
            "e.p.validity_too_long",
        ),
        (
            json!({"url": "https://e.x/", "goal_code": "shorten", "requested_validity_seconds": 0}),
            "e.p.validity_too_long",
        ),
        (json!({"url": "wss://e.x/", "goal_code": "shorten"}), "e.p.invalid_protocol_scheme"),
        (json!({"url": "https://", "goal_code": "shorten"}), "e.p.invalid_url"),
        (json!({"url": "https://e.x/", "goal_code": "shorten.v9"}), "e.p.invalid_goal_code"),
        (json!({"url": "https://e.x/", "goal_code": "shorten.oobv2"}), "e.p.invalid_url"),
        (json!({"url": "https://e.x/", "goal_code": "shorten", "short_url_slug": "too-long-slug"}), "e.p.invalid_slug"),
    ];
    for (i, (body, code)) in cases.into_iter().enumerate() {
        let id = format!("bad-{i}");
        let report = agent.ask(&wallet, "authcrypt", message(REQUEST, &id, &wallet, &agent.did, body.clone())).await;
        assert_eq!(report["type"], couchlink::agent::protocol::PROBLEM_REPORT, "{body}: {report}");
        assert_eq!(
            (report["body"]["code"].as_str(), report["pthid"].as_str()),
            (Some(code), Some(id.as_str())),
            "{body}: {report}"
        );
    }
    assert_eq!(documents(&app).await, before, "a refused request stored something");
}

#[tokio::test]
async fn strangers_anonymous_senders_and_malformed_posts_are_turned_away() {
    let app = spawn_app().await;
    let wallet = Peer::new("http://127.0.0.1:9/w");
    let agent = spawn_agent(&app, &[("--allow", &wallet.did)]).await;
    let stranger = Peer::new("http://127.0.0.1:9/s");
    let body = json!({"url": "https://example.com/", "goal_code": "shorten"});
    let before = documents(&app).await;
    let refused = agent.ask(&stranger, "authcrypt", message(REQUEST, "x-1", &stranger, &agent.did, body.clone())).await;
    assert_eq!(refused["body"]["code"], "e.p.trust", "{refused}");
    // Anoncrypt proves no sender: not the allowed wallet, whatever its `from` says.
    let anonymous = agent.ask(&wallet, "anoncrypt", message(REQUEST, "x-2", &wallet, &agent.did, body.clone())).await;
    assert_eq!(anonymous["body"]["code"], "e.p.trust", "{anonymous}");
    assert_eq!(documents(&app).await, before, "a refused sender's request stored something");
    // The allowed wallet, signed instead of encrypted: served.
    let signed = wallet.pack("signed", &message(REQUEST, "x-3", &wallet, &agent.did, body.clone()), &agent.did);
    let (status, _) = agent.post(couchlink::agent::server::SIGNED, signed).await;
    assert_eq!(status, 200);
    // Not DIDComm, not for this agent, or plaintext: refused with a clear status.
    let packed = wallet.pack("authcrypt", &message(REQUEST, "x-4", &wallet, &agent.did, body.clone()), &agent.did);
    assert_eq!(agent.post("application/json", packed).await.0, 415);
    assert_eq!(agent.post(couchlink::agent::server::ENCRYPTED, "{nope".into()).await.0, 400);
    let elsewhere =
        wallet.pack("authcrypt", &message(REQUEST, "x-5", &wallet, &stranger.did, body.clone()), &stranger.did);
    assert_eq!(agent.post(couchlink::agent::server::ENCRYPTED, elsewhere).await.0, 404);
    let plaintext = message(REQUEST, "x-6", &wallet, &agent.did, body).to_string();
    assert_eq!(agent.post(couchlink::agent::server::PLAIN, plaintext).await.0, 415);
    // The invitation names the agent's DID.
    let invitation: Value = http().get(format!("{}invitation", agent.url)).send().await.unwrap().json().await.unwrap();
    assert_eq!(invitation["from"], agent.did);
    assert_eq!(invitation["type"], "https://didcomm.org/out-of-band/2.0/invitation");
}

#[tokio::test]
async fn without_return_route_the_answer_goes_to_the_wallets_endpoint_and_links_expire() {
    let app = spawn_app().await;
    // The wallet's endpoint is plain http on loopback: both allowed only by the flags.
    let agent = spawn_agent(&app, &[("--allow-http-endpoints", "true"), ("--allow-private-endpoints", "true")]).await;
    // The wallet's DIDComm endpoint: one POST, kept.
    let inbox = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let wallet = Peer::new(&format!("http://{}/inbox", inbox.local_addr().unwrap()));
    let received = tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (mut stream, _) = inbox.accept().await.unwrap();
        let mut request = Vec::new();
        let mut buf = [0u8; 65536];
        loop {
            let n = stream.read(&mut buf).await.unwrap();
            request.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&request);
            if let Some((head, body)) = text.split_once("\r\n\r\n") {
                let length: usize = head
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase().strip_prefix("content-length: ").map(|v| v.trim().parse().unwrap())
                    })
                    .unwrap_or(0);
                if body.len() >= length {
                    stream.write_all(b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n").await.unwrap();
                    return (head.to_owned(), body.to_owned());
                }
            }
        }
    });
    let mut request = message(
        REQUEST,
        "r-1",
        &wallet,
        &agent.did,
        json!({"url": "https://example.com/soon", "goal_code": "shorten", "requested_validity_seconds": 8}),
    );
    request.as_object_mut().unwrap().remove("return_route");
    let (status, _) =
        agent.post(couchlink::agent::server::ENCRYPTED, wallet.pack("authcrypt", &request, &agent.did)).await;
    assert_eq!(status, 202);
    let (head, body) = tokio::time::timeout(std::time::Duration::from_secs(10), received).await.unwrap().unwrap();
    assert!(head.starts_with("POST /inbox "), "{head}");
    assert!(head.to_ascii_lowercase().contains("content-type: application/didcomm-encrypted+json"), "{head}");
    let answer = wallet.unpack(&body)["message"].clone();
    let short = answer["body"]["shortened_url"].as_str().unwrap().to_owned();
    let path = short.strip_prefix(&app.base).unwrap();
    app.wait_until_served(path, 302, Some("https://example.com/soon")).await;
    // Once its expiry time has passed it is no longer served, and no longer invalidatable.
    let expires = answer["body"]["expires_time"].as_i64().unwrap();
    let left = expires - time::OffsetDateTime::now_utc().unix_timestamp() + 1;
    assert!((1..=9).contains(&left), "expires in {left} s");
    // Time itself is what is tested: the link ends when its validity does.
    tokio::time::sleep(std::time::Duration::from_secs(left as u64)).await;
    app.wait_until_served(path, 404, None).await;
    let late = agent
        .ask(&wallet, "authcrypt", message(INVALIDATE, "i-1", &wallet, &agent.did, json!({"shortened_url": short})))
        .await;
    assert_eq!(late["body"]["code"], "e.p.short_url_invalid", "{late}");
}

#[tokio::test]
async fn an_oob_short_url_gives_agents_the_invitation_and_browsers_the_redirect() {
    let app = spawn_app().await;
    let agent = spawn_agent(&app, &[]).await;
    let wallet = Peer::new("http://127.0.0.1:9/w");
    let invitation = json!({"type": "https://didcomm.org/out-of-band/2.0/invitation", "id": "69212a3a-d068-4f9d-a2dd-4741bca89af3",
        "from": wallet.did, "body": {"goal_code": "issue-vc", "accept": ["didcomm/v2"]}});
    let long = format!("https://wallet.example/path?_oob={}", base64_url(&invitation.to_string()));
    let body = json!({"url": long, "goal_code": "shorten.oobv2", "requested_validity_seconds": 600});
    let answer = agent.ask(&wallet, "authcrypt", message(REQUEST, "o-1", &wallet, &agent.did, body)).await;
    let short = answer["body"]["shortened_url"].as_str().unwrap().to_owned();
    assert!(short.ends_with("?_oobid=69212a3a-d068-4f9d-a2dd-4741bca89af3"), "{short}");
    let path = short.strip_prefix(&app.base).unwrap();
    let bare = path.split('?').next().unwrap();
    app.wait_until_served(bare, 302, Some(&long)).await;
    // An agent asking for JSON gets the invitation, with or without the _oobid.
    for p in [bare, path] {
        let r = http().get(format!("{}{p}", app.base)).header("Accept", "application/json").send().await.unwrap();
        assert_eq!(r.status(), 200, "{p}");
        assert_eq!(r.headers()["content-type"], "application/json; charset=utf-8");
        assert!(r.headers().contains_key("set-cookie"));
        assert_eq!(r.json::<Value>().await.unwrap(), invitation);
    }
    // A browser gets the redirect.
    let r = app.get(bare).await;
    assert_redirects_to(&r, &long);
    // A plain link asked for JSON still redirects: only oob links answer with JSON.
    app.db.put_link("Pl41n", json!({"url": "https://example.com/plain"})).await;
    app.wait_until_served("/Pl41n", 302, Some("https://example.com/plain")).await;
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let r = client.get(format!("{}/Pl41n", app.base)).header("Accept", "application/json").send().await.unwrap();
    assert_eq!(r.status(), 302);
    // Each answer was logged: the JSON ones as 200 without a Location.
    let lines = app.wait_for_log_lines(2).await;
    assert!(lines.iter().any(|l| l.ends_with(" 200") && l.contains(bare)), "{lines:#?}");
}

#[tokio::test]
async fn unresolvable_senders_get_a_problem_report_and_plaintext_needs_the_development_flag() {
    let app = spawn_app().await;
    let agent = spawn_agent(&app, &[("--dev-plaintext", "")]).await;
    // Signed by a did:web key: nothing resolves it offline.
    let message: affinidi_messaging_didcomm::Message = serde_json::from_value(json!({"id": "w-1",
        "type": REQUEST, "from": "did:web:wallet.example", "to": [agent.did], "body": {}}))
    .unwrap();
    let signed =
        affinidi_messaging_didcomm::message::pack::pack_signed(&message, "did:web:wallet.example#key-1", &[7u8; 32])
            .unwrap();
    let r = http()
        .post(&agent.url)
        .header("Content-Type", couchlink::agent::server::SIGNED)
        .body(signed)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    assert_eq!(r.headers()["content-type"], couchlink::agent::server::PLAIN);
    let report: Value = r.json().await.unwrap();
    assert_eq!(
        (report["type"].as_str(), report["body"]["code"].as_str()),
        (Some(couchlink::agent::protocol::PROBLEM_REPORT), Some("e.p.did")),
        "{report}"
    );
    // With the development flag, plaintext is taken (its `from` on trust) and answered in
    // plaintext.
    let wallet = Peer::new("http://127.0.0.1:9/w");
    let body = json!({"url": "https://example.com/dev", "goal_code": "shorten", "requested_validity_seconds": 60});
    let plaintext = message_json(&wallet, &agent.did, body);
    let (status, answer) = agent.post(couchlink::agent::server::PLAIN, plaintext).await;
    assert_eq!(status, 200, "{answer}");
    let got: Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(got["type"], couchlink::agent::protocol::SHORTENED_URL, "{got}");
    assert_eq!(got["thid"], "p-1");
}

fn message_json(from: &Peer, to: &str, body: Value) -> String {
    message(REQUEST, "p-1", from, to, body).to_string()
}

/// A listener of the test's own that counts the connections reaching it and answers each with
/// `response`.
struct Counting {
    url: String,
    hits: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl Counting {
    async fn start(response: &'static str) -> Counting {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/inbox", listener.local_addr().unwrap());
        let hits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = hits.clone();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut buf = [0u8; 65536];
                    let _ = tokio::time::timeout(std::time::Duration::from_millis(500), stream.read(&mut buf)).await;
                    let _ = stream.write_all(response.as_bytes()).await;
                });
            }
        });
        Counting { url, hits }
    }

    fn hits(&self) -> usize {
        self.hits.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// A request that asks to be answered at the sender's endpoint (no `return_route`).
fn to_endpoint(id: &str, from: &Peer, to: &str) -> Value {
    let mut m = message(REQUEST, id, from, to, json!({"url": "https://example.com/", "goal_code": "shorten"}));
    m.as_object_mut().unwrap().remove("return_route");
    m
}

#[tokio::test]
async fn the_agent_never_fetches_for_strangers_nor_tells_what_an_endpoint_answered() {
    let app = spawn_app().await;
    let ok = "HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";
    let inbox = Counting::start(ok).await;
    let stranger = Peer::new(&inbox.url);
    let wallet = Peer::new(&inbox.url);
    let open = [("--allow-http-endpoints", "true"), ("--allow-private-endpoints", "true")];
    let allowing_wallet = [open[0], open[1], ("--allow", wallet.did.as_str())];

    // 1. A sender the allow list refuses: its report in this response only, no request out.
    let agent = spawn_agent(&app, &allowing_wallet).await;
    let before = documents(&app).await;
    let envelope = stranger.pack("authcrypt", &to_endpoint("s-1", &stranger, &agent.did), &agent.did);
    let (status, body) = agent.post(couchlink::agent::server::ENCRYPTED, envelope).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(stranger.unpack(&body)["message"]["body"]["code"], "e.p.trust");
    assert_eq!(inbox.hits(), 0, "a refused sender made the agent send a request");
    assert_eq!(documents(&app).await, before);

    // 2. Plain http and loopback endpoints, each refused unless its flag allows it.
    for flags in [&[][..], &[open[0]], &[open[1]]] {
        let agent = spawn_agent(&app, flags).await;
        let envelope = wallet.pack("authcrypt", &to_endpoint("s-2", &wallet, &agent.did), &agent.did);
        let (status, body) = agent.post(couchlink::agent::server::ENCRYPTED, envelope).await;
        assert_eq!((status, body.as_str()), (502, "not delivered\n"), "{flags:?}");
        assert_eq!(inbox.hits(), 0, "{flags:?}: an endpoint the policy refuses got a request");
    }

    // 3. CouchDB's own address is never an endpoint, whatever the flags say.
    let couchdb = Peer::new(&format!("{}/_users", app.db.couch.url));
    let agent = spawn_agent(&app, &open).await;
    let envelope = couchdb.pack("authcrypt", &to_endpoint("s-3", &couchdb, &agent.did), &agent.did);
    assert_eq!(agent.post(couchlink::agent::server::ENCRYPTED, envelope).await, (502, "not delivered\n".into()));

    // 4. A redirect is not followed, and neither its status nor a body is reported back.
    let target = Counting::start(ok).await;
    let redirect: &'static str = Box::leak(
        format!("HTTP/1.1 302 Found\r\nlocation: {}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n", target.url)
            .into_boxed_str(),
    );
    let redirecting = Counting::start(redirect).await;
    let secret =
        Counting::start("HTTP/1.1 500 Oops\r\ncontent-length: 21\r\nconnection: close\r\n\r\ncouchlink_secret_word")
            .await;
    for endpoint in [&redirecting, &secret] {
        let sender = Peer::new(&endpoint.url);
        let envelope = sender.pack("authcrypt", &to_endpoint("s-4", &sender, &agent.did), &agent.did);
        assert_eq!(agent.post(couchlink::agent::server::ENCRYPTED, envelope).await, (502, "not delivered\n".into()));
        assert_eq!(endpoint.hits(), 1);
    }
    assert_eq!(target.hits(), 0, "a redirect was followed");

    // 5. A working endpoint: "delivered", nothing more.
    let envelope = wallet.pack("authcrypt", &to_endpoint("s-5", &wallet, &agent.did), &agent.did);
    assert_eq!(agent.post(couchlink::agent::server::ENCRYPTED, envelope).await, (202, "delivered\n".into()));
    assert_eq!(inbox.hits(), 1);
}

#[tokio::test]
async fn a_message_without_a_sender_stores_nothing_and_gets_a_problem_report() {
    let app = spawn_app().await;
    let agent = spawn_agent(&app, &[("--dev-plaintext", "")]).await;
    let wallet = Peer::new("http://127.0.0.1:9/w");
    let mut message =
        message(REQUEST, "n-1", &wallet, &agent.did, json!({"url": "https://example.com/", "goal_code": "shorten"}));
    message.as_object_mut().unwrap().remove("from");
    let before = documents(&app).await;
    let (status, answer) = agent.post(couchlink::agent::server::PLAIN, message.to_string()).await;
    assert_eq!(status, 400, "{answer}");
    let report: Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(report["type"], couchlink::agent::protocol::PROBLEM_REPORT, "{report}");
    assert_eq!(documents(&app).await, before, "a link nobody is told about was stored");
}

#[test]
fn print_did_refuses_without_the_agent_s_public_url_and_prints_a_did_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let run = |extra: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_couchlink"))
            .args(["agent", "--print-did", "--keys", "keys.json"])
            .args(extra)
            .current_dir(dir.path())
            .env_remove("COUCHLINK_AGENT_PUBLIC_URL")
            .output()
            .unwrap()
    };
    let refused = run(&[]);
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && said.contains("set COUCHLINK_AGENT_PUBLIC_URL"), "{said}");
    assert!(said.contains("127.0.0.1:8090"), "{said}");
    assert!(!dir.path().join("keys.json").exists(), "no keys made for a DID nobody could use");
    let printed = run(&["--agent-public-url", ENDPOINT]);
    assert!(printed.status.success(), "{}", String::from_utf8_lossy(&printed.stderr));
    let did = String::from_utf8(printed.stdout).unwrap();
    let resolved = peer_did::resolve(did.trim()).unwrap();
    assert_eq!(resolved.services.iter().map(|s| s.uri.as_str()).collect::<Vec<_>>(), [ENDPOINT], "{did}");
}
