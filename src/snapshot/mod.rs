//! Instant restart: the link cache written to the state directory while serving and at
//! shutdown, and read back at start, so that a restarted proxy serves from memory at once and
//! asks CouchDB only for what changed meanwhile (the `_changes` feed from the snapshot's
//! sequence: [`crate::follower::Follower::resume_from`]).
//!
//! A snapshot is used only when every check passes: its format version and checksum
//! ([`format`]), and the identity of the database it came from, which must be this database's
//! (`_local/couchlink`, made anew when a database is deleted and created again under the same
//! name). Anything else, and the proxy starts as without one, saying why in one line.

pub mod format;

use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rayon::prelude::*;
use serde_json::{json, Value};
use time::OffsetDateTime;
use tokio::sync::watch;

use crate::couch::{CouchClient, CouchError};
use crate::domain::Link;
use crate::errors::Causes;
use crate::follower::FeedStatus;
use crate::store::LinkStore;
use format::Snapshot;

/// The snapshot's file name in the state directory; written first as `links.snapshot.tmp`.
pub const FILE_NAME: &str = "links.snapshot";

/// The snapshot file in a state directory.
#[derive(Debug, Clone)]
pub struct SnapshotFile {
    dir: PathBuf,
}

impl SnapshotFile {
    /// The snapshot kept in `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        SnapshotFile { dir: dir.into() }
    }

    /// Where the snapshot is.
    pub fn path(&self) -> PathBuf {
        self.dir.join(FILE_NAME)
    }

    /// Replaces the snapshot with `bytes` so that a crash at any moment leaves either the old
    /// file or the new one, whole: written to a temporary file, flushed to disk, renamed over
    /// the old one, and the directory flushed so that the rename itself survives a power cut.
    pub fn write(&self, bytes: &[u8]) -> std::io::Result<()> {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::create_dir_all(&self.dir)?;
        let temporary = self.dir.join(format!("{FILE_NAME}.tmp"));
        // Link targets can carry invitations: readable by the proxy's own account only.
        let mut file =
            std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&temporary)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&temporary, self.path())?;
        std::fs::File::open(&self.dir)?.sync_all()
    }

    /// The snapshot's bytes; `Ok(None)` when there is none.
    pub fn read(&self) -> std::io::Result<Option<Vec<u8>>> {
        match std::fs::read(self.path()) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// Where the link cache came from, and what became of snapshots since: for `/healthz` and
/// `/metrics`.
#[derive(Default)]
pub struct SnapshotStatus {
    inner: Mutex<StatusDetail>,
}

#[derive(Default, Clone)]
struct StatusDetail {
    /// The snapshot served from at start: when it was written, and the store's epoch it
    /// filled (once the feed loses its place, the cache is CouchDB's again).
    restored_written_at: Option<i64>,
    restored_epoch: Option<u64>,
    restored_entries: usize,
    last_written_at: Option<i64>,
    writes: u64,
    failures: u64,
    last_error: Option<String>,
}

impl SnapshotStatus {
    /// Whether the cache was filled from a snapshot at start and is still that cache, brought
    /// up to date (`epoch`: the store's [`LinkStore::synced_epoch`]).
    pub fn from_snapshot(&self, epoch: Option<u64>) -> bool {
        let d = self.inner.lock().expect("snapshot status lock");
        d.restored_epoch.is_some() && d.restored_epoch == epoch
    }

    /// Snapshots written, and writes that failed.
    pub fn counts(&self) -> (u64, u64) {
        let d = self.inner.lock().expect("snapshot status lock");
        (d.writes, d.failures)
    }

    /// When the last snapshot was written (Unix seconds).
    pub fn last_written_at(&self) -> Option<i64> {
        self.inner.lock().expect("snapshot status lock").last_written_at
    }

    /// The state as JSON for `/healthz`.
    pub fn to_json(&self, epoch: Option<u64>) -> Value {
        let from_snapshot = self.from_snapshot(epoch);
        let d = self.inner.lock().expect("snapshot status lock").clone();
        let time = |t: Option<i64>| {
            t.and_then(|t| OffsetDateTime::from_unix_timestamp(t).ok())
                .and_then(|t| t.format(&time::format_description::well_known::Rfc3339).ok())
        };
        json!({
            "origin": if from_snapshot { "snapshot" } else { "couchdb" },
            "snapshot_restored": d.restored_written_at.map(|_| json!({
                "written_at": time(d.restored_written_at),
                "entries": d.restored_entries,
            })),
            "last_snapshot_written_at": time(d.last_written_at),
            "snapshot_failures": d.failures,
            "last_snapshot_error": d.last_error,
        })
    }
}

/// A snapshot restored into the store: follow the feed from `seq`.
#[derive(Debug)]
pub struct Restored {
    /// The sequence to follow `_changes` from.
    pub seq: Value,
    /// Whether the snapshot held a full warm-up (if not, one follows).
    pub complete: bool,
}

/// Fills `store` from the snapshot in `file` when it passes every check against the database
/// of `identity` (`Err`: it could not be read from CouchDB); otherwise says in one line why
/// not and returns `None`, leaving the store empty.
pub async fn restore(
    file: &SnapshotFile,
    identity: Result<&str, &CouchError>,
    database: &str,
    store: &Arc<LinkStore>,
    status: &SnapshotStatus,
) -> Option<Restored> {
    let started = Instant::now();
    let path = file.path();
    let shown = path.display();
    let reading = file.clone();
    let read = tokio::task::spawn_blocking(move || read_entries(&reading)).await.ok()?;
    let (snapshot, entries) = match read {
        Ok(Some(read)) => read,
        Ok(None) => {
            tracing::info!("no cache snapshot at {shown} yet: filling the link cache from CouchDB");
            return None;
        }
        Err(why) => {
            tracing::warn!("the cache snapshot {shown} is not used ({why}): filling the link cache from CouchDB");
            return None;
        }
    };
    let mismatch = match identity {
        Err(why) => Some(format!("cannot read this database's identity to check it: {}", Causes(why))),
        Ok(_) if snapshot.database != database => {
            Some(format!("it is of database {:?}, not {database:?}", snapshot.database))
        }
        Ok(identity) if snapshot.identity != identity => Some(format!(
            "it is of another database named {database:?} (identity {}, this one's {identity}): deleted and created again?",
            snapshot.identity
        )),
        Ok(_) => None,
    };
    if let Some(why) = mismatch {
        tracing::warn!("the cache snapshot {shown} is not used ({why}): filling the link cache from CouchDB");
        return None;
    }
    let count = entries.len();
    let restoring = store.clone();
    tokio::task::spawn_blocking(move || restoring.restore(entries)).await.ok()?;
    let age = OffsetDateTime::now_utc().unix_timestamp() - snapshot.written_at;
    {
        let mut d = status.inner.lock().expect("snapshot status lock");
        d.restored_written_at = Some(snapshot.written_at);
        d.restored_epoch = store.synced_epoch();
        d.restored_entries = count;
    }
    tracing::info!(
        "serving {count} cached entries from the snapshot {shown} (written {} ago), read in {:.2} s; catching up with CouchDB's changes since",
        Ago(age),
        started.elapsed().as_secs_f64()
    );
    Some(Restored { seq: snapshot.seq, complete: snapshot.complete })
}

/// The snapshot and its entries as the store keeps them. The links are checked again as
/// documents are (in parallel: most of a restart's time), since the snapshot may come from
/// another version of couchlink.
type ReadSnapshot = (Snapshot, Vec<(crate::domain::LinkId, crate::store::Found)>);

fn read_entries(file: &SnapshotFile) -> Result<Option<ReadSnapshot>, String> {
    let Some(bytes) = file.read().map_err(|e| format!("cannot read it: {e}"))? else { return Ok(None) };
    let mut snapshot = format::decode(&bytes).map_err(|e| e.to_string())?;
    drop(bytes);
    let entries = std::mem::take(&mut snapshot.entries)
        .into_par_iter()
        .map(|(id, parts)| (id, parts.and_then(|parts| Link::from_parts(parts).ok().map(Arc::new))))
        .collect();
    Ok(Some((snapshot, entries)))
}

/// A duration in seconds, said the way people say it.
struct Ago(i64);

impl std::fmt::Display for Ago {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0.max(0) {
            s if s < 120 => write!(f, "{s} s"),
            s if s < 7200 => write!(f, "{} min", s / 60),
            s if s < 2 * 86400 => write!(f, "{} h", s / 3600),
            s => write!(f, "{} days", s / 86400),
        }
    }
}

