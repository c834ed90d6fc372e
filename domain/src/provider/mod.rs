//! The provider banks' side of the protocol (docs/operations/provider-banks.md), as plain data and
//! rules: the request that opens an account, the answers a provider gives about it, and what an
//! answer makes of a pending account ([`ProvisioningOutcome`]); a bank's transactions
//! ([`RemoteTransaction`]) and transfers ([`NewTransfer`], [`RemoteTransfer`]). The api's
//! synchronous create and worker-provisioning both go through [`provisioning_outcome`] and
//! [`OpenAccount::new`], so an answer means the same, and the bank is asked the same, wherever it
//! happens; the provider client, storage and the sandbox take the transaction and transfer shapes
//! from here, so the two sides of the protocol cannot drift apart and storage needs no HTTP client
//! to name them.

use serde::{Deserialize, Serialize};

use crate::text_enum::text_enum;
use crate::{IdentityNumber, IdentityType};

mod transaction;
mod transfer;

pub use transaction::{NotADeposit, RemoteTransaction};
pub use transfer::{NewTransfer, RemoteTransfer, RemoteTransferStatus};

/// The most provider references one confirmation of handed-over notifications names: the
/// sandbox refuses more, and the api sends at most this many at a time
/// (docs/operations/provider-banks.md#the-sandbox).
pub const MOST_CONFIRMED_HANDOVERS: usize = 1000;

text_enum! {
    /// What a provider bank's notification announces (docs/operations/provider-banks.md): the banks
    /// send it, the sandbox sends it as a bank would, and the api acts on it.
    pub enum ProviderEvent {
        /// Money arrived in a virtual account: `data` is the transaction.
        TransferReceived = "transfer.received",
        /// A payout's transfer reached its outcome: `data` is the transfer.
        TransferSucceeded = "transfer.succeeded",
        TransferFailed = "transfer.failed",
        TransferReversed = "transfer.reversed",
    }
}

text_enum! {
    /// What became of a stored provider notification (the bank was answered 200 either way).
    /// A body received again answers what became of it the first time.
    pub enum NotificationOutcome {
        /// Being stored: only inside the transaction that stores it, never committed or answered.
        Received = "received",
        /// A new deposit, or a payout moved on.
        Recorded = "recorded",
        /// Already recorded: nothing new.
        Duplicate = "duplicate",
        /// An event not acted on.
        Ignored = "ignored",
        /// No account has that number, or no payout sent through this bank has that reference;
        /// kept for operators.
        Unmatched = "unmatched",
        /// Signed, but not usable: unreadable, or a deposit above the largest accepted; kept for
        /// operators, never credited.
        Invalid = "invalid",
    }
}

/// An account's status at the provider (`GET /accounts/{reference}`, and the open's answer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderAccountStatus {
    Pending,
    Active,
    Failed,
    Closed,
}

impl ProviderAccountStatus {
    /// Whether the provider still holds the account open (a deactivated one must be closed).
    pub fn is_open(self) -> bool {
        !matches!(self, ProviderAccountStatus::Closed)
    }
}

/// What a provider answered about one account, to an open or to a status query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProviderAnswer {
    /// The account as the provider reported it.
    Account {
        status: ProviderAccountStatus,
        account_number: Option<String>,
        failure_reason: Option<String>,
    },
    /// The provider refused the customer's identity (`422 identity_rejected`).
    IdentityRejected { reason: String },
    /// No usable answer: a timeout, a connection failure, a 5xx or 429, a redirect, a body that
    /// is unreadable or over the size limit, a request the provider refused (another 4xx), no
    /// provider configured, or a number that another account already holds. The provider's
    /// trouble, never the customer's: the account waits, and the give-up rule ends the wait.
    Unusable,
}

/// What a provider answer makes of a pending account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProvisioningOutcome {
    /// `pending → active` with this number.
    Active { account_number: String },
    /// `pending → failed` for this reason (shown as `failureReason`, and as the 422's `detail`
    /// when it happens during the create).
    Rejected { reason: String },
    /// Still no number: the provisioning job keeps asking until the give-up rule fails it.
    Pending,
}

