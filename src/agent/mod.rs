//! The DIDComm v2 url-shortener agent (the "Shorten URL" protocol,
//! `https://didcomm.org/shorten-url/1.0`), run by `couchlink agent` on a listener of its own.
//! Never on the redirect path.
//!
//! - [`identity`]: the agent's X25519 and Ed25519 keys in an owner-only JWK file, and its DID.
//! - [`peer_did`]: `did:peer:2` DIDs made from keys, and resolved offline back to them.
//! - [`envelope`]: encrypted and signed messages opened (sender checked), replies sealed.
//! - [`protocol`]: the Shorten URL messages checked, and the replies and problem reports built.
//! - [`server`]: the listener: messages in, links through CouchDB, replies out.
//! - [`delivery`]: replies POSTed to senders' endpoints, never to an address a stranger picks.

pub mod delivery;
pub mod envelope;
pub mod identity;
pub mod peer_did;
pub mod protocol;
pub mod server;
