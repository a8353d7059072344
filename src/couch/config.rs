//! Where CouchDB is and who to be there, and the secret files a password may be read from.

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
    pub password_file: Option<std::path::PathBuf>,
    /// The links database.
    pub db: String,
}

/// Reads a secret from `path` (the `..._FILE` form of a secret, as containers and systemd's
/// credentials hand them over), less one trailing newline.
pub fn read_secret_file(path: &std::path::Path) -> Result<String, String> {
    let shown = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read the secret file {shown}: {e}"))?;
    let secret = text.strip_suffix('\n').map(|t| t.strip_suffix('\r').unwrap_or(t)).unwrap_or(&text).to_owned();
    if secret.is_empty() {
        return Err(format!("the secret file {shown} is empty"));
    }
    Ok(secret)
}
