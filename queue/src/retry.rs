//! The one jittered exponential backoff of the workers that ask a bank again (provisioning polls,
//! payout status queries, recheck retries). Webhook deliveries follow their own configured
//! schedule instead (`worker-webhooks::schedule`), as docs/api/events-and-webhooks.md asks.

use std::time::Duration;

use backoff::backoff::Backoff;

/// The delay before try number `attempt + 1`: doubling from `initial` up to `max`, with ±20 %
/// jitter so many rows waiting on one bank do not ask in step. Both bounds are at least a second.
pub fn jittered_delay(initial: Duration, max: Duration, attempt: i32) -> Duration {
    let initial = initial.max(Duration::from_secs(1));
    let max = max.max(initial);
    let mut policy = backoff::ExponentialBackoffBuilder::new()
        .with_initial_interval(initial)
        .with_multiplier(2.0)
        .with_randomization_factor(0.2)
        .with_max_interval(max)
        .with_max_elapsed_time(None)
        .build();
    // Past 64 doublings every delay is the maximum anyway; the clamp bounds the loop.
    let mut delay = Duration::ZERO;
    for _ in 0..=attempt.clamp(0, 64) {
        delay = policy.next_backoff().unwrap_or(max);
    }
    delay
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_with_jitter_up_to_the_maximum() {
        let (initial, max) = (Duration::from_secs(2), Duration::from_secs(60));
        for _ in 0..50 {
            let first = jittered_delay(initial, max, 0).as_secs_f64();
            assert!((1.6..=2.4).contains(&first), "first delay {first}");
            let third = jittered_delay(initial, max, 2).as_secs_f64();
            assert!((6.4..=9.6).contains(&third), "third delay {third}");
            let late = jittered_delay(initial, max, 40).as_secs_f64();
            assert!((48.0..=72.0).contains(&late), "late delay {late}");
        }
    }

    #[test]
    fn bounds_below_a_second_are_raised() {
        let d = jittered_delay(Duration::ZERO, Duration::ZERO, 0);
        assert!(d >= Duration::from_millis(800) && d <= Duration::from_millis(1200));
        assert!(
            jittered_delay(Duration::from_secs(1), Duration::from_secs(1), i32::MAX)
                <= Duration::from_millis(1200)
        );
    }
}
