//! One request as one line of the access log: the fields, their escaping, and this thread's
//! memory of the User-Agents it encoded (the encoding's own cache, so it lives beside it).

use std::io::Write;
use std::net::IpAddr;

use time::OffsetDateTime;

use crate::decimal::push_decimal;
use crate::domain::TrackingId;

/// What the User-Agent keeps unescaped: JavaScript's `encodeURIComponent` set, so the
/// documented example `Mozilla%2F5.0%20(X11%3B%20Linux)` comes out exactly.
const USER_AGENT_KEEPS: [bool; 256] = byte_table!(
    |b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'!' | b'~' | b'*' | b'\'' | b'(' | b')')
);

/// The request target and `Location` keep visible ASCII; everything else (space, controls,
/// bytes above 0x7E) becomes `%HH`.
const VISIBLE_ASCII_KEEPS: [bool; 256] = byte_table!(|b| matches!(b, 0x21..=0x7E));

/// How much of a refused request's target its log line keeps: an attacker's long targets must
/// not grow the log one to one.
pub const LOGGED_TARGET_BYTES: usize = 1024;

/// What the log keeps of `target`: all of it, or for one past [`LOGGED_TARGET_BYTES`] its
/// first bytes and `…` (`%E2%80%A6` in the log), the mark of a cut.
pub fn logged_target(target: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    if target.len() <= LOGGED_TARGET_BYTES {
        return target.into();
    }
    let mut cut = target[..LOGGED_TARGET_BYTES].to_vec();
    cut.extend_from_slice("…".as_bytes());
    cut.into()
}

/// One request as the log records it.
#[derive(Debug, Clone)]
pub struct Entry<'a> {
    /// When the request was answered.
    pub time: OffsetDateTime,
    /// The client (after trusted-proxy headers).
    pub client: IpAddr,
    /// The tracking ID set in the response; `None` when the client asked not to be tracked
    /// (logged as `-`).
    pub tracking: Option<&'a TrackingId>,
    /// The raw `User-Agent` header, if any.
    pub user_agent: Option<&'a [u8]>,
    /// The request target as received.
    pub target: &'a [u8],
    /// The response status.
    pub status: u16,
    /// The `Location` sent, for a 302.
    pub location: Option<&'a str>,
}

/// Appends `entry` as one log line (with its `\n`) to `out`: 6 fields, or 7 when the status is
/// 302, each non-empty and free of spaces, whatever the client sent.
pub fn format_line(entry: &Entry<'_>, out: &mut Vec<u8>) {
    out.extend_from_slice(&crate::domain::clock::compact_stamp(entry.time));
    out.extend_from_slice(&[b'.', b'0' + (entry.time.nanosecond() / 100_000_000) as u8, b' ']);
    // IPv4 clients on a dual-stack socket show up as ::ffff:a.b.c.d; log them as a.b.c.d.
    match entry.client.to_canonical() {
        IpAddr::V4(v4) => {
            let [a, b, c, d] = v4.octets();
            push_octet(out, a);
            for octet in [b, c, d] {
                out.push(b'.');
                push_octet(out, octet);
            }
        }
        v6 => {
            let _ = write!(out, "{v6}");
        }
    }
    out.push(b' ');
    out.extend_from_slice(entry.tracking.map_or(b"-".as_slice(), |t| t.as_bytes()));
    out.push(b' ');
    match entry.user_agent {
        Some(ua) if !ua.is_empty() => extend_user_agent(out, ua),
        _ => out.push(b'-'),
    }
    out.push(b' ');
    if entry.target.is_empty() {
        out.push(b'-');
    } else {
        extend_visible(out, entry.target);
    }
    out.push(b' ');
    match entry.status {
        // Every status answered is three digits: written without a loop.
        status @ 100..=999 => {
            let digits = [status / 100, status / 10 % 10, status % 10];
            out.extend_from_slice(&digits.map(|d| b'0' + d as u8));
        }
        status => push_decimal(out, status.into()),
    }
    if let (302, Some(location)) = (entry.status, entry.location) {
        out.push(b' ');
        extend_visible(out, location.as_bytes());
    }
    out.push(b'\n');
}

