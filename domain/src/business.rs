use crate::text_enum::text_enum;

text_enum! {
    /// The mode of the key a request was made with; test and live data never mix.
    pub enum Mode {
        Test = "test",
        Live = "live",
    }
}

text_enum! {
    /// A business's KYB review: live keys work only once it is approved.
    pub enum KybStatus {
        Pending = "pending",
        Approved = "approved",
        Rejected = "rejected",
    }
}

/// A business name must be usable in account names (`<business>/<customer>`).
pub fn validate_business_name(name: &str) -> Result<String, String> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > 100 {
        return Err("a business name is 1–100 characters".into());
    }
    if name.contains('/') || name.chars().any(char::is_control) {
        return Err("a business name must not contain '/' or control characters".into());
    }
    Ok(name.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_round_trip() {
        for mode in Mode::ALL {
            assert_eq!(Mode::parse(mode.as_str()), Some(mode));
        }
        assert_eq!(Mode::parse("prod"), None);
    }

    #[test]
    fn business_names_are_checked() {
        assert_eq!(validate_business_name("  Acme Ltd ").unwrap(), "Acme Ltd");
        assert!(validate_business_name("").is_err());
        assert!(validate_business_name("A/B").is_err());
        assert!(validate_business_name(&"x".repeat(101)).is_err());
    }
}
