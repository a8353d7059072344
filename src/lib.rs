//! couchlink: a short-link redirect proxy backed by CouchDB.
//!
//! `GET /H83if` reads the CouchDB document `H83if` and answers `302` to its `url`, logging every
//! request and tracking every client with a cookie. Links are written only through CouchDB.
//!
//! - [`cmd`]: the subcommands (`serve`, `setup`, `create`, `qr`, `report`), each with its flags and its run.
//! - [`accept`]: binding, the connection cap and the graceful accept loop every listener shares;
//!   hyper connections for the admin listener and the agent.
//! - [`http1`]: the redirect listener's own HTTP/1 connections (httparse): pipelining, limits, drain.
//! - [`handler`]: one request in, one response out (status, headers, cookie, log line).
//! - [`resolve`]: the shortlink resolution draft's algorithm, and the checks that keep targets safe.
//! - [`store`]: the lookup seam: an in-memory link cache in front of CouchDB.
//! - [`follower`]: the `_changes` follower that keeps the cache current.
//! - [`warm`]: the cache filled from CouchDB in pages at start, while serving.
//! - [`admin`]: `/healthz` and `/metrics` on the admin listener.
//! - [`couch`]: the typed CouchDB HTTP client; every CouchDB URL is built there.
//! - [`access_log`]: the space-separated access log, rotated daily, written off-thread.
//! - [`log_retention`]: finished days of the access log gzipped, old ones deleted.
//! - [`client_ip`]: the client address, believing only trusted proxies.
//! - [`metrics`]: counters in Prometheus text format.
//! - [`errors`]: an error and its causes on one line, for operators.
//! - [`qr`]: QR tags of short links, in the smallest symbol (offline; not on the redirect path).
//! - [`report`]: link analytics from the access log files (offline; not on the redirect path).
//! - [`agent`]: the DIDComm url-shortener agent, started: its keys and `did:peer:2` DID.
//! - [`domain`]: `LinkId`, `TrackingId`, `PublicUrl`, `Link`, parsed once and trusted after.

// One `unsafe` block in all: the report's memory map of a log file (src/report/read.rs).
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod accept;
pub mod access_log;
pub mod admin;
pub mod agent;
pub mod client_ip;
pub mod cmd;
pub mod couch;
pub mod domain;
pub mod errors;
pub mod follower;
pub mod handler;
pub mod http1;
pub mod log_retention;
pub mod metrics;
pub mod qr;
pub mod report;
pub mod resolve;
pub mod store;
pub mod warm;
