//! `couchlink qr` as marketing teams use it: every tag read back by a decoder independent of
//! the encoder (rqrr; SVG rendered by resvg: `tests/support/qr_tags.rs`; the `tools` target
//! reads them with zbarimg and rsvg-convert too), and the upper-cased URL it holds followed by
//! curl to the redirect.

use serde_json::json;

use crate::support::process::tool;
use crate::support::qr_tags::{decode, logos, qr, tag, Reader};
use crate::support::*;

#[test]
fn every_format_reads_back_as_the_upper_cased_short_url_in_version_1() {
    let dir = tempfile::tempdir().unwrap();
    for (base, expected) in [("http://0x1f.ie", "HTTP://0X1F.IE/H83if"), ("https://0x1f.ie", "HTTPS://0X1F.IE/H83if")] {
        for format in ["png", "svg", "terminal"] {
            let (text, modules, stderr) = tag(dir.path(), base, "H83if", format, &[], Reader::Rust);
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
            let (text, got, stderr) = tag(dir.path(), base, "H83if", "png", &["--ec", level], Reader::Rust);
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
    assert_eq!(decode(&out.join("H83if.png"), Reader::Rust), "HTTP://0X1F.IE/H83if");
    assert_eq!(decode(&out.join("Promo.png"), Reader::Rust), "HTTP://0X1F.IE/Promo");
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
    let later = json!({"url": "https://example.com/", "valid_from": "2099-01-01T00:00:00Z", "fallback": "https://example.com/soon"});
    app.db.put_link("Later", later).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().display().to_string();
    let reader = reader_of(&app.db);
    let asked = ["H83if", "Sleep", "Ended", "Later", "Nopee", "--check", "--public-url", &app.base, "--out", &out];
    let output = qr(&[&asked[..], &reader.iter().map(String::as_str).collect::<Vec<_>>()].concat());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("Sleep: the link is inactive"), "{stderr}");
    assert!(stderr.contains("Ended: the link has expired; its tag answers 404"), "{stderr}");
    let later =
        "Later: the link has not started yet (valid_from); its tag leads to its fallback https://example.com/soon";
    assert!(stderr.contains(later), "{stderr}");
    assert!(stderr.contains("Nopee: there is no such link"), "{stderr}");
    assert!(!stderr.contains("H83if: the") && !stderr.contains("H83if: there"), "{stderr}");
    // For print pipelines: --strict makes those warnings an error, and writes no tag.
    let strict_dir = tempfile::tempdir().unwrap();
    let strict_out = strict_dir.path().join("tags").display().to_string();
    let reader = ["--couchdb-url", &app.db.couch.url, "--couchdb-user", READER.0, "--couchdb-password", READER.1];
    let strict = qr(&[
        &[
            "H83if",
            "Sleep",
            "--check",
            "--strict",
            "--public-url",
            &app.base,
            "--db",
            &app.db.name,
            "--out",
            &strict_out,
        ][..],
        &reader,
    ]
    .concat());
    let said = String::from_utf8_lossy(&strict.stderr);
    assert!(!strict.status.success() && said.contains("1 of the links would not redirect"), "{said}");
    assert!(!std::path::Path::new(&strict_out).exists(), "a tag was written despite --strict");

    // What a phone reads from the tag, handed to curl as is: upper-case scheme and host.
    let text = decode(&dir.path().join("H83if.png"), Reader::Rust);
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

/// The flags that let `couchlink qr` read `db` as the reader account.
fn reader_of(db: &TestDb) -> [String; 8] {
    [
        "--couchdb-url".into(),
        db.couch.url.clone(),
        "--couchdb-user".into(),
        READER.0.into(),
        "--couchdb-password".into(),
        READER.1.into(),
        "--db".into(),
        db.name.clone(),
    ]
}

#[test]
fn coloured_and_reversed_tags_read_back_and_colours_too_alike_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    for (colours, reversed) in
        [(["#1a1a6e", "#fff5d6"], false), (["#b00020", "#ffffff"], false), (["#ffffff", "#202020"], true)]
    {
        for format in ["png", "svg"] {
            let extra = ["--fg", colours[0], "--bg", colours[1]];
            let (text, modules, stderr) = tag(dir.path(), "http://0x1f.ie", "H83if", format, &extra, Reader::Rust);
            assert_eq!((text.as_str(), modules), ("HTTP://0X1F.IE/H83if", 21), "{colours:?} as {format}");
            assert_eq!(stderr.contains("light on dark"), reversed, "{colours:?}: {stderr}");
        }
    }
    let svg = dir.path().join("H83if-svg---fg#1a1a6e--bg#fff5d6");
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.contains("fill=\"#fff5d6\"") && text.contains("fill=\"#1a1a6e\""), "{text}");
    for (extra, says) in [
        (vec!["--fg", "#777777", "--bg", "#999999"], "symbol contrast of 13%: phone readers need at least 40%"),
        (vec!["--fg", "#ffff00"], "symbol contrast of 7%"),
        (vec!["--fg", "red"], "\"red\" is not a colour: write it in CSS hex"),
        (vec!["--fg", "#1a1a6e", "--format", "terminal"], "--fg and --bg are for PNG and SVG"),
    ] {
        let out = qr(&[&["H83if", "--public-url", "http://0x1f.ie"][..], &extra].concat());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && stderr.contains(says), "{extra:?}: {stderr}");
    }
}

