//! Logins through the console, kept below CouchDB's lockout (docs/console.md, "Logins").
//!
//! CouchDB 3 locks an account out for the address failed logins come from
//! (`[chttpd_auth_lockout]`: at 5 failures, until 5 minutes after the first). Every login the
//! console passes on comes from the console's own address, so without a bound a stranger's few
//! wrong passwords there would lock the account for every person and process on that host: the
//! proxies, in a one-host install, and every editor using the console. So the console passes on
//! at most [`FAILURES`] failing logins per account, and per visitor address, in any [`WINDOW`]
//! (CouchDB's and a minute), each reserved before it is passed on so that logins sent at once never pass
//! the bound; and it never passes on a login naming an account it is told is the proxies'.
//!
//! A password that worked for an account is remembered (the last one, as a keyed digest) and is
//! passed on while the account's bound is used up: a stranger's failures keep out only those who
//! have not logged in through this console lately. Policy only: the caller says when a login
//! was made and what CouchDB answered.
//!
//! [`Hashes`] bounds the link-password hashes the console makes per account.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use blake2::digest::{consts::U16, Mac};

use crate::client_ip::subscriber;

/// Failing logins passed on per account, and per visitor address, in any [`WINDOW`]: CouchDB
/// locks at 5 (its default `threshold`). The counts are in memory, so a restart or an upgrade
/// (two processes) starts them again: twice this is still below 5, with one to spare for a
/// person failing elsewhere from the same host.
pub const FAILURES: usize = 2;
/// The window failures are counted over: CouchDB's `max_lifetime` (5 minutes from the first
/// failure) and a minute, so that any stretch CouchDB counts over holds at most [`FAILURES`].
pub const WINDOW: Duration = Duration::from_secs(360);
/// How long a password that worked is remembered.
const KNOWN_FOR: Duration = Duration::from_secs(3600);
/// Accounts and addresses counted at most (each); past that, new logins wait.
const TALLIES: usize = 65_536;
/// Accounts whose last good password is remembered at most; past that the oldest is forgotten.
const KNOWN: usize = 4096;

/// What a login may do.
#[derive(Debug)]
pub enum Admit<'a> {
    /// Pass it on, and [`Attempt::settle`] it with CouchDB's answer.
    Pass(Attempt<'a>),
    /// An account the console never logs in as (the proxies').
    Refused,
    /// The account's or the address's bound is used up: `429`, retry after this many seconds.
    Wait(u32),
}

/// Failing logins counted for one account or address.
#[derive(Debug, Default)]
struct Tally {
    /// When each failure was answered, oldest first, within [`WINDOW`].
    failures: VecDeque<Instant>,
    /// Logins passed on and not answered yet.
    pending: usize,
}

impl Tally {
    fn forget_before(&mut self, now: Instant) {
        while self.failures.front().is_some_and(|t| now.saturating_duration_since(*t) >= WINDOW) {
            self.failures.pop_front();
        }
    }

    /// The seconds until one more login may pass, or `None` if one may now.
    fn wait(&self, now: Instant) -> Option<u32> {
        if self.failures.len() + self.pending < FAILURES {
            return None;
        }
        // Full of failures: until the oldest leaves the window; full of logins being answered: a
        // second (one of them may work).
        Some(match self.failures.len() {
            n if n >= FAILURES => {
                let oldest = *self.failures.front().expect("at least FAILURES");
                let left = WINDOW.saturating_sub(now.saturating_duration_since(oldest));
                (left.as_secs_f64().ceil() as u32).max(1)
            }
            _ => 1,
        })
    }

    fn idle(&self) -> bool {
        self.pending == 0 && self.failures.is_empty()
    }
}

#[derive(Debug, Default)]
struct State {
    accounts: HashMap<String, Tally>,
    addresses: HashMap<u128, Tally>,
    /// Each account's last password that worked, and when it did.
    known: HashMap<String, ([u8; 16], Instant)>,
    known_order: VecDeque<String>,
}

