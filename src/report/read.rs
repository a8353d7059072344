//! Finding the log files and reading them as lines: plain files in chunks that threads read
//! side by side, gzipped days streamed, memory bounded by the chunk size whatever the log's.

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use flate2::bufread::MultiGzDecoder;

use super::line::Day;
use super::ReportError;

/// A plain file is split into pieces of about this size: big enough that a piece's overhead
/// vanishes, small enough that threads finish close together.
const CHUNK: u64 = 8 << 20;
/// A gzipped file is inflated into a buffer of this size, line by line.
const INFLATE_BUFFER: usize = 1 << 20;

/// One file of access log.
#[derive(Debug, Clone)]
pub struct Source {
    /// Where it is.
    pub path: PathBuf,
    /// Gzipped (from its first bytes, whatever its name).
    pub gzip: bool,
    /// Its size when the report started.
    pub size: u64,
    /// The UTC day its name says it holds (`access.YYYY-MM-DD.log[.gz]`); couchlink writes each
    /// line to its own day's file, so a day outside `--since`/`--until` can be skipped unread.
    pub day: Option<Day>,
}

/// What `paths` name: files as given, directories as their `access.*.log` and
/// `access.*.log.gz` files, by name. A day found both plain and gzipped (retention compresses,
/// then deletes the plain file) is read once, from the plain file.
pub fn sources(paths: &[PathBuf]) -> Result<Vec<Source>, ReportError> {
    let mut found = Vec::new();
    for path in paths {
        let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => ReportError::Missing(std::path::absolute(path).unwrap_or(path.clone())),
            _ => ReportError::read(path, e),
        })?;
        if !meta.is_dir() {
            found.push(source(path.clone())?);
            continue;
        }
        let mut names: Vec<String> = std::fs::read_dir(path)
            .map_err(|e| ReportError::read(path, e))?
            .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
            .filter(|name| log_day(name).is_some())
            .collect();
        names.sort();
        let before = found.len();
        for name in &names {
            let plain_too =
                name.strip_suffix(".gz").is_some_and(|plain| names.binary_search_by(|n| n.as_str().cmp(plain)).is_ok());
            if !plain_too {
                found.push(source(path.join(name))?);
            }
        }
        if found.len() == before {
            return Err(ReportError::NoLogs(path.clone()));
        }
    }
    Ok(found)
}

fn source(path: PathBuf) -> Result<Source, ReportError> {
    let err = |e| ReportError::read(&path, e);
    let file = File::open(&path).map_err(err)?;
    let size = file.metadata().map_err(err)?.len();
    let mut magic = [0u8; 2];
    let gzip = file.read_exact_at(&mut magic, 0).is_ok() && magic == [0x1f, 0x8b];
    let day = path.file_name().and_then(|n| n.to_str()).and_then(log_day);
    Ok(Source { path, gzip, size, day })
}

/// The day in an access log file's name: `access.YYYY-MM-DD.log` or `.log.gz`.
fn log_day(name: &str) -> Option<Day> {
    let rest = name.strip_prefix("access.")?;
    let day = rest.strip_suffix(".log").or_else(|| rest.strip_suffix(".log.gz"))?;
    Day::parse_iso(day)
}

/// A unit of reading work: a byte range of a plain file (its lines that start in the range),
/// or a whole gzipped file.
#[derive(Debug, Clone, Copy)]
pub struct Piece {
    /// Index into the sources.
    pub source: usize,
    /// First byte of the range.
    pub start: u64,
    /// End of the range (exclusive); a line that starts before it is read to its end.
    pub end: u64,
}

/// The pieces `sources` split into, in file order.
pub fn pieces(sources: &[Source]) -> Vec<Piece> {
    let mut out = Vec::new();
    for (i, s) in sources.iter().enumerate() {
        if s.gzip {
            out.push(Piece { source: i, start: 0, end: s.size });
            continue;
        }
        let mut start = 0;
        while start < s.size {
            let end = (start + CHUNK).min(s.size);
            out.push(Piece { source: i, start, end });
            start = end;
        }
    }
    out
}

