//! QR tags as `couchlink qr` writes them, read back by a decoder that shares no code with the
//! encoder: in the default suite rqrr (a Rust port of quirc) and resvg for SVG, so that the
//! check runs on any machine; in the `tools` target zbar's `zbarimg` and librsvg's
//! `rsvg-convert`, as a phone's reader and a print shop's renderer would.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use super::process::tool;

/// Pixels per module of the tags `tag` makes: print resolution (a 30 mm version 3 tag printed at
/// 300 dpi has about 12 pixels a module).
pub const SCALE: u32 = 12;

/// Which decoder reads tags back.
#[derive(Debug, Clone, Copy)]
pub enum Reader {
    /// rqrr and resvg, pure Rust crates.
    Rust,
    /// Debian's zbarimg and rsvg-convert.
    Debian,
}

/// `couchlink qr` with `args`, its environment cleared of couchlink's variables.
pub fn qr(args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_couchlink"));
    command.arg("qr").args(args).env_remove("COUCHLINK_PUBLIC_URL");
    command.output().expect("couchlink runs")
}

/// What `reader` reads in the PNG at `path`.
pub fn decode(path: &Path, reader: Reader) -> String {
    match reader {
        Reader::Rust => {
            let (width, height, luma) = greyscale(path);
            let mut image = rqrr::PreparedImage::prepare_from_greyscale(width, height, |x, y| luma[y * width + x]);
            let grids = image.detect_grids();
            assert_eq!(grids.len(), 1, "rqrr found {} codes in {}", grids.len(), path.display());
            let (_, content) = grids[0].decode().unwrap_or_else(|e| panic!("rqrr cannot read {}: {e}", path.display()));
            content
        }
        Reader::Debian => {
            let out = tool("zbarimg", "zbar-tools").args(["--quiet", "--raw"]).arg(path).output().unwrap();
            assert!(
                out.status.success(),
                "zbarimg read nothing in {}: {}",
                path.display(),
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8(out.stdout).unwrap().trim_end().to_owned()
        }
    }
}

/// The PNG at `path` as one luminance byte a pixel (transparent pixels white).
pub fn greyscale(path: &Path) -> (usize, usize, Vec<u8>) {
    let mut decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(path).unwrap()));
    // Palettes and 1-bit greys (what couchlink writes) as 8 bits a sample.
    decoder.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let samples = info.color_type.samples();
    let luma = buf[..info.buffer_size()]
        .chunks(samples)
        .map(|px| match samples {
            1 => px[0],
            2 if px[1] < 128 => 255,
            2 => px[0],
            4 if px[3] < 128 => 255,
            _ => ((u32::from(px[0]) + u32::from(px[1]) + u32::from(px[2])) / 3) as u8,
        })
        .collect();
    (info.width as usize, info.height as usize, luma)
}

/// The negative of the PNG at `path` (grey levels inverted), written into `dir`.
pub fn negative(path: &Path, dir: &Path) -> PathBuf {
    let (width, height, luma) = greyscale(path);
    let out = dir.join("negative.png");
    let mut encoder =
        png::Encoder::new(std::io::BufWriter::new(std::fs::File::create(&out).unwrap()), width as u32, height as u32);
    encoder.set_color(png::ColorType::Grayscale);
    let inverted: Vec<u8> = luma.iter().map(|l| 255 - l).collect();
    encoder.write_header().unwrap().write_image_data(&inverted).unwrap();
    out
}

/// Renders the SVG at `svg` into the PNG `png` with `reader`'s renderer.
pub fn render_svg(svg: &Path, png: &Path, reader: Reader) {
    match reader {
        Reader::Rust => {
            let text = std::fs::read_to_string(svg).unwrap();
            let tree = resvg::usvg::Tree::from_str(&text, &resvg::usvg::Options::default()).unwrap();
            let size = tree.size().to_int_size();
            let mut pixmap = resvg::tiny_skia::Pixmap::new(size.width(), size.height()).unwrap();
            resvg::render(&tree, resvg::tiny_skia::Transform::default(), &mut pixmap.as_mut());
            pixmap.save_png(png).unwrap();
        }
        Reader::Debian => {
            let out = tool("rsvg-convert", "librsvg2-bin").arg(svg).arg("-o").arg(png).output().unwrap();
            assert!(out.status.success(), "rsvg-convert: {}", String::from_utf8_lossy(&out.stderr));
        }
    }
}

