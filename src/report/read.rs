//! Finding the log files and reading them as lines: plain files in pieces that threads read
//! side by side, gzipped days streamed, each a block at a time, so that memory is bounded by
//! the block size whatever the log's.

use std::fs::File;
use std::io::{self, BufReader, Read, Seek, SeekFrom};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::PathBuf;

use flate2::bufread::MultiGzDecoder;

use super::line::Day;
use super::ReportError;

/// A plain file is split into pieces of about this size: big enough that a piece's overhead
/// vanishes, small enough that threads finish close together and a piece's buffer stays small.
pub const CHUNK: u64 = 8 << 20;
/// Files are read into a buffer of this size: lines are counted while it is still in the
/// core's cache.
const BLOCK: usize = 256 << 10;

/// One file of access log.
#[derive(Debug, Clone)]
pub struct Source {
    /// Where it is.
    pub path: PathBuf,
    /// Gzipped (from its first bytes, whatever its name).
    pub gzip: bool,
    /// Its size when the report started.
    pub size: u64,
    /// Its device and inode: a file replaced under its name is noticed.
    identity: (u64, u64),
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
    let meta = file.metadata().map_err(err)?;
    let (size, identity) = (meta.len(), identity(&meta));
    let mut magic = [0u8; 2];
    let gzip = file.read_exact_at(&mut magic, 0).is_ok() && magic == [0x1f, 0x8b];
    let day = path.file_name().and_then(|n| n.to_str()).and_then(log_day);
    Ok(Source { path, gzip, size, identity, day })
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

/// The pieces `sources` split into, plain files in pieces of `chunk` bytes, in file order.
pub fn pieces(sources: &[Source], chunk: u64) -> Vec<Piece> {
    let mut out = Vec::new();
    for (i, s) in sources.iter().enumerate() {
        if s.gzip {
            out.push(Piece { source: i, start: 0, end: s.size });
            continue;
        }
        let mut start = 0;
        while start < s.size {
            let end = (start + chunk).min(s.size);
            out.push(Piece { source: i, start, end });
            start = end;
        }
    }
    out
}

/// Calls `each(line, terminated)` for every line that starts in `piece` (without its `\n`;
/// `terminated` is false only for a last line the file ends inside), and returns how many
/// there were. `buf` is the caller's, reused from piece to piece.
///
/// Files are read a block at a time, not memory-mapped: a mapped file truncated while it is
/// read kills the reader with SIGBUS. couchlink only appends to its logs, and retention
/// deletes whole files, which a reader that opened one still reads; a file cut short or
/// replaced while it is read (logrotate's `copytruncate`, `> access.log`) is
/// [`ReportError::Changed`].
pub fn read_piece(
    source: &Source,
    piece: Piece,
    buf: &mut Vec<u8>,
    mut each: impl FnMut(&[u8], bool),
) -> Result<u64, ReportError> {
    let err = |e| ReportError::read(&source.path, e);
    let mut file = File::open(&source.path).map_err(err)?;
    if identity(&file.metadata().map_err(err)?) != source.identity {
        return Err(source.changed("replaced by another file".into()));
    }
    if source.gzip {
        let (lines, rest) = stream_lines(MultiGzDecoder::new(BufReader::new(file)), buf, &mut each).map_err(err)?;
        if rest > 0 {
            each(&buf[..rest], false);
        }
        return Ok(lines + u64::from(rest > 0));
    }
    let Some(first) = first_line(&mut file, piece, source)? else { return Ok(0) };
    let mut range = (&mut file).take(piece.end - first);
    let (mut lines, rest) = stream_lines(&mut range, buf, &mut each).map_err(err)?;
    if range.limit() > 0 {
        return Err(source.shrunk(&file));
    }
    if rest > 0 {
        // The last line goes on past the range, into the next piece, or past the size the
        // file had when the report started (a live log): read on to its newline or the end.
        buf.truncate(rest);
        let terminated = read_on(&mut file, buf, source)?;
        each(buf, terminated);
        lines += 1;
    }
    Ok(lines)
}

/// Where the first line that starts in `piece` starts, with `file` there: at the start of the
/// range if the byte before it ends a line, else after the newline that ends the line begun in
/// the previous piece (which reads it). `None` if no line starts in the range.
fn first_line(file: &mut File, piece: Piece, source: &Source) -> Result<Option<u64>, ReportError> {
    let err = |e| ReportError::read(&source.path, e);
    let mut offset = piece.start.saturating_sub(1);
    if piece.start > 0 {
        file.seek(SeekFrom::Start(offset)).map_err(err)?;
        let mut block = [0; READ_ON];
        loop {
            let n = file.read(&mut block).map_err(err)?;
            if n == 0 {
                return Err(source.shrunk(file));
            }
            if let Some(newline) = memchr::memchr(b'\n', &block[..n]) {
                offset += newline as u64 + 1;
                break;
            }
            offset += n as u64;
            if offset >= piece.end {
                return Ok(None);
            }
        }
    }
    if offset >= piece.end {
        return Ok(None);
    }
    file.seek(SeekFrom::Start(offset)).map_err(err)?;
    Ok(Some(offset))
}

/// Appends to `buf` the rest of the line it holds, from where `file` is to the next newline
/// (true) or the file's end (false).
fn read_on(file: &mut File, buf: &mut Vec<u8>, source: &Source) -> Result<bool, ReportError> {
    loop {
        let old = buf.len();
        buf.resize(old + READ_ON, 0);
        let n = file.read(&mut buf[old..]).map_err(|e| ReportError::read(&source.path, e))?;
        buf.truncate(old + n);
        if n == 0 {
            let at = file.stream_position().map_err(|e| ReportError::read(&source.path, e))?;
            return if at < source.size { Err(source.shrunk(file)) } else { Ok(false) };
        }
        if let Some(newline) = memchr::memchr(b'\n', &buf[old..]) {
            buf.truncate(old + newline);
            return Ok(true);
        }
    }
}

/// How much more is read at a time of a line that began in an earlier piece or goes on past
/// its own.
const READ_ON: usize = 4096;

/// Calls `each` on the lines of `input` as they are read, a block at a time into `buf`, and
/// returns how many there were, with how many bytes after the last newline were left at the
/// start of `buf`.
fn stream_lines(
    mut input: impl Read,
    buf: &mut Vec<u8>,
    each: &mut impl FnMut(&[u8], bool),
) -> io::Result<(u64, usize)> {
    buf.resize(buf.len().max(BLOCK), 0);
    let (mut filled, mut lines) = (0, 0);
    loop {
        if filled == buf.len() {
            // A line longer than the buffer: make room for it.
            buf.resize(buf.len() * 2, 0);
        }
        let n = match input.read(&mut buf[filled..]) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            read => read?,
        };
        if n == 0 {
            return Ok((lines, filled));
        }
        filled += n;
        let mut start = 0;
        for newline in memchr::memchr_iter(b'\n', &buf[..filled]) {
            each(&buf[start..newline], true);
            lines += 1;
            start = newline + 1;
        }
        buf.copy_within(start..filled, 0);
        filled -= start;
    }
}

