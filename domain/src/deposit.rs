//! Deposits and rechecks: the states they are stored and shown in.

use crate::text_enum::text_enum;

text_enum! {
    /// `flagged`: it reached a deactivated account, recorded but never credited.
    pub enum DepositStatus {
        Credited = "credited",
        Flagged = "flagged",
    }
}

text_enum! {
    /// How the deposit became known: the provider notified it, or a recheck found it.
    pub enum DepositSource {
        Notification = "notification",
        Recheck = "recheck",
    }
}

text_enum! {
    /// `queued → running → completed | failed`.
    pub enum RecheckStatus {
        Queued = "queued",
        Running = "running",
        Completed = "completed",
        Failed = "failed",
    }
}

impl RecheckStatus {
    /// Queued or running: at most one such recheck per account.
    pub const OPEN: [RecheckStatus; 2] = [RecheckStatus::Queued, RecheckStatus::Running];

    /// Completed or failed: it never changes again.
    pub fn is_finished(self) -> bool {
        !Self::OPEN.contains(&self)
    }
}

/// The one rule on a deposit's amount (kobo), whichever way it arrives (a notification, a
/// recheck, a simulated deposit): positive, and at most `max` (`VAS_LIMITS__MAX_DEPOSIT`,
/// docs/api/deposits-and-rechecks.md). A reported transaction that breaks it is never a deposit: it
/// is kept as `invalid` for operators (see [`crate::provider::RemoteTransaction::read`]); a
/// simulated one is refused before the test provider is asked.
pub fn check_deposit_amount(amount: i64, max: i64) -> Result<(), crate::FieldError> {
    if amount <= 0 {
        return Err(crate::FieldError::new(
            "amount",
            "out_of_range",
            "amount must be positive",
        ));
    }
    if amount > max {
        return Err(crate::FieldError::new(
            "amount",
            "out_of_range",
            format!("amount must be at most {max} kobo (the largest deposit accepted)"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deposit_amount_is_positive_and_at_most_the_maximum() {
        assert!(check_deposit_amount(1, 10).is_ok());
        assert!(check_deposit_amount(10, 10).is_ok());
        assert_eq!(
            check_deposit_amount(11, 10).unwrap_err().code,
            "out_of_range"
        );
        assert!(check_deposit_amount(0, 10).is_err());
        assert!(check_deposit_amount(-5, 10).is_err());
        assert!(check_deposit_amount(i64::MAX, 10_000_000_000).is_err());
    }
}
