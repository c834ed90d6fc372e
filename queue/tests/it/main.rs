//! The broker's, relay's and consumer's tests, one binary (`cargo test -p queue --test it
//! MODULE::`). `declare_quietly` and `queue_nodes` stay binaries of their own: they read what is
//! one per process (the log subscriber, the metrics recorder).

mod queue;
mod queue_hardening;
