//! One access-log line (docs/reference.md, "Access log") split into the fields a report counts.

use std::fmt;

use time::{Date, Month, OffsetDateTime};

use crate::domain::{LinkId, TrackingId};

/// A time as the log writes it, `yyyymmddhhmmss` and tenths, held as that number: comparing
/// two stamps compares the times, and no calendar arithmetic runs per line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Stamp(u64);

impl Stamp {
    /// Reads `yyyymmddhhmmss.t`, refusing anything that is not a real UTC time.
    pub fn parse(field: &[u8]) -> Option<Stamp> {
        // Eight digits at a time, in a word: every line has one.
        let field: &[u8; 16] = field.try_into().ok()?;
        let [date @ .., _, _, _, _, _, _, _, _] = *field;
        let [_, _, _, _, _, _, _, _, clock @ ..] = *field;
        // `hhmmss.t` with its dot read as a zero digit, the dot checked apart.
        let (date, clock) = (u64::from_le_bytes(date), u64::from_le_bytes(clock) & !(0xff << 48) | 0x30 << 48);
        if field[14] != b'.' || !all_digits(date) || !all_digits(clock) {
            return None;
        }
        // Byte pairs to their two-digit values, in the low byte of each 16-bit lane.
        let pairs = |word: u64| {
            let d = word - 0x3030_3030_3030_3030;
            (d * 10 + (d >> 8)) & 0x00ff_00ff_00ff_00ff
        };
        let (date, clock) = (pairs(date), pairs(clock));
        let lane = |word: u64, i: u32| (word >> (16 * i)) & 0xff;
        let (month, day) = (lane(date, 2), lane(date, 3));
        let (hour, minute, second) = (lane(clock, 0), lane(clock, 1), lane(clock, 2));
        let yyyymmdd = (lane(date, 0) * 100 + lane(date, 1)) * 10_000 + month * 100 + day;
        let number = yyyymmdd * 1_000_000 + hour * 10_000 + minute * 100 + second;
        let stamp = Stamp(number * 10 + u64::from(field[15] - b'0'));
        // Days 1 to 28 of months 1 to 12 exist in every year: checked without the calendar.
        let date = (1..=12).contains(&month) && (1..=28).contains(&day) || stamp.day().date().is_some();
        (hour < 24 && minute < 60 && second < 60 && date).then_some(stamp)
    }

    /// The start of `at`'s tenth of a second (UTC).
    pub fn at(at: OffsetDateTime) -> Stamp {
        let t = at.to_offset(time::UtcOffset::UTC);
        let day = u64::from(Day::of(t.date()).0);
        let clock = u64::from(t.hour()) * 10_000 + u64::from(t.minute()) * 100 + u64::from(t.second());
        Stamp((day * 1_000_000 + clock) * 10 + u64::from(t.nanosecond() / 100_000_000))
    }

    /// The UTC day it falls on.
    pub fn day(self) -> Day {
        Day((self.0 / 10_000_000) as u32)
    }
}

/// ISO 8601 in UTC, to the tenth: `2026-11-22T10:17:33.5Z`.
impl fmt::Display for Stamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // By hand, as the days below: a report formats two per link and per version.
        let mut out = *b"0000-00-00T00:00:00.0Z";
        out[..10].copy_from_slice(&self.day().iso());
        let clock = self.0 / 10 % 1_000_000;
        for (at, value) in [(11, clock / 10_000), (14, clock / 100 % 100), (17, clock % 100)] {
            out[at] = b'0' + (value / 10) as u8;
            out[at + 1] = b'0' + (value % 10) as u8;
        }
        out[20] = b'0' + (self.0 % 10) as u8;
        f.write_str(std::str::from_utf8(&out).map_err(|_| fmt::Error)?)
    }
}

/// A UTC day, `yyyymmdd` as a number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Day(u32);

impl Day {
    /// The day of `date`.
    pub fn of(date: Date) -> Day {
        Day(date.year().clamp(0, 9999) as u32 * 10_000
            + u32::from(u8::from(date.month())) * 100
            + u32::from(date.day()))
    }

    /// `yyyymmdd` as a number: ordered as the days are.
    pub fn number(self) -> u32 {
        self.0
    }

