//! Waiting for what happens in the background: poll until it holds, or fail saying what did not.

use std::fmt::Display;
use std::time::{Duration, Instant};

/// How long to wait before looking again.
pub const POLL: Duration = Duration::from_millis(50);

/// Runs `check` until it returns `Ok`, and returns that value. Past `within`, panics with the
/// last `Err`, which should say what was seen instead.
pub async fn eventually<T, E: Display>(
    within: Duration,
    mut check: impl AsyncFnMut() -> Result<T, E>,
) -> T {
    let started = Instant::now();
    loop {
        match check().await {
            Ok(value) => return value,
            Err(seen) if started.elapsed() >= within => {
                panic!("not within {within:?}: {seen}")
            }
            Err(_) => tokio::time::sleep(POLL).await,
        }
    }
}

/// Runs `check` until it is true. Past `within`, panics naming `what` did not happen.
pub async fn wait_until(what: &str, within: Duration, mut check: impl AsyncFnMut() -> bool) {
    let started = Instant::now();
    while !check().await {
        assert!(started.elapsed() < within, "{what}: not within {within:?}");
        tokio::time::sleep(POLL).await;
    }
}
