//! Links in and out of a links database: `couchlink import` from the shortener people leave,
//! `couchlink export` of everything (offline tools; not on the redirect path).
//!
//! - [`entry`]: one link as an export gives it, and where it was read.
//! - [`read`]: each system's export format, one file each.
//! - [`plan`]: which ID each row gets, and which an earlier run already stored.
//! - [`validate`]: the database's own validation functions, run before anything is written.
//! - [`import`]: the import as a whole, written through `_bulk_docs`.
//! - [`export`]: every link, in a stable order, as JSON lines or CSV.

pub mod entry;
pub mod export;
pub mod import;
pub mod plan;
pub mod read;
pub mod validate;