/// Writes snapshots every `interval` while serving and once at shutdown, off the serving
/// threads.
pub struct Snapshots {
    /// Where.
    pub file: SnapshotFile,
    /// For the database's identity.
    pub couch: CouchClient,
    /// What is written.
    pub store: Arc<LinkStore>,
    /// The sequence the cache is at.
    pub feed: Arc<FeedStatus>,
    /// Whether a warm-up fills the store (else a snapshot is never "complete").
    pub warm_start: bool,
    /// How often.
    pub interval: Duration,
    /// What became of them.
    pub status: Arc<SnapshotStatus>,
    /// Held for a whole write.
    pub writing: Writing,
}

/// One write at a time (two would share the temporary file), and the database's identity as
/// last read, with the store's epoch it was read for.
#[derive(Default)]
pub struct Writing(tokio::sync::Mutex<Option<(u64, String)>>);

/// Why one snapshot was not written.
#[derive(Debug, thiserror::Error)]
enum WriteError {
    #[error("cannot read the database's identity from CouchDB")]
    Identity(#[source] crate::couch::CouchError),
    #[error("cannot write {path}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

impl Snapshots {
    /// Writes every `interval` until `stop` turns true.
    pub async fn run(self: Arc<Self>, mut stop: watch::Receiver<bool>) {
        while !*stop.borrow() {
            tokio::select! {
                _ = tokio::time::sleep(self.interval) => {}
                _ = stop.changed() => return,
            }
            self.write_once().await;
        }
    }

    /// Writes one snapshot, when the feed vouches for the cache; says so when it fails.
    pub async fn write_once(&self) {
        let mut identity = self.writing.0.lock().await;
        match self.try_write(&mut identity).await {
            Ok(Some(entries)) => tracing::debug!(entries, "cache snapshot written"),
            Ok(None) => {}
            Err(e) => {
                let message = Causes(&e).to_string();
                tracing::warn!("cache snapshot not written: {message}; a restart fills the cache from CouchDB");
                let mut d = self.status.inner.lock().expect("snapshot status lock");
                d.failures += 1;
                d.last_error = Some(message);
            }
        }
    }

    async fn try_write(&self, identity: &mut Option<(u64, String)>) -> Result<Option<usize>, WriteError> {
        // Only a cache the feed vouches for, with the identity of the database of that epoch
        // (read again once the feed lost its place: the database may have been created anew).
        let Some(epoch) = self.store.synced_epoch() else { return Ok(None) };
        let id = match identity {
            Some((at, id)) if *at == epoch => id.clone(),
            _ => {
                let id = self.couch.database_identity().await.map_err(WriteError::Identity)?;
                *identity = Some((epoch, id.clone()));
                id
            }
        };
        let (store, feed, file) = (self.store.clone(), self.feed.clone(), self.file.clone());
        let complete = self.warm_start && !store.is_warming();
        let database = self.couch.database().to_owned();
        let written = tokio::task::spawn_blocking(move || {
            // The sequence before the entries: each entry is at least as new, and changes
            // after it are applied again (idempotently) on restart.
            let seq = feed.last_seq()?;
            let entries = store.entries();
            if store.synced_epoch() != Some(epoch) {
                return None;
            }
            let snapshot = Snapshot {
                identity: id,
                database,
                seq,
                written_at: OffsetDateTime::now_utc().unix_timestamp(),
                complete,
                entries: entries.into_iter().map(|(id, found)| (id, found.map(|link| link.parts()))).collect(),
            };
            let count = snapshot.entries.len();
            Some(file.write(&format::encode(&snapshot)).map(|()| (count, snapshot.written_at)))
        })
        .await
        .ok()
        .flatten();
        match written {
            None => Ok(None),
            Some(Ok((count, at))) => {
                let mut d = self.status.inner.lock().expect("snapshot status lock");
                d.writes += 1;
                d.last_written_at = Some(at);
                d.last_error = None;
                Ok(Some(count))
            }
            Some(Err(source)) => Err(WriteError::Io { path: self.file.path().display().to_string(), source }),
        }
    }
}
