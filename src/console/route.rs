//! What the console's listener does with a request, decided before any byte reaches CouchDB:
//! one of its own files, its configuration, a QR tag, a CouchDB request it passes through, or a
//! refusal with its reason. The console adds no authority: it passes only the requests its page
//! makes, and CouchDB decides each of them.

use crate::domain::LinkId;
use crate::qr::colour::{Colour, Colours};

/// One links database the console offers, with the clicks database its proxies count into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsoleSite {
    /// The links database.
    pub db: String,
    /// Its short links' base, for the page's short URLs and QR tags (`http://HOST`).
    pub public_url: crate::domain::PublicUrl,
    /// Its live counts, when counting is on.
    pub clicks_db: Option<String>,
    /// Its links' history, when recorded.
    pub history_db: Option<String>,
    /// The role that edits it (the page shows edit controls to its holders and to admins;
    /// CouchDB decides every write all the same).
    pub editor_role: String,
}

/// Where a request goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// One of the page's files, by name (`index.html` for `/`).
    Asset(&'static str),
    /// The sites offered, as JSON (`/console.json`).
    Sites,
    /// The QR tag of a link of site `site` (index), as SVG or PNG, in the colours asked
    /// (`?fg=%23rrggbb&bg=...`, black on white by default).
    Qr {
        /// Index into the sites.
        site: usize,
        /// The link.
        id: LinkId,
        /// `true`: PNG; `false`: SVG.
        png: bool,
        /// The modules' and the ground's colours.
        colours: Colours,
    },
    /// A print sheet (PDF) of tags of site `site`, as the page's JSON body lists them
    /// (`POST /qr/{db}/sheet.pdf`, from the console's own page only).
    Sheet {
        /// Index into the sites.
        site: usize,
    },
    /// A link password's hash, for the page to write into the document (`POST /password`,
    /// from the console's own page only): the password is hashed here, never stored or sent on.
    PasswordHash,
    /// Passed to CouchDB as `path` (with the request's query): under `/couch/`, the rest.
    Couch {
        /// CouchDB's path, beginning with `/`.
        path: String,
        /// What its body may hold ([`Body::check`]).
        body: Body,
    },
}

/// What a request's body may hold, checked before it is passed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body {
    /// Whatever it holds (CouchDB's validation decides).
    Any,
    /// A bulk change of links (`POST /{db}/_bulk_docs`): link documents only, as edits.
    Links,
    /// A bulk change's record (`POST /{db}_history/_bulk_docs`): its parts only, as edits.
    Record,
    /// The proxies' counts interval (`POST /{db}_clicks/_find`): [`COUNTS_INTERVAL_QUERY`]
    /// and no other query.
    CountsInterval,
}

/// The one `_find` the page makes of a clicks database (console/client.js, `countsSeconds`):
/// the `seconds` the newest counts documents state, the proxies' interval its live refresh
/// follows. Only that field of at most 10 documents, newest first.
pub const COUNTS_INTERVAL_QUERY: &str =
    r#"{"selector":{"_id":{"$gt":null},"type":"clicks"},"fields":["seconds"],"sort":[{"_id":"desc"}],"limit":10}"#;

