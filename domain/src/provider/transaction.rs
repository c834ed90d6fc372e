//! A transaction as a provider bank reports it: the `data` of a `transfer.received`
//! notification and an item of a bank's transaction list. Plain data and the rule of when it can
//! be a deposit, here in the domain so that storage (which records it), the provider client
//! (which reads the list) and the notification endpoint all take it from one place.

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

impl RemoteTransaction {
    /// Why this transaction cannot be a deposit (fields named as in the transaction); empty when
    /// it can. Notifications and rechecks both ask, so a transaction is judged the same whichever
    /// way it arrives. `max_deposit` is `VAS_LIMITS__MAX_DEPOSIT`.
    pub fn problems(&self, max_deposit: i64) -> Vec<FieldError> {
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
    pub fn without_nul(mut self) -> Self {
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
