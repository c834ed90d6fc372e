//! Notifications handed over to the service in a control call's answer instead of being sent
//! (docs/operations/provider-banks.md#the-sandbox). Each waits for the service's confirmation
//! that it stored it; one left unconfirmed for `sandbox.handover_grace_secs` (the service stopped
//! between the answer and its store) is sent as a bank sends one, so that a simulated deposit
//! reaches the service whatever stops when. A confirmation that comes late costs a notification
//! the service already has, which it stores once.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, PoisonError, Weak};
use std::time::Duration;

use domain::Bank;
use tokio::time::Instant;

use crate::state::Transaction;

/// The notifications handed over and not confirmed yet, oldest first.
#[derive(Default)]
pub struct Handovers(Mutex<Book>);

#[derive(Default)]
struct Book {
    /// By the transaction's reference.
    waiting: HashMap<String, (Bank, Transaction)>,
    /// When each is due to be sent, in the order handed over (a confirmed one stays here until
    /// its time, then is skipped).
    due: VecDeque<(Instant, String)>,
}

impl Handovers {
    fn book(&self) -> std::sync::MutexGuard<'_, Book> {
        // Each change below is one insert or remove: a panic cannot leave half of one.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Holds `transaction`'s notification until confirmed or `grace` has passed.
    pub fn hand_over(&self, bank: Bank, transaction: &Transaction, grace: Duration) {
        let mut book = self.book();
        let reference = transaction.reference.clone();
        book.due
            .push_back((Instant::now() + grace, reference.clone()));
        book.waiting.insert(reference, (bank, transaction.clone()));
    }

    /// Lets go of these (stored by the service, or about to be sent on its request); how many
    /// were waiting.
    pub fn confirm<'a>(&self, references: impl IntoIterator<Item = &'a str>) -> usize {
        let mut book = self.book();
        references
            .into_iter()
            .filter(|reference| book.waiting.remove(*reference).is_some())
            .count()
    }

    /// The unconfirmed ones whose grace has passed, let go of.
    fn overdue(&self, now: Instant) -> Vec<(Bank, Transaction)> {
        let mut book = self.book();
        let mut overdue = Vec::new();
        while book.due.front().is_some_and(|(at, _)| *at <= now) {
            let Some((_, reference)) = book.due.pop_front() else {
                break;
            };
            overdue.extend(book.waiting.remove(&reference));
        }
        overdue
    }
}

/// Sends each notification whose grace has passed unconfirmed, once a second, for as long as the
/// sandbox lives.
pub fn watch(sandbox: Weak<crate::Inner>) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let Some(inner) = sandbox.upgrade() else {
                return;
            };
            for (bank, transaction) in inner.handovers.overdue(Instant::now()) {
                tracing::warn!(
                    provider_reference = %transaction.reference,
                    "a handed-over notification was not confirmed in time; sent as a bank sends one"
                );
                // Not waited for: its attempts go on in the background.
                drop(inner.notify(bank, &transaction));
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_unconfirmed_are_overdue_and_only_once() {
        let handovers = Handovers::default();
        let paid = |reference: &str| Transaction {
            reference: reference.into(),
            ..Transaction::received("0123456789", 100)
        };
        let grace = Duration::from_secs(30);
        for reference in ["a", "b", "c"] {
            handovers.hand_over(Bank::WemaBank, &paid(reference), grace);
        }
        assert_eq!(handovers.confirm(["b", "nope"]), 1);
        assert!(handovers.overdue(Instant::now()).is_empty(), "not yet");
        let later = Instant::now() + grace;
        let overdue: Vec<_> = handovers
            .overdue(later)
            .into_iter()
            .map(|(_, t)| t.reference)
            .collect();
        assert_eq!(overdue, ["a", "c"]);
        assert!(handovers.overdue(later).is_empty(), "sent once");
        assert_eq!(handovers.confirm(["a"]), 0, "too late to confirm");
    }
}
