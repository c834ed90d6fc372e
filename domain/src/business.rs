use serde::{Deserialize, Serialize};

/// Test and live data never mix: a request's mode is its key's mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Test,
    Live,
}

impl Mode {
    pub const ALL: [Mode; 2] = [Mode::Test, Mode::Live];

    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Test => "test",
            Mode::Live => "live",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "test" => Some(Mode::Test),
            "live" => Some(Mode::Live),
            _ => None,
        }
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KybStatus {
    Pending,
    Approved,
    Rejected,
}

impl KybStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            KybStatus::Pending => "pending",
            KybStatus::Approved => "approved",
            KybStatus::Rejected => "rejected",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "pending" => Some(KybStatus::Pending),
            "approved" => Some(KybStatus::Approved),
            "rejected" => Some(KybStatus::Rejected),
            _ => None,
        }
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
