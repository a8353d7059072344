//! A protected link's gate (docs/reference.md, "Passwords"): the password a request presents in
//! `Authorization: Basic`, checked against the link's hash at most once per credential and
//! password hash, the verdict remembered; wrong guesses limited per client address.
//!
//! One Argon2id check costs tens of milliseconds and 19 MiB: it runs on tokio's blocking pool,
//! a few at a time, never on a serving thread. A guess is reserved before it is hashed, so
//! guesses sent at once never pass the limit; an address hashes one guess at a time and waits
//! for the shared turns behind every other address in order, so one attacker delays another
//! visitor's first check by about one hash (per address ahead of it), not by its whole flood.
//! Browsers send the credential with every request to the link once the visitor has typed it,
//! so the verdict is remembered, bounded in memory, under a keyed digest of the password
//! presented, the link and its hash (a changed password is a new hash, so the old password
//! stops working with the revision that changes it). The tracking cookie plays no part: it
//! never lets anyone in.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use blake2::digest::{consts::U16, Mac};
use tokio::sync::{OnceCell, Semaphore};

use crate::client_ip::subscriber;
use crate::domain::{LinkId, PasswordHash};
use crate::metrics::{Metrics, PasswordAnswer};

/// Verdicts remembered at most (about 40 bytes each): past that the oldest are forgotten and
/// cost a hash again.
const VERDICTS: usize = 65_536;
/// Wrong guesses an address may make per [`WINDOW`]; the next request waits (429).
pub const GUESSES: u32 = 10;
/// The window over which wrong guesses are counted.
pub const WINDOW: Duration = Duration::from_secs(600);
/// Addresses whose guesses are counted at most; past that, those whose window ended are
/// forgotten first, then any.
const ADDRESSES: usize = 65_536;

/// A request for a protected link, as its gate sees it.
#[derive(Clone, Copy)]
pub struct Presented<'a> {
    /// The link.
    pub id: LinkId,
    /// Its password's hash.
    pub hash: &'a PasswordHash,
    /// The request's `Authorization` header, if any.
    pub authorization: Option<&'a [u8]>,
    /// Its client's address.
    pub client: IpAddr,
}

/// What a request for a protected link gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The right password: the link's usual answer.
    Open,
    /// None, or a wrong one: `401` with `WWW-Authenticate`.
    Ask,
    /// Too many wrong guesses from this address: `429`, retry after this many seconds.
    Wait(u32),
}

/// The gate of every protected link a proxy serves.
pub struct Gate {
    /// The digests' key, drawn at start: a remembered verdict says nothing outside the process.
    key: [u8; 32],
    verdicts: Mutex<Verdicts>,
    /// Checks running, by digest: a second request with the same credential waits for the
    /// first one's verdict rather than hashing again (a browser opens several connections).
    running: Mutex<HashMap<[u8; 16], Arc<OnceCell<bool>>>>,
    guesses: Mutex<HashMap<u128, Guesses>>,
    /// Each address's lane: one of its checks at a time waits for a turn of `hashing`.
    lanes: Mutex<HashMap<u128, Arc<Semaphore>>>,
    /// Checks running at once (each holds its 19 MiB while it runs); its turns are given in
    /// the order asked.
    hashing: Semaphore,
}

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gate").finish_non_exhaustive()
    }
}

/// Remembered verdicts, the oldest forgotten first.
#[derive(Default)]
struct Verdicts {
    right: HashMap<[u8; 16], bool>,
    order: VecDeque<[u8; 16]>,
}

/// One address's wrong guesses in its current window, and its guesses being checked.
#[derive(Clone, Copy)]
struct Guesses {
    since: Instant,
    wrong: u32,
    /// Reserved and not yet decided: counted against the limit as if wrong.
    pending: u32,
}

