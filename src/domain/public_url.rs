//! `PublicUrl`: the short links' base URL, parsed once; everything derived from it.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use url::Url;

use super::LinkId;

/// The base every short link is printed under, e.g. `https://0x1f.ie`: an absolute http or
/// https URL with a host, lower-cased and normalised by URL parsing, kept without a trailing `/`.
///
/// The `Link: rel="shortlink"` header, the cookie's `Secure` attribute, the URLs `create`
/// prints and the QR tags all come from this one value, so they cannot disagree.
#[derive(Clone, PartialEq, Eq)]
pub struct PublicUrl {
    url: Url,
    /// `url` serialised without its trailing `/`: the prefix of every short URL.
    base: String,
}

/// Why a string is not a usable public URL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidPublicUrl {
    /// It does not parse as a URL.
    #[error("not a URL ({0})")]
    NotAUrl(url::ParseError),
    /// It holds spaces, tabs, line breaks or other control characters, which URL parsing would
    /// silently drop: refused rather than guessed at.
    #[error("it contains whitespace or control characters")]
    Whitespace,
    /// Not http or https, or no host.
    #[error("must be an http:// or https:// URL with a host")]
    Scheme,
    /// A user name, password, query or fragment, which a short link cannot carry.
    #[error("must not contain a user name, password, query or fragment")]
    Extra,
}

impl PublicUrl {
    /// Parses `text` as a public base URL.
    ///
    /// ```
    /// use couchlink::domain::PublicUrl;
    /// let base = PublicUrl::parse("HTTPS://0x1F.ie/").unwrap();
    /// assert_eq!(base.as_str(), "https://0x1f.ie");
    /// assert!(base.is_https());
    /// assert!(PublicUrl::parse("https://0x1f.ie\n").is_err());
    /// ```
    pub fn parse(text: &str) -> Result<Self, InvalidPublicUrl> {
        if text.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(InvalidPublicUrl::Whitespace);
        }
        let url = Url::parse(text).map_err(InvalidPublicUrl::NotAUrl)?;
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none_or(str::is_empty) {
            return Err(InvalidPublicUrl::Scheme);
        }
        if !url.username().is_empty() || url.password().is_some() || url.query().is_some() || url.fragment().is_some() {
            return Err(InvalidPublicUrl::Extra);
        }
        let base = url.as_str().trim_end_matches('/').to_owned();
        Ok(PublicUrl { url, base })
    }

    /// `http://<addr>`, as a person on this machine can open it: an unspecified address
    /// (`0.0.0.0`, `::`), which listens on every interface, becomes the loopback address.
    pub fn from_listen(addr: SocketAddr) -> Self {
        let ip = match addr.ip() {
            IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
            ip => ip,
        };
        let text = format!("http://{}", SocketAddr::new(ip, addr.port()));
        PublicUrl::parse(&text).expect("an http URL of a socket address is valid")
    }

    /// The base without its trailing `/`, e.g. `https://0x1f.ie`.
    pub fn as_str(&self) -> &str {
        &self.base
    }

    /// Whether short links are served over https (the cookie then gets `Secure`).
    pub fn is_https(&self) -> bool {
        self.url.scheme() == "https"
    }

    /// The parsed URL (scheme, host, port, path).
    pub fn url(&self) -> &Url {
        &self.url
    }

    /// The short URL of `id`: `{base}/{id}`.
    pub fn short_url(&self, id: &LinkId) -> String {
        let mut out = Vec::with_capacity(self.base.len() + 6);
        self.write_short_url(id, &mut out);
        String::from_utf8(out).expect("a base URL and an ID are text")
    }

    /// Appends [`PublicUrl::short_url`] to `out`, allocating nothing.
    pub fn write_short_url(&self, id: &LinkId, out: &mut Vec<u8>) {
        out.extend_from_slice(self.base.as_bytes());
        out.push(b'/');
        out.extend_from_slice(id.as_bytes());
    }
}

impl fmt::Display for PublicUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.base)
    }
}

impl fmt::Debug for PublicUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PublicUrl({})", self.base)
    }
}

impl std::str::FromStr for PublicUrl {
    type Err = InvalidPublicUrl;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PublicUrl::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalised_and_without_trailing_slash() {
        assert_eq!(PublicUrl::parse("https://0x1f.ie/").unwrap().as_str(), "https://0x1f.ie");
        assert_eq!(PublicUrl::parse("http://Example.COM:8080").unwrap().as_str(), "http://example.com:8080");
        assert_eq!(PublicUrl::parse("https://example.com/s/").unwrap().as_str(), "https://example.com/s");
        assert_eq!(PublicUrl::parse("https://bücher.example").unwrap().as_str(), "https://xn--bcher-kva.example");
    }

    #[test]
    fn the_scheme_decides_https_whatever_its_case() {
        assert!(PublicUrl::parse("HTTPS://0x1f.ie").unwrap().is_https());
        assert!(!PublicUrl::parse("http://0x1f.ie").unwrap().is_https());
    }

    #[test]
    fn whitespace_and_control_characters_are_refused_not_dropped() {
        for bad in
            ["https://0x1f.ie\n", " https://0x1f.ie", "https://0x1f.ie/\t", "https://0x1f\r.ie", "https://0x1f.ie\u{0}"]
        {
            assert_eq!(PublicUrl::parse(bad), Err(InvalidPublicUrl::Whitespace), "{bad:?}");
        }
    }

    #[test]
    fn other_schemes_missing_hosts_and_extras_are_refused() {
        assert_eq!(PublicUrl::parse("ftp://0x1f.ie"), Err(InvalidPublicUrl::Scheme));
        assert!(matches!(PublicUrl::parse("0x1f.ie"), Err(InvalidPublicUrl::NotAUrl(_))));
        assert_eq!(PublicUrl::parse("https://u:p@0x1f.ie"), Err(InvalidPublicUrl::Extra));
        assert_eq!(PublicUrl::parse("https://0x1f.ie/?x=1"), Err(InvalidPublicUrl::Extra));
        assert_eq!(PublicUrl::parse("https://0x1f.ie/#x"), Err(InvalidPublicUrl::Extra));
    }

    #[test]
    fn short_urls_and_listen_defaults() {
        let id = LinkId::parse("H83if").unwrap();
        assert_eq!(PublicUrl::parse("https://0x1f.ie/").unwrap().short_url(&id), "https://0x1f.ie/H83if");
        assert_eq!(PublicUrl::from_listen("0.0.0.0:8080".parse().unwrap()).as_str(), "http://127.0.0.1:8080");
        assert_eq!(PublicUrl::from_listen("[::]:80".parse().unwrap()).as_str(), "http://[::1]");
        assert_eq!(PublicUrl::from_listen("192.0.2.1:8080".parse().unwrap()).as_str(), "http://192.0.2.1:8080");
    }
}
