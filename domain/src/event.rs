//! Events and their webhook deliveries: what happened, and where each delivery stands.

use crate::text_enum::text_enum;

text_enum! {
    /// What happened (docs/api/events-and-webhooks.md); `data` is the account or the deposit it
    /// happened to.
    pub enum EventType {
        VirtualAccountActive = "virtualaccount.active",
        VirtualAccountFailed = "virtualaccount.failed",
        VirtualAccountDeactivated = "virtualaccount.deactivated",
        DepositReceived = "deposit.received",
        DepositFlagged = "deposit.flagged",
        PayoutSucceeded = "payout.succeeded",
        PayoutFailed = "payout.failed",
        PayoutReversed = "payout.reversed",
        SettlementAccountUpdated = "settlement_account.updated",
        WebhookTest = "webhook.test",
    }
}

text_enum! {
    /// `pending` (being attempted or waiting for its next attempt), `succeeded` (a 2xx came back),
    /// `dead` (every attempt failed; an operator can replay it, a caller can resend the event).
    pub enum DeliveryStatus {
        Pending = "pending",
        Succeeded = "succeeded",
        Dead = "dead",
    }
}
