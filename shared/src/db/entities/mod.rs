//! sea-orm entities, one per table. Enumerations are the domain's enums (`domain::Mode`, …),
//! stored as their text: a value that is none of them is an error when the row is read.

pub mod account_count;
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
    use domain::{
        AccountStatus, Bank, DeliveryStatus, DepositSource, DepositStatus, EventType, IdentityType,
        KybStatus, Mode, RecheckStatus,
    };
    use sea_orm::ActiveEnum;
    use serde::Serialize;
    use serde::de::DeserializeOwned;

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
        // Every type of SPEC §4's table.
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
    }
}