/// User-Agents kept encoded per thread, at most: real traffic repeats a few hundred, and a
/// browser's is a hundred bytes or more with a third of them escaped (a few thousand
/// instructions to encode, against a lookup).
const AGENTS_KEPT: usize = 512;
/// Longer User-Agents are encoded each time, not kept (they are rare, and the memory is bounded
/// by this times [`AGENTS_KEPT`]).
const AGENT_KEPT_BYTES: usize = 512;

/// User-Agents as received, and as logged.
type Agents = std::collections::HashMap<Box<[u8]>, Box<[u8]>, foldhash::fast::RandomState>;

thread_local! {
    /// This thread's [`Agents`]; emptied when full (simple, and rare).
    static AGENTS: std::cell::RefCell<Agents> = std::cell::RefCell::default();
}

/// Appends a User-Agent, percent-encoded: from this thread's memory of those it saw.
fn extend_user_agent(out: &mut Vec<u8>, ua: &[u8]) {
    if ua.len() > AGENT_KEPT_BYTES {
        return extend_encoded(out, ua, &USER_AGENT_KEEPS);
    }
    AGENTS.with_borrow_mut(|agents| {
        if let Some(encoded) = agents.get(ua) {
            return out.extend_from_slice(encoded);
        }
        let start = out.len();
        extend_encoded(out, ua, &USER_AGENT_KEEPS);
        if agents.len() >= AGENTS_KEPT {
            agents.clear();
        }
        agents.insert(ua.into(), out[start..].into());
    })
}

/// Appends `bytes` with everything but visible ASCII as `%HH`. A `Location` always is visible
/// ASCII (canonical, or checked by `safe_location`) and most targets are: that is checked in one
/// pass that compiles to vector instructions (no early exit), then copied at once.
fn extend_visible(out: &mut Vec<u8>, bytes: &[u8]) {
    if bytes.iter().fold(true, |visible, &b| visible & (b.wrapping_sub(0x21) < 0x5E)) {
        out.extend_from_slice(bytes);
    } else {
        extend_encoded(out, bytes, &VISIBLE_ASCII_KEEPS);
    }
}

/// Appends an address's octet in decimal, from a table (four per IPv4 line).
fn push_octet(out: &mut Vec<u8>, octet: u8) {
    const OCTETS: [([u8; 3], u8); 256] = {
        let mut table = [([0u8; 3], 0u8); 256];
        let mut n = 0;
        while n < 256 {
            let digits = [b'0' + (n / 100) as u8, b'0' + (n / 10 % 10) as u8, b'0' + (n % 10) as u8];
            let len = if n >= 100 {
                3
            } else if n >= 10 {
                2
            } else {
                1
            };
            let mut text = [0u8; 3];
            let mut i = 0;
            while i < len {
                text[i] = digits[3 - len + i];
                i += 1;
            }
            table[n] = (text, len as u8);
            n += 1;
        }
        table
    };
    let (text, len) = &OCTETS[usize::from(octet)];
    out.extend_from_slice(&text[..usize::from(*len)]);
}

