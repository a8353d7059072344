//! The snapshot file's bytes: a versioned header, the body, and a CRC-32 of the body, so that a
//! file cut short, damaged, or written by another format version is told apart from a good one
//! before anything in it is used.
//!
//! ```text
//! "couchlink cache snapshot\n"  magic
//! u32 format version            FORMAT_VERSION
//! u64 body length
//! body:
//!   str identity, str database, str seq (JSON), i64 written at (Unix seconds), u8 complete,
//!   u64 entry count, then per entry: 5-byte ID, u8 kind (0: known missing; else 1 | inactive<<1
//!   | oob<<2 | has fallback<<3 | has targets<<4 | has password<<5 | has a visit limit<<6), and
//!   for a link: i64 valid from (Unix ns, i64::MIN always), i64 expires (i64::MAX never), str
//!   url, str fallback when it has one, str targets (the rules as a document holds them, JSON)
//!   when it has any, str password (its hash) when it has one, and u32 max visits and u8 bots
//!   counted (0 or 1) when it has a limit
//! u32 CRC-32 of the body
//! ```
//! Integers are little-endian; a `str` is a u32 byte length and UTF-8.

use serde_json::Value;

use crate::domain::{LinkId, LinkParts, PasswordHash, Rule, VisitLimit, MAX_VISITS};

/// The format this build writes and the only one it reads. Bump it with any change to the
/// layout above: a snapshot of another version is not read, and the proxy warm-starts instead.
/// (3: a link's password and visit limit. A snapshot of 2 was written by a proxy that did not
/// read them; read now, it would serve a protected link open until its next change.)
pub const FORMAT_VERSION: u32 = 3;
const MAGIC: &[u8] = b"couchlink cache snapshot\n";
const HEADER: usize = MAGIC.len() + 4 + 8;

/// A cache snapshot as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// The identity of the database the entries came from (`_local/couchlink`).
    pub identity: String,
    /// The database's name.
    pub database: String,
    /// The `_changes` sequence the entries are at least as new as.
    pub seq: Value,
    /// When it was written, in Unix seconds.
    pub written_at: i64,
    /// Whether a warm-up had filled the cache: if not, a warm-up follows the restart.
    pub complete: bool,
    /// The cached entries, oldest first (the cache evicts in that order): a link, or `None` for
    /// an ID known to have no usable document.
    pub entries: Vec<(LinkId, Option<LinkParts>)>,
}

/// Why bytes are not a snapshot this build can use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    /// Not a couchlink snapshot at all.
    #[error("not a couchlink cache snapshot")]
    NotASnapshot,
    /// Written by another format version.
    #[error("written in snapshot format {found}; this couchlink reads format {FORMAT_VERSION}")]
    Version {
        /// The file's version.
        found: u32,
    },
    /// Shorter than its header says (a write that never finished, a full disk).
    #[error("cut short: {have} of {want} bytes")]
    CutShort {
        /// Bytes present.
        have: u64,
        /// Bytes the header promises.
        want: u64,
    },
    /// The checksum does not match: damaged on disk.
    #[error("its checksum does not match (the file is damaged)")]
    Checksum,
    /// The checksum matches but the body does not parse: written wrongly.
    #[error("malformed: {0}")]
    Malformed(&'static str),
}

/// The file's bytes for `snapshot`.
pub fn encode(snapshot: &Snapshot) -> Vec<u8> {
    let urls: usize = snapshot.entries.iter().map(|(_, l)| l.as_ref().map_or(0, |l| l.url.len() + 12)).sum();
    let mut body = Vec::with_capacity(64 + snapshot.entries.len() * 6 + urls);
    put_str(&mut body, &snapshot.identity);
    put_str(&mut body, &snapshot.database);
    put_str(&mut body, &snapshot.seq.to_string());
    body.extend_from_slice(&snapshot.written_at.to_le_bytes());
    body.push(snapshot.complete.into());
    body.extend_from_slice(&(snapshot.entries.len() as u64).to_le_bytes());
    for (id, link) in &snapshot.entries {
        body.extend_from_slice(id.as_str().as_bytes());
        match link {
            None => body.push(0),
            Some(link) => {
                let fallback = u8::from(link.fallback.is_some()) << 3;
                let targets = u8::from(!link.targets.is_empty()) << 4;
                let password = u8::from(link.password.is_some()) << 5;
                let limit = u8::from(link.limit.is_some()) << 6;
                body.push(
                    1 | u8::from(link.inactive) << 1 | u8::from(link.oob) << 2 | fallback | targets | password | limit,
                );
                body.extend_from_slice(&link.valid_from_ns.to_le_bytes());
                body.extend_from_slice(&link.expires_ns.to_le_bytes());
                put_str(&mut body, &link.url);
                if let Some(fallback) = &link.fallback {
                    put_str(&mut body, fallback);
                }
                if !link.targets.is_empty() {
                    let rules: Vec<_> = link.targets.iter().map(Rule::to_value).collect();
                    put_str(&mut body, &serde_json::Value::from(rules).to_string());
                }
                if let Some(password) = &link.password {
                    put_str(&mut body, password.as_str());
                }
                if let Some(limit) = link.limit {
                    body.extend_from_slice(&limit.max.to_le_bytes());
                    body.push(limit.bots.into());
                }
            }
        }
    }
    let mut out = Vec::with_capacity(HEADER + body.len() + 4);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&(body.len() as u64).to_le_bytes());
    out.extend_from_slice(&body);
    out.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
    out
}