/// Calls `each(line, terminated)` for every line of `piece` (without its `\n`; `terminated` is
/// false only for a last line the file ends inside), and returns how many there were. `buf` is
/// the caller's, reused from piece to piece, for gzipped files and for a line still being
/// written when the report started.
///
/// A plain file is memory-mapped rather than read: copying it out of the page cache was a
/// seventh of a report's time. The mapping covers the size the file had when the
/// report started; couchlink only ever appends to a log, and deleting a file (retention)
/// leaves its mapping readable. Truncating a file while it is read makes the kernel end the
/// report with SIGBUS, as it does for any reader that maps files; a file found shorter than
/// it was is a clear error instead.
pub fn read_piece(
    source: &Source,
    piece: Piece,
    buf: &mut Vec<u8>,
    mut each: impl FnMut(&[u8], bool),
) -> Result<u64, ReportError> {
    let err = |e| ReportError::read(&source.path, e);
    let file = File::open(&source.path).map_err(err)?;
    if source.gzip {
        return inflate(file, buf, &mut each).map_err(err);
    }
    if file.metadata().map_err(err)?.len() < source.size {
        return Err(err(io::Error::other("the file shrank while it was read")));
    }
    // Map from the byte before the range: if it is not a newline, the first line started in
    // the previous piece, which reads it. Mappings start at a page.
    let from = piece.start.saturating_sub(1);
    let page = from & !(PAGE - 1);
    // SAFETY: the mapping is only read, and only while `file` is open; couchlink appends to
    // its logs and never truncates them (see above).
    #[allow(unsafe_code)]
    let map = unsafe { memmap2::MmapOptions::new().offset(page).len((source.size - page) as usize).map(&file) }
        .map_err(err)?;
    let _ = map.advise(memmap2::Advice::Sequential);
    let bytes = &map[(from - page) as usize..];
    let mut at = 0;
    if piece.start > 0 {
        at = match memchr::memchr(b'\n', bytes) {
            Some(newline) => newline + 1,
            None => return Ok(0),
        };
    }
    // Lines that start in the range; the last one may go on past it.
    let end = (piece.end - from) as usize;
    if at >= end {
        return Ok(0);
    }
    let stop = match memchr::memchr(b'\n', &bytes[end - 1..]) {
        Some(newline) => end + newline,
        None => bytes.len(),
    };
    let (mut lines, used) = split_lines(&bytes[at..stop], false, &mut each);
    let rest = &bytes[at + used..stop];
    if !rest.is_empty() {
        // The file ended inside a line when the report started: it may have been finished
        // since (a live log), so read on to its newline or the file's present end.
        buf.clear();
        buf.extend_from_slice(rest);
        let mut offset = source.size;
        let mut more = [0u8; 4096];
        let terminated = loop {
            let n = file.read_at(&mut more, offset).map_err(err)?;
            if n == 0 {
                break false;
            }
            offset += n as u64;
            if let Some(newline) = memchr::memchr(b'\n', &more[..n]) {
                buf.extend_from_slice(&more[..newline]);
                break true;
            }
            buf.extend_from_slice(&more[..n]);
        };
        each(buf, terminated);
        lines += 1;
    }
    Ok(lines)
}

/// How far ahead of the line being counted its file's bytes are asked for.
const READ_AHEAD: usize = 4096;

/// Memory maps start at multiples of this (x86-64's and arm64's smallest page).
const PAGE: u64 = 4096;

/// Streams a gzipped file (several members, as `cat a.gz b.gz` makes, included).
fn inflate(file: File, buf: &mut Vec<u8>, each: &mut impl FnMut(&[u8], bool)) -> io::Result<u64> {
    let mut gz = MultiGzDecoder::new(BufReader::with_capacity(256 << 10, file));
    buf.clear();
    buf.resize(INFLATE_BUFFER, 0);
    let (mut filled, mut lines) = (0, 0);
    loop {
        if filled == buf.len() {
            // One line longer than the buffer: make room for it.
            buf.resize(buf.len() * 2, 0);
        }
        let n = gz.read(&mut buf[filled..])?;
        filled += n;
        let (count, used) = split_lines(&buf[..filled], n == 0, each);
        lines += count;
        if n == 0 {
            return Ok(lines);
        }
        buf.copy_within(used..filled, 0);
        filled -= used;
    }
}

