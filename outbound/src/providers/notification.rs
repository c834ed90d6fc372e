//! A provider bank's notification (docs/operations/provider-banks.md), read beside the client that
//! asks the same banks: whose signature it carries (and so its mode), and what it announces. The
//! api's notification endpoint stores and acts on it; worker-recheck reads the same transactions
//! from a bank's list through [`RemoteTransaction::read`], so a transaction is judged the same
//! either way.

use domain::provider::{NotADeposit, ProviderEvent, RemoteTransaction, RemoteTransfer};
use domain::{Bank, FieldError, Mode};
use ops::config::Config;
use serde_json::Value;

use super::live_config;
use crypto::verify_provider_signature;

/// A signed notification's text and what it announces.
#[derive(Debug)]
pub struct Notification<'a> {
    /// The body as the bank sent it (stored as it is).
    pub text: &'a str,
    pub content: Announced,
}

/// What a notification announces; any other event is kept and acknowledged, not acted on.
#[derive(Debug)]
pub enum Announced {
    /// `transfer.received`: money arrived in a virtual account.
    Deposit(RemoteTransaction),
    /// `transfer.succeeded|failed|reversed`: a payout's transfer reached its outcome.
    Transfer(RemoteTransfer),
    /// An event this service does not act on.
    Other,
}

/// Why a signed notification cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum NotificationError {
    /// Not UTF-8 JSON.
    #[error("{0}")]
    Unreadable(&'static str),
    /// Its `data` is missing or not what the event needs (a transaction that cannot be a
    /// deposit, an amount above `VAS_LIMITS__MAX_DEPOSIT` included): fields named as in the body.
    #[error("the notification's data is not usable")]
    Fields(Vec<FieldError>),
}

/// The mode a notification from `bank` belongs to, by whose secret signed it: the bank's own
/// (live) or the sandbox's (test). None: no secret of ours signed it.
pub fn mode_of(config: &Config, bank: Bank, body: &[u8], signature: &str) -> Option<Mode> {
    let live_secret = live_config(&config.providers, bank).and_then(|c| c.secret.as_deref());
    if live_secret.is_some_and(|secret| verify_provider_signature(secret, body, signature)) {
        return Some(Mode::Live);
    }
    verify_provider_signature(&config.sandbox.secret, body, signature).then_some(Mode::Test)
}

/// Reads a notification's body. `max_deposit` is `VAS_LIMITS__MAX_DEPOSIT`.
pub fn read(body: &[u8], max_deposit: i64) -> Result<Notification<'_>, NotificationError> {
    let text = std::str::from_utf8(body)
        .map_err(|_| NotificationError::Unreadable("the body is not UTF-8 JSON"))?;
    let envelope: Value = serde_json::from_str(text)
        .map_err(|_| NotificationError::Unreadable("the body is not valid JSON"))?;
    let event = envelope
        .get("event")
        .and_then(Value::as_str)
        .and_then(ProviderEvent::parse);
    let content = match event {
        Some(ProviderEvent::TransferReceived) => {
            Announced::Deposit(transaction(envelope.get("data"), max_deposit)?)
        }
        Some(
            ProviderEvent::TransferSucceeded
            | ProviderEvent::TransferFailed
            | ProviderEvent::TransferReversed,
        ) => Announced::Transfer(data(envelope.get("data"), "a transfer")?),
        None => Announced::Other,
    };
    Ok(Notification { text, content })
}

fn data<T: serde::de::DeserializeOwned>(
    data: Option<&Value>,
    what: &str,
) -> Result<T, NotificationError> {
    let data = data.ok_or_else(|| {
        NotificationError::Fields(vec![FieldError::new(
            "data",
            "required",
            "data is required",
        )])
    })?;
    serde_json::from_value(data.clone()).map_err(|e| {
        NotificationError::Fields(vec![FieldError::new(
            "data",
            "invalid_format",
            format!("data is not {what}: {e}"),
        )])
    })
}

/// The transaction, by the one reading a recheck's list is read with; fields named as in the
/// body.
fn transaction(
    value: Option<&Value>,
    max_deposit: i64,
) -> Result<RemoteTransaction, NotificationError> {
    let value: Value = data(value, "a transaction")?;
    RemoteTransaction::read(value, max_deposit).map_err(|refused| {
        let errors = match refused {
            NotADeposit::Unreadable(reason) => vec![FieldError::new(
                "data",
                "invalid_format",
                format!("data is not a transaction: {reason}"),
            )],
            NotADeposit::Refused(errors) => errors
                .into_iter()
                .map(|e| FieldError::new(format!("data.{}", e.field), e.code, e.message))
                .collect(),
        };
        NotificationError::Fields(errors)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(event: &str, data: Value) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({"event": event, "data": data})).unwrap()
    }

    #[test]
    fn each_event_is_read_as_what_it_announces() {
        let tx = serde_json::json!({"reference": "t1", "accountNumber": "0123456789",
            "amount": 150000, "currency": "NGN", "paidAt": "2026-11-25T10:00:00Z"});
        let read = |b: &[u8]| read(b, 10_000_000_000).map(|n| n.content);
        assert!(matches!(
            read(&body("transfer.received", tx.clone())),
            Ok(Announced::Deposit(t)) if t.amount == 150000
        ));
        let transfer = serde_json::json!({"reference": "po_1", "status": "succeeded"});
        assert!(matches!(
            read(&body("transfer.reversed", transfer)),
            Ok(Announced::Transfer(t)) if t.reference == "po_1"
        ));
        assert!(matches!(
            read(&body("account.updated", Value::Null)),
            Ok(Announced::Other)
        ));
        assert!(matches!(
            read(b"not json"),
            Err(NotificationError::Unreadable(_))
        ));
        let too_much = serde_json::json!({"reference": "t2", "accountNumber": "0123456789",
            "amount": 10_000_000_001_i64, "currency": "NGN", "paidAt": "2026-11-25T10:00:00Z"});
        assert!(matches!(
            read(&body("transfer.received", too_much)),
            Err(NotificationError::Fields(e)) if e[0].field == "data.amount"
        ));
        assert!(matches!(
            read(&body("transfer.failed", Value::Null)),
            Err(NotificationError::Fields(_))
        ));
    }
}
