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
