//! CouchDB's JSON read as it is written: documents nested deeper than serde_json's own limit
//! are read up to couchlink's.

use serde::de::DeserializeOwned;

/// How deep CouchDB's answers may nest. serde_json stops at 128 levels, and a document nested
/// deeper (the links' validation function refuses it from editors, but an admin or a
/// replication may write one) would stop the feed and the history at it; past this the
/// answer is refused as undecodable.
pub const MAX_DEPTH: usize = 512;

/// JSON as CouchDB answers it, nested up to [`MAX_DEPTH`] levels.
pub(super) fn decode<T: DeserializeOwned>(bytes: &[u8]) -> serde_json::Result<T> {
    match serde_json::from_slice(bytes) {
        Err(e) if e.to_string().starts_with("recursion limit exceeded") && depth(bytes) <= MAX_DEPTH => {
            let mut deserializer = serde_json::Deserializer::from_slice(bytes);
            deserializer.disable_recursion_limit();
            let value = T::deserialize(&mut deserializer)?;
            deserializer.end()?;
            Ok(value)
        }
        decoded => decoded,
    }
}

/// The deepest nesting of arrays and objects in JSON text (brackets within strings not counted).
pub(super) fn depth(bytes: &[u8]) -> usize {
    let (mut level, mut deepest, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for &b in bytes {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                level += 1;
                deepest = deepest.max(level);
            }
            b']' | b'}' => level = level.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}
