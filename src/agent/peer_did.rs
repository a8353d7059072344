//! `did:peer:2` DIDs (DIF Peer DID Method, numalgo 2): made from keys and a service endpoint,
//! and resolved offline back to them. The keys ride in the DID itself, so no registry is asked.

use affinidi_encoding::{decode_multikey_with_codec, encode_multikey, ED25519_PUB, X25519_PUB};
use base64::engine::general_purpose::{URL_SAFE, URL_SAFE_NO_PAD};
use base64::Engine;
use serde_json::Value;

/// What a `did:peer:2` DID holds: keys by purpose, in the order they appear, and services.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerDid {
    /// The DID.
    pub did: String,
    /// X25519 key-agreement keys (purpose `E`).
    pub key_agreement: Vec<Key>,
    /// Ed25519 authentication keys (purpose `V`).
    pub authentication: Vec<Key>,
    /// DIDCommMessaging service endpoints (purpose `S`).
    pub services: Vec<Service>,
}

/// A public key from a DID, with the ways its key ID may be written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Key {
    /// Its position among the DID's keys, from 1: the current spec names it `#key-{index}`.
    pub index: usize,
    /// Its multibase form, `z6LS...` or `z6Mk...` (older libraries name it `#6LS...`, a prefix of
    /// this without the `z`).
    pub multibase: String,
    /// The raw 32-byte public key.
    pub bytes: [u8; 32],
}

impl Key {
    /// Whether `kid` (`did#fragment` or `#fragment`) names this key in `did`, in either style:
    /// `#key-1` (the current spec) or `#6LSbgC4D` / the whole multibase value without its `z`
    /// (peerdid-python and other older libraries).
    pub fn is_named_by(&self, did: &str, kid: &str) -> bool {
        let fragment = match kid.split_once('#') {
            Some(("", fragment)) => fragment,
            Some((prefix, fragment)) if prefix == did => fragment,
            _ => return false,
        };
        if fragment == format!("key-{}", self.index) {
            return true;
        }
        let bare = &self.multibase[1..];
        fragment.len() >= 8 && bare.starts_with(fragment)
    }
}

/// A DIDCommMessaging service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Service {
    /// Where messages are posted.
    pub uri: String,
    /// The profiles it accepts (`didcomm/v2`).
    pub accept: Vec<String>,
    /// Mediators' keys, outermost last.
    pub routing_keys: Vec<String>,
}

/// Why a DID is not a `did:peer:2` this agent can use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PeerDidError {
    /// Not `did:peer:2.` followed by elements.
    #[error("not a did:peer:2 DID")]
    NotPeer2,
    /// An element with a purpose code this agent does not know, or none.
    #[error("unknown purpose code in element {0:?}")]
    Purpose(String),
    /// A key that is not multibase multicodec of the right type and length.
    #[error("the key {0:?} is not a {1} public key")]
    Key(String, &'static str),
    /// A service that is not base64url JSON of a DIDCommMessaging service.
    #[error("the service element is not a DIDCommMessaging service: {0}")]
    Service(String),
}

