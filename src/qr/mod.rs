//! QR tags for short links, as small as the URL allows: the scheme and host upper-cased into
//! QR's compact alphanumeric mode, the case-sensitive path in byte mode, split optimally.
//! Offline, and never used by the redirect path.

pub mod colour;
pub mod logo;
pub mod render;
pub mod sheet;

use qrcodegen::{QrCode, QrCodeEcc, QrSegment, Version};

use crate::domain::{LinkId, PublicUrl};

/// The text a tag holds for `id`: `{public URL}/{id}` with the scheme and the authority
/// upper-cased (both are case-insensitive, RFC 3986 §6.2.2.1) and the rest as it is, since
/// paths and IDs are case-sensitive.
///
/// ```
/// use couchlink::domain::{LinkId, PublicUrl};
/// let base = PublicUrl::parse("http://0x1f.ie").unwrap();
/// assert_eq!(couchlink::qr::tag_text(&base, &LinkId::parse("H83if").unwrap()), "HTTP://0X1F.IE/H83if");
/// ```
pub fn tag_text(base: &PublicUrl, id: &LinkId) -> String {
    let url = base.short_url(id);
    let authority_end = url.find("://").map_or(0, |i| i + 3);
    let path_start = url[authority_end..].find('/').map_or(url.len(), |i| authority_end + i);
    let (case_free, rest) = url.split_at(path_start);
    let mut text = case_free.to_ascii_uppercase();
    text.push_str(rest);
    text
}

/// A tag's error correction level, from the least (L, about 7% of the symbol may be damaged)
/// to the most (H, about 30%).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Level {
    /// About 7% of the symbol may be damaged.
    #[value(name = "L", alias = "l")]
    L,
    /// About 15%.
    #[value(name = "M", alias = "m")]
    M,
    /// About 25%.
    #[value(name = "Q", alias = "q")]
    Q,
    /// About 30%.
    #[value(name = "H", alias = "h")]
    H,
}

impl Level {
    fn ecc(self) -> QrCodeEcc {
        match self {
            Level::L => QrCodeEcc::Low,
            Level::M => QrCodeEcc::Medium,
            Level::Q => QrCodeEcc::Quartile,
            Level::H => QrCodeEcc::High,
        }
    }

    fn of(ecc: QrCodeEcc) -> Level {
        match ecc {
            QrCodeEcc::Low => Level::L,
            QrCodeEcc::Medium => Level::M,
            QrCodeEcc::Quartile => Level::Q,
            QrCodeEcc::High => Level::H,
        }
    }

    /// The share of the symbol that may be damaged, in percent.
    pub fn tolerance(self) -> u8 {
        match self {
            Level::L => 7,
            Level::M => 15,
            Level::Q => 25,
            Level::H => 30,
        }
    }
}

/// A tag's symbol.
pub struct Tag {
    /// The QR code.
    pub code: QrCode,
    /// The text it holds.
    pub text: String,
}

impl Tag {
    /// Its version, 1 to 40 (a version-`v` symbol has `17 + 4v` modules a side).
    pub fn version(&self) -> u8 {
        self.code.version().value()
    }

    /// Its error correction level.
    pub fn level(&self) -> Level {
        Level::of(self.code.error_correction_level())
    }
}

/// The text does not fit any QR version at the level asked.
#[derive(Debug, thiserror::Error)]
#[error("{chars} characters do not fit a QR code of any version at error correction level {level:?}")]
pub struct TooLong {
    /// The text's length.
    pub chars: usize,
    /// The level asked (L when none was).
    pub level: Level,
}

/// Encodes `text` in the smallest symbol: with `level`, the smallest version that holds it at
/// that level; without, the smallest version at level L, then the highest level that still fits
/// that version (more damage tolerated at no size cost).
pub fn encode(text: &str, level: Option<Level>) -> Result<Tag, TooLong> {
    encode_from(text, level, 1)
}

/// Encodes `text` like [`encode`], in a symbol of version `smallest` or more (a logo needs
/// room the smallest symbol may not have).
pub fn encode_from(text: &str, level: Option<Level>, smallest: u8) -> Result<Tag, TooLong> {
    let ecc = level.unwrap_or(Level::L).ecc();
    let too_long = || TooLong { chars: text.len(), level: level.unwrap_or(Level::L) };
    // No version holds more than 7089 characters (all digits, 40-L).
    if text.len() > 7089 {
        return Err(too_long());
    }
    // The character count fields widen at versions 10 and 27, so the best split is worked out
    // once for each of those three groups, and each group's versions tried smallest first.
    for (first, last) in [(1, 9), (10, 26), (27, 40)] {
        if last < smallest {
            continue;
        }
        let segments = optimal_segments(text.as_bytes(), first);
        for version in first.max(smallest)..=last {
            let v = Version::new(version);
            if let Ok(code) = QrCode::encode_segments_advanced(&segments, ecc, v, v, None, level.is_none()) {
                return Ok(Tag { code, text: text.to_owned() });
            }
        }
    }
    Err(too_long())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Numeric,
    Alphanumeric,
    Byte,
}

const MODES: [Mode; 3] = [Mode::Numeric, Mode::Alphanumeric, Mode::Byte];

impl Mode {
    fn holds(self, b: u8) -> bool {
        match self {
            Mode::Numeric => b.is_ascii_digit(),
            Mode::Alphanumeric => b.is_ascii_digit() || b.is_ascii_uppercase() || b" $%*+-./:".contains(&b),
            Mode::Byte => true,
        }
    }

