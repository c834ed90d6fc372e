pub mod accounts;
pub mod deposits;
pub mod events;
pub mod health;
pub mod problems;
