//! Prefixed, time-ordered ids: `va_01J…` (prefix + ULID), so ids sort by creation and say their kind.
//!
//! Each kind of id is a type of its own (`AccountId`, `PayoutId`, …), made by [`typed_ids!`]: it
//! knows its prefix, makes fresh ids, parses and validates what a caller sends, and is stored and
//! serialised as the same text as before (docs/api/README.md). An account id cannot be
//! passed where a payout id is expected. It reads as `&str` (`Deref`), so code that only shows or
//! compares an id needs no conversion.

/// A fresh id with the given prefix, e.g. `new_id("va")` → `va_01JD…`. For names of no kind
/// (a test's database); the service's ids are made by their types' `new`.
pub fn new_id(prefix: &str) -> String {
    format!("{prefix}_{}", ulid::Ulid::new())
}

/// True when `id` is `prefix_` followed by a well-formed ULID.
pub fn has_prefix(id: &str, prefix: &str) -> bool {
    id.strip_prefix(prefix)
        .and_then(|rest| rest.strip_prefix('_'))
        .is_some_and(|ulid| ulid::Ulid::from_string(ulid).is_ok())
}

/// Text that is not an id of the kind asked for (wrong prefix, or not a ULID after it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotAnId {
    pub kind: &'static str,
}

impl std::fmt::Display for NotAnId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "not {} id", self.kind)
    }
}

impl std::error::Error for NotAnId {}

/// Declares one type per kind of id: `Name = "prefix", "a description";`.
///
/// Reading from the database and deserialising take the text as it is (rows written by earlier
/// versions, and tests' ids, stay readable); what a caller sends is checked with `parse`.
macro_rules! typed_ids {
    ($($(#[$meta:meta])* $name:ident = $prefix:literal, $kind:literal;)*) => {$(
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
        #[serde(transparent)]
        #[cfg_attr(feature = "db", derive(sea_orm::DeriveValueType))]
        pub struct $name(String);

        impl $name {
            /// The text before the `_`.
            pub const PREFIX: &'static str = $prefix;

            /// A fresh id of this kind.
            #[allow(clippy::new_without_default)]
            pub fn new() -> Self {
                Self($crate::ids::new_id($prefix))
            }

            /// `text` if it is an id of this kind: the prefix, `_`, a ULID.
            pub fn parse(text: &str) -> Result<Self, $crate::ids::NotAnId> {
                if $crate::ids::has_prefix(text, $prefix) {
                    Ok(Self(text.to_owned()))
                } else {
                    Err($crate::ids::NotAnId { kind: $kind })
                }
            }

            /// Text taken as an id of this kind without checking its form: what storage or a
            /// bank gives back, or a caller's text that is only looked up (an id of no such row
            /// is simply not found). `parse` is the check.
            pub fn unchecked(text: impl Into<String>) -> Self {
                Self(text.into())
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl std::ops::Deref for $name {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl std::borrow::Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl std::str::FromStr for $name {
            type Err = $crate::ids::NotAnId;
            fn from_str(text: &str) -> Result<Self, Self::Err> {
                Self::parse(text)
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }

        impl PartialEq<String> for $name {
            fn eq(&self, other: &String) -> bool {
                &self.0 == other
            }
        }

        impl PartialEq<$name> for String {
            fn eq(&self, other: &$name) -> bool {
                self == &other.0
            }
        }

        impl PartialEq<$name> for &str {
            fn eq(&self, other: &$name) -> bool {
                *self == other.0
            }
        }

        #[cfg(feature = "db")]
        impl From<&$name> for sea_orm::Value {
            fn from(id: &$name) -> Self {
                sea_orm::Value::from(id.0.clone())
            }
        }

        #[cfg(feature = "db")]
        impl sea_orm::TryFromU64 for $name {
            fn try_from_u64(_: u64) -> Result<Self, sea_orm::DbErr> {
                Err(sea_orm::DbErr::ConvertFromU64(stringify!($name)))
            }
        }
    )*};
}

typed_ids! {
    /// A business (`biz_…`).
    BusinessId = "biz", "a business";
    /// A virtual account (`va_…`).
    AccountId = "va", "an account";
    /// A deposit (`dep_…`).
    DepositId = "dep", "a deposit";
    /// A deposit that conflicted with one already stored (`dcf_…`).
    ConflictId = "dcf", "a deposit conflict";
    /// A bank's notification as received (`ntf_…`).
    NotificationId = "ntf", "a notification";
    /// A payout (`po_…`).
    PayoutId = "po", "a payout";
    /// A ledger entry, a balance transaction in the API (`btx_…`).
    LedgerEntryId = "btx", "a balance transaction";
    /// A recheck of an account's deposits (`rck_…`).
    RecheckId = "rck", "a recheck";
    /// An event (`evt_…`).
    EventId = "evt", "an event";
    /// A webhook delivery of an event (`whd_…`).
    DeliveryId = "whd", "a delivery";
    /// One attempt of a delivery (`wha_…`).
    AttemptId = "wha", "a delivery attempt";
    /// An outbox job (`job_…`).
    JobId = "job", "a job";
    /// An API key (`key_…`).
    KeyId = "key", "a key";
    /// A dashboard user (`usr_…`).
    UserId = "usr", "a user";
    /// A dashboard session's row (`ses_…`); the session's token is another thing.
    SessionId = "ses", "a session";
    /// An audit log entry (`aud_…`).
    AuditId = "aud", "an audit entry";
    /// A request, as `X-Request-Id` names it when the caller sent none (`req_…`).
    RequestId = "req", "a request";
    /// A payout worker's lease on the payouts it sends (`lease_…`).
    LeaseId = "lease", "a lease";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_carry_their_prefix_and_sort_by_time() {
        let a = AccountId::new();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = AccountId::new();
        assert!(has_prefix(&a, "va"));
        assert!(!has_prefix(&a, "evt"));
        assert!(a < b, "{a} should sort before {b}");
        assert!(!has_prefix("va_not-a-ulid", "va"));
    }

    #[test]
    fn an_id_parses_only_as_its_own_kind() {
        let account = AccountId::new();
        assert_eq!(AccountId::parse(&account).unwrap(), account);
        assert_eq!(PayoutId::parse(&account), Err(NotAnId { kind: "a payout" }));
        assert_eq!(
            PayoutId::parse(&account).unwrap_err().to_string(),
            "not a payout id"
        );
        assert!(AccountId::parse("va_").is_err());
        assert!(
            AccountId::parse("va_01J9Z6W8Q3X4T5V6B7N8M9P0Q").is_err(),
            "one short"
        );
        assert!("po_01J9Z6W8Q3X4T5V6B7N8M9P0QR".parse::<PayoutId>().is_ok());
    }

    #[test]
    fn an_id_is_its_text_in_json() {
        let id = EventId::parse("evt_01J9Z6W8Q3X4T5V6B7N8M9P0QR").unwrap();
        let json = serde_json::to_string(&id).unwrap();
        assert_eq!(json, "\"evt_01J9Z6W8Q3X4T5V6B7N8M9P0QR\"");
        assert_eq!(serde_json::from_str::<EventId>(&json).unwrap(), id);
        assert_eq!(id, "evt_01J9Z6W8Q3X4T5V6B7N8M9P0QR");
        assert_eq!(String::from(id.clone()), id.as_str());
    }
}
