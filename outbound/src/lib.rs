//! Outbound HTTP: everything the service says to, or reads from, servers it does not control.
//! The provider-bank client and the reading of its notifications (`providers`), the capped
//! reading of any such reply (`http`), and for businesses' webhook receivers: the address rules
//! (`webhook_url`, on top of the SSRF guard `ssrf`), the Standard Webhooks signature (`signing`)
//! and what of a receiver's reply is kept (`webhook_reply`).

pub mod http;
pub mod providers;
pub mod signing;
pub mod ssrf;
pub mod webhook_reply;
pub mod webhook_url;
