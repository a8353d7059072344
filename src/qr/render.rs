//! A QR symbol drawn as PNG, SVG or Unicode half blocks: dark modules on a light ground (black on white unless asked), with a quiet
//! zone of `border` modules around (the standard asks for 4).

use std::fmt::Write as _;

use qrcodegen::QrCode;
use resvg::tiny_skia::{self, FillRule, Paint, PathBuilder, Pixmap, PixmapPaint, Transform};
use resvg::usvg;

pub use super::colour::Colours;
use super::logo::{self, LogoError, Placed, Unread};

/// How a symbol is drawn.
#[derive(Debug, Clone, Copy)]
pub struct Look {
    /// Pixels per module (PNG and SVG).
    pub scale: u32,
    /// Light modules around the symbol.
    pub border: u32,
    /// The modules' and the ground's colours (PNG and SVG).
    pub colours: Colours,
}

/// Whether the module at (x, y) of the bordered picture is dark.
fn dark(code: &QrCode, border: u32, x: u32, y: u32) -> bool {
    let (x, y) = (x as i32 - border as i32, y as i32 - border as i32);
    code.get_module(x, y)
}

/// Modules a side, border included.
fn side(code: &QrCode, look: Look) -> u32 {
    code.size() as u32 + 2 * look.border
}

/// A 1-bit PNG: grayscale for black on white, else a palette of the two colours.
pub fn png(code: &QrCode, look: Look) -> Vec<u8> {
    let modules = side(code, look);
    let pixels = modules * look.scale;
    let row_bytes = pixels.div_ceil(8) as usize;
    let mut data = vec![0u8; row_bytes * pixels as usize];
    let plain = look.colours == Colours::PLAIN;
    for py in 0..pixels {
        for px in 0..pixels {
            // 1 is white in a grayscale PNG, and the dark colour (entry 1) in the palette.
            if dark(code, look.border, px / look.scale, py / look.scale) != plain {
                data[py as usize * row_bytes + px as usize / 8] |= 0x80 >> (px % 8);
            }
        }
    }
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, pixels, pixels);
    if plain {
        encoder.set_color(png::ColorType::Grayscale);
    } else {
        encoder.set_color(png::ColorType::Indexed);
        encoder.set_palette([look.colours.bg.rgb, look.colours.fg.rgb].concat());
    }
    encoder.set_depth(png::BitDepth::One);
    let mut writer = encoder.write_header().expect("writing to memory");
    writer.write_image_data(&data).expect("writing to memory");
    writer.finish().expect("writing to memory");
    out
}

/// Whether the module at (x, y) of the bordered picture is drawn dark: dark, and not under a
/// logo's hole.
fn inked(code: &QrCode, look: Look, logo: Option<&Placed>, x: u32, y: u32) -> bool {
    let size = code.size() as u32;
    let in_symbol = |v: u32| v.checked_sub(look.border).filter(|&v| v < size);
    let under_logo = match (logo, in_symbol(x), in_symbol(y)) {
        (Some(logo), Some(sx), Some(sy)) => logo.hole.covers(size, sx, sy),
        _ => false,
    };
    dark(code, look.border, x, y) && !under_logo
}

/// The tag drawn in RGBA at `look.scale` pixels per module, with `logo` in its hole.
pub fn raster(code: &QrCode, look: Look, logo: Option<&Placed>) -> Pixmap {
    let modules = side(code, look);
    let scale = look.scale as f32;
    let mut pixmap = Pixmap::new(modules * look.scale, modules * look.scale).expect("a tag has pixels");
    let [r, g, b] = look.colours.bg.rgb;
    pixmap.fill(tiny_skia::Color::from_rgba8(r, g, b, 255));
    let mut path = PathBuilder::new();
    for y in 0..modules {
        for x in 0..modules {
            if inked(code, look, logo, x, y) {
                path.push_rect(
                    tiny_skia::Rect::from_xywh(x as f32 * scale, y as f32 * scale, scale, scale).expect("a module"),
                );
            }
        }
    }
    let [r, g, b] = look.colours.fg.rgb;
    let mut paint = Paint::default();
    paint.set_color_rgba8(r, g, b, 255);
    paint.anti_alias = false;
    if let Some(path) = path.finish() {
        pixmap.fill_path(&path, &paint, FillRule::Winding, Transform::identity(), None);
    }
    if let Some(logo) = logo {
        let (left, top, width, height) = logo.frame(code.size() as u32, look.border);
        let drawn = logo.logo.pixmap((width * scale).round() as u32, (height * scale).round() as u32);
        let (x, y) = ((left * scale).round() as i32, (top * scale).round() as i32);
        pixmap.draw_pixmap(x, y, drawn.as_ref(), &PixmapPaint::default(), Transform::identity(), None);
    }
    pixmap
}

