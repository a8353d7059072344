//! A links database's companions: the databases beside it where its services keep their own
//! documents (live counts, history; the ones to come take a variant here), and the one setting
//! that says where each lives (docs/reference.md, "Configuration").
//!
//! Every command and `serve` read a companion's place through [`CompanionDb`], so that setup,
//! the proxies, the console and the offline tools can never disagree about which database holds
//! a links database's history or counts.

use std::fmt;

/// A service that keeps its documents in a database of its own beside a links database.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Companion {
    /// Live counts (`<db>_clicks`), written by the proxies.
    Clicks,
    /// Every revision of every link (`<db>_history`), recorded by the proxies.
    History,
}

impl Companion {
    /// Every companion, in the order setup makes them.
    pub const ALL: [Companion; 2] = [Companion::Clicks, Companion::History];

    /// Its name, as in `<db>_NAME` and in what couchlink says of it.
    pub fn name(self) -> &'static str {
        match self {
            Companion::Clicks => "clicks",
            Companion::History => "history",
        }
    }

    /// The environment variable that places it (its flag is `--NAME-db`).
    pub fn variable(self) -> &'static str {
        match self {
            Companion::Clicks => "COUCHLINK_CLICKS_DB",
            Companion::History => "COUCHLINK_HISTORY_DB",
        }
    }

    /// Its database beside links database `db` when none is named: `<db>_NAME`.
    ///
    /// ```
    /// use couchlink::domain::Companion;
    /// assert_eq!(Companion::History.beside("links"), "links_history");
    /// ```
    pub fn beside(self, db: &str) -> String {
        format!("{db}_{}", self.name())
    }
}

impl fmt::Display for Companion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where a companion lives, as its setting says: beside its links database (`<db>_NAME`, the
/// default), in a database named outright, or nowhere (`off`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum CompanionDb {
    /// `<db>_NAME`, each links database its own.
    #[default]
    Beside,
    /// This database, whatever the links database.
    Named(String),
    /// None: the service is off.
    Off,
}

/// Why a companion's setting cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompanionError {
    /// Not a name CouchDB takes for a database.
    #[error(
        "{0:?} cannot be a CouchDB database: a name starts with a lowercase letter, holds only lowercase \
         letters, digits and _$()+- and is at most 238 bytes (or `off`; empty: the default)"
    )]
    InvalidName(String),
    /// A named database with several domains: each links database has its own.
    #[error(
        "{} names one {companion} database; with several domains each has its own <db>_{companion} (or set it to off)",
        .companion.variable()
    )]
    SharedByDomains {
        /// The companion named.
        companion: Companion,
    },
    /// A database too long for CouchDB (its name, or the default made of a long links
    /// database's name).
    #[error("{name:?} cannot be the {companion} database: CouchDB takes names of at most 238 bytes ({} is {})", .companion.variable(), .name.len())]
    TooLong {
        /// The companion.
        companion: Companion,
        /// The name it would have.
        name: String,
    },
    /// The companion would be the links database itself.
    #[error("{} names the links database {db} itself: a {companion} database is one of its own", .companion.variable())]
    IsLinks {
        /// The companion.
        companion: Companion,
        /// The links database.
        db: String,
    },
    /// Two companions in one database: each one's validation would refuse the other's writes.
    #[error("COUCHLINK_CLICKS_DB and COUCHLINK_HISTORY_DB both name {0}: each needs a database of its own")]
    Shared(String),
    /// The command needs the companion, and it is off.
    #[error("the {companion} is off ({} is off): there is no {companion} database to use", .companion.variable())]
    Off {
        /// The companion that is off.
        companion: Companion,
    },
}

impl CompanionDb {
    /// A setting's value: `off`, a database name, or empty for the default.
    ///
    /// ```
    /// use couchlink::domain::CompanionDb;
    /// assert_eq!(CompanionDb::parse("off"), Ok(CompanionDb::Off));
    /// assert_eq!(CompanionDb::parse(""), Ok(CompanionDb::Beside));
    /// assert_eq!(CompanionDb::parse("audit"), Ok(CompanionDb::Named("audit".into())));
    /// assert!(CompanionDb::parse("Audit").is_err());
    /// ```
    pub fn parse(value: &str) -> Result<CompanionDb, CompanionError> {
        match value {
            "" => Ok(CompanionDb::Beside),
            "off" => Ok(CompanionDb::Off),
            // CouchDB takes `/` in a name, but the console's passage cannot name such a
            // database (it refuses escaped paths): a companion the console could not show.
            name if name.contains('/') => Err(CompanionError::InvalidName(name.to_owned())),
            name if is_database_name(name) => Ok(CompanionDb::Named(name.to_owned())),
            name => Err(CompanionError::InvalidName(name.to_owned())),
        }
    }

    /// The database `companion` of links database `db` lives in (`None`: off), checked: a name
    /// CouchDB takes, and not the links database itself.
    pub fn resolve(&self, companion: Companion, db: &str) -> Result<Option<String>, CompanionError> {
        let Some(name) = self.database(companion, db) else { return Ok(None) };
        if name.len() > 238 {
            return Err(CompanionError::TooLong { companion, name });
        }
        if name == db {
            return Err(CompanionError::IsLinks { companion, db: db.to_owned() });
        }
        Ok(Some(name))
    }