    /// Reads the `YYYY-MM-DD` in a log file's name (`access.YYYY-MM-DD.log`).
    pub fn parse_iso(text: &str) -> Option<Day> {
        let format = time::macros::format_description!("[year]-[month]-[day]");
        Date::parse(text, format).ok().map(Day::of)
    }

    /// The calendar date, if the number is one.
    pub fn date(self) -> Option<Date> {
        let month = Month::try_from((self.0 / 100 % 100) as u8).ok()?;
        Date::from_calendar_date((self.0 / 10_000) as i32, month, (self.0 % 100) as u8).ok()
    }

    /// `YYYY-MM-DD`.
    pub fn iso(self) -> [u8; 10] {
        let mut out = *b"0000-00-00";
        let mut put = |at: usize, digits: usize, mut value: u32| {
            for i in (at..at + digits).rev() {
                out[i] = b'0' + (value % 10) as u8;
                value /= 10;
            }
        };
        put(0, 4, self.0 / 10_000);
        put(5, 2, self.0 / 100 % 100);
        put(8, 2, self.0 % 100);
        out
    }

    /// The first instant of the day.
    pub fn start(self) -> Stamp {
        Stamp(u64::from(self.0) * 10_000_000)
    }
}

/// `"2026-11-22"`, as the report's JSON schema has it.
impl serde::Serialize for Day {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(std::str::from_utf8(&self.iso()).map_err(serde::ser::Error::custom)?)
    }
}

/// `2026-11-22`.
impl fmt::Display for Day {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(std::str::from_utf8(&self.iso()).map_err(|_| fmt::Error)?)
    }
}

/// The fields of one well-formed line that a report reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line<'a> {
    /// When the request was answered.
    pub stamp: Stamp,
    /// Its second as logged, `yyyymmddhhmmss`.
    second: &'a [u8],
    /// The client address as logged (anonymised or not); read only for `--by country`.
    pub ip: &'a [u8],
    /// The tracking ID set in the response, checked and left in place; `None` for `-` (an
    /// untracked client).
    pub tracking: Option<&'a [u8; 30]>,
    /// The User-Agent, still percent-encoded; `-` when the client sent none.
    pub user_agent: &'a [u8],
    /// The request target as logged.
    pub target: &'a [u8],
    /// The response status.
    pub status: u16,
    /// The `Location` of a 302.
    pub location: Option<&'a [u8]>,
}

/// Why a line is not one couchlink writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Malformed {
    /// Not 6 or 7 non-empty fields separated by single spaces.
    Fields,
    /// The first field is not a `yyyymmddhhmmss.t` UTC time.
    Timestamp,
    /// The third field is neither `-` nor a tracking ID.
    TrackingId,
    /// The sixth field is not a status code.
    Status,
    /// A 302 without a `Location` field, or another status with one.
    Location,
    /// The file ends inside this line (no `\n`): a write cut short, or a file still growing.
    Unterminated,
}

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Malformed::Fields => "not 6 or 7 space-separated fields",
            Malformed::Timestamp => "no yyyymmddhhmmss.t timestamp",
            Malformed::TrackingId => "tracking ID neither '-' nor 14 digits and 16 hex digits",
            Malformed::Status => "no status code",
            Malformed::Location => "the 7th field (Location) is there exactly when the status is 302",
            Malformed::Unterminated => "the file ends inside the line (no newline)",
        })
    }
}

/// Splits `line` (without its `\n`) into its fields, checking each against the log's format.
pub fn parse(line: &[u8]) -> Result<Line<'_>, Malformed> {
    fast(line).map_or_else(|| split(line), Ok)
}

