//! The `couchlink` binary: parse flags, set up logging, bind, hand off to the library.

use std::process::ExitCode;

use clap::Parser;
use couchlink::config::{Cli, Command};
use couchlink::couch::CouchClient;
use couchlink::domain::LinkId;
use tokio::net::TcpListener;

/// mimalloc: fewer cycles per request than glibc's allocator under many small, short-lived
/// allocations on several threads, and less fragmentation for a large link cache.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "couchlink=info".into()),
        )
        .init();
    // Single-threaded: `serve` adds one more such runtime per extra worker thread.
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().build().expect("cannot start the tokio runtime");
    let result = runtime.block_on(async {
        match cli.command {
            Command::Serve(args) => {
                let listener = couchlink::server::bind_shareable(args.listen)
                    .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", args.listen))?;
                let admin_listener = TcpListener::bind(args.admin_listen)
                    .await
                    .map_err(|e| anyhow::anyhow!("cannot listen on {} (admin): {e}", args.admin_listen))?;
                let admin_addr = admin_listener.local_addr()?;
                let config = args.into_config(listener.local_addr()?);
                eprintln!(
                    "couchlink: serving redirects on {} (health and metrics on http://{admin_addr})",
                    config.public_url
                );
                couchlink::serve::run(config, listener, admin_listener, shutdown_signal()).await?;
                Ok::<_, anyhow::Error>(())
            }
            Command::Setup(args) => {
                let admin = CouchClient::new(&args.couch.into())?;
                let reader =
                    args.reader_password.map(|password| couchlink::setup::Reader { name: args.reader_user, password });
                println!("{}", couchlink::setup::run(&admin, reader.as_ref()).await?);
                Ok(())
            }
            Command::Create(args) => {
                let public_url = args.public_url.unwrap_or_else(|| format!("http://{}", args.listen));
                let editor = CouchClient::new(&args.couch.into())?;
                let ids = std::iter::repeat_with(LinkId::random);
                let id = couchlink::create::run(&editor, &args.url, args.expires.as_deref(), ids).await?;
                println!("{public_url}/{id}");
                Ok(())
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
