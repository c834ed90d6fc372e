use std::str::FromStr;

use serde_json::{Map, Value};

use super::validation::{
    FieldError, bounded_text, optional_string, reject_unknown, required_string,
};
use super::{Bank, Mode};
use crate::text_enum::text_enum;

text_enum! {
    /// `pending → active → deactivated`, `pending → failed`, `pending → deactivated`.
    pub enum AccountStatus {
        Pending = "pending",
        Active = "active",
        Deactivated = "deactivated",
        Failed = "failed",
    }
}

impl AccountStatus {
    /// The state machine: the only transitions an account may take.
    pub fn can_become(self, next: AccountStatus) -> bool {
        use AccountStatus::*;
        matches!(
            (self, next),
            (Pending, Active) | (Pending, Failed) | (Pending, Deactivated) | (Active, Deactivated)
        )
    }

    /// While an account is pending or active its `customerReference` is taken.
    pub fn holds_reference(self) -> bool {
        matches!(self, AccountStatus::Pending | AccountStatus::Active)
    }
}

text_enum! {
    /// Which identity number the account was opened with (its value is never returned).
    pub enum IdentityType {
        Bvn = "bvn",
        Nin = "nin",
    }
}

/// A BVN or NIN: 11 ASCII digits. Its `Debug` never shows the value, so it cannot leak into logs.
#[derive(Clone, PartialEq, Eq)]
pub struct IdentityNumber(String);

impl IdentityNumber {
    pub fn parse(s: &str) -> Option<Self> {
        (s.len() == 11 && s.bytes().all(|b| b.is_ascii_digit())).then(|| Self(s.to_owned()))
    }

    /// The plain value, for encryption and for the provider call only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for IdentityNumber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("IdentityNumber(<redacted>)")
    }
}

/// A validated create-account request.
#[derive(Debug, Clone)]
pub struct NewAccount {
    pub customer_name: String,
    pub customer_email: String,
    /// E.164, `+234…`.
    pub customer_phone: String,
    pub identity_type: IdentityType,
    pub identity_number: IdentityNumber,
    pub preferred_bank: Bank,
    pub customer_reference: Option<String>,
}

const CREATE_FIELDS: [&str; 7] = [
    "customerName",
    "customerEmail",
    "customerPhone",
    "customerBvn",
    "customerNin",
    "preferredBank",
    "customerReference",
];

impl NewAccount {
    /// Validates a create request body, collecting every field error.
    pub fn parse(body: &Map<String, Value>, mode: Mode) -> Result<Self, Vec<FieldError>> {
        let mut errors = Vec::new();
        reject_unknown(body, &CREATE_FIELDS, &mut errors);

        let name = required_string(body, "customerName", &mut errors)
            .and_then(|v| bounded_text("customerName", v, 1, 100, true, &mut errors));
        let email = required_string(body, "customerEmail", &mut errors)
            .and_then(|v| parse_email(v).map_err(|e| errors.push(e)).ok());
        let phone = required_string(body, "customerPhone", &mut errors)
            .and_then(|v| normalise_phone(v).map_err(|e| errors.push(e)).ok());
        let identity = parse_identity(body, &mut errors);
        let bank = required_string(body, "preferredBank", &mut errors)
            .and_then(|v| parse_bank(v, mode).map_err(|e| errors.push(e)).ok());
        let reference = optional_string(body, "customerReference", &mut errors)
            .and_then(|v| bounded_text("customerReference", v, 1, 100, false, &mut errors));

        match (name, email, phone, identity, bank) {
            (Some(name), Some(email), Some(phone), Some((identity_type, number)), Some(bank))
                if errors.is_empty() =>
            {
                Ok(NewAccount {
                    customer_name: name,
                    customer_email: email,
                    customer_phone: phone,
                    identity_type,
                    identity_number: number,
                    preferred_bank: bank,
                    customer_reference: reference,
                })
            }
            _ => Err(errors),
        }
    }
}

