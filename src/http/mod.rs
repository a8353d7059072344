//! The redirect listener's own HTTP/1 protocol, apart from what it answers:
//!
//! - [`accept`]: binding, the connection cap and the graceful accept loop every listener
//!   shares, and hyper connections for the admin listener and the agent.
//! - [`conn`]: one connection over any byte stream: heads read and parsed once each, pipelined
//!   answers in order, the idle and slow-client timeout, the drain.
//! - [`limits`]: every limit, and the one place that turns a head into 400, 414 or 431.
//! - [`write`]: the one writer of responses, from the [`crate::message::Reply`] the handler
//!   decides and the [`Framing`] (version, HEAD, [`Persistence`]) the connection gives it.

pub mod accept;
pub mod conn;
pub mod limits;
pub mod write;

#[cfg(test)]
mod differential;

pub use conn::{ConnStats, Connections, Respond};
pub use write::{Framing, Persistence, Shape};
