//! A print run on paper: tags in a grid at a stated physical size, each with its short URL
//! under it and crop marks at its corners, as vector PDF written with `pdf-writer` (the modules
//! are filled rectangles, so the print shop's RIP draws them at its own resolution).

use pdf_writer::{Content, Finish, Name, Pdf, Rect, Ref, Str};
use qrcodegen::QrCode;

use super::colour::Colours;

/// Points per millimetre (PDF's unit is 1/72 inch).
const PT_PER_MM: f32 = 72.0 / 25.4;
/// The page's margin, the space between cells, the label's height (mm), and its type size (pt).
const MARGIN_MM: f32 = 12.0;
const GUTTER_MM: f32 = 8.0;
const LABEL_MM: f32 = 5.0;
const LABEL_PT: f32 = 7.0;
/// Crop marks: their length, and their distance from the tag's corner (mm).
const MARK_MM: f32 = 3.0;
const MARK_GAP_MM: f32 = 1.0;

/// The paper sizes a sheet is laid out on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Paper {
    /// ISO A4, 210 × 297 mm.
    A4,
    /// US Letter, 8.5 × 11 in.
    Letter,
}

impl Paper {
    /// Width and height in points.
    fn size(self) -> (f32, f32) {
        match self {
            Paper::A4 => (210.0 * PT_PER_MM, 297.0 * PT_PER_MM),
            Paper::Letter => (612.0, 792.0),
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
    /// Columns and rows of tags a page holds.
    pub fn grid(&self) -> Result<(usize, usize), SheetError> {
        let (width, height) = self.paper.size();
        let (tag, gutter, margin) = (self.tag_mm * PT_PER_MM, GUTTER_MM * PT_PER_MM, MARGIN_MM * PT_PER_MM);
        let fit = |room: f32, cell: f32| ((room - 2.0 * margin + gutter) / (cell + gutter)).floor().max(0.0) as usize;
        let (cols, rows) = (fit(width, tag), fit(height, tag + LABEL_MM * PT_PER_MM));
        if cols == 0 || rows == 0 {
            let room = (width.min(height - LABEL_MM * PT_PER_MM) - 2.0 * margin) / PT_PER_MM;
            return Err(SheetError::TooLarge { tag_mm: self.tag_mm, paper: self.paper, room });
        }
        Ok((cols, rows))
    }

    /// The PDF of `tags` (each its label and its symbol), row by row, as many pages as needed.
    pub fn pdf(&self, tags: &[(String, &QrCode)]) -> Result<Vec<u8>, SheetError> {
        let (cols, rows) = self.grid()?;
        let (width, height) = self.paper.size();
        let per_page = cols * rows;
        let pages = tags.len().div_ceil(per_page).max(1);
        let mut pdf = Pdf::new();
        let (catalog, tree, font) = (Ref::new(1), Ref::new(2), Ref::new(3));
        let page_ids: Vec<Ref> = (0..pages).map(|n| Ref::new(4 + 2 * n as i32)).collect();
        pdf.catalog(catalog).pages(tree);
        pdf.pages(tree).kids(page_ids.iter().copied()).count(pages as i32);
        // One of the 14 fonts every PDF reader has: nothing to embed.
        pdf.type1_font(font).base_font(Name(b"Helvetica"));
        for (n, page_id) in page_ids.iter().enumerate() {
            let contents = Ref::new(page_id.get() + 1);
            let mut page = pdf.page(*page_id);
            page.media_box(Rect::new(0.0, 0.0, width, height));
            page.parent(tree);
            page.contents(contents);
            page.resources().fonts().pair(Name(b"F1"), font);
            page.finish();
            let mut content = Content::new();
            let on_page = tags.iter().skip(n * per_page).take(per_page);
            for (i, (label, code)) in on_page.enumerate() {
                let (col, row) = (i % cols, i / cols);
                let (x, top) = self.cell(col, row, height);
                self.draw_tag(&mut content, code, x, top);
                self.draw_label(&mut content, label, x, top);
                self.draw_marks(&mut content, x, top);
            }
            pdf.stream(contents, &content.finish());
        }
        Ok(pdf.finish())
    }

    /// The top left corner of the tag in column `col`, row `row`, in points from the page's
    /// bottom left.
    fn cell(&self, col: usize, row: usize, height: f32) -> (f32, f32) {
        let (left, top) = self.corner_mm(col, row);
        (left * PT_PER_MM, height - top * PT_PER_MM)
    }

    /// The top left corner of the tag in column `col`, row `row`, in millimetres from the
    /// page's top left.
    fn corner_mm(&self, col: usize, row: usize) -> (f32, f32) {
        let left = MARGIN_MM + col as f32 * (self.tag_mm + GUTTER_MM);
        let top = MARGIN_MM + row as f32 * (self.tag_mm + LABEL_MM + GUTTER_MM);
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

    fn draw_tag(&self, content: &mut Content, code: &QrCode, x: f32, top: f32) {
        let tag = self.tag_mm * PT_PER_MM;
        let modules = code.size() as u32 + 2 * self.border;
        let module = tag / modules as f32;
        let [r, g, b] = self.colours.bg.rgb.map(|c| f32::from(c) / 255.0);
        content.set_fill_rgb(r, g, b).rect(x, top - tag, tag, tag).fill_nonzero();
        let [r, g, b] = self.colours.fg.rgb.map(|c| f32::from(c) / 255.0);
        content.set_fill_rgb(r, g, b);
        // A rectangle per run of dark modules in a row: fewer operators than one per module.
        for y in 0..code.size() {
            let mut x0 = 0;
            while x0 < code.size() {
                if !code.get_module(x0, y) {
                    x0 += 1;
                    continue;
                }
                let mut x1 = x0;
                while x1 < code.size() && code.get_module(x1, y) {
                    x1 += 1;
                }
                let left = x + (x0 as u32 + self.border) as f32 * module;
                let bottom = top - (y as u32 + self.border + 1) as f32 * module;
                content.rect(left, bottom, (x1 - x0) as f32 * module, module);
                x0 = x1;
            }
        }
        content.fill_nonzero();
    }

    fn draw_label(&self, content: &mut Content, label: &str, x: f32, top: f32) {
        let tag = self.tag_mm * PT_PER_MM;
        // Helvetica's characters average about half an em: centred near enough for a caption.
        let width = label.chars().count() as f32 * LABEL_PT * 0.52;
        content.set_fill_gray(0.0);
        content.begin_text();
        content.set_font(Name(b"F1"), LABEL_PT);
        content.next_line(x + (tag - width).max(0.0) / 2.0, top - tag - LABEL_PT - 1.5);
        content.show(Str(label.as_bytes()));
        content.end_text();
    }

    /// Crop marks outside each corner of the tag: two short strokes along its edges' lines.
    fn draw_marks(&self, content: &mut Content, x: f32, top: f32) {
        let tag = self.tag_mm * PT_PER_MM;
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(tag_mm: f32) -> Layout {
        Layout { paper: Paper::A4, tag_mm, border: 4, colours: Colours::PLAIN }
    }

    #[test]
    fn the_grid_follows_the_tag_size_and_a_tag_too_large_is_refused() {
        // A4 less 12 mm margins: 186 mm across; 30 mm tags with 8 mm between: 5 columns.
        assert_eq!(layout(30.0).grid().unwrap(), (5, 6));
        assert_eq!(layout(20.0).grid().unwrap(), (6, 8));
        let refused = layout(200.0).grid().unwrap_err();
        assert!(refused.to_string().contains("does not fit on a A4 page"), "{refused}");
    }

    #[test]
    fn a_sheet_has_as_many_pages_as_its_tags_need() {
        let code = QrCode::encode_text("HTTP://0X1F.IE/H83if", qrcodegen::QrCodeEcc::Low).unwrap();
        let tags: Vec<(String, &QrCode)> = (0..31).map(|n| (format!("http://0x1f.ie/T{n:04}"), &code)).collect();
        let pdf = layout(30.0).pdf(&tags).unwrap();
        let text = String::from_utf8_lossy(&pdf);
        assert!(text.starts_with("%PDF-"));
        assert!(text.contains("/Count 2"), "30 tags a page: 31 make two pages");
    }
}
