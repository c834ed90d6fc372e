//! Storage's tests, one binary (`cargo test -p store --test it MODULE::`).

mod alert_gauges;