/// [`parse`] for a well-formed line, looking for fields where couchlink writes them (the
/// time's 16 bytes first) and finding the other fields' ends in one pass, rather than
/// searching for every space, or once per field.
/// `None` for anything else, which [`split`] then reads and names what is wrong with;
/// whatever this accepts, `split` reads the same.
fn fast(line: &[u8]) -> Option<Line<'_>> {
    if line.get(16) != Some(&b' ') {
        return None;
    }
    let stamp = Stamp::parse(&line[..16])?;
    let rest = &line[17..];
    // The ends of the client IP, tracking ID, User-Agent, target and (before a Location) status.
    let mut ends = [rest.len(); 5];
    let spaces = spaces(rest, &mut ends).filter(|&n| n >= 4)?;
    let (ip, tracking, user_agent, target) =
        (&rest[..ends[0]], &rest[ends[0] + 1..ends[1]], &rest[ends[1] + 1..ends[2]], &rest[ends[2] + 1..ends[3]]);
    let status = &rest[ends[3] + 1..ends[4]];
    let location = (spaces == 5).then(|| &rest[ends[4] + 1..]);
    if ip.is_empty() || user_agent.is_empty() || target.is_empty() || location == Some(b"") {
        return None;
    }
    let tracking = match tracking {
        b"-" => None,
        id => Some(TrackingId::validate(id)?),
    };
    let status = match *status {
        [a @ b'1'..=b'5', b @ b'0'..=b'9', c @ b'0'..=b'9'] => {
            u16::from(a - b'0') * 100 + u16::from(b - b'0') * 10 + u16::from(c - b'0')
        }
        _ => return None,
    };
    if location.is_some() != (status == 302) {
        return None;
    }
    Some(Line { stamp, second: &line[..14], ip, tracking, user_agent, target, status, location })
}

/// Puts where the spaces of `bytes` are into `at`, and says how many there are; `None` when
/// there are more than it holds. Sixteen bytes at a time, each block compared at once.
fn spaces(bytes: &[u8], at: &mut [usize; 5]) -> Option<usize> {
    let mut found = 0;
    let mut note = |base: usize, mut mask: u32| {
        while mask != 0 {
            *at.get_mut(found)? = base + mask.trailing_zeros() as usize;
            found += 1;
            mask &= mask - 1;
        }
        Some(())
    };
    let blocks = bytes.chunks_exact(16);
    let tail = blocks.remainder();
    for (i, block) in blocks.enumerate() {
        note(16 * i, space_mask(block.try_into().ok()?))?;
    }
    if let Some(last) = bytes.last_chunk::<16>() {
        // The last 16 bytes, less those already looked at: no copy of the tail.
        note(bytes.len() - tail.len(), space_mask(last) >> (16 - tail.len()))?;
    } else {
        let mut last = [0; 16];
        last[..tail.len()].copy_from_slice(tail);
        note(0, space_mask(&last))?;
    }
    Some(found)
}

/// Bit `i` set where `block[i]` is a space: one SSE2 comparison (every x86-64 has SSE2; the
/// `safe_arch` crate wraps it without an `unsafe` block here).
#[cfg(target_arch = "x86_64")]
fn space_mask(block: &[u8; 16]) -> u32 {
    use safe_arch::{cmp_eq_mask_i8_m128i, load_unaligned_m128i, move_mask_i8_m128i, set_splat_i8_m128i};
    move_mask_i8_m128i(cmp_eq_mask_i8_m128i(load_unaligned_m128i(block), set_splat_i8_m128i(b' ' as i8))) as u32
}

/// Bit `i` set where `block[i]` is a space.
#[cfg(not(target_arch = "x86_64"))]
fn space_mask(block: &[u8; 16]) -> u32 {
    block.iter().enumerate().fold(0, |mask, (i, &b)| mask | u32::from(b == b' ') << i)
}

/// [`parse`] for any line: its fields at every space.
fn split(line: &[u8]) -> Result<Line<'_>, Malformed> {
    let mut fields = [&line[..0]; 7];
    let mut count = 0;
    let mut start = 0;
    for end in memchr::memchr_iter(b' ', line).chain(std::iter::once(line.len())) {
        if count == fields.len() || end == start {
            return Err(Malformed::Fields);
        }
        fields[count] = &line[start..end];
        count += 1;
        start = end + 1;
    }
    if count < 6 {
        return Err(Malformed::Fields);
    }
    let stamp = Stamp::parse(fields[0]).ok_or(Malformed::Timestamp)?;
    let tracking = match fields[2] {
        b"-" => None,
        id => Some(TrackingId::validate(id).ok_or(Malformed::TrackingId)?),
    };
    let status = match fields[5] {
        [a @ b'1'..=b'5', b @ b'0'..=b'9', c @ b'0'..=b'9'] => {
            u16::from(a - b'0') * 100 + u16::from(b - b'0') * 10 + u16::from(c - b'0')
        }
        _ => return Err(Malformed::Status),
    };
    let location = (count == 7).then_some(fields[6]);
    if location.is_some() != (status == 302) {
        return Err(Malformed::Location);
    }
    Ok(Line {
        stamp,
        second: &fields[0][..14],
        ip: fields[1],
        tracking,
        user_agent: fields[3],
        target: fields[4],
        status,
        location,
    })
}

