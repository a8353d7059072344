//! DIDComm v2 envelopes, in and out, through Affinidi's `affinidi-messaging-didcomm`: an
//! encrypted (authcrypt or anoncrypt) or signed message opened into its plaintext and who is
//! known to have sent it, and replies sealed for their recipient's DID.

use affinidi_crypto::jose::key_agreement::{Curve, PublicKeyAgreement};
use affinidi_messaging_didcomm::jws::verify::VerifyKey;
use affinidi_messaging_didcomm::message::pack;
use affinidi_messaging_didcomm::{Message, SenderKey, SignerKey, UnpackResult};
use serde_json::Value;

use super::identity::Identity;
use super::peer_did::{self, PeerDid};

/// A message opened, with who is known to have sent it.
#[derive(Debug, Clone, PartialEq)]
pub struct Opened {
    /// The plaintext message (`id`, `type`, `from`, `body`, ...).
    pub message: Value,
    /// Whose key authenticated it.
    pub sender: Sender,
    /// How the sender's library names did:peer:2 keys (seen in how it named the agent's): the
    /// reply names both keys the same way, or the sender's library would not find them.
    pub style: KidStyle,
}

/// The two ways libraries name a did:peer:2's keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KidStyle {
    /// `#key-1`, `#key-2`, ... in order of appearance (the current spec).
    Numbered,
    /// The key's multibase value without its `z`, cut to this many characters
    /// (peerdid-python: 8; others: all of it).
    Multibase(usize),
}

impl KidStyle {
    /// The style of `fragment`, a name of `key`.
    fn of(fragment: &str) -> KidStyle {
        if fragment.starts_with("key-") {
            KidStyle::Numbered
        } else {
            KidStyle::Multibase(fragment.len())
        }
    }

    /// `key` of `did` named in this style.
    pub fn kid(self, did: &str, key: &peer_did::Key) -> String {
        match self {
            KidStyle::Numbered => format!("{did}#key-{}", key.index),
            KidStyle::Multibase(len) => {
                let bare = &key.multibase[1..];
                format!("{did}#{}", &bare[..len.min(bare.len())])
            }
        }
    }
}

/// Who sent a message, as far as its envelope proves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sender {
    /// Authcrypt or a signature, by a key of this DID (and the plaintext's `from` is this DID).
    Authenticated(String),
    /// Anoncrypt: anyone could have sent it, whatever its `from` says.
    Anonymous,
}

/// Why a message could not be opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvelopeError {
    /// Not a DIDComm v2 encrypted or signed message (plaintext included: it is refused).
    #[error("not a DIDComm v2 encrypted or signed message: {0}")]
    Malformed(String),
    /// Encrypted for others only.
    #[error("the message is not encrypted for this agent's key")]
    NotForUs,
    /// The sender's DID is not one that resolves offline (did:peer:2, did:key), or lacks the key.
    #[error("cannot resolve the sender's key {kid}: {why}")]
    UnknownSender {
        /// The key ID.
        kid: String,
        /// Why.
        why: String,
    },
    /// Decryption or signature verification failed.
    #[error("the message does not decrypt or verify: {0}")]
    Crypto(String),
    /// The plaintext's `from` is not the DID whose key authenticated it.
    #[error("the message says it is from {from:?} but was authenticated by {sender}")]
    FromMismatch {
        /// The plaintext's `from`.
        from: Option<String>,
        /// The authenticated DID.
        sender: String,
    },
}

/// A public key of a DID, with the key ID to name it by.
struct DidKey {
    kid: String,
    bytes: [u8; 32],
}

/// The key-agreement (X25519) key `kid` (`did#fragment`) names, for did:peer:2 and did:key.
fn key_agreement(kid: &str) -> Result<DidKey, EnvelopeError> {
    let unknown = |why: String| EnvelopeError::UnknownSender { kid: kid.to_owned(), why };
    let (did, _) = kid.split_once('#').ok_or_else(|| unknown("a key ID is a DID and a #fragment".into()))?;
    if did.starts_with("did:key:") {
        // did:key carries an Ed25519 key; its X25519 key-agreement key is derived from it, and
        // named by its own multibase value.
        let ed = affinidi_crypto::did_key::did_key_to_ed25519_pub(did).map_err(|e| unknown(e.to_string()))?;
        let x = affinidi_crypto::did_key::ed25519_pub_to_x25519_bytes(&ed).map_err(|e| unknown(e.to_string()))?;
        let expected = format!("{did}#{}", affinidi_encoding::encode_multikey(affinidi_encoding::X25519_PUB, &x));
        return if kid == expected {
            Ok(DidKey { kid: kid.to_owned(), bytes: x })
        } else {
            Err(unknown(format!("not {expected}")))
        };
    }
    let peer = peer_did::resolve(did).map_err(|e| unknown(e.to_string()))?;
    let key = peer
        .key_agreement
        .iter()
        .find(|k| k.is_named_by(did, kid))
        .ok_or_else(|| unknown("no such key agreement key".into()))?;
    Ok(DidKey { kid: kid.to_owned(), bytes: key.bytes })
}

