//! Test support shared by every test target: a real CouchDB server with a database per test
//! ([`couch`]), couchlink serving on port 0 ([`app`]), and a TCP relay that fakes network
//! faults between them ([`relay`]).

// Each test target uses its own part of this.
#![allow(dead_code, unused_imports)]

pub mod app;
pub mod couch;
pub mod relay;

pub use app::*;
pub use couch::*;
pub use relay::*;
