//! A print run on paper: tags in a grid at a stated physical size, each with its short URL
//! (and, if asked, its link's title) under it and crop marks at its corners. Vector output: PDF
//! written with `pdf-writer`, SVG with the `svg` crate; the modules are filled rectangles, so the
//! print shop's RIP draws them at its own resolution.
//!
//! A PDF is written a page at a time, so a sheet of any length takes the memory of one page:
//! `pdf-writer` writes each object, and the cross-reference table it would only write for a
//! document held whole in memory is written here, as ISO 32000-1 §7.5.4 lays it out.

use std::io::{self, Write};

use pdf_writer::{Chunk, Content, Filter, Name, Rect, Ref, Str};
use qrcodegen::QrCode;
use svg::node::element::{self as svg_el, path::Data};
use svg::Document;

use super::colour::Colours;
use super::logo::Placed;
use crate::domain::{LinkId, PublicUrl};

/// Points per millimetre (PDF's unit is 1/72 inch).
const PT_PER_MM: f32 = 72.0 / 25.4;
/// The page's margin and the space between cells (mm).
const MARGIN_MM: f32 = 12.0;
const GUTTER_MM: f32 = 8.0;
/// A caption line's height (mm) and its type size (pt).
const LINE_MM: f32 = 3.5;
const LABEL_PT: f32 = 7.0;
/// The space between a tag and its caption (mm).
const CAPTION_GAP_MM: f32 = 1.5;
/// Crop marks: their length, and their distance from the tag's corner (mm).
const MARK_MM: f32 = 3.0;
const MARK_GAP_MM: f32 = 1.0;
/// The resolution a logo is embedded at in a PDF (dots per inch).
const LOGO_DPI: f32 = 600.0;

/// The paper sizes a sheet is laid out on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Paper {
    /// ISO A4, 210 × 297 mm.
    A4,
    /// US Letter, 8.5 × 11 in.
    Letter,
}

impl Paper {
    /// Width and height in millimetres.
    fn size_mm(self) -> (f32, f32) {
        match self {
            Paper::A4 => (210.0, 297.0),
            Paper::Letter => (215.9, 279.4),
        }
    }
}

/// How a sheet is laid out.
#[derive(Debug, Clone, Copy)]
pub struct Layout {
    /// The paper.
    pub paper: Paper,
    /// A tag's side, quiet zone included, in millimetres.
    pub tag_mm: f32,
    /// Modules of quiet zone around each symbol.
    pub border: u32,
    /// The modules' and the ground's colours.
    pub colours: Colours,
    /// Whether captions have a second line, for the link's title.
    pub titles: bool,
}

/// A sheet's pages, each its cells, made when the page is asked for (so that a sheet holds one
/// page in memory), a page's tags in parallel: link `ids[i]` with its title `titles[i]`, its
/// symbol made by `code` (`couchlink qr --sheet` checks a logo there; the console does not).
/// The one place both print sheets are built.
pub fn pages<'a, E: Send + 'a>(
    base: &'a PublicUrl,
    ids: &'a [LinkId],
    titles: &'a [Option<String>],
    per_page: usize,
    code: impl Fn(&LinkId) -> Result<QrCode, E> + Sync + 'a,
) -> impl Iterator<Item = Result<Vec<Cell>, E>> + 'a {
    use rayon::prelude::*;
    (0..ids.len().div_ceil(per_page).max(1)).map(move |page| {
        (page * per_page..((page + 1) * per_page).min(ids.len()))
            .into_par_iter()
            .map(|i| {
                let title = titles.get(i).cloned().flatten();
                Ok(Cell { label: base.short_url(&ids[i]).to_string(), title, code: code(&ids[i])? })
            })
            .collect()
    })
}

/// One tag of a sheet.
pub struct Cell {
    /// The short URL printed under it.
    pub label: String,
    /// The link's title, printed under the URL when the layout has titles.
    pub title: Option<String>,
    /// The symbol.
    pub code: QrCode,
}

