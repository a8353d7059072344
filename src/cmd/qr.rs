//! `couchlink qr`: the smallest QR tag each short link allows, as PNG, SVG or text, with a logo
//! if asked; or a print sheet of them, as PDF or SVG.

use std::io::{IsTerminal, Write};
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use time::OffsetDateTime;

use super::CouchArgs;
use crate::couch::{CouchClient, CouchError, IdState};
use crate::domain::{Link, LinkId, PublicUrl, Status};
use crate::qr::colour::{Colour, ColourError, Colours};
use crate::qr::logo::{self, Logo, LogoError, Placed};
use crate::qr::render::{self, Look};
use crate::qr::sheet::{self, Cell, Layout, Paper, SheetError};
use crate::qr::{self as tags, Level, Tag, TooLong};

/// The widest picture drawn (a version 40 symbol at scale 100 is 18,500 pixels).
const MAX_PIXELS: u64 = 20_000;

/// Flags of `couchlink qr`.
#[derive(Debug, Clone, Args)]
#[command(mut_arg("couchdb_user", |a| a.help("A CouchDB account that may read links (only with --check)")))]
pub struct QrArgs {
    /// Link IDs (5 characters of A-Z, a-z, 0-9).
    #[arg(required_unless_present_any = ["ids_from", "all"])]
    pub ids: Vec<String>,
    /// Every link of the database, in ID order (read from CouchDB).
    #[arg(long, conflicts_with_all = ["ids", "ids_from"])]
    pub all: bool,
    /// A file of link IDs, one a line (blank lines and lines starting with # skipped), after
    /// those given as arguments: a print run's list.
    #[arg(long)]
    pub ids_from: Option<PathBuf>,
    /// The short links' base URL, e.g. http://0x1f.ie (the tag encodes {base}/{id}).
    #[arg(long, env = "COUCHLINK_PUBLIC_URL")]
    pub public_url: Option<PublicUrl>,
    /// Image format; `terminal` draws the tag with Unicode half blocks.
    #[arg(long, value_enum, default_value_t = Format::Png)]
    pub format: Format,
    /// Pixels per module (PNG and SVG).
    #[arg(long, default_value = "8")]
    pub scale: NonZeroU32,
    /// Light modules around the symbol (QR readers want 4).
    #[arg(long, default_value_t = 4)]
    pub border: u32,
    /// The modules' colour, CSS hex (PNG and SVG). Refused when it and --bg are too alike for
    /// phone readers: a symbol contrast under 40% (ISO/IEC 15415 grade C).
    #[arg(long, default_value = "#000000", value_parser = colour)]
    pub fg: Colour,
    /// The ground's colour, border included, CSS hex (PNG and SVG). Light modules on a dark
    /// ground are made with a warning: some readers fail on them.
    #[arg(long, default_value = "#ffffff", value_parser = colour)]
    pub bg: Colour,
    /// Error correction level; default: the highest that fits the smallest symbol (H with --logo).
    #[arg(long, value_enum, conflicts_with = "logo")]
    pub ec: Option<Level>,
    /// A logo in the middle of each tag, PNG or SVG: error correction H, and the symbol made as
    /// large as the logo needs (its hole may cover 15% of it). Every tag is read back before it
    /// is written.
    #[arg(long)]
    pub logo: Option<PathBuf>,
    /// The logo's width in pixels at --scale (it spans WIDTH/scale modules); default: its own
    /// width (an SVG's width attribute or viewBox).
    #[arg(long, requires = "logo", value_parser = clap::value_parser!(u32).range(1..=20_000))]
    pub logo_width: Option<u32>,
    /// Output file (one ID), or folder (one file per ID, named ID.png/.svg/.txt); default: stdout.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Every tag on a print sheet of this paper (--out FILE.pdf, or FILE.svg: FILE-1.svg,
    /// FILE-2.svg... a page each): a grid of tags at --size-mm (or for --distance-m), each with
    /// its short URL under it, with crop marks.
    #[arg(long, value_enum, requires = "out")]
    pub sheet: Option<Paper>,
    /// Print each link's title under its short URL on the sheet (read from CouchDB).
    #[arg(long, requires = "sheet")]
    pub titles: bool,
    /// A sheet's tag size, quiet zone included, in millimetres [default: 30].
    #[arg(long, requires = "sheet", conflicts_with = "distance_m", value_parser = clap::value_parser!(u32).range(10..=250))]
    pub size_mm: Option<u32>,
    /// The farthest a sheet's tags will be scanned from, in metres: the tag is a tenth of it
    /// (the usual 10:1 rule of thumb for QR codes; 0.3 m makes 30 mm tags).
    #[arg(long, requires = "sheet")]
    pub distance_m: Option<f32>,
    /// Warn when a link is missing, inactive or expired in CouchDB before its tag is made.
    #[arg(long)]
    pub check: bool,
    /// With --check, make such a link an error: no tag is written and the exit status is 1.
    #[arg(long, requires = "check")]
    pub strict: bool,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub couch: CouchArgs,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub on: super::DomainChoice,
}

