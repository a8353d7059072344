//! `couchlink qr`: the smallest QR tag each short link allows, as PNG, SVG or text.

use std::io::{IsTerminal, Write};
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use time::OffsetDateTime;

use super::CouchArgs;
use crate::couch::{CouchClient, CouchError};
use crate::domain::{Link, LinkId, PublicUrl};
use crate::qr::colour::{Colour, ColourError, Colours};
use crate::qr::render::{self, Look};
use crate::qr::sheet::{Layout, Paper, SheetError};
use crate::qr::{self as tags, Level, Tag, TooLong};

/// The widest picture drawn (a version 40 symbol at scale 100 is 18,500 pixels).
const MAX_PIXELS: u64 = 20_000;

/// Flags of `couchlink qr`.
#[derive(Debug, Clone, Args)]
#[command(mut_arg("couchdb_user", |a| a.help("A CouchDB account that may read links (only with --check)")))]
pub struct QrArgs {
    /// Link IDs (5 characters of A-Z, a-z, 0-9).
    #[arg(required_unless_present = "ids_from")]
    pub ids: Vec<String>,
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
    /// Error correction level; default: the highest that fits the smallest symbol.
    #[arg(long, value_enum)]
    pub ec: Option<Level>,
    /// Output file (one ID), or folder (one file per ID, named ID.png/.svg/.txt); default: stdout.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Every tag on a print sheet of this paper, as one PDF (--out FILE.pdf): a grid of tags at
    /// --size-mm (or for --distance-m), each with its short URL under it, with crop marks.
    #[arg(long, value_enum, requires = "out")]
    pub sheet: Option<Paper>,
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

    fn draw(self, tag: &Tag, look: Look) -> Vec<u8> {
        match self {
            Format::Png => render::png(&tag.code, look),
            Format::Svg => render::svg(&tag.code, look).into_bytes(),
            Format::Terminal => render::terminal(&tag.code, look).into_bytes(),
        }
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
        let ids = named
            .iter()
            .map(|id| LinkId::parse(id).map_err(|_| QrError::BadId(id.clone())))
            .collect::<Result<Vec<_>, _>>()?;
        let base = self.public_url.clone().ok_or(QrError::NoPublicUrl)?;
        let tags = ids
            .iter()
            .map(|id| {
                tags::encode(&tags::tag_text(&base, id), self.ec)
                    .map_err(|source| QrError::TooLong { id: id.to_string(), source })
            })
            .collect::<Result<Vec<_>, _>>()?;
        if self.check {
            let reader = CouchClient::new(&self.couch.clone().into()).map_err(QrError::Couch)?;
            let runtime = super::current_thread_runtime().map_err(QrError::Runtime)?;
            let problems = runtime.block_on(check(&reader, &ids))?;
            if self.strict && problems > 0 {
                return Err(QrError::NotLive(problems));
            }
        }
        let colours = Colours::new(self.fg, self.bg)?;
        if self.format == Format::Terminal && colours != Colours::PLAIN {
            return Err(QrError::TerminalColours);
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
            return self.write_sheet(paper, &base, &ids, &tags, look);
        }
        let widest = tags.iter().map(|t| t.code.size() as u64).max().unwrap_or(0);
        let pixels = (widest + 2 * u64::from(look.border)) * u64::from(look.scale);
        if pixels > MAX_PIXELS {
            return Err(QrError::TooLarge { pixels });
        }
        for (id, tag) in ids.iter().zip(&tags) {
            let size = tag.code.size();
            tracing::info!(
                "{id}: {} in a version {} symbol ({size}×{size} modules), error correction {:?} ({}% may be damaged)",
                tag.text,
                tag.version(),
                tag.level(),
                tag.level().tolerance()
            );
        }
        self.write(&ids, &tags, look)
    }

    /// The print sheet of every tag, to `--out`.
    fn write_sheet(
        &self,
        paper: Paper,
        base: &PublicUrl,
        ids: &[LinkId],
        tags: &[Tag],
        look: Look,
    ) -> Result<(), QrError> {
        let tag_mm = match (self.size_mm, self.distance_m) {
            (Some(mm), _) => mm as f32,
            (None, Some(m)) if (0.1..=2.5).contains(&m) => m * 100.0,
            (None, Some(m)) => return Err(QrError::Distance(m)),
            (None, None) => 30.0,
        };
        let layout = Layout { paper, tag_mm, border: look.border, colours: look.colours };
        let (cols, rows) = layout.grid()?;
        let labelled: Vec<(String, &qrcodegen::QrCode)> =
            ids.iter().zip(tags).map(|(id, tag)| (base.short_url(id).to_string(), &tag.code)).collect();
        let pdf = layout.pdf(&labelled)?;
        let file = self.out.as_deref().expect("--sheet requires --out");
        std::fs::write(file, pdf).map_err(|source| write_error(file, source))?;
        tracing::info!(
            "{} tags of {tag_mm} mm on {} {paper:?} page(s) of {cols}×{rows}: {}",
            tags.len(),
            tags.len().div_ceil(cols * rows),
            file.display()
        );
        Ok(())
    }

    fn write(&self, ids: &[LinkId], tags: &[Tag], look: Look) -> Result<(), QrError> {
        let folder = match &self.out {
            Some(out) if ids.len() > 1 || out.is_dir() => Some(out.as_path()),
            _ => None,
        };
        if let Some(folder) = folder {
            std::fs::create_dir_all(folder).map_err(|source| write_error(folder, source))?;
            for (id, tag) in ids.iter().zip(tags) {
                let path = folder.join(format!("{id}.{}", self.format.extension()));
                std::fs::write(&path, self.format.draw(tag, look)).map_err(|source| write_error(&path, source))?;
            }
            return Ok(());
        }
        if let Some(file) = &self.out {
            return std::fs::write(file, self.format.draw(&tags[0], look)).map_err(|source| write_error(file, source));
        }
        if ids.len() > 1 && self.format != Format::Terminal {
            return Err(QrError::NeedsFolder(ids.len()));
        }
        let mut stdout = std::io::stdout().lock();
        if self.format == Format::Png && stdout.is_terminal() {
            return Err(QrError::BinaryToTerminal);
        }
        for (id, tag) in ids.iter().zip(tags) {
            if ids.len() > 1 {
                let _ = writeln!(stdout, "{id}");
            }
            stdout
                .write_all(&self.format.draw(tag, look))
                .map_err(|source| write_error(Path::new("stdout"), source))?;
        }
        stdout.flush().map_err(|source| write_error(Path::new("stdout"), source))
    }
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
            Some(doc) => match Link::from_doc(doc) {
                Err(e) => (Some(format!("its document cannot be served ({e})")), None),
                Ok(link) => {
                    let unservable = link.unservable_url().map(|e| format!("its url cannot be served ({e})"));
                    let problem = if unservable.is_some() {
                        unservable
                    } else if link.inactive {
                        Some("the link is inactive".to_owned())
                    } else if link.not_started(now) {
                        Some("the link has not started yet (valid_from)".to_owned())
                    } else if link.live_target(now).is_none() {
                        Some("the link has expired".to_owned())
                    } else {
                        None
                    };
                    (problem, link.fallback().map(str::to_owned))
                }
            },
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