fn parse_identity(
    body: &Map<String, Value>,
    errors: &mut Vec<FieldError>,
) -> Option<(IdentityType, IdentityNumber)> {
    let bvn = optional_string(body, "customerBvn", errors);
    let nin = optional_string(body, "customerNin", errors);
    let check = |field: &str, value: &str, errors: &mut Vec<FieldError>| {
        let parsed = IdentityNumber::parse(value);
        if parsed.is_none() {
            errors.push(FieldError::new(
                field,
                "invalid_format",
                format!("{field} must be exactly 11 digits"),
            ));
        }
        parsed
    };
    match (bvn, nin) {
        (Some(_), Some(_)) => {
            errors.push(FieldError::new(
                "customerNin",
                "exactly_one_required",
                "send exactly one of customerBvn and customerNin, not both",
            ));
            None
        }
        (Some(v), None) => check("customerBvn", v, errors).map(|n| (IdentityType::Bvn, n)),
        (None, Some(v)) => check("customerNin", v, errors).map(|n| (IdentityType::Nin, n)),
        (None, None) => {
            // Only when neither was sent (absent or null): a wrongly typed one has its own error
            // already.
            let sent = |k: &str| body.get(k).is_some_and(|v| !v.is_null());
            if !sent("customerBvn") && !sent("customerNin") {
                errors.push(FieldError::new(
                    "customerBvn",
                    "exactly_one_required",
                    "one of customerBvn and customerNin is required",
                ));
            }
            None
        }
    }
}

fn parse_bank(slug: &str, mode: Mode) -> Result<Bank, FieldError> {
    let bank = Bank::parse(slug).ok_or_else(|| {
        FieldError::new(
            "preferredBank",
            "invalid_value",
            "preferredBank must be one of wema-bank, access-bank, titan-trust-bank, test-bank",
        )
    })?;
    if !bank.allowed_in(mode) {
        return Err(FieldError::new(
            "preferredBank",
            "not_allowed_in_mode",
            format!("{slug} is not available in {mode} mode"),
        ));
    }
    Ok(bank)
}

/// A syntactically valid address whose domain has a dot (`ada@example` is refused), lower-cased
/// domain, at most 254 characters.
pub fn parse_email(value: &str) -> Result<String, FieldError> {
    let invalid = || {
        FieldError::new(
            "customerEmail",
            "invalid_format",
            "customerEmail must be a valid e-mail address",
        )
    };
    let value = value.trim();
    if value.len() > 254 {
        return Err(invalid());
    }
    let address = email_address::EmailAddress::from_str(value).map_err(|_| invalid())?;
    let domain = address.domain();
    if !domain.contains('.') || domain.starts_with('[') || domain.ends_with('.') {
        return Err(invalid());
    }
    Ok(format!(
        "{}@{}",
        address.local_part(),
        domain.to_lowercase()
    ))
}

/// `0XXXXXXXXXX`, `234XXXXXXXXXX` or `+234XXXXXXXXXX`, a Nigerian mobile number by
/// libphonenumber's data, normalised to E.164.
pub fn normalise_phone(value: &str) -> Result<String, FieldError> {
    let invalid = |why: &str| {
        FieldError::new(
            "customerPhone",
            "invalid_format",
            format!("customerPhone must be a Nigerian mobile number ({why})"),
        )
    };
    let digits_only = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let value = value.trim();
    let national = if let Some(rest) = value.strip_prefix("+234") {
        rest
    } else if let Some(rest) = value.strip_prefix("234").filter(|r| r.len() == 10) {
        rest
    } else if let Some(rest) = value.strip_prefix('0').filter(|r| r.len() == 10) {
        rest
    } else {
        return Err(invalid("0XXXXXXXXXX, 234XXXXXXXXXX or +234XXXXXXXXXX"));
    };
    if national.len() != 10 || !digits_only(national) {
        return Err(invalid("0XXXXXXXXXX, 234XXXXXXXXXX or +234XXXXXXXXXX"));
    }
    let e164 = format!("+234{national}");
    let number = phonenumber::parse(None, &e164).map_err(|_| invalid("not a number"))?;
    let is_mobile = matches!(
        number.number_type(&phonenumber::metadata::DATABASE),
        phonenumber::Type::Mobile | phonenumber::Type::FixedLineOrMobile
    );
    if !phonenumber::is_valid(&number) || !is_mobile {
        return Err(invalid("no such mobile number range"));
    }
    Ok(number.format().mode(phonenumber::Mode::E164).to_string())
}