/// The authentication (Ed25519) key `kid` names, for did:peer:2 and did:key.
fn authentication(kid: &str) -> Result<DidKey, EnvelopeError> {
    let unknown = |why: String| EnvelopeError::UnknownSender { kid: kid.to_owned(), why };
    let (did, fragment) = kid.split_once('#').ok_or_else(|| unknown("a key ID is a DID and a #fragment".into()))?;
    if did.starts_with("did:key:") {
        let ed = affinidi_crypto::did_key::did_key_to_ed25519_pub(did).map_err(|e| unknown(e.to_string()))?;
        return if Some(fragment) == did.strip_prefix("did:key:") {
            Ok(DidKey { kid: kid.to_owned(), bytes: ed })
        } else {
            Err(unknown("not the did:key's own key".into()))
        };
    }
    let peer = peer_did::resolve(did).map_err(|e| unknown(e.to_string()))?;
    let key = peer
        .authentication
        .iter()
        .find(|k| k.is_named_by(did, kid))
        .ok_or_else(|| unknown("no such authentication key".into()))?;
    Ok(DidKey { kid: kid.to_owned(), bytes: key.bytes })
}

fn x25519(bytes: &[u8; 32]) -> PublicKeyAgreement {
    PublicKeyAgreement::from_raw_bytes(Curve::X25519, bytes).expect("any 32 bytes are an X25519 public key")
}

/// Opens `input`, an encrypted or signed message sent to the agent `me` (whose keys are
/// `identity`). Plaintext is refused: it proves nothing about its sender.
pub fn open(input: &str, identity: &Identity, me: &PeerDid) -> Result<Opened, EnvelopeError> {
    let json: Value = serde_json::from_str(input).map_err(|e| EnvelopeError::Malformed(format!("not JSON: {e}")))?;
    let crypto = |e: affinidi_messaging_didcomm::DIDCommError| EnvelopeError::Crypto(e.to_string());
    let style;
    let result = if let Some(recipients) = json.get("recipients").and_then(Value::as_array) {
        let ours = &me.key_agreement[0];
        let recipient_kid = recipients
            .iter()
            .filter_map(|r| r.pointer("/header/kid").and_then(Value::as_str))
            .find(|kid| ours.is_named_by(&me.did, kid))
            .ok_or(EnvelopeError::NotForUs)?;
        style = KidStyle::of(recipient_kid.rsplit_once('#').map_or("", |(_, f)| f));
        let private = identity.key_agreement();
        let skid = affinidi_messaging_didcomm::jwe::decrypt::authcrypt_sender_kid(input).map_err(crypto)?;
        let sender = skid.as_deref().map(key_agreement).transpose()?;
        let public = sender.as_ref().map(|k| x25519(&k.bytes));
        let sender_key = sender.as_ref().zip(public.as_ref()).map(|(k, p)| SenderKey::new(&k.kid, p));
        affinidi_messaging_didcomm::message::unpack::unpack_bound(
            input,
            Some(recipient_kid),
            Some(&private),
            sender_key,
            None,
        )
        .map_err(crypto)?
    } else if json.get("signatures").is_some() {
        let parsed = affinidi_messaging_didcomm::jws::verify::parse_jws(input).map_err(crypto)?;
        let kid = parsed
            .signatures
            .iter()
            .find_map(|s| s.kid.clone())
            .ok_or_else(|| EnvelopeError::Malformed("a signature without a kid".into()))?;
        let key = authentication(&kid)?;
        style = KidStyle::of(kid.rsplit_once('#').map_or("", |(_, f)| f));
        let verify = VerifyKey::Ed25519(key.bytes);
        affinidi_messaging_didcomm::message::unpack::unpack_bound(
            input,
            None,
            None,
            None,
            Some(SignerKey::new(&key.kid, &verify)),
        )
        .map_err(crypto)?
    } else {
        return Err(EnvelopeError::Malformed("plaintext (or not DIDComm at all)".into()));
    };
    let (message, authenticated_kid) = match result {
        UnpackResult::Encrypted { message, authenticated: true, sender_kid, .. } => (message, sender_kid),
        UnpackResult::Encrypted { message, .. } => (message, None),
        UnpackResult::Signed { message, signer_kid } => (message, signer_kid),
        _ => return Err(EnvelopeError::Malformed("an envelope this agent does not open".into())),
    };
    let plaintext = serde_json::to_value(&message).map_err(|e| EnvelopeError::Malformed(e.to_string()))?;
    let sender = match authenticated_kid {
        Some(kid) => {
            // Neither library checks that the plaintext's `from` is the authenticated sender:
            // without this, anyone could write a request in another DID's name.
            let did = kid.split_once('#').map_or(kid.as_str(), |(did, _)| did).to_owned();
            if message.from.as_deref() != Some(did.as_str()) {
                return Err(EnvelopeError::FromMismatch { from: message.from, sender: did });
            }
            Sender::Authenticated(did)
        }
        None => Sender::Anonymous,
    };
    Ok(Opened { message: plaintext, sender, style })
}

