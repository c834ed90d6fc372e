//! Domain types: validated on construction, no I/O.

pub mod account;
pub mod bank;
pub mod business;
pub mod keys;
pub mod nuban;
pub mod validation;

pub use account::{AccountStatus, IdentityNumber, IdentityType, NewAccount};
pub use bank::Bank;
pub use business::{KybStatus, Mode};
pub use validation::FieldError;
