//! couchlink end to end: a real CouchDB API, couchlink on port 0, one database per test.

mod access_log;
mod admin_plane;
mod cookies;
mod feed;
mod freshness;
mod helpers;
mod redirects;
mod resolution;
mod startup;
