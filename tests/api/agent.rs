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
