//! The outbound HTTP's tests, one binary (`cargo test -p outbound --test it MODULE::`).

mod providers;