/// Why no sheet was made.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SheetError {
    /// Not one tag fits on the page.
    #[error("a tag of {tag_mm} mm does not fit on a {paper:?} page with its margins ({room:.0} mm across at most)")]
    TooLarge {
        /// The size asked for.
        tag_mm: f32,
        /// The paper.
        paper: Paper,
        /// The widest tag that fits.
        room: f32,
    },
}

impl Layout {
    /// The caption's height under each tag (mm).
    fn caption_mm(&self) -> f32 {
        CAPTION_GAP_MM + LINE_MM * if self.titles { 2.0 } else { 1.0 }
    }

    /// Columns and rows of tags a page holds.
    pub fn grid(&self) -> Result<(usize, usize), SheetError> {
        let (width, height) = self.paper.size_mm();
        let fit = |room: f32, cell: f32| {
            ((room - 2.0 * MARGIN_MM + GUTTER_MM) / (cell + GUTTER_MM)).floor().max(0.0) as usize
        };
        let (cols, rows) = (fit(width, self.tag_mm), fit(height, self.tag_mm + self.caption_mm()));
        if cols == 0 || rows == 0 {
            let room = width.min(height - self.caption_mm()) - 2.0 * MARGIN_MM;
            return Err(SheetError::TooLarge { tag_mm: self.tag_mm, paper: self.paper, room });
        }
        Ok((cols, rows))
    }

    /// Tags a page holds.
    pub fn per_page(&self) -> Result<usize, SheetError> {
        self.grid().map(|(cols, rows)| cols * rows)
    }

    /// The top left corner of the tag in column `col`, row `row`, in millimetres from the
    /// page's top left.
    fn corner_mm(&self, col: usize, row: usize) -> (f32, f32) {
        let left = MARGIN_MM + col as f32 * (self.tag_mm + GUTTER_MM);
        let top = MARGIN_MM + row as f32 * (self.tag_mm + self.caption_mm() + GUTTER_MM);
        (left, top)
    }

    /// Where tag `index` of a sheet is: its page (from 0), and its top left corner in
    /// millimetres from that page's top left (for checks that look for it there).
    pub fn place(&self, index: usize) -> Result<(usize, f32, f32), SheetError> {
        let (cols, rows) = self.grid()?;
        let (page, at) = (index / (cols * rows), index % (cols * rows));
        let (left, top) = self.corner_mm(at % cols, at / cols);
        Ok((page, left, top))
    }

    /// Each tag's position on its page: (column, row), in order.
    fn slots(&self) -> impl Iterator<Item = (usize, usize)> {
        let (cols, rows) = self.grid().expect("checked by the caller");
        (0..rows).flat_map(move |row| (0..cols).map(move |col| (col, row)))
    }

    /// Writes a PDF of `pages` (each a page's cells, `page_count` of them) to `out`, a page at a
    /// time. A page that fails to come (its tags could not be made) stops the writing with its
    /// error; the caller removes what was written.
    pub fn write_pdf<W: Write, E: From<io::Error>>(
        &self,
        out: W,
        page_count: usize,
        pages: impl Iterator<Item = Result<Vec<Cell>, E>>,
        logo: Option<&Placed>,
    ) -> Result<(), E> {
        self.grid().expect("checked by the caller");
        let (width, height) = self.paper.size_mm();
        let (width, height) = (width * PT_PER_MM, height * PT_PER_MM);
        let mut pdf = PdfOut::new(out)?;
        let (catalog, tree, font) = (pdf.alloc(), pdf.alloc(), pdf.alloc());
        let page_ids: Vec<(Ref, Ref)> = (0..page_count.max(1)).map(|_| (pdf.alloc(), pdf.alloc())).collect();
        pdf.object(|c| {
            c.indirect(catalog).start::<pdf_writer::writers::Catalog>().pages(tree);
        })?;
        pdf.object(|c| {
            c.pages(tree).kids(page_ids.iter().map(|p| p.0)).count(page_ids.len() as i32);
        })?;
        // One of the 14 fonts every PDF reader has: nothing to embed. WinAnsi for titles in
        // Western European languages.
        pdf.object(|c| {
            c.type1_font(font).base_font(Name(b"Helvetica")).encoding_predefined(Name(b"WinAnsiEncoding"));
        })?;
        let logo_image = match logo {
            Some(logo) => Some(self.logo_xobject(&mut pdf, logo)?),
            None => None,
        };
        let mut pages = pages;
        for (n, &(page_id, contents)) in page_ids.iter().enumerate() {
            let cells = match pages.next() {
                Some(cells) => cells?,
                None if n == 0 => Vec::new(),
                None => panic!("{page_count} pages announced, {n} came"),
            };
            pdf.object(|c| {
                let mut page = c.page(page_id);
                page.media_box(Rect::new(0.0, 0.0, width, height)).parent(tree).contents(contents);
                let mut resources = page.resources();
                resources.fonts().pair(Name(b"F1"), font);
                if let Some(image) = logo_image {
                    resources.x_objects().pair(Name(b"Logo"), image);
                }
            })?;
            let mut content = Content::new();
            for (cell, (col, row)) in cells.iter().zip(self.slots()) {
                let (left, top) = self.corner_mm(col, row);
                let (x, top) = (left * PT_PER_MM, height - top * PT_PER_MM);
                self.pdf_tag(&mut content, &cell.code, x, top, logo);
                self.pdf_caption(&mut content, cell, x, top);
                pdf_marks(&mut content, x, top, self.tag_mm * PT_PER_MM);
            }
            let data = deflate(&content.finish());
            pdf.object(|c| {
                c.stream(contents, &data).filter(Filter::FlateDecode);
            })?;
        }
        pdf.finish(catalog)?;
        Ok(())
    }

