//! Test support shared by every test target: a real CouchDB server with a database per test
//! ([`couch`]), couchlink serving on port 0 ([`app`]), a TCP relay that fakes network faults
//! between them ([`relay`]) and the one way a test waits for something ([`eventually`]); for
//! the targets that need them, Apache CouchDB itself ([`apache`]) and the couchlink binary as
//! a process ([`process`]).

// Each test target uses its own part of this.
#![allow(dead_code, unused_imports)]

pub mod apache;
pub mod app;
pub mod browser;
pub mod couch;
pub mod didcomm_peer;
pub mod eventually;
pub mod process;
pub mod qr_tags;
pub mod relay;
pub mod report_fixtures;
pub mod venv;

pub use app::*;
pub use couch::*;
pub use eventually::{eventually, holds, Text};
pub use relay::*;

/// Makes `command`'s process die with the thread that spawns it (Linux `PR_SET_PDEATHSIG`), so
/// that a killed test leaves no server behind.
pub fn dies_with_its_spawner(command: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        command.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
}
