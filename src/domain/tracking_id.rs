//! `TrackingId`: the value of the tracking cookie (docs/reference.md, "Tracking cookie").

use std::fmt;

use rand::Rng;
use time::OffsetDateTime;

use super::clock;

/// A client's tracking ID: the UTC issue time as `yyyymmddhhmmss` followed by 16 lowercase hex
/// digits from a CSPRNG, 30 characters in all. Only that form is accepted: couchlink never
/// issued another (an 18-digit form once accepted, from a misprinted example, served nobody).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct TrackingId {
    bytes: [u8; LEN],
}

const STAMP_LEN: usize = 14;
const ISSUED_HEX: usize = 16;
const LEN: usize = STAMP_LEN + ISSUED_HEX;

/// How far ahead of this server's clock a received ID's stamp may be: another proxy of the same
/// service, with its own clock, may have issued it.
pub const CLOCK_SKEW: time::Duration = time::Duration::minutes(1);

/// Whether 14 digits `yyyymmddhhmmss` name a second of the calendar (leap seconds, which
/// couchlink never writes, are not).
fn is_real_utc_second(stamp: &[u8]) -> bool {
    let number = |range: std::ops::Range<usize>| stamp[range].iter().fold(0u32, |n, d| n * 10 + u32::from(d - b'0'));
    let Ok(month) = time::Month::try_from(number(4..6) as u8) else { return false };
    time::Date::from_calendar_date(number(0..4) as i32, month, number(6..8) as u8).is_ok()
        && time::Time::from_hms(number(8..10) as u8, number(10..12) as u8, number(12..14) as u8).is_ok()
}

impl TrackingId {
    /// Accepts only a value of exactly the issued form; anything else gets a new ID.
    ///
    /// ```
    /// use couchlink::domain::TrackingId;
    /// assert!(TrackingId::parse("20261122101733a3f9c1e2b7d4e601").is_some());
    /// assert!(TrackingId::parse("20261122101733A3F9C1E2B7D4E601").is_none());
    /// ```
    pub fn parse(s: &str) -> Option<Self> {
        Self::parse_bytes(s.as_bytes())
    }

    /// [`TrackingId::parse`] over bytes (an access log's field, say).
    pub fn parse_bytes(raw: &[u8]) -> Option<Self> {
        Self::validate(raw).map(|bytes| TrackingId { bytes: *bytes })
    }

    /// `raw` as a tracking ID's bytes when it is one, [`TrackingId::parse`]'s check without a
    /// copy (the report checks one per log line, in place).
    pub fn validate(raw: &[u8]) -> Option<&[u8; LEN]> {
        let bytes: &[u8; LEN] = raw.try_into().ok()?;
        let (stamp, random) = bytes.split_at(STAMP_LEN);
        // Without a branch per byte.
        let ok = stamp.iter().fold(true, |ok, b| ok & b.is_ascii_digit())
            & random.iter().fold(true, |ok, b| ok & matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        ok.then_some(bytes)
    }

    /// A tracking ID a client sent back at `now`: of the issued form, and stamped with a real
    /// UTC second no later than `now` plus [`CLOCK_SKEW`]. An impossible stamp (month 13, all
    /// zeros) or one from the future would otherwise be echoed for two years, and the report
    /// would take that time to decide whether the visitor is new.
    ///
    /// ```
    /// use couchlink::domain::TrackingId;
    /// use time::macros::datetime;
    /// let now = datetime!(2026-11-22 10:20:00 UTC);
    /// assert!(TrackingId::parse_received("20261122101733a3f9c1e2b7d4e601", now).is_some());
    /// assert!(TrackingId::parse_received("99991399999999a3f9c1e2b7d4e601", now).is_none());
    /// ```
    pub fn parse_received(s: &str, now: OffsetDateTime) -> Option<Self> {
        let id = Self::parse(s)?;
        Self::received(id, now)
    }

    /// [`TrackingId::parse_received`] of bytes (a `Cookie` header's value, as received).
    pub fn parse_received_bytes(raw: &[u8], now: OffsetDateTime) -> Option<Self> {
        Self::received(Self::parse_bytes(raw)?, now)
    }

    fn received(id: TrackingId, now: OffsetDateTime) -> Option<Self> {
        let latest = clock::compact_stamp(now + CLOCK_SKEW);
        // Equal-length digit strings: byte order is time order.
        (id.issued() <= &latest[..] && is_real_utc_second(id.issued())).then_some(id)
    }

    /// A new ID issued at `now` (converted to UTC).
    pub fn generate(now: OffsetDateTime) -> Self {
        let mut bytes = [0u8; LEN];
        bytes[..STAMP_LEN].copy_from_slice(&clock::compact_stamp(now));
        let random: [u8; ISSUED_HEX / 2] = rand::rng().random();
        // Two hex digits per random byte, from a table.
        const PAIRS: [[u8; 2]; 256] = {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            let mut pairs = [[0u8; 2]; 256];
            let mut b = 0;
            while b < 256 {
                pairs[b] = [HEX[b >> 4], HEX[b & 0xf]];
                b += 1;
            }
            pairs
        };
        for (pair, byte) in bytes[STAMP_LEN..].chunks_exact_mut(2).zip(random) {
            pair.copy_from_slice(&PAIRS[usize::from(byte)]);
        }
        TrackingId { bytes }
    }

    /// The ID as text.
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.bytes).expect("tracking IDs are ASCII")
    }

    /// Its 30 ASCII bytes.
    pub fn as_bytes(&self) -> &[u8; LEN] {
        &self.bytes
    }

    /// The UTC second it was issued, as the 14 digits `yyyymmddhhmmss`.
    pub fn issued(&self) -> &[u8] {
        &self.bytes[..STAMP_LEN]
    }
}

