//! `bench`: a load generator for `POST /v1/virtual-accounts` that prints throughput and latency
//! percentiles. See README.md beside Cargo.toml.

pub mod cli;
pub mod home;
pub mod lists;
pub mod load;
pub mod payload;
pub mod payouts;
pub mod stats;
pub mod webhooks;
