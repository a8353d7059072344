//! Domain types: parsed, validated values that the rest of couchlink can trust.

mod link;
mod link_id;
mod tracking_id;

pub use link::{Link, LinkDoc};
pub use link_id::{InvalidLinkId, LinkId};
pub(crate) use tracking_id::write_compact_timestamp;
pub use tracking_id::TrackingId;
