//! The webhook receiver now lives in `test_support::receiver`; this name stays for files that
//! still say `support::receiver::…`.

pub use test_support::receiver::*;