/// Seals `message` for `to` (a did:peer:2 or did:key): authcrypt from the agent, so the
/// recipient knows who answers, with did:peer:2 keys named in `style`.
pub fn seal(
    message: &Value,
    to: &str,
    identity: &Identity,
    me: &PeerDid,
    style: KidStyle,
) -> Result<String, EnvelopeError> {
    let malformed = |e: String| EnvelopeError::Malformed(e);
    let message: Message = serde_json::from_value(message.clone()).map_err(|e| malformed(e.to_string()))?;
    let recipient = if to.starts_with("did:key:") {
        let ed = affinidi_crypto::did_key::did_key_to_ed25519_pub(to).map_err(|e| malformed(e.to_string()))?;
        let x = affinidi_crypto::did_key::ed25519_pub_to_x25519_bytes(&ed).map_err(|e| malformed(e.to_string()))?;
        key_agreement(&format!("{to}#{}", affinidi_encoding::encode_multikey(affinidi_encoding::X25519_PUB, &x)))?
    } else {
        let peer = peer_did::resolve(to)
            .map_err(|e| EnvelopeError::UnknownSender { kid: to.to_owned(), why: e.to_string() })?;
        let key = peer.key_agreement.first().ok_or_else(|| malformed(format!("{to} has no key agreement key")))?;
        DidKey { kid: style.kid(to, key), bytes: key.bytes }
    };
    let ours = style.kid(&me.did, &me.key_agreement[0]);
    let public = x25519(&recipient.bytes);
    pack::pack_encrypted_authcrypt(&message, &ours, &identity.key_agreement(), &[(&recipient.kid, &public)])
        .map_err(|e| EnvelopeError::Crypto(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use affinidi_crypto::jose::key_agreement::PrivateKeyAgreement;
    use serde_json::json;

    /// A did:key sender (its X25519 key derived from its Ed25519 key, as did:key defines),
    /// packed by the same crate: the did:key path of the resolver, which the Python
    /// counterpart (peer DIDs only) does not take.
    #[test]
    fn a_did_key_sender_is_resolved_offline_and_answered() {
        let dir = tempfile::tempdir().unwrap();
        let (agent, _) = Identity::load_or_create(&dir.path().join("k.json")).unwrap();
        let me = peer_did::resolve(&agent.did("https://agent.example/")).unwrap();
        let seed: [u8; 32] = rand::random();
        let public = affinidi_crypto::jose::signing::public_key_from_private(&seed);
        let did = affinidi_crypto::did_key::ed25519_pub_to_did_key(&public);
        let x_private = affinidi_crypto::ed25519::ed25519_private_to_x25519(&seed);
        let x = PrivateKeyAgreement::from_raw_bytes(Curve::X25519, &x_private).unwrap();
        let x_public: [u8; 32] = x.public_key().to_public_bytes().try_into().unwrap();
        let kid = format!("{did}#{}", affinidi_encoding::encode_multikey(affinidi_encoding::X25519_PUB, &x_public));
        let message: Message =
            serde_json::from_value(json!({"id": "1", "type": "t", "from": did, "to": [me.did], "body": {}})).unwrap();
        let ours = KidStyle::Numbered.kid(&me.did, &me.key_agreement[0]);
        let packed =
            pack::pack_encrypted_authcrypt(&message, &kid, &x, &[(&ours, &x25519(&me.key_agreement[0].bytes))])
                .unwrap();
        let opened = open(&packed, &agent, &me).unwrap();
        assert_eq!(opened.sender, Sender::Authenticated(did.clone()));
        // And a `from` naming someone else is refused, though the envelope is sound.
        let lying: Message = serde_json::from_value(
            json!({"id": "2", "type": "t", "from": "did:key:z6MkOther", "to": [me.did], "body": {}}),
        )
        .unwrap();
        let packed =
            pack::pack_encrypted_authcrypt(&lying, &kid, &x, &[(&ours, &x25519(&me.key_agreement[0].bytes))]).unwrap();
        assert!(matches!(open(&packed, &agent, &me), Err(EnvelopeError::FromMismatch { .. })));
        // The reply is sealed for the did:key.
        let reply = json!({"id": "3", "type": "t", "from": me.did, "to": [did], "body": {}});
        let sealed = seal(&reply, &did, &agent, &me, KidStyle::Numbered).unwrap();
        let agent_public = x25519(&me.key_agreement[0].bytes);
        let got = affinidi_messaging_didcomm::message::unpack::unpack_bound(
            &sealed,
            Some(&kid),
            Some(&x),
            Some(SenderKey::new(&ours, &agent_public)),
            None,
        )
        .unwrap();
        assert!(matches!(got, UnpackResult::Encrypted { authenticated: true, message, .. } if message.id == "3"));
    }
}