/// Reads a snapshot, checking everything before trusting anything.
pub fn decode(bytes: &[u8]) -> Result<Snapshot, FormatError> {
    if bytes.len() < MAGIC.len() || !bytes.starts_with(MAGIC) {
        return Err(if MAGIC.starts_with(bytes) {
            FormatError::CutShort { have: bytes.len() as u64, want: HEADER as u64 }
        } else {
            FormatError::NotASnapshot
        });
    }
    let mut header = Reader(&bytes[MAGIC.len()..]);
    let short = || FormatError::CutShort { have: bytes.len() as u64, want: HEADER as u64 };
    let found = header.u32().map_err(|_| short())?;
    if found != FORMAT_VERSION {
        return Err(FormatError::Version { found });
    }
    let length = header.u64().map_err(|_| short())?;
    let want = (HEADER as u64).saturating_add(length).saturating_add(4);
    if (bytes.len() as u64) < want {
        return Err(FormatError::CutShort { have: bytes.len() as u64, want });
    }
    if (bytes.len() as u64) > want {
        return Err(FormatError::Malformed("bytes after the checksum"));
    }
    let body = &bytes[HEADER..HEADER + length as usize];
    let sum = u32::from_le_bytes(bytes[bytes.len() - 4..].try_into().expect("4 bytes"));
    if crc32fast::hash(body) != sum {
        return Err(FormatError::Checksum);
    }
    read_body(&mut Reader(body))
}

fn read_body(r: &mut Reader) -> Result<Snapshot, FormatError> {
    let identity = r.str()?.to_owned();
    let database = r.str()?.to_owned();
    let seq = serde_json::from_str(r.str()?).map_err(|_| FormatError::Malformed("the sequence is not JSON"))?;
    let written_at = r.u64()? as i64;
    let complete = r.take(1)?[0] != 0;
    let count = r.u64()?;
    // Each entry takes at least 6 bytes: a count the body cannot hold is not believed.
    if count > (r.0.len() / 6) as u64 {
        return Err(FormatError::Malformed("more entries than the body holds"));
    }
    let mut entries = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let id = LinkId::parse_bytes(r.take(5)?).ok_or(FormatError::Malformed("an entry's ID is not a link ID"))?;
        let kind = r.take(1)?[0];
        let link = match kind {
            0 => None,
            k if k & 1 == 1 && k >> 7 == 0 => {
                let valid_from_ns = r.u64()? as i64;
                let expires_ns = r.u64()? as i64;
                let url = r.str()?.into();
                let fallback = if k & 8 != 0 { Some(r.str()?.into()) } else { None };
                let targets = if k & 16 != 0 { rules(r.str()?)? } else { Box::default() };
                let password = match k & 32 {
                    0 => None,
                    _ => Some(
                        PasswordHash::parse(r.str()?)
                            .map_err(|_| FormatError::Malformed("a password is not a hash this build reads"))?,
                    ),
                };
                let limit = match k & 64 {
                    0 => None,
                    _ => {
                        let max = r.u32()?;
                        let bots = r.take(1)?[0] != 0;
                        (1..=MAX_VISITS)
                            .contains(&max)
                            .then_some(VisitLimit { max, bots })
                            .map(Some)
                            .ok_or(FormatError::Malformed("a visit limit out of bounds"))?
                    }
                };
                let (inactive, oob) = (k & 2 != 0, k & 4 != 0);
                Some(LinkParts { url, inactive, valid_from_ns, expires_ns, fallback, targets, oob, password, limit })
            }
            _ => return Err(FormatError::Malformed("an entry of unknown kind")),
        };
        entries.push((id, link));
    }
    if !r.0.is_empty() {
        return Err(FormatError::Malformed("bytes after the last entry"));
    }
    Ok(Snapshot { identity, database, seq, written_at, complete, entries })
}

