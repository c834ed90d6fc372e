//! The JSON shapes callers see (the API's responses and the events' data), built from stored rows.
//!
//! Each view also describes itself for the OpenAPI document (`utoipa::ToSchema`). Statuses, modes
//! and banks are the domain's enums, in the rows and in the views alike. Views are built from the
//! rows (`entities`) alone: storage writes an event's data in the transaction of the change that
//! causes it, so the views sit below storage (`store`) and the api and workers above both
//! (docs/architecture.md#crates).

use serde::Serialize;
use utoipa::ToSchema;

use domain::payout::{EntryType, PayoutStatus, Schedule};
use domain::time::rfc3339;
use domain::{
    AccountStatus, Bank, DepositSource, DepositStatus, IdentityType, Mode, RecheckStatus,
};
use entities::{
    balance, deposit, ledger_entry, payout, recheck, settlement_account, virtual_account,
};

/// A virtual account. The BVN/NIN itself is never returned, not even masked.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = VirtualAccount)]
pub struct AccountView {
    #[schema(pattern = "^va_", example = "va_01J9Z6W8Q3X4T5V6B7N8M9P0QR")]
    pub id: String,
    #[schema(schema_with = schema::virtual_account_object)]
    pub object: &'static str,
    pub mode: Mode,
    pub status: AccountStatus,
    /// The NUBAN; null until the account is active.
    #[schema(required = true, pattern = "^[0-9]{10}$", example = "0123456789")]
    pub account_number: Option<String>,
    /// `<business name>/<customerName>`.
    #[schema(example = "Acme Ltd/Ada Obi")]
    pub account_name: String,
    #[schema(example = "Test Bank")]
    pub bank_name: &'static str,
    pub preferred_bank: Bank,
    pub customer_name: String,
    #[schema(format = Email)]
    pub customer_email: String,
    /// E.164.
    #[schema(pattern = "^\\+234[0-9]{10}$", example = "+2348031234567")]
    pub customer_phone: String,
    #[schema(required = true)]
    pub customer_reference: Option<String>,
    pub identity_type: IdentityType,
    #[schema(format = DateTime)]
    pub created_at: String,
    #[schema(required = true, format = DateTime)]
    pub activated_at: Option<String>,
    #[schema(required = true, format = DateTime)]
    pub deactivated_at: Option<String>,
    /// Why the provider bank refused the account (`failed` accounts only).
    #[schema(required = true)]
    pub failure_reason: Option<String>,
}

impl From<&virtual_account::Model> for AccountView {
    fn from(a: &virtual_account::Model) -> Self {
        Self {
            id: a.id.to_string(),
            object: "virtual_account",
            mode: a.mode,
            status: a.status,
            account_number: a.account_number.clone(),
            account_name: a.account_name.clone(),
            bank_name: a.bank.name(),
            preferred_bank: a.bank,
            customer_name: a.customer_name.clone(),
            customer_email: a.customer_email.clone(),
            customer_phone: a.customer_phone.clone(),
            customer_reference: a.customer_reference.clone(),
            identity_type: a.identity_type,
            created_at: rfc3339(&a.created_at),
            activated_at: a.activated_at.as_ref().map(rfc3339),
            deactivated_at: a.deactivated_at.as_ref().map(rfc3339),
            failure_reason: a.failure_reason.clone(),
        }
    }
}

/// A page of a list endpoint, newest first (docs/api/paging-and-search.md: every list pages this
/// way).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Page<T> {
    pub data: Vec<T>,
    /// The page's number (for a page reached by `cursor`: as if walked with this page size).
    #[schema(minimum = 1)]
    pub page: u64,
    #[schema(minimum = 1, maximum = 100)]
    pub page_size: u64,
    /// Exact without `q`, or when at most 10,000 items match; else an estimate.
    pub total: u64,
    pub total_pages: u64,
    /// True when `total` is an estimate (a search matching more than 10,000 items).
    pub total_is_estimate: bool,
    /// Pass as `cursor` (instead of `page`) for the next page of the same filter, in constant
    /// time however deep; null on the last page.
    pub next_cursor: Option<String>,
}

