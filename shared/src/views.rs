//! The JSON shapes callers see (responses and event data), built from stored rows.

use serde::Serialize;

use crate::db::accounts::Account;
use crate::domain::Bank;
use crate::time::rfc3339;

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AccountView {
    pub id: String,
    pub object: &'static str,
    pub mode: String,
    pub status: String,
    pub account_number: Option<String>,
    pub account_name: String,
    pub bank_name: &'static str,
    pub preferred_bank: String,
    pub customer_name: String,
    pub customer_email: String,
    pub customer_phone: String,
    pub customer_reference: Option<String>,
    pub identity_type: String,
    pub created_at: String,
    pub activated_at: Option<String>,
    pub deactivated_at: Option<String>,
    pub failure_reason: Option<String>,
}

impl From<&Account> for AccountView {
    fn from(a: &Account) -> Self {
        Self {
            id: a.id.clone(),
            object: "virtual_account",
            mode: a.mode.clone(),
            status: a.status.clone(),
            account_number: a.account_number.clone(),
            account_name: a.account_name.clone(),
            bank_name: Bank::parse(&a.bank).map_or("", Bank::name),
            preferred_bank: a.bank.clone(),
            customer_name: a.customer_name.clone(),
            customer_email: a.customer_email.clone(),
            customer_phone: a.customer_phone.clone(),
            customer_reference: a.customer_reference.clone(),
            identity_type: a.identity_type.clone(),
            created_at: rfc3339(&a.created_at),
            activated_at: a.activated_at.as_ref().map(rfc3339),
            deactivated_at: a.deactivated_at.as_ref().map(rfc3339),
            failure_reason: a.failure_reason.clone(),
        }
    }
}

/// A page of a list endpoint.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Page<T> {
    pub data: Vec<T>,
    pub page: u64,
    pub page_size: u64,
    pub total: u64,
    pub total_pages: u64,
}

impl<T> Page<T> {
    pub fn new(data: Vec<T>, page: u64, page_size: u64, total: u64) -> Self {
        Self {
            data,
            page,
            page_size,
            total,
            total_pages: total.div_ceil(page_size),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DepositView {
    pub id: String,
    pub object: &'static str,
    pub account_id: String,
    pub status: String,
    pub amount: i64,
    pub currency: String,
    pub provider_reference: String,
    pub sender_name: Option<String>,
    pub sender_account_number: Option<String>,
    pub sender_bank_name: Option<String>,
    pub narration: Option<String>,
    pub source: String,
    pub received_at: String,
    pub created_at: String,
    /// Present in events (`deposit.received`, `deposit.flagged`), absent in listings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub account: Option<AccountView>,
}

impl From<&crate::db::deposits::Deposit> for DepositView {
    fn from(d: &crate::db::deposits::Deposit) -> Self {
        Self {
            id: d.id.clone(),
            object: "deposit",
            account_id: d.account_id.clone(),
            status: d.status.clone(),
            amount: d.amount,
            currency: d.currency.clone(),
            provider_reference: d.provider_reference.clone(),
            sender_name: d.sender_name.clone(),
            sender_account_number: d.sender_account_number.clone(),
            sender_bank_name: d.sender_bank_name.clone(),
            narration: d.narration.clone(),
            source: d.source.clone(),
            received_at: rfc3339(&d.received_at),
            created_at: rfc3339(&d.created_at),
            account: None,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RecheckView {
    pub id: String,
    pub object: &'static str,
    pub account_id: String,
    pub status: String,
    pub from: String,
    pub to: String,
    pub deposits_found: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,
    pub created_at: String,
    pub completed_at: Option<String>,
}

impl From<&crate::db::rechecks::Recheck> for RecheckView {
    fn from(r: &crate::db::rechecks::Recheck) -> Self {
        Self {
            id: r.id.clone(),
            object: "recheck",
            account_id: r.account_id.clone(),
            status: r.status.clone(),
            from: rfc3339(&r.window_from),
            to: rfc3339(&r.window_to),
            deposits_found: r.deposits_found,
            failure_reason: r.failure_reason.clone(),
            created_at: rfc3339(&r.created_at),
            completed_at: r.completed_at.as_ref().map(rfc3339),
        }
    }
}
