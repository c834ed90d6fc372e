//! The domain: types validated on construction, their rules and state machines, NUBAN, ids and
//! time. No I/O: this crate depends on nothing that opens a file, a socket or a database.

pub mod account;
pub mod bank;
pub mod business;
pub mod ids;
pub mod keys;
pub mod nuban;
pub mod provider;
pub mod time;
pub mod user;
pub mod validation;

pub use account::{AccountStatus, IdentityNumber, IdentityType, NewAccount};
pub use bank::Bank;
pub use business::{KybStatus, Mode};
pub use user::Role;
pub use validation::FieldError;
