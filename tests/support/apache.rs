//! Apache CouchDB 3.5 itself, a single node or a 3-node cluster, started for one test from the
//! release that `couchdb.sh` runs (the shared `couchdb/couchdb.sh` beside this project, or the
//! one `COUCHLINK_COUCHDB_SH` names), and stopped when the test ends, pass or fail.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use tempfile::TempDir;

use super::couch::Couch;

/// The admin account every node gets.
pub const ADMIN: (&str, &str) = ("admin", "password");

/// `couchdb.sh`, or a panic naming what is missing: these tests never pass without CouchDB.
pub fn couchdb_sh() -> PathBuf {
    let path = match std::env::var_os("COUCHLINK_COUCHDB_SH") {
        Some(path) => PathBuf::from(path),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/couchdb/couchdb.sh"),
    };
    assert!(
        path.is_file(),
        "this test needs a real Apache CouchDB 3.5: {} is missing (set COUCHLINK_COUCHDB_SH to couchdb.sh)",
        path.display()
    );
    path
}

/// A free TCP port on loopback (free when asked; the caller binds it soon after).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Nodes started under a folder of their own.
pub struct ApacheCouchDb {
    dir: TempDir,
    /// Each node's HTTP port.
    pub ports: Vec<u16>,
}

impl ApacheCouchDb {
    /// One node, `single_node = true`.
    pub fn single() -> ApacheCouchDb {
        // Checked before any node exists, so that a missing script fails here, once.
        couchdb_sh();
        let db = ApacheCouchDb { dir: tempfile::tempdir().unwrap(), ports: vec![free_port()] };
        db.script(&["start", &db.dir(), "--port", &db.ports[0].to_string(), "--admin", &admin()]);
        db
    }

    /// Three nodes joined into one cluster (q=2, n=3).
    pub fn cluster() -> ApacheCouchDb {
        couchdb_sh();
        let db =
            ApacheCouchDb { dir: tempfile::tempdir().unwrap(), ports: vec![free_port(), free_port(), free_port()] };
        let ports = db.ports.iter().map(u16::to_string).collect::<Vec<_>>().join(",");
        db.script(&["cluster", &db.dir(), "--ports", &ports, "--admin", &admin()]);
        db
    }

    fn dir(&self) -> String {
        self.dir.path().display().to_string()
    }

    fn script(&self, args: &[&str]) {
        let status = Command::new(couchdb_sh()).args(args).status().expect("couchdb.sh runs");
        assert!(status.success(), "couchdb.sh {args:?} failed");
    }

    /// Node `i`'s URL, e.g. `http://127.0.0.1:15984`.
    pub fn url(&self, i: usize) -> String {
        format!("http://127.0.0.1:{}", self.ports[i])
    }

    /// Node `i` as a test server (admin credentials included).
    pub fn couch(&self, i: usize) -> Couch {
        Couch::at(&self.url(i), Some(ADMIN.0.into()), Some(ADMIN.1.into()))
    }

    /// Kills node `i` (a cluster's).
    pub fn stop_node(&self, i: usize) {
        self.script(&["node-stop", &self.dir(), &self.ports[i].to_string(), "--admin", &admin()]);
    }

    /// Starts node `i` again; returns once it answers `/_up`.
    pub fn start_node(&self, i: usize) {
        self.script(&["node-start", &self.dir(), &self.ports[i].to_string(), "--admin", &admin()]);
    }

    /// Waits (at most 30 s) until `path` answers 200 on every node, as the admin: on a cluster, a
    /// database or document written through one node reaches the others a moment later.
    pub async fn wait_on_every_node(&self, path: &str) {
        let started = Instant::now();
        for i in 0..self.ports.len() {
            let url = format!("{}/{path}", self.url(i));
            loop {
                let ok = super::couch::http()
                    .get(&url)
                    .basic_auth(ADMIN.0, Some(ADMIN.1))
                    .send()
                    .await
                    .is_ok_and(|r| r.status().is_success());
                if ok {
                    break;
                }
                assert!(started.elapsed() < Duration::from_secs(30), "{url} never answered 200");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
}

fn admin() -> String {
    format!("{}:{}", ADMIN.0, ADMIN.1)
}

impl Drop for ApacheCouchDb {
    fn drop(&mut self) {
        // Never a panic here: one during a failing test's unwinding aborts the whole process.
        if let Some(script) = std::env::var_os("COUCHLINK_COUCHDB_SH")
            .map(PathBuf::from)
            .or_else(|| Some(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/couchdb/couchdb.sh")))
            .filter(|p| p.is_file())
        {
            let _ = Command::new(script).args(["stop", &self.dir()]).status();
        }
    }
}
