//! Start-up's tests, one binary (`cargo test -p bootstrap --test it MODULE::`): the database as
//! the URL says (TLS, failover), the ops port, readiness.

mod database_tls;
mod ops_port;
mod readiness;
