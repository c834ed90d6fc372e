//! A transaction as a provider bank reports it: the `data` of a `transfer.received`
//! notification and an item of a bank's transaction list. Plain data and the one reading of a
//! report ([`RemoteTransaction::read`]: when it can be a deposit), here in the domain so that
//! storage (which records it), the provider client (which reads the list) and the notification
//! endpoint all take it from one place.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::FieldError;

// Its schema (the notification body's `data`) states what `problems` checks.
/// A transaction as the provider reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = ProviderTransaction))]
#[serde(rename_all = "camelCase")]
pub struct RemoteTransaction {
    /// The provider's transaction reference: one deposit per reference.
    #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 200))]
    pub reference: String,
    /// The virtual account's number.
    #[cfg_attr(
        feature = "openapi",
        schema(min_length = 1, max_length = 200, example = "0123456789")
    )]
    pub account_number: String,
    /// Integer kobo, positive.
    #[cfg_attr(feature = "openapi", schema(minimum = 1))]
    #[serde(deserialize_with = "whole_kobo")]
    pub amount: i64,
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::money::currency_schema))]
    pub currency: String,
    #[serde(default)]
    pub sender_name: Option<String>,
    #[serde(default)]
    pub sender_account_number: Option<String>,
    #[serde(default)]
    pub sender_bank_name: Option<String>,
    #[serde(default)]
    pub narration: Option<String>,
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub paid_at: DateTime<Utc>,
}

/// An amount read as a simulated deposit's is ([`crate::money::whole_kobo`]: `146.0` is a whole
/// number too), so that both paths take the same amounts.
fn whole_kobo<'de, D: serde::Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    let value = serde_json::Value::deserialize(d)?;
    crate::money::whole_kobo(&value)
        .ok_or_else(|| serde::de::Error::custom("amount must be a whole number of kobo"))
}

/// Why a reported transaction can be no deposit: it is kept as `invalid` for operators and never
/// credited (docs/api/deposits-and-rechecks.md), whichever way it arrived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotADeposit {
    /// Not a transaction at all (a field missing or of the wrong type): serde's reason.
    Unreadable(String),
    /// A transaction that breaks the rule: what is wrong, fields named as in the transaction.
    Refused(Vec<FieldError>),
}

impl std::fmt::Display for NotADeposit {
    /// For logs: serde's reason, or the refused fields by name (not their values: a report's
    /// free text is the sender's).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotADeposit::Unreadable(reason) => write!(f, "not a transaction: {reason}"),
            NotADeposit::Refused(errors) => {
                let fields: Vec<_> = errors.iter().map(|e| e.field.as_str()).collect();
                write!(f, "cannot be a deposit: {}", fields.join(", "))
            }
        }
    }
}

impl RemoteTransaction {
    /// The one reading of a reported transaction, however it arrives (a notification's `data`,
    /// an item of a bank's list): read, judged by the rule, and its free text cleaned (see
    /// [`Self::without_nul`]). `max_deposit` is `VAS_LIMITS__MAX_DEPOSIT`.
    pub fn read(value: serde_json::Value, max_deposit: i64) -> Result<Self, NotADeposit> {
        let tx: Self =
            serde_json::from_value(value).map_err(|e| NotADeposit::Unreadable(e.to_string()))?;
        let problems = tx.problems(max_deposit);
        if !problems.is_empty() {
            return Err(NotADeposit::Refused(problems));
        }
        Ok(tx.without_nul())
    }

    /// Why this transaction cannot be a deposit; empty when it can. The amount's part is
    /// [`crate::deposit::check_deposit_amount`], the rule a simulated deposit is held to too.
    fn problems(&self, max_deposit: i64) -> Vec<FieldError> {
        let mut errors = Vec::new();
        if let Err(e) = crate::deposit::check_deposit_amount(self.amount, max_deposit) {
            errors.push(e);
        }
        if self.currency != crate::money::CURRENCY {
            errors.push(FieldError::new(
                "currency",
                "invalid_value",
                "currency must be NGN",
            ));
        }
        let identifier =
            |s: &str| !s.is_empty() && s.len() <= 200 && !s.chars().any(char::is_control);
        if !identifier(&self.reference) {
            errors.push(FieldError::new(
                "reference",
                "invalid_format",
                "reference must be 1–200 characters, none of them control characters",
            ));
        }
        if !identifier(&self.account_number) {
            errors.push(FieldError::new(
                "accountNumber",
                "invalid_format",
                "accountNumber must be 1–200 characters, none of them control characters",
            ));
        }
        errors
    }

    /// The free-text fields without NUL characters, which PostgreSQL text cannot hold; everything
    /// else is kept as the provider sent it.
    fn without_nul(mut self) -> Self {
        for text in [
            &mut self.sender_name,
            &mut self.sender_account_number,
            &mut self.sender_bank_name,
            &mut self.narration,
        ]
        .into_iter()
        .flatten()
        {
            if text.contains('\0') {
                *text = text.replace('\0', "");
            }
        }
        self
    }
}
