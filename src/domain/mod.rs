//! Domain types: parsed, validated values that the rest of couchlink can trust.

pub mod clock;
mod companion;
mod edit;
mod host;
mod link;
mod link_id;
mod link_write;
mod password;
mod public_url;
mod refusal;
mod roles;
mod rule;
mod target;
mod tracking_id;

pub use companion::{companions, is_database_name, Companion, CompanionDb, CompanionError};
pub use edit::{is_batch_name, is_stated_time, EditStamp, Stated};
pub use host::{parse_domains, BadDomains, Domain, Host, InvalidHost, UNKNOWN_HOSTS};
pub use link::{Link, LinkDoc, LinkParts, Status, UnusableLink, VisitLimit, MAX_VISITS};
pub use link_id::{InvalidLinkId, LinkId};
pub use link_write::{ImportedFrom, LinkEdit, LinkField, LinkWrite, RequestedBy};
pub use password::{BadPassword, BadPasswordHash, PasswordHash, MAX_PASSWORD_BYTES};
pub use public_url::{InvalidPublicUrl, PublicUrl};
pub use refusal::Refusal;
pub use roles::{InvalidRole, Roles, SHARED_EDITOR, SHARED_READER};
pub use rule::{stable_hash, BadRule, BadVariant, Rule, MAX_VARIANTS};
pub use target::{canonical_location, check_internal, check_target, NotCanonical};
pub use tracking_id::TrackingId;
