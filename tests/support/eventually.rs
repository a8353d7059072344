//! Waiting, within a limit, for what a test expects to come true: the one polling loop of the
//! tests. A probe looks once and returns `Ok(value)` when what it waits for holds, or
//! `Err(what it saw)`; on timeout the test fails naming what it waited for and what it last
//! saw, there and then, rather than returning and failing later under another name.

use std::fmt::Debug;
use std::future::Future;
use std::time::{Duration, Instant};

/// The first pause between two looks; it doubles up to [`LONGEST_PAUSE`], so that what comes
/// at once is seen at once (and a time measured through a wait is fine-grained) while a long
/// wait does not keep a loaded machine busy asking.
const FIRST_PAUSE: Duration = Duration::from_millis(2);
const LONGEST_PAUSE: Duration = Duration::from_millis(50);

/// Runs `probe` until it returns `Ok`, and returns its value; panics, naming `what` and the
/// probe's last observation, once `limit` has passed without it.
///
/// ```ignore
/// let health = eventually("the feed is live", Duration::from_secs(5), || async {
///     let health: Value = app.admin_get("/healthz").await.json().await.unwrap();
///     if health["feed"]["state"] == "live" { Ok(health) } else { Err(health) }
/// })
/// .await;
/// ```
pub async fn eventually<T, Seen, Probe, Looked>(what: &str, limit: Duration, mut probe: Probe) -> T
where
    Seen: Debug,
    Probe: FnMut() -> Looked,
    Looked: Future<Output = Result<T, Seen>>,
{
    let started = Instant::now();
    let mut pause = FIRST_PAUSE;
    loop {
        match probe().await {
            Ok(value) => return value,
            // The last look ended past the limit: it is the observation reported.
            Err(seen) if started.elapsed() >= limit => {
                panic!("{what}: not so within {limit:?}; last saw {seen:?}")
            }
            Err(_) => {}
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(LONGEST_PAUSE);
    }
}

/// `Ok(())` when `holds`, else `Err(seen)`: a probe's answer for a condition on what it saw.
pub fn holds<Seen>(holds: bool, seen: Seen) -> Result<(), Seen> {
    if holds {
        Ok(())
    } else {
        Err(seen)
    }
}

/// An observation shown as it is (its lines unescaped) when [`eventually`] gives up: a page's
/// text, a log.
pub struct Text(pub String);

impl Debug for Text {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "\n{}", self.0)
    }
}
