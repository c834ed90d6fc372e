//! Outgoing transfers (payouts) and name enquiry: pure data and rules, no I/O. Outcomes are
//! deterministic so callers can exercise every path: a transfer settles `delay` after it is
//! made, and by the last two digits of its amount in kobo it fails (`01`), succeeds and is then
//! reversed (`02`), succeeds without a notification (`03`), or succeeds.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use domain::nuban;
use domain::provider::{NewTransfer, RemoteTransferStatus};
use rand::Rng;
use serde::{Deserialize, Serialize};

/// How long after success a `02` transfer is reversed.
pub const REVERSAL_AFTER: Duration = Duration::seconds(1);

/// A transfer as the bank keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Transfer {
    /// What the caller asked for, as it asked the first time.
    #[serde(flatten)]
    pub asked: NewTransfer,
    pub status: RemoteTransferStatus,
    pub session_id: Option<String>,
    pub failure_reason: Option<String>,
    pub created_at: DateTime<Utc>,
    pub settles_at: DateTime<Utc>,
    /// How many times a transfer was asked for under this reference; money moved once.
    pub requests: u32,
    /// The last status whose notification was sent (or deliberately lost).
    #[serde(default)]
    pub announced: Option<RemoteTransferStatus>,
}

/// The transfer as the protocol shows it (`GET /transfers/{reference}` and notifications).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TransferView {
    pub reference: String,
    pub status: RemoteTransferStatus,
    pub amount: i64,
    pub currency: String,
    pub bank_code: String,
    pub account_number: String,
    pub session_id: Option<String>,
    pub failure_reason: Option<String>,
}

impl From<&Transfer> for TransferView {
    fn from(t: &Transfer) -> Self {
        Self {
            reference: t.asked.reference.clone(),
            status: t.status,
            amount: t.asked.amount,
            currency: t.asked.currency.clone(),
            bank_code: t.asked.bank_code.clone(),
            account_number: t.asked.account_number.clone(),
            session_id: t.session_id.clone(),
            failure_reason: t.failure_reason.clone(),
        }
    }
}

/// Why a transfer request is refused (422 `invalid_transfer`).
pub fn problems(new: &NewTransfer) -> Option<String> {
    if new.reference.trim().is_empty() {
        return Some("reference must not be empty".into());
    }
    if new.amount <= 0 {
        return Some("amount must be a positive number of kobo".into());
    }
    if new.currency != domain::money::CURRENCY {
        return Some(format!("currency must be {}", domain::money::CURRENCY));
    }
    if !nuban::is_valid(&new.bank_code, &new.account_number) {
        return Some("accountNumber is not a valid NUBAN for bankCode".into());
    }
    None
}

/// The name a bank's name enquiry answers for a number: deterministic, so tests can expect it;
/// None for numbers that no bank has (an invalid check digit, or starting `000`).
pub fn account_name(bank_code: &str, account_number: &str) -> Option<String> {
    if !nuban::is_valid(bank_code, account_number) || account_number.starts_with("000") {
        return None;
    }
    const FIRST: [&str; 8] = [
        "ADAEZE", "CHIDI", "BOLA", "NGOZI", "EMEKA", "FUNMI", "TUNDE", "AMAKA",
    ];
    const LAST: [&str; 8] = [
        "OKAFOR", "ADEYEMI", "EZE", "BELLO", "OKONKWO", "BALOGUN", "NWOSU", "ABUBAKAR",
    ];
    let digits: Vec<usize> = account_number
        .bytes()
        .map(|b| usize::from(b - b'0'))
        .collect();
    let first = FIRST[(digits[7] + digits[3]) % FIRST.len()];
    let last = LAST[(digits[8] + digits[5] * 3) % LAST.len()];
    Some(format!("{first} {last}"))
}

/// One bank's transfers, by reference.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Transfers {
    by_reference: BTreeMap<String, Transfer>,
}

impl Transfers {
    /// Makes a transfer, or returns the one already made under this reference (whatever the
    /// body says this time: a reference names one transfer forever, and money moves once).
    pub fn create(&mut self, new: NewTransfer, now: DateTime<Utc>, delay: Duration) -> Transfer {
        if let Some(existing) = self.by_reference.get_mut(&new.reference) {
            existing.requests += 1;
            return existing.clone();
        }
        let reference = new.reference.clone();
        let transfer = Transfer {
            asked: new,
            status: RemoteTransferStatus::Processing,
            session_id: None,
            failure_reason: None,
            created_at: now,
            settles_at: now + delay,
            requests: 1,
            announced: None,
        };
        self.by_reference.insert(reference, transfer.clone());
        transfer
    }

    /// The transfer as it is at `now`: settled lazily on the first read after it is due.
    /// Returns it and whether it changed.
    pub fn get(&mut self, reference: &str, now: DateTime<Utc>) -> Option<(Transfer, bool)> {
        let transfer = self.by_reference.get_mut(reference)?;
        let before = transfer.status;
        advance(transfer, now);
        Some((transfer.clone(), transfer.status != before))
    }