impl Body {
    /// Whether `body` is one the page makes: for a `_bulk_docs`, documents of the kind named
    /// only, written as edits (never `new_edits: false`, which writes a revision a client names,
    /// past the conflict check), so that the console writes nothing else: never a database's
    /// local documents (`_local/couchlink`, which no validation function guards).
    pub fn check(self, body: &[u8]) -> Result<(), Refusal> {
        let ours: fn(&str) -> bool = match self {
            Body::Any => return Ok(()),
            Body::CountsInterval => {
                let asked: Option<serde_json::Value> = serde_json::from_slice(body).ok();
                let query: serde_json::Value = serde_json::from_str(COUNTS_INTERVAL_QUERY).expect("the query is JSON");
                if asked != Some(query) {
                    return Err(refuse(
                        400,
                        "a clicks database is asked through the console only for its counts' interval",
                    ));
                }
                return Ok(());
            }
            Body::Links => |id| LinkId::parse(id).is_ok(),
            Body::Record => is_record_part,
        };
        let refused = |why: &str| refuse(400, format!("a bulk change through the console {why}"));
        let parsed: serde_json::Value = serde_json::from_slice(body).map_err(|_| refused("is a JSON object"))?;
        let Some(fields) = parsed.as_object() else { return Err(refused("is a JSON object")) };
        if fields.keys().any(|k| k != "docs") {
            return Err(refused("holds only \"docs\" (no \"new_edits\")"));
        }
        let docs = fields.get("docs").and_then(serde_json::Value::as_array).ok_or_else(|| refused("holds \"docs\""))?;
        if docs.iter().any(|d| d["_id"].as_str().is_none_or(|id| !ours(id))) {
            return Err(refused(match self {
                Body::Record => "to the history writes only a bulk change's record (~batch:<name>:<part>)",
                _ => "writes only links, each with its ID (5 letters or digits)",
            }));
        }
        Ok(())
    }
}

/// A request the console does not pass on, with the status it answers and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// 403, 404 or 405.
    pub status: u16,
    /// What the page shows.
    pub reason: String,
}

fn refuse(status: u16, reason: impl Into<String>) -> Refusal {
    Refusal { status, reason: reason.into() }
}

/// The page's files, compiled in (`cargo install` needs no Node): name, content type, bytes.
pub const ASSETS: &[(&str, &str, &[u8])] = &[
    ("index.html", "text/html; charset=utf-8", include_bytes!("../../console/index.html")),
    ("app.js", "text/javascript; charset=utf-8", include_bytes!("../../console/app.js")),
    ("client.js", "text/javascript; charset=utf-8", include_bytes!("../../console/client.js")),
    ("link.js", "text/javascript; charset=utf-8", include_bytes!("../../console/link.js")),
    ("form.js", "text/javascript; charset=utf-8", include_bytes!("../../console/form.js")),
    ("history.js", "text/javascript; charset=utf-8", include_bytes!("../../console/history.js")),
    ("bulk.js", "text/javascript; charset=utf-8", include_bytes!("../../console/bulk.js")),
    ("chart.js", "text/javascript; charset=utf-8", include_bytes!("../../console/chart.js")),
    ("router.js", "text/javascript; charset=utf-8", include_bytes!("../../console/router.js")),
    ("views/bulk.js", "text/javascript; charset=utf-8", include_bytes!("../../console/views/bulk.js")),
    ("views/charts.js", "text/javascript; charset=utf-8", include_bytes!("../../console/views/charts.js")),
    ("views/common.js", "text/javascript; charset=utf-8", include_bytes!("../../console/views/common.js")),
    ("views/editor.js", "text/javascript; charset=utf-8", include_bytes!("../../console/views/editor.js")),
    ("views/history.js", "text/javascript; charset=utf-8", include_bytes!("../../console/views/history.js")),
    ("views/link.js", "text/javascript; charset=utf-8", include_bytes!("../../console/views/link.js")),
    ("views/overview.js", "text/javascript; charset=utf-8", include_bytes!("../../console/views/overview.js")),
    ("views/list.js", "text/javascript; charset=utf-8", include_bytes!("../../console/views/list.js")),
    ("views/tag.js", "text/javascript; charset=utf-8", include_bytes!("../../console/views/tag.js")),
    ("app.css", "text/css; charset=utf-8", include_bytes!("../../console/app.css")),
    (
        "vendor/htm-preact-standalone.mjs",
        "text/javascript; charset=utf-8",
        include_bytes!("../../console/vendor/htm-preact-standalone.mjs"),
    ),
];

