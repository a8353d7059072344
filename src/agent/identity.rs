//! The agent's keys: an X25519 key-agreement key and an Ed25519 authentication key, kept in a
//! JWK file readable by its owner only, created on first run; and the `did:peer:2` made of them.

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use affinidi_crypto::jose::key_agreement::{Curve, PrivateKeyAgreement};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde::{Deserialize, Serialize};

use super::peer_did;

/// The agent's private keys. Never logged: `Debug` shows only the public halves.
pub struct Identity {
    x25519: [u8; 32],
    ed25519: [u8; 32],
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Identity")
            .field("x25519_public", &URL_SAFE_NO_PAD.encode(self.x25519_public()))
            .field("ed25519_public", &URL_SAFE_NO_PAD.encode(self.ed25519_public()))
            .finish()
    }
}

/// Why the keys file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum KeysError {
    /// It could not be read, created or written.
    #[error("the agent's keys file {}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
    /// Others than its owner may read or write it.
    #[error(
        "the agent's keys file {} may be read by others (mode {mode:o}): run `chmod 600` on it, and \
         consider the keys exposed",
        path.display()
    )]
    Exposed {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// It is not the two JWKs this agent writes.
    #[error("the agent's keys file {} is not an X25519 and an Ed25519 private JWK: {why}", path.display())]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What is wrong (said in the message, so no source of it).
        why: BadKeys,
    },
}

/// What is wrong with the keys file's contents.
#[derive(Debug, thiserror::Error)]
pub enum BadKeys {
    /// Not the JSON of a keys file.
    #[error(transparent)]
    Json(serde_json::Error),
    /// No OKP key of this curve.
    #[error("no {0} key")]
    NoKey(&'static str),
    /// The private half of this curve's key is not 32 bytes of base64url.
    #[error("the {0} key's \"d\" is not 32 bytes of base64url")]
    Private(&'static str),
    /// A public half that does not match its private half: the file was edited by hand.
    #[error("a key's \"x\" is not the public half of its \"d\"")]
    Mismatch,
}

/// The file's contents: two OKP private JWKs (RFC 8037).
#[derive(Serialize, Deserialize)]
struct KeysFile {
    keys: Vec<Jwk>,
}

#[derive(Serialize, Deserialize)]
struct Jwk {
    kty: String,
    crv: String,
    x: String,
    d: String,
}

impl Identity {
    /// New random keys.
    pub fn generate() -> Identity {
        Identity { x25519: rand::random(), ed25519: rand::random() }
    }

    /// The keys in `path`, or new ones written there (mode 0600, never overwriting a file that
    /// appeared meanwhile) when there is no file yet; `true` when they are new.
    pub fn load_or_create(path: &Path) -> Result<(Identity, bool), KeysError> {
        let io = |source| KeysError::Io { path: path.to_owned(), source };
        match std::fs::read(path) {
            Ok(bytes) => {
                let mode = std::fs::metadata(path).map_err(io)?.permissions().mode() & 0o777;
                if mode & 0o077 != 0 {
                    return Err(KeysError::Exposed { path: path.to_owned(), mode });
                }
                Ok((
                    Identity::from_json(&bytes).map_err(|why| KeysError::Malformed { path: path.to_owned(), why })?,
                    false,
                ))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let identity = Identity::generate();
                let mut file =
                    std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path).map_err(io)?;
                file.write_all(&identity.to_json()).and_then(|()| file.sync_all()).map_err(io)?;
                Ok((identity, true))
            }
            Err(e) => Err(io(e)),
        }
    }

    fn to_json(&self) -> Vec<u8> {
        let jwk = |crv: &str, public: [u8; 32], private: &[u8; 32]| Jwk {
            kty: "OKP".into(),
            crv: crv.into(),
            x: URL_SAFE_NO_PAD.encode(public),
            d: URL_SAFE_NO_PAD.encode(private),
        };
        let file = KeysFile {
            keys: vec![
                jwk("X25519", self.x25519_public(), &self.x25519),
                jwk("Ed25519", self.ed25519_public(), &self.ed25519),
            ],
        };
        serde_json::to_vec_pretty(&file).expect("keys serialise")
    }

    fn from_json(bytes: &[u8]) -> Result<Identity, BadKeys> {
        let file: KeysFile = serde_json::from_slice(bytes).map_err(BadKeys::Json)?;
        let private = |crv: &'static str| -> Result<([u8; 32], String), BadKeys> {
            let jwk = file.keys.iter().find(|k| k.kty == "OKP" && k.crv == crv).ok_or(BadKeys::NoKey(crv))?;
            let d = URL_SAFE_NO_PAD.decode(&jwk.d).ok().and_then(|d| d.try_into().ok());
            Ok((d.ok_or(BadKeys::Private(crv))?, jwk.x.clone()))
        };
        let ((x25519, x_public), (ed25519, e_public)) = (private("X25519")?, private("Ed25519")?);
        let identity = Identity { x25519, ed25519 };
        // A public half that does not match its private half: the file was edited by hand.
        if URL_SAFE_NO_PAD.encode(identity.x25519_public()) != x_public
            || URL_SAFE_NO_PAD.encode(identity.ed25519_public()) != e_public
        {
            return Err(BadKeys::Mismatch);
        }
        Ok(identity)
    }

