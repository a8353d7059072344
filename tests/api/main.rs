//! couchlink end to end: a real CouchDB API, couchlink on port 0, one database per test.

#[path = "../support/mod.rs"]
mod support;

mod access_log;
mod admin_plane;
#[cfg(feature = "agent")]
mod agent;
mod clicks;
mod companions;
mod console;
mod cookies;
mod domains;
mod edges;
mod fallback;
mod feed;
mod freshness;
mod history;
mod hostile_documents;
mod http1;
mod import;
mod limits;
mod passwords;
mod qr;
mod quickstart;
mod redirects;
mod report;
mod resolution;
mod roles;
mod rotation;
mod snapshot;
mod startup;
mod targets;
mod upgrade;
mod warm;