impl Line<'_> {
    /// The link the request asked for: the target's first path segment, when it is a link ID.
    pub fn link(&self) -> Option<LinkId> {
        let rest = self.target.strip_prefix(b"/")?;
        // An ID is 5 characters: a look at the byte after them, not a search for the segment's
        // end.
        match rest.get(5) {
            None | Some(b'/' | b'?' | b'#') => LinkId::parse_bytes(rest.get(..5)?),
            Some(_) => None,
        }
    }

    /// The target's path, without its query.
    pub fn path(&self) -> &[u8] {
        &self.target[..memchr::memchr2(b'?', b'#', self.target).unwrap_or(self.target.len())]
    }

    /// Whether this response issued the tracking ID it carries: the ID's issue second is the
    /// line's own second (a returning client sends an older one back).
    pub fn issued_tracking_id(&self) -> bool {
        self.tracking.is_some_and(|id| id[..14] == *self.second)
    }
}

/// Whether a logged (percent-encoded) User-Agent is a bot's, by the maintained list. No
/// User-Agent at all (`-`) counts as a bot: every browser sends one.
pub fn bot_agent(encoded: &[u8]) -> bool {
    if encoded == b"-" {
        return true;
    }
    let decoded: std::borrow::Cow<'_, [u8]> = percent_encoding::percent_decode(encoded).into();
    crate::visitor::bot::is_bot(Some(&decoded))
}

/// Whether each of a word's 8 bytes is an ASCII digit: `0x30` to `0x39`, whose high half is 3
/// and stays 3 when 6 is added (no carry crosses from a digit into the next byte).
fn all_digits(word: u64) -> bool {
    const HIGH: u64 = 0xf0f0_f0f0_f0f0_f0f0;
    word & HIGH == 0x3030_3030_3030_3030 && word.wrapping_add(0x0606_0606_0606_0606) & HIGH == 0x3030_3030_3030_3030
}

#[cfg(test)]
mod tests {
    use time::macros::{date, datetime};

    use super::*;

    const EXAMPLE: &[u8] = b"20261122101733.5 203.0.113.7 20261122101733a3f9c1e2b7d4e601 \
        Mozilla%2F5.0%20(X11%3B%20Linux) /H83if 302 https://example.com/wp/?p=14";

    #[test]
    fn the_bot_pattern_is_the_list_the_report_uses() {
        let pattern = regex::Regex::new(&crate::visitor::bot::bot_pattern()).unwrap();
        for ua in [
            "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
            "curl/8.5.0",
            "python-requests/2.31.0",
            "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)",
            "Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0",
            "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 Mobile/15E148",
        ] {
            let encoded: String =
                percent_encoding::utf8_percent_encode(ua, percent_encoding::NON_ALPHANUMERIC).to_string();
            assert_eq!(pattern.is_match(&ua.to_ascii_lowercase()), bot_agent(encoded.as_bytes()), "{ua}");
        }
        assert!(bot_agent(b"curl%2F8.5.0") && !bot_agent(b"Mozilla%2F5.0%20(X11%3B%20Linux)"));
    }

    #[test]
    fn reads_the_contract_example() {
        let line = parse(EXAMPLE).unwrap();
        assert_eq!(line.stamp.to_string(), "2026-11-22T10:17:33.5Z");
        assert_eq!(line.tracking.unwrap(), b"20261122101733a3f9c1e2b7d4e601");
        assert_eq!(line.user_agent, b"Mozilla%2F5.0%20(X11%3B%20Linux)");
        assert_eq!((line.status, line.location), (302, Some(&b"https://example.com/wp/?p=14"[..])));
        assert_eq!(line.link().unwrap().as_str(), "H83if");
        assert!(line.issued_tracking_id());
    }