/// The one reading of a provider's answer (docs/api/accounts.md's transitions,
/// docs/operations/provider-banks.md's statuses):
/// - `active` with a well-formed number (10 digits, a NUBAN) → active;
/// - `failed`, or an identity rejection → failed, with the provider's reason;
/// - `closed` → failed: the provider will never give this account a number (it closed it before
///   it was ever active, and the service did not ask: a deactivated account is no longer pending,
///   so no answer applies to it). Waiting would only hold the customer's reference until the
///   give-up rule failed it hours later for a reason that is not the real one;
/// - `pending`, `active` without a (well-formed) number, and any unusable answer → pending.
pub fn provisioning_outcome(answer: ProviderAnswer) -> ProvisioningOutcome {
    let reason_or = |reason: Option<String>, default: &str| {
        reason
            .filter(|r| !r.trim().is_empty())
            .unwrap_or_else(|| default.to_owned())
    };
    match answer {
        ProviderAnswer::Account {
            status: ProviderAccountStatus::Active,
            account_number: Some(number),
            ..
        } if crate::nuban::has_shape(&number) => ProvisioningOutcome::Active {
            account_number: number,
        },
        ProviderAnswer::Account {
            status: ProviderAccountStatus::Failed,
            failure_reason,
            ..
        } => ProvisioningOutcome::Rejected {
            reason: reason_or(failure_reason, "the provider bank refused the account"),
        },
        ProviderAnswer::Account {
            status: ProviderAccountStatus::Closed,
            failure_reason,
            ..
        } => ProvisioningOutcome::Rejected {
            reason: reason_or(
                failure_reason,
                "the provider bank closed the account before it was active",
            ),
        },
        ProviderAnswer::IdentityRejected { reason } => ProvisioningOutcome::Rejected {
            reason: reason_or(Some(reason), "the provider bank rejected the identity"),
        },
        ProviderAnswer::Account { .. } | ProviderAnswer::Unusable => ProvisioningOutcome::Pending,
    }
}

/// What the service sends a provider to open an account (`POST /accounts`). The reference is the
/// account's id, so the same account is asked for with the same reference, whoever asks.
/// `Debug` shows the reference only: the rest is the customer's.
#[derive(Clone, PartialEq, Eq)]
pub struct OpenAccount {
    pub reference: String,
    pub account_name: String,
    pub customer_name: String,
    pub customer_email: String,
    pub customer_phone: String,
    pub identity_type: IdentityType,
    pub identity_number: IdentityNumber,
}

impl OpenAccount {
    pub fn new(
        reference: &str,
        account_name: &str,
        customer_name: &str,
        customer_email: &str,
        customer_phone: &str,
        identity_type: IdentityType,
        identity_number: IdentityNumber,
    ) -> Self {
        Self {
            reference: reference.to_owned(),
            account_name: account_name.to_owned(),
            customer_name: customer_name.to_owned(),
            customer_email: customer_email.to_owned(),
            customer_phone: customer_phone.to_owned(),
            identity_type,
            identity_number,
        }
    }
}

/// The protocol's body: the identity number under `bvn` or `nin`.
impl Serialize for OpenAccount {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Wire<'a> {
            reference: &'a str,
            account_name: &'a str,
            customer_name: &'a str,
            customer_email: &'a str,
            customer_phone: &'a str,
            #[serde(skip_serializing_if = "Option::is_none")]
            bvn: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            nin: Option<&'a str>,
        }
        let number = Some(self.identity_number.expose());
        let (bvn, nin) = match self.identity_type {
            IdentityType::Bvn => (number, None),
            IdentityType::Nin => (None, number),
        };
        Wire {
            reference: &self.reference,
            account_name: &self.account_name,
            customer_name: &self.customer_name,
            customer_email: &self.customer_email,
            customer_phone: &self.customer_phone,
            bvn,
            nin,
        }
        .serialize(serializer)
    }
}