    /// Bits of a segment of `n` characters in `version`: mode indicator, character count, data.
    fn bits(self, n: usize, version: u8) -> usize {
        let group = usize::from(version >= 10) + usize::from(version >= 27);
        let (count, data) = match self {
            Mode::Numeric => ([10, 12, 14][group], 10 * (n / 3) + [0, 4, 7][n % 3]),
            Mode::Alphanumeric => ([9, 11, 13][group], 11 * (n / 2) + 6 * (n % 2)),
            Mode::Byte => ([8, 16, 16][group], 8 * n),
        };
        4 + count + data
    }

    fn segment(self, part: &[u8]) -> QrSegment {
        let text = std::str::from_utf8(part);
        match (self, text) {
            (Mode::Numeric, Ok(text)) => QrSegment::make_numeric(text),
            (Mode::Alphanumeric, Ok(text)) => QrSegment::make_alphanumeric(text),
            _ => QrSegment::make_bytes(part),
        }
    }
}

/// The split of `text` into numeric, alphanumeric and byte segments with the fewest bits in
/// `version`: a shortest path over the text's positions (texts are short: quadratic is fine).
fn optimal_segments(text: &[u8], version: u8) -> Vec<QrSegment> {
    let n = text.len();
    // best[i]: fewest bits for text[..i], and the segment that ends there (start, mode).
    let mut best: Vec<(usize, usize, Mode)> = vec![(usize::MAX, 0, Mode::Byte); n + 1];
    best[0].0 = 0;
    for start in 0..n {
        if best[start].0 == usize::MAX {
            continue;
        }
        for mode in MODES {
            for end in start + 1..=n {
                if !mode.holds(text[end - 1]) {
                    break;
                }
                let bits = best[start].0 + mode.bits(end - start, version);
                if bits < best[end].0 {
                    best[end] = (bits, start, mode);
                }
            }
        }
    }
    let mut parts = Vec::new();
    let mut end = n;
    while end > 0 {
        let (_, start, mode) = best[end];
        parts.push((mode, &text[start..end]));
        end = start;
    }
    parts.reverse();
    // Merged only by the search itself: two neighbours in one mode never beat one segment.
    debug_assert!(parts.windows(2).all(|w| w[0].0 != w[1].0));
    parts.into_iter().map(|(mode, part)| mode.segment(part)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use qrcodegen::QrSegmentMode;

    fn base(url: &str) -> PublicUrl {
        PublicUrl::parse(url).unwrap()
    }

    fn id(s: &str) -> LinkId {
        LinkId::parse(s).unwrap()
    }

    fn modes(text: &str, version: u8) -> Vec<(QrSegmentMode, usize)> {
        optimal_segments(text.as_bytes(), version).iter().map(|s| (s.mode(), s.num_chars())).collect()
    }

    #[test]
    fn scheme_and_host_are_upper_cased_and_the_path_kept() {
        assert_eq!(tag_text(&base("https://0x1f.ie"), &id("H83if")), "HTTPS://0X1F.IE/H83if");
        assert_eq!(
            tag_text(&base("http://Bücher.example:8080/s/"), &id("abcde")),
            "HTTP://XN--BCHER-KVA.EXAMPLE:8080/s/abcde"
        );
    }

    #[test]
    fn the_split_puts_the_upper_case_prefix_in_alphanumeric_mode_and_the_rest_in_bytes() {
        assert_eq!(modes("HTTP://0X1F.IE/H83if", 1), [(QrSegmentMode::Alphanumeric, 18), (QrSegmentMode::Byte, 2)]);
        // A long run of digits is worth a numeric segment of its own.
        assert_eq!(
            modes("HTTP://A.B/123456789012x", 1),
            [(QrSegmentMode::Alphanumeric, 11), (QrSegmentMode::Numeric, 12), (QrSegmentMode::Byte, 1)]
        );
        assert!(modes("", 1).is_empty());
    }

    #[test]
    fn the_0x1f_example_fits_version_1_where_plain_bytes_need_version_2() {
        let tag = encode(&tag_text(&base("http://0x1f.ie"), &id("H83if")), None).unwrap();
        assert_eq!((tag.version(), tag.code.size(), tag.level()), (1, 21, Level::L));
        let plain = QrCode::encode_binary(b"http://0x1f.ie/H83if", QrCodeEcc::Low).unwrap();
        assert_eq!(plain.version().value(), 2);
    }

    #[test]
    fn a_level_asked_for_gets_the_smallest_version_that_holds_it() {
        let text = tag_text(&base("http://0x1f.ie"), &id("H83if"));
        let versions: Vec<u8> = [Level::L, Level::M, Level::Q, Level::H]
            .iter()
            .map(|&l| encode(&text, Some(l)).unwrap().version())
            .collect();
        assert_eq!(versions, [1, 2, 2, 3]);
        assert!([Level::M, Level::H].iter().all(|&l| encode(&text, Some(l)).unwrap().level() == l));
    }

    #[test]
    fn without_a_level_the_highest_that_fits_the_smallest_version_is_taken() {
        // 9 bytes of data fit version 1 even at level H.
        let tag = encode("HTTP://A.B", None).unwrap();
        assert_eq!((tag.version(), tag.level()), (1, Level::H));
    }

    #[test]
    fn a_text_too_long_for_any_version_is_an_error() {
        let long = "x".repeat(3000);
        let e = encode(&long, Some(Level::L)).err().unwrap();
        assert_eq!((e.chars, e.level), (3000, Level::L));
        assert!(encode(&"x".repeat(2953), Some(Level::L)).is_ok(), "the largest byte payload of version 40-L");
    }
}
