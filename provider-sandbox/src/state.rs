//! The banks' books: accounts and the money sent to them. Pure data and rules, no I/O, so every
//! operation takes `now` and the caller decides when to persist (see `Ledger::take_dirty`).

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Duration, Utc};
use domain::Bank;
use domain::nuban;
use domain::provider::{NewTransfer, RemoteTransferStatus};
use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::transfers::{Transfer, Transfers};

/// An identity number starting with this is rejected, so callers can exercise the failure path.
const REJECTED_IDENTITY_PREFIX: &str = "99999";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Pending,
    Active,
    Failed,
    Closed,
}

/// What a caller asks a bank to open (the identity number itself is never stored).
#[derive(Debug, Clone)]
pub struct NewAccount {
    pub reference: String,
    pub account_name: String,
    pub customer_name: String,
    pub customer_email: String,
    pub customer_phone: String,
    pub identity_number: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Account {
    pub reference: String,
    pub account_name: String,
    pub customer_name: String,
    pub customer_email: String,
    pub customer_phone: String,
    pub status: Status,
    pub account_number: Option<String>,
    pub failure_reason: Option<String>,
    pub created_at: DateTime<Utc>,
    /// When a pending account turns active; fixed at creation so a restart with another
    /// configured delay does not move it.
    pub activates_at: Option<DateTime<Utc>>,
    pub transactions: Vec<Transaction>,
}

/// Money received by an account, exactly as it goes over the wire (notification and listing).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Transaction {
    pub reference: String,
    pub account_number: String,
    pub amount: i64,
    pub currency: String,
    pub sender_name: String,
    pub sender_account_number: String,
    pub sender_bank_name: String,
    pub narration: String,
    #[serde(with = "rfc3339_millis")]
    pub paid_at: DateTime<Utc>,
}

impl Transaction {
    /// Money paid to `account_number` now, under a new reference, from the sandbox's default
    /// sender with its default narration (a caller sets its own over these).
    pub fn received(account_number: &str, amount: i64) -> Self {
        Self {
            reference: domain::ids::new_id("txn"),
            account_number: account_number.to_owned(),
            amount,
            currency: domain::money::CURRENCY.into(),
            sender_name: "Sandbox Sender".into(),
            sender_account_number: "0123456789".into(),
            sender_bank_name: "Sandbox Bank".into(),
            narration: "Sandbox transfer".into(),
            // Whole milliseconds, as paidAt is shown: a caller filtering with a shown paidAt as
            // `to` must find that very transaction.
            paid_at: chrono::SubsecRound::trunc_subsecs(Utc::now(), 3),
        }
    }
}

/// One bank's accounts, by reference, plus an index from account number to reference.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Book {
    accounts: BTreeMap<String, Account>,
    /// Derived from `accounts`; rebuilt after loading rather than stored twice.
    #[serde(skip)]
    by_number: HashMap<String, String>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Ledger {
    /// Keyed by bank slug, so the file stays readable and independent of enum layout.
    banks: BTreeMap<String, Book>,
    /// Outgoing transfers, keyed by bank slug (absent from state files written before payouts).
    #[serde(default)]
    transfers: BTreeMap<String, Transfers>,
    /// Set by every change, so the owner knows to write the state file.
    #[serde(skip)]
    dirty: bool,
}

impl Ledger {
    /// Rebuilds what is not stored (the number index) after deserialising.
    pub fn reindex(&mut self) {
        for book in self.banks.values_mut() {
            book.by_number = book
                .accounts
                .values()
                .filter_map(|a| Some((a.account_number.clone()?, a.reference.clone())))
                .collect();
        }
    }

    /// True once per batch of changes: the caller persists, and the flag is cleared.
    pub fn take_dirty(&mut self) -> bool {
        std::mem::take(&mut self.dirty)
    }

    /// Opens an account, or returns the existing one for a reference already seen (whatever the
    /// body says this time: a reference names one account forever).
    pub fn create(
        &mut self,
        bank: Bank,
        new: NewAccount,
        now: DateTime<Utc>,
        activation_delay_secs: u64,
    ) -> Account {
        if let Some(account) = self.get(bank, &new.reference, now) {
            return account;
        }
        let (status, failure_reason, activates_at) =
            if new.identity_number.starts_with(REJECTED_IDENTITY_PREFIX) {
                let reason = "the identity number was rejected by the bank's identity check";
                (Status::Failed, Some(reason.to_owned()), None)
            } else if answers_at_once(bank) {
                (Status::Active, None, None)
            } else {
                (
                    Status::Pending,
                    None,
                    Some(activation_time(now, activation_delay_secs)),
                )
            };
        let book = self.book(bank);
        let account_number = (status == Status::Active).then(|| book.fresh_number(bank));
        let account = Account {
            reference: new.reference,
            account_name: new.account_name,
            customer_name: new.customer_name,
            customer_email: new.customer_email,
            customer_phone: new.customer_phone,
            status,
            account_number,
            failure_reason,
            created_at: now,
            activates_at,
            transactions: Vec::new(),
        };
        book.insert(account.clone());
        self.dirty = true;
        account
    }

