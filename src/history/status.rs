//! What the recorder did and where it stands ([`RecorderStatus`]), for `/metrics` and `/healthz`:
//! written by the recorder as it goes, read by the admin listener at any time.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// What the recorder did, for `/metrics` and `/healthz`.
#[derive(Debug)]
pub struct RecorderStatus {
    pub(super) entries: AtomicU64,
    pub(super) gaps: AtomicU64,
    pub(super) missing: AtomicU64,
    pub(super) refused: AtomicU64,
    pub(super) resets: AtomicU64,
    pub(super) holding: AtomicBool,
    pub(super) standing_by: AtomicBool,
    /// History begins: every link recorded once, which is no change waiting.
    pub(super) first_pass: AtomicBool,
    pub(super) live: AtomicBool,
    /// Since when changes have waited (the last time the recorder was at the end of them).
    pub(super) caught_up_at: Mutex<Instant>,
    pub(super) failing: Mutex<Option<(String, Instant)>>,
    pub(super) reset: Mutex<Option<String>>,
    pub(super) behind: Duration,
}

impl RecorderStatus {
    pub(super) fn new(behind: Duration) -> Self {
        RecorderStatus {
            entries: AtomicU64::new(0),
            gaps: AtomicU64::new(0),
            missing: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            resets: AtomicU64::new(0),
            holding: AtomicBool::new(false),
            standing_by: AtomicBool::new(false),
            first_pass: AtomicBool::new(false),
            live: AtomicBool::new(false),
            caught_up_at: Mutex::new(Instant::now()),
            failing: Mutex::new(None),
            reset: Mutex::new(None),
            behind,
        }
    }

    /// Entries this recorder wrote (others' are not counted).
    pub fn entries(&self) -> u64 {
        self.entries.load(Relaxed)
    }

    /// Gap entries this recorder wrote, and the revisions they stand for.
    pub fn gaps(&self) -> (u64, u64) {
        (self.gaps.load(Relaxed), self.missing.load(Relaxed))
    }

    /// Entries CouchDB refused for good, recorded as gaps with its reason.
    pub fn refused(&self) -> u64 {
        self.refused.load(Relaxed)
    }

    /// Times the checkpoint named a place CouchDB could not resume from, and why the last time.
    pub fn resets(&self) -> (u64, Option<String>) {
        (self.resets.load(Relaxed), self.reset.lock().expect("recorder status lock").clone())
    }

    /// Whether this recorder is the one that records (the others stand by).
    pub fn is_recording(&self) -> bool {
        self.holding.load(Relaxed)
    }

    /// Whether it has caught up and follows the changes as they come.
    pub fn is_live(&self) -> bool {
        self.holding.load(Relaxed) && self.live.load(Relaxed)
    }

    /// Why the last round failed, while rounds fail.
    pub fn failing(&self) -> Option<String> {
        self.failing.lock().expect("recorder status lock").as_ref().map(|(said, _)| said.clone())
    }

    /// Whether changes have waited longer than they should: recording that fails, or the one
    /// that records not at the end of the changes for [`Timing::behind`].
    pub fn is_behind(&self) -> bool {
        let failing_long = self
            .failing
            .lock()
            .expect("recorder status lock")
            .as_ref()
            .is_some_and(|(_, since)| since.elapsed() >= self.behind);
        let waiting = self.holding.load(Relaxed)
            && !self.first_pass.load(Relaxed)
            && self.caught_up_at.lock().expect("recorder status lock").elapsed() >= self.behind;
        failing_long || waiting
    }

    /// One word for `/healthz`: `ok` (recording, at the end of the changes), `standby` (another
    /// proxy records), `starting` (after the cache's warm-up), `catching up`, `behind`,
    /// `waiting` (rounds fail).
    pub fn state(&self) -> &'static str {
        if self.failing().is_some() {
            "waiting"
        } else if self.is_behind() {
            "behind"
        } else if !self.holding.load(Relaxed) {
            if self.standing_by.load(Relaxed) {
                "standby"
            } else {
                "starting"
            }
        } else if self.live.load(Relaxed) {
            "ok"
        } else {
            "catching up"
        }
    }

    /// Whether the history is not as it should be: recording fails or lags, or CouchDB refused
    /// entries (recorded as gaps).
    pub fn is_degraded(&self) -> bool {
        self.failing().is_some() || self.is_behind() || self.refused() > 0
    }

    pub(super) fn caught_up(&self) {
        *self.caught_up_at.lock().expect("recorder status lock") = Instant::now();
    }
}
