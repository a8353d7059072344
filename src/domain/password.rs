//! `PasswordHash`: a link's password as its document holds it (docs/reference.md, "Passwords"):
//! an Argon2id hash in the PHC string format, never the password itself.
//!
//! `$argon2id$v=19$m=19456,t=2,p=1$<salt>$<hash>`: Argon2id (RFC 9106), version 0x13, memory `m`
//! in KiB, `t` passes, `p` lanes, the salt and the 32-byte output in base64 without padding.
//! The bounds below keep what one check costs a proxy known: memory times passes at most 64 MiB
//! (1.7 times what couchlink writes, 19 MiB and 2 passes: a document cannot make a guess cost a
//! proxy much more than its own hashes do, nor a second or a gigabyte), and at least what
//! OWASP's cheapest Argon2id settings ask (7 MiB and 5 passes, 12 MiB and 3, 19 MiB and 2, all
//! 35 MiB-passes or more; Argon2id's cost is its memory times its passes, whatever its lanes). `couchdb/validate_doc_update.js` refuses what [`PasswordHash::parse`] refuses;
//! `tests/password_cases.json` holds both to the same cases.

use std::fmt;

use argon2::{Algorithm, Argon2, Params, PasswordHasher, PasswordVerifier, Version};

/// Memory, passes and lanes couchlink writes: OWASP's first Argon2id setting (19 MiB, 2 passes,
/// 1 lane).
pub const WRITTEN: (u32, u32, u32) = (19 * 1024, 2, 1);
/// The least memory (KiB) a stored hash may ask for.
pub const MIN_MEMORY_KIB: u32 = 7 * 1024;
/// The most memory (KiB) a stored hash may ask for: what one check can cost a proxy.
pub const MAX_MEMORY_KIB: u32 = 64 * 1024;
/// The least memory times passes (KiB): OWASP's cheapest setting, 7 MiB and 5 passes.
pub const MIN_COST: u32 = 7 * 1024 * 5;
/// The most memory times passes (KiB): what one guess may cost a proxy.
pub const MAX_COST: u32 = 64 * 1024;
/// The most passes.
pub const MAX_PASSES: u32 = 5;
/// The most lanes.
pub const MAX_LANES: u32 = 4;
/// The longest password couchlink hashes, in bytes (a browser's prompt sends what is typed).
pub const MAX_PASSWORD_BYTES: usize = 1024;

/// A link's password hash, checked: Argon2id, version 19, within the bounds above, a salt of
/// 16 to 64 bytes and an output of 32.
#[derive(Clone, PartialEq, Eq)]
pub struct PasswordHash(Box<str>);

/// Why a `password` field is not a hash couchlink checks against.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadPasswordHash {
    /// Not a PHC string of Argon2id at all (a password written in the clear, say).
    #[error("it is not an Argon2id hash (\"$argon2id$v=19$m=...,t=...,p=...$salt$hash\"): the document holds only a password's hash, made by `couchlink create --password-file` or the console")]
    NotArgon2id,
    /// Argon2id, but with parameters outside the bounds.
    #[error(
        "its parameters must be m={MIN_MEMORY_KIB} to {MAX_MEMORY_KIB} (KiB), t=1 to {MAX_PASSES}, p=1 to {MAX_LANES}, and m times t {MIN_COST} to {MAX_COST}"
    )]
    Parameters,
    /// The salt or the output is not base64 of the right length.
    #[error("its salt must be 16 to 64 bytes and its hash 32 bytes, in base64 without padding")]
    Encoding,
}

/// Why a password cannot be set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadPassword {
    /// Empty.
    #[error("a password cannot be empty")]
    Empty,
    /// Longer than [`MAX_PASSWORD_BYTES`].
    #[error("a password is at most {MAX_PASSWORD_BYTES} bytes")]
    TooLong,
}