impl Gate {
    /// A gate running at most `at_once` checks at a time.
    pub fn new(at_once: usize) -> Gate {
        Gate {
            key: rand::random(),
            verdicts: Mutex::default(),
            running: Mutex::default(),
            guesses: Mutex::default(),
            lanes: Mutex::default(),
            hashing: Semaphore::new(at_once.max(1)),
        }
    }

    /// The verdict for `request`; counted in `metrics`.
    pub async fn check(&self, request: Presented<'_>, metrics: &Metrics) -> Verdict {
        self.check_at(request, metrics, Instant::now()).await
    }

    async fn check_at(&self, request: Presented<'_>, metrics: &Metrics, now: Instant) -> Verdict {
        let Presented { id, hash, authorization, client } = request;
        let Some(password) = authorization.and_then(basic_password) else {
            metrics.password(PasswordAnswer::Missing);
            return Verdict::Ask;
        };
        // Longer than any password couchlink sets: wrong without a hash.
        let digest = (password.len() <= crate::domain::MAX_PASSWORD_BYTES).then(|| self.digest(id, hash, &password));
        let remembered = match digest {
            Some(digest) => self.verdicts.lock().expect("verdicts").right.get(&digest).copied(),
            None => Some(false),
        };
        // An address that has used its guesses waits, whatever it presents, so that a 429
        // never tells a right password from a wrong one; a guess to be hashed is reserved
        // first (one being checked counts as wrong until it is known), so that guesses sent at
        // once are never hashed past the limit. A verdict known already costs no hash and
        // reserves nothing: a browser's requests at once with the right password all open.
        let hashing = remembered.is_none();
        let reserved = match self.reserve(client, now, hashing) {
            Ok(reserved) => reserved,
            Err(wait) => {
                metrics.password(PasswordAnswer::Limited);
                return Verdict::Wait(wait);
            }
        };
        let right = match (remembered, digest) {
            (Some(right), _) => right,
            (None, Some(digest)) => self.hash_once(digest, hash, password, client, metrics).await,
            (None, None) => unreachable!("a password too long is remembered as wrong"),
        };
        reserved.settle(right, now);
        if right {
            metrics.password(PasswordAnswer::Right);
            Verdict::Open
        } else {
            metrics.password(PasswordAnswer::Wrong);
            Verdict::Ask
        }
    }

    /// Whether `password` is right for `hash`, checked once however many ask at once with the
    /// same credential (they wait for the first one's verdict), in `client`'s lane.
    async fn hash_once(
        &self,
        digest: [u8; 16],
        hash: &PasswordHash,
        password: Vec<u8>,
        client: IpAddr,
        metrics: &Metrics,
    ) -> bool {
        let running = self.running.lock().expect("running").entry(digest).or_default().clone();
        let right = *running
            .get_or_init(|| async {
                let key = subscriber(client);
                let lane =
                    self.lanes.lock().expect("lanes").entry(key).or_insert_with(|| Arc::new(Semaphore::new(1))).clone();
                let right = {
                    let _lane = lane.acquire().await.expect("a lane is never closed");
                    let _turn = self.hashing.acquire().await.expect("the semaphore is never closed");
                    metrics.password_hash();
                    let hash = hash.clone();
                    tokio::task::spawn_blocking(move || hash.verify(&password)).await.unwrap_or(false)
                };
                {
                    // The lane goes once nobody else holds or waits for it (they clone it
                    // under this lock).
                    let mut lanes = self.lanes.lock().expect("lanes");
                    if Arc::strong_count(&lane) == 2 {
                        lanes.remove(&key);
                    }
                }
                self.remember(digest, right);
                right
            })
            .await;
        self.running.lock().expect("running").remove(&digest);
        right
    }

    /// The keyed digest a verdict is remembered under.
    fn digest(&self, id: LinkId, hash: &PasswordHash, password: &[u8]) -> [u8; 16] {
        let mut mac = <blake2::Blake2bMac<U16> as Mac>::new_from_slice(&self.key).expect("a 32-byte key");
        mac.update(id.as_str().as_bytes());
        mac.update(hash.as_str().as_bytes());
        // The hash never holds `$` after its last part, so the password's bytes start here.
        mac.update(b"$");
        mac.update(password);
        mac.finalize().into_bytes().into()
    }

