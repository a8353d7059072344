//! History as the CLI reads it: a link's entries, oldest first.

use serde_json::Value;

use crate::couch::{CouchClient, CouchError};
use crate::domain::LinkId;

/// Every entry of `link` (changes and gaps), oldest first.
pub async fn link_entries(history: &CouchClient, link: &LinkId) -> Result<Vec<Value>, CouchError> {
    history.docs_with_prefix(&format!("{}/", link.as_str())).await
}

/// The fields of a change entry that differ between before and after, in name order, `edit`
/// left out (it says who, not what): `(field, before, after)`, `None` where absent.
pub fn changed_fields(entry: &Value) -> Vec<(String, Option<Value>, Option<Value>)> {
    let empty = serde_json::Map::new();
    let before = entry["before"].as_object().unwrap_or(&empty);
    let after = entry["after"].as_object().unwrap_or(&empty);
    let mut names: Vec<&String> = before.keys().chain(after.keys()).filter(|k| *k != "edit").collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .filter(|k| before.get(*k) != after.get(*k))
        .map(|k| (k.clone(), before.get(k).cloned(), after.get(k).cloned()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_what_changed_is_listed_and_edit_is_not() {
        let entry = json!({"before": {"url": "https://a.example/", "tags": ["x"], "edit": {"by": "a"}},
            "after": {"url": "https://b.example/", "tags": ["x"], "inactive": true, "edit": {"by": "b"}}});
        let changed = changed_fields(&entry);
        assert_eq!(
            changed,
            vec![
                ("inactive".into(), None, Some(json!(true))),
                ("url".into(), Some(json!("https://a.example/")), Some(json!("https://b.example/"))),
            ]
        );
    }
}
