//! `Host`: a short domain's name as requests name it, and the list of domains one proxy serves
//! (docs/reference.md, "Several domains").

use std::fmt;

use super::PublicUrl;

/// A host name in the one form compared: lower case, international names in their `xn--` form
/// (IDNA), no port, no trailing dot. `Host: Go.ACME.example:8080` and `go.acme.example` are
/// one host.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Host(Box<str>);

/// Why a string names no host.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a host name")]
pub struct InvalidHost(pub String);

impl Host {
    /// A host name (with or without a port), in its compared form.
    ///
    /// ```
    /// use couchlink::domain::Host;
    /// assert_eq!(Host::parse("Go.ACME.example:8080").unwrap().as_str(), "go.acme.example");
    /// assert_eq!(Host::parse("bücher.example").unwrap().as_str(), "xn--bcher-kva.example");
    /// assert!(Host::parse("a b").is_err());
    /// ```
    pub fn parse(text: &str) -> Result<Host, InvalidHost> {
        let invalid = || InvalidHost(text.to_owned());
        let name = match text.strip_prefix('[') {
            // An IPv6 literal, with or without a port.
            Some(rest) => &text[..rest.find(']').ok_or_else(invalid)? + 2],
            None => text
                .rsplit_once(':')
                .filter(|(_, port)| port.bytes().all(|b| b.is_ascii_digit()))
                .map_or(text, |(h, _)| h),
        };
        let name = name.strip_suffix('.').unwrap_or(name);
        if name.is_empty() {
            return Err(invalid());
        }
        match url::Host::parse(name) {
            Ok(host) => Ok(Host(host.to_string().into_boxed_str())),
            Err(_) => Err(invalid()),
        }
    }

    /// The host's name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One short domain: its host, its links database and its short links' base URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Domain {
    /// The host requests name.
    pub host: Host,
    /// Its links database.
    pub db: String,
    /// Its short links' base (`http://HOST` unless named).
    pub public_url: PublicUrl,
}

/// The folder, beside the domains' own, of the access log of requests for no configured domain
/// (and their label in `/metrics`).
pub const UNKNOWN_HOSTS: &str = "_unknown";

/// Why a list of domains (`COUCHLINK_DOMAINS`, its file, `COUCHLINK_PUBLIC_URLS`) cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadDomains {
    /// An entry of the public URLs without `=`.
    #[error("{0:?} in the public URLs is not HOST=URL")]
    NotHostUrl(String),
    /// A public URL that is none.
    #[error("the public URL of {0}: {1}")]
    PublicUrl(String, super::InvalidPublicUrl),
    /// An entry of the domains without `=`.
    #[error("{0:?} in the domains is not HOST=DATABASE")]
    NotHostDatabase(String),
    /// A line of the domains file that is not two or three words.
    #[error("line {0} of the domains file is not HOST DATABASE [PUBLIC_URL]")]
    FileLine(usize),
    /// A line of the domains file whose public URL is none.
    #[error("line {0} of the domains file: {1}")]
    FileUrl(usize, super::InvalidPublicUrl),
    /// A host name that is none.
    #[error(transparent)]
    Host(#[from] InvalidHost),
    /// A domain with an empty database.
    #[error("{0} names no database")]
    NoDatabase(Host),
    /// A domain named twice.
    #[error("{0} is named twice")]
    Twice(Host),
    /// A host whose default public URL (`http://HOST`) is none.
    #[error("{0}: {1}")]
    Default(Host, super::InvalidPublicUrl),
    /// A public URL for a host that is no domain.
    #[error("a public URL is named for {0}, which is no domain")]
    NoSuchDomain(Host),
}

