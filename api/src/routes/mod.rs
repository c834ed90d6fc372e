pub mod accounts;
pub mod health;
pub mod problems;
