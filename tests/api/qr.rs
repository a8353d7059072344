//! `couchlink qr` as marketing teams use it: every tag read back by real decoders (zbarimg from
//! zbar-tools; SVG rendered by rsvg-convert from librsvg2-bin), and the upper-cased URL it holds
//! followed by curl to the redirect.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::json;

use crate::support::process::tool;
use crate::support::*;

/// `couchlink qr` with `args`, its environment cleared of couchlink's variables.
fn qr(args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_couchlink"));
    command.arg("qr").args(args).env_remove("COUCHLINK_PUBLIC_URL");
    command.output().expect("couchlink runs")
}

/// What zbarimg reads in the PNG at `path`.
fn decode(path: &Path) -> String {
    let out = tool("zbarimg", "zbar-tools").args(["--quiet", "--raw"]).arg(path).output().unwrap();
    assert!(
        out.status.success(),
        "zbarimg read nothing in {}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim_end().to_owned()
}

/// Width of the PNG at `path`, in pixels.
fn png_width(path: &Path) -> u32 {
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(path).unwrap()));
    decoder.read_info().unwrap().info().width
}

/// The terminal drawing as a PNG, 4 pixels per module, for zbarimg; its modules a side.
fn terminal_to_png(text: &str, path: &Path) -> u32 {
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

/// Writes the tag of `id` under `base` in `format` into `dir`; what a decoder reads in it,
/// and its modules a side without the 4-module border.
fn tag(dir: &Path, base: &str, id: &str, format: &str, extra: &[&str]) -> (String, u32, String) {
    let file: PathBuf = dir.join(format!("{id}-{format}-{}", extra.join("")));
    let mut args = vec![id, "--public-url", base, "--format", format, "--scale", "3"];
    args.extend_from_slice(extra);
    let out_arg = file.display().to_string();
    args.extend(["--out", &out_arg]);
    let output = qr(&args);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{args:?}: {stderr}");
    let (text, modules) = match format {
        "png" => (decode(&file), png_width(&file) / 3 - 8),
        "svg" => {
            let png = dir.join("rendered.png");
            let out = tool("rsvg-convert", "librsvg2-bin").arg(&file).arg("-o").arg(&png).output().unwrap();
            assert!(out.status.success(), "rsvg-convert: {}", String::from_utf8_lossy(&out.stderr));
            (decode(&png), png_width(&png) / 3 - 8)
        }
        _ => {
            let png = dir.join("terminal.png");
            let side = terminal_to_png(&std::fs::read_to_string(&file).unwrap(), &png);
            (decode(&png), side - 8)
        }
    };
    (text, modules, stderr)
}

#[test]
fn every_format_reads_back_as_the_upper_cased_short_url_in_version_1() {
    let dir = tempfile::tempdir().unwrap();
    for (base, expected) in [("http://0x1f.ie", "HTTP://0X1F.IE/H83if"), ("https://0x1f.ie", "HTTPS://0X1F.IE/H83if")] {
        for format in ["png", "svg", "terminal"] {
            let (text, modules, stderr) = tag(dir.path(), base, "H83if", format, &[]);
            assert_eq!(text, expected, "{base} as {format}");
            assert_eq!(modules, 21, "{base} as {format}: version 1");
            assert!(stderr.contains("version 1 symbol (21×21 modules), error correction L"), "{stderr}");
        }
    }
}

#[test]
fn each_error_correction_level_gets_the_smallest_symbol_that_holds_it() {
    let dir = tempfile::tempdir().unwrap();
    for base in ["http://0x1f.ie", "https://0x1f.ie"] {
        for (level, modules) in [("L", 21), ("M", 25), ("Q", 25), ("H", 29)] {
            let (text, got, stderr) = tag(dir.path(), base, "H83if", "png", &["--ec", level]);
            assert_eq!(got, modules, "{base} at {level}: {stderr}");
            assert!(stderr.contains(&format!("error correction {level}")), "{stderr}");
            assert!(text.ends_with("/H83if"), "{text}");
        }
    }
}

#[test]
fn several_ids_make_one_file_each_in_a_folder() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("tags");
    let output = qr(&["H83if", "Promo", "--public-url", "http://0x1f.ie", "--out", &out.display().to_string()]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(decode(&out.join("H83if.png")), "HTTP://0X1F.IE/H83if");
    assert_eq!(decode(&out.join("Promo.png")), "HTTP://0X1F.IE/Promo");
}

#[test]
fn bad_input_is_refused_with_a_clear_message() {
    let long_base = format!("http://0x1f.ie/{}", "p".repeat(3000));
    for (args, says) in [
        (vec!["H83i", "--public-url", "http://0x1f.ie"], "\"H83i\" is not a link ID"),
        (vec!["H83if!", "--public-url", "http://0x1f.ie"], "\"H83if!\" is not a link ID"),
        (vec!["H83if", "--public-url", "ftp://0x1f.ie"], "http:// or https://"),
        (vec!["H83if"], "set COUCHLINK_PUBLIC_URL"),
        (vec!["H83if", "--public-url", long_base.as_str()], "do not fit a QR code of any version"),
        (vec!["H83if", "Promo", "--public-url", "http://0x1f.ie"], "name a folder with --out"),
        (vec!["H83if", "--public-url", "http://0x1f.ie", "--scale", "0"], "--scale"),
        (vec!["H83if", "--public-url", "http://0x1f.ie", "--scale", "4000000000"], "lower --scale or --border"),
        (vec!["H83if", "--public-url", "http://0x1f.ie", "--border", "4000000000"], "lower --scale or --border"),
    ] {
        let output = qr(&args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{args:?} accepted");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

#[tokio::test]
async fn check_warns_about_links_that_would_not_redirect_and_the_tag_text_redirects_with_curl() {
    let app = spawn_app().await;
    app.db.put_link("H83if", json!({"url": "https://example.com/wp/?p=14"})).await;
    app.db.put_link("Sleep", json!({"url": "https://example.com/", "inactive": true})).await;
    app.db.put_link("Ended", json!({"url": "https://example.com/", "expires": "2020-01-01T00:00:00Z"})).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().display().to_string();
    let output = qr(&[
        "H83if",
        "Sleep",
        "Ended",
        "Nopee",
        "--check",
        "--public-url",
        &app.base,
        "--couchdb-url",
        &app.db.couch.url,
        "--couchdb-user",
        READER.0,
        "--couchdb-password",
        READER.1,
        "--db",
        &app.db.name,
        "--out",
        &out,
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("Sleep: the link is inactive"), "{stderr}");
    assert!(stderr.contains("Ended: the link has expired"), "{stderr}");
    assert!(stderr.contains("Nopee: there is no such link"), "{stderr}");
    assert!(!stderr.contains("H83if: the") && !stderr.contains("H83if: there"), "{stderr}");

    // What a phone reads from the tag, handed to curl as is: upper-case scheme and host.
    let text = decode(&dir.path().join("H83if.png"));
    assert!(text.starts_with("HTTP://127.0.0.1:") && text.ends_with("/H83if"), "{text}");
    // curl runs off the runtime that serves couchlink here.
    let curl = tokio::task::spawn_blocking(move || {
        tool("curl", "curl")
            .args(["-s", "-o", "/dev/null", "-w", "%{http_code} %{redirect_url}", &text])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert_eq!(String::from_utf8_lossy(&curl.stdout), "302 https://example.com/wp/?p=14");
}