    #[test]
    fn six_fields_without_location_and_untracked_clients() {
        let line = parse(b"20261122101733.5 ::1 - - /wp-login.php?x=1 404").unwrap();
        assert_eq!((line.tracking, line.status, line.location), (None, 404, None));
        assert_eq!(line.path(), b"/wp-login.php");
        assert_eq!(line.link(), None);
        assert!(!line.issued_tracking_id());
    }

    #[test]
    fn the_link_is_the_first_path_segment_when_it_is_a_link_id() {
        for (target, link) in [
            ("/H83if", Some("H83if")),
            ("/H83if/", Some("H83if")),
            ("/H83if?utm=1", Some("H83if")),
            ("/H83if#top", Some("H83if")),
            ("/H83ifX", None),
            ("/H83if.", None),
            ("/H83i", None),
            ("/H83i?x", None),
            ("/H8?if", None),
            ("/H83i/f", None),
            ("/", None),
            ("H83if", None),
            ("//H83if", None),
        ] {
            let line = format!("20261122101734.0 ::1 - - {target} 302 https://e.x/");
            let parsed = parse(line.as_bytes()).unwrap();
            assert_eq!(parsed.link().map(|l| l.as_str().to_owned()).as_deref(), link, "{target}");
        }
    }

    #[test]
    fn a_returning_client_did_not_get_its_id_from_this_response() {
        let line =
            parse(b"20261122101734.0 ::1 20261122101733a3f9c1e2b7d4e601 - /H83if/a/b 302 https://e.x/a/b").unwrap();
        assert!(!line.issued_tracking_id());
        assert_eq!(line.link().unwrap().as_str(), "H83if");
    }

    #[test]
    fn refuses_lines_couchlink_does_not_write() {
        for (line, why) in [
            (&b""[..], Malformed::Fields),
            (b"20261122101733.5 ::1 - - /H83if", Malformed::Fields),
            (b"20261122101733.5 ::1 - - /H83if 302 https://e.x/ extra", Malformed::Fields),
            (b"20261122101733.5  ::1 - - /H83if 404", Malformed::Fields),
            (b"20261122101733.5 ::1 - - /H83if 404 ", Malformed::Fields),
            (b"2026-11-22 ::1 - - /H83if 404", Malformed::Timestamp),
            (b"20261122241733.5 ::1 - - /H83if 404", Malformed::Timestamp),
            (b"20260230101733.5 ::1 - - /H83if 404", Malformed::Timestamp),
            (b"20261122101733.5 ::1 abc - /H83if 404", Malformed::TrackingId),
            (b"20261122101733.5 ::1 - - /H83if 4o4", Malformed::Status),
            (b"20261122101733.5 ::1 - - /H83if 302", Malformed::Location),
            (b"20261122101733.5 ::1 - - /H83if 404 https://e.x/", Malformed::Location),
        ] {
            assert_eq!(parse(line), Err(why), "{}", String::from_utf8_lossy(line));
        }
    }

