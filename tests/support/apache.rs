//! Apache CouchDB 3 itself, a single node or a 3-node cluster: nodes a user started (the official
//! image, Apache's packages), named in `COUCHLINK_TEST_SINGLE_NODE` and
//! `COUCHLINK_TEST_CLUSTER_NODES` (`host:port`, admin `admin`/`password`), with the commands that
//! stop and start node `{n}` in `COUCHLINK_TEST_NODE_STOP`/`_START`; or else nodes started for one
//! test from the release that `couchdb.sh` runs (the shared `couchdb/couchdb.sh` beside this
//! project, or the one `COUCHLINK_COUCHDB_SH` names), and stopped when the test ends.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use tempfile::TempDir;

use super::couch::Couch;
use super::eventually::{eventually, holds};

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

/// `N` free ports, each another: all are held until all are chosen (ports chosen one after
/// another may be the same one twice, the first given back before the second is asked for).
pub fn free_ports<const N: usize>() -> [u16; N] {
    let held: Vec<_> = (0..N).map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap()).collect();
    std::array::from_fn(|i| held[i].local_addr().unwrap().port())
}

/// A single node or a cluster: started under a folder of its own, or the user's.
pub struct ApacheCouchDb {
    /// Where this test's nodes run (`None`: the user's nodes).
    dir: Option<TempDir>,
    /// Each node's `host:port`.
    pub hosts: Vec<String>,
    /// The user's commands that stop and start node `{n}` (1-based).
    control: Option<(String, String)>,
}

/// The user's nodes in variable `name`, if it is set: `host:port` separated by commas.
fn given(name: &str) -> Option<Vec<String>> {
    let list = std::env::var(name).ok()?;
    Some(list.split(',').map(|h| h.trim().trim_start_matches("http://").trim_end_matches('/').to_owned()).collect())
}

impl ApacheCouchDb {
    /// One node, `single_node = true`.
    pub fn single() -> ApacheCouchDb {
        if let Some(hosts) = given("COUCHLINK_TEST_SINGLE_NODE") {
            return ApacheCouchDb { dir: None, hosts, control: None };
        }
        // Checked before any node exists, so that a missing script fails here, once.
        couchdb_sh();
        let port = free_port();
        let db = ApacheCouchDb {
            dir: Some(tempfile::tempdir().unwrap()),
            hosts: vec![format!("127.0.0.1:{port}")],
            control: None,
        };
        db.script(&["start", &db.dir(), "--port", &port.to_string(), "--admin", &admin()]);
        db
    }

    /// Three nodes joined into one cluster (q=2, n=3).
    pub fn cluster() -> ApacheCouchDb {
        if let Some(hosts) = given("COUCHLINK_TEST_CLUSTER_NODES") {
            let command = |name: &str| {
                std::env::var(name).unwrap_or_else(|_| {
                    panic!("with COUCHLINK_TEST_CLUSTER_NODES, set {name} to the command that does it to node {{n}}")
                })
            };
            let control = Some((command("COUCHLINK_TEST_NODE_STOP"), command("COUCHLINK_TEST_NODE_START")));
            return ApacheCouchDb { dir: None, hosts, control };
        }
        couchdb_sh();
        let ports = free_ports::<3>();
        let db = ApacheCouchDb {
            dir: Some(tempfile::tempdir().unwrap()),
            hosts: ports.iter().map(|p| format!("127.0.0.1:{p}")).collect(),
            control: None,
        };
        let ports = ports.map(|p| p.to_string()).join(",");
        db.script(&["cluster", &db.dir(), "--ports", &ports, "--admin", &admin()]);
        db
    }

    fn dir(&self) -> String {
        self.dir.as_ref().map(|d| d.path().display().to_string()).unwrap_or_default()
    }

    fn port(&self, i: usize) -> String {
        self.hosts[i].rsplit(':').next().unwrap_or_default().to_owned()
    }

    /// Runs the user's `command` for node `i`.
    fn user_command(command: &str, i: usize) {
        let command = command.replace("{n}", &(i + 1).to_string());
        let status = Command::new("sh").args(["-c", &command]).status().expect("sh runs");
        assert!(status.success(), "{command:?} failed");
    }

    fn script(&self, args: &[&str]) {
        let status = Command::new(couchdb_sh()).args(args).status().expect("couchdb.sh runs");
        assert!(status.success(), "couchdb.sh {args:?} failed");
    }

    /// Node `i`'s URL, e.g. `http://127.0.0.1:15984`.
    pub fn url(&self, i: usize) -> String {
        format!("http://{}", self.hosts[i])
    }

    /// Node `i` as a test server (admin credentials included).
    pub fn couch(&self, i: usize) -> Couch {
        Couch::at(&self.url(i), Some(ADMIN.0.into()), Some(ADMIN.1.into()))
    }

    /// Kills node `i` (a cluster's).
    pub fn stop_node(&self, i: usize) {
        match &self.control {
            Some((stop, _)) => Self::user_command(stop, i),
            None => self.script(&["node-stop", &self.dir(), &self.port(i), "--admin", &admin()]),
        }
    }

    /// Starts node `i` again; returns once it answers `/_up`.
    pub fn start_node(&self, i: usize) {
        match &self.control {
            Some((_, start)) => Self::user_command(start, i),
            None => self.script(&["node-start", &self.dir(), &self.port(i), "--admin", &admin()]),
        }
    }

    /// Waits (at most 30 s) until `path` answers 200 on every node, as the admin: on a cluster, a
    /// database or document written through one node reaches the others a moment later.
    pub async fn wait_on_every_node(&self, path: &str) {
        let started = Instant::now();
        for i in 0..self.hosts.len() {
            let url = format!("{}/{path}", self.url(i));
            let what = format!("{url} answers 200");
            // 30 s for all the nodes together.
            eventually(&what, Duration::from_secs(30).saturating_sub(started.elapsed()), || async {
                let answer = super::couch::http().get(&url).basic_auth(ADMIN.0, Some(ADMIN.1)).send().await;
                let status = answer.map(|r| r.status()).map_err(|e| e.to_string());
                holds(status.as_ref().is_ok_and(|s| s.is_success()), status)
            })
            .await;
        }
    }
}

fn admin() -> String {
    format!("{}:{}", ADMIN.0, ADMIN.1)
}

impl Drop for ApacheCouchDb {
    fn drop(&mut self) {
        if self.dir.is_none() {
            return; // the user's nodes stay as they were
        }
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
