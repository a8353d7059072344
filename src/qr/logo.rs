//! A logo in the middle of a tag.
//!
//! The logo sits in a hole of light modules, its own size plus a module of margin on each side,
//! centred on the symbol. The modules under it are lost, so the symbol is encoded at error
//! correction H and made only as large as the hole needs. The rule is counted, not guessed: the
//! codewords the hole touches are found by laying them out as ISO/IEC 18004 §7.7.3 places them
//! (the zigzag around the function patterns, the blocks interleaved), and in every block they
//! may be at most [`MAX_DAMAGE`] of what its error correction codewords can restore (a block of
//! `e` of them restores `e / 2` codewords read wrong), leaving the rest for smudges, glare and
//! print. The hole never reaches a finder pattern, its separator, the format or version
//! information or the timing patterns (the nine rows and columns along each edge hold them).
//! From version 7 the alignment pattern in the middle is covered: readers place the grid from
//! the finders and the others.
//!
//! Every logo tag is read back by [`read_back`] after it is drawn; one that does not read is
//! made one version larger, and if none reads, it is an error, not a file.

use std::path::Path;

use resvg::tiny_skia::{FilterQuality, Pixmap, PixmapPaint, Transform};
use resvg::usvg;

use super::{encode_from, Level, Tag, TooLong};

/// The largest share of a block's restorable codewords a logo's hole may damage.
pub const MAX_DAMAGE: f64 = 0.5;

/// Rows and columns along each edge a logo keeps out of: the finder pattern (7), its separator
/// (1) and the format information (1); the timing patterns run inside them.
const KEEP_OUT: u32 = 9;

/// The largest QR version.
const LARGEST: u8 = 40;

/// A logo, as read from its file.
pub struct Logo {
    image: Image,
    /// The file's bytes (an SVG tag embeds them as they are).
    bytes: Vec<u8>,
    /// Its own width and height in pixels (an SVG's `width`/`height` or `viewBox`).
    pub width: f32,
    /// See `width`.
    pub height: f32,
}

enum Image {
    Png(Pixmap),
    Svg(Box<usvg::Tree>),
}

/// Why a logo cannot be put on a tag.
#[derive(Debug, thiserror::Error)]
pub enum LogoError {
    /// The file could not be read.
    #[error("cannot read the logo {path}")]
    Read {
        /// Where.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Neither PNG nor SVG.
    #[error("the logo {path} is neither a PNG nor an SVG file")]
    Format {
        /// Where.
        path: String,
    },
    /// A PNG or SVG that does not parse.
    #[error("the logo {path} is a damaged {kind}: {reason}")]
    Damaged {
        /// Where.
        path: String,
        /// PNG or SVG.
        kind: &'static str,
        /// The parser's words.
        reason: String,
    },
    /// SVG text, which would need fonts to draw.
    #[error("the logo {path} has text in it: convert it to paths (Inkscape: Path > Object to Path); couchlink draws no fonts")]
    Text {
        /// Where.
        path: String,
    },
    /// A logo no symbol can carry.
    #[error(
        "a logo {width:.0}×{height:.0} px at --scale {scale} needs a hole of {hole_w}×{hole_h} modules, more than the largest QR code (version 40, error correction H) can lose; the largest that fits is {largest} px wide (--logo-width {largest})"
    )]
    TooLarge {
        /// The logo's width asked for, in pixels.
        width: f32,
        /// Its height.
        height: f32,
        /// Pixels per module.
        scale: u32,
        /// The hole it needs, in modules.
        hole_w: u32,
        /// See `hole_w`.
        hole_h: u32,
        /// The widest logo that fits, in pixels.
        largest: u32,
    },
    /// The URL fits no symbol.
    #[error(transparent)]
    TooLong(#[from] TooLong),
    /// Drawn, but not readable.
    #[error("the tag of {text} with its logo does not read back ({why}): make the logo smaller (--logo-width) or lighter at its edges")]
    Unreadable {
        /// What the tag holds.
        text: String,
        /// What the reader said (said in the message, so no source of it).
        why: Unread,
    },
}

/// Why a drawn tag does not read back as what it holds.
#[derive(Debug, thiserror::Error)]
pub enum Unread {
    /// The reader found no symbol.
    #[error("no QR code found")]
    NoCode,
    /// The reader found more than one.
    #[error("{0} QR codes found where there is one")]
    Several(usize),
    /// The one symbol found does not decode.
    #[error(transparent)]
    Decode(rqrr::DeQRError),
    /// It decodes as something else.
    #[error("read as {0:?}")]
    Misread(String),
    /// The SVG drawn cannot be rasterised to be read.
    #[error(transparent)]
    Svg(usvg::Error),
}

