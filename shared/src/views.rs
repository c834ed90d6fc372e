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