/// Money that arrived at a virtual account. A provider transaction is one deposit, however it
/// arrived and however many times.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = Deposit)]
pub struct DepositView {
    #[schema(pattern = "^dep_")]
    pub id: String,
    #[schema(schema_with = schema::deposit_object)]
    pub object: &'static str,
    #[schema(pattern = "^va_")]
    pub account_id: String,
    /// `flagged`: it reached a deactivated account, recorded but never credited.
    pub status: DepositStatus,
    /// Integer kobo (150000 is NGN 1,500.00).
    #[schema(minimum = 1, example = 150000)]
    pub amount: i64,
    #[schema(schema_with = domain::money::currency_schema)]
    pub currency: String,
    /// The provider's transaction reference.
    pub provider_reference: String,
    #[schema(required = true)]
    pub sender_name: Option<String>,
    #[schema(required = true)]
    pub sender_account_number: Option<String>,
    #[schema(required = true)]
    pub sender_bank_name: Option<String>,
    #[schema(required = true)]
    pub narration: Option<String>,
    pub source: DepositSource,
    #[schema(format = DateTime)]
    pub received_at: String,
    #[schema(format = DateTime)]
    pub created_at: String,
    /// Present in events (`deposit.received`, `deposit.flagged`), absent in listings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub account: Option<AccountView>,
}

impl From<&deposit::Model> for DepositView {
    fn from(d: &deposit::Model) -> Self {
        Self {
            id: d.id.to_string(),
            object: "deposit",
            account_id: d.account_id.to_string(),
            status: d.status,
            amount: d.amount,
            currency: d.currency.clone(),
            provider_reference: d.provider_reference.clone(),
            sender_name: d.sender_name.clone(),
            sender_account_number: d.sender_account_number.clone(),
            sender_bank_name: d.sender_bank_name.clone(),
            narration: d.narration.clone(),
            source: d.source,
            received_at: rfc3339(&d.received_at),
            created_at: rfc3339(&d.created_at),
            account: None,
        }
    }
}

/// A request to look again, at the provider, for deposits that were not recorded.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = Recheck)]
pub struct RecheckView {
    #[schema(pattern = "^rck_")]
    pub id: String,
    #[schema(schema_with = schema::recheck_object)]
    pub object: &'static str,
    #[schema(pattern = "^va_")]
    pub account_id: String,
    pub status: RecheckStatus,
    #[schema(format = DateTime)]
    pub from: String,
    #[schema(format = DateTime)]
    pub to: String,
    /// Deposits the recheck recorded; null until it completes.
    #[schema(required = true, minimum = 0)]
    pub deposits_found: Option<i32>,
    /// Present when the recheck failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,
    #[schema(format = DateTime)]
    pub created_at: String,
    #[schema(required = true, format = DateTime)]
    pub completed_at: Option<String>,
}

impl From<&recheck::Model> for RecheckView {
    fn from(r: &recheck::Model) -> Self {
        Self {
            id: r.id.to_string(),
            object: "recheck",
            account_id: r.account_id.to_string(),
            status: r.status,
            from: rfc3339(&r.window_from),
            to: rfc3339(&r.window_to),
            deposits_found: r.deposits_found,
            failure_reason: r.failure_reason.clone(),
            created_at: rfc3339(&r.created_at),
            completed_at: r.completed_at.as_ref().map(rfc3339),
        }
    }
}

/// Schema helpers for the OpenAPI document: constants, and the domain's enumerations under the
/// names the document's registration uses (they derive their own schemas).
pub mod schema {
    use utoipa::openapi::schema::{Object, ObjectBuilder, Type};

    pub use domain::{
        AccountStatus, Bank, DeliveryStatus, DepositSource, DepositStatus, EventType, IdentityType,
        Mode, RecheckStatus,
    };

    fn constant(value: &str) -> Object {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .enum_values(Some([value]))
            .build()
    }

    pub fn virtual_account_object() -> Object {
        constant("virtual_account")
    }

    pub fn deposit_object() -> Object {
        constant("deposit")
    }

    pub fn recheck_object() -> Object {
        constant("recheck")
    }

    pub fn payout_object() -> Object {
        constant("payout")
    }

    pub fn settlement_account_object() -> Object {
        constant("settlement_account")
    }

    pub fn balance_object() -> Object {
        constant("balance")
    }

    pub fn balance_transaction_object() -> Object {
        constant("balance_transaction")
    }
}

/// A payout to the business's settlement account.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = Payout)]
pub struct PayoutView {
    #[schema(pattern = "^po_", example = "po_01J9Z6W8Q3X4T5V6B7N8M9P0QR")]
    pub id: String,
    #[schema(schema_with = schema::payout_object)]
    pub object: &'static str,
    pub mode: Mode,
    pub status: PayoutStatus,
    /// Integer kobo.
    #[schema(minimum = 10000, example = 500000)]
    pub amount: i64,
    #[schema(schema_with = domain::money::currency_schema)]
    pub currency: String,
    /// Your own id for the payout, unique per business and mode.
    #[schema(required = true)]
    pub reference: Option<String>,
    #[schema(required = true)]
    pub narration: Option<String>,
    /// Copied from the settlement account when the payout was created.
    pub destination: DestinationView,
    /// The bank's session id, once it succeeded.
    #[schema(required = true)]
    pub session_id: Option<String>,
    #[schema(required = true)]
    pub failure_reason: Option<String>,
    #[schema(format = DateTime)]
    pub created_at: String,
    /// When it reached `succeeded`, `failed` or `reversed`.
    #[schema(required = true, format = DateTime)]
    pub completed_at: Option<String>,
}