/// Whether money paid at `paid_at` is credited: the account was active then, i.e. it had been
/// activated and was not yet deactivated. Decided by when the money was paid, not when it was
/// recorded, so a recheck or a bank's late retry after a deactivation credits what was paid
/// while the account was active, and flags what was paid after. An account that never became
/// active (deactivated while pending; its late number is closed at the bank) credits nothing.
pub fn credits_deposit(
    activated_at: Option<chrono::DateTime<chrono::Utc>>,
    deactivated_at: Option<chrono::DateTime<chrono::Utc>>,
    paid_at: chrono::DateTime<chrono::Utc>,
) -> bool {
    activated_at.is_some() && deactivated_at.is_none_or(|deactivated| paid_at < deactivated)
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_deposit_is_credited_by_the_account_state_when_it_was_paid() {
        let t = |s: i64| chrono::DateTime::from_timestamp(1_700_000_000 + s, 0).unwrap();
        assert!(credits_deposit(Some(t(0)), None, t(10)));
        assert!(
            credits_deposit(Some(t(0)), Some(t(100)), t(99)),
            "paid while active"
        );
        assert!(
            !credits_deposit(Some(t(0)), Some(t(100)), t(100)),
            "paid at deactivation"
        );
        assert!(
            !credits_deposit(Some(t(0)), Some(t(100)), t(101)),
            "paid after"
        );
        assert!(!credits_deposit(None, Some(t(100)), t(50)), "never active");
        assert!(!credits_deposit(None, None, t(50)), "still pending");
    }
    use super::*;
    use serde_json::json;

    fn body(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    fn valid() -> Value {
        json!({
            "customerName": "  Ada Obi ",
            "customerEmail": "ada@Example.COM",
            "customerPhone": "08031234567",
            "customerBvn": "22212345678",
            "preferredBank": "wema-bank",
            "customerReference": "user-42"
        })
    }

    #[test]
    fn a_valid_request_is_normalised() {
        let account = NewAccount::parse(&body(valid()), Mode::Test).unwrap();
        assert_eq!(account.customer_name, "Ada Obi");
        assert_eq!(account.customer_email, "ada@example.com");
        assert_eq!(account.customer_phone, "+2348031234567");
        assert_eq!(account.identity_type, IdentityType::Bvn);
        assert_eq!(account.identity_number.expose(), "22212345678");
        assert_eq!(account.preferred_bank, Bank::WemaBank);
        assert_eq!(account.customer_reference.as_deref(), Some("user-42"));
    }

    #[test]
    fn every_field_error_is_listed_at_once() {
        let errors = NewAccount::parse(
            &body(json!({
                "customerName": "",
                "customerEmail": "nope",
                "customerPhone": "12345",
                "customerBvn": "123",
                "preferredBank": "gtbank",
                "colour": "blue"
            })),
            Mode::Test,
        )
        .unwrap_err();
        let fields: Vec<_> = errors.iter().map(|e| (e.field.as_str(), e.code)).collect();
        for expected in [
            ("colour", "unknown_field"),
            ("customerName", "too_short"),
            ("customerEmail", "invalid_format"),
            ("customerPhone", "invalid_format"),
            ("customerBvn", "invalid_format"),
            ("preferredBank", "invalid_value"),
        ] {
            assert!(
                fields.contains(&expected),
                "{expected:?} missing from {fields:?}"
            );
        }
    }

    #[test]
    fn identity_needs_exactly_one() {
        let mut both = valid();
        both["customerNin"] = json!("12345678901");
        let errors = NewAccount::parse(&body(both), Mode::Test).unwrap_err();
        assert_eq!(errors[0].code, "exactly_one_required");

        let mut neither = valid();
        neither.as_object_mut().unwrap().remove("customerBvn");
        let errors = NewAccount::parse(&body(neither), Mode::Test).unwrap_err();
        assert_eq!(errors[0].code, "exactly_one_required");

        // null is not sent: the 422 still names what is missing.
        for nulls in [
            json!({"customerBvn": null}),
            json!({"customerBvn": null, "customerNin": null}),
        ] {
            let mut request = valid();
            request.as_object_mut().unwrap().remove("customerBvn");
            for (k, v) in nulls.as_object().unwrap() {
                request[k] = v.clone();
            }
            let errors = NewAccount::parse(&body(request), Mode::Test).unwrap_err();
            assert_eq!(errors.len(), 1, "{errors:?}");
            assert_eq!(errors[0].code, "exactly_one_required");
        }

        let mut nin = valid();
        nin.as_object_mut().unwrap().remove("customerBvn");
        nin["customerNin"] = json!("12345678901");
        let account = NewAccount::parse(&body(nin), Mode::Test).unwrap();
        assert_eq!(account.identity_type, IdentityType::Nin);

        for bad in [
            "1234567890",
            "123456789012",
            "1234567890a",
            "１２３４５６７８９０１",
        ] {
            assert!(IdentityNumber::parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn identity_numbers_never_print() {
        let n = IdentityNumber::parse("22212345678").unwrap();
        assert!(!format!("{n:?}").contains("2221"));
        let account = NewAccount::parse(&body(valid()), Mode::Test).unwrap();
        assert!(!format!("{account:?}").contains("22212345678"));
    }

    #[test]
    fn test_bank_is_refused_in_live_mode() {
        let mut v = valid();
        v["preferredBank"] = json!("test-bank");
        assert!(NewAccount::parse(&body(v.clone()), Mode::Test).is_ok());
        let errors = NewAccount::parse(&body(v), Mode::Live).unwrap_err();
        assert_eq!(errors[0].field, "preferredBank");
    }

    #[test]
    fn nigerian_mobile_numbers_normalise_to_e164() {
        for input in [
            "08031234567",
            "2348031234567",
            "+2348031234567",
            " 09061234567 ",
        ] {
            let out = normalise_phone(input).unwrap();
            assert!(
                out.starts_with("+234") && out.len() == 14,
                "{input} → {out}"
            );
        }
        assert_eq!(normalise_phone("2348031234567").unwrap(), "+2348031234567");
        // Wrong shapes, a landline range, a foreign number, letters.
        for input in [
            "8031234567",
            "+4478031234567",
            "0803123456",
            "080312345678",
            "0803123456a",
            "+234 803 123 4567",
            "01234567890",
        ] {
            assert!(normalise_phone(input).is_err(), "{input} should be refused");
        }
    }

    #[test]
    fn emails_are_checked() {
        assert!(parse_email("ada@example.com").is_ok());
        for bad in [
            "",
            "ada",
            "ada@",
            "@example.com",
            "ada@example",
            "a b@example.com",
        ] {
            assert!(parse_email(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_state_machine_allows_only_its_transitions() {
        use AccountStatus::*;
        assert!(Pending.can_become(Active));
        assert!(Pending.can_become(Failed));
        assert!(Pending.can_become(Deactivated));
        assert!(Active.can_become(Deactivated));
        for (from, to) in [
            (Active, Pending),
            (Deactivated, Active),
            (Failed, Active),
            (Failed, Deactivated),
            (Active, Failed),
        ] {
            assert!(!from.can_become(to), "{from:?} → {to:?}");
        }
    }
}
