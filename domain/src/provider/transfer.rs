//! A transfer (a payout's money leaving) in the provider protocol's words
//! (docs/operations/provider-banks.md): what the service asks a bank to send, and what a bank says
//! became of it. The provider client sends and reads these, the sandbox receives and answers them:
//! one definition, so both sides of the protocol cannot drift apart.

use serde::{Deserialize, Serialize};

use super::ProviderEvent;
use crate::payout::TransferState;

/// `POST /transfers` (docs/operations/provider-banks.md): the payout id is the reference.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NewTransfer {
    pub reference: String,
    pub amount: i64,
    pub currency: String,
    pub bank_code: String,
    pub account_number: String,
    pub account_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub narration: Option<String>,
}

/// A transfer's status as the provider words it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RemoteTransferStatus {
    Processing,
    Succeeded,
    Failed,
    Reversed,
}

impl RemoteTransferStatus {
    /// The notification event that announces this status, if any.
    pub fn event(self) -> Option<ProviderEvent> {
        match self {
            RemoteTransferStatus::Processing => None,
            RemoteTransferStatus::Succeeded => Some(ProviderEvent::TransferSucceeded),
            RemoteTransferStatus::Failed => Some(ProviderEvent::TransferFailed),
            RemoteTransferStatus::Reversed => Some(ProviderEvent::TransferReversed),
        }
    }
}

impl From<RemoteTransferStatus> for TransferState {
    fn from(s: RemoteTransferStatus) -> Self {
        match s {
            RemoteTransferStatus::Processing => TransferState::Processing,
            RemoteTransferStatus::Succeeded => TransferState::Succeeded,
            RemoteTransferStatus::Failed => TransferState::Failed,
            RemoteTransferStatus::Reversed => TransferState::Reversed,
        }
    }
}

/// A transfer as the provider reports it (an answer, a status query or a `transfer.*`
/// notification's `data`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RemoteTransfer {
    pub reference: String,
    pub status: RemoteTransferStatus,
    #[serde(default)]
    pub session_id: Option<String>,
    #[serde(default)]
    pub failure_reason: Option<String>,
}
