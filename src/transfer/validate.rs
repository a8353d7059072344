//! The database's own validation functions, run here on every document before any is written:
//! `--dry-run` can then give CouchDB's exact reasons, and an import writes nothing unless
//! every row would pass. QuickJS runs them, as CouchDB 3.4+ can; the functions are plain ES5.

use rquickjs::{Context, Function, Persistent, Runtime, Value as JsValue};
use serde_json::Value;

/// Why the validation functions could not be run.
#[derive(Debug, thiserror::Error)]
pub enum ValidatorError {
    /// The database has none: it was never set up.
    #[error("the database has no validation function: run `couchlink setup` first (imports are checked against it)")]
    Missing,
    /// The JavaScript engine could not start.
    #[error("cannot start the JavaScript engine")]
    Engine(#[source] rquickjs::Error),
    /// A design document's function does not compile.
    #[error("the validation function of {design} does not compile: {message}")]
    Compile {
        /// The design document.
        design: String,
        /// The engine's words.
        message: String,
    },
}

/// Why a document does not pass the validation functions. Comparable (tests hold checks to
/// `Ok(())`), so the engine's errors are kept as their words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Rejected {
    /// A function refused it: the `forbidden` or `unauthorized` it threw, in its own words
    /// (free text, which [`crate::domain::Refusal::parse`] reads its field from).
    #[error("{0}")]
    Refused(String),
    /// The document, the account or `_security` is no JSON the engine takes.
    #[error("the document cannot be given to the validation function")]
    NotGiven,
    /// A compiled function could not be taken up again: the engine's words.
    #[error("{0}")]
    Engine(String),
    /// A function threw something else, or the engine failed while it ran.
    #[error("the validation function of {design} failed: {why}")]
    Failed {
        /// The design document.
        design: String,
        /// What it threw (its message, or it as JSON), or the engine's words.
        why: String,
    },
}

/// The validation functions of one database, ready to run as one account.
pub struct Validator {
    context: Context,
    functions: Vec<(String, Persistent<Function<'static>>)>,
    user_ctx: String,
    sec_obj: String,
    // Dropped last: the context and functions live in it.
    _runtime: Runtime,
}

impl Validator {
    /// Compiles `functions` (design document ID, source), to run as `user_ctx` (`{db, name,
    /// roles}`) under `sec_obj` (the database's `_security`), as CouchDB calls them.
    pub fn new(functions: &[(String, String)], user_ctx: &Value, sec_obj: &Value) -> Result<Validator, ValidatorError> {
        if functions.is_empty() {
            return Err(ValidatorError::Missing);
        }
        let runtime = Runtime::new().map_err(ValidatorError::Engine)?;
        let context = Context::full(&runtime).map_err(ValidatorError::Engine)?;
        let compiled = context.with(|ctx| {
            functions
                .iter()
                .map(|(design, source)| {
                    let function: Function = ctx
                        .eval(format!("({source})"))
                        .map_err(|e| ValidatorError::Compile { design: design.clone(), message: exception(&ctx, e) })?;
                    Ok((design.clone(), Persistent::save(&ctx, function)))
                })
                .collect::<Result<Vec<_>, ValidatorError>>()
        })?;
        Ok(Validator {
            context,
            functions: compiled,
            user_ctx: user_ctx.to_string(),
            sec_obj: sec_obj.to_string(),
            _runtime: runtime,
        })
    }

    /// `Err` when a function refuses `doc` as a new document, in its own words (the
    /// `forbidden` or `unauthorized` it throws), as CouchDB would answer, or fails on it.
    pub fn check(&self, doc: &Value) -> Result<(), Rejected> {
        let doc = doc.to_string();
        self.context.with(|ctx| {
            let parse = |json: &str| ctx.json_parse(json.to_owned());
            let (new_doc, user_ctx, sec_obj) = match (parse(&doc), parse(&self.user_ctx), parse(&self.sec_obj)) {
                (Ok(d), Ok(u), Ok(s)) => (d, u, s),
                _ => return Err(Rejected::NotGiven),
            };
            for (design, function) in &self.functions {
                let function = function.clone().restore(&ctx).map_err(|e| Rejected::Engine(e.to_string()))?;
                let args = (new_doc.clone(), JsValue::new_null(ctx.clone()), user_ctx.clone(), sec_obj.clone());
                if let Err(e) = function.call::<_, JsValue>(args) {
                    return Err(refusal(&ctx, e, design));
                }
            }
            Ok(())
        })
    }
}

/// A thrown `{forbidden: reason}` or `{unauthorized: reason}` as its reason; anything else as
/// the error it is.
fn refusal<'js>(ctx: &rquickjs::Ctx<'js>, error: rquickjs::Error, design: &str) -> Rejected {
    let failed = |why: String| Rejected::Failed { design: design.to_owned(), why };
    if let rquickjs::Error::Exception = error {
        let thrown = ctx.catch();
        if let Some(object) = thrown.as_object() {
            for key in ["forbidden", "unauthorized"] {
                if let Ok(reason) = object.get::<_, String>(key) {
                    return Rejected::Refused(reason);
                }
            }
        }
        return failed(describe(ctx, thrown));
    }
    failed(error.to_string())
}

fn exception<'js>(ctx: &rquickjs::Ctx<'js>, error: rquickjs::Error) -> String {
    match error {
        rquickjs::Error::Exception => describe(ctx, ctx.catch()),
        other => other.to_string(),
    }
}

