//! Request bodies: a fresh, unique customer for every creation.

use serde_json::{Value, json};
use ulid::Ulid;

/// A creation body with a customer nobody has used before (name, email, BVN and reference all
/// derive from a fresh ULID), for `preferred_bank`.
pub fn unique_customer(preferred_bank: &str) -> Value {
    customer_from(Ulid::new(), preferred_bank)
}

/// The body for one ULID; split out so tests can check the shape of what is sent.
pub fn customer_from(id: Ulid, preferred_bank: &str) -> Value {
    let text = id.to_string().to_ascii_lowercase();
    json!({
        "customerName": format!("Bench Customer {}", &text[text.len() - 10..]),
        "customerEmail": format!("bench-{text}@example.com"),
        "customerPhone": "08031234567",
        "customerBvn": bvn_from(id),
        "preferredBank": preferred_bank,
        "customerReference": format!("bench-{text}"),
    })
}

/// 11 ASCII digits from the ULID's random bits. It starts with 2, so it never matches the sandbox's
/// rejection rule (identity numbers starting 99999 are rejected).
fn bvn_from(id: Ulid) -> String {
    format!("2{:010}", id.random() % 10_000_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_has_every_field_and_a_valid_bvn() {
        let body = unique_customer("test-bank");
        let bvn = body["customerBvn"].as_str().unwrap();
        assert_eq!(bvn.len(), 11);
        assert!(bvn.bytes().all(|b| b.is_ascii_digit()));
        assert!(!bvn.starts_with("99999"));
        assert_eq!(body["customerPhone"], "08031234567");
        assert_eq!(body["preferredBank"], "test-bank");
        let name = body["customerName"].as_str().unwrap();
        assert!(!name.is_empty() && name.len() <= 100);
        let reference = body["customerReference"].as_str().unwrap();
        assert!(reference.len() <= 100);
        assert!(
            body["customerEmail"]
                .as_str()
                .unwrap()
                .ends_with("@example.com")
        );
        assert_eq!(body.as_object().unwrap().len(), 6);
    }

    #[test]
    fn bodies_are_unique() {
        let a = unique_customer("test-bank");
        let b = unique_customer("test-bank");
        assert_ne!(a["customerReference"], b["customerReference"]);
        assert_ne!(a["customerEmail"], b["customerEmail"]);
    }
}
