//! Changing a mode's settlement account (`PUT /settlement-account`, the Balance page).

use domain::Mode;
use domain::ids::BusinessId;
use domain::payout::SettlementRequest;
use outbound::providers::ProviderError;
use store::audit::Actor;
use store::payouts::{self, SettlementAccount, VerifiedAccount};

use crate::state::AppState;

/// How long a caller waits before asking again when the payout bank's name enquiry is down: long
/// enough for a brief outage to pass, short enough for a person at the form.
pub const NAME_ENQUIRY_RETRY_AFTER_SECS: u64 = 30;

#[derive(Debug, thiserror::Error)]
pub enum SettlementError {
    #[error("the bank has no account with that number")]
    BankAccountNotFound,
    /// Down, refusing, or not configured for this mode: the caller can only wait; nothing was
    /// stored.
    #[error("the payout provider cannot be reached; retry after {retry_after_secs} s")]
    ProviderUnavailable { retry_after_secs: u64 },
    #[error(transparent)]
    Db(#[from] sea_orm::DbErr),
}

/// The name enquiry (`BankAccountNotFound` when the bank has no such account,
/// `ProviderUnavailable` when it cannot be asked), then the store with its audit entry, its event
/// and, in live mode, its hold; the relay is woken for the event.
pub async fn change(
    state: &AppState,
    actor: &Actor,
    business_id: &BusinessId,
    mode: Mode,
    request: &SettlementRequest,
) -> Result<SettlementAccount, SettlementError> {
    let name = state
        .providers
        .name_enquiry(mode, request.bank.code, &request.account_number)
        .await
        .map_err(|e| {
            match &e {
                ProviderError::NotConfigured(..) => {
                    tracing::error!(error = %e, "no payout provider for this mode")
                }
                _ => tracing::warn!(error = %e, "name enquiry failed"),
            }
            SettlementError::ProviderUnavailable {
                retry_after_secs: NAME_ENQUIRY_RETRY_AFTER_SECS,
            }
        })?
        .ok_or(SettlementError::BankAccountNotFound)?;
    let stored = payouts::set_settlement_account(
        &state.db,
        actor,
        business_id,
        mode,
        &VerifiedAccount {
            bank: request.bank,
            account_number: &request.account_number,
            account_name: &name,
            schedule: request.schedule,
        },
        domain::time::now(),
    )
    .await?;
    state.relay.kick();
    Ok(stored)
}
