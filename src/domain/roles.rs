//! `Roles`: the CouchDB roles that read and edit one links database (docs/reference.md, "Who may do what").

/// The role names every database shared before roles belonged to one database. Still admitted
/// where an admin has not dropped them (`couchlink setup --drop-shared-roles`), since accounts
/// made for an older couchlink carry them.
pub const SHARED_READER: &str = "reader";
/// See [`SHARED_READER`].
pub const SHARED_EDITOR: &str = "editor";

/// The roles of one links database: its reader (the proxy) and its editors (people).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Roles {
    /// May read links and `_changes`, never write.
    pub reader: String,
    /// May create and edit links, never delete them.
    pub editor: String,
}

/// A role name CouchDB would not take.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} cannot be a CouchDB role: it must be non-empty and not start with \"_\" (CouchDB's own roles)")]
pub struct InvalidRole(pub String);

impl Roles {
    /// The roles of database `db`: as given, or `<db>:reader` and `<db>:editor`, so that an
    /// account made for one database is a stranger to every other on the same CouchDB.
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
        let roles = Roles { reader: role(reader, "reader")?, editor: role(editor, "editor")? };
        if roles.reader == roles.editor {
            return Err(InvalidRole(roles.reader));
        }
        Ok(roles)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_are_the_databases_own_unless_named() {
        let acme = Roles::of_database("acme_links", None, None).unwrap();
        assert_eq!(acme, Roles { reader: "acme_links:reader".into(), editor: "acme_links:editor".into() });
        assert_ne!(acme, Roles::of_database("links", None, None).unwrap());
        let named = Roles::of_database("links", Some("proxy"), Some("marketing")).unwrap();
        assert_eq!(named, Roles { reader: "proxy".into(), editor: "marketing".into() });
        assert!(Roles::of_database("links", Some("_admin"), None).is_err());
        assert!(Roles::of_database("links", Some("same"), Some("same")).is_err());
    }
}
