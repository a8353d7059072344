//! Which address a request comes from: the peer, or the client a trusted proxy names.

use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;

use ipnet::IpNet;

/// Proxies (IPs or CIDRs) whose forwarding header is believed, and which header that is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies {
    nets: Vec<IpNet>,
    header: ForwardedHeader,
}

/// The one header the operator's proxy writes. Only that one is read: proxies pass the others
/// through as the client sent them (RFC 7239 §8.1: trust only what your own proxy added), so a
/// client could name any address in them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ForwardedHeader {
    /// `X-Forwarded-For: client, proxy1` (nginx's `$proxy_add_x_forwarded_for`, Caddy, HAProxy).
    #[default]
    XForwardedFor,
    /// `Forwarded: for=client, for=proxy1` (RFC 7239).
    Forwarded,
}

/// A forwarding header couchlink does not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a forwarding header couchlink reads: x-forwarded-for or forwarded")]
pub struct UnknownHeader(String);

impl FromStr for ForwardedHeader {
    type Err = UnknownHeader;

    fn from_str(name: &str) -> Result<Self, UnknownHeader> {
        match name.trim().to_ascii_lowercase().as_str() {
            "x-forwarded-for" => Ok(ForwardedHeader::XForwardedFor),
            "forwarded" => Ok(ForwardedHeader::Forwarded),
            _ => Err(UnknownHeader(name.to_owned())),
        }
    }
}

/// A trusted-proxy entry that is neither an IP address nor a CIDR block.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not an IP address or CIDR block: {0:?}")]
pub struct InvalidProxy(String);

impl FromStr for TrustedProxies {
    type Err = InvalidProxy;

    /// A comma-separated list such as `10.0.0.0/8, 127.0.0.1, ::1`; empty means none.
    fn from_str(list: &str) -> Result<Self, InvalidProxy> {
        let nets = list
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| {
                IpNet::from_str(s)
                    .or_else(|_| IpAddr::from_str(s).map(IpNet::from))
                    .map_err(|_| InvalidProxy(s.to_owned()))
            })
            .collect::<Result<_, _>>()?;
        Ok(TrustedProxies { nets, header: ForwardedHeader::default() })
    }
}

impl TrustedProxies {
    /// The same proxies, believed in `header` only.
    pub fn reading(self, header: ForwardedHeader) -> Self {
        TrustedProxies { header, ..self }
    }

    fn trusts(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.nets.iter().any(|net| net.contains(&ip))
    }

    /// The name of the one header read (every instance of it is passed to
    /// [`TrustedProxies::client_ip`]).
    pub fn header(&self) -> &'static str {
        match self.header {
            ForwardedHeader::XForwardedFor => "x-forwarded-for",
            ForwardedHeader::Forwarded => "forwarded",
        }
    }

    /// The client's address, from the values of the forwarding header ([`Self::header`]) in
    /// the order received. The header counts only when the peer is trusted; its
    /// chain is then read right to left, skipping trusted hops, so that what a client wrote in
    /// it itself (on the left, before the proxy's own entry) is never reached while a trusted
    /// proxy names the hop before it.
    pub fn client_ip<'a>(&self, peer: IpAddr, forwarded: impl DoubleEndedIterator<Item = &'a [u8]>) -> IpAddr {
        if !self.trusts(peer) {
            return peer;
        }
        // Right to left: the last instance's last item first. Each item is read in place (no
        // copy: this runs for every request behind the operator's proxy).
        let items = forwarded.rev().flat_map(|value| value.rsplit(|&b| b == b','));
        let mut client = peer;
        for item in items {
            let item = std::str::from_utf8(item).ok().map(str::trim);
            let hop = item.and_then(|item| match self.header {
                ForwardedHeader::Forwarded => forwarded_for(item),
                ForwardedHeader::XForwardedFor => parse_node(item),
            });
            match hop {
                Some(ip) if self.trusts(ip) => client = ip,
                Some(ip) => return ip,
                // "unknown", an obfuscated name or garbage: the last hop we could read stands.
                None => return client,
            }
        }
        client
    }
}

