//! `COUCHLINK_ENV_FILE`: settings read from a file at every start, so that an in-place upgrade
//! (which inherits the old process's environment) still picks up a changed setting.
//!
//! The file is systemd's `EnvironmentFile=` format, as far as couchlink's settings need it:
//! `KEY=VALUE` lines, `#` comments, blank lines, a value optionally in matching quotes. A
//! variable already in the environment wins over the file (as with dotenv files), except that
//! an upgrade's new process does not inherit the variables the old one took from the file: it
//! reads them afresh.

use std::path::PathBuf;
use std::sync::OnceLock;

/// The variable naming the file.
pub const VAR: &str = "COUCHLINK_ENV_FILE";

/// The variables this process took from the file (set once, at start).
static LOADED: OnceLock<Vec<String>> = OnceLock::new();

/// Why the file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum EnvFileError {
    /// Not readable.
    #[error("cannot read {VAR} {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why not.
        #[source]
        source: std::io::Error,
    },
    /// A line that is no setting.
    #[error("{VAR} {}, line {line}: {reason}", path.display())]
    Line {
        /// The file.
        path: PathBuf,
        /// Its number, from 1.
        line: usize,
        /// What is wrong.
        reason: &'static str,
    },
}

/// Sets every variable of the file named by `COUCHLINK_ENV_FILE` that the environment does not
/// have already. Call it first thing in `main`, before any thread starts.
pub fn load() -> Result<(), EnvFileError> {
    let Some(path) = std::env::var_os(VAR).map(PathBuf::from) else { return Ok(()) };
    let text = std::fs::read_to_string(&path).map_err(|source| EnvFileError::Read { path: path.clone(), source })?;
    let settings = parse(&text).map_err(|(line, reason)| EnvFileError::Line { path, line, reason })?;
    let mut loaded = Vec::new();
    for (key, value) in settings {
        if std::env::var_os(&key).is_none() {
            std::env::set_var(&key, value);
            loaded.push(key);
        }
    }
    let _ = LOADED.set(loaded);
    Ok(())
}

/// The variables [`load`] set from the file (none without one).
pub fn loaded() -> &'static [String] {
    LOADED.get().map_or(&[], Vec::as_slice)
}

/// The file's settings in order, or the first bad line's number and what is wrong with it.
pub fn parse(text: &str) -> Result<Vec<(String, String)>, (usize, &'static str)> {
    let mut settings = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else { return Err((n + 1, "not KEY=VALUE")) };
        let key = key.trim();
        let is_name = !key.is_empty()
            && !key.starts_with(|c: char| c.is_ascii_digit())
            && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !is_name {
            return Err((n + 1, "the name is not letters, digits and _"));
        }
        let value = value.trim();
        let value = match value.as_bytes() {
            [q @ (b'"' | b'\''), .., last] if last == q && value.len() >= 2 => &value[1..value.len() - 1],
            [b'"' | b'\'', ..] => return Err((n + 1, "a quote is not closed")),
            _ => value,
        };
        settings.push((key.to_owned(), value.to_owned()));
    }
    Ok(settings)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_systemd_reads_and_refuses_the_rest_with_the_line() {
        let text = "# settings\n\nCOUCHLINK_LISTEN=127.0.0.1:8080\n  COUCHLINK_PUBLIC_URL = \"https://0x1f.ie\"\n\
                    COUCHLINK_COUCHDB_PASSWORD='p=ss word'\nCOUCHLINK_TRUSTED_PROXIES=\n";
        let got = parse(text).unwrap();
        let want = [
            ("COUCHLINK_LISTEN", "127.0.0.1:8080"),
            ("COUCHLINK_PUBLIC_URL", "https://0x1f.ie"),
            ("COUCHLINK_COUCHDB_PASSWORD", "p=ss word"),
            ("COUCHLINK_TRUSTED_PROXIES", ""),
        ];
        assert_eq!(got, want.map(|(k, v)| (k.to_owned(), v.to_owned())));
        assert_eq!(parse("A=1\nno equals sign\n"), Err((2, "not KEY=VALUE")));
        assert_eq!(parse("1A=1\n"), Err((1, "the name is not letters, digits and _")));
        assert_eq!(parse("A=\"open\n"), Err((1, "a quote is not closed")));
    }
}