/// Where a request says it comes from, as the browser tells it (`Origin`, `Sec-Fetch-Site`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The console's own page: an `Origin` equal to the console's.
    OwnPage,
    /// Nothing said: no `Origin`, and no `Sec-Fetch-Site` but `same-origin` or `none` (a
    /// browser's own navigation, or a client that is no browser).
    Unsaid,
    /// Another site's page: a foreign `Origin`, or `Sec-Fetch-Site` `cross-site` or `same-site`.
    Elsewhere,
}

/// Decides where `method target` goes (a path, and maybe a `?query`), coming from `source`.
/// CouchDB requests are passed only from the console's own page: a write must say so
/// (`Origin`; browsers send it with every `POST`, `PUT` and `DELETE`), and any request another
/// site's page makes is refused here, before CouchDB.
pub fn route(method: &str, target: &str, source: Source, sites: &[ConsoleSite]) -> Result<Route, Refusal> {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let read = matches!(method, "GET" | "HEAD");
    if let Some(couch) = path.strip_prefix("/couch") {
        match source {
            Source::Elsewhere => {
                return Err(refuse(403, "another site's page may not reach CouchDB through the console"))
            }
            Source::Unsaid if !read => {
                return Err(refuse(403, "a write to the console must come from the console's own page (Origin)"))
            }
            // The page's writes carry no query: none passes on (`?new_edits=false`, say).
            _ if !read && !query.is_empty() => return Err(refuse(400, "a write through the console carries no query")),
            _ => return couch_route(method, couch, sites),
        }
    }
    if let (Some(db), "POST") = (path.strip_prefix("/qr/").and_then(|r| r.strip_suffix("/sheet.pdf")), method) {
        if source != Source::OwnPage {
            return Err(refuse(403, "a print sheet is made for the console's own page (Origin)"));
        }
        let site = sites.iter().position(|s| s.db == db).ok_or_else(|| refuse(404, "not a database of the console"))?;
        return Ok(Route::Sheet { site });
    }
    if (path, method) == ("/password", "POST") {
        if source != Source::OwnPage {
            return Err(refuse(403, "a password is hashed for the console's own page (Origin)"));
        }
        return Ok(Route::PasswordHash);
    }
    if !read {
        return Err(refuse(405, format!("{method} is not allowed here")));
    }
    match path {
        "/" => return Ok(Route::Asset("index.html")),
        "/console.json" => return Ok(Route::Sites),
        _ => {}
    }
    if let Some(rest) = path.strip_prefix("/qr/") {
        return qr_route(rest, query, sites);
    }
    let name = path.trim_start_matches('/');
    match ASSETS.iter().find(|(n, _, _)| *n == name) {
        Some((n, _, _)) => Ok(Route::Asset(n)),
        None => Err(refuse(404, "no such page")),
    }
}

/// `/qr/{db}/{id}.svg|png`, with `fg` and `bg` in the query.
fn qr_route(rest: &str, query: &str, sites: &[ConsoleSite]) -> Result<Route, Refusal> {
    let (db, file) = rest.split_once('/').ok_or_else(|| refuse(404, "no such tag"))?;
    let site = sites.iter().position(|s| s.db == db).ok_or_else(|| refuse(404, "not a database of the console"))?;
    let (id, png) = match (file.strip_suffix(".svg"), file.strip_suffix(".png")) {
        (Some(id), _) => (id, false),
        (_, Some(id)) => (id, true),
        _ => return Err(refuse(404, "a tag is .svg or .png")),
    };
    let id = LinkId::parse(id).map_err(|e| refuse(404, e.to_string()))?;
    let (mut fg, mut bg) = (Colour::BLACK, Colour::WHITE);
    for (name, value) in form_urlencoded::parse(query.as_bytes()) {
        let colour = || Colour::parse(&value).map_err(|e| refuse(400, e.to_string()));
        match name.as_ref() {
            "fg" => fg = colour()?,
            "bg" => bg = colour()?,
            _ => {}
        }
    }
    let colours = Colours::new(fg, bg).map_err(|e| refuse(400, e.to_string()))?;
    Ok(Route::Qr { site, id, png, colours })
}