    /// The account as it is at `now` (a pending one whose time has come is activated here: the
    /// sandbox has no timer, activation happens lazily on the first read after it is due).
    pub fn get(&mut self, bank: Bank, reference: &str, now: DateTime<Utc>) -> Option<Account> {
        let book = self.banks.get_mut(bank.slug())?;
        let account = book.accounts.get(reference)?;
        let due =
            account.status == Status::Pending && account.activates_at.is_some_and(|at| at <= now);
        if due {
            let number = book.fresh_number(bank);
            book.by_number.insert(number.clone(), reference.to_owned());
            let account = book.accounts.get_mut(reference)?;
            account.status = Status::Active;
            account.account_number = Some(number);
            self.dirty = true;
        }
        book.accounts.get(reference).cloned()
    }

    /// Closes an account (idempotent). A pending one closes without ever getting a number; an
    /// active one keeps its number, so money that still arrives can be traced.
    pub fn close(&mut self, bank: Bank, reference: &str, now: DateTime<Utc>) -> Option<Account> {
        let current = self.get(bank, reference, now)?;
        if current.status == Status::Closed {
            return Some(current);
        }
        let account = self
            .banks
            .get_mut(bank.slug())?
            .accounts
            .get_mut(reference)?;
        account.status = Status::Closed;
        self.dirty = true;
        Some(account.clone())
    }

    /// Records money sent to an account number of this bank; None when the bank has no such
    /// number. A closed account still receives it (the number is kept), as a real bank might
    /// bounce it later: the service must be able to see money reach a deactivated account.
    pub fn deposit(
        &mut self,
        bank: Bank,
        account_number: &str,
        make: impl FnOnce() -> Transaction,
    ) -> Option<Transaction> {
        let book = self.banks.get_mut(bank.slug())?;
        let reference = book.by_number.get(account_number)?;
        let account = book.accounts.get_mut(reference)?;
        let transaction = make();
        account.transactions.push(transaction.clone());
        self.dirty = true;
        Some(transaction)
    }

    /// The transaction `reference` into `account_number` of this bank, if there is one.
    pub fn transaction(
        &self,
        bank: Bank,
        account_number: &str,
        reference: &str,
    ) -> Option<Transaction> {
        let book = self.banks.get(bank.slug())?;
        let account = book.accounts.get(book.by_number.get(account_number)?)?;
        account
            .transactions
            .iter()
            .find(|t| t.reference == reference)
            .cloned()
    }

    /// The account's transactions with `paid_at` in `[from, to]`, oldest first; None for an
    /// unknown account.
    pub fn transactions(
        &mut self,
        bank: Bank,
        reference: &str,
        from: Option<DateTime<Utc>>,
        to: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> Option<Vec<Transaction>> {
        let account = self.get(bank, reference, now)?;
        let in_range = |t: &&Transaction| {
            from.is_none_or(|from| t.paid_at >= from) && to.is_none_or(|to| t.paid_at <= to)
        };
        Some(
            account
                .transactions
                .iter()
                .filter(in_range)
                .cloned()
                .collect(),
        )
    }

    /// Makes a transfer, or counts one more request for a reference already seen.
    pub fn create_transfer(
        &mut self,
        bank: Bank,
        new: NewTransfer,
        now: DateTime<Utc>,
        delay: Duration,
    ) -> Transfer {
        self.dirty = true;
        self.transfers
            .entry(bank.slug().to_owned())
            .or_default()
            .create(new, now, delay)
    }

    /// The transfer as it is at `now`; None when this bank never received it.
    pub fn transfer(
        &mut self,
        bank: Bank,
        reference: &str,
        now: DateTime<Utc>,
    ) -> Option<Transfer> {
        let (transfer, changed) = self.transfers.get_mut(bank.slug())?.get(reference, now)?;
        self.dirty |= changed;
        Some(transfer)
    }

    /// Records that `status` of a transfer was announced; true the first time.
    pub fn announce_transfer(
        &mut self,
        bank: Bank,
        reference: &str,
        status: RemoteTransferStatus,
    ) -> bool {
        let first = self
            .transfers
            .get_mut(bank.slug())
            .is_some_and(|t| t.announce(reference, status));
        self.dirty |= first;
        first
    }

    /// Every transfer of every bank, with its bank's slug.
    pub fn all_transfers(&self) -> Vec<(String, Transfer)> {
        self.transfers
            .iter()
            .flat_map(|(bank, t)| t.all().into_iter().map(move |t| (bank.clone(), t)))
            .collect()
    }

    /// Transfers whose outcome may still be unannounced (a restart stopped their timers).
    pub fn unannounced_transfers(&self) -> Vec<(Bank, String)> {
        self.transfers
            .iter()
            .filter_map(|(slug, t)| Some((Bank::parse(slug)?, t)))
            .flat_map(|(bank, t)| t.unannounced().into_iter().map(move |r| (bank, r)))
            .collect()
    }

    fn book(&mut self, bank: Bank) -> &mut Book {
        self.banks.entry(bank.slug().to_owned()).or_default()
    }
}

impl Book {
    fn insert(&mut self, account: Account) {
        if let Some(number) = &account.account_number {
            self.by_number
                .insert(number.clone(), account.reference.clone());
        }
        self.accounts.insert(account.reference.clone(), account);
    }

