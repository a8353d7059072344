//! `Roles`: the CouchDB roles that read and edit one links database (docs/reference.md, "Who may do what").

/// The role names every database shared before roles belonged to one database. Still admitted
/// where an admin has not dropped them (`couchlink setup --drop-shared-roles`), since accounts
/// made for an older couchlink carry them.
pub const SHARED_READER: &str = "reader";
/// See [`SHARED_READER`].
pub const SHARED_EDITOR: &str = "editor";

/// The roles of one links database: its reader (the proxy), its editors (people), the
/// proxies' own role in its clicks database, and the recorder's in its history database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Roles {
    /// May read links and `_changes`, never write.
    pub reader: String,
    /// May create and edit links, never delete them.
    pub editor: String,
    /// May write counts to the clicks database (the proxy's account holds it besides the
    /// reader role); nothing else: a reader who is not a proxy cannot write counts.
    pub proxy: String,
    /// May write history entries to the history database (the proxy's account holds it: every
    /// proxy records); nothing else, so an editor can neither forge nor erase history.
    pub recorder: String,
}

/// A role name CouchDB would not take.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} cannot be a CouchDB role: it must be non-empty and not start with \"_\" (CouchDB's own roles)")]
pub struct InvalidRole(pub String);

impl Roles {
    /// The roles of database `db`: as given, or `<db>:reader` and `<db>:editor` (and the proxy
    /// role `<db>:proxy`, see [`Roles::with_proxy`]), so that an account made for one database
    /// is a stranger to every other on the same CouchDB.
    ///
    /// ```
    /// use couchlink::domain::Roles;
    /// let roles = Roles::of_database("links", None, None).unwrap();
    /// assert_eq!((roles.reader.as_str(), roles.editor.as_str()), ("links:reader", "links:editor"));
    /// ```
    pub fn of_database(db: &str, reader: Option<&str>, editor: Option<&str>) -> Result<Roles, InvalidRole> {
        let role = |given: Option<&str>, kind: &str| {
            let name = given.filter(|g| !g.is_empty()).map_or_else(|| format!("{db}:{kind}"), str::to_owned);
            if name.starts_with('_') || name.trim().is_empty() {
                return Err(InvalidRole(name));
            }
            Ok(name)
        };
        let roles = Roles {
            reader: role(reader, "reader")?,
            editor: role(editor, "editor")?,
            proxy: role(None, "proxy")?,
            recorder: role(None, "recorder")?,
        };
        roles.distinct()
    }

    /// These roles with the proxies' role named `proxy` (`COUCHLINK_PROXY_ROLE`) instead of
    /// `<db>:proxy`.
    pub fn with_proxy(self, proxy: Option<&str>) -> Result<Roles, InvalidRole> {
        match proxy.filter(|p| !p.is_empty()) {
            None => Ok(self),
            Some(name) if name.starts_with('_') || name.trim().is_empty() => Err(InvalidRole(name.to_owned())),
            Some(name) => Roles { proxy: name.to_owned(), ..self }.distinct(),
        }
    }

    /// The roles, when no two are the same.
    fn distinct(self) -> Result<Roles, InvalidRole> {
        if self.reader == self.editor || self.proxy == self.reader || self.proxy == self.editor {
            return Err(InvalidRole(if self.reader == self.editor { self.reader } else { self.proxy }));
        }
        if [&self.reader, &self.editor, &self.proxy].contains(&&self.recorder) {
            return Err(InvalidRole(self.recorder));
        }
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_are_the_databases_own_unless_named() {
        let acme = Roles::of_database("acme_links", None, None).unwrap();
        assert_eq!(
            acme,
            Roles {
                reader: "acme_links:reader".into(),
                editor: "acme_links:editor".into(),
                proxy: "acme_links:proxy".into(),
                recorder: "acme_links:recorder".into(),
            }
        );
        assert_ne!(acme, Roles::of_database("links", None, None).unwrap());
        let named = Roles::of_database("links", Some("proxy"), Some("marketing")).unwrap();
        assert_eq!(
            named,
            Roles {
                reader: "proxy".into(),
                editor: "marketing".into(),
                proxy: "links:proxy".into(),
                recorder: "links:recorder".into()
            }
        );
        assert_eq!(named.clone().with_proxy(Some("counter")).unwrap().proxy, "counter");
        assert!(named.clone().with_proxy(Some("marketing")).is_err(), "a proxy role of its own");
        assert!(named.with_proxy(Some("_admin")).is_err());
        assert!(Roles::of_database("links", Some("_admin"), None).is_err());
        assert!(Roles::of_database("links", Some("same"), Some("same")).is_err());
    }
}
