//! A tag's colours, and whether phone readers can tell them apart.
//!
//! The rule: the symbol contrast, the difference between the light and the dark colour's
//! reflectance, must be at least 40%, the lowest grade (C, 1.5) that ISO/IEC 15415's print
//! quality grading still passes and the grade GS1's General Specifications ask of printed 2D
//! symbols. A screen colour's reflectance is taken as its relative luminance (sRGB linearised,
//! as WCAG 2 computes it): the share of light a print of it sends back, which ink and paper only
//! approximate, so a print run should still be tried with a phone. Dark modules on a light ground
//! is what ISO/IEC 18004 draws; the reverse (light on dark) is allowed there too, but some readers
//! fail on it, so it is made with a warning.

/// The lowest symbol contrast made (ISO/IEC 15415 grade C).
pub const MIN_SYMBOL_CONTRAST: f64 = 0.40;

/// An sRGB colour, as CSS writes it in hex.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Colour {
    /// Red, green and blue, 0 to 255.
    pub rgb: [u8; 3],
}

/// Why colours are refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ColourError {
    /// Not CSS hex.
    #[error("{0:?} is not a colour: write it in CSS hex, like #1a1a6e or #000")]
    NotHex(String),
    /// Too alike for readers.
    #[error(
        "{fg} on {bg} has a symbol contrast of {contrast:.0}%: phone readers need at least {min:.0}% (ISO/IEC 15415 grade C); darken the modules or lighten the ground",
        contrast = .contrast * 100.0, min = MIN_SYMBOL_CONTRAST * 100.0
    )]
    TooLittleContrast {
        /// The modules' colour.
        fg: String,
        /// The ground's colour.
        bg: String,
        /// Their symbol contrast, 0 to 1.
        contrast: f64,
    },
}

impl Colour {
    /// Black.
    pub const BLACK: Colour = Colour { rgb: [0, 0, 0] };
    /// White.
    pub const WHITE: Colour = Colour { rgb: [255, 255, 255] };

    /// `#rgb` or `#rrggbb`, in either case.
    pub fn parse(text: &str) -> Result<Colour, ColourError> {
        let bad = || ColourError::NotHex(text.to_owned());
        let hex = text.strip_prefix('#').ok_or_else(bad)?;
        if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad());
        }
        let digit = |i: usize| u8::from_str_radix(&hex[i..i + 1], 16).expect("a hex digit");
        let rgb = match hex.len() {
            3 => [digit(0) * 17, digit(1) * 17, digit(2) * 17],
            6 => [0, 2, 4].map(|i| digit(i) * 16 + digit(i + 1)),
            _ => return Err(bad()),
        };
        Ok(Colour { rgb })
    }

    /// Its relative luminance, 0 (black) to 1 (white), as WCAG 2 defines it.
    pub fn luminance(self) -> f64 {
        let linear = |c: u8| {
            let c = f64::from(c) / 255.0;
            if c <= 0.04045 {
                c / 12.92
            } else {
                ((c + 0.055) / 1.055).powf(2.4)
            }
        };
        let [r, g, b] = self.rgb.map(linear);
        0.2126 * r + 0.7152 * g + 0.0722 * b
    }

    /// `#rrggbb`.
    pub fn hex(self) -> String {
        format!("#{:02x}{:02x}{:02x}", self.rgb[0], self.rgb[1], self.rgb[2])
    }
}

impl std::fmt::Display for Colour {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.hex())
    }
}

/// A tag's two colours, checked: readable, and whether they are reversed (light on dark).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Colours {
    /// The dark modules' colour (the foreground).
    pub fg: Colour,
    /// The ground's colour, border included.
    pub bg: Colour,
}

impl Colours {
    /// Black modules on white.
    pub const PLAIN: Colours = Colours { fg: Colour::BLACK, bg: Colour::WHITE };

    /// `fg` modules on `bg`, refused when readers could not tell them apart.
    pub fn new(fg: Colour, bg: Colour) -> Result<Colours, ColourError> {
        let contrast = (fg.luminance() - bg.luminance()).abs();
        if contrast < MIN_SYMBOL_CONTRAST {
            return Err(ColourError::TooLittleContrast { fg: fg.hex(), bg: bg.hex(), contrast });
        }
        Ok(Colours { fg, bg })
    }

    /// Light modules on a dark ground.
    pub fn reversed(self) -> bool {
        self.fg.luminance() > self.bg.luminance()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn css_hex_is_read_and_anything_else_refused() {
        assert_eq!(Colour::parse("#000").unwrap(), Colour::BLACK);
        assert_eq!(Colour::parse("#FFFFFF").unwrap(), Colour::WHITE);
        assert_eq!(Colour::parse("#1a2B3c").unwrap().rgb, [0x1a, 0x2b, 0x3c]);
        for bad in ["000", "#00", "#0000", "#ggg", "red", "#12345g", ""] {
            assert!(Colour::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn luminance_is_wcags() {
        assert_eq!(Colour::BLACK.luminance(), 0.0);
        assert!((Colour::WHITE.luminance() - 1.0).abs() < 1e-9);
        // WCAG's worked value for #777777: about 0.184.
        assert!((Colour::parse("#777").unwrap().luminance() - 0.184).abs() < 0.001);
    }

    #[test]
    fn too_little_contrast_is_refused_and_reversed_colours_are_told() {
        let c = |fg: &str, bg: &str| Colours::new(Colour::parse(fg).unwrap(), Colour::parse(bg).unwrap());
        assert!(c("#1a1a6e", "#ffffff").is_ok());
        assert!(!c("#1a1a6e", "#ffffff").unwrap().reversed());
        assert!(c("#ffffff", "#000000").unwrap().reversed());
        let refused = c("#777777", "#999999").unwrap_err();
        assert!(refused.to_string().contains("at least 40%"), "{refused}");
        // Yellow on white: bright, but too close to the ground.
        assert!(c("#ffff00", "#ffffff").is_err());
        assert!(c("#ff0000", "#ffffff").is_ok(), "red on white, 79% apart");
    }
}