impl Logo {
    /// Reads a PNG or SVG logo (told apart by content).
    pub fn load(path: &Path) -> Result<Logo, LogoError> {
        let name = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|source| LogoError::Read { path: name.clone(), source })?;
        Logo::from_bytes(bytes, &name)
    }

    /// A logo from a file's bytes; `name` says which file in errors.
    pub fn from_bytes(bytes: Vec<u8>, name: &str) -> Result<Logo, LogoError> {
        let damaged = |kind, reason: String| LogoError::Damaged { path: name.to_owned(), kind, reason };
        if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
            let pixmap = Pixmap::decode_png(&bytes).map_err(|e| damaged("PNG", e.to_string()))?;
            let (width, height) = (pixmap.width() as f32, pixmap.height() as f32);
            return Ok(Logo { image: Image::Png(pixmap), bytes, width, height });
        }
        let head = String::from_utf8_lossy(&bytes[..bytes.len().min(4096)]).to_ascii_lowercase();
        if !head.contains("<svg") {
            return Err(LogoError::Format { path: name.to_owned() });
        }
        let tree =
            usvg::Tree::from_data(&bytes, &usvg::Options::default()).map_err(|e| damaged("SVG", e.to_string()))?;
        // usvg built without fonts drops text silently: a logo missing its words is refused.
        if String::from_utf8_lossy(&bytes).contains("<text") {
            return Err(LogoError::Text { path: name.to_owned() });
        }
        let size = tree.size();
        Ok(Logo { width: size.width(), height: size.height(), image: Image::Svg(Box::new(tree)), bytes })
    }

    /// The file's bytes as a `data:` URL, for an SVG `<image>`.
    pub fn data_url(&self) -> String {
        use base64::Engine as _;
        let kind = match self.image {
            Image::Png(_) => "image/png",
            Image::Svg(_) => "image/svg+xml",
        };
        format!("data:{kind};base64,{}", base64::engine::general_purpose::STANDARD.encode(&self.bytes))
    }

    /// The logo drawn at `width`×`height` pixels (at least 1 each).
    pub fn pixmap(&self, width: u32, height: u32) -> Pixmap {
        let mut out = Pixmap::new(width.max(1), height.max(1)).expect("a non-empty pixmap");
        let (sx, sy) = (out.width() as f32 / self.width, out.height() as f32 / self.height);
        match &self.image {
            Image::Png(png) => {
                let paint = PixmapPaint { quality: FilterQuality::Bicubic, ..PixmapPaint::default() };
                out.draw_pixmap(0, 0, png.as_ref(), &paint, Transform::from_scale(sx, sy), None);
            }
            Image::Svg(tree) => resvg::render(tree, Transform::from_scale(sx, sy), &mut out.as_mut()),
        }
        out
    }
}

/// The light square a logo sits in: odd sides, so that it centres on the symbol's middle module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hole {
    /// Modules across.
    pub w: u32,
    /// Modules down.
    pub h: u32,
}

impl Hole {
    /// The hole around a logo of `width`×`height` modules: its size rounded up, a module of
    /// margin on each side, rounded up to odd.
    pub fn around(width: f32, height: f32) -> Hole {
        let side = |m: f32| ((m.max(0.0).ceil() as u32) + 2) | 1;
        Hole { w: side(width), h: side(height) }
    }

    /// Its top left module in a symbol `size` modules a side.
    pub fn origin(&self, size: u32) -> (u32, u32) {
        ((size.saturating_sub(self.w)) / 2, (size.saturating_sub(self.h)) / 2)
    }

    /// Whether module (`x`, `y`) of a symbol `size` modules a side is under the hole.
    pub fn covers(&self, size: u32, x: u32, y: u32) -> bool {
        let (x0, y0) = self.origin(size);
        (x0..x0 + self.w).contains(&x) && (y0..y0 + self.h).contains(&y)
    }

    /// Whether a version-`version` symbol at level H can lose it.
    pub fn fits(&self, version: u8) -> bool {
        let size = 17 + 4 * u32::from(version);
        let room = size.saturating_sub(2 * KEEP_OUT);
        if self.w > room || self.h > room {
            return false;
        }
        let (damaged, restorable) = damage(version, *self);
        damaged as f64 <= MAX_DAMAGE * restorable as f64
    }
}

