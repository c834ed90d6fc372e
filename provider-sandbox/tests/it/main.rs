//! The sandbox's tests, one binary (`cargo test -p provider-sandbox --test it MODULE::`).
//! `metrics_labels` stays a binary of its own: the metrics recorder is one per process.

mod sandbox;
mod slow_clients;
mod transfers;