/// The console's logins: what it has passed on, and what CouchDB answered.
pub struct Logins {
    key: [u8; 32],
    /// Accounts never passed on (the proxies').
    refused: Vec<String>,
    state: Mutex<State>,
}

impl std::fmt::Debug for Logins {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Logins").field("refused", &self.refused).finish_non_exhaustive()
    }
}

impl Logins {
    /// Logins of any account but `refused`.
    pub fn new(refused: Vec<String>) -> Logins {
        Logins { key: rand::random(), refused, state: Mutex::default() }
    }

    /// Whether a login as `account` with `password` from `visitor` may be passed on now.
    pub fn admit(&self, account: &str, password: &str, visitor: IpAddr, now: Instant) -> Admit<'_> {
        if self.refused.iter().any(|r| r == account) {
            return Admit::Refused;
        }
        let digest = self.digest(account, password);
        let address = subscriber(visitor);
        let mut guard = self.state.lock().expect("logins");
        let state = &mut *guard;
        let known = state
            .known
            .get(account)
            .is_some_and(|(d, at)| *d == digest && now.saturating_duration_since(*at) < KNOWN_FOR);
        let attempt =
            |held| Attempt { logins: self, account: account.to_owned(), address, digest, held, settled: false };
        if known {
            return Admit::Pass(attempt(false));
        }
        if state.accounts.len() >= TALLIES || state.addresses.len() >= TALLIES {
            for tally in state.accounts.values_mut().chain(state.addresses.values_mut()) {
                tally.forget_before(now);
            }
            state.accounts.retain(|_, t| !t.idle());
            state.addresses.retain(|_, t| !t.idle());
            if state.accounts.len() >= TALLIES || state.addresses.len() >= TALLIES {
                return Admit::Wait(1);
            }
        }
        let by_account = state.accounts.entry(account.to_owned()).or_default();
        by_account.forget_before(now);
        let account_wait = by_account.wait(now);
        let by_address = state.addresses.entry(address).or_default();
        by_address.forget_before(now);
        if let Some(wait) = account_wait.max(by_address.wait(now)) {
            return Admit::Wait(wait);
        }
        by_address.pending += 1;
        state.accounts.get_mut(account).expect("made above").pending += 1;
        Admit::Pass(attempt(true))
    }

    /// The keyed digest a login is known by.
    pub fn digest(&self, account: &str, password: &str) -> [u8; 16] {
        let mut mac = <blake2::Blake2bMac<U16> as Mac>::new_from_slice(&self.key).expect("a 32-byte key");
        mac.update(&(account.len() as u64).to_le_bytes());
        mac.update(account.as_bytes());
        mac.update(password.as_bytes());
        mac.finalize().into_bytes().into()
    }

    fn settle(&self, attempt: &Attempt<'_>, worked: bool, now: Instant) {
        let mut guard = self.state.lock().expect("logins");
        let state = &mut *guard;
        let by_account = state.accounts.entry(attempt.account.clone()).or_default();
        let by_address = state.addresses.entry(attempt.address).or_default();
        for tally in [by_account, by_address] {
            if attempt.held {
                tally.pending = tally.pending.saturating_sub(1);
            }
            // A known password holds no place, but one that stopped working is still a failure.
            if !worked {
                tally.failures.push_back(now);
            }
        }
        if state.accounts.get(&attempt.account).is_some_and(Tally::idle) {
            state.accounts.remove(&attempt.account);
        }
        if state.addresses.get(&attempt.address).is_some_and(Tally::idle) {
            state.addresses.remove(&attempt.address);
        }
        if worked {
            if state.known.insert(attempt.account.clone(), (attempt.digest, now)).is_none() {
                state.known_order.push_back(attempt.account.clone());
                if state.known_order.len() > KNOWN {
                    let oldest = state.known_order.pop_front().expect("not empty");
                    state.known.remove(&oldest);
                }
            }
        } else if state.known.get(&attempt.account).is_some_and(|(d, _)| *d == attempt.digest) {
            state.known.remove(&attempt.account);
            state.known_order.retain(|a| *a != attempt.account);
        }
    }
}