    fn remember(&self, digest: [u8; 16], right: bool) {
        let mut verdicts = self.verdicts.lock().expect("verdicts");
        if verdicts.right.insert(digest, right).is_none() {
            verdicts.order.push_back(digest);
            if verdicts.order.len() > VERDICTS {
                let oldest = verdicts.order.pop_front().expect("not empty");
                verdicts.right.remove(&oldest);
            }
        }
    }

    /// The seconds `client` must wait, or (`hold`) one of its guesses reserved: it waits the
    /// rest of its window once it has guessed wrong [`GUESSES`] times in it, else (`hold`) 1
    /// while its last guesses are being checked (a wrong one among them starts the wait).
    fn reserve(&self, client: IpAddr, now: Instant, hold: bool) -> Result<Reserved<'_>, u32> {
        let mut guesses = self.guesses.lock().expect("guesses");
        if guesses.len() >= ADDRESSES {
            guesses.retain(|_, g| g.pending > 0 || now.saturating_duration_since(g.since) < WINDOW);
            while guesses.len() >= ADDRESSES {
                let Some(any) = guesses.iter().find(|(_, g)| g.pending == 0).map(|(k, _)| *k) else { break };
                guesses.remove(&any);
            }
        }
        let key = subscriber(client);
        // Made only once let through: a reservation dropped settles itself, under this lock.
        let reserved = || Reserved { gate: self, key, held: hold, settled: false };
        // A known verdict from an address with nothing counted: nothing to keep.
        if !hold && !guesses.contains_key(&key) {
            return Ok(reserved());
        }
        let g = guesses.entry(key).or_insert(Guesses { since: now, wrong: 0, pending: 0 });
        if now.saturating_duration_since(g.since) >= WINDOW {
            *g = Guesses { since: now, wrong: 0, pending: g.pending };
        }
        if g.wrong >= GUESSES {
            let left = WINDOW.saturating_sub(now.saturating_duration_since(g.since));
            return Err((left.as_secs_f64().ceil() as u32).max(1));
        }
        if hold {
            if g.wrong + g.pending >= GUESSES {
                return Err(1);
            }
            g.pending += 1;
        }
        Ok(reserved())
    }
}

/// A guess let through: settled with its verdict, or (its request gone before the verdict, its
/// hash perhaps computed) counted as wrong, so that hanging up early buys no extra hashes.
struct Reserved<'a> {
    gate: &'a Gate,
    key: u128,
    /// Whether it holds one of the address's pending guesses.
    held: bool,
    settled: bool,
}

impl Reserved<'_> {
    fn settle(mut self, right: bool, now: Instant) {
        self.settled = true;
        self.end(right, now);
    }

    fn end(&self, right: bool, now: Instant) {
        // A known right password, nothing reserved: nothing to count.
        if right && !self.held {
            return;
        }
        let mut guesses = self.gate.guesses.lock().expect("guesses");
        let g = guesses.entry(self.key).or_insert(Guesses { since: now, wrong: 0, pending: u32::from(self.held) });
        if self.held {
            g.pending = g.pending.saturating_sub(1);
        }
        if !right {
            g.wrong += 1;
        } else if g.wrong == 0 && g.pending == 0 {
            guesses.remove(&self.key);
        }
    }
}

impl Drop for Reserved<'_> {
    fn drop(&mut self) {
        if !self.settled && self.held {
            self.end(false, Instant::now());
        }
    }
}

