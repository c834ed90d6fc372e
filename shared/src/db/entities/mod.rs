//! sea-orm entities, one per table. Enumerations are stored as their lowercase names.

pub mod business;
pub mod business_mode;
pub mod dashboard_session;
pub mod delivery;
pub mod delivery_attempt;
pub mod deposit;
pub mod deposit_conflict;
pub mod event;
pub mod idempotency_key;
pub mod outbox;
pub mod provider_notification;
pub mod recheck;
pub mod sign_in_throttle;
pub mod user;
pub mod virtual_account;