/// A link's rules as stored, each read as a document's are.
fn rules(text: &str) -> Result<Box<[Rule]>, FormatError> {
    let values: Vec<serde_json::Value> =
        serde_json::from_str(text).map_err(|_| FormatError::Malformed("a link's targets are not JSON"))?;
    values
        .iter()
        .map(|v| Rule::from_value(v).map_err(|_| FormatError::Malformed("a link's target is not a rule")))
        .collect()
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u32).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// The body, consumed from the front.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], FormatError> {
        if self.0.len() < n {
            return Err(FormatError::Malformed("a field runs past the end"));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn u32(&mut self) -> Result<u32, FormatError> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4 bytes")))
    }

    fn u64(&mut self) -> Result<u64, FormatError> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8 bytes")))
    }

    fn str(&mut self) -> Result<&'a str, FormatError> {
        let n = self.u32()? as usize;
        std::str::from_utf8(self.take(n)?).map_err(|_| FormatError::Malformed("a text field is not UTF-8"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sample() -> Snapshot {
        let link = |url: &str, inactive, oob, expires_ns| {
            Some(LinkParts {
                url: url.into(),
                inactive,
                valid_from_ns: i64::MIN,
                expires_ns,
                fallback: None,
                targets: Box::default(),
                oob,
                password: None,
                limit: None,
            })
        };
        Snapshot {
            identity: "0f3c".into(),
            database: "links".into(),
            seq: json!("12-g1AAAA"),
            written_at: 1_795_000_000,
            complete: true,
            entries: vec![
                (LinkId::parse("H83if").unwrap(), link("https://example.com/wp/?p=14", false, false, i64::MAX)),
                (LinkId::parse("gone1").unwrap(), None),
                (LinkId::parse("Off00").unwrap(), link("https://a.example/", true, true, 1_800_000_000_000_000_000)),
                (LinkId::parse("inner").unwrap(), link("/H83if", false, false, -5)),
                (
                    LinkId::parse("Later").unwrap(),
                    Some(LinkParts {
                        url: "https://later.example/".into(),
                        inactive: false,
                        valid_from_ns: 1_900_000_000_000_000_000,
                        expires_ns: i64::MAX,
                        fallback: Some("https://soon.example/".into()),
                        targets: Box::new([Rule::from_value(&json!({
                            "when": {"os": ["ios"], "device": ["mobile", "tablet"], "lang": ["fr"]},
                            "url": "https://apps.apple.com/fr/app/id1"
                        }))
                        .unwrap()]),
                        oob: false,
                        password: Some(PasswordHash::create(b"staff only").unwrap()),
                        limit: Some(VisitLimit { max: 500, bots: true }),
                    }),
                ),
            ],
        }
    }

    #[test]
    fn what_is_written_is_read_back() {
        let snapshot = sample();
        assert_eq!(decode(&encode(&snapshot)), Ok(snapshot.clone()));
        let numeric = Snapshot { seq: json!(42), entries: vec![], complete: false, ..snapshot };
        assert_eq!(decode(&encode(&numeric)), Ok(numeric));
    }

    #[test]
    fn every_cut_is_refused() {
        let bytes = encode(&sample());
        for end in 0..bytes.len() {
            let error = decode(&bytes[..end]).expect_err("a cut file");
            assert!(matches!(error, FormatError::CutShort { .. }), "cut at {end}: {error:?}");
        }
    }

    #[test]
    fn any_flipped_bit_in_the_body_fails_the_checksum() {
        let bytes = encode(&sample());
        for i in HEADER..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[i] ^= 0x10;
            assert_eq!(decode(&damaged), Err(FormatError::Checksum), "byte {i}");
        }
    }

    #[test]
    fn another_version_or_file_is_named() {
        let mut bytes = encode(&sample());
        bytes[MAGIC.len()..MAGIC.len() + 4].copy_from_slice(&0u32.to_le_bytes());
        assert_eq!(decode(&bytes), Err(FormatError::Version { found: 0 }));
        assert_eq!(decode(b"{\"links\": []}"), Err(FormatError::NotASnapshot));
        let mut longer = encode(&sample());
        longer.push(0);
        assert!(matches!(decode(&longer), Err(FormatError::Malformed(_))));
    }

    #[test]
    fn a_body_with_a_good_checksum_is_still_parsed_with_care() {
        // A count larger than the body, behind a valid checksum (a writer's bug, not damage).
        let mut body = Vec::new();
        for s in ["id", "links", "1"] {
            put_str(&mut body, s);
        }
        body.extend_from_slice(&0i64.to_le_bytes());
        body.push(1);
        body.extend_from_slice(&u64::MAX.to_le_bytes());
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        bytes.extend_from_slice(&(body.len() as u64).to_le_bytes());
        bytes.extend_from_slice(&body);
        bytes.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
        assert_eq!(decode(&bytes), Err(FormatError::Malformed("more entries than the body holds")));
    }
}