impl PasswordHash {
    /// Accepts exactly the form above.
    ///
    /// ```
    /// use couchlink::domain::PasswordHash;
    /// assert!(PasswordHash::parse("hunter2").is_err());
    /// let hash = PasswordHash::create(b"staff only").unwrap();
    /// assert!(PasswordHash::parse(hash.as_str()).is_ok());
    /// ```
    pub fn parse(s: &str) -> Result<PasswordHash, BadPasswordHash> {
        let rest = s.strip_prefix("$argon2id$v=19$m=").ok_or(BadPasswordHash::NotArgon2id)?;
        let mut parts = rest.split('$');
        let (Some(params), Some(salt), Some(hash), None) = (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(BadPasswordHash::NotArgon2id);
        };
        let numbers: Vec<&str> = params.split(",t=").flat_map(|p| p.split(",p=")).collect();
        let [m, t, p] = numbers[..] else { return Err(BadPasswordHash::NotArgon2id) };
        let number = |text: &str| {
            (!text.is_empty() && text.len() <= 6 && text.bytes().all(|b| b.is_ascii_digit()) && !text.starts_with('0'))
                .then(|| text.parse::<u32>().ok())
                .flatten()
                .ok_or(BadPasswordHash::NotArgon2id)
        };
        let (m, t, p) = (number(m)?, number(t)?, number(p)?);
        if !(MIN_MEMORY_KIB..=MAX_MEMORY_KIB).contains(&m)
            || !(1..=MAX_PASSES).contains(&t)
            || !(1..=MAX_LANES).contains(&p)
            || !(MIN_COST..=MAX_COST).contains(&(m * t))
        {
            return Err(BadPasswordHash::Parameters);
        }
        let base64 = |text: &str, lengths: std::ops::RangeInclusive<usize>| {
            // Unpadded base64 of n bytes is never 1 more than a multiple of 4 characters long.
            lengths.contains(&text.len())
                && text.len() % 4 != 1
                && text.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
        };
        if !base64(salt, 22..=86) || !base64(hash, 43..=43) {
            return Err(BadPasswordHash::Encoding);
        }
        Ok(PasswordHash(s.into()))
    }

    /// A fresh hash of `password` under a random salt, with the parameters couchlink writes
    /// ([`WRITTEN`]). Costs what a check costs (tens of milliseconds, 19 MiB).
    pub fn create(password: &[u8]) -> Result<PasswordHash, BadPassword> {
        if password.is_empty() {
            return Err(BadPassword::Empty);
        }
        if password.len() > MAX_PASSWORD_BYTES {
            return Err(BadPassword::TooLong);
        }
        let salt: [u8; 16] = rand::random();
        let salt = argon2::password_hash::SaltString::encode_b64(&salt).expect("16 bytes is a valid salt");
        let (m, t, p) = WRITTEN;
        let params = Params::new(m, t, p, Some(32)).expect("valid Argon2 parameters");
        let hash = Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
            .hash_password(password, &salt)
            .expect("hashing within Argon2's limits");
        Ok(PasswordHash::parse(&hash.to_string()).expect("a hash couchlink writes is one it reads"))
    }

    /// Whether `password` is the one hashed: one Argon2id computation with the stored
    /// parameters (tens of milliseconds; run it off the serving threads), its output compared in
    /// constant time, so a right and a wrong password take the same time.
    pub fn verify(&self, password: &[u8]) -> bool {
        if password.len() > MAX_PASSWORD_BYTES {
            return false;
        }
        match argon2::password_hash::PasswordHash::new(&self.0) {
            Ok(parsed) => Argon2::default().verify_password(password, &parsed).is_ok(),
            Err(_) => false,
        }
    }

    /// The PHC string, as the document holds it.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Never shows the hash itself (it would be a dictionary attack's input in a log).
impl fmt::Debug for PasswordHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PasswordHash(..)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shared_cases_are_read_as_the_validation_function_reads_them() {
        let table: serde_json::Value =
            serde_json::from_str(include_str!("../../tests/password_cases.json")).expect("valid JSON");
        for case in table["cases"].as_array().unwrap() {
            let text = case["password"].as_str().unwrap();
            assert_eq!(PasswordHash::parse(text).is_ok(), case["ok"].as_bool().unwrap(), "{text}");
        }
    }

    #[test]
    fn a_hash_made_here_verifies_its_password_and_no_other() {
        let hash = PasswordHash::create(b"staff only").unwrap();
        assert!(hash.as_str().starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{}", hash.as_str());
        assert!(hash.verify(b"staff only"));
        assert!(!hash.verify(b"staff only "));
        assert!(!hash.verify(b""));
        // A fresh salt each time: the same password never gives the same text.
        assert_ne!(PasswordHash::create(b"staff only").unwrap(), hash);
        assert_eq!(PasswordHash::create(b""), Err(BadPassword::Empty));
        assert_eq!(PasswordHash::create(&[b'x'; MAX_PASSWORD_BYTES + 1]), Err(BadPassword::TooLong));
        assert_eq!(format!("{hash:?}"), "PasswordHash(..)");
    }

    #[test]
    fn a_hash_from_another_tool_with_other_parameters_verifies() {
        // OWASP's cheapest setting (7 MiB, 5 passes), as another tool may have written it: the
        // stored parameters are the ones used, not those couchlink writes.
        let params = Params::new(7168, 5, 1, Some(32)).unwrap();
        let salt = argon2::password_hash::SaltString::encode_b64(b"somesaltsomesalt").unwrap();
        let text = Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
            .hash_password(b"password", &salt)
            .unwrap()
            .to_string();
        let hash = PasswordHash::parse(&text).unwrap();
        assert!(hash.verify(b"password"));
        assert!(!hash.verify(b"Password"));
    }
}
