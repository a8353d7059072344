//! `LinkId`: the 5-character base-62 document ID of a short link (docs/reference.md, "Link documents").

use std::fmt;
use std::hash::{Hash, Hasher};

use rand::Rng;

/// The 62 characters an ID is made of.
const ALPHABET: &[u8; 62] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/// A short link's ID: exactly 5 characters of `[A-Za-z0-9]`, case-sensitive.
///
/// Stored inline (5 bytes) so the link cache keys cost no allocation.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct LinkId([u8; 5]);

/// One 64-bit word per ID, equal IDs equal words: a derived `Hash` writes the array's length
/// and then its bytes, two rounds of the hasher on every lookup of the redirect cache and of
/// the report's link index.
impl Hash for LinkId {
    fn hash<H: Hasher>(&self, state: &mut H) {
        let [a, b, c, d, e] = self.0;
        state.write_u64(u64::from_le_bytes([a, b, c, d, e, 0, 0, 0]));
    }
}

/// The reason a string is not a [`LinkId`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a link ID is exactly 5 characters of A-Z, a-z, 0-9 (got {0:?})")]
pub struct InvalidLinkId(pub String);

impl LinkId {
    /// Accepts exactly 5 ASCII letters or digits.
    ///
    /// ```
    /// use couchlink::domain::LinkId;
    /// assert_eq!(LinkId::parse("H83if").unwrap().as_str(), "H83if");
    /// assert!(LinkId::parse("H83if/spring").is_err());
    /// ```
    pub fn parse(s: &str) -> Result<Self, InvalidLinkId> {
        Self::parse_bytes(s.as_bytes()).ok_or_else(|| InvalidLinkId(s.to_owned()))
    }

    /// [`LinkId::parse`] over bytes, without building an error (for hot loops).
    pub fn parse_bytes(bytes: &[u8]) -> Option<Self> {
        match <[u8; 5]>::try_from(bytes) {
            Ok(id) if id.iter().all(u8::is_ascii_alphanumeric) => Some(LinkId(id)),
            _ => None,
        }
    }

    /// A fresh ID drawn uniformly from the 62^5 space by the thread-local CSPRNG.
    pub fn random() -> Self {
        let mut rng = rand::rng();
        let mut id = [0u8; 5];
        for b in &mut id {
            *b = ALPHABET[rng.random_range(0..ALPHABET.len())];
        }
        LinkId(id)
    }

    /// The ID a number names: its five lowest base-62 digits (62^5 is about 916 million).
    pub fn from_number(mut n: u64) -> Self {
        let mut id = [0u8; 5];
        for b in id.iter_mut().rev() {
            *b = ALPHABET[(n % 62) as usize];
            n /= 62;
        }
        LinkId(id)
    }

    /// Its 5 ASCII bytes (no UTF-8 check, unlike [`LinkId::as_str`]: what writers of bytes use).
    pub fn as_bytes(&self) -> &[u8; 5] {
        &self.0
    }

    /// The ID as text.
    pub fn as_str(&self) -> &str {
        // Only ASCII alphanumerics ever get in (see `parse` and `random`).
        std::str::from_utf8(&self.0).expect("link IDs are ASCII")
    }
}

impl fmt::Display for LinkId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for LinkId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LinkId({})", self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_character_of_an_id_goes_into_its_hash() {
        let hash = |id: &str| {
            std::hash::BuildHasher::hash_one(&foldhash::fast::FixedState::with_seed(1), LinkId::parse(id).unwrap())
        };
        assert_eq!(hash("H83if"), hash("H83if"));
        for other in ["h83if", "H93if", "H8Xif", "H83Xf", "H83iF"] {
            assert_ne!(hash("H83if"), hash(other), "{other}");
        }
    }

    #[test]
    fn accepts_five_alphanumerics_case_sensitively() {
        assert_eq!(LinkId::parse("H83if").unwrap().as_str(), "H83if");
        assert_ne!(LinkId::parse("H83if").unwrap(), LinkId::parse("h83if").unwrap());
    }

    #[test]
    fn rejects_everything_else() {
        for bad in ["", "H83i", "H83ifx", "H83i-", "H83i_", "_desi", "H83 f", "Hé3if", "H83i\u{0}"] {
            assert!(LinkId::parse(bad).is_err(), "{bad:?} must be refused");
        }
    }

    #[test]
    fn random_ids_parse_and_differ() {
        let a = LinkId::random();
        assert_eq!(LinkId::parse(a.as_str()), Ok(a));
        let distinct: std::collections::HashSet<_> = (0..1000).map(|_| LinkId::random()).collect();
        assert!(distinct.len() > 990, "62^5 IDs should rarely collide");
    }

    proptest::proptest! {
        /// Exactly the 5-character base-62 strings are IDs, and they read back unchanged.
        #[test]
        fn parse_accepts_exactly_five_base62_characters(s in "\\PC{0,8}|[A-Za-z0-9]{5}") {
            let valid = s.len() == 5 && s.bytes().all(|b| b.is_ascii_alphanumeric());
            match LinkId::parse(&s) {
                Ok(id) => proptest::prop_assert!(valid && id.as_str() == s),
                Err(_) => proptest::prop_assert!(!valid),
            }
        }
    }
}
