//! The audit log's vocabulary (docs/dashboard.md): what a person (or an operator) did to a
//! business. Each action is one variant, stored as its text; the words people read are here too.

use crate::text_enum::text_enum;

text_enum! {
    /// What was done. Never carries a secret: a key is named by its id and last four, a user by
    /// e-mail, a webhook secret not at all.
    pub enum AuditAction {
        SignedIn = "session.signed_in",
        SignedOut = "session.signed_out",
        /// A wrong password or TOTP code at sign-in (an unknown e-mail's: against no business).
        SignInFailed = "session.sign_in_failed",
        /// The attempt that locked an e-mail for 15 minutes (docs/dashboard.md).
        SignInLocked = "session.sign_in_locked",
        /// Attempts refused unchecked while the e-mail is locked (docs/dashboard.md), the right
        /// password's too: one row per e-mail, address and minute, with how many.
        SignInRefused = "session.sign_in_refused",
        KeyRolled = "key.rolled",
        KeyRevoked = "key.revoked",
        WebhookUrlSet = "webhook.url_set",
        WebhookSecretRotated = "webhook.secret_rotated",
        WebhookTestSent = "webhook.test_sent",
        /// For the Events page's resend (recorded by that page).
        EventResent = "event.resent",
        UserAdded = "user.added",
        UserRoleChanged = "user.role_changed",
        UserRemoved = "user.removed",
        PasswordChanged = "profile.password_changed",
        TotpEnabled = "profile.totp_enabled",
        TotpRemoved = "profile.totp_removed",
        /// From the Balance page or `PUT /settlement-account`.
        SettlementAccountChanged = "settlement_account.changed",
        /// `POST /virtual-accounts/{id}/deactivate`.
        AccountDeactivated = "virtual_account.deactivated",
        /// `POST /payouts` (the daily schedule's payouts are the service's, not audited).
        PayoutCreated = "payout.created",
        /// `api admin business create`.
        BusinessCreated = "business.created",
        /// `api admin business approve-kyb`: live mode opens.
        KybApproved = "business.kyb_approved",
        /// `worker-webhooks replay`: a delivery's fresh schedule.
        DeliveryReplayed = "delivery.replayed",
    }
}

impl AuditAction {
    /// For people, on the Team page.
    pub fn label(self) -> &'static str {
        match self {
            AuditAction::SignedIn => "Signed in",
            AuditAction::SignedOut => "Signed out",
            AuditAction::SignInFailed => "Failed to sign in",
            AuditAction::SignInLocked => "Sign-in locked for 15 minutes",
            AuditAction::SignInRefused => "Sign-in refused while locked",
            AuditAction::KeyRolled => "Rolled the secret key",
            AuditAction::KeyRevoked => "Revoked a secret key",
            AuditAction::WebhookUrlSet => "Set the webhook URL",
            AuditAction::WebhookSecretRotated => "Rotated the webhook secret",
            AuditAction::WebhookTestSent => "Sent a test event",
            AuditAction::EventResent => "Resent an event",
            AuditAction::UserAdded => "Added a user",
            AuditAction::UserRoleChanged => "Changed a role",
            AuditAction::UserRemoved => "Removed a user",
            AuditAction::PasswordChanged => "Changed their password",
            AuditAction::TotpEnabled => "Turned on two-step verification",
            AuditAction::TotpRemoved => "Turned off two-step verification",
            AuditAction::SettlementAccountChanged => "Changed the settlement account",
            AuditAction::AccountDeactivated => "Deactivated a virtual account",
            AuditAction::PayoutCreated => "Requested a payout",
            AuditAction::BusinessCreated => "Created the business",
            AuditAction::KybApproved => "Approved KYB (live mode opened)",
            AuditAction::DeliveryReplayed => "Replayed a webhook delivery",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_action_has_its_own_text_and_words() {
        let texts: std::collections::HashSet<_> =
            AuditAction::ALL.iter().map(|a| a.as_str()).collect();
        assert_eq!(texts.len(), AuditAction::ALL.len());
        for action in AuditAction::ALL {
            assert_eq!(AuditAction::parse(action.as_str()), Some(action));
            assert!(!action.label().is_empty());
        }
    }
}
