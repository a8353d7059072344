//! What is checked of CouchDB before serving (the database exists, the account may read it
//! and should not write it), and the password read again on SIGHUP.

use std::path::PathBuf;

use tokio::sync::watch;

use crate::couch::{CouchClient, CouchError};
use crate::errors::Causes;

use super::config::StartError;

/// Fails on a CouchDB that answers "no" (credentials, database); only warns when it does not
/// answer at all, since the proxy can serve (503s, then cached links) and catch up later.
pub(super) async fn check_database(couch: &CouchClient, editor_role: &str) -> Result<(), StartError> {
    let (url, user, db) = (couch.server_url().to_owned(), couch.user().to_owned(), couch.database().to_owned());
    match couch.database_info().await {
        Ok(Some(_)) => {
            warn_if_writer(couch, editor_role).await;
            Ok(())
        }
        Ok(None) => Err(StartError::NoDatabase { db, url }),
        Err(e) if e.is_unreachable() => {
            tracing::warn!("{}; serving anyway: 503 for links not known yet, until it answers", Causes(&e));
            Ok(())
        }
        Err(source @ CouchError::Refused { status: 401 | 403, .. }) => {
            Err(StartError::Refused { url, user, db, source: Box::new(source) })
        }
        Err(source) => Err(StartError::Couch { url, source: Box::new(source) }),
    }
}

/// The proxy needs only to read: running it as an account that can write links works, but
/// a leaked proxy credential should not be able to change where printed codes lead.
pub(super) async fn warn_if_writer(couch: &CouchClient, editor_role: &str) {
    if let Ok(session) = couch.session().await {
        let editor = [editor_role, crate::domain::SHARED_EDITOR].iter().any(|r| session.has_role(r));
        if session.has_role("_admin") || editor {
            tracing::warn!(
                "serving as {:?}, an account that can change links; use the read-only account `couchlink setup` creates",
                couch.user()
            );
        }
    }
}

/// On SIGHUP, reads the CouchDB password again from its file (`COUCHLINK_COUCHDB_PASSWORD_FILE`),
/// so that an operator rotates it without a restart; the `_changes` feed then tries at once.
pub(super) async fn reread_password(
    mut hangups: tokio::signal::unix::Signal,
    couch: CouchClient,
    file: Option<PathBuf>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            got = hangups.recv() => if got.is_none() { return },
            _ = stop.wait_for(|stop| *stop) => return,
        }
        let Some(file) = &file else {
            tracing::info!("SIGHUP: no password file to read again (COUCHLINK_COUCHDB_PASSWORD_FILE)");
            continue;
        };
        match crate::couch::read_secret_file(file) {
            Ok(password) => {
                couch.set_password(password);
                tracing::info!("SIGHUP: read the CouchDB password again from {}", file.display());
            }
            Err(e) => tracing::warn!("SIGHUP: {e}; the password read before is still used"),
        }
    }
}
