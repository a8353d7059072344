//! History as the CLI reads it: a link's entries, oldest first.

use serde_json::Value;

use crate::couch::{CouchClient, CouchError};
use crate::domain::LinkId;

/// Every entry of `link` (changes and gaps), oldest first.
pub async fn link_entries(history: &CouchClient, link: &LinkId) -> Result<Vec<Value>, CouchError> {
    history.docs_with_prefix(&format!("{}/", link.as_str())).await
}

/// The fields of a change entry that differ between before and after, in name order, `edit`
/// left out (it says who, not what): `(field, before, after)`, `None` where absent. A field the
/// entry kept as its size and digest (too long to keep) is `{"large": {"bytes", "blake2b"}}`,
/// the same on both sides when it did not change.
pub fn changed_fields(entry: &Value) -> Vec<(String, Option<Value>, Option<Value>)> {
    let empty = serde_json::Map::new();
    let side = |name: &str| {
        let fields = entry[name].as_object().unwrap_or(&empty);
        let large = entry["large"][name].as_object().unwrap_or(&empty);
        move |k: &str| fields.get(k).cloned().or_else(|| large.get(k).map(|l| serde_json::json!({"large": l})))
    };
    let (before, after) = (side("before"), side("after"));
    let mut names: Vec<&String> = ["before", "after"]
        .iter()
        .flat_map(|s| {
            let fields = entry[*s].as_object().unwrap_or(&empty).keys();
            fields.chain(entry["large"][*s].as_object().unwrap_or(&empty).keys())
        })
        .filter(|k| *k != "edit")
        .collect();
    names.sort();
    names.dedup();
    names.into_iter().map(|k| (k.clone(), before(k), after(k))).filter(|(_, b, a)| b != a).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The cases the console's model is held to as well (console/test/history.test.js).
    #[test]
    fn what_changed_is_as_the_shared_table_says() {
        let table: Value = serde_json::from_str(include_str!("../../tests/history_cases.json")).unwrap();
        let cases = table["cases"].as_array().unwrap();
        assert!(cases.len() >= 5);
        for case in cases {
            let entry = json!({"before": case["before"], "after": case["after"], "large": case.get("large")});
            let listed: Vec<Value> = changed_fields(&entry)
                .into_iter()
                .map(|(k, b, a)| json!([k, b.unwrap_or(Value::Null), a.unwrap_or(Value::Null)]))
                .collect();
            assert_eq!(Value::Array(listed), case["changed"], "{case}");
        }
    }
}