/// The `did:peer:2` of an X25519 key-agreement key, an Ed25519 authentication key and one
/// DIDCommMessaging service at `endpoint`. The service is abbreviated at its top level (`t`,
/// `s`, `dm`) but not inside the endpoint (`accept`, not `a`): peerdid-python, which
/// didcomm-python resolves with, expands only the top level, and every resolver reads the
/// long form. So the DID is the very one peerdid-python makes from the same keys.
pub fn encode(x25519: &[u8; 32], ed25519: &[u8; 32], endpoint: &str) -> String {
    // Written out rather than through `serde_json::Value`, whose maps sort their keys: the
    // order is peerdid-python's, so both make the same DID.
    let uri = Value::String(endpoint.to_owned());
    let service = format!(r#"{{"t":"dm","s":{{"uri":{uri},"accept":["didcomm/v2"]}}}}"#);
    format!(
        "did:peer:2.E{}.V{}.S{}",
        encode_multikey(X25519_PUB, x25519),
        encode_multikey(ED25519_PUB, ed25519),
        URL_SAFE_NO_PAD.encode(service)
    )
}

/// Reads a `did:peer:2` DID (offline: its keys and services are in it).
pub fn resolve(did: &str) -> Result<PeerDid, PeerDidError> {
    let elements = did.strip_prefix("did:peer:2.").ok_or(PeerDidError::NotPeer2)?;
    let mut peer = PeerDid { did: did.to_owned(), key_agreement: vec![], authentication: vec![], services: vec![] };
    let mut index = 0;
    for element in elements.split('.') {
        let (purpose, value) = element.split_at_checked(1).ok_or_else(|| PeerDidError::Purpose(element.into()))?;
        match purpose {
            "E" | "V" | "A" | "I" | "D" => {
                index += 1;
                let (codec, want) = if purpose == "E" { (X25519_PUB, "X25519") } else { (ED25519_PUB, "Ed25519") };
                let key = key(value, codec, want, index)?;
                match purpose {
                    "E" => peer.key_agreement.push(key),
                    "V" => peer.authentication.push(key),
                    // Assertion, invocation and delegation keys: counted (they take a key
                    // number) but not used by this agent.
                    _ => {}
                }
            }
            "S" => peer.services.extend(services(value)?),
            _ => return Err(PeerDidError::Purpose(element.into())),
        }
    }
    if elements.is_empty() {
        return Err(PeerDidError::NotPeer2);
    }
    Ok(peer)
}

fn key(value: &str, codec: u64, want: &'static str, index: usize) -> Result<Key, PeerDidError> {
    let wrong = || PeerDidError::Key(value.into(), want);
    let (found, bytes) = decode_multikey_with_codec(value).map_err(|_| wrong())?;
    let bytes: [u8; 32] = bytes.try_into().map_err(|_| wrong())?;
    if found != codec {
        return Err(wrong());
    }
    Ok(Key { index, multibase: value.to_owned(), bytes })
}

/// A service element: one service or an array of them, abbreviated or not, padded or not.
fn services(value: &str) -> Result<Vec<Service>, PeerDidError> {
    let bad = |why: &str| PeerDidError::Service(why.to_owned());
    let raw = URL_SAFE_NO_PAD
        .decode(value.trim_end_matches('='))
        .or_else(|_| URL_SAFE.decode(value))
        .map_err(|_| bad("not base64url"))?;
    let json: Value = serde_json::from_slice(&raw).map_err(|_| bad("not JSON"))?;
    let list = match json {
        Value::Array(items) => items,
        one => vec![one],
    };
    list.iter().map(service).collect()
}

fn service(value: &Value) -> Result<Service, PeerDidError> {
    let bad = |why: &str| PeerDidError::Service(why.to_owned());
    let field = |short: &str, long: &str| value.get(short).or_else(|| value.get(long));
    let kind = field("t", "type").and_then(Value::as_str).ok_or_else(|| bad("no type"))?;
    if kind != "dm" && kind != "DIDCommMessaging" {
        return Err(bad("not DIDCommMessaging"));
    }
    let endpoint = field("s", "serviceEndpoint").ok_or_else(|| bad("no serviceEndpoint"))?;
    let strings = |v: Option<&Value>| -> Vec<String> {
        v.and_then(Value::as_array)
            .map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_owned)).collect())
            .unwrap_or_default()
    };
    let (uri, accept, routing_keys) = match endpoint {
        // DIDComm v2.1: an object with `uri`, `accept`, `routingKeys`.
        Value::Object(o) => (
            o.get("uri").and_then(Value::as_str).ok_or_else(|| bad("no uri"))?.to_owned(),
            strings(o.get("a").or_else(|| o.get("accept"))),
            strings(o.get("r").or_else(|| o.get("routingKeys"))),
        ),
        // DIDComm v2.0: a string, with `accept` and `routingKeys` beside it.
        Value::String(uri) => (uri.clone(), strings(field("a", "accept")), strings(field("r", "routingKeys"))),
        _ => return Err(bad("serviceEndpoint is neither a string nor an object")),
    };
    Ok(Service { uri, accept, routing_keys })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Made by peerdid-python 0.5.2 (`create_peer_did_numalgo_2`) from X25519 key 0..32,
    /// Ed25519 key 32..64 and a DIDCommMessaging service at http://127.0.0.1:8080/didcomm
    /// accepting didcomm/v2.
    const FROM_PEERDID_PYTHON: &str = "did:peer:2.Ez6LSbgC4DpuCf7zxewhFPnYcyBm3YgxjEEovsehvWqZzTm8z.Vz6MkgcgPsQF6pkGw8xARWGRuohnyLCRuVYrNZkEAipKeaGUE.SeyJ0IjoiZG0iLCJzIjp7InVyaSI6Imh0dHA6Ly8xMjcuMC4wLjE6ODA4MC9kaWRjb21tIiwiYWNjZXB0IjpbImRpZGNvbW0vdjIiXX19";

    fn keys() -> ([u8; 32], [u8; 32]) {
        (std::array::from_fn(|i| i as u8), std::array::from_fn(|i| 32 + i as u8))
    }

    #[test]
    fn another_implementations_did_resolves_to_its_keys_and_service() {
        let (x, e) = keys();
        let peer = resolve(FROM_PEERDID_PYTHON).unwrap();
        assert_eq!(peer.key_agreement[0].bytes, x);
        assert_eq!(peer.authentication[0].bytes, e);
        assert_eq!(peer.services[0].uri, "http://127.0.0.1:8080/didcomm");
        assert_eq!(peer.services[0].accept, ["didcomm/v2"]);
    }

    #[test]
    fn the_did_made_is_the_one_the_other_implementation_makes_and_resolves_back() {
        let (x, e) = keys();
        let did = encode(&x, &e, "http://127.0.0.1:8080/didcomm");
        assert_eq!(did, FROM_PEERDID_PYTHON);
        let peer = resolve(&encode(&x, &e, "https://agent.example/a\"b")).unwrap();
        assert_eq!(peer.services[0].uri, "https://agent.example/a\"b");
        assert_eq!((peer.key_agreement[0].bytes, peer.authentication[0].bytes), (x, e));
        assert_eq!(peer.services[0].accept, ["didcomm/v2"]);
    }

    #[test]
    fn services_in_every_form_the_spec_allows_are_read() {
        let service = |json: &str| {
            let did = format!("did:peer:2.S{}", URL_SAFE_NO_PAD.encode(json));
            resolve(&did).unwrap().services
        };
        // Abbreviated inside the endpoint too (the current spec), with routing keys.
        let s = service(r#"{"t":"dm","s":{"uri":"https://m.example","a":["didcomm/v2"],"r":["did:key:z6Mk"]}}"#);
        assert_eq!(
            (s[0].uri.as_str(), &s[0].accept[..], &s[0].routing_keys[..]),
            ("https://m.example", &["didcomm/v2".to_owned()][..], &["did:key:z6Mk".to_owned()][..])
        );
        // Not abbreviated, DIDComm v2.0's string endpoint, and a list of two.
        let s = service(
            r#"[{"type":"DIDCommMessaging","serviceEndpoint":"https://a.example","accept":["didcomm/v2"]},{"t":"dm","s":{"uri":"https://b.example"}}]"#,
        );
        assert_eq!((s[0].uri.as_str(), s[1].uri.as_str()), ("https://a.example", "https://b.example"));
        assert_eq!(s[0].accept, ["didcomm/v2"]);
    }

    #[test]
    fn key_ids_in_both_styles_name_the_key_and_nothing_else_does() {
        let peer = resolve(FROM_PEERDID_PYTHON).unwrap();
        let (agreement, auth) = (&peer.key_agreement[0], &peer.authentication[0]);
        let did = FROM_PEERDID_PYTHON;
        for kid in [
            format!("{did}#key-1"),
            "#key-1".into(),
            format!("{did}#6LSbgC4D"),
            format!("{did}#{}", &agreement.multibase[1..]),
        ] {
            assert!(agreement.is_named_by(did, &kid), "{kid}");
            assert!(!auth.is_named_by(did, &kid), "{kid}");
        }
        assert!(auth.is_named_by(did, &format!("{did}#key-2")));
        for kid in ["did:peer:2.other#key-1", "#key-3", "#6LS", "#z6LSbgC4D", "key-1"] {
            assert!(!agreement.is_named_by(did, kid), "{kid}");
        }
    }

    #[test]
    fn what_is_not_a_usable_peer_did_is_refused() {
        let (x, _) = keys();
        let x_as_auth = format!("did:peer:2.V{}", encode_multikey(X25519_PUB, &x));
        for (did, why) in [
            ("did:peer:0z6Mk", "numalgo 0"),
            ("did:key:z6MkgcgPsQF6pkGw8xARWGRuohnyLCRuVYrNZkEAipKeaGUE", "did:key"),
            ("did:peer:2.", "no elements"),
            ("did:peer:2.Xz6Mk", "unknown purpose"),
            ("did:peer:2.Ez6MkgcgPsQF6pkGw8xARWGRuohnyLCRuVYrNZkEAipKeaGUE", "an Ed25519 key for key agreement"),
            (&x_as_auth, "an X25519 key for authentication"),
            ("did:peer:2.Ez6LSbgC4Dpu", "a truncated key"),
            ("did:peer:2.S!!!", "a service that is not base64url"),
            ("did:peer:2.SeyJ0IjoieCJ9", "a service of another type"),
        ] {
            assert!(resolve(did).is_err(), "{why}: {did}");
        }
    }
}
