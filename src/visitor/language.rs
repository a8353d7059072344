//! The language a client prefers, from `Accept-Language` (RFC 9110, section 12.5.4): the primary
//! subtag of its most preferred language range, weights (`q`) honoured.

/// A primary language subtag, lower case (`fr` of `fr-CH`), at most 8 letters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Language {
    bytes: [u8; 8],
    len: u8,
}

impl Language {
    /// A rule's language: a primary subtag, 1 to 8 ASCII letters (RFC 5646), any case.
    pub fn parse(tag: &str) -> Option<Language> {
        let bytes = tag.as_bytes();
        if !(1..=8).contains(&bytes.len()) || !bytes.iter().all(u8::is_ascii_alphabetic) {
            return None;
        }
        let mut out = [0u8; 8];
        out[..bytes.len()].copy_from_slice(bytes);
        out.make_ascii_lowercase();
        Some(Language { bytes: out, len: bytes.len() as u8 })
    }

    /// As text.
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.bytes[..self.len as usize]).expect("ASCII letters")
    }
}

/// The primary language of the most preferred range in an `Accept-Language` value: the highest
/// `q` wins, the first listed among equals; `*`, `q=0` and malformed members are passed over.
pub fn preferred(value: &[u8]) -> Option<Language> {
    let text = std::str::from_utf8(value).ok()?;
    let mut best: Option<(u16, Language)> = None;
    for member in text.split(',') {
        let mut parts = member.split(';');
        let range = parts.next()?.trim();
        let primary = range.split('-').next().unwrap_or("");
        let Some(language) = Language::parse(primary) else { continue };
        let mut weight = 1000;
        for parameter in parts {
            let (name, value) = parameter.split_once('=').unwrap_or((parameter, ""));
            if name.trim().eq_ignore_ascii_case("q") {
                weight = quality(value.trim()).unwrap_or_default();
            }
        }
        if weight > 0 && best.is_none_or(|(w, _)| weight > w) {
            best = Some((weight, language));
        }
    }
    best.map(|(_, language)| language)
}

/// A `qvalue` in thousandths: `0`, `0.5`, `1.000` (at most three decimals).
fn quality(text: &str) -> Option<u16> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    if fraction.len() > 3 || !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let thousandths: u16 = format!("{fraction:0<3}").parse().ok()?;
    match whole {
        "0" => Some(thousandths),
        "1" if thousandths == 0 => Some(1000),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn top(value: &str) -> Option<String> {
        preferred(value.as_bytes()).map(|l| l.as_str().to_owned())
    }

    #[test]
    fn weights_are_honoured() {
        assert_eq!(top("fr-CH, fr;q=0.9, en;q=0.8, de;q=0.7, *;q=0.5").as_deref(), Some("fr"));
        assert_eq!(top("en;q=0.5, de").as_deref(), Some("de"), "no q is 1");
        assert_eq!(top("en;q=0.8, DE-at;q=0.9").as_deref(), Some("de"));
        assert_eq!(top("en, de").as_deref(), Some("en"), "the first among equals");
        assert_eq!(top("en;q=0, de;q=0.001").as_deref(), Some("de"), "q=0: not acceptable");
        assert_eq!(top("*").as_deref(), None);
        assert_eq!(top("").as_deref(), None);
        assert_eq!(top("en;q=2, fr;q=0.5").as_deref(), Some("fr"), "a malformed weight counts as 0");
        assert_eq!(top("x-klingon, es").as_deref(), Some("x"), "a primary subtag of one letter is still one");
    }

    #[test]
    fn a_rules_language_is_letters() {
        assert_eq!(Language::parse("FR").unwrap().as_str(), "fr");
        assert!(Language::parse("fr-CH").is_none());
        assert!(Language::parse("").is_none());
        assert!(Language::parse("abcdefghi").is_none());
    }
}