/// Calls `each` on the complete lines of `bytes`, and on a last unterminated one when `at_end`;
/// returns how many lines, and how many bytes they took.
fn split_lines(bytes: &[u8], at_end: bool, each: &mut impl FnMut(&[u8], bool)) -> (u64, usize) {
    let (mut lines, mut start, mut asked) = (0, 0, 0);
    for newline in memchr::memchr_iter(b'\n', bytes) {
        // The bytes a page ahead are asked for while this line is counted: the processor's own
        // prefetcher stops at every 4 KiB page of a mapped file.
        while asked < (newline + READ_AHEAD).min(bytes.len()) {
            super::prefetch(&bytes[asked]);
            asked += 64;
        }
        each(&bytes[start..newline], true);
        lines += 1;
        start = newline + 1;
    }
    if at_end && start < bytes.len() {
        each(&bytes[start..], false);
        return (lines + 1, bytes.len());
    }
    (lines, start)
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn lines_of(source: &Source, pieces: &[Piece]) -> Vec<(String, bool)> {
        let mut out = Vec::new();
        for p in pieces {
            read_piece(source, *p, &mut Vec::new(), |l, t| out.push((String::from_utf8(l.to_vec()).unwrap(), t)))
                .unwrap();
        }
        out
    }

    #[test]
    fn pieces_give_every_line_once_wherever_they_cut() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("access.2026-11-22.log");
        let text = "a\nbb\n\nccc\ndddd";
        std::fs::write(&path, text).unwrap();
        let source = source(path).unwrap();
        let expected = vec![
            ("a".into(), true),
            ("bb".into(), true),
            ("".into(), true),
            ("ccc".into(), true),
            ("dddd".into(), false),
        ];
        // Every way of cutting the file in two or three pieces.
        for a in 0..=text.len() as u64 {
            for b in a..=text.len() as u64 {
                let cuts = [0, a, b, text.len() as u64];
                let pieces: Vec<Piece> = cuts
                    .windows(2)
                    .filter(|w| w[0] < w[1])
                    .map(|w| Piece { source: 0, start: w[0], end: w[1] })
                    .collect();
                assert_eq!(lines_of(&source, &pieces), expected, "cut at {a} and {b}");
            }
        }
        assert_eq!(source.day, Day::parse_iso("2026-11-22"));
    }

    #[test]
    fn a_line_being_written_when_the_report_started_is_read_to_its_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("access.2026-11-22.log");
        std::fs::write(&path, "one\ntw").unwrap();
        let source = source(path.clone()).unwrap();
        std::fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(b"o\nthree\n").unwrap();
        let lines = lines_of(&source, &pieces(std::slice::from_ref(&source)));
        assert_eq!(lines, vec![("one".into(), true), ("two".into(), true)]);
        std::fs::write(&path, "one").unwrap();
        let err =
            read_piece(&source, pieces(std::slice::from_ref(&source))[0], &mut Vec::new(), |_, _| ()).unwrap_err();
        let shown = crate::errors::Causes(&err).to_string();
        assert!(shown.contains("cannot read") && shown.contains("shrank"), "{shown}");
    }

    #[test]
    fn gzip_is_recognised_by_content_and_streamed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("yesterday");
        let mut gz = flate2::write::GzEncoder::new(File::create(&path).unwrap(), flate2::Compression::fast());
        let long = "x".repeat(3 * INFLATE_BUFFER);
        write!(gz, "one\n{long}\nthree\n").unwrap();
        gz.finish().unwrap();
        let source = source(path).unwrap();
        assert!(source.gzip);
        let lines = lines_of(&source, &pieces(std::slice::from_ref(&source)));
        assert_eq!(lines, vec![("one".into(), true), (long, true), ("three".into(), true)]);
    }

    #[test]
    fn a_directory_gives_its_access_logs_and_a_day_once() {
        let dir = tempfile::tempdir().unwrap();
        for name in [
            "access.2026-11-21.log.gz",
            "access.2026-11-22.log.gz",
            "access.2026-11-22.log",
            "other.log",
            "access.2026-11-20.log.gz.tmp",
        ] {
            std::fs::write(dir.path().join(name), "").unwrap();
        }
        let names: Vec<String> = sources(&[dir.path().to_owned()])
            .unwrap()
            .iter()
            .map(|s| s.path.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["access.2026-11-21.log.gz", "access.2026-11-22.log"]);
        let empty = tempfile::tempdir().unwrap();
        assert!(matches!(sources(&[empty.path().to_owned()]), Err(ReportError::NoLogs(_))));
        assert!(matches!(sources(&[empty.path().join("missing")]), Err(ReportError::Missing(_))));
    }
}
