//! `couchlink agent`: the DIDComm v2 url-shortener (`https://didcomm.org/shorten-url/1.0`) on a
//! listener of its own, writing links through CouchDB's HTTP API as an editor account. Never on
//! the redirect path.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use super::CouchArgs;
use crate::agent::delivery::{Delivery, EndpointPolicy};
use crate::agent::identity::{Identity, KeysError};
use crate::agent::peer_did;
use crate::agent::server::{Agent, Allow};
use crate::couch::{CouchClient, CouchError};
use crate::domain::PublicUrl;
use crate::handover::Upgrade;
use crate::lifecycle::OneListener;

/// How long the process an upgrade starts has to serve.
const UPGRADE_TIMEOUT: Duration = Duration::from_secs(30);

/// Flags of `couchlink agent`.
#[derive(Debug, Clone, Args)]
#[command(mut_arg("couchdb_user", |a| a.help("A CouchDB account with the editor role (the agent writes links)")))]
pub struct AgentArgs {
    /// Print the agent's DID (creating its keys if there are none yet) and exit; needs the
    /// agent's public URL, which is part of the DID.
    #[arg(long)]
    pub print_did: bool,
    /// Address the agent listens on for DIDComm messages (never the redirect listener).
    #[arg(long, env = "COUCHLINK_AGENT_LISTEN", default_value = "127.0.0.1:8090")]
    pub listen: SocketAddr,
    /// The agent's DIDComm endpoint as senders reach it, e.g. https://0x1f.ie/didcomm (in its DID).
    #[arg(long, env = "COUCHLINK_AGENT_PUBLIC_URL")]
    pub agent_public_url: Option<url::Url>,
    /// The agent's keys (a JWK file, created with mode 0600 on first run; never logged).
    #[arg(long, env = "COUCHLINK_AGENT_KEYS", default_value = "agent-keys.json")]
    pub keys: PathBuf,
    /// Who may ask for short URLs: DIDs separated by commas, or * for anyone (anonymous too).
    #[arg(long, env = "COUCHLINK_AGENT_ALLOW", default_value = "")]
    pub allow: String,
    /// The longest validity granted, in seconds; 0: any, and links that never expire.
    #[arg(long, env = "COUCHLINK_AGENT_MAX_VALIDITY", default_value_t = 31_536_000)]
    pub max_validity: u64,
    /// Accept plaintext messages, which prove no sender (development only).
    #[arg(long, env = "COUCHLINK_AGENT_DEV_PLAINTEXT")]
    pub dev_plaintext: bool,
    /// Deliver replies to senders' http:// endpoints too, not only https:// (development only).
    #[arg(long, env = "COUCHLINK_AGENT_ALLOW_HTTP_ENDPOINTS", default_value_t = false, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub allow_http_endpoints: bool,
    /// Deliver replies to loopback, private, link-local and unique-local addresses too (never to CouchDB's own).
    #[arg(long, env = "COUCHLINK_AGENT_ALLOW_PRIVATE_ENDPOINTS", default_value_t = false, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub allow_private_endpoints: bool,
    /// The most replies being delivered to senders' endpoints at once; past it, "not delivered".
    #[arg(long, env = "COUCHLINK_AGENT_MAX_DELIVERIES", default_value_t = 64)]
    pub max_deliveries: usize,
    /// The short links' base URL, e.g. https://0x1f.ie (needed to serve, not to print the DID).
    #[arg(long, env = "COUCHLINK_PUBLIC_URL")]
    pub public_url: Option<PublicUrl>,
    /// A file to write the agent's pid to (an upgrade's new process writes its own).
    #[arg(long, env = "COUCHLINK_AGENT_PID_FILE")]
    pub pid_file: Option<PathBuf>,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub couch: CouchArgs,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub on: super::DomainChoice,
}

