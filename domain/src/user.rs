//! Dashboard users (SPEC §8): roles, the password rule, sign-in e-mails, the lockout after failed
//! sign-ins and when a session ends. Pure rules; storage and hashing live elsewhere.

use std::str::FromStr;

use chrono::{DateTime, Duration, Utc};
use rand::Rng;
use rand::distr::Alphanumeric;

use crate::text_enum::text_enum;

text_enum! {
    /// What a user of a business may do. Ordered by privilege: each role may do everything the
    /// roles before it may.
    #[derive(PartialOrd, Ord)]
    pub enum Role {
        /// Reads everything.
        Viewer = "viewer",
        /// Also the Developers page in test mode and resending events.
        Developer = "developer",
        /// Also live keys, the settlement account, payouts settings and the team.
        Owner = "owner",
    }
}

impl Role {
    /// For people: "Owner", "Developer", "Viewer".
    pub fn label(self) -> &'static str {
        match self {
            Role::Viewer => "Viewer",
            Role::Developer => "Developer",
            Role::Owner => "Owner",
        }
    }

    /// True when this role may do what `needed` may.
    pub fn allows(self, needed: Role) -> bool {
        self >= needed
    }
}

/// A business always keeps an owner (someone must manage its team and live keys): a change to
/// its users is allowed only when, after it, one of them is still an owner.
pub fn keeps_an_owner(roles_after: impl IntoIterator<Item = Role>) -> bool {
    roles_after.into_iter().any(|r| r == Role::Owner)
}

pub const MIN_PASSWORD_CHARS: usize = 12;
/// Long enough for any passphrase, short enough that hashing one costs a bounded time.
pub const MAX_PASSWORD_CHARS: usize = 256;

/// A password a user may choose: 12 to 256 characters.
pub fn check_password(password: &str) -> Result<(), &'static str> {
    let n = password.chars().count();
    if n < MIN_PASSWORD_CHARS {
        return Err("a password has at least 12 characters");
    }
    if n > MAX_PASSWORD_CHARS {
        return Err("a password has at most 256 characters");
    }
    Ok(())
}

/// A generated password (shown once): 20 base62 characters, about 119 bits.
pub fn generate_password() -> String {
    rand::rng()
        .sample_iter(Alphanumeric)
        .take(20)
        .map(char::from)
        .collect()
}

/// A sign-in e-mail as stored and looked up: trimmed and lower-cased whole, so `Ada@X.com` and
/// `ada@x.com` are one user. None when it is not an address.
pub fn normalise_email(value: &str) -> Option<String> {
    let value = value.trim().to_lowercase();
    if value.is_empty() || value.len() > 254 {
        return None;
    }
    let address = email_address::EmailAddress::from_str(&value).ok()?;
    let domain = address.domain();
    if !domain.contains('.') || domain.starts_with('[') || domain.ends_with('.') {
        return None;
    }
    Some(value)
}

/// Five failed attempts for an e-mail within 15 minutes lock it for 15 minutes.
pub const SIGN_IN_MAX_FAILURES: i32 = 5;
pub const SIGN_IN_WINDOW: Duration = Duration::minutes(15);
pub const SIGN_IN_LOCK: Duration = Duration::minutes(15);

/// The failed sign-ins of one e-mail (known or not): failures counted in a window that starts at
/// the first of them, and the end of a lock once they reach five.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Throttle {
    pub failures: i32,
    pub window_started_at: DateTime<Utc>,
    pub locked_until: Option<DateTime<Utc>>,
}

impl Throttle {
    pub fn is_locked(&self, now: DateTime<Utc>) -> bool {
        self.locked_until.is_some_and(|until| now < until)
    }