/// The CouchDB requests the page makes, and no other: `_session`, a links database's info,
/// `_all_docs`, its console views, a link read or written, a bulk change (`_bulk_docs`, its
/// body checked by [`Body::check`]), the clicks views, the history's `_all_docs` (a link's
/// entries, a bulk change's record), a bulk change's record written (its `_bulk_docs`) and the
/// proxies' counts interval (the clicks database's `_find`, one query only).
fn couch_route(method: &str, path: &str, sites: &[ConsoleSite]) -> Result<Route, Refusal> {
    let (path, body) = couch_path(method, path, sites)?;
    Ok(Route::Couch { path, body })
}

fn couch_path(method: &str, path: &str, sites: &[ConsoleSite]) -> Result<(String, Body), Refusal> {
    let not_used = || refuse(404, format!("{method} {path} is not a CouchDB request the console makes"));
    // Escapes and dot segments would name, once CouchDB (or the URL parser) decodes them,
    // another path than the one checked here: `/links/%5Fdesign%2Flinks`, `/links/..`.
    if path.contains('%') || path.split('/').any(|segment| segment == "." || segment == "..") {
        return Err(not_used());
    }
    if path == "/_session" {
        return match method {
            "GET" | "POST" | "DELETE" => Ok((path.into(), Body::Any)),
            _ => Err(not_used()),
        };
    }
    let rest = path.strip_prefix('/').ok_or_else(not_used)?;
    let (db, doc) = match rest.split_once('/') {
        Some((db, doc)) => (db, Some(doc)),
        None => (rest, None),
    };
    let links = sites.iter().find(|s| s.db == db);
    let clicks = sites.iter().find(|s| s.clicks_db.as_deref() == Some(db));
    if sites.iter().any(|s| s.history_db.as_deref() == Some(db)) {
        return match (doc, method) {
            (Some("_all_docs"), "GET") => Ok((path.into(), Body::Any)),
            (Some("_bulk_docs"), "POST") => Ok((path.into(), Body::Record)),
            _ => Err(not_used()),
        };
    }
    match (links, clicks, doc, method) {
        (Some(_), _, None, "GET") => Ok((path.into(), Body::Any)),
        (Some(_), _, Some("_all_docs"), "GET") => Ok((path.into(), Body::Any)),
        // A bulk change: CouchDB's validation checks each document, and a stale revision is a
        // conflict, as for one link.
        (Some(_), _, Some("_bulk_docs"), "POST") => Ok((path.into(), Body::Links)),
        (Some(_), _, Some(doc), "GET")
            if ["recent", "search"].iter().any(|v| doc == format!("_design/console/_view/{v}")) =>
        {
            Ok((path.into(), Body::Any))
        }
        (Some(_), _, Some(doc), "GET" | "PUT") if LinkId::parse(doc).is_ok() => Ok((path.into(), Body::Any)),
        // The newest counts documents' `seconds`, and only that ([`COUNTS_INTERVAL_QUERY`]).
        (_, Some(_), Some("_find"), "POST") => Ok((path.into(), Body::CountsInterval)),
        (_, Some(_), Some(doc), "GET")
            if ["by_link", "by_version", "by_day_link", "by_month_link", "by_dimension"]
                .iter()
                .any(|v| doc == format!("_design/clicks/_view/{v}")) =>
        {
            Ok((path.into(), Body::Any))
        }
        _ => Err(not_used()),
    }
}

