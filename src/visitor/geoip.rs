//! Where a client address is, for the report's `--by country` and for the proxy's
//! `when.country` rules: a MaxMind-format database (GeoLite2 Country or City, DB-IP Lite) read
//! whole into memory once, and the ISO 3166-1 alpha-2 codes rules name.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

/// An ISO 3166-1 alpha-2 country code, in upper case as ISO writes it (`IE`, `GB`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Country([u8; 2]);

/// An address the database does not place in a country (private ranges, or not an address).
pub const NO_COUNTRY: &str = "(unknown)";

impl Country {
    /// Two upper-case ASCII letters, or nothing. (Whether ISO has assigned them is not
    /// checked: databases use a few codes of their own, such as `EU`.)
    pub fn parse(code: &str) -> Option<Country> {
        match code.as_bytes() {
            &[a, b] if a.is_ascii_uppercase() && b.is_ascii_uppercase() => Some(Country([a, b])),
            _ => None,
        }
    }

    /// The code.
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0).expect("ASCII letters")
    }
}

/// A MaxMind-format database (GeoLite2 Country or City, DB-IP Lite), read whole into memory.
pub struct GeoIp {
    reader: maxminddb::Reader<Vec<u8>>,
    path: PathBuf,
}

impl std::fmt::Debug for GeoIp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GeoIp").field("path", &self.path).field("type", &self.database_type()).finish()
    }
}

/// Why countries cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum GeoIpError {
    /// `--by country` without a database.
    #[error("--by country needs a GeoIP database: --geoip FILE.mmdb (GeoLite2 Country or City, DB-IP Lite)")]
    NoDatabase,
    /// The file could not be read.
    #[error("cannot read the GeoIP database {path}")]
    Read {
        /// Which.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Not a MaxMind DB file, or a damaged one.
    #[error("{path} is not a readable MaxMind DB file (GeoLite2 Country or City, DB-IP Lite)")]
    Invalid {
        /// Which.
        path: PathBuf,
        /// What the reader found.
        #[source]
        source: maxminddb::MaxMindDbError,
    },
    /// A database of something other than places.
    #[error("{path} is a {kind:?} database, which has no countries: --geoip needs a country or city database (GeoLite2 Country or City, DB-IP Lite)")]
    NoCountries {
        /// Which.
        path: PathBuf,
        /// Its `database_type`.
        kind: String,
    },
    /// A lookup met a damaged part of the file.
    #[error("the GeoIP database {path} is damaged: looking up {ip} failed")]
    Lookup {
        /// Which.
        path: PathBuf,
        /// The address looked up.
        ip: IpAddr,
        /// What the reader found.
        #[source]
        source: maxminddb::MaxMindDbError,
    },
}

impl GeoIp {
    /// Reads the database at `path`, refusing anything that is not a country or city database.
    pub fn open(path: &Path) -> Result<GeoIp, GeoIpError> {
        let bytes = std::fs::read(path).map_err(|source| GeoIpError::Read { path: path.to_owned(), source })?;
        let reader = maxminddb::Reader::from_source(bytes)
            .map_err(|source| GeoIpError::Invalid { path: path.to_owned(), source })?;
        let kind = reader.metadata().database_type.to_ascii_lowercase();
        if !kind.contains("country") && !kind.contains("city") {
            return Err(GeoIpError::NoCountries {
                path: path.to_owned(),
                kind: reader.metadata().database_type.clone(),
            });
        }
        Ok(GeoIp { reader, path: path.to_owned() })
    }

    /// The file read.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What the database says it is (`GeoLite2-Country`, `DBIP-City-Lite`, ...).
    pub fn database_type(&self) -> &str {
        &self.reader.metadata().database_type
    }

    /// When it was built, seconds since 1970.
    pub fn build_epoch(&self) -> u64 {
        self.reader.metadata().build_epoch
    }

    /// The ISO 3166 code of the country `ip` is in, if the database places it.
    pub fn country(&self, ip: IpAddr) -> Result<Option<&str>, GeoIpError> {
        let damaged = |source| GeoIpError::Lookup { path: self.path.clone(), ip, source };
        let found = self.reader.lookup(ip).map_err(damaged)?;
        found.decode_path(&maxminddb::path!["country", "iso_code"]).map_err(damaged)
    }
}
