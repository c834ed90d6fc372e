//! Request fields whose rule is stated once: the handler reads the field with it and the request
//! type's schema is built from it (`#[schema(schema_with = …)]`), so the two cannot drift.

use domain::validation::{FieldError, bounded_text, optional_string};
use serde_json::{Map, Value};
use utoipa::openapi::schema::{Object, ObjectBuilder, SchemaType, Type};

/// A member that only ever holds `value` (`"object": "event"`, `"received": true`): its type
/// and that one value.
pub fn constant(schema_type: Type, value: impl Into<Value>) -> Object {
    ObjectBuilder::new()
        .schema_type(schema_type)
        .enum_values(Some([value.into()]))
        .build()
}

/// No control characters; with `trim`, at least one visible character.
const UNTRIMMED: &str = r"^[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$";
const TRIMMED: &str = r"^\s*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$";

/// An optional text member: `min..=max` characters (after trimming when `trim`), none of them
/// control characters.
pub struct Text {
    pub name: &'static str,
    pub min: usize,
    pub max: usize,
    pub trim: bool,
    /// What the field is for; the length rule is added to it.
    pub about: &'static str,
}

impl Text {
    /// The member, trimmed when the rule says so; an invalid one is recorded in `errors`.
    pub fn read(&self, body: &Map<String, Value>, errors: &mut Vec<FieldError>) -> Option<String> {
        optional_string(body, self.name, errors)
            .and_then(|v| bounded_text(self.name, v, self.min, self.max, self.trim, errors))
    }

    pub fn schema(&self) -> Object {
        let after = if self.trim { " after trimming" } else { "" };
        let about = if self.about.is_empty() {
            String::new()
        } else {
            format!("{} ", self.about)
        };
        ObjectBuilder::new()
            // Optional: absent and `null` both mean "not given".
            .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
            .min_length(Some(self.min))
            .max_length(Some(self.max))
            .pattern(Some(if self.trim { TRIMMED } else { UNTRIMMED }))
            .description(Some(format!(
                "{about}{}–{} characters{after}, no control characters.",
                self.min, self.max
            )))
            .build()
    }
}

/// Checks that a request type declares exactly the members its `parse` reads: each declared
/// member is read (a wrong-typed value is an error on that member, not `unknown_field`), and an
/// undeclared one is `unknown_field`.
#[cfg(test)]
pub fn assert_declares_what_it_reads<T: utoipa::PartialSchema, R>(
    parse: impl Fn(&Map<String, Value>) -> crate::error::ApiResult<R>,
) {
    use crate::error::ApiError;
    let errors = |body: Map<String, Value>| match parse(&body) {
        Err(ApiError::Validation(errors)) => errors,
        _ => panic!("{body:?} is not refused"),
    };
    let schema = serde_json::to_value(T::schema()).unwrap();
    let declared = schema["properties"].as_object().expect("an object schema");
    for name in declared.keys() {
        let found = errors(Map::from_iter([(name.clone(), serde_json::json!({}))]));
        assert!(
            found
                .iter()
                .any(|e| &e.field == name && e.code != "unknown_field"),
            "{name}: {found:?}"
        );
    }
    let found = errors(Map::from_iter([("undeclared".into(), Value::Null)]));
    assert!(
        found
            .iter()
            .any(|e| e.field == "undeclared" && e.code == "unknown_field"),
        "{found:?}"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const FIELD: Text = Text {
        name: "note",
        min: 1,
        max: 5,
        trim: true,
        about: "",
    };

    #[test]
    fn the_schema_states_the_rule_the_reader_applies() {
        let schema = serde_json::to_value(FIELD.schema()).unwrap();
        assert_eq!(schema["minLength"], 1);
        assert_eq!(schema["maxLength"], 5);
        let read = |v: Value| {
            let mut errors = Vec::new();
            let body = json!({ "note": v }).as_object().unwrap().clone();
            (FIELD.read(&body, &mut errors), errors)
        };
        assert_eq!(read(json!("  abcde  ")).0.as_deref(), Some("abcde"));
        assert_eq!(read(json!("abcdef")).1[0].code, "too_long");
        assert_eq!(read(json!("   ")).1[0].code, "too_short");
        assert_eq!(read(json!("a\u{7}b")).1[0].code, "invalid_format");
        assert_eq!(read(json!(5)).1[0].code, "invalid_type");
    }
}
