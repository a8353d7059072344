//! couchlink: a short-link redirect proxy backed by CouchDB.
//!
//! `GET /H83if` reads the CouchDB document `H83if` and answers `302` to its `url`, logging every
//! request and tracking every client with a cookie. Links are written only through CouchDB.
//!
//! Layers, each importing only those below it: `main` → [`cmd`] → [`startup`] → [`lifecycle`] → [`http`] →
//! [`handler`] → [`resolve`], [`store`], [`gate`], [`access_log`], [`clicks`], [`client_ip`] → [`message`], [`domain`]
//! → [`visitor`], [`decimal`].
//!
//! - [`cmd`]: the subcommands (`serve`, `setup`, `create`, `import`, `export`, `qr`, `report`,
//!   `clicks`, `console`, `agent`), each its
//!   flags turned into a configuration, and its run.
//! - [`startup`]: the proxy assembled from a [`startup::ServerConfig`]: `Application::build`,
//!   `run_until_stopped`, and the in-place upgrade on SIGUSR2; its configuration, one domain's
//!   parts, the serving threads and the checks before serving, a room each.
//! - [`lifecycle`]: a serving process's life, shared by `serve`, `console` and `agent`: its
//!   listeners taken over or bound, SIGTERM and SIGUSR2, the hand-over to a successor, how its
//!   listeners stop, its pid file.
//! - [`handover`]: listening sockets that outlive the process: taken from systemd or from the
//!   process being upgraded, passed to the one that replaces it; systemd's notifications.
//! - [`http`]: the redirect listener's own HTTP/1 (httparse): connections over any stream,
//!   limits and refusals in one place, the one response writer; the shared accept loop.
//! - [`handler`]: the redirect policy: a request in, a reply and a log line out, no bytes.
//! - [`message`]: the request as parsed and the reply as decided, passed between the two.
//! - [`resolve`]: the shortlink resolution draft's algorithm, and the checks that keep targets safe.
//! - [`gate`]: password-protected links' gate: the password a request presents checked once per
//!   credential and hash (Argon2id, off the serving threads), wrong guesses limited per address.
//! - [`store`]: the lookup seam: an in-memory link cache in front of CouchDB.
//! - [`follower`]: the `_changes` follower that keeps the cache current.
//! - [`warm`]: the cache filled from CouchDB in pages at start, while serving.
//! - [`snapshot`]: the cache written to the state directory and read back at start (instant
//!   restart), checked against the database it came from.
//! - [`admin`]: `/healthz` and `/metrics` on the admin listener.
//! - [`couch`]: the typed CouchDB HTTP client, one file per concern (the client and its
//!   account, errors, configuration and secret files, URLs, sessions and users, databases and
//!   their `_security` and design documents, documents, `_changes`, views); every CouchDB URL
//!   is built there; what callers read of an answer (a session, an account, a database's
//!   information, a design document, a `_changes` page, bulk outcomes) is a type, documents
//!   pass through as JSON.
//! - [`design`]: the design documents couchlink installs (validation function, the console's
//!   views, the import's index), from the plain files under `couchdb/`.
//! - [`links`]: a new link stored under a fresh short ID (for `create` and the agent).
//! - [`bulk`]: one change to many links: previewed, written through `_bulk_docs` (CouchDB
//!   checks each), reported per link, undone as one from the history.
//! - [`access_log`]: the space-separated access log: each line's [`access_log::format`], the
//!   batched [`access_log::writer`] off-thread and its bounded queue, the day's
//!   [`access_log::files`].
//! - [`clicks`]: live counts per link, added up per serving thread and written to the clicks
//!   database once per interval, where a view sums every proxy; visit limits read them.
//! - [`history`]: every revision of every link recorded in the history database by the
//!   proxies (who, when, before and after), for `history`, `restore` and undo.
//! - [`log_retention`]: finished days of the access log gzipped, old ones deleted.
//! - [`client_ip`]: the client address, believing only trusted proxies.
//! - [`metrics`]: counters in Prometheus text format.
//! - [`errors`]: an error and its causes on one line, for operators.
//! - [`console`]: the console's page and its CouchDB passage, for `couchlink console` (not on
//!   the redirect path).
//! - [`qr`]: QR tags of short links, in the smallest symbol (offline; not on the redirect path).
//! - [`transfer`]: links in and out: `import` from other shorteners' exports, `export` of
//!   every link (offline; not on the redirect path).
//! - [`report`]: link analytics from the access log files (offline; not on the redirect path).
//! - `agent`: the DIDComm url-shortener agent (the `agent` feature, on by default): its keys,
//!   its `did:peer:2` DID, its listener.
//! - [`visitor`]: what a request says of who asks (operating system, kind of device, language), for link targets.
//! - [`domain`]: `LinkId`, `TrackingId`, `PublicUrl`, `Link`, `LinkWrite`, `Roles`, `CompanionDb` (where a
//!   links database's clicks and history live), parsed once and trusted after.
//! - [`decimal`]: numbers as decimal digits into a buffer, for the response writer and the log.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

/// A class of bytes as a table of 256 `bool`s, built at compile time from a predicate on `b`:
/// one load per byte where the redirect path checks or escapes every byte of a string. Defined
/// before the modules, so every module below can use it.
macro_rules! byte_table {
    (|$b:ident| $member:expr) => {{
        let mut table = [false; 256];
        let mut i = 0;
        while i < 256 {
            let $b = i as u8;
            table[i] = $member;
            i += 1;
        }
        table
    }};
}

pub mod access_log;
pub mod admin;
#[cfg(feature = "agent")]
pub mod agent;
pub mod bulk;
pub mod clicks;
pub mod client_ip;
pub mod cmd;
pub mod console;
pub mod couch;
pub mod decimal;
pub mod design;
pub mod domain;
pub mod errors;
pub mod follower;
pub mod gate;
pub mod handler;
pub mod handover;
pub mod history;
pub mod http;
pub mod lifecycle;
pub mod links;
pub mod log_retention;
pub mod message;
pub mod metrics;
pub mod qr;
pub mod report;
pub mod resolve;
pub mod snapshot;
pub mod startup;
pub mod store;
pub mod transfer;
pub mod visitor;
pub mod warm;