    /// The X25519 key-agreement private key, for the DIDComm library.
    pub fn key_agreement(&self) -> PrivateKeyAgreement {
        PrivateKeyAgreement::from_raw_bytes(Curve::X25519, &self.x25519).expect("any 32 bytes are an X25519 key")
    }

    /// The Ed25519 signing key (its 32-byte seed), for the DIDComm library.
    pub fn signing_key(&self) -> &[u8; 32] {
        &self.ed25519
    }

    /// The X25519 public key.
    pub fn x25519_public(&self) -> [u8; 32] {
        self.key_agreement().public_key().to_public_bytes().try_into().expect("an X25519 public key is 32 bytes")
    }

    /// The Ed25519 public key.
    pub fn ed25519_public(&self) -> [u8; 32] {
        affinidi_crypto::jose::signing::public_key_from_private(&self.ed25519)
    }

    /// The agent's DID: `did:peer:2` with both keys and a DIDCommMessaging service at `endpoint`.
    pub fn did(&self, endpoint: &str) -> String {
        peer_did::encode(&self.x25519_public(), &self.ed25519_public(), endpoint)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_created_once_owner_only_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agent-keys.json");
        let (first, created) = Identity::load_or_create(&path).unwrap();
        assert!(created);
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        let (again, created) = Identity::load_or_create(&path).unwrap();
        assert!(!created);
        assert_eq!(first.did("https://agent.example/didcomm"), again.did("https://agent.example/didcomm"));
        let did = first.did("https://agent.example/didcomm");
        let peer = peer_did::resolve(&did).unwrap();
        assert_eq!(peer.key_agreement[0].bytes, first.x25519_public());
        assert_eq!(peer.authentication[0].bytes, first.ed25519_public());
        assert_eq!(peer.services[0].uri, "https://agent.example/didcomm");
        // Nothing secret in its Debug form.
        let text = String::from_utf8(first.to_json()).unwrap();
        let secret: serde_json::Value = serde_json::from_str(&text).unwrap();
        let d = secret["keys"][0]["d"].as_str().unwrap();
        assert!(!format!("{first:?}").contains(d));
    }

    #[test]
    fn a_file_others_can_read_or_that_is_not_the_keys_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agent-keys.json");
        Identity::load_or_create(&path).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(matches!(Identity::load_or_create(&path), Err(KeysError::Exposed { mode: 0o644, .. })));

        let edited = dir.path().join("edited.json");
        let mut json: serde_json::Value = serde_json::from_slice(&Identity::generate().to_json()).unwrap();
        json["keys"][1]["x"] = serde_json::Value::String(URL_SAFE_NO_PAD.encode([7u8; 32]));
        let cases = [("garbage", b"not json".to_vec()), ("edited", serde_json::to_vec(&json).unwrap())];
        for ((name, contents), why) in cases.into_iter().zip(["expected ident", "a key's \"x\" is not the public half"])
        {
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&edited)
                .unwrap()
                .write_all(&contents)
                .unwrap();
            let result = Identity::load_or_create(&edited);
            assert!(matches!(&result, Err(KeysError::Malformed { .. })), "{name}: {result:?}");
            assert!(result.unwrap_err().to_string().contains(why), "{name}");
            std::fs::remove_file(&edited).unwrap();
        }
    }
}