/// A tag with a logo as a PNG (8-bit RGBA), read back before it is returned.
pub fn png_with_logo(code: &QrCode, look: Look, logo: &Placed, text: &str) -> Result<Vec<u8>, LogoError> {
    let pixmap = raster(code, look, Some(logo));
    logo::check(&pixmap, look.colours.reversed(), text)?;
    Ok(pixmap.encode_png().expect("encoding to memory"))
}

/// A tag with a logo as SVG, rasterised by resvg and read back before it is returned.
pub fn svg_with_logo(code: &QrCode, look: Look, logo: &Placed, text: &str) -> Result<String, LogoError> {
    let svg = svg(code, look, Some(logo));
    let unreadable = |e| LogoError::Unreadable { text: text.to_owned(), why: Unread::Svg(e) };
    let tree = usvg::Tree::from_str(&svg, &usvg::Options::default()).map_err(unreadable)?;
    // At least 4 pixels a module, as a camera would see it at reading distance.
    let zoom = (4.0 / look.scale as f32).max(1.0);
    let size = tree.size();
    let mut pixmap = Pixmap::new((size.width() * zoom).ceil() as u32, (size.height() * zoom).ceil() as u32)
        .expect("a tag has pixels");
    resvg::render(&tree, Transform::from_scale(zoom, zoom), &mut pixmap.as_mut());
    logo::check(&pixmap, look.colours.reversed(), text)?;
    Ok(svg)
}

/// An SVG: one path of unit squares in a viewBox of modules, sized `scale` pixels per module,
/// with `logo` (the file itself, as a `data:` URL) in its hole.
pub fn svg(code: &QrCode, look: Look, logo: Option<&Placed>) -> String {
    let modules = side(code, look);
    let pixels = modules * look.scale;
    let mut path = String::new();
    for y in 0..modules {
        for x in 0..modules {
            if inked(code, look, logo, x, y) {
                let _ = write!(path, "M{x},{y}h1v1h-1z");
            }
        }
    }
    let image = match logo {
        Some(logo) => {
            let (x, y, w, h) = logo.frame(code.size() as u32, look.border);
            format!("<image x=\"{x}\" y=\"{y}\" width=\"{w}\" height=\"{h}\" href=\"{}\"/>\n", logo.logo.data_url())
        }
        None => String::new(),
    };
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"{pixels}\" height=\"{pixels}\" \
         viewBox=\"0 0 {modules} {modules}\" shape-rendering=\"crispEdges\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"{bg}\"/>\n\
         <path d=\"{path}\" fill=\"{fg}\"/>\n{image}</svg>\n",
        bg = look.colours.bg,
        fg = look.colours.fg,
    )
}

/// Unicode half blocks, two module rows per line: `█` both dark, `▀` top, `▄` bottom, space
/// neither. Read as dark ink on a light background: on a dark terminal, invert its colours.
pub fn terminal(code: &QrCode, look: Look) -> String {
    let modules = side(code, look);
    let mut out = String::new();
    for y in (0..modules).step_by(2) {
        for x in 0..modules {
            let top = dark(code, look.border, x, y);
            let bottom = y + 1 < modules && dark(code, look.border, x, y + 1);
            out.push(match (top, bottom) {
                (true, true) => '█',
                (true, false) => '▀',
                (false, true) => '▄',
                (false, false) => ' ',
            });
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use qrcodegen::QrCodeEcc;

    fn code() -> QrCode {
        QrCode::encode_text("HTTP://A.B", QrCodeEcc::Low).unwrap()
    }

    #[test]
    fn the_png_is_the_symbol_and_its_border_at_scale() {
        let bytes = png(&code(), Look { scale: 3, border: 4, colours: Colours::PLAIN });
        let decoder = png::Decoder::new(std::io::Cursor::new(bytes));
        let reader = decoder.read_info().unwrap();
        let info = reader.info();
        assert_eq!((info.width, info.height), ((21 + 8) * 3, (21 + 8) * 3));
    }

    #[test]
    fn the_svg_draws_every_dark_module_once() {
        let code = code();
        let text = svg(&code, Look { scale: 10, border: 2, colours: Colours::PLAIN }, None);
        let dark = (0..21).flat_map(|y| (0..21).map(move |x| (x, y))).filter(|&(x, y)| code.get_module(x, y)).count();
        assert_eq!(text.matches("h1v1h-1z").count(), dark);
        assert!(text.contains("viewBox=\"0 0 25 25\"") && text.contains("width=\"250\""));
    }

    #[test]
    fn the_terminal_drawing_has_half_as_many_lines_as_module_rows() {
        let text = terminal(&code(), Look { scale: 1, border: 1, colours: Colours::PLAIN });
        assert_eq!(text.lines().count(), 12, "23 rows, two per line");
        assert!(text.lines().all(|l| l.chars().count() == 23));
        assert!(text.lines().next().unwrap().chars().all(|c| c == ' ' || c == '▄'), "the border row is light");
    }
}