fn describe<'js>(ctx: &rquickjs::Ctx<'js>, value: JsValue<'js>) -> String {
    if let Some(e) = value.as_exception() {
        return e.message().unwrap_or_else(|| "an exception".into());
    }
    ctx.json_stringify(value).ok().flatten().and_then(|s| s.to_string().ok()).unwrap_or_else(|| "an exception".into())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn shipped() -> Validator {
        let source = crate::design::validate_doc_update_source(&["links:editor"]);
        let user = json!({"db": "links", "name": "ed", "roles": ["links:editor"]});
        Validator::new(&[("_design/couchlink".into(), source)], &user, &json!({})).unwrap()
    }

    #[test]
    fn the_shipped_function_passes_a_link_and_refuses_with_its_own_reasons() {
        let validator = shipped();
        assert_eq!(validator.check(&json!({"_id": "H83if", "url": "https://example.com/", "inactive": false})), Ok(()));
        let reason = validator.check(&json!({"_id": "H83if", "url": "ftp://example.com/"})).unwrap_err().to_string();
        assert!(reason.contains("Only \"http://\" and \"https://\""), "{reason}");
        let reason =
            validator.check(&json!({"_id": "toolong", "url": "https://example.com/"})).unwrap_err().to_string();
        assert!(reason.contains("exactly 5"), "{reason}");
    }

    /// Every field the function checks names itself in its refusal's path, read by
    /// `Refusal::parse` as the console's model reads it (the same table: console/test).
    #[test]
    fn every_refusal_names_its_field_as_the_shared_table_says() {
        let table: Value = serde_json::from_str(include_str!("../../tests/refusal_fields.json")).unwrap();
        let cases = table["cases"].as_array().unwrap();
        assert!(cases.len() >= 30);
        let source = crate::design::validate_doc_update_source(&["links:editor"]);
        for case in cases {
            let user = match case.get("user") {
                Some(user) => json!({"db": "links", "name": user["name"], "roles": user["roles"]}),
                None => json!({"db": "links", "name": "ed", "roles": ["links:editor"]}),
            };
            let validator = Validator::new(&[("_design/couchlink".into(), source.clone())], &user, &json!({})).unwrap();
            let reason = validator.check(&case["doc"]).expect_err(&case["doc"].to_string()).to_string();
            let refusal = crate::domain::Refusal::parse(&reason);
            assert_eq!(refusal.field(), case["field"].as_str(), "{reason}");
            assert!(!refusal.message().starts_with('['), "{reason}");
        }
    }

    /// The function takes the password hashes the proxy's reader takes (`PasswordHash::parse`
    /// holds itself to the same table), and refuses the rest under `[password]`.
    #[test]
    fn the_password_field_is_judged_as_the_proxy_reads_it() {
        let table: Value = serde_json::from_str(include_str!("../../tests/password_cases.json")).unwrap();
        let validator = shipped();
        for case in table["cases"].as_array().unwrap() {
            let doc = json!({"_id": "H83if", "url": "https://example.com/", "password": case["password"]});
            let judged = validator.check(&doc);
            assert_eq!(judged.is_ok(), case["ok"].as_bool().unwrap(), "{}: {judged:?}", case["why"]);
            if let Err(reason) = judged {
                assert_eq!(crate::domain::Refusal::parse(&reason.to_string()).field(), Some("password"), "{reason}");
            }
        }
    }

    /// What a write may state of itself in `edit`: the form the recorder keeps and the
    /// history's function accepts (src/domain/edit.rs, src/history/entry.rs: the same table).
    #[test]
    fn the_edit_field_is_judged_as_the_shared_table_says() {
        let table: Value = serde_json::from_str(include_str!("../../tests/edit_cases.json")).unwrap();
        let source = crate::design::validate_doc_update_source(&["links:editor"]);
        let user = json!({"db": "links", "name": "maria", "roles": ["links:editor"]});
        let validator = Validator::new(&[("_design/couchlink".into(), source)], &user, &json!({})).unwrap();
        for case in table["cases"].as_array().unwrap() {
            let mut edit = json!({"by": "maria"});
            edit[case["field"].as_str().unwrap()] = case["value"].clone();
            let judged = validator.check(&json!({"_id": "H83if", "url": "https://example.com/", "edit": edit}));
            assert_eq!(judged.is_ok(), case["valid"] == true, "{case}: {judged:?}");
        }
    }

    #[test]
    fn an_account_without_the_editor_role_is_refused_as_couchdb_would() {
        let source = crate::design::validate_doc_update_source(&["links:editor"]);
        let user = json!({"db": "links", "name": "reader", "roles": ["links:reader"]});
        let validator = Validator::new(&[("_design/couchlink".into(), source)], &user, &json!({})).unwrap();
        let reason = validator.check(&json!({"_id": "H83if", "url": "https://example.com/"})).unwrap_err().to_string();
        assert!(reason.contains("may not change links"), "{reason}");
    }

    #[test]
    fn no_function_or_a_broken_one_is_an_error_not_a_pass() {
        assert!(matches!(Validator::new(&[], &json!({}), &json!({})), Err(ValidatorError::Missing)));
        let broken = [("_design/x".to_owned(), "function (newDoc) {".to_owned())];
        assert!(matches!(Validator::new(&broken, &json!({}), &json!({})), Err(ValidatorError::Compile { .. })));
        let throws = [("_design/x".to_owned(), "function (newDoc) { null.x; }".to_owned())];
        let reason = Validator::new(&throws, &json!({}), &json!({})).unwrap().check(&json!({})).unwrap_err();
        assert!(matches!(&reason, Rejected::Failed { design, .. } if design == "_design/x"), "{reason}");
        assert!(reason.to_string().contains("_design/x failed"), "{reason}");
    }
}
