//! The link lookup seam: every read of a link document by the redirect path goes through here.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Instant;

use crate::couch::CouchClient;
use crate::domain::{Link, LinkId};
use crate::metrics::Metrics;

/// CouchDB could not answer for a link the store does not know.
#[derive(Debug, Clone, thiserror::Error)]
#[error("CouchDB is unavailable: {0}")]
pub struct Unavailable(pub String);

/// Reads link documents.
pub struct LinkStore {
    couch: CouchClient,
    metrics: Arc<Metrics>,
}

impl LinkStore {
    /// A store reading through `couch`.
    pub fn new(couch: CouchClient, metrics: Arc<Metrics>) -> Self {
        LinkStore { couch, metrics }
    }

    /// The link stored under `id`; `Ok(None)` when there is none or its document is unusable.
    pub async fn get(&self, id: LinkId) -> Result<Option<Arc<Link>>, Unavailable> {
        self.metrics.cache_misses.fetch_add(1, Relaxed);
        let started = Instant::now();
        let result = self.couch.get_link(&id).await;
        self.metrics.couch_latency(started.elapsed());
        match result {
            Ok(None) => Ok(None),
            Ok(Some(doc)) => Ok(match Link::from_doc(doc) {
                Ok(link) => Some(Arc::new(link)),
                Err(reason) => {
                    tracing::warn!(%id, "link document cannot be served: {reason}");
                    None
                }
            }),
            Err(e) => {
                self.metrics.couch_errors.fetch_add(1, Relaxed);
                Err(Unavailable(e.to_string()))
            }
        }
    }
}
