//! Resending an event (`POST /events/{id}/resend`, the event's page): one rule for both front
//! ends, the per-business limit and the audit entry included.

use domain::Mode;
use store::audit::Actor;
use store::deliveries::{self, Delivery, Resent};
use store::events::Event;

use crate::state::AppState;

#[derive(Debug, thiserror::Error)]
pub enum ResendError {
    #[error("no webhook URL is configured for {0} mode")]
    NoWebhookUrl(Mode),
    /// Over the resends a business may ask for in a minute (docs/api/events-and-webhooks.md):
    /// nothing was sent.
    #[error("too many resends in the last minute; retry after {retry_after_secs} s")]
    RateLimited { retry_after_secs: u64 },
    #[error(transparent)]
    Db(#[from] sea_orm::DbErr),
}

/// A fresh schedule for the event to the mode's current webhook URL (same `webhook-id`), recorded
/// in the audit log as `actor`'s, within the business's resends per minute; the relay woken to
/// send it.
pub async fn resend(
    state: &AppState,
    actor: &Actor,
    event: &Event,
) -> Result<Delivery, ResendError> {
    let per_minute = state.config.limits.resends_per_minute.get();
    let delivery =
        match deliveries::resend(&state.db, actor, event, per_minute, domain::time::now()).await? {
            Resent::Scheduled(delivery) => delivery,
            Resent::NoWebhookUrl => return Err(ResendError::NoWebhookUrl(event.mode)),
            Resent::RateLimited { retry_after_secs } => {
                tracing::info!(
                    business_id = %event.business_id,
                    event_id = %event.id,
                    retry_after_secs,
                    "event resend refused: over the business's resends per minute"
                );
                return Err(ResendError::RateLimited { retry_after_secs });
            }
        };
    state.relay.kick();
    tracing::info!(event_id = %event.id, delivery_id = %delivery.id, "event resend requested");
    Ok(delivery)
}
