//! couchlink: a short-link redirect proxy backed by CouchDB.
//!
//! `GET /H83if` reads the CouchDB document `H83if` and answers `302` to its `url`, logging every
//! request and tracking every client with a cookie. Links are written only through CouchDB.
//!
//! - [`config`]: command-line flags and environment variables.
//! - [`setup`]: `couchlink setup`, making CouchDB ready (database, `_security`, validation, reader).
//! - [`create`]: `couchlink create`, storing a link under a fresh random ID.
//! - [`serve`]: `couchlink serve`, wiring everything below and shutting it down in order.
//! - [`server`]: the accept loop (hyper-util graceful shutdown) both listeners share.
//! - [`handler`]: one request in, one response out (status, headers, cookie, log line).
//! - [`resolve`]: seed 002's resolution algorithm, and the checks that keep targets safe.
//! - [`store`]: the lookup seam: an in-memory link cache in front of CouchDB.
//! - [`follower`]: the `_changes` follower that keeps the cache current.
//! - [`admin`]: `/healthz` and `/metrics` on the admin listener.
//! - [`couch`]: the typed CouchDB HTTP client.
//! - [`access_log`]: the space-separated access log, rotated daily, written off-thread.
//! - [`client_ip`]: the client address, believing only trusted proxies.
//! - [`metrics`]: counters in Prometheus text format.
//! - [`domain`]: `LinkId`, `TrackingId`, `Link`, parsed once and trusted after.

pub mod access_log;
pub mod admin;
pub mod client_ip;
pub mod config;
pub mod couch;
pub mod create;
pub mod domain;
pub mod follower;
pub mod handler;
pub mod metrics;
pub mod resolve;
pub mod serve;
pub mod server;
pub mod setup;
pub mod store;
