//! Money as the contract writes it (docs/README.md: conventions): integer kobo in one currency.

use serde_json::Value;

/// The one currency the service moves: every amount is kobo of it.
pub const CURRENCY: &str = "NGN";

/// The OpenAPI schema of a `currency` field: a string that is always [`CURRENCY`].
#[cfg(feature = "openapi")]
pub fn currency_schema() -> utoipa::openapi::Object {
    utoipa::openapi::ObjectBuilder::new()
        .schema_type(utoipa::openapi::Type::String)
        .enum_values(Some([CURRENCY]))
        .build()
}

/// An integer, or a float with no fraction (JSON writers that only know doubles), in kobo.
/// Floats at or past 2^53 are refused: beyond it a double no longer holds every whole number.
pub fn whole_kobo(value: &Value) -> Option<i64> {
    const EXACT_DOUBLES: f64 = 9_007_199_254_740_992.0; // 2^53
    value.as_i64().or_else(|| {
        value
            .as_f64()
            .filter(|f| f.fract() == 0.0 && f.abs() < EXACT_DOUBLES)
            .map(|f| f as i64)
    })
}

/// Kobo as naira, as people read it (the dashboard, the audit log): `₦1,500.00`.
pub fn naira(kobo: i64) -> String {
    let sign = if kobo < 0 { "−" } else { "" };
    let kobo = kobo.unsigned_abs();
    let whole = (kobo / 100).to_string();
    let mut grouped = String::new();
    for (i, c) in whole.chars().enumerate() {
        if i > 0 && (whole.len() - i).is_multiple_of(3) {
            grouped.push(',');
        }
        grouped.push(c);
    }
    format!("{sign}₦{grouped}.{:02}", kobo % 100)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn money_reads_as_naira() {
        assert_eq!(naira(150_000), "₦1,500.00");
        assert_eq!(naira(5), "₦0.05");
        assert_eq!(naira(12_345_678_900), "₦123,456,789.00");
        assert_eq!(naira(-100), "−₦1.00");
    }

    #[test]
    fn whole_numbers_only() {
        assert_eq!(whole_kobo(&json!(150000)), Some(150000));
        assert_eq!(whole_kobo(&json!(146.0)), Some(146));
        assert_eq!(whole_kobo(&json!(146.5)), None);
        assert_eq!(whole_kobo(&json!(1.0e300)), None);
        assert_eq!(whole_kobo(&json!("150000")), None);
        assert_eq!(whole_kobo(&json!(null)), None);
    }
}