/// The `for=` node of one `Forwarded` element, e.g. `for="[2001:db8::1]:4711";proto=https`.
fn forwarded_for(element: &str) -> Option<IpAddr> {
    element.split(';').find_map(|pair| {
        let (key, value) = pair.split_once('=')?;
        key.trim().eq_ignore_ascii_case("for").then(|| parse_node(value.trim().trim_matches('"'))).flatten()
    })
}

/// An address with an optional port: `192.0.2.1`, `192.0.2.1:80`, `2001:db8::1`, `[2001:db8::1]:80`.
fn parse_node(node: &str) -> Option<IpAddr> {
    IpAddr::from_str(node)
        .ok()
        .or_else(|| SocketAddr::from_str(node).ok().map(|s| s.ip()))
        .or_else(|| IpAddr::from_str(node.strip_prefix('[')?.strip_suffix(']')?).ok())
}

/// The address a client's attempts are counted by (a link's password guesses, the console's
/// logins): an IPv4 address, or an IPv6 address's /64 (what one
/// subscriber is given; counting single IPv6 addresses would give each client 2^64 tries).
pub fn subscriber(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v4) => u128::from(u32::from(v4)),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => u128::from(u32::from(v4)),
            None => u128::from(v6) & !u128::from(u64::MAX) | 1 << 32,
        },
    }
}

