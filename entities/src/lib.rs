//! sea-orm entities, one per table. Enumerations are the domain's enums (`domain::Mode`, …),
//! stored as their text: a value that is none of them is an error when the row is read.

pub mod account_count;
pub mod account_number;
pub mod account_state;
pub mod api_key;
pub mod audit_entry;
pub mod balance;
pub mod business;
pub mod business_mode;
pub mod dashboard_session;
pub mod delivery;
pub mod delivery_attempt;
pub mod deposit;
pub mod deposit_conflict;
pub mod event;
pub mod idempotency_key;
pub mod ledger_entry;
pub mod outbox;
pub mod payout;
pub mod provider_notification;
pub mod recheck;
pub mod settlement_account;
pub mod sign_in_throttle;
pub mod user;
pub mod virtual_account;

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::collections::BTreeSet;

    use domain::idempotency::KeyState;
    use domain::payout::{EntryType, PayoutStatus, Schedule};
    use domain::provider::{NotificationOutcome, ProviderEvent};
    use domain::{
        AccountStatus, AuditAction, Bank, DeliveryStatus, DepositSource, DepositStatus, EventType,
        IdentityType, KybStatus, Mode, RecheckStatus, Role,
    };
    use sea_orm::ActiveEnum;
    use serde::Serialize;
    use serde::de::DeserializeOwned;

    thread_local! {
        /// The enumerations `stored_and_sent_as` checked, by name.
        static CHECKED: RefCell<BTreeSet<String>> = const { RefCell::new(BTreeSet::new()) };
    }

    /// Every `text_enum!` the domain declares, read from its source: the list of enumerations
    /// is found, not typed, so a new one cannot be left out of the test below.
    fn declared_enumerations() -> BTreeSet<String> {
        // Every source file of the domain, in its folders too (`provider/`).
        let mut dirs = vec![std::path::PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../domain/src"
        ))];
        let mut files = Vec::new();
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).expect("domain/src is readable") {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    dirs.push(path);
                } else {
                    files.push(path);
                }
            }
        }
        let mut names = BTreeSet::new();
        for file in files {
            let source = std::fs::read_to_string(file).unwrap();
            for invocation in source.split("text_enum! {").skip(1) {
                let after = invocation
                    .split("pub enum ")
                    .nth(1)
                    .expect("an enum follows");
                let name: String = after
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                names.insert(name);
            }
        }
        names
    }

    /// Each variant's database value and JSON value are exactly the text stored and sent before
    /// the columns were typed (so no data changed), and read back as the same variant.
    fn stored_and_sent_as<E>(all: &[E], texts: &[&str])
    where
        E: ActiveEnum<Value = String>
            + Serialize
            + DeserializeOwned
            + Copy
            + PartialEq
            + std::fmt::Debug,
    {
        let name = std::any::type_name::<E>().rsplit("::").next().unwrap();
        CHECKED.with(|c| c.borrow_mut().insert(name.to_owned()));
        assert_eq!(all.len(), texts.len(), "{all:?} against {texts:?}");
        for (variant, text) in all.iter().zip(texts) {
            assert_eq!(variant.to_value(), *text, "database value of {variant:?}");
            assert_eq!(E::try_from_value(&text.to_string()).unwrap(), *variant);
            assert_eq!(
                serde_json::to_value(variant).unwrap(),
                serde_json::json!(text),
                "JSON value of {variant:?}"
            );
            assert_eq!(
                serde_json::from_value::<E>(serde_json::json!(text)).unwrap(),
                *variant
            );
        }
        assert!(E::try_from_value(&"unknown".to_owned()).is_err());
        assert!(
            E::try_from_value(&texts[0].to_uppercase()).is_err(),
            "no case folding"
        );
    }

    #[test]
    fn enumerations_keep_todays_text() {
        stored_and_sent_as(&Mode::ALL, &["test", "live"]);
        stored_and_sent_as(&KybStatus::ALL, &["pending", "approved", "rejected"]);
        stored_and_sent_as(
            &AccountStatus::ALL,
            &["pending", "active", "deactivated", "failed"],
        );
        stored_and_sent_as(
            &Bank::ALL,
            &["wema-bank", "access-bank", "titan-trust-bank", "test-bank"],
        );
        stored_and_sent_as(&IdentityType::ALL, &["bvn", "nin"]);
        stored_and_sent_as(&DepositStatus::ALL, &["credited", "flagged"]);
        stored_and_sent_as(&DepositSource::ALL, &["notification", "recheck"]);
        stored_and_sent_as(
            &RecheckStatus::ALL,
            &["queued", "running", "completed", "failed"],
        );
        stored_and_sent_as(&DeliveryStatus::ALL, &["pending", "succeeded", "dead"]);
        // Every type of docs/api/events-and-webhooks.md's table.
        stored_and_sent_as(
            &EventType::ALL,
            &[
                "virtualaccount.active",
                "virtualaccount.failed",
                "virtualaccount.deactivated",
                "deposit.received",
                "deposit.flagged",
                "payout.succeeded",
                "payout.failed",
                "payout.reversed",
                "settlement_account.updated",
                "webhook.test",
            ],
        );
        stored_and_sent_as(
            &PayoutStatus::ALL,
            &["pending", "processing", "succeeded", "failed", "reversed"],
        );
        stored_and_sent_as(&Schedule::ALL, &["manual", "daily"]);
        stored_and_sent_as(&EntryType::ALL, &["deposit", "payout", "payout_return"]);
        stored_and_sent_as(&Role::ALL, &["viewer", "developer", "owner"]);
        stored_and_sent_as(&KeyState::ALL, &["in_flight", "completed"]);
        stored_and_sent_as(
            &AuditAction::ALL,
            &[
                "session.signed_in",
                "session.signed_out",
                "session.sign_in_failed",
                "session.sign_in_locked",
                "session.sign_in_refused",
                "key.rolled",
                "key.revoked",
                "webhook.url_set",
                "webhook.secret_rotated",
                "webhook.test_sent",
                "event.resent",
                "user.added",
                "user.role_changed",
                "user.removed",
                "profile.password_changed",
                "profile.totp_enabled",
                "profile.totp_removed",
                "settlement_account.changed",
                "virtual_account.deactivated",
                "payout.created",
                "business.created",
                "business.kyb_approved",
                "delivery.replayed",
            ],
        );
        stored_and_sent_as(
            &ProviderEvent::ALL,
            &[
                "transfer.received",
                "transfer.succeeded",
                "transfer.failed",
                "transfer.reversed",
            ],
        );
        stored_and_sent_as(
            &NotificationOutcome::ALL,
            &[
                "received",
                "recorded",
                "duplicate",
                "ignored",
                "unmatched",
                "invalid",
            ],
        );
        let checked = CHECKED.with(|c| c.borrow().clone());
        assert_eq!(
            checked,
            declared_enumerations(),
            "every enumeration the domain declares keeps its text here"
        );
    }
}
