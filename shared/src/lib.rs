//! The library every process shares: configuration, domain, crypto, storage, telemetry.

pub mod config;
pub mod crypto;
pub mod db;
pub mod domain;
pub mod ids;
pub mod metrics;
pub mod ops;
pub mod providers;
pub mod queue;
pub mod relay;
pub mod signing;
pub mod ssrf;
pub mod telemetry;
pub mod time;
pub mod views;
pub mod worker;