/// `ip` with its host part cleared, as the log keeps it when asked to anonymise: the first 24
/// bits of an IPv4 address (`203.0.113.0`), the first 48 of an IPv6 one (`2001:db8:1::`). An
/// IPv4 address mapped into IPv6 is cut as IPv4.
pub fn anonymize(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => IpAddr::V4(std::net::Ipv4Addr::from(u32::from(v4) & 0xffff_ff00)),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V6(std::net::Ipv4Addr::from(u32::from(v4) & 0xffff_ff00).to_ipv6_mapped()),
            None => IpAddr::V6(std::net::Ipv6Addr::from(u128::from(v6) & !0u128 << 80)),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::Strategy;

    fn headers(pairs: &[(&'static str, &'static str)]) -> Vec<httparse::Header<'static>> {
        pairs.iter().map(|(name, value)| httparse::Header { name, value: value.as_bytes() }).collect()
    }

    /// What the handler passes: every value of the header `proxies` read.
    fn client(proxies: &TrustedProxies, peer: IpAddr, h: &[httparse::Header<'_>]) -> IpAddr {
        proxies.client_ip(peer, h.iter().filter(|f| f.name.eq_ignore_ascii_case(proxies.header())).map(|f| f.value))
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn untrusted_peer_is_the_client_whatever_it_claims() {
        let proxies: TrustedProxies = "10.0.0.0/8".parse().unwrap();
        let h = headers(&[("x-forwarded-for", "203.0.113.7")]);
        assert_eq!(client(&proxies, ip("198.51.100.1"), &h), ip("198.51.100.1"));
    }

    #[test]
    fn trusted_peer_names_the_rightmost_untrusted_hop() {
        let proxies: TrustedProxies = "10.0.0.0/8, 127.0.0.1".parse().unwrap();
        let h = headers(&[("x-forwarded-for", "6.6.6.6, 203.0.113.7"), ("x-forwarded-for", "10.1.2.3")]);
        assert_eq!(client(&proxies, ip("127.0.0.1"), &h), ip("203.0.113.7"));
    }

    #[test]
    fn only_the_configured_header_is_read() {
        let h = headers(&[
            ("forwarded", "for=\"[2001:db8::7]:4711\";proto=https, for=192.0.2.60:80"),
            ("x-forwarded-for", "198.51.100.7"),
        ]);
        let xff: TrustedProxies = "::1".parse().unwrap();
        assert_eq!(client(&xff, ip("::1"), &h), ip("198.51.100.7"), "a client's Forwarded is ignored");
        let forwarded = xff.clone().reading(ForwardedHeader::Forwarded);
        assert_eq!(client(&forwarded, ip("::1"), &h), ip("192.0.2.60"));
        // A client's own `Forwarded: for=unknown` cannot hide it behind an X-Forwarded-For proxy.
        let h = headers(&[("forwarded", "for=unknown"), ("x-forwarded-for", "198.51.100.7")]);
        assert_eq!(client(&xff, ip("::1"), &h), ip("198.51.100.7"));
        assert_eq!("Forwarded".parse(), Ok(ForwardedHeader::Forwarded));
        assert!("x-real-ip".parse::<ForwardedHeader>().is_err());
    }

    #[test]
    fn unreadable_hop_stops_at_the_last_known_one() {
        let proxies: TrustedProxies =
            "127.0.0.1".parse::<TrustedProxies>().unwrap().reading(ForwardedHeader::Forwarded);
        let h = headers(&[("forwarded", "for=unknown")]);
        assert_eq!(client(&proxies, ip("127.0.0.1"), &h), ip("127.0.0.1"));
        let proxies = proxies.reading(ForwardedHeader::XForwardedFor);
        let h = headers(&[("x-forwarded-for", "garbage")]);
        assert_eq!(client(&proxies, ip("127.0.0.1"), &h), ip("127.0.0.1"));
    }

    /// The plain reading, the oracle of `client_ip`: every item of every instance copied out
    /// in order, then walked right to left.
    fn client_model(proxies: &TrustedProxies, peer: IpAddr, values: &[&[u8]]) -> IpAddr {
        if !proxies.trusts(peer) {
            return peer;
        }
        let items: Vec<String> = values
            .iter()
            .flat_map(|v| String::from_utf8_lossy(v).split(',').map(|s| s.trim().to_owned()).collect::<Vec<_>>())
            .collect();
        let mut client = peer;
        for item in items.iter().rev() {
            let hop = match proxies.header {
                ForwardedHeader::Forwarded => forwarded_for(item),
                ForwardedHeader::XForwardedFor => parse_node(item),
            };
            match hop {
                Some(ip) if proxies.trusts(ip) => client = ip,
                Some(ip) => return ip,
                None => return client,
            }
        }
        client
    }

    proptest::proptest! {
        /// Any chain of hops, trusted or not, readable or not, in either header: read in place,
        /// the client is the one the plain reading finds.
        #[test]
        fn the_client_is_found_as_the_plain_reading_finds_it(
            values in proptest::collection::vec(
                proptest::collection::vec(
                    proptest::sample::select(vec![
                        "10.0.0.1", "10.9.9.9", "203.0.113.7", "2001:db8::1", "[2001:db8::2]:80", "198.51.100.1:4711",
                        "unknown", "garbage", "for=10.0.0.2", "for=\"[2001:db8::7]:4711\";proto=https",
                        "for=192.0.2.60", ",", ", ", " ", "\u{a0}", "\u{fffd}",
                    ]),
                    0..8,
                ).prop_map(|parts| parts.concat().into_bytes()),
                0..3,
            ),
            forwarded in proptest::bool::ANY,
        ) {
            let header = if forwarded { ForwardedHeader::Forwarded } else { ForwardedHeader::XForwardedFor };
            let proxies = "10.0.0.0/8".parse::<TrustedProxies>().unwrap().reading(header);
            let values: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
            for peer in [ip("10.0.0.9"), ip("198.51.100.9")] {
                proptest::prop_assert_eq!(
                    proxies.client_ip(peer, values.iter().copied()),
                    client_model(&proxies, peer, &values)
                );
            }
        }
    }

    #[test]
    fn bad_proxy_list_is_refused() {
        assert!("10.0.0.0/8, nonsense".parse::<TrustedProxies>().is_err());
        assert_eq!("".parse::<TrustedProxies>().unwrap(), TrustedProxies::default());
    }

    #[test]
    fn anonymized_addresses_keep_24_bits_of_ipv4_and_48_of_ipv6() {
        for (ip, kept) in [
            ("203.0.113.77", "203.0.113.0"),
            ("10.0.0.1", "10.0.0.0"),
            ("2001:db8:1:2:3:4:5:6", "2001:db8:1::"),
            ("2001:db8:abcd:ffff::1", "2001:db8:abcd::"),
            ("::ffff:198.51.100.9", "::ffff:198.51.100.0"),
        ] {
            assert_eq!(anonymize(ip.parse().unwrap()).to_string(), kept, "{ip}");
        }
    }
}