/// A login passed on: settled with whether CouchDB took it, or (its request gone before the
/// answer, which CouchDB may still count) counted as a failure.
#[derive(Debug)]
pub struct Attempt<'a> {
    logins: &'a Logins,
    account: String,
    address: u128,
    digest: [u8; 16],
    /// Whether it holds a place among its account's and address's [`FAILURES`].
    held: bool,
    settled: bool,
}

impl Attempt<'_> {
    /// CouchDB answered: `worked` if it took the name and password.
    pub fn settle(mut self, worked: bool, now: Instant) {
        self.settled = true;
        self.logins.settle(&self, worked, now);
    }
}

impl Drop for Attempt<'_> {
    fn drop(&mut self) {
        if !self.settled {
            self.logins.settle(self, false, Instant::now());
        }
    }
}

/// Link passwords hashed for one account: at most [`Hashes::BURST`] at once, then one per
/// [`Hashes::EVERY`] (each hash is tens of milliseconds of a core and 19 MiB).
#[derive(Debug, Default)]
pub struct Hashes {
    /// Each account's bucket: the hashes it may make now, as of when.
    buckets: Mutex<HashMap<String, (f64, Instant)>>,
}

impl Hashes {
    /// Hashes an account may make in a row.
    pub const BURST: f64 = 10.0;
    /// How long an account waits for each hash past those.
    pub const EVERY: Duration = Duration::from_secs(6);

