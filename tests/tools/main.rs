//! The checks that need Debian tools beyond the default suite's (a Rust toolchain, Node.js,
//! Python 3 and curl): QR tags read back by zbar's `zbarimg` and rendered by librsvg's
//! `rsvg-convert`, print sheets rasterised by poppler's `pdftoppm`, the report's HTML page in
//! headless Chromium, and the GoAccess recipe of `docs/reference.md` with the real GoAccess. Each
//! fails at once, naming the package, when its tool is missing. Run with `cargo test --test
//! tools` (`.ci/run` installs the packages: `apt-get install zbar-tools librsvg2-bin
//! poppler-utils chromium goaccess`).

#[path = "../support/mod.rs"]
mod support;

mod qr {
    use crate::support::qr_tags::{logos, tag, Reader};

    #[test]
    fn every_format_reads_back_with_zbarimg_and_rsvg_convert() {
        let dir = tempfile::tempdir().unwrap();
        for (base, expected) in
            [("http://0x1f.ie", "HTTP://0X1F.IE/H83if"), ("https://0x1f.ie", "HTTPS://0X1F.IE/H83if")]
        {
            for format in ["png", "svg", "terminal"] {
                let (text, modules, _) = tag(dir.path(), base, "H83if", format, &[], Reader::Debian);
                assert_eq!((text.as_str(), modules), (expected, 21), "{base} as {format}");
            }
            for (level, modules) in [("M", 25), ("H", 29)] {
                let (text, got, _) = tag(dir.path(), base, "H83if", "png", &["--ec", level], Reader::Debian);
                assert_eq!((text.as_str(), got), (expected, modules), "{base} at {level}");
            }
            // Coloured, and reversed (light on dark: zbar reads its negative, as readers that
            // handle reversal do).
            for colours in [["#1a1a6e", "#fff5d6"], ["#ffffff", "#202020"]] {
                for format in ["png", "svg"] {
                    let extra = ["--fg", colours[0], "--bg", colours[1]];
                    let (text, modules, _) = tag(dir.path(), base, "H83if", format, &extra, Reader::Debian);
                    assert_eq!((text.as_str(), modules), (expected, 21), "{base} {colours:?} as {format}");
                }
            }
        }
        // With a logo (SVG and PNG files), plain, coloured and reversed: read by zbar from the
        // PNG, and from the SVG as librsvg draws it.
        let (svg_logo, png_logo) = logos(dir.path());
        for logo in [&svg_logo, &png_logo] {
            for colours in [["#000000", "#ffffff"], ["#1a1a6e", "#fff5d6"], ["#ffffff", "#202020"]] {
                for format in ["png", "svg"] {
                    let logo_arg = logo.display().to_string();
                    let extra = ["--logo", &logo_arg, "--logo-width", "96", "--fg", colours[0], "--bg", colours[1]];
                    let (text, modules, _) =
                        tag(dir.path(), "https://0x1f.ie", "H83if", format, &extra, Reader::Debian);
                    assert_eq!(text, "HTTPS://0X1F.IE/H83if", "{logo:?} {colours:?} as {format}");
                    assert!(modules > 21, "a logo enlarges the symbol");
                }
            }
        }
    }
}

mod sheet {
    use std::path::Path;

    use couchlink::qr::colour::Colours;
    use couchlink::qr::sheet::{Layout, Paper};

    use crate::support::process::tool;
    use crate::support::qr_tags::{decode, greyscale, qr, Reader};

    /// Pixels per millimetre at 300 dpi.
    const PX_PER_MM: f32 = 300.0 / 25.4;

    /// The square of `side_mm` at (`left_mm`, `top_mm`) of a page, with 2 mm around, as a PNG.
    fn crop(page: &(usize, usize, Vec<u8>), left_mm: f32, top_mm: f32, side_mm: f32, out: &Path) {
        let (width, _, pixels) = page;
        let (x0, y0) = (((left_mm - 2.0) * PX_PER_MM) as usize, ((top_mm - 2.0) * PX_PER_MM) as usize);
        let side = ((side_mm + 4.0) * PX_PER_MM) as usize;
        let mut cell = Vec::with_capacity(side * side);
        for y in y0..y0 + side {
            cell.extend_from_slice(&pixels[y * width + x0..y * width + x0 + side]);
        }
        let file = std::io::BufWriter::new(std::fs::File::create(out).unwrap());
        let mut encoder = png::Encoder::new(file, side as u32, side as u32);
        encoder.set_color(png::ColorType::Grayscale);
        encoder.write_header().unwrap().write_image_data(&cell).unwrap();
    }

