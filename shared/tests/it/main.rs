//! The shared layer's tests, one binary (`cargo test -p shared --test it MODULE::`).
//! `declare_quietly` and `queue_nodes` stay binaries of their own: they read what is one per
//! process (the log subscriber, the metrics recorder).

mod alert_gauges;
mod database_tls;
mod layers;
mod ops_port;
mod providers;
mod queue;
mod queue_hardening;
mod readiness;