    /// The logo as an image XObject (with its alpha as a soft mask), drawn at `LOGO_DPI` for its
    /// largest size on this sheet (the smallest symbol's modules are the largest).
    fn logo_xobject<W: Write>(&self, pdf: &mut PdfOut<W>, logo: &Placed) -> io::Result<Ref> {
        let modules = (21 + 2 * self.border) as f32;
        let px = |m: f32| ((m * self.tag_mm / modules) / 25.4 * LOGO_DPI).ceil() as u32;
        let pixmap = logo.logo.pixmap(px(logo.width), px(logo.height));
        let (mut rgb, mut alpha) = (Vec::new(), Vec::new());
        for p in pixmap.pixels() {
            let c = p.demultiply();
            rgb.extend([c.red(), c.green(), c.blue()]);
            alpha.push(c.alpha());
        }
        let (image, mask) = (pdf.alloc(), pdf.alloc());
        let (w, h) = (pixmap.width() as i32, pixmap.height() as i32);
        let rgb = deflate(&rgb);
        pdf.object(|c| {
            let mut x = c.image_xobject(image, &rgb);
            x.width(w).height(h).bits_per_component(8).s_mask(mask).filter(Filter::FlateDecode);
            x.color_space().device_rgb();
        })?;
        let alpha = deflate(&alpha);
        pdf.object(|c| {
            let mut x = c.image_xobject(mask, &alpha);
            x.width(w).height(h).bits_per_component(8).filter(Filter::FlateDecode);
            x.color_space().device_gray();
        })?;
        Ok(image)
    }

    fn pdf_tag(&self, content: &mut Content, code: &QrCode, x: f32, top: f32, logo: Option<&Placed>) {
        let tag = self.tag_mm * PT_PER_MM;
        let size = code.size() as u32;
        let module = tag / (size + 2 * self.border) as f32;
        let [r, g, b] = self.colours.bg.rgb.map(|c| f32::from(c) / 255.0);
        content.set_fill_rgb(r, g, b).rect(x, top - tag, tag, tag).fill_nonzero();
        let [r, g, b] = self.colours.fg.rgb.map(|c| f32::from(c) / 255.0);
        content.set_fill_rgb(r, g, b);
        for (x0, y, len) in runs(code, logo) {
            let left = x + (x0 + self.border) as f32 * module;
            let bottom = top - (y + self.border + 1) as f32 * module;
            content.rect(left, bottom, len as f32 * module, module);
        }
        content.fill_nonzero();
        if let Some(logo) = logo {
            let (left, top_m, w, h) = logo.frame(size, self.border);
            let (lx, ly) = (x + left * module, top - (top_m + h) * module);
            content.save_state();
            content.transform([w * module, 0.0, 0.0, h * module, lx, ly]);
            content.x_object(Name(b"Logo"));
            content.restore_state();
        }
    }