    /// Marks `status` as announced; true when it had not been.
    pub fn announce(&mut self, reference: &str, status: RemoteTransferStatus) -> bool {
        match self.by_reference.get_mut(reference) {
            Some(t) if t.announced != Some(status) => {
                t.announced = Some(status);
                true
            }
            _ => false,
        }
    }

    /// Every transfer, oldest first.
    pub fn all(&self) -> Vec<Transfer> {
        let mut all: Vec<_> = self.by_reference.values().cloned().collect();
        all.sort_by_key(|t| t.created_at);
        all
    }

    /// References whose latest status may still need announcing (after a restart).
    pub fn unannounced(&self) -> Vec<String> {
        self.by_reference
            .values()
            .filter(|t| t.announced != Some(final_status(t)))
            .map(|t| t.asked.reference.clone())
            .collect()
    }
}

/// Where a transfer ends, decided by its amount.
fn final_status(t: &Transfer) -> RemoteTransferStatus {
    match t.asked.amount.rem_euclid(100) {
        1 => RemoteTransferStatus::Failed,
        2 => RemoteTransferStatus::Reversed,
        _ => RemoteTransferStatus::Succeeded,
    }
}

/// True when the notification of a transfer's success is lost on purpose (`03`): only a status
/// query learns it.
pub fn notification_lost(t: &Transfer) -> bool {
    t.asked.amount.rem_euclid(100) == 3 && t.status == RemoteTransferStatus::Succeeded
}

fn advance(t: &mut Transfer, now: DateTime<Utc>) {
    if t.status == RemoteTransferStatus::Processing && now >= t.settles_at {
        if final_status(t) == RemoteTransferStatus::Failed {
            t.status = RemoteTransferStatus::Failed;
            t.failure_reason = Some("beneficiary account is dormant".into());
        } else {
            t.status = RemoteTransferStatus::Succeeded;
            t.session_id = Some(session_id());
        }
    }
    if t.status == RemoteTransferStatus::Succeeded
        && final_status(t) == RemoteTransferStatus::Reversed
        && now >= t.settles_at + REVERSAL_AFTER
    {
        t.status = RemoteTransferStatus::Reversed;
        t.failure_reason = Some("the beneficiary bank returned the funds".into());
    }
}

/// A NIP-style 30-digit session id.
fn session_id() -> String {
    let mut rng = rand::rng();
    (0..30)
        .map(|_| char::from(b'0' + rng.random_range(0..10u8)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new(reference: &str, amount: i64) -> NewTransfer {
        NewTransfer {
            reference: reference.into(),
            amount,
            currency: "NGN".into(),
            bank_code: "058".into(),
            account_number: nuban::account_number("058", 42).unwrap(),
            account_name: "ACME LTD".into(),
            narration: None,
        }
    }

    #[test]
    fn outcomes_follow_the_amount_and_a_reference_moves_money_once() {
        let t0 = Utc::now();
        let delay = Duration::seconds(2);
        let mut transfers = Transfers::default();
        for (reference, amount, status) in [
            ("ok", 100_000, RemoteTransferStatus::Succeeded),
            ("fail", 100_001, RemoteTransferStatus::Failed),
            ("lost", 100_003, RemoteTransferStatus::Succeeded),
        ] {
            transfers.create(new(reference, amount), t0, delay);
            let (early, _) = transfers.get(reference, t0 + Duration::seconds(1)).unwrap();
            assert_eq!(early.status, RemoteTransferStatus::Processing);
            let (late, changed) = transfers.get(reference, t0 + delay).unwrap();
            assert_eq!(late.status, status, "{reference}");
            assert!(changed);
        }
        let (lost, _) = transfers.get("lost", t0 + delay).unwrap();
        assert!(notification_lost(&lost));
        assert_eq!(lost.session_id.as_ref().map(String::len), Some(30));

        transfers.create(new("rev", 100_002), t0, delay);
        let (ok, _) = transfers.get("rev", t0 + delay).unwrap();
        assert_eq!(ok.status, RemoteTransferStatus::Succeeded);
        let (reversed, _) = transfers.get("rev", t0 + delay + REVERSAL_AFTER).unwrap();
        assert_eq!(reversed.status, RemoteTransferStatus::Reversed);

        let again = transfers.create(new("ok", 999), t0, delay);
        assert_eq!(again.asked.amount, 100_000, "the first transfer stands");
        assert_eq!(again.requests, 2);
        assert_eq!(transfers.all().len(), 4);
    }

    #[test]
    fn name_enquiry_is_deterministic_and_knows_no_000_numbers() {
        let number = nuban::account_number("058", 123_456_789).unwrap();
        let name = account_name("058", &number).unwrap();
        assert_eq!(account_name("058", &number).unwrap(), name);
        assert!(account_name("057", &number).is_none() || nuban::is_valid("057", &number));
        let unknown = nuban::account_number("058", 1_234).unwrap();
        assert!(unknown.starts_with("000"));
        assert_eq!(account_name("058", &unknown), None);
    }
}
