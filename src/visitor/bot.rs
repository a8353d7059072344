//! The one bot list: which User-Agents count as bots', for the report (`couchlink report`) and
//! for the live counts the proxy writes (so that both agree on every line).

use std::sync::LazyLock;

/// The maintained bot list: the `isbot` crate's patterns (isbot 0.1.3, MIT licence in
/// `bots-LICENSE`), one regular expression per line, matched against the User-Agent in lower
/// case. A copy here rather than the crate's own, so that `couchlink report --bot-pattern` gives
/// other engines exactly the list couchlink uses (docs/clickhouse.md).
pub const BOT_PATTERNS: &str = include_str!("bots.txt");

/// The list compiled once for all threads.
static BOTS: LazyLock<isbot::Bots> = LazyLock::new(|| isbot::Bots::new(BOT_PATTERNS));

/// The bot list as one regular expression, as `isbot` joins it: for RE2 (ClickHouse's
/// `match`) as for Rust's `regex`, against the percent-decoded User-Agent in lower case.
pub fn bot_pattern() -> String {
    let lines: Vec<&str> = BOT_PATTERNS.lines().filter(|l| !l.trim().is_empty()).collect();
    lines.join("|").to_ascii_lowercase()
}

/// Whether a User-Agent (as received, `None` when absent) is a bot's, by the list. No
/// User-Agent at all, or an empty one (the access log's `-` either way), counts as a bot: every
/// browser sends one.
pub fn is_bot(user_agent: Option<&[u8]>) -> bool {
    match user_agent {
        None => true,
        Some(ua) => ua.is_empty() || BOTS.is_bot(&String::from_utf8_lossy(ua)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crawlers_and_tools_are_bots_and_browsers_are_not() {
        let phone = b"Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1";
        for (ua, bot) in [
            (Some(&b"curl/8.5.0"[..]), true),
            (Some(b"Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"), true),
            (Some(&phone[..]), false),
            (None, true),
            (Some(b""), true),
        ] {
            assert_eq!(is_bot(ua), bot, "{ua:?}");
            // Twice: the thread's memory (the one User-Agent memory, `Client::of`'s) answers the same.
            assert_eq!(super::super::Client::of(ua).bot, bot, "{ua:?}");
            assert_eq!(super::super::Client::of(ua).bot, bot, "{ua:?}");
        }
    }

    #[test]
    fn the_pattern_matches_what_the_list_matches() {
        let pattern = regex::Regex::new(&bot_pattern()).unwrap();
        for ua in ["curl/8.5.0", "Mozilla/5.0 (X11; Linux)", "python-requests/2.31", "facebookexternalhit/1.1"] {
            assert_eq!(pattern.is_match(&ua.to_ascii_lowercase()), is_bot(Some(ua.as_bytes())), "{ua}");
        }
    }
}
