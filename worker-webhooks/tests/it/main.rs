//! The webhook worker's tests, one binary (`cargo test -p worker-webhooks --test it MODULE::`).

mod bench;
mod cli;
mod dead_letters;
mod fairness;
mod processes;
mod rounds;
mod support;
