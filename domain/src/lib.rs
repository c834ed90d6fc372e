//! The domain: types validated on construction, their rules and state machines, NUBAN, ids and
//! time. No I/O: this crate depends on nothing that opens a file, a socket or a database (the
//! `db` feature adds only sea-orm's derive macros and traits, so the enumerations can be columns).

mod text_enum;

pub mod account;
pub mod audit;
pub mod bank;
pub mod business;
pub mod deposit;
pub mod event;
pub mod idempotency;
pub mod ids;
pub mod keys;
pub mod money;
pub mod nuban;
pub mod payout;
pub mod provider;
pub mod settlement_banks;
pub mod time;
pub mod user;
pub mod validation;

pub use account::{AccountStatus, IdentityNumber, IdentityType, NewAccount};
pub use audit::AuditAction;
pub use bank::Bank;
pub use business::{KybStatus, Mode};
pub use deposit::{DepositSource, DepositStatus, RecheckStatus};
pub use event::{DeliveryStatus, EventType};
pub use text_enum::TextEnum;
pub use user::Role;
pub use validation::FieldError;