/// Where a payout goes.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = PayoutDestination)]
pub struct DestinationView {
    #[schema(pattern = "^[0-9]{3}$", example = "058")]
    pub bank_code: String,
    pub bank_name: String,
    #[schema(pattern = "^[0-9]{10}$")]
    pub account_number: String,
    pub account_name: String,
}

impl From<&payout::Model> for PayoutView {
    fn from(p: &payout::Model) -> Self {
        Self {
            id: p.id.to_string(),
            object: "payout",
            mode: p.mode,
            status: p.status,
            amount: p.amount,
            currency: p.currency.clone(),
            reference: p.reference.clone(),
            narration: p.narration.clone(),
            destination: DestinationView {
                bank_code: p.bank_code.clone(),
                bank_name: p.bank_name.clone(),
                account_number: p.account_number.clone(),
                account_name: p.account_name.clone(),
            },
            session_id: p.session_id.clone(),
            failure_reason: p.failure_reason.clone(),
            created_at: rfc3339(&p.created_at),
            completed_at: p.completed_at.as_ref().map(rfc3339),
        }
    }
}

/// The bank account a mode's payouts go to.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = SettlementAccount)]
pub struct SettlementAccountView {
    #[schema(schema_with = schema::settlement_account_object)]
    pub object: &'static str,
    pub mode: Mode,
    #[schema(pattern = "^[0-9]{3}$", example = "058")]
    pub bank_code: String,
    pub bank_name: String,
    #[schema(pattern = "^[0-9]{10}$")]
    pub account_number: String,
    /// As the bank's name enquiry gave it.
    pub account_name: String,
    pub schedule: Schedule,
    #[schema(format = DateTime)]
    pub verified_at: String,
    /// Live payouts wait until then after a change (24 hours); in test mode, the change itself.
    #[schema(format = DateTime)]
    pub payouts_available_at: String,
}

impl From<&settlement_account::Model> for SettlementAccountView {
    fn from(s: &settlement_account::Model) -> Self {
        Self {
            object: "settlement_account",
            mode: s.mode,
            bank_code: s.bank_code.clone(),
            bank_name: s.bank_name.clone(),
            account_number: s.account_number.clone(),
            account_name: s.account_name.clone(),
            schedule: s.schedule,
            verified_at: rfc3339(&s.verified_at),
            payouts_available_at: rfc3339(&s.payouts_available_at),
        }
    }
}

/// A mode's balance: the sum of its ledger.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = Balance)]
pub struct BalanceView {
    #[schema(schema_with = schema::balance_object)]
    pub object: &'static str,
    pub mode: Mode,
    #[schema(schema_with = domain::money::currency_schema)]
    pub currency: String,
    /// Kobo that can be paid out now; never negative.
    #[schema(minimum = 0)]
    pub available: i64,
    /// Kobo in payouts still `pending` or `processing`.
    #[schema(minimum = 0)]
    pub in_flight: i64,
    /// When the available balance last changed (null before any money moved).
    #[schema(required = true, format = DateTime)]
    pub updated_at: Option<String>,
}

impl BalanceView {
    pub fn new(mode: Mode, balance: Option<&balance::Model>, in_flight: i64) -> Self {
        Self {
            object: "balance",
            mode,
            currency: domain::money::CURRENCY.into(),
            available: balance.map_or(0, |b| b.available),
            in_flight,
            updated_at: balance.map(|b| rfc3339(&b.updated_at)),
        }
    }
}

/// One ledger entry.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = BalanceTransaction)]
pub struct BalanceTransactionView {
    #[schema(pattern = "^btx_")]
    pub id: String,
    #[schema(schema_with = schema::balance_transaction_object)]
    pub object: &'static str,
    /// `deposit` (+), `payout` (−) or `payout_return` (+).
    pub r#type: EntryType,
    /// Signed kobo: negative for a payout.
    pub amount: i64,
    pub balance_after: i64,
    /// The deposit (`dep_…`) or payout (`po_…`).
    pub source_id: String,
    #[schema(format = DateTime)]
    pub created_at: String,
}

impl From<&ledger_entry::Model> for BalanceTransactionView {
    fn from(e: &ledger_entry::Model) -> Self {
        Self {
            id: e.id.to_string(),
            object: "balance_transaction",
            r#type: e.entry_type,
            amount: e.amount,
            balance_after: e.balance_after,
            source_id: e.source_id.clone(),
            created_at: rfc3339(&e.created_at),
        }
    }
}
