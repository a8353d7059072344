//! The day's files under the writer: one per UTC day, opened by the day of a batch's first
//! line, opened again (the folder made again) when an operator's cleanup or a remounted volume
//! removed or replaced them while the proxy runs.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Whether a file can be made in `dir` (made and removed at once): at start, so that a log that
/// cannot be written fails the start with its reason rather than the first request's line.
pub(super) fn probe_writable(dir: &Path) -> io::Result<()> {
    let probe = dir.join(".couchlink-write-test");
    std::fs::write(&probe, b"")?;
    std::fs::remove_file(probe)
}

/// The files under the writer thread: one per UTC day, in a folder that an operator's cleanup
/// or a remounted volume may remove or replace while the proxy runs.
pub(super) struct DailyFiles {
    dir: PathBuf,
    /// The day (`yyyymmdd`) whose file is open, the file, and its path.
    open: Option<([u8; 8], File, PathBuf)>,
}

impl DailyFiles {
    /// The files in `dir`, none open yet.
    pub(super) fn new(dir: PathBuf) -> DailyFiles {
        DailyFiles { dir, open: None }
    }

    /// Writes what is left of a batch, `bytes` from `done` on, to its day's file (the day of its
    /// first line). `done` follows what is on disk, so that a retry after a partial write goes
    /// on from there and no line is written twice.
    pub(super) fn write_batch(&mut self, bytes: &[u8], done: &mut usize) -> io::Result<()> {
        self.write_rest(bytes, done)?;
        if !self.still_in_place() {
            // Removed or replaced while the batch was written: into a file nobody will read.
            // Written again where the log is now (at worst twice, once in the moved folder).
            *done = 0;
            self.write_rest(bytes, done)?;
        }
        Ok(())
    }

    fn write_rest(&mut self, bytes: &[u8], done: &mut usize) -> io::Result<()> {
        let day: [u8; 8] = bytes.get(..8).and_then(|d| d.try_into().ok()).unwrap_or(*b"00000000");
        let file = self.file_for(day)?;
        while *done < bytes.len() {
            match file.write(&bytes[*done..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => *done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn file_for(&mut self, day: [u8; 8]) -> io::Result<&mut File> {
        if self.open.as_ref().is_some_and(|(open_day, _, _)| *open_day != day) || !self.still_in_place() {
            self.open = None;
        }
        if self.open.is_none() {
            let d = std::str::from_utf8(&day).unwrap_or("00000000");
            let path = self.dir.join(format!("access.{}-{}-{}.log", &d[..4], &d[4..6], &d[6..8]));
            if !self.dir.is_dir() {
                std::fs::create_dir_all(&self.dir)?;
                tracing::warn!("the access log folder {} was gone: created it again", self.dir.display());
            }
            let file = OpenOptions::new().create(true).append(true).open(&path)?;
            self.open = Some((day, file, path));
        }
        Ok(&mut self.open.as_mut().expect("just opened").1)
    }

    /// Whether the open file (if any) is still the file at its path.
    fn still_in_place(&self) -> bool {
        let Some((_, file, path)) = &self.open else { return true };
        match (file.metadata(), std::fs::metadata(path)) {
            (Ok(open), Ok(there)) => (open.dev(), open.ino()) == (there.dev(), there.ino()),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(dir: &Path, day: &str) -> String {
        std::fs::read_to_string(dir.join(format!("access.{day}.log"))).unwrap()
    }

    #[test]
    fn a_batch_goes_to_its_first_lines_day_from_where_it_stopped() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("logs");
        let mut files = DailyFiles::new(dir.clone());
        let late = b"20261122235959.9 a\n20261122235959.9 b\n";
        // The first line went to disk before a failed write: only the rest is written now.
        let mut done = 19;
        files.write_batch(late, &mut done).unwrap();
        assert_eq!(done, late.len());
        let mut done = 0;
        files.write_batch(b"20261123000000.0 c\n", &mut done).unwrap();
        assert_eq!(read(&dir, "2026-11-22"), "20261122235959.9 b\n");
        assert_eq!(read(&dir, "2026-11-23"), "20261123000000.0 c\n");
    }

    #[test]
    fn a_file_moved_away_is_opened_again_where_the_log_is() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("logs");
        std::fs::create_dir(&dir).unwrap();
        let mut files = DailyFiles::new(dir.clone());
        files.write_batch(b"20261122101733.5 a\n", &mut 0).unwrap();
        // An operator's rotation, while the day's file is open.
        std::fs::rename(dir.join("access.2026-11-22.log"), dir.join("moved.log")).unwrap();
        files.write_batch(b"20261122101733.6 b\n", &mut 0).unwrap();
        assert_eq!(read(&dir, "2026-11-22"), "20261122101733.6 b\n");
        assert_eq!(std::fs::read_to_string(dir.join("moved.log")).unwrap(), "20261122101733.5 a\n");
    }
}