#[test]
fn a_print_sheet_takes_a_size_or_a_scanning_distance_and_refuses_what_cannot_be_laid_out() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sheet.pdf").display().to_string();
    let base = ["--public-url", "http://0x1f.ie", "H83if", "Promo"];
    let made = qr(&[&base[..], &["--sheet", "letter", "--distance-m", "0.4", "--out", &out]].concat());
    let stderr = String::from_utf8_lossy(&made.stderr);
    assert!(made.status.success() && stderr.contains("2 tags of 40 mm on 1 Letter page(s)"), "{stderr}");
    // A print run's list from a file, after the IDs given: 3 tags.
    let list = dir.path().join("print-run.txt");
    std::fs::write(&list, "# spring flyers\nSpr01\n\n").unwrap();
    let listed = ["--ids-from", list.to_str().unwrap()];
    let made = qr(&[&base[..], &listed, &["--sheet", "a4", "--out", &out]].concat());
    let stderr = String::from_utf8_lossy(&made.stderr);
    assert!(made.status.success() && stderr.contains("3 tags of 30 mm on 1 A4 page(s)"), "{stderr}");
    std::fs::write(&list, "Spr01\nnot-an-id\n").unwrap();
    let refused = qr(&[&base[..], &listed, &["--sheet", "a4", "--out", &out]].concat());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("\"not-an-id\" is not a link ID"));
    assert!(std::fs::read(&out).unwrap().starts_with(b"%PDF-"));
    for (extra, says) in [
        (vec!["--sheet", "a4"], "--out"),
        (vec!["--sheet", "a4", "--out", &out, "--distance-m", "5"], "give the scanning distance in metres"),
        (vec!["--sheet", "a4", "--out", &out, "--size-mm", "300"], "300 is not in 10..=250"),
        (vec!["--sheet", "a4", "--out", &out, "--size-mm", "30", "--distance-m", "0.3"], "cannot be used with"),
    ] {
        let refused = qr(&[&base[..], &extra].concat());
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert!(!refused.status.success() && stderr.contains(says), "{extra:?}: {stderr}");
    }
}

#[test]
fn a_logo_tag_reads_back_in_a_symbol_enlarged_only_as_far_as_the_logo_needs() {
    use couchlink::qr::logo::{Logo, Placed};
    let dir = tempfile::tempdir().unwrap();
    let (svg_logo, png_logo) = logos(dir.path());
    // The helper draws at 12 pixels a module: a 96-pixel logo spans 8 modules.
    let placed = Placed::new(Logo::load(&svg_logo).unwrap(), Some(96.0), 12).unwrap();
    let expected = placed.encode("HTTP://0X1F.IE/H83if", 1).unwrap().code.size() as u32;
    assert!(expected > 21, "an 8-module logo needs more than version 1");
    for logo in [&svg_logo, &png_logo] {
        for colours in [["#000000", "#ffffff"], ["#1a1a6e", "#fff5d6"], ["#ffffff", "#202020"]] {
            for format in ["png", "svg"] {
                let logo_arg = logo.display().to_string();
                let extra = ["--logo", &logo_arg, "--logo-width", "96", "--fg", colours[0], "--bg", colours[1]];
                let (text, modules, _) = tag(dir.path(), "http://0x1f.ie", "H83if", format, &extra, Reader::Rust);
                assert_eq!(text, "HTTP://0X1F.IE/H83if", "{logo:?} {colours:?} as {format}");
                // The first version that can lose the hole reads back, or the next ones if not.
                assert!(modules >= expected && modules <= expected + 8, "{logo:?} {colours:?} {format}: {modules}");
            }
        }
    }
    // An SVG tag carries the logo itself, not a picture of it.
    let svg = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().contains("-svg-") && p.to_string_lossy().contains("logo.svg"))
        .unwrap();
    assert!(std::fs::read_to_string(svg).unwrap().contains("href=\"data:image/svg+xml;base64,"));

    let logo_arg = png_logo.display().to_string();
    let base = ["H83if", "--public-url", "http://0x1f.ie", "--logo", &logo_arg];
    let out = dir.path().join("big.png").display().to_string();
    let refused = qr(&[&base[..], &["--logo-width", "3000", "--out", &out]].concat());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && stderr.contains("more than the largest QR code"), "{stderr}");
    let largest = stderr.split("--logo-width ").nth(1).unwrap().trim_end().trim_end_matches(')');
    assert!(!std::path::Path::new(&out).exists(), "a refused logo writes no file");
    let made = qr(&[&base[..], &["--logo-width", largest, "--out", &out]].concat());
    assert!(made.status.success(), "the largest that fits: {}", String::from_utf8_lossy(&made.stderr));
    assert_eq!(decode(std::path::Path::new(&out), Reader::Rust), "HTTP://0X1F.IE/H83if");

    let text_logo = dir.path().join("words.svg");
    std::fs::write(&text_logo, "<svg xmlns='http://www.w3.org/2000/svg' width='9' height='9'><text>ACME</text></svg>")
        .unwrap();
    let gif = dir.path().join("logo.gif");
    std::fs::write(&gif, b"GIF89a").unwrap();
    for (extra, says) in [
        (vec!["--logo", text_logo.to_str().unwrap()], "has text in it: convert it to paths"),
        (vec!["--logo", gif.to_str().unwrap()], "is neither a PNG nor an SVG file"),
        (vec!["--logo", svg_logo.to_str().unwrap(), "--format", "terminal"], "--logo is for PNG, SVG and sheets"),
        (vec!["--logo-width", "20"], "--logo"),
    ] {
        let out = qr(&[&["H83if", "--public-url", "http://0x1f.ie"][..], &extra].concat());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && stderr.contains(says), "{extra:?}: {stderr}");
    }
}

