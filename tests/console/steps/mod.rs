//! The test's steps, a module each, in the order the test runs them: each starts where the
//! one before left the browser (logged in as the editor until the last) and the link `id`.

pub mod clicks;
pub mod history;
pub mod link_page;
pub mod log_in;
pub mod new_link;
pub mod password_and_limit;
pub mod phone;
pub mod print_and_bulk;
pub mod reader;
pub mod rules;
pub mod search;
pub mod stored_markup;
pub mod strangers;
pub mod visit_limit;

/// What every step uses.
mod prelude {
    pub use std::time::{Duration, Instant};

    pub use fantoccini::Locator;
    pub use serde_json::{json, Value};

    pub use crate::fixture::Fixture;
    pub use crate::page::*;
    pub use crate::support::{eventually, holds, Text, EDITOR, READER};
    pub use crate::{FRESH, LIVE};
}