/// The domains of `COUCHLINK_DOMAINS` (`host=db,host=db`) or of a domains file (a line each:
/// `host db [public URL]`, `#` comments), public URLs from `COUCHLINK_PUBLIC_URLS`
/// (`host=url,...`) where named.
pub fn parse_domains(
    list: Option<&str>,
    file: Option<&str>,
    public_urls: Option<&str>,
) -> Result<Vec<Domain>, BadDomains> {
    let mut named = Vec::new();
    for pair in public_urls.unwrap_or_default().split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (host, url) = pair.split_once('=').ok_or_else(|| BadDomains::NotHostUrl(pair.to_owned()))?;
        let url = PublicUrl::parse(url.trim()).map_err(|e| BadDomains::PublicUrl(host.to_owned(), e))?;
        named.push((Host::parse(host.trim())?, url));
    }
    let mut entries: Vec<(Host, String, Option<PublicUrl>)> = Vec::new();
    for pair in list.unwrap_or_default().split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (host, db) = pair.split_once('=').ok_or_else(|| BadDomains::NotHostDatabase(pair.to_owned()))?;
        entries.push((Host::parse(host.trim())?, db.trim().to_owned(), None));
    }
    for (n, line) in file.unwrap_or_default().lines().enumerate() {
        let line = line.split('#').next().unwrap_or_default().trim();
        if line.is_empty() {
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        let (host, db, url) = match words[..] {
            [host, db] => (host, db, None),
            [host, db, url] => (host, db, Some(url)),
            _ => return Err(BadDomains::FileLine(n + 1)),
        };
        let url = url.map(PublicUrl::parse).transpose().map_err(|e| BadDomains::FileUrl(n + 1, e))?;
        entries.push((Host::parse(host)?, db.to_owned(), url));
    }
    let mut domains: Vec<Domain> = Vec::with_capacity(entries.len());
    for (host, db, url) in entries {
        if db.is_empty() {
            return Err(BadDomains::NoDatabase(host));
        }
        if domains.iter().any(|d| d.host == host) {
            return Err(BadDomains::Twice(host));
        }
        let public_url = match url.or_else(|| named.iter().find(|(h, _)| *h == host).map(|(_, u)| u.clone())) {
            Some(url) => url,
            None => match PublicUrl::parse(&format!("http://{host}")) {
                Ok(url) => url,
                Err(e) => return Err(BadDomains::Default(host, e)),
            },
        };
        domains.push(Domain { host, db, public_url });
    }
    if let Some((host, _)) = named.iter().find(|(h, _)| !domains.iter().any(|d| d.host == *h)) {
        return Err(BadDomains::NoSuchDomain(host.clone()));
    }
    Ok(domains)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_compare_without_port_case_or_trailing_dot() {
        for (given, wanted) in [
            ("0x1f.ie", "0x1f.ie"),
            ("0X1F.IE:8080", "0x1f.ie"),
            ("0x1f.ie.", "0x1f.ie"),
            ("Bücher.Example", "xn--bcher-kva.example"),
            ("127.0.0.1:8080", "127.0.0.1"),
            ("[::1]:8080", "[::1]"),
        ] {
            assert_eq!(Host::parse(given).unwrap().as_str(), wanted, "{given}");
        }
        for bad in ["", ":80", "a b", "exa mple.com", "[::1"] {
            assert!(Host::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn domains_from_the_variable_the_file_and_public_urls() {
        let domains = parse_domains(
            Some("0x1f.ie=links, Go.Acme.example=acme_links"),
            Some("# brands\nshort.beta.example beta_links https://beta.example/s\n"),
            Some("0x1f.ie=https://0x1f.ie"),
        )
        .unwrap();
        let seen: Vec<(&str, &str, &str)> =
            domains.iter().map(|d| (d.host.as_str(), d.db.as_str(), d.public_url.as_str())).collect();
        assert_eq!(
            seen,
            [
                ("0x1f.ie", "links", "https://0x1f.ie"),
                ("go.acme.example", "acme_links", "http://go.acme.example"),
                ("short.beta.example", "beta_links", "https://beta.example/s"),
            ]
        );
        assert!(parse_domains(Some("a.example=x,A.example=y"), None, None).unwrap_err().to_string().contains("twice"));
        assert!(parse_domains(Some("a.example"), None, None).unwrap_err().to_string().contains("HOST=DATABASE"));
        assert!(parse_domains(Some("a.example=x"), None, Some("b.example=https://b.example"))
            .unwrap_err()
            .to_string()
            .contains("no domain"));
        assert!(parse_domains(None, Some("a.example\n"), None).unwrap_err().to_string().contains("line 1"));
        assert_eq!(parse_domains(None, None, None).unwrap(), []);
    }
}
