//! The tests' customers: a valid create body for each.

use serde_json::{Value, json};

/// A valid create body; `n` makes the customer unique.
pub fn account_body(n: u32, bank: &str) -> Value {
    json!({
        "customerName": format!("Ada Obi {n}"),
        "customerEmail": format!("ada{n}@example.com"),
        "customerPhone": "08031234567",
        "customerBvn": format!("{:011}", 22_200_000_000u64 + u64::from(n)),
        "preferredBank": bank,
        "customerReference": format!("user-{n}"),
    })
}
