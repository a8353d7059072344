//! The access log (docs/reference.md, "Access log"): one space-separated line per request, one file per
//! UTC day, written by a thread of its own from a queue bounded in bytes (docs/operations.md,
//! "Faults").
//!
//! - [`format`]: one request as one line: its fields, their escaping, this thread's memory of the
//!   User-Agents it encoded.
//! - [`writer`]: the batches, the bounded queue and the thread that writes them; what is lost,
//!   counted; the log's health; the last lines at shutdown.
//! - [`files`]: the day's files, and the folder an operator may remove or replace meanwhile.

pub mod files;
pub mod format;
pub mod writer;

pub use format::{format_line, logged_target, Entry, LOGGED_TARGET_BYTES};
pub use writer::{AccessLog, Flusher, LogHealth, LogOptions, OpenError, DEFAULT_QUEUE_BYTES, FLUSH_INTERVAL};
