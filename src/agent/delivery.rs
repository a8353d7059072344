//! Replies POSTed to a sender's own DIDComm endpoint, which the sender names in its DID and so
//! controls: an address the agent must never be made to fetch for a stranger (server-side
//! request forgery). Only `https` endpoints (and `http` when allowed, for development) whose
//! every resolved address is public unicast, never CouchDB's own; the connection goes to the
//! address that was checked; redirects are not followed; the sender learns only whether the
//! reply was delivered, never what the endpoint answered; and deliveries in flight are bounded.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;

/// How long one delivery may take, connection included.
const DELIVERY_TIMEOUT: Duration = Duration::from_secs(10);

/// What endpoints replies may go to.
#[derive(Debug, Clone, Default)]
pub struct EndpointPolicy {
    /// `http://` endpoints too (development: nothing protects the reply's metadata in transit).
    pub allow_http: bool,
    /// Loopback, private, link-local and unique-local addresses too (a test bed, or a wallet
    /// on the operator's own network).
    pub allow_private: bool,
    /// CouchDB's own addresses: never an endpoint (with `allow_private`, only its exact port).
    pub couchdb: Vec<SocketAddr>,
}

/// Why a reply was not delivered: for the operator's log, never for the sender.
#[derive(Debug, thiserror::Error)]
pub enum NotDelivered {
    /// Not a URL, or not http(s).
    #[error("endpoint {0:?} is not an https URL")]
    Scheme(String),
    /// An `http://` endpoint without the development flag.
    #[error("endpoint {0:?} is plain http (COUCHLINK_AGENT_ALLOW_HTTP_ENDPOINTS is off)")]
    PlainHttp(String),
    /// Its host does not resolve.
    #[error("endpoint host {host:?} does not resolve")]
    Unresolved {
        /// The host.
        host: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// It resolves to an address replies may not go to.
    #[error("endpoint host {host:?} resolves to {addr}, which is {why}")]
    Forbidden {
        /// The host.
        host: String,
        /// The address.
        addr: IpAddr,
        /// What kind of address it is.
        why: &'static str,
    },
    /// Too many deliveries already in flight.
    #[error("{0} deliveries are in flight already")]
    Busy(usize),
    /// The request failed or was not answered with 2xx (redirects included).
    #[error("endpoint answered {0}")]
    Refused(String),
}

/// Sends replies to senders' endpoints under an [`EndpointPolicy`].
pub struct Delivery {
    policy: EndpointPolicy,
    in_flight: Arc<Semaphore>,
    limit: usize,
}

impl Delivery {
    /// At most `limit` deliveries at once under `policy`.
    pub fn new(policy: EndpointPolicy, limit: usize) -> Delivery {
        Delivery { policy, in_flight: Arc::new(Semaphore::new(limit)), limit }
    }

    /// POSTs `body` (of media type `media`) to `endpoint`, if the policy allows it.
    pub async fn deliver(&self, endpoint: &str, media: &str, body: String) -> Result<(), NotDelivered> {
        let _permit = self.in_flight.try_acquire().map_err(|_| NotDelivered::Busy(self.limit))?;
        let url = url::Url::parse(endpoint).map_err(|_| NotDelivered::Scheme(endpoint.to_owned()))?;
        match url.scheme() {
            "https" => {}
            "http" if self.policy.allow_http => {}
            "http" => return Err(NotDelivered::PlainHttp(endpoint.to_owned())),
            _ => return Err(NotDelivered::Scheme(endpoint.to_owned())),
        }
        let host = url.host_str().filter(|h| !h.is_empty()).ok_or_else(|| NotDelivered::Scheme(endpoint.to_owned()))?;
        let port = url.port_or_known_default().unwrap_or(443);
        let addr = self.checked_address(host, port).await?;
        // The connection goes to the address just checked, not to a second lookup that a
        // hostile DNS server could answer differently.
        let lookup_host = host.trim_start_matches('[').trim_end_matches(']');
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(DELIVERY_TIMEOUT)
            .resolve(lookup_host, addr)
            .build()
            .map_err(|e| NotDelivered::Refused(e.to_string()))?;
        let response = client
            .post(url)
            .header("Content-Type", media)
            .body(body)
            .send()
            .await
            .map_err(|e| NotDelivered::Refused(crate::errors::Causes(&e.without_url()).to_string()))?;
        match response.status() {
            s if s.is_success() => Ok(()),
            s => Err(NotDelivered::Refused(s.to_string())),
        }
    }

    /// The address to connect to for `host:port`: its first, once every address it resolves
    /// to passed the policy.
    async fn checked_address(&self, host: &str, port: u16) -> Result<SocketAddr, NotDelivered> {
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let addrs: Vec<SocketAddr> = match bare.parse::<IpAddr>() {
            Ok(ip) => vec![SocketAddr::new(ip, port)],
            Err(_) => tokio::net::lookup_host((bare, port))
                .await
                .map_err(|source| NotDelivered::Unresolved { host: host.to_owned(), source })?
                .collect(),
        };
        for addr in &addrs {
            if let Some(why) = self.forbidden(*addr) {
                return Err(NotDelivered::Forbidden { host: host.to_owned(), addr: addr.ip(), why });
            }
        }
        addrs.first().copied().ok_or_else(|| NotDelivered::Unresolved {
            host: host.to_owned(),
            source: std::io::Error::other("no address"),
        })
    }

