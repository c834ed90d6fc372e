use serde::Serialize;

/// One problem with one input field; a 422 lists all of them at once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FieldError {
    pub field: String,
    pub code: &'static str,
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            code,
            message: message.into(),
        }
    }

    pub fn required(field: &str) -> Self {
        Self::new(field, "required", format!("{field} is required"))
    }

    pub fn not_a_string(field: &str) -> Self {
        Self::new(field, "invalid_type", format!("{field} must be a string"))
    }
}

/// Reads an optional string member, recording a type error when it is present but not a string.
pub fn optional_string<'a>(
    body: &'a serde_json::Map<String, serde_json::Value>,
    field: &str,
    errors: &mut Vec<FieldError>,
) -> Option<&'a str> {
    match body.get(field) {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(s)) => Some(s.as_str()),
        Some(_) => {
            errors.push(FieldError::not_a_string(field));
            None
        }
    }
}

/// Reads a required string member.
pub fn required_string<'a>(
    body: &'a serde_json::Map<String, serde_json::Value>,
    field: &str,
    errors: &mut Vec<FieldError>,
) -> Option<&'a str> {
    if !body.contains_key(field) || body[field].is_null() {
        errors.push(FieldError::required(field));
        return None;
    }
    optional_string(body, field, errors)
}

/// Every member not in `allowed` is an `unknown_field` error.
pub fn reject_unknown(
    body: &serde_json::Map<String, serde_json::Value>,
    allowed: &[&str],
    errors: &mut Vec<FieldError>,
) {
    for key in body.keys() {
        if !allowed.contains(&key.as_str()) {
            errors.push(FieldError::new(
                key.clone(),
                "unknown_field",
                format!("{key} is not a field of this request"),
            ));
        }
    }
}

/// A string of `min..=max` characters (after trimming when `trim`), or an error.
pub fn bounded_text(
    field: &str,
    value: &str,
    min: usize,
    max: usize,
    trim: bool,
    errors: &mut Vec<FieldError>,
) -> Option<String> {
    let value = if trim { value.trim() } else { value };
    let len = value.chars().count();
    if len < min || value.trim().is_empty() {
        errors.push(FieldError::new(
            field,
            "too_short",
            format!("{field} must not be empty"),
        ));
        None
    } else if len > max {
        errors.push(FieldError::new(
            field,
            "too_long",
            format!("{field} must be at most {max} characters"),
        ));
        None
    } else if value.chars().any(char::is_control) {
        errors.push(FieldError::new(
            field,
            "invalid_format",
            format!("{field} must not contain control characters"),
        ));
        None
    } else {
        Some(value.to_owned())
    }
}
