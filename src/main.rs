//! The `couchlink` binary: parse flags, set up logging, bind, hand off to the library.

use std::process::ExitCode;

use clap::Parser;
use couchlink::config::{Cli, Command};
use tokio::net::TcpListener;

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "couchlink=info".into()),
        )
        .init();
    let runtime = tokio::runtime::Runtime::new().expect("cannot start the tokio runtime");
    let result = runtime.block_on(async {
        match cli.command {
            Command::Serve(args) => {
                let listener = TcpListener::bind(args.listen)
                    .await
                    .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", args.listen))?;
                let config = args.into_config(listener.local_addr()?);
                eprintln!("couchlink: serving redirects on {}", config.public_url);
                couchlink::serve::run(config, listener, shutdown_signal()).await?;
                Ok::<_, anyhow::Error>(())
            }
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("couchlink: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Completes on SIGTERM or SIGINT.
async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("cannot install the SIGTERM handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}