    /// Why replies may not go to `addr`, if they may not.
    fn forbidden(&self, addr: SocketAddr) -> Option<&'static str> {
        let ip = addr.ip().to_canonical();
        let couchdb = self
            .policy
            .couchdb
            .iter()
            .any(|c| c.ip().to_canonical() == ip && (!self.policy.allow_private || c.port() == addr.port()));
        if couchdb {
            return Some("CouchDB's own address");
        }
        match non_public(ip) {
            Some(why) if !self.policy.allow_private || why == "unspecified" || why == "multicast" => Some(why),
            _ => None,
        }
    }
}

/// What kind of non-public address `ip` is, or `None` for a public unicast one.
pub fn non_public(ip: IpAddr) -> Option<&'static str> {
    match ip.to_canonical() {
        IpAddr::V4(v4) => non_public_v4(v4),
        IpAddr::V6(v6) => non_public_v6(v6),
    }
}

fn non_public_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    Some(match () {
        _ if ip.is_unspecified() || a == 0 => "unspecified",
        _ if ip.is_loopback() => "loopback",
        _ if ip.is_private() => "private",
        _ if ip.is_link_local() => "link-local",
        _ if a == 100 && (64..128).contains(&b) => "shared (carrier-grade NAT)",
        _ if ip.is_multicast() => "multicast",
        _ if ip.is_broadcast() || a >= 240 => "reserved",
        _ if a == 192 && b == 0 && c == 0 => "reserved (IETF protocol assignments)",
        _ if ip.is_documentation() => "documentation",
        _ if a == 198 && (b == 18 || b == 19) => "reserved (benchmarking)",
        _ => return None,
    })
}

fn non_public_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let s = ip.segments();
    Some(match () {
        _ if ip.is_unspecified() => "unspecified",
        _ if ip.is_loopback() => "loopback",
        _ if ip.is_multicast() => "multicast",
        _ if s[0] & 0xfe00 == 0xfc00 => "unique-local",
        _ if s[0] & 0xffc0 == 0xfe80 => "link-local",
        _ if s[0] & 0xffc0 == 0xfec0 => "site-local",
        _ if s[0] == 0x2001 && s[1] == 0x0db8 => "documentation",
        // NAT64 (64:ff9b::/96) reaches the IPv4 address in its last 32 bits.
        _ if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] => {
            return non_public_v4(Ipv4Addr::from((u32::from(s[6]) << 16) | u32::from(s[7])))
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_public_unicast_addresses_are_public() {
        for ip in ["93.184.215.14", "1.1.1.1", "2606:4700:4700::1111", "::ffff:93.184.215.14"] {
            assert_eq!(non_public(ip.parse().unwrap()), None, "{ip}");
        }
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "192.0.2.1",
            "::1",
            "::",
            "fe80::1",
            "fd00::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "64:ff9b::a00:1",
        ] {
            assert!(non_public(ip.parse().unwrap()).is_some(), "{ip}");
        }
    }

    fn delivery(allow_private: bool) -> Delivery {
        let couchdb = vec!["127.0.0.1:5984".parse().unwrap(), "203.0.113.9:5984".parse().unwrap()];
        Delivery::new(EndpointPolicy { allow_http: true, allow_private, couchdb }, 4)
    }

    #[test]
    fn couchdb_is_never_an_endpoint_and_private_addresses_only_when_allowed() {
        let strict = delivery(false);
        assert!(strict.forbidden("127.0.0.1:8000".parse().unwrap()).is_some());
        assert!(strict.forbidden("203.0.113.9:443".parse().unwrap()).is_some(), "CouchDB's host, any port");
        let open = delivery(true);
        assert_eq!(open.forbidden("127.0.0.1:8000".parse().unwrap()), None);
        assert_eq!(open.forbidden("127.0.0.1:5984".parse().unwrap()), Some("CouchDB's own address"));
        assert_eq!(open.forbidden("0.0.0.0:8000".parse().unwrap()), Some("unspecified"));
    }

    #[tokio::test]
    async fn refused_endpoints_are_refused_before_any_connection() {
        let strict = Delivery::new(EndpointPolicy::default(), 4);
        for (endpoint, expected) in [
            ("http://93.184.215.14/inbox", "plain http"),
            ("ftp://93.184.215.14/", "not an https URL"),
            ("https://127.0.0.1:9/inbox", "loopback"),
            ("https://[::1]:9/inbox", "loopback"),
            ("https://169.254.169.254/latest/meta-data/", "link-local"),
            ("https://localhost:9/inbox", "loopback"),
        ] {
            let e = strict.deliver(endpoint, "text/plain", String::new()).await.unwrap_err().to_string();
            assert!(e.contains(expected), "{endpoint}: {e}");
        }
    }
}