/// Level H's error correction codewords per block, and its blocks, by version (ISO/IEC 18004
/// Table 9; index 0 unused).
const H_ECC_PER_BLOCK: [u16; 41] = [
    0, 17, 28, 22, 16, 22, 28, 26, 26, 24, 28, 24, 28, 22, 24, 24, 30, 28, 28, 26, 28, 30, 24, 30, 30, 30, 30, 30, 30,
    30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30,
];
const H_BLOCKS: [u16; 41] = [
    0, 1, 1, 2, 4, 4, 4, 5, 6, 8, 8, 11, 11, 16, 16, 18, 16, 19, 21, 25, 25, 25, 34, 30, 32, 35, 37, 40, 42, 45, 48,
    51, 54, 57, 60, 63, 66, 70, 74, 77, 81,
];

/// The modules of a version-`version` symbol that hold no codeword bits: finders with their
/// separators and the format information, timing, alignment and version information.
fn function_modules(version: u8) -> Vec<bool> {
    let size = 17 + 4 * usize::from(version);
    let mut map = vec![false; size * size];
    let mut mark = |x: usize, y: usize, w: usize, h: usize| {
        for yy in y..(y + h).min(size) {
            for xx in x..(x + w).min(size) {
                map[yy * size + xx] = true;
            }
        }
    };
    mark(0, 0, 9, 9);
    mark(size - 8, 0, 8, 9);
    mark(0, size - 8, 9, 8);
    mark(6, 0, 1, size);
    mark(0, 6, size, 1);
    if version >= 2 {
        let count = usize::from(version) / 7 + 2;
        let step = if version == 32 { 26 } else { (usize::from(version) * 4 + count * 2 + 1) / (count * 2 - 2) * 2 };
        let mut at: Vec<usize> = (0..count - 1).map(|i| size - 7 - i * step).collect();
        at.push(6);
        for &y in &at {
            for &x in &at {
                // The three that would overlap a finder are not drawn.
                let finder = match (x < 9, y < 9) {
                    (true, true) => true,
                    (false, true) => x > size - 9,
                    (true, false) => y > size - 9,
                    (false, false) => false,
                };
                if !finder {
                    mark(x - 2, y - 2, 5, 5);
                }
            }
        }
    }
    if version >= 7 {
        mark(size - 11, 0, 3, 6);
        mark(0, size - 11, 6, 3);
    }
    map
}

/// The codewords a hole damages in the worst block, and how many a block restores.
fn damage(version: u8, hole: Hole) -> (usize, usize) {
    let size = 17 + 4 * usize::from(version);
    let function = function_modules(version);
    let raw_bits = function.iter().filter(|f| !**f).count();
    let total = raw_bits / 8;
    let (ecc, blocks) =
        (usize::from(H_ECC_PER_BLOCK[usize::from(version)]), usize::from(H_BLOCKS[usize::from(version)]));
    // The block of each codeword in the order they are placed (§7.6: data codewords of each
    // block in turn, short blocks first missing their last, then the error correction ones).
    let short = blocks - total % blocks;
    let short_len = total / blocks;
    let short_data = short_len - ecc;
    let mut block_of = Vec::with_capacity(total);
    for i in 0..=short_len {
        for j in 0..blocks {
            if i != short_data || j >= short {
                block_of.push(j);
            }
        }
    }
    debug_assert_eq!(block_of.len(), total);
    // The zigzag: column pairs from the right, up then down, skipping the vertical timing.
    let mut damaged = vec![false; total];
    let mut bit = 0;
    let mut right = size as i64 - 1;
    let (x0, y0) = hole.origin(size as u32);
    while right >= 1 {
        if right == 6 {
            right = 5;
        }
        for vert in 0..size {
            for j in 0..2 {
                let x = (right - j) as usize;
                let upward = (right + 1) & 2 == 0;
                let y = if upward { size - 1 - vert } else { vert };
                if !function[y * size + x] && bit < total * 8 {
                    let inside = (x0 as usize..(x0 + hole.w) as usize).contains(&x)
                        && (y0 as usize..(y0 + hole.h) as usize).contains(&y);
                    if inside {
                        damaged[bit / 8] = true;
                    }
                    bit += 1;
                }
            }
        }
        right -= 2;
    }
    let mut per_block = vec![0; blocks];
    for (codeword, _) in damaged.iter().enumerate().filter(|(_, d)| **d) {
        per_block[block_of[codeword]] += 1;
    }
    (per_block.into_iter().max().unwrap_or(0), ecc / 2)
}

