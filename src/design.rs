//! The design documents couchlink installs in a links database, from the plain files under
//! `couchdb/` a reviewer reads: the validation function (`_design/couchlink`), the console's
//! views (`_design/console`) and the import's index (`_design/import`). `setup` writes them;
//! `import` runs the validation function itself and asks the index.

use serde_json::{json, Value};

/// The validation function's design document (`_design/couchlink`).
pub const DESIGN_DOC: &str = "couchlink";
/// The console's design document (`_design/console`): its search and newest-first views
/// (docs/console.md).
pub const CONSOLE_DESIGN_DOC: &str = "console";
/// The import's design document (`_design/import`): imported links by source system and key.
pub const IMPORT_DESIGN_DOC: &str = "import";
/// Its view.
pub const IMPORT_VIEW: &str = "by_source";

/// The validation function, reviewed as a plain file under `couchdb/`.
const VALIDATE_DOC_UPDATE: &str = include_str!("../couchdb/validate_doc_update.js");

/// The validation function as stored for a database whose editors hold one of `editor_roles`:
/// the file without its leading comment lines (CouchDB compiles the stored source as one
/// function expression), with the roles written in.
pub fn validate_doc_update_source(editor_roles: &[&str]) -> String {
    with_roles(&function(VALIDATE_DOC_UPDATE), &[("EDITOR_ROLES", editor_roles)])
}

/// `source` with each declaration `var NAME = [...];` of `roles` written with those roles: the
/// one way a design function learns which roles write (the files under `couchdb/` declare the
/// roles of a database named `links`, so that they can be read and tested as they are).
///
/// Panics when `source` does not declare one of them: the files are part of the build.
pub fn with_roles(source: &str, roles: &[(&str, &[&str])]) -> String {
    let mut source = source.to_owned();
    for (name, held) in roles {
        let start = source.find(&format!("var {name} = [")).unwrap_or_else(|| panic!("the function declares {name}"));
        let end = start + source[start..].find("];").unwrap_or_else(|| panic!("{name}'s declaration ends")) + 2;
        let declared = format!("var {name} = {};", serde_json::to_string(held).expect("strings serialise"));
        source.replace_range(start..end, &declared);
    }
    source
}

/// A function's source as stored from its file under `couchdb/`: without the file's leading
/// comment lines (CouchDB compiles the stored source as one function expression).
pub fn function(file: &str) -> String {
    file.lines().skip_while(|l| l.starts_with("//")).collect::<Vec<_>>().join("\n").trim().to_owned()
}

/// `_design/console`: the console's views, plain files under `couchdb/console/`.
pub fn console_design() -> Value {
    json!({"language": "javascript", "views": {
        "search": {"map": include_str!("../couchdb/console/search.js")},
        "recent": {"map": include_str!("../couchdb/console/recent.js")},
    }})
}

/// `_design/import`: imported links by `[system, key]`, `couchdb/import/by_source.js`.
pub fn import_design() -> Value {
    json!({"language": "javascript", "views": {
        IMPORT_VIEW: {"map": include_str!("../couchdb/import/by_source.js")},
    }})
}