/// The password of an `Authorization: Basic` value (RFC 7617): base64 of `user-id:password`,
/// the user ID whatever the visitor typed (a link has a password, not accounts). `None` for
/// another scheme or a malformed value, which is asked again like no credential at all.
pub fn basic_password(value: &[u8]) -> Option<Vec<u8>> {
    let value = value.trim_ascii();
    let (scheme, token) = value.split_at_checked(5)?;
    if !scheme.eq_ignore_ascii_case(b"basic") || !token.first()?.is_ascii_whitespace() {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD.decode(token.trim_ascii()).ok()?;
    let colon = decoded.iter().position(|&b| b == b':')?;
    Some(decoded[colon + 1..].to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn ask<'a>(id: LinkId, hash: &'a PasswordHash, authorization: Option<&'a [u8]>, client: IpAddr) -> Presented<'a> {
        Presented { id, hash, authorization, client }
    }

    fn basic(user_password: &str) -> Vec<u8> {
        format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(user_password)).into_bytes()
    }

    #[test]
    fn the_password_is_read_from_basic_credentials_whatever_the_user_id() {
        assert_eq!(basic_password(&basic("anyone:staff only")), Some(b"staff only".to_vec()));
        assert_eq!(basic_password(&basic(":staff only")), Some(b"staff only".to_vec()));
        // A password may hold colons; the user ID may not (RFC 7617, section 2).
        assert_eq!(basic_password(&basic("a:b:c")), Some(b"b:c".to_vec()));
        assert_eq!(basic_password(b"bAsIc   YTpi"), Some(b"b".to_vec()));
        for bad in [&b"Bearer YTpi"[..], b"Basic", b"Basic ", b"BasicYTpi", b"Basic !!!", b"Basic YWI="] {
            assert_eq!(basic_password(bad), None, "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn ipv6_clients_are_counted_by_their_64_and_mapped_ipv4_as_ipv4() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:bbbb::2".parse().unwrap();
        let c: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(subscriber(a), subscriber(b));
        assert_ne!(subscriber(a), subscriber(c));
        assert_eq!(subscriber("::ffff:203.0.113.7".parse().unwrap()), subscriber("203.0.113.7".parse().unwrap()));
        assert_ne!(subscriber("0.0.0.1".parse().unwrap()), subscriber("::1".parse().unwrap()));
    }

    #[tokio::test]
    async fn a_right_password_opens_once_hashed_and_wrong_guesses_wait_after_the_limit() {
        let gate = Gate::new(1);
        let metrics = Metrics::default();
        let id = LinkId::parse("H83if").unwrap();
        let hash = PasswordHash::create(b"staff only").unwrap();
        let me = IpAddr::V4(Ipv4Addr::new(203, 0, 113, 7));
        let other = IpAddr::V4(Ipv4Addr::new(198, 51, 100, 1));
        let t0 = Instant::now();
        let right = basic("x:staff only");
        assert_eq!(gate.check_at(ask(id, &hash, None, me), &metrics, t0).await, Verdict::Ask);
        assert_eq!(gate.check_at(ask(id, &hash, Some(&right), me), &metrics, t0).await, Verdict::Open);
        assert_eq!(gate.check_at(ask(id, &hash, Some(&right), other), &metrics, t0).await, Verdict::Open);
        assert_eq!(metrics.password_hashes(), 1, "the second right request is remembered, not hashed");
        let long = basic(&format!("x:{}", "a".repeat(crate::domain::MAX_PASSWORD_BYTES + 1)));
        assert_eq!(gate.check_at(ask(id, &hash, Some(&long), other), &metrics, t0).await, Verdict::Ask);
        assert_eq!(metrics.password_hashes(), 1, "a password longer than any set is wrong without a hash");
        for n in 0..GUESSES {
            let guess = basic(&format!("x:guess {n}"));
            assert_eq!(gate.check_at(ask(id, &hash, Some(&guess), me), &metrics, t0).await, Verdict::Ask);
        }
        let next = basic("x:guess again");
        assert_eq!(gate.check_at(ask(id, &hash, Some(&next), me), &metrics, t0).await, Verdict::Wait(600));
        let later = t0 + Duration::from_secs(200);
        assert_eq!(gate.check_at(ask(id, &hash, Some(&next), me), &metrics, later).await, Verdict::Wait(400));
        assert_eq!(metrics.password_hashes(), 1 + u64::from(GUESSES), "a waiting address is not hashed for");
        // Another address is not held back; the waiting one waits whatever it presents, the
        // right password too (remembered as right): a 429 tells nothing of the password.
        assert_eq!(gate.check_at(ask(id, &hash, Some(&next), other), &metrics, later).await, Verdict::Ask);
        assert_eq!(gate.check_at(ask(id, &hash, Some(&right), me), &metrics, later).await, Verdict::Wait(400));
        assert_eq!(gate.check_at(ask(id, &hash, None, me), &metrics, later).await, Verdict::Ask, "no password: asked");
        // The window over, guesses are counted afresh.
        let after = t0 + WINDOW;
        assert_eq!(gate.check_at(ask(id, &hash, Some(&next), me), &metrics, after).await, Verdict::Ask);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn requests_at_once_with_one_credential_cost_one_hash() {
        let gate = Arc::new(Gate::new(2));
        let metrics = Arc::new(Metrics::default());
        let id = LinkId::parse("H83if").unwrap();
        let hash = PasswordHash::create(b"staff only").unwrap();
        let asked: Vec<_> = (0..8)
            .map(|_| {
                let (gate, metrics, hash) = (gate.clone(), metrics.clone(), hash.clone());
                tokio::spawn(async move {
                    let right = basic("x:staff only");
                    let asking = Presented {
                        id,
                        hash: &hash,
                        authorization: Some(&right),
                        client: IpAddr::V4(Ipv4Addr::LOCALHOST),
                    };
                    gate.check(asking, &metrics).await
                })
            })
            .collect();
        for verdict in asked {
            assert_eq!(verdict.await.unwrap(), Verdict::Open);
        }
        assert_eq!(metrics.password_hashes(), 1);
        assert!(gate.running.lock().unwrap().is_empty());
    }

    /// `n` guesses from `client` at once, each another wrong password, answered once all are.
    async fn at_once(
        gate: &Arc<Gate>,
        metrics: &Arc<Metrics>,
        hash: &PasswordHash,
        client: IpAddr,
        n: usize,
    ) -> Vec<Verdict> {
        let id = LinkId::parse("H83if").unwrap();
        let asked: Vec<_> = (0..n)
            .map(|i| {
                let (gate, metrics, hash) = (gate.clone(), metrics.clone(), hash.clone());
                tokio::spawn(async move {
                    let guess = basic(&format!("x:guess {i}"));
                    gate.check(ask(id, &hash, Some(&guess), client), &metrics).await
                })
            })
            .collect();
        let mut verdicts = Vec::new();
        for verdict in asked {
            verdicts.push(verdict.await.unwrap());
        }
        verdicts
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn guesses_sent_at_once_are_reserved_before_they_are_hashed() {
        let gate = Arc::new(Gate::new(4));
        let metrics = Arc::new(Metrics::default());
        let id = LinkId::parse("H83if").unwrap();
        let hash = PasswordHash::create(b"staff only").unwrap();
        let me: IpAddr = "2001:db8::7".parse().unwrap();
        let verdicts = at_once(&gate, &metrics, &hash, me, 60).await;
        let asked = verdicts.iter().filter(|v| **v == Verdict::Ask).count();
        assert_eq!(asked, GUESSES as usize, "{verdicts:?}");
        assert!(verdicts.iter().all(|v| matches!(v, Verdict::Ask | Verdict::Wait(_))));
        assert_eq!(metrics.password_hashes(), u64::from(GUESSES), "no more guesses hashed than the limit");
        // The right password, from the same /64, is told to wait like any other.
        let right = basic("x:staff only");
        let same: IpAddr = "2001:db8::8".parse().unwrap();
        assert!(matches!(gate.check(ask(id, &hash, Some(&right), same), &metrics).await, Verdict::Wait(s) if s > 500));
        assert_eq!(metrics.password_hashes(), u64::from(GUESSES));
        assert_eq!(gate.guesses.lock().unwrap()[&subscriber(me)].pending, 0, "every reservation settled");
        assert!(gate.lanes.lock().unwrap().is_empty(), "lanes go once unused");
    }

    #[tokio::test]
    async fn a_guess_whose_request_goes_before_its_verdict_counts_as_wrong() {
        let gate = Gate::new(1);
        let metrics = Metrics::default();
        let id = LinkId::parse("H83if").unwrap();
        let hash = PasswordHash::create(b"staff only").unwrap();
        let me = IpAddr::V4(Ipv4Addr::new(203, 0, 113, 7));
        let guess = basic("x:hang up");
        // Polled once (reserved, its hash begun) and dropped, as a connection closed early is.
        let checking = gate.check(ask(id, &hash, Some(&guess), me), &metrics);
        assert!(futures_util::FutureExt::now_or_never(checking).is_none());
        let g = gate.guesses.lock().unwrap()[&subscriber(me)];
        assert_eq!((g.wrong, g.pending), (1, 0));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_address_flooding_delays_another_first_check_by_about_one_hash() {
        // One turn at a time: without lanes the other check would wait behind all ten.
        let gate = Arc::new(Gate::new(1));
        let metrics = Arc::new(Metrics::default());
        let hash = PasswordHash::create(b"staff only").unwrap();
        let attacker = IpAddr::V4(Ipv4Addr::new(203, 0, 113, 66));
        let flood = {
            let (gate, metrics, hash) = (gate.clone(), metrics.clone(), hash.clone());
            tokio::spawn(async move { at_once(&gate, &metrics, &hash, attacker, 10).await })
        };
        // Every one of the attacker's guesses reserved (and so waiting for its lane or a turn).
        while gate.guesses.lock().unwrap().get(&subscriber(attacker)).map_or(0, |g| g.pending) < GUESSES {
            tokio::task::yield_now().await;
        }
        let other = LinkId::parse("Other").unwrap();
        let right = basic("x:staff only");
        let visitor = IpAddr::V4(Ipv4Addr::new(198, 51, 100, 1));
        let verdict = gate.check(ask(other, &hash, Some(&right), visitor), &metrics).await;
        let hashed_by_then = metrics.password_hashes();
        assert_eq!(verdict, Verdict::Open);
        // Its own, the attacker's one running when it asked, and at most one begun since.
        assert!(hashed_by_then <= 3, "{hashed_by_then} hashes before the visitor's verdict");
        assert!(flood.await.unwrap().iter().all(|v| *v == Verdict::Ask));
        assert_eq!(metrics.password_hashes(), 11);
    }

    #[tokio::test]
    async fn a_changed_password_is_a_new_hash_and_the_old_password_stops_opening() {
        let gate = Gate::new(1);
        let metrics = Metrics::default();
        let id = LinkId::parse("H83if").unwrap();
        let me = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let old = PasswordHash::create(b"old").unwrap();
        let new = PasswordHash::create(b"new").unwrap();
        let t = Instant::now();
        assert_eq!(gate.check_at(ask(id, &old, Some(&basic(":old")), me), &metrics, t).await, Verdict::Open);
        assert_eq!(gate.check_at(ask(id, &new, Some(&basic(":old")), me), &metrics, t).await, Verdict::Ask);
        assert_eq!(gate.check_at(ask(id, &new, Some(&basic(":new")), me), &metrics, t).await, Verdict::Open);
        // The same hash under another link ID is another verdict.
        let other = LinkId::parse("Other").unwrap();
        assert_ne!(gate.digest(id, &new, b"new"), gate.digest(other, &new, b"new"));
    }
}
