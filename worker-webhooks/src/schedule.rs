//! When to try again: the configured schedule with ±20 % jitter, or later when the receiver's
//! `Retry-After` asks for more (seconds or an HTTP date), clamped to the configured maximum.

use std::time::{Duration, SystemTime};

use rand::Rng;

/// The share of a delay that jitter may add or take away.
pub const JITTER: f64 = 0.2;

/// The delay before the next attempt, after `attempts_made` attempts (counting the one just
/// made) of a schedule: None when the schedule is exhausted (the delivery is dead).
pub fn retry_delay(schedule: &[u64], attempts_made: i32) -> Option<Duration> {
    let index = usize::try_from(attempts_made.checked_sub(1)?).ok()?;
    schedule
        .get(index)
        .map(|secs| jitter(Duration::from_secs(*secs)))
}

/// `base` give or take up to 20 %, uniformly.
pub fn jitter(base: Duration) -> Duration {
    if base.is_zero() {
        return base;
    }
    let factor = rand::rng().random_range((1.0 - JITTER)..=(1.0 + JITTER));
    base.mul_f64(factor)
}

/// A `Retry-After` value: delay-seconds or an HTTP date (a date in the past is "now"). None
/// when it is neither.
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// What the receiver asked for, never beyond the configured maximum.
pub fn clamp_retry_after(asked: Duration, max_secs: u64) -> Duration {
    asked.min(Duration::from_secs(max_secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schedule_is_followed_with_jitter_then_exhausted() {
        let schedule = [5, 300, 1800];
        for _ in 0..200 {
            let first = retry_delay(&schedule, 1).unwrap().as_secs_f64();
            assert!((4.0..=6.0).contains(&first), "{first}");
            let third = retry_delay(&schedule, 3).unwrap().as_secs_f64();
            assert!((1440.0..=2160.0).contains(&third), "{third}");
        }
        assert_eq!(
            retry_delay(&schedule, 4),
            None,
            "tried once plus once per entry"
        );
        assert_eq!(retry_delay(&[], 1), None);
        assert_eq!(retry_delay(&[0, 0], 2), Some(Duration::ZERO));
    }

    #[test]
    fn jitter_spreads_both_ways() {
        let samples: Vec<f64> = (0..500)
            .map(|_| jitter(Duration::from_secs(100)).as_secs_f64())
            .collect();
        assert!(samples.iter().all(|s| (80.0..=120.0).contains(s)));
        assert!(samples.iter().any(|s| *s < 95.0), "some earlier");
        assert!(samples.iter().any(|s| *s > 105.0), "some later");
    }

    #[test]
    fn retry_after_takes_seconds_or_an_http_date() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(
            parse_retry_after("120", now),
            Some(Duration::from_secs(120))
        );
        assert_eq!(parse_retry_after(" 0 ", now), Some(Duration::from_secs(0)));
        let later = httpdate::fmt_http_date(now + Duration::from_secs(90));
        assert_eq!(
            parse_retry_after(&later, now),
            Some(Duration::from_secs(90))
        );
        let earlier = httpdate::fmt_http_date(now - Duration::from_secs(90));
        assert_eq!(parse_retry_after(&earlier, now), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("-5", now), None);
        assert_eq!(
            clamp_retry_after(Duration::from_secs(999_999), 36_000),
            Duration::from_secs(36_000)
        );
    }
}