    /// The database `companion` of links database `db` lives in (`None`: off), unchecked (see
    /// [`CompanionDb::resolve`]).
    pub fn database(&self, companion: Companion, db: &str) -> Option<String> {
        match self {
            CompanionDb::Beside => Some(companion.beside(db)),
            CompanionDb::Named(name) => Some(name.clone()),
            CompanionDb::Off => None,
        }
    }

    /// The database, for a command that cannot go on without it.
    pub fn required(&self, companion: Companion, db: &str) -> Result<String, CompanionError> {
        self.resolve(companion, db)?.ok_or(CompanionError::Off { companion })
    }

    /// This setting, fit for `domains` links databases at once (one named database cannot be
    /// every domain's).
    pub fn for_domains(self, companion: Companion, domains: usize) -> Result<CompanionDb, CompanionError> {
        match self {
            CompanionDb::Named(_) if domains > 1 => Err(CompanionError::SharedByDomains { companion }),
            fine => Ok(fine),
        }
    }

    /// Whether this setting names a database outright (a command that prints another command
    /// must name it too).
    pub fn named(&self) -> Option<&str> {
        match self {
            CompanionDb::Named(name) => Some(name),
            _ => None,
        }
    }
}

/// The clicks and history databases of links database `db`, each resolved (see
/// [`CompanionDb::resolve`]) and never one database for both.
pub fn companions(
    db: &str,
    clicks: &CompanionDb,
    history: &CompanionDb,
) -> Result<(Option<String>, Option<String>), CompanionError> {
    let clicks = clicks.resolve(Companion::Clicks, db)?;
    let history = history.resolve(Companion::History, db)?;
    match (&clicks, &history) {
        (Some(c), Some(h)) if c == h => Err(CompanionError::Shared(c.clone())),
        _ => Ok((clicks, history)),
    }
}

impl fmt::Display for CompanionDb {
    /// As the setting is written (the default: empty).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CompanionDb::Beside => Ok(()),
            CompanionDb::Named(name) => f.write_str(name),
            CompanionDb::Off => f.write_str("off"),
        }
    }
}

/// CouchDB's rule for a database's name: `^[a-z][a-z0-9_$()+/-]*$`, at most 238 bytes.
pub fn is_database_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_lowercase())
        && bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_$()+-/".contains(&b))
        && name.len() <= 238
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_setting_places_every_companion_one_way() {
        for companion in Companion::ALL {
            let beside = companion.beside("acme");
            assert_eq!(CompanionDb::Beside.database(companion, "acme"), Some(beside));
            assert_eq!(CompanionDb::parse("audit").unwrap().database(companion, "acme").as_deref(), Some("audit"));
            assert_eq!(CompanionDb::Off.database(companion, "acme"), None);
            assert_eq!(CompanionDb::Off.required(companion, "acme"), Err(CompanionError::Off { companion }));
            let shared = CompanionDb::parse("audit").unwrap().for_domains(companion, 2).unwrap_err();
            assert!(shared.to_string().starts_with(companion.variable()), "{shared}");
            assert_eq!(CompanionDb::Beside.for_domains(companion, 2), Ok(CompanionDb::Beside));
            assert_eq!(CompanionDb::Off.for_domains(companion, 2), Ok(CompanionDb::Off));
        }
        assert_eq!(Companion::Clicks.beside("links"), "links_clicks");
        assert_eq!(Companion::History.beside("links"), "links_history");
    }

    #[test]
    fn a_companion_is_never_its_links_database_nor_the_other_companion_nor_too_long() {
        let named = |n: &str| CompanionDb::parse(n).unwrap();
        assert_eq!(
            named("links").resolve(Companion::History, "links"),
            Err(CompanionError::IsLinks { companion: Companion::History, db: "links".into() })
        );
        assert_eq!(companions("links", &named("same"), &named("same")), Err(CompanionError::Shared("same".into())));
        assert_eq!(
            companions("links", &CompanionDb::Beside, &CompanionDb::Off),
            Ok((Some("links_clicks".into()), None))
        );
        let long = "l".repeat(232);
        let too_long = CompanionDb::Beside.resolve(Companion::Clicks, &long).unwrap_err();
        assert!(matches!(too_long, CompanionError::TooLong { .. }), "{too_long}");
        assert!(too_long.to_string().contains("238"), "{too_long}");
        assert!(CompanionDb::Beside.resolve(Companion::Clicks, &"l".repeat(231)).unwrap().is_some());
        assert!(CompanionDb::parse("h/x").is_err(), "the console could not reach it");
    }

    #[test]
    fn a_setting_is_written_back_as_it_was_read() {
        for written in ["", "off", "audit", "a$(1)+x-z_0"] {
            assert_eq!(CompanionDb::parse(written).unwrap().to_string(), written);
        }
    }

    #[test]
    fn only_names_couchdb_takes_are_databases() {
        for bad in ["Audit", "_users", "1links", "links history", "links.history", "é", "a/b", &"a".repeat(239)] {
            assert!(CompanionDb::parse(bad).is_err(), "{bad:?}");
        }
        assert!(is_database_name(&"a".repeat(238)));
    }
}
