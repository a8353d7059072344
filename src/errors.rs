//! Errors for people: an error and every cause behind it, on one line.

use std::error::Error;
use std::fmt;

/// Displays an error followed by its chain of sources, `outer: inner: root`, so an operator
/// reads why as well as what (each error's own message names only itself).
///
/// ```
/// use couchlink::errors::Causes;
/// let err = std::io::Error::other("disk full");
/// assert_eq!(Causes(&err).to_string(), "disk full");
/// ```
pub struct Causes<'a>(pub &'a (dyn Error + 'static));

impl fmt::Display for Causes<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = self.0.source();
        while let Some(cause) = source {
            write!(f, ": {cause}")?;
            source = cause.source();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("cannot start")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn every_cause_is_shown_once_in_order() {
        let err = Outer(std::io::Error::other("port 80 is taken"));
        assert_eq!(Causes(&err).to_string(), "cannot start: port 80 is taken");
    }
}