/// A logo placed on tags: the logo, its size in modules, and its hole.
pub struct Placed {
    /// The logo.
    pub logo: Logo,
    /// Its width in modules.
    pub width: f32,
    /// Its height in modules.
    pub height: f32,
    /// Where modules are left out for it.
    pub hole: Hole,
}

impl Placed {
    /// `logo` at `width_px` pixels across (its own width when `None`) on tags drawn at `scale`
    /// pixels per module; refused when no symbol can lose its hole, with the widest that fits.
    pub fn new(logo: Logo, width_px: Option<f32>, scale: u32) -> Result<Placed, LogoError> {
        let width_px = width_px.unwrap_or(logo.width);
        let height_px = width_px * logo.height / logo.width;
        let (width, height) = (width_px / scale as f32, height_px / scale as f32);
        let hole = Hole::around(width, height);
        if !hole.fits(LARGEST) {
            // The widest logo of the same proportions whose hole version 40 can lose.
            let largest = (1..=177)
                .rev()
                .map(|px| px * scale)
                .find(|&px| {
                    let w = px as f32 / scale as f32;
                    Hole::around(w, w * logo.height / logo.width).fits(LARGEST)
                })
                .unwrap_or(0);
            return Err(LogoError::TooLarge {
                width: width_px,
                height: height_px,
                scale,
                hole_w: hole.w,
                hole_h: hole.h,
                largest,
            });
        }
        Ok(Placed { logo, width, height, hole })
    }

    /// Where the logo goes on a symbol `size` modules a side with `border` modules around, in
    /// modules from the bordered picture's top left: left, top, width, height (centred in its
    /// hole).
    pub fn frame(&self, size: u32, border: u32) -> (f32, f32, f32, f32) {
        let (x0, y0) = self.hole.origin(size);
        let left = (x0 + border) as f32 + (self.hole.w as f32 - self.width) / 2.0;
        let top = (y0 + border) as f32 + (self.hole.h as f32 - self.height) / 2.0;
        (left, top, self.width, self.height)
    }

    /// `text` encoded at level H in the smallest symbol, of version `smallest` or more, that
    /// can lose the hole.
    pub fn encode(&self, text: &str, smallest: u8) -> Result<Tag, LogoError> {
        let mut version = smallest;
        loop {
            if version > LARGEST {
                return Err(TooLong { chars: text.len(), level: Level::H }.into());
            }
            let tag = encode_from(text, Some(Level::H), version)?;
            if self.hole.fits(tag.version()) {
                return Ok(tag);
            }
            version = tag.version() + 1;
        }
    }

    /// `text`'s tag drawn by `draw`, which reads it back: in the smallest symbol that can lose
    /// the hole, or the next larger ones while the drawing does not read back (`unreadable`
    /// says which of `draw`'s errors that is).
    pub fn drawn<T, E: From<LogoError>>(
        &self,
        text: &str,
        mut draw: impl FnMut(&Tag) -> Result<T, E>,
        unreadable: impl Fn(&E) -> bool,
    ) -> Result<(Tag, T), E> {
        let mut tag = self.encode(text, 1)?;
        loop {
            match draw(&tag) {
                Ok(drawn) => return Ok((tag, drawn)),
                Err(e) if unreadable(&e) && tag.version() < LARGEST => match self.encode(text, tag.version() + 1) {
                    Ok(larger) => tag = larger,
                    // No larger symbol holds it: what the reader said is the better reason.
                    Err(_) => return Err(e),
                },
                Err(e) => return Err(e),
            }
        }
    }
}

/// What a drawn tag holds, read by rqrr (`reversed`: light modules on a dark ground, read from
/// the negative, as readers that handle reversal do).
pub fn read_back(pixmap: &Pixmap, reversed: bool) -> Result<String, Unread> {
    let (width, height) = (pixmap.width() as usize, pixmap.height() as usize);
    let data = pixmap.data();
    let mut image = rqrr::PreparedImage::prepare_from_greyscale(width, height, |x, y| {
        let p = &data[(y * width + x) * 4..][..4];
        // Premultiplied: a transparent pixel is black, and reads as the white paper under it.
        let luma =
            (u32::from(p[0]) * 299 + u32::from(p[1]) * 587 + u32::from(p[2]) * 114) / 1000 + (255 - u32::from(p[3]));
        let luma = luma.min(255) as u8;
        if reversed {
            255 - luma
        } else {
            luma
        }
    });
    let grids = image.detect_grids();
    match grids.as_slice() {
        [grid] => grid.decode().map(|(_, text)| text).map_err(Unread::Decode),
        [] => Err(Unread::NoCode),
        more => Err(Unread::Several(more.len())),
    }
}