    fn pdf_caption(&self, content: &mut Content, cell: &Cell, x: f32, top: f32) {
        let tag = self.tag_mm * PT_PER_MM;
        // The tag's width, less a little, is the room a caption has.
        let room = tag + GUTTER_MM * PT_PER_MM * 0.8;
        let mut lines = vec![(fit_win_ansi(&cell.label, room), 0.0)];
        if let (true, Some(title)) = (self.titles, &cell.title) {
            lines.push((fit_win_ansi(title, room), 0.3));
        }
        content.set_font(Name(b"F1"), LABEL_PT);
        for (i, ((bytes, width), grey)) in lines.into_iter().enumerate() {
            let baseline = top - tag - (CAPTION_GAP_MM + LINE_MM * i as f32) * PT_PER_MM - LABEL_PT;
            content.set_fill_gray(grey);
            content.begin_text();
            content.set_font(Name(b"F1"), LABEL_PT);
            content.next_line(x + (tag - width) / 2.0, baseline);
            content.show(Str(&bytes));
            content.end_text();
        }
    }

    /// Page `cells` as an SVG document in millimetres.
    pub fn svg_page(&self, cells: &[Cell], logo: Option<&Placed>) -> String {
        let (width, height) = self.paper.size_mm();
        let mut doc = Document::new()
            .set("width", format!("{width}mm"))
            .set("height", format!("{height}mm"))
            .set("viewBox", (0, 0, width, height));
        if let Some(logo) = logo {
            let image = svg_el::Image::new()
                .set("width", logo.logo.width)
                .set("height", logo.logo.height)
                .set("href", logo.logo.data_url());
            let symbol = svg_el::Symbol::new()
                .set("id", "logo")
                .set("viewBox", (0, 0, logo.logo.width, logo.logo.height))
                .add(image);
            doc = doc.add(svg_el::Definitions::new().add(symbol));
        }
        let (fg, bg) = (self.colours.fg.to_string(), self.colours.bg.to_string());
        let mut marks = Data::new();
        for (cell, (col, row)) in cells.iter().zip(self.slots()) {
            let (x, y) = self.corner_mm(col, row);
            let size = cell.code.size() as u32;
            let module = self.tag_mm / (size + 2 * self.border) as f32;
            let mut group = svg_el::Group::new().add(
                svg_el::Rectangle::new()
                    .set("x", x)
                    .set("y", y)
                    .set("width", self.tag_mm)
                    .set("height", self.tag_mm)
                    .set("fill", bg.as_str()),
            );
            let mut modules = Data::new();
            for (x0, my, len) in runs(&cell.code, logo) {
                modules = modules
                    .move_to((x0 + self.border, my + self.border))
                    .horizontal_line_by(len)
                    .vertical_line_by(1)
                    .horizontal_line_by(-(len as i32))
                    .close();
            }
            group = group.add(
                svg_el::Path::new()
                    .set("d", modules)
                    .set("fill", fg.as_str())
                    .set("transform", format!("translate({x} {y}) scale({module})")),
            );
            if let Some(logo) = logo {
                let (left, top, w, h) = logo.frame(size, self.border);
                group = group.add(
                    svg_el::Use::new()
                        .set("href", "#logo")
                        .set("x", x + left * module)
                        .set("y", y + top * module)
                        .set("width", w * module)
                        .set("height", h * module),
                );
            }
            let mut lines = vec![(cell.label.clone(), "#000")];
            if let (true, Some(title)) = (self.titles, &cell.title) {
                lines.push((title.clone(), "#4d4d4d"));
            }
            for (i, (line, colour)) in lines.into_iter().enumerate() {
                let baseline = y + self.tag_mm + CAPTION_GAP_MM + LINE_MM * i as f32 + LABEL_PT / PT_PER_MM;
                group = group.add(
                    svg_el::Text::new(line)
                        .set("x", x + self.tag_mm / 2.0)
                        .set("y", baseline)
                        .set("text-anchor", "middle")
                        .set("font-family", "Helvetica, Arial, sans-serif")
                        .set("font-size", LABEL_PT / PT_PER_MM)
                        .set("fill", colour),
                );
            }
            doc = doc.add(group);
            for (cx, cy, dx, dy) in [
                (x, y, -1.0, -1.0),
                (x + self.tag_mm, y, 1.0, -1.0),
                (x, y + self.tag_mm, -1.0, 1.0),
                (x + self.tag_mm, y + self.tag_mm, 1.0, 1.0),
            ] {
                marks = marks
                    .move_to((cx + dx * MARK_GAP_MM, cy))
                    .horizontal_line_by(dx * MARK_MM)
                    .move_to((cx, cy + dy * MARK_GAP_MM))
                    .vertical_line_by(dy * MARK_MM);
            }
        }
        if !cells.is_empty() {
            doc = doc.add(
                svg_el::Path::new().set("d", marks).set("stroke", "#000").set("stroke-width", 0.1).set("fill", "none"),
            );
        }
        doc.to_string()
    }
}

