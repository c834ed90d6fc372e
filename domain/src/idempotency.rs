//! Idempotency keys (docs/api/idempotency.md): where the first request of a key stands.

use crate::text_enum::text_enum;

text_enum! {
    /// A key is claimed `in_flight` in its create's transaction and `completed` with the status
    /// first answered; a replay answers only from a completed key.
    pub enum KeyState {
        InFlight = "in_flight",
        Completed = "completed",
    }
}
