//! The console in a real browser (headless Chromium over WebDriver) on Apache CouchDB 3.5,
//! with `couchlink serve` on the same database: an editor logs in, creates a link, follows it
//! through the proxy, re-points it and sees the proxy follow within a second, is refused with
//! CouchDB's reason, searches, sees stored scripts stay text, and logs out; a reader gets no edit
//! control and a forged write from the page is refused by CouchDB; a write from another origin
//! is refused by the console; a database the account may not read is not offered. The proxy
//! counts every second while the console keeps its own default (a minute): an open page shows
//! new counts within the proxy's interval and 2 s, and a limited link's visits as the proxy
//! admitted them.
//!
//! Not part of the plain `cargo test` (it needs Chromium, chromedriver and a CouchDB 3: the one
//! `COUCHLINK_TEST_COUCHDB_URL` names, or else a node of its own started with the `couchdb.sh`
//! that `COUCHLINK_COUCHDB_SH` names); `.ci/run` runs it with `cargo test --test console`.
//! Screenshots of every step go to `target/console-screenshots/` (docs/console.md shows them).
//!
//! One test in steps over one fixture ([`fixture::Fixture`]: one CouchDB, proxy, console and
//! browser session): each step a module of [`steps`], run in the order below, each starting
//! where the one before left the page. A failure names its step.

#[path = "../support/mod.rs"]
mod support;

mod fixture;
mod page;
mod steps;

use std::time::Duration;

use fixture::Fixture;

/// The freshness couchlink promises an edit.
pub const FRESH: Duration = Duration::from_secs(1);

/// The proxy's live counts interval here (`COUCHLINK_CLICKS_INTERVAL_SECS`); the console keeps
/// its own default.
pub const PROXY_INTERVAL: &str = "1";

/// How soon an open page shows new counts: the proxies' interval and 2 s, and 300 ms for this
/// test's own polling and the browser's rendering.
pub const LIVE: Duration = Duration::from_millis(1000 + 2000 + 300);

/// A browser's User-Agent: its redirects use a limited link's visits (a bot's do not).
pub const DESKTOP: &str =
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36";

/// Runs `step` of the test, saying which it is (in the output, and when it fails).
macro_rules! step {
    ($fixture:expr, $step:ident) => {{
        let name = stringify!($step);
        eprintln!("console test: step {name}");
        let started = std::time::Instant::now();
        steps::$step::run($fixture).await;
        eprintln!("console test: step {name} passed in {:.1} s", started.elapsed().as_secs_f64());
    }};
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_editor_and_a_reader_use_the_console_and_couchdb_decides_every_write() {
    let mut f = Fixture::start().await;
    step!(&mut f, log_in);
    step!(&mut f, new_link);
    step!(&mut f, link_page);
    step!(&mut f, rules);
    step!(&mut f, history);
    step!(&mut f, password_and_limit);
    step!(&mut f, clicks);
    step!(&mut f, visit_limit);
    step!(&mut f, stored_markup);
    step!(&mut f, search);
    step!(&mut f, print_and_bulk);
    step!(&mut f, phone);
    step!(&mut f, strangers);
    step!(&mut f, reader);
}