/// Runs of dark modules, row by row, left out where a logo's hole is: (x, y, length). A
/// rectangle per run takes fewer operators than one per module.
fn runs<'a>(code: &'a QrCode, logo: Option<&'a Placed>) -> impl Iterator<Item = (u32, u32, u32)> + 'a {
    let size = code.size() as u32;
    let inked =
        move |x: u32, y: u32| code.get_module(x as i32, y as i32) && !logo.is_some_and(|l| l.hole.covers(size, x, y));
    (0..size).flat_map(move |y| {
        let mut found = Vec::new();
        let mut x = 0;
        while x < size {
            if !inked(x, y) {
                x += 1;
                continue;
            }
            let start = x;
            while x < size && inked(x, y) {
                x += 1;
            }
            found.push((start, y, x - start));
        }
        found
    })
}

/// Crop marks outside each corner of the tag: two short strokes along its edges' lines.
fn pdf_marks(content: &mut Content, x: f32, top: f32, tag: f32) {
    let (gap, mark) = (MARK_GAP_MM * PT_PER_MM, MARK_MM * PT_PER_MM);
    content.set_line_width(0.25).set_stroke_rgb(0.0, 0.0, 0.0);
    for (cx, cy, dx, dy) in
        [(x, top, -1.0, 1.0), (x + tag, top, 1.0, 1.0), (x, top - tag, -1.0, -1.0), (x + tag, top - tag, 1.0, -1.0)]
    {
        content.move_to(cx + dx * gap, cy).line_to(cx + dx * (gap + mark), cy);
        content.move_to(cx, cy + dy * gap).line_to(cx, cy + dy * (gap + mark));
    }
    content.stroke();
}

fn deflate(data: &[u8]) -> Vec<u8> {
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    z.write_all(data).expect("writing to memory");
    z.finish().expect("writing to memory")
}

/// Helvetica's advance widths for ASCII 32 to 126, in thousandths of the type size (Adobe's
/// AFM); other characters are taken as 556, the digits' width.
const HELVETICA: [u16; 95] = [
    278, 278, 355, 556, 556, 889, 667, 191, 333, 333, 389, 584, 278, 333, 278, 278, 556, 556, 556, 556, 556, 556, 556,
    556, 556, 556, 278, 278, 584, 584, 584, 556, 1015, 667, 667, 722, 722, 667, 611, 778, 722, 278, 500, 667, 556, 833,
    722, 778, 667, 778, 722, 667, 611, 722, 667, 944, 667, 667, 611, 278, 278, 278, 469, 556, 333, 556, 556, 500, 556,
    556, 278, 556, 556, 222, 222, 500, 222, 833, 556, 556, 556, 556, 333, 500, 278, 556, 500, 722, 500, 500, 500, 334,
    260, 334, 584,
];

