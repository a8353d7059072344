//! A print sheet the page asks for: the tags it lists (with the titles it read from CouchDB
//! with the user's own credentials), the paper, the tag size and the colours, as JSON; the same
//! PDF `couchlink qr --sheet` writes.

use serde::Deserialize;

use crate::domain::{LinkId, PublicUrl};
use crate::qr::colour::{Colour, Colours};
use crate::qr::sheet::{self, Layout, Paper};

/// A sheet's writing failed: a tag (in words for the page), or the writing itself.
#[derive(Debug, thiserror::Error)]
enum Failed {
    #[error("{0}")]
    Tag(String),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// The most tags one sheet request makes (34 A4 pages of 30 mm tags).
pub const MAX_TAGS: usize = 1000;

/// The page's request.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Request {
    tags: Vec<Entry>,
    paper: Paper,
    size_mm: u32,
    fg: String,
    bg: String,
    #[serde(default)]
    titles: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    id: String,
    #[serde(default)]
    title: Option<String>,
}

/// The PDF for the request in `body`, or why not (in words for the page).
pub fn make(public_url: &PublicUrl, body: &[u8]) -> Result<Vec<u8>, String> {
    let request: Request = serde_json::from_slice(body).map_err(|e| format!("not a sheet request: {e}"))?;
    if request.tags.is_empty() || request.tags.len() > MAX_TAGS {
        return Err(format!("a sheet has 1 to {MAX_TAGS} tags, not {}", request.tags.len()));
    }
    if !(10..=250).contains(&request.size_mm) {
        return Err(format!("a tag is 10 to 250 mm across, not {}", request.size_mm));
    }
    let colour = |text: &str| Colour::parse(text).map_err(|e| e.to_string());
    let colours = Colours::new(colour(&request.fg)?, colour(&request.bg)?).map_err(|e| e.to_string())?;
    let layout =
        Layout { paper: request.paper, tag_mm: request.size_mm as f32, border: 4, colours, titles: request.titles };
    let per_page = layout.per_page().map_err(|e| e.to_string())?;
    let ids = request
        .tags
        .iter()
        .map(|entry| LinkId::parse(&entry.id).map_err(|_| format!("{:?} is not a link ID", entry.id)))
        .collect::<Result<Vec<_>, _>>()?;
    let titles: Vec<Option<String>> = request
        .tags
        .iter()
        .map(|entry| entry.title.as_deref().map(str::trim).filter(|t| !t.is_empty()).map(str::to_owned))
        .collect();
    let code = |id: &LinkId| {
        let tag = crate::qr::encode(&crate::qr::tag_text(public_url, id), None).map_err(|e| e.to_string())?;
        Ok::<_, String>(tag.code)
    };
    let page_count = ids.len().div_ceil(per_page);
    let pages = sheet::pages(public_url, &ids, &titles, per_page, code).map(|page| page.map_err(Failed::Tag));
    let mut pdf = Vec::new();
    layout.write_pdf(&mut pdf, page_count, pages, None).map_err(|e| e.to_string())?;
    Ok(pdf)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> PublicUrl {
        PublicUrl::parse("http://0x1f.ie").unwrap()
    }

    #[test]
    fn a_request_makes_a_pdf_of_as_many_pages_as_its_tags_need() {
        let tags: Vec<_> = (0..31).map(|n| serde_json::json!({"id": format!("Tg{n:03}"), "title": "Spring"})).collect();
        let body = serde_json::json!({"tags": tags, "paper": "a4", "size_mm": 30, "fg": "#1a1a6e", "bg": "#ffffff", "titles": false});
        let pdf = make(&base(), body.to_string().as_bytes()).unwrap();
        assert!(pdf.starts_with(b"%PDF-1.7"));
        assert!(pdf.windows(8).any(|w| w == b"/Count 2"), "30 tags a page");
    }

    #[test]
    fn bad_requests_say_what_is_wrong() {
        let ask = |v: serde_json::Value| make(&base(), v.to_string().as_bytes()).unwrap_err();
        let one = serde_json::json!([{"id": "H83if"}]);
        let req = |fg: &str, size: u32, tags: &serde_json::Value| serde_json::json!({"tags": tags, "paper": "letter", "size_mm": size, "fg": fg, "bg": "#ffffff"});
        assert!(ask(req("#eeeeee", 30, &one)).contains("symbol contrast"));
        assert!(ask(req("#000", 300, &one)).contains("10 to 250 mm"));
        assert!(ask(req("#000", 30, &serde_json::json!([]))).contains("1 to 1000 tags"));
        assert!(ask(req("#000", 30, &serde_json::json!([{"id": "../x"}]))).contains("is not a link ID"));
        assert!(ask(serde_json::json!({"tags": one, "paper": "a3", "size_mm": 30, "fg": "#000", "bg": "#fff"}))
            .contains("not a sheet request"));
    }
}
