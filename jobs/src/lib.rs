//! The jobs of each work queue, one type per queue. A job's type fixes its queue at compile time:
//! `outbox::enqueue` takes any [`QueueJob`] and files it under that type's queue, and a
//! `worker::Consumer` of a queue hands its handler only that queue's type.
//!
//! Jobs carry ids only: a handler re-reads the rows and decides from their state. The JSON is
//! `{"kind": "...", ...ids}`; a kind this version does not know (a newer version's) cannot be
//! read, and the shared consumer gives such a job up once.

use domain::ids::{AccountId, DeliveryId, PayoutId, RecheckId};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// A job type and the queue its jobs go to.
pub trait QueueJob: Serialize + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static {
    /// The work queue (the broker declares one per job type: `queue::broker::QUEUES`).
    const QUEUE: &'static str;
}

/// `provisioning`: accounts at their provider bank.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ProvisioningJob {
    /// Get a number for a pending account (create it at the provider if it never was).
    Provision { account_id: AccountId },
    /// Close a deactivated account at its provider.
    Close { account_id: AccountId },
}

impl QueueJob for ProvisioningJob {
    const QUEUE: &'static str = "provisioning";
}

/// `webhooks`: one attempt of one delivery; retries reschedule the job.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum WebhookJob {
    /// Deliver one event to one endpoint.
    Deliver { delivery_id: DeliveryId },
}

impl QueueJob for WebhookJob {
    const QUEUE: &'static str = "webhooks";
}

/// `recheck`: ask a provider for an account's transactions and record what is missing.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RecheckJob {
    Recheck { recheck_id: RecheckId },
}

impl QueueJob for RecheckJob {
    const QUEUE: &'static str = "recheck";
}

/// `payouts`: send a payout's transfer to the payout provider and follow it to its outcome.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PayoutJob {
    SendPayout { payout_id: PayoutId },
}

impl QueueJob for PayoutJob {
    const QUEUE: &'static str = "payouts";
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kind of every variant of every job type this file declares, read from its source:
    /// the list is found, not typed, so a new job cannot be left out of the test below.
    fn declared_kinds() -> std::collections::BTreeSet<String> {
        let source = include_str!("lib.rs");
        let mut kinds = std::collections::BTreeSet::new();
        for job in source.split("impl QueueJob for ").skip(1) {
            let name: String = job.chars().take_while(|c| c.is_alphanumeric()).collect();
            if name.is_empty() {
                continue; // this test's own text
            }
            let body = source
                .split(&format!("pub enum {name} {{"))
                .nth(1)
                .and_then(|rest| rest.split("\n}").next())
                .expect("the job type is declared here");
            for line in body.lines() {
                let Some(variant) = line.strip_prefix("    ") else {
                    continue;
                };
                if variant.starts_with(|c: char| c.is_ascii_uppercase()) {
                    let variant: String = variant
                        .chars()
                        .take_while(|c| c.is_alphanumeric())
                        .collect();
                    // serde's snake_case: an underscore before each inner capital.
                    let mut kind = String::new();
                    for (i, c) in variant.chars().enumerate() {
                        if c.is_ascii_uppercase() && i > 0 {
                            kind.push('_');
                        }
                        kind.push(c.to_ascii_lowercase());
                    }
                    kinds.insert(kind);
                }
            }
        }
        kinds
    }

    /// Reads stored job JSON as one job type and writes it again.
    type Rewrite = fn(&str) -> String;

    /// `stored` read as a `J` and written again: the same text while the type keeps its JSON.
    fn rewritten<J: QueueJob>(stored: &str) -> String {
        let job: J = serde_json::from_str(stored).unwrap_or_else(|e| panic!("{stored}: {e}"));
        serde_json::to_string(&job).unwrap()
    }

    /// Rows written before jobs were typed per queue keep reading the same, every kind of
    /// every queue, and a job is written as it always was.
    #[test]
    fn payloads_keep_their_json() {
        let cases: [(&str, Rewrite); 5] = [
            (
                r#"{"kind":"provision","account_id":"va_1"}"#,
                rewritten::<ProvisioningJob>,
            ),
            (
                r#"{"kind":"close","account_id":"va_1"}"#,
                rewritten::<ProvisioningJob>,
            ),
            (
                r#"{"kind":"deliver","delivery_id":"whd_1"}"#,
                rewritten::<WebhookJob>,
            ),
            (
                r#"{"kind":"recheck","recheck_id":"rck_1"}"#,
                rewritten::<RecheckJob>,
            ),
            (
                r#"{"kind":"send_payout","payout_id":"po_1"}"#,
                rewritten::<PayoutJob>,
            ),
        ];
        let mut covered = std::collections::BTreeSet::new();
        for (stored, rewrite) in cases {
            assert_eq!(rewrite(stored), stored);
            let json: serde_json::Value = serde_json::from_str(stored).unwrap();
            covered.insert(json["kind"].as_str().unwrap().to_owned());
        }
        assert_eq!(
            covered,
            declared_kinds(),
            "every job kind keeps its JSON here"
        );
    }

    /// Another queue's job is no job of this one.
    #[test]
    fn a_queue_reads_only_its_own_kinds() {
        let deliver = r#"{"kind":"deliver","delivery_id":"whd_1"}"#;
        assert!(serde_json::from_str::<ProvisioningJob>(deliver).is_err());
        assert!(serde_json::from_str::<RecheckJob>(deliver).is_err());
        assert!(serde_json::from_str::<WebhookJob>(deliver).is_ok());
    }
}
