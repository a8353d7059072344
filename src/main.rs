//! The `couchlink` binary: parse flags, set up logging, hand off to the command.

#![forbid(unsafe_code)]

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;
use couchlink::cmd::Cli;
use couchlink::errors::Causes;

/// mimalloc: fewer cycles per request than glibc's allocator under many small, short-lived
/// allocations on several threads, and less fragmentation for a large link cache.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    // Settings from COUCHLINK_ENV_FILE first: the flags' defaults read them from the environment.
    if let Err(e) = couchlink::cmd::env_file::load() {
        eprintln!("couchlink: {}", Causes(&e));
        return ExitCode::FAILURE;
    }
    let cli = Cli::parse();
    // Operator messages go through tracing to stderr: coloured only on a terminal, stamped with
    // the time only for the long-running server. `RUST_LOG` overrides the level.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "couchlink=info".into());
    let logs = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .with_env_filter(filter);
    if cli.command.is_long_running() {
        logs.init();
    } else {
        logs.without_time().init();
    }
    match cli.command.execute() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // The one line a failed command leaves: what failed and why.
            eprintln!("couchlink: {}", Causes(&*e));
            ExitCode::FAILURE
        }
    }
}