    /// Takes one of `account`'s hashes, or the seconds until it has one.
    pub fn take(&self, account: &str, now: Instant) -> Result<(), u32> {
        let mut buckets = self.buckets.lock().expect("hash buckets");
        if buckets.len() >= TALLIES {
            let full = Self::EVERY.mul_f64(Self::BURST);
            buckets.retain(|_, (_, at)| now.saturating_duration_since(*at) < full);
        }
        let (left, at) = buckets.entry(account.to_owned()).or_insert((Self::BURST, now));
        let earned = now.saturating_duration_since(*at).as_secs_f64() / Self::EVERY.as_secs_f64();
        *left = (*left + earned).min(Self::BURST);
        *at = now;
        if *left >= 1.0 {
            *left -= 1.0;
            Ok(())
        } else {
            Err(((1.0 - *left) * Self::EVERY.as_secs_f64()).ceil() as u32)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn fail(logins: &Logins, account: &str, from: &str, now: Instant) {
        match logins.admit(account, "wrong", ip(from), now) {
            Admit::Pass(attempt) => attempt.settle(false, now),
            other => panic!("expected to pass, got {other:?}"),
        }
    }

    #[test]
    fn the_proxies_account_is_never_passed_on() {
        let logins = Logins::new(vec!["couchlink-reader".into()]);
        assert!(matches!(logins.admit("couchlink-reader", "x", ip("192.0.2.1"), Instant::now()), Admit::Refused));
        assert!(matches!(logins.admit("maria", "x", ip("192.0.2.1"), Instant::now()), Admit::Pass(_)));
    }

    #[test]
    fn an_account_fails_at_most_the_bound_through_the_console_from_any_addresses() {
        let logins = Logins::new(Vec::new());
        let t0 = Instant::now();
        for k in 0..FAILURES {
            fail(&logins, "maria", &format!("192.0.2.{k}"), t0);
        }
        let Admit::Wait(wait) = logins.admit("maria", "guess", ip("198.51.100.9"), t0) else {
            panic!("a fourth failure for maria would be passed on");
        };
        assert_eq!(wait, WINDOW.as_secs() as u32);
        // Another account from a fresh address is untouched.
        assert!(matches!(logins.admit("jo", "x", ip("198.51.100.9"), t0), Admit::Pass(_)));
        // Once the first failure leaves the window, one more may pass.
        let later = t0 + WINDOW;
        assert!(matches!(logins.admit("maria", "guess", ip("198.51.100.9"), later), Admit::Pass(_)));
    }

    #[test]
    fn an_address_fails_at_most_the_bound_over_any_accounts_and_an_ipv6_subscriber_is_one_address() {
        let logins = Logins::new(Vec::new());
        let t0 = Instant::now();
        for k in 0..FAILURES {
            fail(&logins, &format!("user{k}"), &format!("2001:db8:1:2::{k}"), t0);
        }
        assert!(matches!(logins.admit("another", "x", ip("2001:db8:1:2::ffff"), t0), Admit::Wait(_)));
        assert!(matches!(logins.admit("another", "x", ip("2001:db8:1:3::1"), t0), Admit::Pass(_)));
    }

    #[test]
    fn logins_sent_at_once_hold_their_places_until_answered() {
        let logins = Logins::new(Vec::new());
        let t0 = Instant::now();
        let held: Vec<_> = (0..FAILURES)
            .map(|k| match logins.admit("maria", &format!("p{k}"), ip(&format!("192.0.2.{k}")), t0) {
                Admit::Pass(a) => a,
                other => panic!("{other:?}"),
            })
            .collect();
        assert!(matches!(logins.admit("maria", "p", ip("192.0.2.200"), t0), Admit::Wait(1)));
        // A request gone before its answer counts as a failure (CouchDB may have counted it).
        drop(held);
        let Admit::Wait(wait) = logins.admit("maria", "p", ip("192.0.2.200"), t0 + Duration::from_secs(1)) else {
            panic!("dropped logins are failures");
        };
        assert!(wait as u64 > WINDOW.as_secs() - 10, "{wait}");
    }

    #[test]
    fn a_password_that_worked_passes_while_strangers_used_up_the_bound_until_it_stops_working() {
        let logins = Logins::new(Vec::new());
        let t0 = Instant::now();
        let Admit::Pass(first) = logins.admit("maria", "right", ip("192.0.2.1"), t0) else { panic!() };
        first.settle(true, t0);
        for k in 0..FAILURES {
            fail(&logins, "maria", &format!("203.0.113.{k}"), t0);
        }
        assert!(matches!(logins.admit("maria", "guess", ip("192.0.2.1"), t0), Admit::Wait(_)));
        let Admit::Pass(again) = logins.admit("maria", "right", ip("192.0.2.77"), t0) else {
            panic!("maria's own password is kept out by strangers' failures");
        };
        // Changed in CouchDB meanwhile: refused once, then forgotten and limited like any other.
        again.settle(false, t0);
        assert!(matches!(logins.admit("maria", "right", ip("192.0.2.77"), t0), Admit::Wait(_)));
    }

    #[test]
    fn a_login_that_works_holds_no_failure() {
        let logins = Logins::new(Vec::new());
        let t0 = Instant::now();
        for _ in 0..10 * FAILURES {
            let Admit::Pass(a) = logins.admit("maria", "right", ip("192.0.2.1"), t0) else { panic!() };
            a.settle(true, t0);
        }
        assert!(logins.state.lock().unwrap().accounts.is_empty());
        assert!(logins.state.lock().unwrap().addresses.is_empty());
    }

    #[test]
    fn hashes_per_account_come_in_a_burst_then_one_each_period() {
        let hashes = Hashes::default();
        let t0 = Instant::now();
        for _ in 0..Hashes::BURST as usize {
            assert_eq!(hashes.take("maria", t0), Ok(()));
        }
        assert_eq!(hashes.take("maria", t0), Err(6));
        assert_eq!(hashes.take("jo", t0), Ok(()));
        assert_eq!(hashes.take("maria", t0 + Hashes::EVERY), Ok(()));
        assert!(hashes.take("maria", t0 + Hashes::EVERY).is_err());
    }
}
