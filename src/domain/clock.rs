//! The time of a request, and its 14-digit stamp, worked out once per second and thread.
//!
//! Every request reads the clock and writes its second as `yyyymmddhhmmss` (the access log's
//! timestamp, a new tracking ID). `OffsetDateTime::now_utc` turns the system time into a
//! calendar date each call, and formatting the stamp divides six fields: together a few hundred
//! instructions a request that only change once a second (bench/budget.sh).

use std::cell::Cell;

use time::{Date, OffsetDateTime};

/// A UTC second, by its fields.
type Second = (Date, u8, u8, u8);

thread_local! {
    /// The start of the second last read on this thread, as Unix seconds and the time itself.
    static SECOND: Cell<(u64, OffsetDateTime)> = const { Cell::new((u64::MAX, OffsetDateTime::UNIX_EPOCH)) };
    /// The last two seconds stamped on this thread (a request may stamp its own second and
    /// another, the latest stamp it accepts from a client), as Unix seconds and digits.
    static STAMPS: Cell<[(Second, [u8; 14]); 2]> = const { Cell::new([((Date::MIN, 0, 0, 0), [0; 14]); 2]) };
}

/// The current time in UTC: `OffsetDateTime::now_utc()`, its calendar date worked out when the
/// second changes, not at each call.
pub fn now_utc() -> OffsetDateTime {
    let Ok(since_epoch) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) else {
        // A clock set before 1970: not cached.
        return OffsetDateTime::now_utc();
    };
    let (seconds, nanoseconds) = (since_epoch.as_secs(), since_epoch.subsec_nanos());
    let (cached, start) = SECOND.get();
    let start = if cached == seconds {
        start
    } else {
        let start = OffsetDateTime::UNIX_EPOCH + std::time::Duration::from_secs(seconds);
        SECOND.set((seconds, start));
        start
    };
    // Below a second, so always valid.
    start.replace_nanosecond(nanoseconds).unwrap_or(start)
}

/// `time`'s second in UTC as the 14 digits `yyyymmddhhmmss` (years clamped to 0..=9999),
/// formatted once per second and thread.
pub fn compact_stamp(time: OffsetDateTime) -> [u8; 14] {
    let time = if time.offset().is_utc() { time } else { time.to_offset(time::UtcOffset::UTC) };
    // The second as its fields (cheap to read and compare), not as Unix seconds (a date
    // computation).
    let second = (time.date(), time.hour(), time.minute(), time.second());
    let mut cached = STAMPS.get();
    if let Some((_, digits)) = cached.iter().find(|(s, _)| *s == second) {
        return *digits;
    }
    let digits = format_stamp(time);
    // The older of the two goes.
    cached[1] = cached[0];
    cached[0] = (second, digits);
    STAMPS.set(cached);
    digits
}

/// [`compact_stamp`] without the cache.
fn format_stamp(time: OffsetDateTime) -> [u8; 14] {
    let t = time.to_offset(time::UtcOffset::UTC);
    let fields = [
        (t.year().clamp(0, 9999) as u32, 4),
        (u32::from(u8::from(t.month())), 2),
        (u32::from(t.day()), 2),
        (u32::from(t.hour()), 2),
        (u32::from(t.minute()), 2),
        (u32::from(t.second()), 2),
    ];
    let mut out = [0u8; 14];
    let mut pos = 0;
    for (value, width) in fields {
        let mut v = value;
        for i in (0..width).rev() {
            out[pos + i] = b'0' + (v % 10) as u8;
            v /= 10;
        }
        pos += width;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn now_is_the_system_time() {
        let before = OffsetDateTime::now_utc();
        let now = now_utc();
        let after = OffsetDateTime::now_utc();
        assert!(before <= now && now <= after, "{before} {now} {after}");
        assert_eq!(now.offset(), time::UtcOffset::UTC);
    }

    #[test]
    fn stamps_are_utc_and_cached_per_second_without_mixing_them_up() {
        let a = datetime!(2026-11-22 11:17:33.9 +01:00);
        let b = datetime!(2026-11-22 10:18:33 UTC);
        for _ in 0..3 {
            assert_eq!(&compact_stamp(a), b"20261122101733");
            assert_eq!(&compact_stamp(b), b"20261122101833");
        }
        assert_eq!(&compact_stamp(datetime!(2026-11-22 10:17:34 UTC)), b"20261122101734");
        assert_eq!(&compact_stamp(a), b"20261122101733");
    }
}