impl fmt::Display for TrackingId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for TrackingId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TrackingId({})", self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn generated_ids_have_the_contract_form() {
        let id = TrackingId::generate(datetime!(2026-11-22 10:17:33.9 UTC));
        let s = id.as_str();
        assert!(s.starts_with("20261122101733"), "{s}");
        assert_eq!(s.len(), 30, "14 digits and 16 hex digits");
        assert_eq!(TrackingId::parse(s), Some(id));
    }

    #[test]
    fn timestamp_is_utc_whatever_the_offset() {
        let id = TrackingId::generate(datetime!(2026-11-22 11:17:33 +01:00));
        assert!(id.as_str().starts_with("20261122101733"));
    }

    #[test]
    fn random_part_differs_between_ids() {
        let now = OffsetDateTime::now_utc();
        assert_ne!(TrackingId::generate(now), TrackingId::generate(now));
    }

    #[test]
    fn every_random_digit_takes_every_hex_value() {
        let now = OffsetDateTime::now_utc();
        let ids: Vec<TrackingId> = (0..2000).map(|_| TrackingId::generate(now)).collect();
        for position in STAMP_LEN..LEN {
            let seen: std::collections::HashSet<u8> = ids.iter().map(|id| id.as_bytes()[position]).collect();
            assert_eq!(seen.len(), 16, "digit {position} took {seen:?}");
        }
    }

    #[test]
    fn parse_refuses_anything_not_exactly_the_form() {
        for good in ["20261122101733a3f9c1e2b7d4e601", "20250101000000aaaaaaaaaaaaaaaa"] {
            assert_eq!(TrackingId::parse(good).map(|t| t.as_str().to_owned()), Some(good.to_owned()));
        }
        for bad in [
            "",
            "20261122101733a3f9c1e2b7d4e60",     // 15 hex digits
            "20261122101733a3f9c1e2b7d4e6012",   // 17
            "20261122101733a3f9c1e2b7d4e6012f",  // 18, never issued
            "20261122101733a3f9c1e2b7d4e6012f0", // 19
            // The right length, the wrong characters:
            "20261122101733A3F9C1E2B7D4E601", // upper-case hex
            "2026112210173xa3f9c1e2b7d4e601", // non-digit stamp
            "20261122101733a3f9c1e2b7d4e60g", // non-hex
            "20261122101733a3f9c1e2b7d4e6 1",
            "2026112210173éa3f9c1e2b7d4e60", // 30 bytes, one of them not ASCII
        ] {
            assert!(TrackingId::parse(bad).is_none(), "{bad:?} must be refused");
        }
    }

    #[test]
    fn received_ids_must_carry_a_real_time_not_in_the_future() {
        let now = datetime!(2026-11-22 10:20:00 UTC);
        for good in [
            "20261122101733a3f9c1e2b7d4e601", // minutes ago
            "20240229235959a3f9c1e2b7d4e601", // a leap day
            "20261122102100a3f9c1e2b7d4e601", // within the minute of skew
            "00000101000000a3f9c1e2b7d4e601", // the year 0 is a real (if odd) year
        ] {
            assert!(TrackingId::parse_received(good, now).is_some(), "{good}");
        }
        for bad in [
            "99991399999999a3f9c1e2b7d4e601", // month 13
            "00000000000000a3f9c1e2b7d4e601", // month 0, day 0
            "20250229120000a3f9c1e2b7d4e601", // not a leap year
            "20261122246000a3f9c1e2b7d4e601", // hour 24
            "20261122105960a3f9c1e2b7d4e601", // second 60
            "20261122102101a3f9c1e2b7d4e601", // past the minute of skew
            "99991231235959a3f9c1e2b7d4e601", // the far future
        ] {
            assert!(TrackingId::parse_received(bad, now).is_none(), "{bad}");
        }
    }

    proptest::proptest! {
        /// Exactly 14 digits then 16 lowercase hex digits are a tracking ID.
        #[test]
        fn parse_accepts_exactly_the_issued_form(s in "\\PC{0,40}|[0-9]{14}[0-9a-f]{16}|[0-9]{14}[0-9a-fA-F]{15,17}") {
            let b = s.as_bytes();
            let valid = b.len() == 30
                && b[..14].iter().all(u8::is_ascii_digit)
                && b[14..].iter().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'));
            proptest::prop_assert_eq!(TrackingId::parse(&s).map(|t| t.as_str().to_owned()), valid.then(|| s.clone()));
        }
    }
}