/// `~batch:<name>:<part>`: a part of a bulk change's record (src/bulk.rs, `part_id`), as the
/// history's validation function takes it.
fn is_record_part(doc: &str) -> bool {
    let Some(rest) = doc.strip_prefix("~batch:") else { return false };
    let Some((name, part)) = rest.rsplit_once(':') else { return false };
    crate::domain::is_batch_name(name) && part.len() == 4 && part.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::PublicUrl;

    fn sites() -> Vec<ConsoleSite> {
        vec![ConsoleSite {
            db: "links".into(),
            public_url: PublicUrl::parse("http://0x1f.ie").unwrap(),
            clicks_db: Some("links_clicks".into()),
            history_db: Some("links_history".into()),
            editor_role: "links:editor".into(),
        }]
    }

    #[test]
    fn the_page_and_its_files_are_served_and_nothing_else() {
        let s = sites();
        assert_eq!(route("GET", "/", Source::OwnPage, &s), Ok(Route::Asset("index.html")));
        assert_eq!(route("GET", "/app.js", Source::OwnPage, &s), Ok(Route::Asset("app.js")));
        assert_eq!(route("GET", "/console.json", Source::OwnPage, &s), Ok(Route::Sites));
        assert_eq!(route("GET", "/../Cargo.toml", Source::OwnPage, &s).unwrap_err().status, 404);
        assert_eq!(route("POST", "/", Source::OwnPage, &s).unwrap_err().status, 405);
        assert_eq!(route("POST", "/password", Source::OwnPage, &s), Ok(Route::PasswordHash));
        assert_eq!(route("POST", "/password", Source::Unsaid, &s).unwrap_err().status, 403);
        assert_eq!(route("POST", "/password", Source::Elsewhere, &s).unwrap_err().status, 403);
        assert_eq!(route("GET", "/password", Source::OwnPage, &s).unwrap_err().status, 404);
    }

    #[test]
    fn only_the_couchdb_requests_the_page_makes_are_passed() {
        let s = sites();
        for (method, path) in [
            ("POST", "/couch/_session"),
            ("DELETE", "/couch/_session"),
            ("GET", "/couch/links"),
            ("GET", "/couch/links/_all_docs"),
            ("GET", "/couch/links/_design/console/_view/search"),
            ("GET", "/couch/links/H83if"),
            ("PUT", "/couch/links/H83if"),
            ("GET", "/couch/links_clicks/_design/clicks/_view/by_link"),
            ("GET", "/couch/links_history/_all_docs"),
            ("POST", "/couch/links_history/_bulk_docs"),
            ("POST", "/couch/links/_bulk_docs"),
            ("POST", "/couch/links_clicks/_find"),
        ] {
            let Ok(Route::Couch { path: passed, body }) = route(method, path, Source::OwnPage, &s) else {
                panic!("{method} {path}")
            };
            assert_eq!(passed, path[6..], "{method} {path}");
            let expected = match path {
                "/couch/links/_bulk_docs" => Body::Links,
                "/couch/links_history/_bulk_docs" => Body::Record,
                "/couch/links_clicks/_find" => Body::CountsInterval,
                _ => Body::Any,
            };
            assert_eq!(body, expected, "{method} {path}");
        }
        assert_eq!(route("PUT", "/couch/links/H83if?new_edits=false", Source::OwnPage, &s).unwrap_err().status, 400);
        assert_eq!(
            route("POST", "/couch/links/_bulk_docs?new_edits=false", Source::OwnPage, &s).unwrap_err().status,
            400
        );
        assert!(route("GET", "/couch/links/H83if?revs=true", Source::OwnPage, &s).is_ok());
        for (method, path) in [
            ("GET", "/couch/_users/org.couchdb.user:editor"),
            ("GET", "/couch/_all_dbs"),
            ("PUT", "/couch/links/_design/links"),
            ("PUT", "/couch/links/_security"),
            ("DELETE", "/couch/links/H83if"),
            ("POST", "/couch/links_clicks/_bulk_docs"),
            ("GET", "/couch/other/H83if"),
            ("PUT", "/couch/links_clicks/x"),
            ("GET", "/couch/links_clicks/_all_docs"),
            ("GET", "/couch/links_clicks/_find"),
            ("POST", "/couch/links/_find"),
            ("POST", "/couch/links_history/_find"),
            ("PUT", "/couch/links_history/x"),
            ("GET", "/couch/links_history/_design/history/_view/gaps"),
            ("GET", "/couch/links_history/_design/history/_view/by_batch"),
            ("PUT", "/couch/links_history/~recorder"),
            ("PUT", "/couch/links_history/~batch:bulk-1:0001"),
            ("PUT", "/couch/links_history/H83if/0000000001-a"),
            ("PUT", "/couch/links/_local/couchlink"),
            ("GET", "/couch/links/H83if/attachment"),
            ("PUT", "/couch/links/%5Fdesign%2Flinks"),
            ("GET", "/couch/links/.."),
            ("GET", "/couch/links/../_users"),
            ("PUT", "/couch/links/toolong"),
        ] {
            assert_eq!(route(method, path, Source::OwnPage, &s).unwrap_err().status, 404, "{method} {path}");
        }
    }

    #[test]
    fn a_bulk_change_through_the_console_writes_links_and_nothing_else() {
        assert_eq!(Body::Links.check(br#"{"docs": [{"_id": "H83if", "url": "https://a.example/"}]}"#), Ok(()));
        let record = br#"{"docs": [{"_id": "~batch:bulk-1:0001", "type": "batch"}, {"_id": "~batch:bulk-1:0002"}]}"#;
        assert_eq!(Body::Record.check(record), Ok(()));
        assert_eq!(Body::Links.check(record).unwrap_err().status, 400);
        for body in [
            r#"{"docs": [{"_id": "~recorder", "seq": "9-x"}]}"#,
            r#"{"docs": [{"_id": "H83if/0000000001-a", "type": "change"}]}"#,
            r#"{"docs": [{"_id": "~batch:bulk 1:0001"}]}"#,
            r#"{"docs": [{"_id": "~batch:bulk-1:1"}]}"#,
            r#"{"new_edits": false, "docs": [{"_id": "~batch:bulk-1:0001", "_rev": "9-b0b"}]}"#,
        ] {
            assert_eq!(Body::Record.check(body.as_bytes()).unwrap_err().status, 400, "{body}");
        }
        for body in [
            r#"{"docs": [{"_id": "_local/couchlink", "identity": "x"}]}"#,
            r#"{"docs": [{"_id": "H83if", "url": "https://a.example/"}, {"_id": "_design/links"}]}"#,
            r#"{"new_edits": false, "docs": [{"_id": "H83if", "_rev": "1-ABCDEF", "url": "https://a.example/"}]}"#,
            r#"{"docs": [{"url": "https://a.example/"}]}"#,
            r#"{"docs": {}}"#,
            r#"[]"#,
            "not json",
        ] {
            assert_eq!(Body::Links.check(body.as_bytes()).unwrap_err().status, 400, "{body}");
        }
    }

    #[test]
    fn a_clicks_database_s_find_asks_the_counts_interval_and_nothing_else() {
        let s = sites();
        assert_eq!(Body::CountsInterval.check(COUNTS_INTERVAL_QUERY.as_bytes()), Ok(()));
        // The same query spaced otherwise is the same query.
        let spaced = r#"{ "limit": 10, "sort": [{"_id": "desc"}], "fields": ["seconds"],
                          "selector": {"type": "clicks", "_id": {"$gt": null}} }"#;
        assert_eq!(Body::CountsInterval.check(spaced.as_bytes()), Ok(()));
        for body in [
            r#"{"selector":{"_id":{"$gt":null},"type":"clicks"},"fields":["links"],"sort":[{"_id":"desc"}],"limit":10}"#,
            r#"{"selector":{"_id":{"$gt":null},"type":"clicks"},"sort":[{"_id":"desc"}],"limit":10}"#,
            r#"{"selector":{"_id":{"$gt":null},"type":"clicks"},"fields":["seconds"],"sort":[{"_id":"desc"}],"limit":100000}"#,
            r#"{"selector":{"proxy":{"$regex":"."}},"fields":["seconds"],"sort":[{"_id":"desc"}],"limit":10}"#,
            "{}",
            "not json",
        ] {
            assert_eq!(Body::CountsInterval.check(body.as_bytes()).unwrap_err().status, 400, "{body}");
        }
        // A write's rules: from the page itself, without a query.
        assert_eq!(route("POST", "/couch/links_clicks/_find", Source::Unsaid, &s).unwrap_err().status, 403);
        assert_eq!(route("POST", "/couch/links_clicks/_find", Source::Elsewhere, &s).unwrap_err().status, 403);
        assert_eq!(route("POST", "/couch/links_clicks/_find?x=1", Source::OwnPage, &s).unwrap_err().status, 400);
    }

    #[test]
    fn only_the_console_s_own_page_reaches_couchdb() {
        let s = sites();
        for source in [Source::Elsewhere, Source::Unsaid] {
            assert_eq!(route("PUT", "/couch/links/H83if", source, &s).unwrap_err().status, 403);
            assert_eq!(route("POST", "/couch/_session", source, &s).unwrap_err().status, 403);
        }
        assert_eq!(route("GET", "/couch/links/H83if", Source::Elsewhere, &s).unwrap_err().status, 403);
        assert!(route("GET", "/couch/links/H83if", Source::Unsaid, &s).is_ok());
        assert!(route("PUT", "/couch/links/H83if", Source::OwnPage, &s).is_ok());
        // The page's files and tags may be linked to from anywhere.
        assert!(route("GET", "/", Source::Elsewhere, &s).is_ok());
        assert!(route("GET", "/qr/links/H83if.svg", Source::Elsewhere, &s).is_ok());
    }

    #[test]
    fn tags_are_made_for_the_console_s_databases_only() {
        let s = sites();
        assert_eq!(
            route("GET", "/qr/links/H83if.svg", Source::OwnPage, &s),
            Ok(Route::Qr { site: 0, id: LinkId::parse("H83if").unwrap(), png: false, colours: Colours::PLAIN })
        );
        let coloured = route("GET", "/qr/links/H83if.svg?fg=%231a1a6e&bg=%23fff5d6", Source::OwnPage, &s);
        let Ok(Route::Qr { colours, .. }) = coloured else { panic!("{coloured:?}") };
        assert_eq!((colours.fg.to_string(), colours.bg.to_string()), ("#1a1a6e".into(), "#fff5d6".into()));
        let pale = route("GET", "/qr/links/H83if.svg?fg=%23777777&bg=%23999999", Source::OwnPage, &s).unwrap_err();
        assert!(pale.status == 400 && pale.reason.contains("symbol contrast of 13%"), "{pale:?}");
        assert_eq!(route("GET", "/qr/links/H83if.png?fg=red", Source::OwnPage, &s).unwrap_err().status, 400);
        // A sheet is made for the page itself, by POST; not for another site's page.
        assert_eq!(route("POST", "/qr/links/sheet.pdf", Source::OwnPage, &s), Ok(Route::Sheet { site: 0 }));
        assert_eq!(route("POST", "/qr/links/sheet.pdf", Source::Elsewhere, &s).unwrap_err().status, 403);
        assert_eq!(route("POST", "/qr/links/sheet.pdf", Source::Unsaid, &s).unwrap_err().status, 403);
        assert_eq!(route("POST", "/qr/other/sheet.pdf", Source::OwnPage, &s).unwrap_err().status, 404);
        assert!(matches!(route("GET", "/qr/links/H83if.png", Source::OwnPage, &s), Ok(Route::Qr { png: true, .. })));
        assert_eq!(route("GET", "/qr/other/H83if.svg", Source::OwnPage, &s).unwrap_err().status, 404);
        assert_eq!(route("GET", "/qr/links/H83if.gif", Source::OwnPage, &s).unwrap_err().status, 404);
    }
}
