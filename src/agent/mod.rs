//! The DIDComm v2 url-shortener agent (the "Shorten URL" protocol, seed 000), started: its
//! identity, its envelopes and the protocol's rules so far (no listener yet). Never on the
//! redirect path.
//!
//! - [`identity`]: the agent's X25519 and Ed25519 keys in an owner-only JWK file, and its DID.
//! - [`peer_did`]: `did:peer:2` DIDs made from keys, and resolved offline back to them.
//! - [`envelope`]: encrypted and signed messages opened (sender checked), replies sealed.
//! - [`protocol`]: the Shorten URL messages checked, and the replies and problem reports built.

pub mod envelope;
pub mod identity;
pub mod peer_did;
pub mod protocol;
