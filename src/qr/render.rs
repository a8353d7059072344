//! A QR symbol drawn as PNG, SVG or Unicode half blocks: dark modules on a light ground (black on white unless asked), with a quiet
//! zone of `border` modules around (the standard asks for 4).

use std::fmt::Write as _;

use qrcodegen::QrCode;

pub use super::colour::Colours;

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

/// An SVG: one path of unit squares in a viewBox of modules, sized `scale` pixels per module.
pub fn svg(code: &QrCode, look: Look) -> String {
    let modules = side(code, look);
    let pixels = modules * look.scale;
    let mut path = String::new();
    for y in 0..modules {
        for x in 0..modules {
            if dark(code, look.border, x, y) {
                let _ = write!(path, "M{x},{y}h1v1h-1z");
            }
        }
    }
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"{pixels}\" height=\"{pixels}\" \
         viewBox=\"0 0 {modules} {modules}\" shape-rendering=\"crispEdges\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"{bg}\"/>\n\
         <path d=\"{path}\" fill=\"{fg}\"/>\n</svg>\n",
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
        let text = svg(&code, Look { scale: 10, border: 2, colours: Colours::PLAIN });
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