/// WinAnsiEncoding's byte for `c` (Windows-1252), `?` for characters it lacks.
fn win_ansi(c: char) -> u8 {
    const HIGH: [(char, u8); 27] = [
        ('€', 0x80),
        ('‚', 0x82),
        ('ƒ', 0x83),
        ('„', 0x84),
        ('…', 0x85),
        ('†', 0x86),
        ('‡', 0x87),
        ('ˆ', 0x88),
        ('‰', 0x89),
        ('Š', 0x8a),
        ('‹', 0x8b),
        ('Œ', 0x8c),
        ('Ž', 0x8e),
        ('‘', 0x91),
        ('’', 0x92),
        ('“', 0x93),
        ('”', 0x94),
        ('•', 0x95),
        ('–', 0x96),
        ('—', 0x97),
        ('˜', 0x98),
        ('™', 0x99),
        ('š', 0x9a),
        ('›', 0x9b),
        ('œ', 0x9c),
        ('ž', 0x9e),
        ('Ÿ', 0x9f),
    ];
    match c {
        ' '..='~' | '\u{a0}'..='ÿ' => c as u8,
        c if c.is_control() => b' ',
        c => HIGH.iter().find(|(h, _)| *h == c).map_or(b'?', |&(_, b)| b),
    }
}

fn width_of(byte: u8) -> f32 {
    let units = match byte {
        32..=126 => HELVETICA[usize::from(byte - 32)],
        0x85 => 1000,
        _ => 556,
    };
    f32::from(units) * LABEL_PT / 1000.0
}

/// `text` in WinAnsi, cut with an ellipsis to `room` points at the caption's size, and its width.
fn fit_win_ansi(text: &str, room: f32) -> (Vec<u8>, f32) {
    let bytes: Vec<u8> = text.chars().map(win_ansi).collect();
    let width: f32 = bytes.iter().map(|&b| width_of(b)).sum();
    if width <= room {
        return (bytes, width);
    }
    let mut out = Vec::new();
    let mut used = width_of(0x85);
    for b in bytes {
        if used + width_of(b) > room {
            break;
        }
        used += width_of(b);
        out.push(b);
    }
    out.push(0x85);
    (out, used)
}

/// A PDF written object by object: each goes out as soon as it is made, and its offset is kept
/// for the cross-reference table.
struct PdfOut<W: Write> {
    out: W,
    written: usize,
    offsets: Vec<(i32, usize)>,
    next: i32,
}

impl<W: Write> PdfOut<W> {
    fn new(mut out: W) -> io::Result<Self> {
        // The binary comment tells transfer programs the file is not text (§7.5.2).
        let header = b"%PDF-1.7\n%\x80\x80\x80\x80\n\n";
        out.write_all(header)?;
        Ok(PdfOut { out, written: header.len(), offsets: Vec::new(), next: 1 })
    }

    fn alloc(&mut self) -> Ref {
        self.next += 1;
        Ref::new(self.next - 1)
    }

    /// Writes the one object `make` adds to a chunk.
    fn object(&mut self, make: impl FnOnce(&mut Chunk)) -> io::Result<()> {
        let mut chunk = Chunk::new();
        make(&mut chunk);
        let mut refs = chunk.refs();
        let id = refs.next().expect("an object was written");
        debug_assert!(refs.next().is_none(), "one object a chunk");
        self.offsets.push((id.get(), self.written));
        self.out.write_all(chunk.as_bytes())?;
        self.written += chunk.len();
        Ok(())
    }