/// Reads back a drawn tag and holds it to `text`.
pub fn check(pixmap: &Pixmap, reversed: bool, text: &str) -> Result<(), LogoError> {
    match read_back(pixmap, reversed) {
        Ok(read) if read == text => Ok(()),
        Ok(read) => Err(LogoError::Unreadable { text: text.to_owned(), why: Unread::Misread(read) }),
        Err(why) => Err(LogoError::Unreadable { text: text.to_owned(), why }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svg_logo(width: u32, height: u32) -> Logo {
        let svg = format!(
            "<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}'><circle cx='{}' cy='{}' r='{}' fill='#c00'/></svg>",
            width / 2,
            height / 2,
            width.min(height) / 2
        );
        Logo::from_bytes(svg.into_bytes(), "logo.svg").unwrap()
    }

    #[test]
    fn the_hole_keeps_out_of_the_finders_timing_and_format_information() {
        // Version 1: 21 modules, rows and columns 9..=11 are free: a 3-module hole at most.
        assert!(!Hole { w: 5, h: 1 }.fits(1));
        assert_eq!(Hole { w: 3, h: 3 }.origin(21), (9, 9));
    }

    #[test]
    fn the_layout_of_codewords_matches_the_standard() {
        // Every version's data modules hold its codewords and 0 to 7 remainder bits (§7.7.3,
        // Table 1: version 1 has 26 codewords, 7 has 196, 40 has 3706).
        for (version, codewords, remainder) in [(1, 26, 0), (2, 44, 7), (7, 196, 0), (14, 581, 3), (40, 3706, 0)] {
            let data = function_modules(version).iter().filter(|f| !**f).count();
            assert_eq!((data / 8, data % 8), (codewords, remainder), "version {version}");
        }
        // A one-module hole damages one codeword, restorable in any version.
        assert_eq!(damage(3, Hole { w: 1, h: 1 }), (1, 11));
        // Version 3 at H: two blocks of 22 error correction codewords, 11 restorable each.
        let (damaged, restorable) = damage(3, Hole { w: 11, h: 11 });
        assert!(damaged > restorable / 2, "an 11×11 hole takes {damaged} of a block's codewords: too many");
    }

    #[test]
    fn the_symbol_grows_only_as_far_as_the_logo_needs() {
        let text = "HTTPS://0X1F.IE/H83if";
        let smallest = encode_from(text, Some(Level::H), 1).unwrap().version();
        let small = Placed::new(svg_logo(8, 8), None, 8).unwrap();
        assert_eq!(small.hole, Hole { w: 3, h: 3 });
        assert_eq!(small.encode(text, 1).unwrap().version(), smallest, "a one-module logo needs no more room");
        let big = Placed::new(svg_logo(80, 80), None, 8).unwrap();
        let tag = big.encode(text, 1).unwrap();
        let version = tag.version();
        assert!(big.hole.fits(version) && !big.hole.fits(version - 1), "version {version} is the first that fits");
        assert_eq!(tag.level(), Level::H);
    }

    #[test]
    fn a_logo_too_large_is_refused_with_the_largest_that_fits() {
        let refused = Placed::new(svg_logo(1000, 500), None, 8);
        let Err(LogoError::TooLarge { largest, hole_w, hole_h, .. }) = refused else {
            panic!("a 1000 px logo at scale 8 needs 127×65 modules")
        };
        assert_eq!((hole_w, hole_h), (127, 65));
        let fits = Placed::new(svg_logo(1000, 500), Some(largest as f32), 8).expect("the largest fits");
        assert!(fits.hole.fits(LARGEST));
        assert!(Placed::new(svg_logo(1000, 500), Some((largest + 8) as f32), 8).is_err(), "one module more does not");
    }

    #[test]
    fn text_in_an_svg_logo_and_other_files_are_refused() {
        let text = b"<svg xmlns='http://www.w3.org/2000/svg' width='10' height='10'><text>ACME</text></svg>".to_vec();
        assert!(matches!(Logo::from_bytes(text, "t.svg"), Err(LogoError::Text { .. })));
        assert!(matches!(Logo::from_bytes(b"GIF89a".to_vec(), "l.gif"), Err(LogoError::Format { .. })));
        let broken = b"\x89PNG\r\n\x1a\nxx".to_vec();
        assert!(matches!(Logo::from_bytes(broken, "l.png"), Err(LogoError::Damaged { kind: "PNG", .. })));
    }
}