impl std::fmt::Debug for OpenAccount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAccount")
            .field("reference", &self.reference)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn account(
        status: ProviderAccountStatus,
        number: Option<&str>,
        reason: Option<&str>,
    ) -> ProviderAnswer {
        ProviderAnswer::Account {
            status,
            account_number: number.map(str::to_owned),
            failure_reason: reason.map(str::to_owned),
        }
    }

    #[test]
    fn every_provider_answer_has_one_outcome() {
        use ProviderAccountStatus::*;
        let active = |n: &str| ProvisioningOutcome::Active {
            account_number: n.to_owned(),
        };
        let rejected = |r: &str| ProvisioningOutcome::Rejected {
            reason: r.to_owned(),
        };
        let cases = [
            // active with a number: the number.
            (
                account(Active, Some("0123456789"), None),
                active("0123456789"),
            ),
            // active without a number, or with one no bank issues: the provider's error, wait.
            (account(Active, None, None), ProvisioningOutcome::Pending),
            (
                account(Active, Some(""), None),
                ProvisioningOutcome::Pending,
            ),
            (
                account(Active, Some("12345"), None),
                ProvisioningOutcome::Pending,
            ),
            (
                account(Active, Some("01234567ab"), None),
                ProvisioningOutcome::Pending,
            ),
            // pending, whatever else it says.
            (account(Pending, None, None), ProvisioningOutcome::Pending),
            (
                account(Pending, Some("0123456789"), None),
                ProvisioningOutcome::Pending,
            ),
            // failed: the provider's reason, or a default one.
            (
                account(Failed, None, Some("BVN [redacted] not found")),
                rejected("BVN [redacted] not found"),
            ),
            (
                account(Failed, Some("0123456789"), None),
                rejected("the provider bank refused the account"),
            ),
            (
                account(Failed, None, Some("  ")),
                rejected("the provider bank refused the account"),
            ),
            // identity rejected at the open.
            (
                ProviderAnswer::IdentityRejected {
                    reason: "identity rejected".into(),
                },
                rejected("identity rejected"),
            ),
            (
                ProviderAnswer::IdentityRejected { reason: "".into() },
                rejected("the provider bank rejected the identity"),
            ),
            // closed before it was ever active: failed, never a number.
            (
                account(Closed, None, None),
                rejected("the provider bank closed the account before it was active"),
            ),
            (
                account(Closed, Some("0123456789"), None),
                rejected("the provider bank closed the account before it was active"),
            ),
            (account(Closed, None, Some("dormant")), rejected("dormant")),
            // errors and timeouts (and a number already held): wait.
            (ProviderAnswer::Unusable, ProvisioningOutcome::Pending),
        ];
        for (answer, outcome) in cases {
            assert_eq!(provisioning_outcome(answer.clone()), outcome, "{answer:?}");
        }
    }

    #[test]
    fn the_provider_statuses_read_as_the_protocol_writes_them() {
        for (text, status) in [
            ("pending", ProviderAccountStatus::Pending),
            ("active", ProviderAccountStatus::Active),
            ("failed", ProviderAccountStatus::Failed),
            ("closed", ProviderAccountStatus::Closed),
        ] {
            assert_eq!(
                serde_json::from_value::<ProviderAccountStatus>(json!(text)).unwrap(),
                status
            );
            assert_eq!(status.is_open(), status != ProviderAccountStatus::Closed);
        }
        assert!(serde_json::from_value::<ProviderAccountStatus>(json!("open")).is_err());
    }

    #[test]
    fn the_open_request_carries_the_identity_under_its_kind_and_never_prints_it() {
        let number = IdentityNumber::parse("22212345678").unwrap();
        let bvn = OpenAccount::new(
            "va_1",
            "Acme Ltd/Ada Obi",
            "Ada Obi",
            "ada@example.com",
            "+2348031234567",
            IdentityType::Bvn,
            number.clone(),
        );
        assert_eq!(
            serde_json::to_value(&bvn).unwrap(),
            json!({"reference": "va_1", "accountName": "Acme Ltd/Ada Obi", "customerName": "Ada Obi",
                "customerEmail": "ada@example.com", "customerPhone": "+2348031234567",
                "bvn": "22212345678"})
        );
        let nin = OpenAccount {
            identity_type: IdentityType::Nin,
            ..bvn.clone()
        };
        let body = serde_json::to_value(&nin).unwrap();
        assert_eq!(body["nin"], "22212345678");
        assert!(body.get("bvn").is_none());
        let printed = format!("{bvn:?}");
        assert!(printed.contains("va_1"));
        assert!(
            !printed.contains("22212345678") && !printed.contains("Ada"),
            "{printed}"
        );
    }
}