    /// A 48-link A4 sheet, rasterised by poppler's pdftoppm at 300 dpi: every tag is read by
    /// zbarimg at its own place in the grid (row by row, in the order the IDs were given).
    #[test]
    fn every_tag_of_a_48_link_sheet_reads_back_at_its_place() {
        let dir = tempfile::tempdir().unwrap();
        let ids: Vec<String> = (0..48).map(|n| format!("Sh{n:03}")).collect();
        let pdf = dir.path().join("campaign.pdf");
        let mut args = vec!["--public-url", "https://0x1f.ie", "--sheet", "a4", "--size-mm", "30", "--out"];
        let out = pdf.display().to_string();
        args.push(&out);
        args.extend(ids.iter().map(String::as_str));
        let made = qr(&args);
        assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
        let raster = tool("pdftoppm", "poppler-utils")
            .args(["-r", "300", "-gray", "-png"])
            .arg(&pdf)
            .arg(dir.path().join("page"))
            .output()
            .unwrap();
        assert!(raster.status.success(), "pdftoppm: {}", String::from_utf8_lossy(&raster.stderr));
        let layout = Layout { paper: Paper::A4, tag_mm: 30.0, border: 4, colours: Colours::PLAIN, titles: false };
        let pages: Vec<_> = (1..=2).map(|n| greyscale(&dir.path().join(format!("page-{n}.png")))).collect();
        assert!(!dir.path().join("page-3.png").exists(), "48 tags of 30 mm fill two A4 pages");
        for (index, id) in ids.iter().enumerate() {
            let (page, left, top) = layout.place(index).unwrap();
            let cell = dir.path().join(format!("cell-{index}.png"));
            crop(&pages[page], left, top, 30.0, &cell);
            assert_eq!(decode(&cell, Reader::Debian), format!("HTTPS://0X1F.IE/{id}"), "tag {index} of the sheet");
        }
    }

    /// A page of 30 tags with a logo, coloured, as PDF (rasterised by pdftoppm) and as SVG
    /// (by rsvg-convert), both at 300 dpi: every tag read by zbarimg at its place.
    #[test]
    fn a_sheet_with_a_logo_and_colours_reads_back_as_pdf_and_as_svg() {
        let dir = tempfile::tempdir().unwrap();
        let (logo, _) = crate::support::qr_tags::logos(dir.path());
        let ids: Vec<String> = (0..30).map(|n| format!("Lg{n:03}")).collect();
        let colours = Colours::new(
            couchlink::qr::colour::Colour::parse("#1a1a6e").unwrap(),
            couchlink::qr::colour::Colour::parse("#fff5d6").unwrap(),
        )
        .unwrap();
        let layout = Layout { paper: Paper::A4, tag_mm: 30.0, border: 4, colours, titles: false };
        for kind in ["pdf", "svg"] {
            let file = dir.path().join(format!("logo.{kind}"));
            let out = file.display().to_string();
            let logo_arg = logo.display().to_string();
            let mut args = vec!["--public-url", "https://0x1f.ie", "--sheet", "a4", "--logo", &logo_arg];
            args.extend(["--logo-width", "48", "--fg", "#1a1a6e", "--bg", "#fff5d6", "--out", &out]);
            args.extend(ids.iter().map(String::as_str));
            let made = qr(&args);
            assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
            let page = dir.path().join(format!("{kind}-page.png"));
            let raster = match kind {
                "pdf" => tool("pdftoppm", "poppler-utils")
                    .args(["-r", "300", "-gray", "-png", "-singlefile"])
                    .arg(&file)
                    .arg(dir.path().join(format!("{kind}-page")))
                    .output()
                    .unwrap(),
                _ => tool("rsvg-convert", "librsvg2-bin")
                    .args(["-d", "300", "-p", "300", "-b", "white", "-o"])
                    .arg(&page)
                    .arg(&file)
                    .output()
                    .unwrap(),
            };
            assert!(raster.status.success(), "{kind}: {}", String::from_utf8_lossy(&raster.stderr));
            let pixels = greyscale(&page);
            for (index, id) in ids.iter().enumerate() {
                let (page_no, left, top) = layout.place(index).unwrap();
                assert_eq!(page_no, 0);
                let cell = dir.path().join(format!("{kind}-cell-{index}.png"));
                crop(&pixels, left, top, 30.0, &cell);
                assert_eq!(decode(&cell, Reader::Debian), format!("HTTPS://0X1F.IE/{id}"), "{kind}: tag {index}");
            }
        }
    }
}