    /// A check-digit-valid NUBAN for this bank that none of its accounts has.
    fn fresh_number(&self, bank: Bank) -> String {
        let mut rng = rand::rng();
        loop {
            // The serial space (10^9) dwarfs any sandbox, so this loop ends almost at once.
            let serial = rng.random_range(0..1_000_000_000u32);
            if let Some(number) = nuban::account_number(bank.cbn_code(), serial)
                && !self.by_number.contains_key(&number)
            {
                return number;
            }
        }
    }
}

/// `now` plus the delay; a delay too large to represent means "never" rather than a panic.
fn activation_time(now: DateTime<Utc>, delay_secs: u64) -> DateTime<Utc> {
    i64::try_from(delay_secs)
        .ok()
        .and_then(Duration::try_seconds)
        .and_then(|delay| now.checked_add_signed(delay))
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

/// The banks that hand out a number in the creation response; the others answer 202 and
/// activate after the configured delay.
fn answers_at_once(bank: Bank) -> bool {
    matches!(bank, Bank::WemaBank | Bank::TestBank)
}

/// `paidAt` as the rest of the service writes timestamps: RFC 3339 UTC, milliseconds, `Z`.
mod rfc3339_millis {
    use chrono::{DateTime, Utc};
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(t: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&domain::time::rfc3339(t))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<DateTime<Utc>, D::Error> {
        let text = String::deserialize(d)?;
        DateTime::parse_from_rfc3339(&text)
            .map(|t| t.with_timezone(&Utc))
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new_account(reference: &str, identity: &str) -> NewAccount {
        NewAccount {
            reference: reference.into(),
            account_name: "Acme/Ada".into(),
            customer_name: "Ada".into(),
            customer_email: "ada@example.com".into(),
            customer_phone: "+2348031234567".into(),
            identity_number: identity.into(),
        }
    }

    #[test]
    fn delayed_banks_activate_lazily_once_due() {
        let mut ledger = Ledger::default();
        let t0 = Utc::now();
        let a = ledger.create(Bank::AccessBank, new_account("r1", "12345678901"), t0, 5);
        assert_eq!(a.status, Status::Pending);
        assert!(ledger.take_dirty());
        let early = ledger
            .get(Bank::AccessBank, "r1", t0 + Duration::seconds(4))
            .unwrap();
        assert_eq!(early.status, Status::Pending);
        assert!(
            !ledger.take_dirty(),
            "a read that changes nothing is not a change"
        );
        let late = ledger
            .get(Bank::AccessBank, "r1", t0 + Duration::seconds(5))
            .unwrap();
        assert_eq!(late.status, Status::Active);
        let number = late.account_number.unwrap();
        assert!(nuban::is_valid("044", &number));
        assert!(ledger.take_dirty());
    }

    #[test]
    fn a_huge_delay_means_never_not_a_panic() {
        let now = Utc::now();
        assert_eq!(activation_time(now, u64::MAX), DateTime::<Utc>::MAX_UTC);
        assert_eq!(activation_time(now, 3), now + Duration::seconds(3));
    }

    #[test]
    fn references_and_numbers_are_per_bank_and_stable() {
        let mut ledger = Ledger::default();
        let now = Utc::now();
        let a = ledger.create(Bank::WemaBank, new_account("r1", "12345678901"), now, 0);
        let again = ledger.create(Bank::WemaBank, new_account("r1", "99999000000"), now, 0);
        assert_eq!(a.account_number, again.account_number);
        assert_eq!(again.status, Status::Active);
        let other = ledger.create(Bank::TestBank, new_account("r1", "99999000000"), now, 0);
        assert_eq!(other.status, Status::Failed);
        assert!(other.account_number.is_none());
    }

    #[test]
    fn reindex_restores_number_lookup_after_a_round_trip() {
        let mut ledger = Ledger::default();
        let now = Utc::now();
        let a = ledger.create(Bank::TestBank, new_account("r1", "12345678901"), now, 0);
        let number = a.account_number.unwrap();
        let text = serde_json::to_string(&ledger).unwrap();
        let mut back: Ledger = serde_json::from_str(&text).unwrap();
        back.reindex();
        let tx = back.deposit(Bank::TestBank, &number, || Transaction {
            reference: "txn_1".into(),
            account_number: number.clone(),
            amount: 100,
            currency: "NGN".into(),
            sender_name: "S".into(),
            sender_account_number: "0".into(),
            sender_bank_name: "B".into(),
            narration: "N".into(),
            paid_at: now,
        });
        assert!(tx.is_some());
        assert!(
            back.deposit(Bank::WemaBank, &number, || unreachable!())
                .is_none()
        );
    }
}