impl Source {
    fn changed(&self, how: String) -> ReportError {
        ReportError::Changed { path: self.path.clone(), how }
    }

    fn shrunk(&self, file: &File) -> ReportError {
        let now = file.metadata().map_or("fewer".to_owned(), |m| m.len().to_string());
        self.changed(format!("cut to {now} bytes from the {} it had when the report started", self.size))
    }
}

/// Which file an open file is, whatever its name: its device and inode.
fn identity(meta: &std::fs::Metadata) -> (u64, u64) {
    (meta.dev(), meta.ino())
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
        let lines = lines_of(&source, &pieces(std::slice::from_ref(&source), CHUNK));
        assert_eq!(lines, vec![("one".into(), true), ("two".into(), true)]);
        std::fs::write(&path, "one").unwrap();
        let err = read_piece(&source, pieces(std::slice::from_ref(&source), CHUNK)[0], &mut Vec::new(), |_, _| ())
            .unwrap_err();
        let shown = crate::errors::Causes(&err).to_string();
        assert!(
            shown.contains("access.2026-11-22.log changed") && shown.contains("cut to 3 bytes from the 6"),
            "{shown}"
        );
    }

    #[test]
    fn a_file_truncated_or_replaced_while_it_is_read_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("access.2026-11-22.log");
        let text: String = (0..200).map(|i| format!("line {i}\n")).collect();
        std::fs::write(&path, &text).unwrap();
        let source = source(path.clone()).unwrap();
        let pieces = pieces(std::slice::from_ref(&source), 100);
        assert!(pieces.len() > 10);
        // Cut (as `> access.log` does) while the first piece's lines are being counted.
        let (mut read, mut failed) = (0, None);
        for piece in &pieces {
            let result = read_piece(&source, *piece, &mut Vec::new(), |_, _| {
                read += 1;
                if read == 1 {
                    std::fs::File::create(&path).unwrap();
                }
            });
            if let Err(e) = result {
                failed = Some(crate::errors::Causes(&e).to_string());
                break;
            }
        }
        let shown = failed.expect("the cut is noticed");
        assert!(shown.contains(&format!("{} changed", path.display())) && shown.contains("cut to 0 bytes"), "{shown}");
        assert!(read < 200, "{read}");
        // Replaced under its name: another file, even a longer one, is not read as if it were it.
        std::fs::write(dir.path().join("new"), text.repeat(2)).unwrap();
        let source = super::source(path.clone()).unwrap();
        std::fs::rename(dir.path().join("new"), &path).unwrap();
        let err = read_piece(&source, pieces[0], &mut Vec::new(), |_, _| ()).unwrap_err();
        assert!(err.to_string().contains("replaced by another file"), "{err}");
    }

    #[test]
    fn gzip_is_recognised_by_content_and_streamed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("yesterday");
        let mut gz = flate2::write::GzEncoder::new(File::create(&path).unwrap(), flate2::Compression::fast());
        let long = "x".repeat(3 * BLOCK);
        write!(gz, "one\n{long}\nthree\n").unwrap();
        gz.finish().unwrap();
        let source = source(path).unwrap();
        assert!(source.gzip);
        let lines = lines_of(&source, &pieces(std::slice::from_ref(&source), CHUNK));
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
