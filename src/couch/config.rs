//! Where CouchDB is and who to be there, and the secret files a password may be read from.

use std::path::{Path, PathBuf};

/// Where CouchDB is and who to be there.
#[derive(Debug, Clone)]
pub struct CouchConfig {
    /// Server URL, e.g. `http://127.0.0.1:5984`.
    pub url: String,
    /// Basic-auth user, if any.
    pub user: Option<String>,
    /// Basic-auth password.
    pub password: Option<String>,
    /// The file the password was read from, read again on SIGHUP by `serve`.
    pub password_file: Option<PathBuf>,
    /// The links database.
    pub db: String,
}

/// Reads a secret from `path` (the `..._FILE` form of a secret, as containers and systemd's
/// credentials hand them over), less one trailing newline.
pub fn read_secret_file(path: &Path) -> Result<String, SecretError> {
    let text =
        std::fs::read_to_string(path).map_err(|error| SecretError::Unreadable { path: path.to_owned(), error })?;
    let secret = text.strip_suffix('\n').map(|t| t.strip_suffix('\r').unwrap_or(t)).unwrap_or(&text).to_owned();
    if secret.is_empty() {
        return Err(SecretError::Empty { path: path.to_owned() });
    }
    Ok(secret)
}

/// Why a secret file gives no secret.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    /// It cannot be read (missing, not allowed, not UTF-8). The reason is part of the message
    /// rather than a source: clap's usage error and the SIGHUP warning show the message alone,
    /// and an operator needs the reason there.
    #[error("cannot read the secret file {}: {error}", path.display())]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// What reading it said.
        error: std::io::Error,
    },
    /// It holds nothing but a newline.
    #[error("the secret file {} is empty", path.display())]
    Empty {
        /// The file.
        path: PathBuf,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_loses_one_line_ending_and_an_empty_or_missing_file_says_which() {
        let dir = std::env::temp_dir().join(format!("couchlink-secret-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("password");
        std::fs::write(&file, "s3cret\r\n").unwrap();
        assert_eq!(read_secret_file(&file).unwrap(), "s3cret");
        std::fs::write(&file, "two\n\n").unwrap();
        assert_eq!(read_secret_file(&file).unwrap(), "two\n", "only one line ending goes");
        std::fs::write(&file, "\n").unwrap();
        let empty = read_secret_file(&file).unwrap_err();
        assert!(matches!(empty, SecretError::Empty { .. }));
        assert_eq!(empty.to_string(), format!("the secret file {} is empty", file.display()));
        let missing = read_secret_file(&dir.join("absent")).unwrap_err();
        assert!(
            matches!(&missing, SecretError::Unreadable { error, .. } if error.kind() == std::io::ErrorKind::NotFound)
        );
        assert!(missing
            .to_string()
            .starts_with(&format!("cannot read the secret file {}: ", dir.join("absent").display())));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
