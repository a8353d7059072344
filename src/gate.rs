//! A protected link's gate (docs/reference.md, "Passwords"): the password a request presents in
//! `Authorization: Basic`, checked against the link's hash at most once per credential and
//! password hash, the verdict remembered; wrong guesses limited per client address.
//!
//! One Argon2id check costs tens of milliseconds and 19 MiB: it runs on tokio's blocking pool,
//! a few at a time, never on a serving thread. Browsers send the credential with every request
//! to the link once the visitor has typed it, so the verdict is remembered, bounded in memory,
//! under a keyed digest of the password presented, the link and its hash (a changed password
//! is a new hash, so the old password stops working with the revision that changes it). The
//! tracking cookie plays no part: it never lets anyone in.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use blake2::digest::{consts::U16, Mac};
use tokio::sync::{OnceCell, Semaphore};

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
    /// Checks running at once (each holds its 19 MiB while it runs).
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

/// One address's wrong guesses in its current window.
#[derive(Clone, Copy)]
struct Guesses {
    since: Instant,
    wrong: u32,
}

impl Gate {
    /// A gate running at most `at_once` checks at a time.
    pub fn new(at_once: usize) -> Gate {
        Gate {
            key: rand::random(),
            verdicts: Mutex::default(),
            running: Mutex::default(),
            guesses: Mutex::default(),
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
        // Longer than any password couchlink sets: wrong without a hash, and counted as a guess.
        if password.len() > crate::domain::MAX_PASSWORD_BYTES {
            metrics.password(PasswordAnswer::Wrong);
            self.guessed_wrong(client, now);
            return Verdict::Ask;
        }
        let digest = self.digest(id, hash, &password);
        let remembered = self.verdicts.lock().expect("verdicts").right.get(&digest).copied();
        // A remembered right password lets in even an address that is waiting: whoever
        // guessed wrong from behind the same NAT does not lock out those who know it.
        if remembered == Some(true) {
            metrics.password(PasswordAnswer::Right);
            return Verdict::Open;
        }
        if let Some(wait) = self.waiting(client, now) {
            metrics.password(PasswordAnswer::Limited);
            return Verdict::Wait(wait);
        }
        let right = match remembered {
            Some(right) => right,
            None => {
                let running = self.running.lock().expect("running").entry(digest).or_default().clone();
                let right = *running
                    .get_or_init(|| async {
                        let _turn = self.hashing.acquire().await.expect("the semaphore is never closed");
                        metrics.password_hash();
                        let hash = hash.clone();
                        let right = tokio::task::spawn_blocking(move || hash.verify(&password)).await.unwrap_or(false);
                        self.remember(digest, right);
                        right
                    })
                    .await;
                self.running.lock().expect("running").remove(&digest);
                right
            }
        };
        if right {
            metrics.password(PasswordAnswer::Right);
            Verdict::Open
        } else {
            metrics.password(PasswordAnswer::Wrong);
            self.guessed_wrong(client, now);
            Verdict::Ask
        }
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

    /// Seconds `client` must wait, when it has used its guesses.
    fn waiting(&self, client: IpAddr, now: Instant) -> Option<u32> {
        let guesses = self.guesses.lock().expect("guesses");
        let g = guesses.get(&address_key(client))?;
        let left = WINDOW.checked_sub(now.saturating_duration_since(g.since))?;
        (g.wrong >= GUESSES && !left.is_zero()).then(|| left.as_secs_f64().ceil() as u32)
    }

    fn guessed_wrong(&self, client: IpAddr, now: Instant) {
        let mut guesses = self.guesses.lock().expect("guesses");
        if guesses.len() >= ADDRESSES {
            guesses.retain(|_, g| now.saturating_duration_since(g.since) < WINDOW);
            while guesses.len() >= ADDRESSES {
                let any = *guesses.keys().next().expect("not empty");
                guesses.remove(&any);
            }
        }
        let g = guesses.entry(address_key(client)).or_insert(Guesses { since: now, wrong: 0 });
        if now.saturating_duration_since(g.since) >= WINDOW {
            *g = Guesses { since: now, wrong: 0 };
        }
        g.wrong += 1;
    }
}

/// The address guesses are counted by: an IPv4 address, or an IPv6 address's /64 (what one
/// subscriber is given; counting single IPv6 addresses would give each client 2^64 tries).
fn address_key(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v4) => u128::from(u32::from(v4)),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => u128::from(u32::from(v4)),
            None => u128::from(v6) & !u128::from(u64::MAX) | 1 << 32,
        },
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
        assert_eq!(address_key(a), address_key(b));
        assert_ne!(address_key(a), address_key(c));
        assert_eq!(address_key("::ffff:203.0.113.7".parse().unwrap()), address_key("203.0.113.7".parse().unwrap()));
        assert_ne!(address_key("0.0.0.1".parse().unwrap()), address_key("::1".parse().unwrap()));
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
        // Another address is not held back, and the right password still opens for anyone.
        assert_eq!(gate.check_at(ask(id, &hash, Some(&next), other), &metrics, later).await, Verdict::Ask);
        assert_eq!(gate.check_at(ask(id, &hash, Some(&right), me), &metrics, later).await, Verdict::Open);
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