mod report {
    use std::path::{Path, PathBuf};
    use std::process::Command;

    use serde_json::Value;

    use crate::support::process::tool;
    use crate::support::report_fixtures::*;

    /// Where screenshots go, for people to look at.
    fn screenshot_dir() -> PathBuf {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/report-screenshots");
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// Renders `html` in headless Chromium into a PNG of `width`×`height`.
    pub fn screenshot(html: &Path, png: &Path, width: u32, height: u32) {
        let profile = tempfile::tempdir().unwrap();
        let out = tool("chromium", "chromium")
            .args(["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run"])
            .args([
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--hide-scrollbars",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg(format!("--window-size={width},{height}"))
            .arg(format!("--screenshot={}", png.display()))
            .arg(format!("file://{}", html.display()))
            .output()
            .unwrap();
        assert!(png.exists(), "chromium made no screenshot: {}", String::from_utf8_lossy(&out.stderr));
    }

    /// Pixels of each colour, as `#rrggbb`.
    fn colours(png: &Path) -> std::collections::HashMap<String, usize> {
        let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(png).unwrap()));
        let mut reader = decoder.read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut buf).unwrap();
        let step = info.color_type.samples();
        let mut counts = std::collections::HashMap::new();
        for px in buf[..info.buffer_size()].chunks(step) {
            *counts.entry(format!("#{:02x}{:02x}{:02x}", px[0], px[1], px[2])).or_insert(0) += 1;
        }
        counts
    }

    #[test]
    fn the_html_page_is_self_contained_and_its_charts_render_in_chromium() {
        let dir = log_dir();
        let html = dir.path().join("report.html");
        let out = report(&["--format", "html", "--out", html.to_str().unwrap()], dir.path());
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let page = std::fs::read_to_string(&html).unwrap();
        for fetch in ["<script", "<link", "<img", "src=", "url(", "@import", "<iframe"] {
            assert!(!page.contains(fetch), "the page would fetch something: {fetch}");
        }
        assert!(page.contains("https://example.com/summer"));
        let png = screenshot_dir().join("report.png");
        let _ = std::fs::remove_file(&png);
        screenshot(&html, &png, 1100, 2400);
        let colours = colours(&png);
        // The charts' bars are drawn: humans and bots per day, and both target versions of H83if
        // (the palette of src/report/print/html.rs).
        for (name, colour) in
            [("humans", "#2563eb"), ("bots", "#94a3b8"), ("version 1", "#7c3aed"), ("version 2", "#ea580c")]
        {
            let n = colours.get(colour).copied().unwrap_or(0);
            assert!(n > 500, "{name} ({colour}): {n} pixels in {}", png.display());
        }
    }

    /// A number as JSON gives it: ClickHouse may quote 64-bit integers.
    fn number(v: &Value) -> u64 {
        v.as_u64().or_else(|| v.as_str().and_then(|s| s.parse().ok())).unwrap_or_else(|| panic!("not a number: {v}"))
    }