/// Appends `bytes` with every byte `keeps` does not keep as `%HH` (upper-case hex, as the
/// percent-encoding crate writes it, which the tests hold this to): what is kept is copied a
/// run at a time, so a target with nothing to escape is one scan and one copy.
fn extend_encoded(out: &mut Vec<u8>, bytes: &[u8], keeps: &[bool; 256]) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut rest = bytes;
    loop {
        let run = rest.iter().position(|&b| !keeps[usize::from(b)]).unwrap_or(rest.len());
        out.extend_from_slice(&rest[..run]);
        let Some(&b) = rest.get(run) else { return };
        out.extend_from_slice(&[b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 0xf)]]);
        rest = &rest[run + 1..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    fn line(entry: &Entry<'_>) -> String {
        let mut out = Vec::new();
        format_line(entry, &mut out);
        String::from_utf8(out).expect("log lines are ASCII")
    }

    fn tid() -> TrackingId {
        TrackingId::parse("20261122101733a3f9c1e2b7d4e601").unwrap()
    }

    #[test]
    fn documented_example_line() {
        let tid = tid();
        let entry = Entry {
            time: datetime!(2026-11-22 10:17:33.59 UTC),
            client: "203.0.113.7".parse().unwrap(),
            tracking: Some(&tid),
            user_agent: Some(b"Mozilla/5.0 (X11; Linux)"),
            target: b"/H83if",
            status: 302,
            location: Some("https://example.com/wp/?p=14"),
        };
        assert_eq!(
            line(&entry),
            "20261122101733.5 203.0.113.7 20261122101733a3f9c1e2b7d4e601 Mozilla%2F5.0%20(X11%3B%20Linux) /H83if 302 https://example.com/wp/?p=14\n"
        );
    }

    #[test]
    fn hostile_input_still_gives_six_space_free_fields_on_one_line() {
        let tid = tid();
        let entry = Entry {
            time: datetime!(2026-11-22 10:17:33 UTC),
            client: "::ffff:10.0.0.1".parse().unwrap(),
            tracking: Some(&tid),
            user_agent: Some(b"evil \"agent\"\r\n%0A\xff\xfe\x00"),
            target: b"/a b\"c\r\n%\xff",
            status: 404,
            location: Some("https://ignored.example/"),
        };
        let text = line(&entry);
        assert!(text.ends_with('\n') && text.matches('\n').count() == 1, "{text:?}");
        let fields: Vec<&str> = text.trim_end_matches('\n').split(' ').collect();
        assert_eq!(fields.len(), 6, "{text:?}");
        assert!(fields.iter().all(|f| !f.is_empty()));
        assert_eq!(fields[1], "10.0.0.1");
        assert_eq!(fields[3], "evil%20%22agent%22%0D%0A%250A%FF%FE%00");
        assert_eq!(fields[4], "/a%20b\"c%0D%0A%%FF");
    }

    #[test]
    fn missing_or_empty_user_agent_is_a_dash() {
        let tid = tid();
        let mut entry = Entry {
            time: datetime!(2026-11-22 10:17:33.05 UTC),
            client: "2001:db8::1".parse().unwrap(),
            tracking: Some(&tid),
            user_agent: None,
            target: b"/",
            status: 501,
            location: None,
        };
        assert_eq!(line(&entry), "20261122101733.0 2001:db8::1 20261122101733a3f9c1e2b7d4e601 - / 501\n");
        entry.user_agent = Some(b"");
        assert!(line(&entry).contains(" - / 501"));
    }

    #[test]
    fn location_field_only_on_302() {
        let tid = tid();
        let entry = Entry {
            time: datetime!(2026-11-22 10:17:33 UTC),
            client: "192.0.2.1".parse().unwrap(),
            tracking: Some(&tid),
            user_agent: None,
            target: b"/H83if",
            status: 302,
            location: Some("https://t.example/"),
        };
        assert_eq!(line(&entry).split(' ').count(), 7);
        let not_found = Entry { status: 404, ..entry };
        assert_eq!(line(&not_found).split(' ').count(), 6);
    }

    #[test]
    fn an_untracked_request_logs_a_dash_for_its_tracking_id() {
        let entry = Entry {
            time: datetime!(2026-11-22 10:17:33 UTC),
            client: "203.0.113.7".parse().unwrap(),
            tracking: None,
            user_agent: None,
            target: b"/Nopee",
            status: 404,
            location: None,
        };
        assert_eq!(line(&entry), "20261122101733.0 203.0.113.7 - - /Nopee 404\n");
    }

    /// The sets the percent-encoding crate is given, the oracle of the tables above.
    const USER_AGENT_SET: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'_')
        .remove(b'.')
        .remove(b'!')
        .remove(b'~')
        .remove(b'*')
        .remove(b'\'')
        .remove(b'(')
        .remove(b')');
    const VISIBLE_ASCII_SET: &percent_encoding::AsciiSet = &percent_encoding::CONTROLS.add(b' ');

    fn encoded(bytes: &[u8], keeps: &[bool; 256]) -> String {
        let mut out = Vec::new();
        extend_encoded(&mut out, bytes, keeps);
        String::from_utf8(out).expect("ASCII")
    }

    #[test]
    fn user_agents_remembered_are_logged_as_encoded_whatever_the_bound() {
        let agents: Vec<Vec<u8>> =
            (0..AGENTS_KEPT * 2 + 7).map(|n| format!("Mozilla/5.0 (agent {n}; x) é").into_bytes()).collect();
        for round in 0..3 {
            for ua in agents.iter().chain([&vec![b'x'; AGENT_KEPT_BYTES + 1]]) {
                let mut out = Vec::new();
                extend_user_agent(&mut out, ua);
                assert_eq!(out, encoded(ua, &USER_AGENT_KEEPS).into_bytes(), "round {round}");
            }
        }
        assert!(AGENTS.with_borrow(|agents| agents.len()) <= AGENTS_KEPT);
    }

    #[test]
    fn every_octet_is_written_as_decimal() {
        for octet in 0..=255u8 {
            let mut out = Vec::new();
            push_octet(&mut out, octet);
            assert_eq!(out, octet.to_string().as_bytes());
        }
    }

    proptest::proptest! {
        /// The table-driven encoding writes what the percent-encoding crate writes, byte for
        /// byte, for any input and both sets.
        #[test]
        fn encoding_agrees_with_the_percent_encoding_crate(
            bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..300),
            text in ".{0,100}",
        ) {
            for input in [&bytes[..], text.as_bytes()] {
                proptest::prop_assert_eq!(
                    encoded(input, &USER_AGENT_KEEPS),
                    percent_encoding::percent_encode(input, USER_AGENT_SET).to_string()
                );
                proptest::prop_assert_eq!(
                    encoded(input, &VISIBLE_ASCII_KEEPS),
                    percent_encoding::percent_encode(input, VISIBLE_ASCII_SET).to_string()
                );
                let mut visible = Vec::new();
                extend_visible(&mut visible, input);
                proptest::prop_assert_eq!(visible, encoded(input, &VISIBLE_ASCII_KEEPS).into_bytes());
            }
        }

        /// Whatever a client sends as User-Agent and target, and whatever the Location, a
        /// request is exactly one line of 6 (or 7, for a 302) non-empty, space-free fields of
        /// visible ASCII.
        #[test]
        fn any_bytes_make_one_well_formed_line(
            user_agent in proptest::option::of(proptest::collection::vec(proptest::num::u8::ANY, 0..300)),
            target in proptest::collection::vec(proptest::num::u8::ANY, 0..300),
            location in proptest::option::of(".{0,200}"),
            tracked in proptest::bool::ANY,
        ) {
            let tid = tid();
            let location = location.and_then(|l| crate::resolve::safe_location(&l));
            let status = if location.is_some() { 302 } else { 404 };
            let entry = Entry {
                time: datetime!(2026-11-22 10:17:33 UTC),
                client: "2001:db8::1".parse().unwrap(),
                tracking: tracked.then_some(&tid),
                user_agent: user_agent.as_deref(),
                target: &target,
                status,
                location: location.as_deref(),
            };
            let text = line(&entry);
            proptest::prop_assert!(text.ends_with('\n'));
            let body = &text[..text.len() - 1];
            proptest::prop_assert!(!body.contains('\n'), "one line: {body:?}");
            proptest::prop_assert!(body.bytes().all(|b| b.is_ascii_graphic() || b == b' '), "{body:?}");
            let fields: Vec<&str> = body.split(' ').collect();
            proptest::prop_assert_eq!(fields.len(), if status == 302 { 7 } else { 6 }, "{:?}", body);
            proptest::prop_assert!(fields.iter().all(|f| !f.is_empty()), "{body:?}");
        }
    }

    #[test]
    fn a_long_target_is_logged_cut_and_marked() {
        let target = vec![b'a'; 10_000];
        let logged = logged_target(&target);
        assert_eq!(logged.len(), LOGGED_TARGET_BYTES + 3);
        assert!(logged.ends_with("…".as_bytes()));
        assert_eq!(&*logged_target(b"/H83if"), b"/H83if");
    }
}