    /// The state after one more failure at `now` (of an e-mail that was not locked): the fifth
    /// within the window locks it and starts counting afresh.
    pub fn after_failure(previous: Option<&Throttle>, now: DateTime<Utc>) -> Throttle {
        let (failures, window_started_at) = match previous {
            Some(t) if now - t.window_started_at < SIGN_IN_WINDOW => {
                (t.failures + 1, t.window_started_at)
            }
            _ => (1, now),
        };
        if failures >= SIGN_IN_MAX_FAILURES {
            Throttle {
                failures: 0,
                window_started_at: now,
                locked_until: Some(now + SIGN_IN_LOCK),
            }
        } else {
            Throttle {
                failures,
                window_started_at,
                locked_until: None,
            }
        }
    }
}

/// How long sessions last (SPEC §8: 1 hour idle, 12 hours in all; configurable for tests).
#[derive(Debug, Clone, Copy)]
pub struct SessionLimits {
    pub idle: Duration,
    pub absolute: Duration,
}

impl SessionLimits {
    /// True while a session created at `created` and last used at `last_seen` is still open.
    pub fn is_live(
        &self,
        created: DateTime<Utc>,
        last_seen: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> bool {
        now - last_seen < self.idle && now - created < self.absolute
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(minutes: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_700_000_000, 0).unwrap() + Duration::minutes(minutes)
    }

    #[test]
    fn roles_are_ordered_by_privilege_and_round_trip() {
        assert!(Role::Owner.allows(Role::Developer));
        assert!(Role::Developer.allows(Role::Viewer));
        assert!(!Role::Viewer.allows(Role::Developer));
        assert!(!Role::Developer.allows(Role::Owner));
        for role in Role::ALL {
            assert_eq!(Role::parse(role.as_str()), Some(role));
        }
        assert_eq!(Role::parse("admin"), None);
    }

    #[test]
    fn passwords_have_twelve_characters_at_least() {
        assert!(check_password("elevenchars").is_err());
        assert!(check_password("twelve chars").is_ok());
        // Characters, not bytes.
        assert!(check_password("ééééééééééé").is_err());
        assert!(check_password(&"x".repeat(257)).is_err());
        let generated = generate_password();
        assert!(check_password(&generated).is_ok());
        assert_ne!(generated, generate_password());
    }

    #[test]
    fn emails_are_compared_lower_cased() {
        assert_eq!(
            normalise_email("  Ada@Example.COM ").as_deref(),
            Some("ada@example.com")
        );
        assert_eq!(normalise_email("ada@example"), None);
        assert_eq!(normalise_email("not an address"), None);
        assert_eq!(normalise_email(""), None);
    }

    #[test]
    fn the_fifth_failure_within_fifteen_minutes_locks_for_fifteen_minutes() {
        let mut t: Option<Throttle> = None;
        for minute in 0..4 {
            let next = Throttle::after_failure(t.as_ref(), at(minute));
            assert!(!next.is_locked(at(minute)), "failure {}", minute + 1);
            t = Some(next);
        }
        let locked = Throttle::after_failure(t.as_ref(), at(10));
        assert!(locked.is_locked(at(10)));
        assert!(locked.is_locked(at(24)));
        assert!(!locked.is_locked(at(25)));
        // After the lock the count starts again: one failure does not lock.
        let after = Throttle::after_failure(Some(&locked), at(26));
        assert!(!after.is_locked(at(26)));
        assert_eq!(after.failures, 1);
    }

    #[test]
    fn failures_spread_over_more_than_fifteen_minutes_do_not_lock() {
        let mut t: Option<Throttle> = None;
        for minute in [0, 5, 10, 14, 16] {
            let next = Throttle::after_failure(t.as_ref(), at(minute));
            assert!(!next.is_locked(at(minute)), "minute {minute}");
            t = Some(next);
        }
    }

    #[test]
    fn sessions_end_when_idle_or_old() {
        let limits = SessionLimits {
            idle: Duration::hours(1),
            absolute: Duration::hours(12),
        };
        assert!(limits.is_live(at(0), at(0), at(59)));
        assert!(!limits.is_live(at(0), at(0), at(60)));
        assert!(limits.is_live(at(0), at(11 * 60 + 30), at(11 * 60 + 59)));
        assert!(!limits.is_live(at(0), at(11 * 60 + 59), at(12 * 60)));
    }
}