/// `--fg`/`--bg` as a colour.
fn colour(text: &str) -> Result<Colour, String> {
    Colour::parse(text).map_err(|e| e.to_string())
}

/// The picture formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// PNG, 1 bit per pixel.
    Png,
    /// SVG, one path.
    Svg,
    /// Unicode half blocks, for a terminal.
    Terminal,
}

impl Format {
    fn extension(self) -> &'static str {
        match self {
            Format::Png => "png",
            Format::Svg => "svg",
            Format::Terminal => "txt",
        }
    }

    /// The tag drawn, with the logo if there is one (and then read back first).
    fn draw(self, tag: &Tag, look: Look, logo: Option<&Placed>) -> Result<Vec<u8>, LogoError> {
        Ok(match (self, logo) {
            (Format::Png, None) => render::png(&tag.code, look),
            (Format::Png, Some(logo)) => render::png_with_logo(&tag.code, look, logo, &tag.text)?,
            (Format::Svg, None) => render::svg(&tag.code, look, None).into_bytes(),
            (Format::Svg, Some(logo)) => render::svg_with_logo(&tag.code, look, logo, &tag.text)?.into_bytes(),
            (Format::Terminal, _) => render::terminal(&tag.code, look).into_bytes(),
        })
    }
}

/// Why no tag was made.
#[derive(Debug, thiserror::Error)]
pub enum QrError {
    /// An ID is not a link ID.
    #[error("{0:?} is not a link ID (5 characters of A-Z, a-z, 0-9)")]
    BadId(String),
    /// No base URL to encode.
    #[error("set COUCHLINK_PUBLIC_URL (or --public-url) to the base people reach, e.g. http://0x1f.ie")]
    NoPublicUrl,
    /// The URL fits no QR version.
    #[error("the short URL of {id} cannot be a QR code")]
    TooLong {
        /// The link.
        id: String,
        /// Why.
        #[source]
        source: TooLong,
    },
    /// Several tags, one output stream.
    #[error("{0} IDs make {0} files: name a folder with --out")]
    NeedsFolder(usize),
    /// `--strict`: some links would not redirect.
    #[error("{0} of the links would not redirect today (see above); no tag written (--strict)")]
    NotLive(usize),
    /// A binary picture would go to the terminal.
    #[error("a PNG would garble the terminal: write it with --out FILE, redirect stdout, or use --format terminal")]
    BinaryToTerminal,
    /// The picture asked for would be huge.
    #[error("a picture {pixels} pixels wide is more than {MAX_PIXELS}: lower --scale or --border")]
    TooLarge {
        /// Its width.
        pixels: u64,
    },
    /// The file of IDs could not be read.
    #[error("cannot read the IDs in {path}")]
    Read {
        /// Where.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A file or folder could not be written.
    #[error("cannot write {path}")]
    Write {
        /// Where.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// `--check` could not ask CouchDB.
    #[error("--check could not read the links")]
    Couch(#[source] CouchError),
    /// The async runtime could not start.
    #[error("cannot start the async runtime")]
    Runtime(#[source] std::io::Error),
    /// Colours readers could not tell apart, or colours for a terminal drawing.
    #[error(transparent)]
    Colours(#[from] ColourError),
    /// The sheet cannot be laid out.
    #[error(transparent)]
    Sheet(#[from] SheetError),
    /// A distance that makes no tag.
    #[error("--distance-m {0}: give the scanning distance in metres, 0.1 to 2.5 (tags of 10 to 250 mm)")]
    Distance(f32),
    /// Colours asked for the terminal's drawing.
    #[error("--fg and --bg are for PNG and SVG; the terminal draws with its own colours")]
    TerminalColours,
    /// A logo asked for the terminal's drawing.
    #[error("--logo is for PNG, SVG and sheets; the terminal draws no pictures")]
    TerminalLogo,
    /// The logo cannot be used, or a tag with it does not read back.
    #[error(transparent)]
    Logo(#[from] LogoError),
    /// A sheet's file is neither .pdf nor .svg.
    #[error("--sheet writes PDF or SVG: name the file FILE.pdf or FILE.svg, not {0}")]
    SheetFormat(String),
    /// `--all` found nothing.
    #[error("the database has no links to make tags of")]
    NoLinks,
}

impl QrArgs {
    /// Makes every tag (after `--check`, if asked), then writes them.
    pub fn execute(self) -> Result<(), QrError> {
        let mut named = self.ids.clone();
        if let Some(file) = &self.ids_from {
            let text = std::fs::read_to_string(file)
                .map_err(|source| QrError::Read { path: file.display().to_string(), source })?;
            named.extend(
                text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).map(str::to_owned),
            );
        }
        let mut ids = named
            .iter()
            .map(|id| LinkId::parse(id).map_err(|_| QrError::BadId(id.clone())))
            .collect::<Result<Vec<_>, _>>()?;
        let base = self.public_url.clone().ok_or(QrError::NoPublicUrl)?;
        let colours = Colours::new(self.fg, self.bg)?;
        if self.format == Format::Terminal && self.sheet.is_none() {
            if colours != Colours::PLAIN {
                return Err(QrError::TerminalColours);
            }
            if self.logo.is_some() {
                return Err(QrError::TerminalLogo);
            }
        }
        let logo = match &self.logo {
            Some(path) => Some(Placed::new(Logo::load(path)?, self.logo_width.map(|w| w as f32), self.scale.get())?),
            None => None,
        };
        let mut titles = Vec::new();
        if self.check || self.all || self.titles {
            let reader = CouchClient::new(&self.couch.clone().into()).map_err(QrError::Couch)?;
            let runtime = super::current_thread_runtime().map_err(QrError::Runtime)?;
            if self.all {
                (ids, titles) = runtime.block_on(every_link(&reader))?;
                if ids.is_empty() {
                    return Err(QrError::NoLinks);
                }
            } else if self.titles {
                titles = runtime.block_on(titles_of(&reader, &ids))?;
            }
            if self.check {
                let problems = runtime.block_on(check(&reader, &ids))?;
                if self.strict && problems > 0 {
                    return Err(QrError::NotLive(problems));
                }
            }
        }
        if colours.reversed() {
            tracing::warn!(
                "{} modules on a {} ground are light on dark: allowed by the QR standard, but some phone readers fail on them; try the print with several",
                colours.fg,
                colours.bg
            );
        }
        let look = Look { scale: self.scale.get(), border: self.border, colours };
        if let Some(paper) = self.sheet {
            titles.resize(ids.len(), None);
            return self.write_sheet(paper, &base, &ids, &titles, look, logo.as_ref());
        }
        let format = self.format;
        let drawn = ids
            .iter()
            .map(|id| {
                tag(&base, id, self.ec, logo.as_ref(), |tag| {
                    not_too_large(tag, look)?;
                    Ok(format.draw(tag, look, logo.as_ref())?)
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        for (id, (tag, _)) in ids.iter().zip(&drawn) {
            let size = tag.code.size();
            tracing::info!(
                "{id}: {} in a version {} symbol ({size}×{size} modules), error correction {:?} ({}% may be damaged)",
                tag.text,
                tag.version(),
                tag.level(),
                tag.level().tolerance()
            );
        }
        let pictures: Vec<Vec<u8>> = drawn.into_iter().map(|(_, picture)| picture).collect();
        self.write(&ids, &pictures)
    }

    /// The print sheet of every tag, to `--out` (written beside it and renamed when whole, so
    /// that a tag that cannot be made leaves no sheet).
    fn write_sheet(
        &self,
        paper: Paper,
        base: &PublicUrl,
        ids: &[LinkId],
        titles: &[Option<String>],
        look: Look,
        logo: Option<&Placed>,
    ) -> Result<(), QrError> {
        let tag_mm = match (self.size_mm, self.distance_m) {
            (Some(mm), _) => mm as f32,
            (None, Some(m)) if (0.1..=2.5).contains(&m) => m * 100.0,
            (None, Some(m)) => return Err(QrError::Distance(m)),
            (None, None) => 30.0,
        };
        let file = self.out.as_deref().expect("--sheet requires --out");
        let svg = match file.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase).as_deref() {
            Some("pdf") => false,
            Some("svg") => true,
            _ => return Err(QrError::SheetFormat(file.display().to_string())),
        };
        let layout = Layout { paper, tag_mm, border: look.border, colours: look.colours, titles: self.titles };
        let per_page = layout.per_page()?;
        let page_count = ids.len().div_ceil(per_page).max(1);
        let pages = sheet::pages(base, ids, titles, per_page, |id| {
            // With a logo, read back as the sheet draws it, at 4 pixels a module.
            let (tag, ()) = tag(base, id, self.ec, logo, |tag| match logo {
                Some(_) => {
                    let drawn = render::raster(&tag.code, Look { scale: 4, ..look }, logo);
                    Ok(logo::check(&drawn, look.colours.reversed(), &tag.text)?)
                }
                None => Ok(()),
            })?;
            Ok::<_, QrError>(tag.code)
        });
        let mut written = Vec::new();
        let result = if svg {
            self.write_svg_pages(&layout, file, page_count, pages, logo, &mut written)
        } else {
            let partial = partial_path(file);
            written.push(partial.clone());
            std::fs::File::create(&partial)
                .map_err(|source| write_error(&partial, source))
                .and_then(|f| {
                    layout
                        .write_pdf(
                            std::io::BufWriter::new(f),
                            page_count,
                            pages.map(|p| p.map_err(SheetWrite::Tag)),
                            logo,
                        )
                        .map_err(|e| match e {
                            SheetWrite::Io(source) => write_error(&partial, source),
                            SheetWrite::Tag(e) => e,
                        })
                })
                .and_then(|()| std::fs::rename(&partial, file).map_err(|source| write_error(file, source)))
        };
        if let Err(e) = result {
            for path in &written {
                let _ = std::fs::remove_file(path);
            }
            return Err(e);
        }
        tracing::info!(
            "{} tags of {tag_mm} mm on {page_count} {paper:?} page(s) of {per_page}: {}",
            ids.len(),
            file.display()
        );
        Ok(())
    }

    /// A sheet's pages as SVG files: `FILE.svg` for one page, `FILE-1.svg`... for more. Each is
    /// written beside its name and renamed when the whole sheet is made.
    fn write_svg_pages(
        &self,
        layout: &Layout,
        file: &Path,
        page_count: usize,
        pages: impl Iterator<Item = Result<Vec<Cell>, QrError>>,
        logo: Option<&Placed>,
        written: &mut Vec<PathBuf>,
    ) -> Result<(), QrError> {
        let name = |n: usize| match page_count {
            1 => file.to_path_buf(),
            _ => {
                let stem = file.file_stem().unwrap_or_default().to_string_lossy();
                file.with_file_name(format!("{stem}-{n}.svg"))
            }
        };
        for (n, cells) in pages.enumerate() {
            let partial = partial_path(&name(n + 1));
            written.push(partial.clone());
            std::fs::write(&partial, layout.svg_page(&cells?, logo)).map_err(|source| write_error(&partial, source))?;
        }
        for n in 1..=page_count {
            std::fs::rename(partial_path(&name(n)), name(n)).map_err(|source| write_error(&name(n), source))?;
        }
        Ok(())
    }

    fn write(&self, ids: &[LinkId], pictures: &[Vec<u8>]) -> Result<(), QrError> {
        let folder = match &self.out {
            Some(out) if ids.len() > 1 || out.is_dir() => Some(out.as_path()),
            _ => None,
        };
        if let Some(folder) = folder {
            std::fs::create_dir_all(folder).map_err(|source| write_error(folder, source))?;
            for (id, picture) in ids.iter().zip(pictures) {
                let path = folder.join(format!("{id}.{}", self.format.extension()));
                std::fs::write(&path, picture).map_err(|source| write_error(&path, source))?;
            }
            return Ok(());
        }
        if let Some(file) = &self.out {
            return std::fs::write(file, &pictures[0]).map_err(|source| write_error(file, source));
        }
        if ids.len() > 1 && self.format != Format::Terminal {
            return Err(QrError::NeedsFolder(ids.len()));
        }
        let mut stdout = std::io::stdout().lock();
        if self.format == Format::Png && stdout.is_terminal() {
            return Err(QrError::BinaryToTerminal);
        }
        for (id, picture) in ids.iter().zip(pictures) {
            if ids.len() > 1 {
                let _ = writeln!(stdout, "{id}");
            }
            stdout.write_all(picture).map_err(|source| write_error(Path::new("stdout"), source))?;
        }
        stdout.flush().map_err(|source| write_error(Path::new("stdout"), source))
    }
}

/// A link's tag and its drawing by `draw`: the smallest symbol (at `level` if given); with a
/// logo, the smallest at level H that can lose the logo's hole and whose drawing reads back.
fn tag<T>(
    base: &PublicUrl,
    id: &LinkId,
    level: Option<Level>,
    logo: Option<&Placed>,
    mut draw: impl FnMut(&Tag) -> Result<T, QrError>,
) -> Result<(Tag, T), QrError> {
    let text = tags::tag_text(base, id);
    let too_long = |source| QrError::TooLong { id: id.to_string(), source };
    match logo {
        None => {
            let tag = tags::encode(&text, level).map_err(too_long)?;
            draw(&tag).map(|d| (tag, d))
        }
        Some(logo) => {
            logo.drawn(&text, draw, |e| matches!(e, QrError::Logo(LogoError::Unreadable { .. }))).map_err(|e| match e {
                QrError::Logo(LogoError::TooLong(source)) => too_long(source),
                other => other,
            })
        }
    }
}

/// Refuses a picture wider than `MAX_PIXELS`.
fn not_too_large(tag: &Tag, look: Look) -> Result<(), QrError> {
    let pixels = (tag.code.size() as u64 + 2 * u64::from(look.border)) * u64::from(look.scale);
    if pixels > MAX_PIXELS {
        return Err(QrError::TooLarge { pixels });
    }
    Ok(())
}

/// Where a file is written before it is whole: `NAME.partial` beside it.
fn partial_path(file: &Path) -> PathBuf {
    let mut name = file.file_name().unwrap_or_default().to_os_string();
    name.push(".partial");
    file.with_file_name(name)
}

/// A PDF sheet's writing failed: the file, or a tag.
enum SheetWrite {
    Io(std::io::Error),
    Tag(QrError),
}

impl From<std::io::Error> for SheetWrite {
    fn from(e: std::io::Error) -> Self {
        SheetWrite::Io(e)
    }
}

/// Every link of the database in ID order, and each one's title: `_all_docs` a page at a time
/// (design documents and other IDs are not links).
async fn every_link(reader: &CouchClient) -> Result<(Vec<LinkId>, Vec<Option<String>>), QrError> {
    let (mut ids, mut titles) = (Vec::new(), Vec::new());
    reader
        .each_doc(1000, |id, doc| {
            if let Ok(id) = LinkId::parse(id) {
                ids.push(id);
                titles.push(title(doc));
            }
            Ok::<_, CouchError>(())
        })
        .await
        .map_err(QrError::Couch)?;
    Ok((ids, titles))
}

/// Each link's title (`None` for a link without one, or not in the database).
async fn titles_of(reader: &CouchClient, ids: &[LinkId]) -> Result<Vec<Option<String>>, QrError> {
    let mut titles = Vec::with_capacity(ids.len());
    for batch in ids.chunks(1000) {
        let keys: Vec<&str> = batch.iter().map(LinkId::as_str).collect();
        for state in reader.id_states(&keys).await.map_err(QrError::Couch)? {
            titles.push(match state {
                IdState::Taken(doc) => title(&doc),
                IdState::Free | IdState::Deleted => None,
            });
        }
    }
    Ok(titles)
}

fn title(doc: &serde_json::Value) -> Option<String> {
    doc.get("title").and_then(|t| t.as_str()).map(str::trim).filter(|t| !t.is_empty()).map(str::to_owned)
}

fn write_error(path: &Path, source: std::io::Error) -> QrError {
    QrError::Write { path: path.display().to_string(), source }
}

/// Warns about each link a tag would not lead anywhere today; how many.
async fn check(reader: &CouchClient, ids: &[LinkId]) -> Result<usize, QrError> {
    let mut problems = 0;
    let now = OffsetDateTime::now_utc();
    for id in ids {
        let (problem, fallback) = match reader.get_link(id).await.map_err(QrError::Couch)? {
            None => (Some("there is no such link in CouchDB".to_owned()), None),
            Some(doc) => {
                let fallback = Link::from_doc(doc.clone()).ok().and_then(|l| l.fallback().map(str::to_owned));
                let problem = match Status::of(doc, now) {
                    Status::Live => None,
                    Status::Inactive => Some("the link is inactive".to_owned()),
                    Status::NotStarted => Some("the link has not started yet (valid_from)".to_owned()),
                    Status::Expired => Some("the link has expired".to_owned()),
                    Status::Refused { field: "url", why } => Some(format!("its url cannot be served ({why})")),
                    Status::Refused { why, .. } => Some(format!("its document cannot be served ({why})")),
                };
                (problem, fallback)
            }
        };
        if let Some(problem) = problem {
            problems += 1;
            match fallback {
                Some(fallback) => tracing::warn!("{id}: {problem}; its tag leads to its fallback {fallback} meanwhile"),
                None => tracing::warn!("{id}: {problem}; its tag answers 404 until the document is fixed"),
            }
        }
    }
    Ok(problems)
}