    /// The cross-reference table (every entry 20 bytes, §7.5.4) and the trailer.
    fn finish(mut self, catalog: Ref) -> io::Result<()> {
        self.offsets.sort_unstable();
        let count = self.next;
        assert!(self.offsets.iter().map(|o| o.0).eq(1..count), "every object allocated was written");
        let mut table = format!("xref\n0 {count}\n0000000000 65535 f\r\n");
        for (_, offset) in &self.offsets {
            table.push_str(&format!("{offset:010} 00000 n\r\n"));
        }
        table.push_str(&format!(
            "trailer\n<< /Size {count} /Root {} 0 R >>\nstartxref\n{}\n%%EOF\n",
            catalog.get(),
            self.written
        ));
        self.out.write_all(table.as_bytes())?;
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(tag_mm: f32) -> Layout {
        Layout { paper: Paper::A4, tag_mm, border: 4, colours: Colours::PLAIN, titles: false }
    }

    fn pdf(layout: &Layout, n: usize) -> Vec<u8> {
        let per_page = layout.per_page().unwrap();
        let cells = (0..n).map(|i| Cell {
            label: format!("http://0x1f.ie/T{i:04}"),
            title: Some(format!("Poster {i} — café")),
            code: QrCode::encode_text("HTTP://0X1F.IE/H83if", qrcodegen::QrCodeEcc::Low).unwrap(),
        });
        let cells: Vec<Cell> = cells.collect();
        let mut pages = Vec::new();
        let mut it = cells.into_iter().peekable();
        while it.peek().is_some() {
            pages.push(Ok::<_, io::Error>(it.by_ref().take(per_page).collect::<Vec<_>>()));
        }
        let mut out = Vec::new();
        layout.write_pdf(&mut out, pages.len(), pages.into_iter(), None).unwrap();
        out
    }

    #[test]
    fn the_grid_follows_the_tag_size_and_a_tag_too_large_is_refused() {
        // A4 less 12 mm margins: 186 mm across; 30 mm tags with 8 mm between: 5 columns.
        assert_eq!(layout(30.0).grid().unwrap(), (5, 6));
        assert_eq!(layout(20.0).grid().unwrap(), (6, 8));
        assert_eq!(Layout { titles: true, ..layout(30.0) }.grid().unwrap(), (5, 6));
        assert_eq!(Layout { titles: true, ..layout(20.0) }.grid().unwrap(), (6, 7), "a title line costs a row");
        let refused = layout(200.0).grid().unwrap_err();
        assert!(refused.to_string().contains("does not fit on a A4 page"), "{refused}");
    }

    #[test]
    fn a_sheet_has_as_many_pages_as_its_tags_need_and_a_sound_cross_reference_table() {
        let pdf = pdf(&layout(30.0), 31);
        assert!(pdf.starts_with(b"%PDF-1.7"));
        let has = |needle: &[u8]| pdf.windows(needle.len()).any(|w| w == needle);
        assert!(has(b"/Count 2"), "30 tags a page: 31 make two pages");
        // Each entry of the table points at its object's first byte.
        let tail = String::from_utf8_lossy(&pdf[pdf.len() - 40..]).into_owned();
        let start: usize = tail.rsplit("startxref\n").next().unwrap().lines().next().unwrap().parse().unwrap();
        let table = String::from_utf8(pdf[start..].to_vec()).unwrap();
        assert!(table.starts_with("xref\n0 8\n"), "the free entry, catalog, pages, font, two pages and their contents");
        for (n, entry) in table.lines().skip(3).take_while(|l| l.ends_with(" n\r")).enumerate() {
            let offset: usize = entry[..10].parse().unwrap();
            assert!(pdf[offset..].starts_with(format!("{} 0 obj", n + 1).as_bytes()), "object {}", n + 1);
        }
    }

    #[test]
    fn captions_are_win_ansi_and_cut_to_the_tag_width() {
        assert_eq!(fit_win_ansi("café — 5€", 1000.0).0, b"caf\xe9 \x97 5\x80");
        assert_eq!(fit_win_ansi("日本", 1000.0).0, b"??");
        let (cut, width) = fit_win_ansi(&"W".repeat(100), 50.0);
        assert!(width <= 50.0 && cut.ends_with(&[0x85]) && cut.len() < 100);
    }

    #[test]
    fn an_svg_page_has_each_tag_its_caption_and_title() {
        let layout = Layout { titles: true, ..layout(30.0) };
        let code = QrCode::encode_text("HTTP://0X1F.IE/H83if", qrcodegen::QrCodeEcc::Low).unwrap();
        let cells = vec![Cell { label: "http://0x1f.ie/H83if".into(), title: Some("Spring & summer".into()), code }];
        let svg = layout.svg_page(&cells, None);
        assert!(svg.contains("width=\"210mm\"") && svg.contains(">\nhttp://0x1f.ie/H83if\n</text>"), "{svg}");
        assert!(svg.contains(">\nSpring &amp; summer\n</text>"), "{svg}");
    }
}