/// Width of the PNG at `path`, in pixels.
pub fn png_width(path: &Path) -> u32 {
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(path).unwrap()));
    decoder.read_info().unwrap().info().width
}

/// The terminal drawing as a PNG, 4 pixels per module; its modules a side.
pub fn terminal_to_png(text: &str, path: &Path) -> u32 {
    let rows: Vec<Vec<bool>> = text
        .lines()
        .flat_map(|line| {
            let top = line.chars().map(|c| matches!(c, '█' | '▀')).collect();
            let bottom = line.chars().map(|c| matches!(c, '█' | '▄')).collect();
            [top, bottom]
        })
        .collect();
    let side = rows[0].len() as u32;
    let scale = 4;
    let mut pixels = Vec::new();
    for y in 0..side * scale {
        let row = rows.get((y / scale) as usize);
        for x in 0..side * scale {
            let dark = row.is_some_and(|r| r[(x / scale) as usize]);
            pixels.push(if dark { 0 } else { 255 });
        }
    }
    let mut encoder =
        png::Encoder::new(std::io::BufWriter::new(std::fs::File::create(path).unwrap()), side * scale, side * scale);
    encoder.set_color(png::ColorType::Grayscale);
    encoder.write_header().unwrap().write_image_data(&pixels).unwrap();
    side
}

/// Writes the tag of `id` under `base` in `format` into `dir`; what `reader` reads in it, its
/// modules a side without the 4-module border, and what `couchlink qr` said on stderr.
pub fn tag(dir: &Path, base: &str, id: &str, format: &str, extra: &[&str], reader: Reader) -> (String, u32, String) {
    let file: PathBuf = dir.join(format!("{id}-{format}-{}", extra.join("").replace('/', "_")));
    let scale = SCALE.to_string();
    let mut args = vec![id, "--public-url", base, "--format", format, "--scale", &scale];
    args.extend_from_slice(extra);
    let out_arg = file.display().to_string();
    args.extend(["--out", &out_arg]);
    let output = qr(&args);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{args:?}: {stderr}");
    // Light modules on a dark ground (the tool warned): zbar and rqrr read only dark on light,
    // so their negative is read, as a reader that handles reversed symbols would.
    let reversed = stderr.contains("light on dark");
    let read = |png: &Path| if reversed { decode(&negative(png, dir), reader) } else { decode(png, reader) };
    let (text, modules) = match format {
        "png" => (read(&file), png_width(&file) / SCALE - 8),
        "svg" => {
            let png = dir.join("rendered.png");
            render_svg(&file, &png, reader);
            (read(&png), png_width(&png) / SCALE - 8)
        }
        _ => {
            let png = dir.join("terminal.png");
            let side = terminal_to_png(&std::fs::read_to_string(&file).unwrap(), &png);
            (decode(&png, reader), side - 8)
        }
    };
    (text, modules, stderr)
}

/// Two logos in `dir`, as a designer hands them over: an SVG (a rounded square with a mark) and
/// a 32-pixel PNG with a transparent corner, both 32 px wide.
pub fn logos(dir: &Path) -> (PathBuf, PathBuf) {
    let svg = dir.join("logo.svg");
    std::fs::write(
        &svg,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"32\" height=\"32\" viewBox=\"0 0 64 64\">\
         <rect width=\"64\" height=\"64\" rx=\"12\" fill=\"#e4572e\"/><path d=\"M16 44 L32 16 L48 44 Z\" fill=\"#fff\"/></svg>",
    )
    .unwrap();
    let png = dir.join("logo.png");
    let mut pixels = Vec::with_capacity(32 * 32 * 4);
    for y in 0..32u32 {
        for x in 0..32u32 {
            let corner = x + y < 6;
            let mark = (12..20).contains(&x) || (12..20).contains(&y);
            pixels.extend(match (corner, mark) {
                (true, _) => [0, 0, 0, 0],
                (false, true) => [255, 255, 255, 255],
                (false, false) => [20, 90, 200, 255],
            });
        }
    }
    let mut encoder = png::Encoder::new(std::fs::File::create(&png).unwrap(), 32, 32);
    encoder.set_color(png::ColorType::Rgba);
    encoder.set_depth(png::BitDepth::Eight);
    encoder.write_header().unwrap().write_image_data(&pixels).unwrap();
    (svg, png)
}
