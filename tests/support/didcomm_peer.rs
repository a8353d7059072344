//! The agent's DIDComm counterpart in tests: SICPA's didcomm-python with peerdid-python, an
//! implementation independent of the Rust crate the agent uses, run as
//! `tests/agent/counterpart.py` in a virtualenv made once under `target/` from the pinned
//! `tests/agent/requirements.txt` (PyPI).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use serde_json::Value;

/// The virtualenv's python, made on first use (a test fails, saying why, when it cannot be).
fn python() -> &'static Path {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON.get_or_init(|| {
        let requirements = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agent/requirements.txt");
        super::venv::python("agent-venv", &requirements)
    })
}

/// Runs `counterpart.py args...` with `stdin`, returning its stdout (trimmed); panics with
/// its stderr when it fails.
pub fn run(args: &[&str], stdin: &str) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agent/counterpart.py");
    let mut child = Command::new(python())
        .arg(script)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the counterpart starts");
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "counterpart {args:?} failed:\n{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// A DIDComm identity of the counterpart: its did:peer:2 and its private JWKs.
pub struct Peer {
    /// Its DID.
    pub did: String,
    json: String,
}

impl Peer {
    /// A fresh identity with a DIDCommMessaging service at `endpoint`.
    pub fn new(endpoint: &str) -> Peer {
        let json = run(&["new-identity", endpoint], "");
        let did = serde_json::from_str::<Value>(&json).unwrap()["did"].as_str().unwrap().to_owned();
        Peer { did, json }
    }

    /// `message` packed for `to` (`authcrypt`, `anoncrypt` or `signed`).
    pub fn pack(&self, mode: &str, message: &Value, to: &str) -> String {
        run(&["pack", mode, &self.json, to], &message.to_string())
    }

    /// An envelope opened with this identity's keys: `{"message", "metadata"}`.
    pub fn unpack(&self, envelope: &str) -> Value {
        serde_json::from_str(&run(&["unpack", &self.json], envelope)).unwrap()
    }
}
