//! Dashboard users (docs/dashboard.md): roles, the password rule, sign-in e-mails, the lockout
//! after failed sign-ins and when a session ends. Pure rules; storage and hashing live elsewhere.

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

/// Five password (or code) checks for an e-mail within 15 minutes lock it for 15 minutes.
pub const SIGN_IN_MAX_ATTEMPTS: i32 = 5;
pub const SIGN_IN_WINDOW: Duration = Duration::minutes(15);
pub const SIGN_IN_LOCK: Duration = Duration::minutes(15);

/// The sign-in attempts of one e-mail (known or not). An attempt is counted BEFORE its password
/// (or code) is checked, in one atomic step with the decision to check it, so attempts sent in
/// parallel count the same as one after the other: at most five are ever checked per window.
/// A right one gives its count back ([`Throttle::after_success`]), so what stays counted are the
/// failed ones (and those still being checked).
///
/// `store::users::admit_sign_in_attempt` is [`Throttle::admit`] as one SQL statement; keep
/// the two alike (its tests run this sequence against both databases).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Throttle {
    /// Attempts counted in the window (checked and wrong, or being checked).
    pub attempts: i32,
    pub window_started_at: DateTime<Utc>,
    /// Set by the attempt that reached five: until then nothing is checked for the e-mail.
    pub locked_until: Option<DateTime<Utc>>,
}

impl Throttle {
    pub fn is_locked(&self, now: DateTime<Utc>) -> bool {
        self.locked_until.is_some_and(|until| now < until)
    }

    /// True when the next attempt starts a new count: the window is over, or a lock was set and
    /// is over (after a lock the count starts again).
    pub fn starts_afresh(&self, now: DateTime<Utc>) -> bool {
        self.window_started_at <= window_cutoff(now) || self.locked_until.is_some()
    }

    /// One more attempt at `now`: the state that counts it, or None while the e-mail is locked
    /// (then nothing changes: a lock is never restarted, shortened or reset by attempts). The
    /// fifth counted attempt in a window locks the e-mail for 15 minutes from it (that attempt
    /// is still checked).
    pub fn admit(previous: Option<&Throttle>, now: DateTime<Utc>) -> Option<Throttle> {
        let (attempts, window_started_at) = match previous {
            Some(t) if t.is_locked(now) => return None,
            Some(t) if !t.starts_afresh(now) => (t.attempts + 1, t.window_started_at),
            _ => (1, now),
        };
        Some(Throttle {
            attempts,
            window_started_at,
            locked_until: locks_at(attempts).then(|| now + SIGN_IN_LOCK),
        })
    }

    /// The state after a counted attempt turned out right: its count is given back, and a lock
    /// it set (as the fifth) is lifted, since fewer than five attempts are then wrong. Failed
    /// attempts stay counted: a right one by someone else does not refund them.
    pub fn after_success(&self) -> Throttle {
        let attempts = (self.attempts - 1).max(0);
        Throttle {
            attempts,
            window_started_at: self.window_started_at,
            locked_until: self.locked_until.filter(|_| locks_at(attempts)),
        }
    }
}

/// True when this many counted attempts lock the e-mail.
pub fn locks_at(attempts: i32) -> bool {
    attempts >= SIGN_IN_MAX_ATTEMPTS
}

/// A window that started at or before this is over at `now`.
pub fn window_cutoff(now: DateTime<Utc>) -> DateTime<Utc> {
    now - SIGN_IN_WINDOW
}

/// How long sessions last (docs/dashboard.md: 1 hour idle, 12 hours in all; configurable for
/// tests).
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

    /// Attempts one after the other: the state after each, as the database keeps it.
    fn admit_all(minutes: &[i64]) -> Vec<Option<Throttle>> {
        let mut t: Option<Throttle> = None;
        minutes
            .iter()
            .map(|m| {
                let next = Throttle::admit(t.as_ref(), at(*m));
                if next.is_some() {
                    t = next;
                }
                next
            })
            .collect()
    }

    #[test]
    fn the_fifth_attempt_within_fifteen_minutes_locks_for_fifteen_minutes() {
        let seen = admit_all(&[0, 1, 2, 3, 10]);
        for (i, t) in seen[..4].iter().enumerate() {
            let t = t.expect("admitted");
            assert_eq!(t.attempts, i as i32 + 1);
            assert!(!t.is_locked(at(i as i64)), "attempt {}", i + 1);
        }
        // The fifth is still checked, and locks.
        let locked = seen[4].expect("the fifth is checked");
        assert!(locked.is_locked(at(10)));
        assert!(locked.is_locked(at(24)));
        assert!(!locked.is_locked(at(25)));
        // While locked nothing is admitted and nothing changes (no count restarts at 1).
        assert_eq!(Throttle::admit(Some(&locked), at(11)), None);
        assert_eq!(Throttle::admit(Some(&locked), at(24)), None);
        // After the lock the count starts again: one attempt does not lock.
        let after = Throttle::admit(Some(&locked), at(25)).unwrap();
        assert_eq!((after.attempts, after.locked_until), (1, None));
    }

    #[test]
    fn attempts_spread_over_more_than_fifteen_minutes_do_not_lock() {
        for t in admit_all(&[0, 5, 10, 14, 16]) {
            assert!(t.unwrap().locked_until.is_none());
        }
    }

    #[test]
    fn a_right_attempt_gives_its_count_back_and_failures_stay() {
        let four = admit_all(&[0, 1, 2, 3])[3].unwrap();
        let fifth = Throttle::admit(Some(&four), at(4)).unwrap();
        assert!(fifth.is_locked(at(4)));
        // The fifth was right: four wrong ones remain, unlocked.
        let refunded = fifth.after_success();
        assert_eq!((refunded.attempts, refunded.locked_until), (4, None));
        // Four wrong, then the next wrong one locks.
        let next = Throttle::admit(Some(&refunded), at(5)).unwrap();
        assert!(next.is_locked(at(5)));
        // Never below zero.
        let one = Throttle::admit(None, at(0)).unwrap();
        assert_eq!(one.after_success().after_success().attempts, 0);
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