    #[test]
    fn clickhouse_sql_agrees_with_the_report() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let python =
            crate::support::venv::python("clickhouse-venv", &root.join("tests/tools/clickhouse-requirements.txt"));
        let dir = breakdown_dir();
        // The report's two known-answer logs in one directory: the breakdown days (one of them
        // gzipped) and the first log's valid lines (its malformed ones are not loaded).
        std::fs::write(dir.path().join("access.2026-11-21.log.gz"), gzip(&day_21())).unwrap();
        std::fs::write(
            dir.path().join("access.2026-11-22.log"),
            day_22_valid().into_iter().map(|l| l + "\n").collect::<String>(),
        )
        .unwrap();
        // And the version rule's table of cases, a link each (`/H83if` becomes `/Vc000`...).
        let table: Value = serde_json::from_str(include_str!("../version_cases.json")).unwrap();
        let cases = table["cases"].as_array().unwrap();
        let case_lines: String = cases
            .iter()
            .enumerate()
            .map(|(n, case)| {
                let target = case["target"].as_str().unwrap().replacen("H83if", &format!("Vc{n:03}"), 1);
                format!("20261125080000.0 192.0.2.1 - curl%2F8.5 {target} 302 {}\n", case["location"].as_str().unwrap())
            })
            .collect();
        std::fs::write(dir.path().join("access.2026-11-25.log"), case_lines).unwrap();
        let out = report(&["--format", "json", "--by", "campaign"], dir.path());
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let ours: Value = serde_json::from_slice(&out.stdout).unwrap();
        for (n, case) in cases.iter().enumerate() {
            let id = format!("Vc{n:03}");
            let link = ours["links"].as_array().unwrap().iter().find(|l| l["id"] == id.as_str()).unwrap();
            assert_eq!(link["versions"][0]["location"], case["version"], "{}", case["why"]);
        }
        let pattern = report(&["--bot-pattern"], dir.path());
        let pattern = String::from_utf8(pattern.stdout).unwrap();
        let mut logs: Vec<PathBuf> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.file_name().unwrap().to_str().unwrap().starts_with("access."))
            .collect();
        logs.sort();
        let run = Command::new(python)
            .arg(root.join("tests/tools/clickhouse.py"))
            .arg(root.join("docs/clickhouse.md"))
            .arg(pattern.trim())
            .args(&logs)
            .output()
            .unwrap();
        assert!(run.status.success(), "chDB: {}", String::from_utf8_lossy(&run.stderr));
        let sql: Value = serde_json::from_slice(&run.stdout).unwrap();
        const COUNTS: [&str; 7] = [
            "redirects",
            "human_redirects",
            "bot_redirects",
            "visitors",
            "new_visitors",
            "human_visitors",
            "bot_visitors",
        ];
        let counts = |row: &Value| COUNTS.map(|c| number(&row[c]));
        // Per link: the same links, in the same order, with the same counts.
        let links: Vec<(String, [u64; 7])> = ours["links"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| (l["id"].as_str().unwrap().to_owned(), counts(l)))
            .collect();
        let sql_links: Vec<(String, [u64; 7])> = sql["links"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| (l["link"].as_str().unwrap().to_owned(), counts(l)))
            .collect();
        assert_eq!(sql_links, links);
        assert!(
            links.len() >= 3 && links.iter().any(|(_, c)| c[2] > 0 && c[4] > 0),
            "bots and new visitors are compared"
        );
        // Per version: numbered alike, the same Location and counts.
        let mut versions = Vec::new();
        for l in ours["links"].as_array().unwrap() {
            for v in l["versions"].as_array().unwrap() {
                versions.push((
                    l["id"].as_str().unwrap().to_owned(),
                    number(&v["version"]),
                    v["location"].as_str().unwrap().to_owned(),
                    counts(v),
                ));
            }
        }
        versions.sort();
        let mut sql_versions: Vec<_> = sql["versions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| {
                (
                    v["link"].as_str().unwrap().to_owned(),
                    number(&v["version"]),
                    v["location"].as_str().unwrap().to_owned(),
                    counts(v),
                )
            })
            .collect();
        sql_versions.sort();
        assert_eq!(sql_versions, versions);
        // Campaigns per link: every value of every utm_* parameter.
        let mut campaigns = Vec::new();
        for l in ours["links"].as_array().unwrap() {
            for (breakdown, values) in l["by"].as_object().unwrap() {
                for v in values.as_array().unwrap() {
                    campaigns.push((
                        l["id"].as_str().unwrap().to_owned(),
                        breakdown.clone(),
                        v["value"].as_str().unwrap().to_owned(),
                        number(&v["redirects"]),
                        number(&v["visitors"]),
                    ));
                }
            }
        }
        campaigns.sort();
        let mut sql_campaigns: Vec<_> = sql["campaigns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["link"].as_str().unwrap().to_owned(),
                    c["breakdown"].as_str().unwrap().to_owned(),
                    c["value"].as_str().unwrap().to_owned(),
                    number(&c["redirects"]),
                    number(&c["visitors"]),
                )
            })
            .collect();
        sql_campaigns.sort();
        assert_eq!(sql_campaigns, campaigns);
        assert!(campaigns.iter().any(|c| c.2 == "winter") && campaigns.iter().any(|c| c.2 == "sms"), "{campaigns:?}");
    }

    #[test]
    fn the_breakdowns_render_in_chromium() {
        let dir = breakdown_dir();
        let html = dir.path().join("breakdowns.html");
        let geo = dir.path().join("geo.mmdb");
        let args = [
            "--format",
            "html",
            "--out",
            html.to_str().unwrap(),
            "--link",
            "Promo",
            "--by",
            "campaign",
            "--by",
            "device",
        ];
        let out = report(&[&args[..], &["--geoip", geo.to_str().unwrap()]].concat(), dir.path());
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let png = screenshot_dir().join("report-breakdowns.png");
        let _ = std::fs::remove_file(&png);
        screenshot(&html, &png, 1100, 1400);
        let colours = colours(&png);
        // Campaign bars, and the device shares of mobile, tablet, desktop (the palette of
        // src/report/print/html.rs): drawn, not just written.
        for (name, colour) in
            [("campaign bars", "#f59e0b"), ("mobile", "#0d9488"), ("tablet", "#c026d3"), ("desktop", "#0284c7")]
        {
            let n = colours.get(colour).copied().unwrap_or(0);
            assert!(n > 300, "{name} ({colour}): {n} pixels in {}", png.display());
        }
        let page = std::fs::read_to_string(&html).unwrap();
        assert!(page.contains("<td class=\"text\">FR</td>"), "the country table");
    }

    #[test]
    fn the_documented_goaccess_recipe_runs_with_the_real_goaccess() {
        let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/reference.md")).unwrap();
        let start = doc.find("zcat -f logs/access.").expect("the GoAccess recipe in docs/reference.md");
        let recipe = doc[start..].split("\n```").next().unwrap().to_owned();
        tool("goaccess", "goaccess");
        // Valid lines only (GoAccess counts malformed ones as failed): 6 and 7 fields, plain and gzipped.
        let dir = tempfile::tempdir().unwrap();
        let logs = dir.path().join("logs");
        std::fs::create_dir(&logs).unwrap();
        std::fs::write(logs.join("access.2026-11-21.log.gz"), gzip(&day_21())).unwrap();
        std::fs::write(
            logs.join("access.2026-11-22.log"),
            day_22_valid().into_iter().map(|l| l + "\n").collect::<String>(),
        )
        .unwrap();
        let run = |recipe: &str| {
            let out =
                Command::new("bash").args(["-o", "pipefail", "-c", recipe]).current_dir(dir.path()).output().unwrap();
            assert!(out.status.success(), "{recipe}: {}", String::from_utf8_lossy(&out.stderr));
        };
        run(&recipe);
        let page = std::fs::read_to_string(dir.path().join("report.html")).unwrap();
        assert!(page.contains("GoAccess"));
        // The same recipe with GoAccess's JSON output, to read what it counted.
        assert!(recipe.contains("-o report.html"));
        run(&recipe.replace("-o report.html", "-o report.json"));
        let counted: Value = serde_json::from_slice(&std::fs::read(dir.path().join("report.json")).unwrap()).unwrap();
        assert_eq!(counted["general"]["total_requests"], 13, "{:#}", counted["general"]);
        assert_eq!(counted["general"]["failed_requests"], 0);
        let statuses = counted["status_codes"]["data"].to_string();
        assert!(statuses.contains("302") && statuses.contains("404"), "{statuses}");
    }
}
