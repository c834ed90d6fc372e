//! Resending an event (`POST /events/{id}/resend`, the event's page).

use domain::Mode;
use shared::db::deliveries::{self, Delivery};
use shared::db::events::Event;

use crate::state::AppState;

#[derive(Debug, thiserror::Error)]
pub enum ResendError {
    #[error("no webhook URL is configured for {0} mode")]
    NoWebhookUrl(Mode),
    #[error(transparent)]
    Db(#[from] sea_orm::DbErr),
}

/// A fresh schedule for the event to the mode's current webhook URL (same `webhook-id`), the
/// relay woken to send it.
pub async fn resend(state: &AppState, event: &Event) -> Result<Delivery, ResendError> {
    let delivery = deliveries::resend(&state.db, event, domain::time::now())
        .await?
        .ok_or(ResendError::NoWebhookUrl(event.mode))?;
    state.relay.kick();
    tracing::info!(event_id = %event.id, delivery_id = %delivery.id, "event resend requested");
    Ok(delivery)
}