    #[test]
    fn the_fast_reading_accepts_only_what_the_full_one_reads_the_same() {
        const SHORT: &[u8] = b"20261122101733.5 ::1 - - /a 404";
        const BLOCK: &[u8] = b"20261122101733.5 ::1 - - /abc 404";
        let mut lines: Vec<Vec<u8>> = vec![
            EXAMPLE.to_vec(),
            b"20261122101733.5 ::1 - - /wp-login.php?x=1 404".to_vec(),
            b"20261122101734.0 ::1 20261122101733a3f9c1e2b7d4e601 - /H83if/a/b 302 https://e.x/a/b".to_vec(),
            b"20261122101733.5 ::1 - - /H83if 302 https://e.x/ extra".to_vec(),
            b"20261122101733.5 ::1 - - /H83if 302 ".to_vec(),
            b"20261122101733.5 ::1 -  /H83if 404".to_vec(),
            b"20261122101733.5 ::1 20261122101733a3f9c1e2b7d4e60 - /H83if 404".to_vec(),
            b"20261122101733.5 ::1 20261122101733a3f9c1e2b7d4e6011 - /H83if 404".to_vec(),
            b"20261122101733.5 ::1 20261122101733a3f9c1e2b7d4e601 - /H83if 4040".to_vec(),
            // After the time: fewer than 16 bytes, exactly 16, exactly 32 (no partial block).
            SHORT.to_vec(),
            BLOCK.to_vec(),
            b"20261122101733.5 ::1 - - /abcdefghijklmnop 404".to_vec(),
        ];
        // Every line above with each byte in turn made a space, or cut off there.
        for base in lines.clone() {
            for i in 0..base.len() {
                let mut spaced = base.clone();
                spaced[i] = b' ';
                lines.push(spaced);
                lines.push(base[..i].to_vec());
            }
        }
        let mut fast_ones = 0;
        for line in &lines {
            if let Some(fast) = fast(line) {
                fast_ones += 1;
                assert_eq!(Ok(fast), split(line), "{}", String::from_utf8_lossy(line));
            }
            assert_eq!(parse(line), split(line));
        }
        assert!([EXAMPLE, SHORT, BLOCK].iter().all(|l| fast(l).is_some()), "the fast reading reads well-formed lines");
        assert!(fast_ones > 6);
    }

    /// The stamp's reading, digit by digit and with the calendar.
    fn stamp_by_the_calendar(field: &[u8]) -> Option<Stamp> {
        let text = std::str::from_utf8(field).ok()?;
        let ok = field.len() == 16
            && field[14] == b'.'
            && field.iter().enumerate().all(|(i, b)| i == 14 || b.is_ascii_digit());
        if !ok {
            return None;
        }
        let n = |range: std::ops::Range<usize>| text[range].parse::<u32>().unwrap();
        let date =
            time::Date::from_calendar_date(n(0..4) as i32, time::Month::try_from(n(4..6) as u8).ok()?, n(6..8) as u8)
                .ok()?;
        let at = date.with_hms(n(8..10) as u8, n(10..12) as u8, n(12..14) as u8).ok()?;
        Some(Stamp::at(at.assume_utc() + time::Duration::milliseconds(100 * i64::from(n(15..16)))))
    }

    #[test]
    fn stamps_read_eight_digits_at_a_time_as_the_calendar_reads_them() {
        let good = *b"20261122101733.5";
        let mut cases = vec![good.to_vec(), b"20240229235959.9".to_vec(), b"20250229000000.0".to_vec()];
        cases.extend(
            [b"20261131000000.0", b"20261301000000.0", b"20261100000000.0", b"20261122240000.0"].map(|c| c.to_vec()),
        );
        cases.extend(
            [b"20261122101760.5", b"20261122106033.5", b"2026112210173305", b"20261122101733.".as_slice()]
                .map(|c| c.to_vec()),
        );
        for at in 0..16 {
            // Every byte of a good stamp set to each value in turn.
            for b in 0..=255u8 {
                let mut case = good;
                case[at] = b;
                cases.push(case.to_vec());
            }
        }
        for (year, month, day) in [0, 4, 1900, 2000, 2023, 2024, 2100, 9999]
            .iter()
            .flat_map(|y| (0..=13).flat_map(move |m| (0..=32).map(move |d| (y, m, d))))
        {
            cases.push(format!("{year:04}{month:02}{day:02}235959.9").into_bytes());
        }
        for case in &cases {
            assert_eq!(Stamp::parse(case), stamp_by_the_calendar(case), "{}", String::from_utf8_lossy(case));
        }
    }

    #[test]
    fn stamps_order_like_times_and_days_split_at_utc_midnight() {
        let late = Stamp::parse(b"20261121235959.9").unwrap();
        let midnight = Day::of(date!(2026 - 11 - 22)).start();
        assert!(late < midnight);
        assert_eq!(midnight, Stamp::at(datetime!(2026-11-22 01:00 +01:00)));
        assert_eq!(midnight.to_string(), "2026-11-22T00:00:00.0Z");
        assert_eq!(late.day().to_string(), "2026-11-21");
        assert_eq!(Day::parse_iso("2026-11-21"), Some(late.day()));
        assert_eq!(late.day().date(), Some(date!(2026 - 11 - 21)));
    }
}