#[tokio::test]
async fn a_sheet_of_every_link_carries_their_titles_and_a_failed_sheet_leaves_no_file() {
    let app = spawn_app().await;
    app.db.put_link("Flyr1", json!({"url": "https://example.com/1", "title": "Spring flyer — café"})).await;
    app.db.put_link("Flyr2", json!({"url": "https://example.com/2", "title": "Posters & banners"})).await;
    app.db.put_link("Plain", json!({"url": "https://example.com/3"})).await;
    let dir = tempfile::tempdir().unwrap();
    let reader = reader_of(&app.db);
    let reader: Vec<&str> = reader.iter().map(String::as_str).collect();
    let svg = dir.path().join("every.svg");
    let svg_arg = svg.display().to_string();
    let made = qr(&[
        &["--all", "--titles", "--public-url", "http://0x1f.ie", "--sheet", "a4", "--out", &svg_arg][..],
        &reader,
    ]
    .concat());
    let stderr = String::from_utf8_lossy(&made.stderr);
    assert!(made.status.success() && stderr.contains("3 tags of 30 mm on 1 A4 page(s)"), "{stderr}");
    let page = std::fs::read_to_string(&svg).unwrap();
    // In ID order, each with its title; the design documents are not links.
    let at = |text: &str| page.find(&format!(">\n{text}\n</text>")).unwrap_or_else(|| panic!("{text} missing: {page}"));
    assert!(at("http://0x1f.ie/Flyr1") < at("Spring flyer — café"));
    assert!(at("Spring flyer — café") < at("http://0x1f.ie/Flyr2"));
    assert!(at("Posters &amp; banners") < at("http://0x1f.ie/Plain"));
    assert_eq!(page.matches("</text>").count(), 5, "three URLs and two titles");

    // The same as PDF, for IDs given; a title in WinAnsi (the em dash is byte 0x97).
    let pdf = dir.path().join("two.pdf");
    let pdf_arg = pdf.display().to_string();
    let made = qr(&[
        &["Flyr1", "Plain", "--titles", "--public-url", "http://0x1f.ie", "--sheet", "a4", "--out", &pdf_arg][..],
        &reader,
    ]
    .concat());
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let bytes = std::fs::read(&pdf).unwrap();
    assert!(bytes.starts_with(b"%PDF-1.7") && bytes.ends_with(b"%%EOF\n"));
    assert!(!dir.path().join("two.pdf.partial").exists());

    // A tag that cannot be made stops the sheet: no file, and nothing half-written beside it.
    let long = format!("http://0x1f.ie/{}", "x".repeat(3000));
    let failed = dir.path().join("failed.pdf");
    let failed_arg = failed.display().to_string();
    let refused = qr(&["Flyr1", "--public-url", &long, "--sheet", "a4", "--out", &failed_arg]);
    assert!(String::from_utf8_lossy(&refused.stderr).contains("cannot be a QR code"));
    assert!(!failed.exists() && !dir.path().join("failed.pdf.partial").exists());
    // --check works for sheets: with --strict, a link that would not redirect stops the sheet.
    app.db.put_link("Sleep", json!({"url": "https://example.com/4", "inactive": true})).await;
    let strict = dir.path().join("strict.pdf");
    let strict_arg = strict.display().to_string();
    let refused = qr(&[
        &[
            "Flyr1",
            "Sleep",
            "--check",
            "--strict",
            "--public-url",
            "http://0x1f.ie",
            "--sheet",
            "a4",
            "--out",
            &strict_arg,
        ][..],
        &reader,
    ]
    .concat());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        said.contains("Sleep: the link is inactive") && said.contains("1 of the links would not redirect"),
        "{said}"
    );
    assert!(!strict.exists());
    let wrong = qr(&["Flyr1", "--public-url", "http://0x1f.ie", "--sheet", "a4", "--out", "sheet.png"]);
    assert!(String::from_utf8_lossy(&wrong.stderr).contains("name the file FILE.pdf or FILE.svg"));
}