/// Why the agent did not start.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The keys file.
    #[error(transparent)]
    Keys(#[from] KeysError),
    /// CouchDB's settings.
    #[error("cannot use CouchDB")]
    Couch(#[from] CouchError),
    /// The listener: passed (systemd, an upgrade) or bound.
    #[error(transparent)]
    Listen(#[from] crate::lifecycle::ListenError),
    /// The async runtime.
    #[error("cannot start the async runtime")]
    Runtime(#[source] std::io::Error),
    /// A DID to publish, without the endpoint senders would reach.
    #[error("set COUCHLINK_AGENT_PUBLIC_URL (or --agent-public-url) to the URL senders reach the agent at, e.g. https://0x1f.ie/didcomm: the DID holds it, and one naming this machine's {0} reaches nobody (give --agent-public-url http://{0}/ to test locally)")]
    NoAgentUrl(SocketAddr),
    /// No base for the short URLs it hands out.
    #[error("set COUCHLINK_PUBLIC_URL (or --public-url) to the short links' base URL, e.g. https://0x1f.ie")]
    NoShortUrlBase,
}

impl AgentArgs {
    /// The agent's endpoint: as configured, or its listener's address.
    fn endpoint(&self, bound: SocketAddr) -> String {
        self.agent_public_url.as_ref().map_or_else(|| format!("http://{bound}/"), url::Url::to_string)
    }

    /// Prints the DID, or serves until SIGTERM or SIGINT.
    pub fn execute(self) -> Result<(), AgentError> {
        if self.print_did && self.agent_public_url.is_none() {
            return Err(AgentError::NoAgentUrl(self.listen));
        }
        let (identity, created) = Identity::load_or_create(&self.keys)?;
        if created {
            tracing::info!("created the agent's keys in {} (mode 0600)", self.keys.display());
        }
        if self.print_did {
            println!("{}", identity.did(&self.endpoint(self.listen)));
            return Ok(());
        }
        let upgrade = Upgrade::of_this_process(UPGRADE_TIMEOUT, super::env_file::loaded());
        // Before the runtime's threads: taking a passed listener changes the environment.
        let listener = OneListener::take_or_bind(self.listen, upgrade, self.pid_file.clone())?;
        let runtime = super::current_thread_runtime().map_err(AgentError::Runtime)?;
        runtime.block_on(run(self, identity, listener, crate::lifecycle::shutdown_signal()))
    }
}

/// Serves the agent on `listener` until `shutdown` completes, or until the process a SIGUSR2
/// starts serves in its place.
pub async fn run(
    args: AgentArgs,
    identity: Identity,
    listener: OneListener,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), AgentError> {
    let bound = listener.local_addr().map_err(AgentError::Runtime)?;
    let short_base = args.public_url.clone().ok_or(AgentError::NoShortUrlBase)?;
    if args.agent_public_url.is_none() {
        tracing::warn!("COUCHLINK_AGENT_PUBLIC_URL is not set: the agent's DID names http://{bound}/ as its endpoint");
    }
    let did = identity.did(&args.endpoint(bound));
    let me = peer_did::resolve(&did).expect("the agent's own DID resolves");
    let allow = Allow::parse(&args.allow);
    if allow == Allow::Dids(vec![]) {
        tracing::warn!("COUCHLINK_AGENT_ALLOW is empty: every request gets a problem report");
    }
    let policy = EndpointPolicy {
        allow_http: args.allow_http_endpoints,
        allow_private: args.allow_private_endpoints,
        couchdb: couchdb_addresses(&args.couch.couchdb_url).await,
    };
    let agent = Agent {
        identity,
        me,
        editor: CouchClient::new(&args.couch.into())?,
        short_base,
        allow,
        max_validity: (args.max_validity > 0).then_some(args.max_validity),
        accept_plaintext: args.dev_plaintext,
        delivery: Delivery::new(policy, args.max_deliveries.max(1)),
    };
    tracing::info!("DIDComm agent on http://{bound} as {did}{}", listener.origin());
    let limits = crate::http::accept::Limits::new(1024, Duration::from_secs(10));
    listener.serve(Arc::new(agent), limits, Duration::from_secs(10), shutdown).await.map_err(AgentError::Runtime)
}

/// The addresses CouchDB's URL names, which replies must never go to (none when it does not
/// resolve now: it is then no address the agent could be sent to either).
async fn couchdb_addresses(url: &str) -> Vec<SocketAddr> {
    let Ok(url) = url::Url::parse(url) else { return Vec::new() };
    let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) else { return Vec::new() };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    tokio::net::lookup_host((host, port)).await.map(Iterator::collect).unwrap_or_default()
}
