//! One place that turns "this business, in this mode" into a query's filter
//! (docs/architecture.md: every query is scoped by business and mode). A query of a table that
//! holds a business's data takes [`Tenant::filter`] (or [`Business::filter`] for a table without
//! a mode, [`Tenants::filter`] for a sweep over businesses); no query names the business column itself, and `api/tests/it/tenancy.rs` fails when
//! one does outside this file.

use domain::Mode;
use domain::ids::BusinessId;
use sea_orm::{ColumnTrait, Condition};

use entities::{
    account_count, account_number, account_state, api_key, audit_entry, balance, business_mode,
    delivery, deposit, event, idempotency_key, ledger_entry, payout, recheck, settlement_account,
    user, virtual_account,
};

/// A table's business column: the table holds one business's rows.
pub trait BusinessColumns: ColumnTrait + Copy {
    const BUSINESS_ID: Self;
}

/// A table's business and mode columns: the table holds one business's rows per mode.
pub trait TenantColumns: BusinessColumns {
    const MODE: Self;
}

macro_rules! tenant_tables {
    ($($entity:ident),* $(,)?) => {$(
        impl BusinessColumns for $entity::Column {
            const BUSINESS_ID: Self = $entity::Column::BusinessId;
        }
        impl TenantColumns for $entity::Column {
            const MODE: Self = $entity::Column::Mode;
        }
    )*};
}

tenant_tables!(
    account_count,
    account_number,
    account_state,
    api_key,
    audit_entry,
    balance,
    business_mode,
    delivery,
    deposit,
    event,
    idempotency_key,
    ledger_entry,
    payout,
    recheck,
    settlement_account,
    virtual_account,
);

impl BusinessColumns for user::Column {
    const BUSINESS_ID: Self = user::Column::BusinessId;
}

/// One business's data in one mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tenant<'a> {
    pub business_id: &'a BusinessId,
    pub mode: Mode,
}

impl<'a> Tenant<'a> {
    pub fn new(business_id: &'a BusinessId, mode: Mode) -> Self {
        Tenant { business_id, mode }
    }

    /// The filter of the table whose columns are `C`: its rows of this business and mode.
    pub fn filter<C: TenantColumns>(&self) -> Condition {
        Condition::all()
            .add(C::BUSINESS_ID.eq(self.business_id))
            .add(C::MODE.eq(self.mode))
    }

    /// Whether a row already read (of `business_id` and `mode`) is this tenant's: what
    /// [`Tenant::filter`] would have let through.
    pub fn holds(&self, business_id: &BusinessId, mode: Mode) -> bool {
        self.business_id == business_id && self.mode == mode
    }
}

/// One business's data, every mode (its users, its audit log across modes, its modes' rows).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Business<'a>(pub &'a BusinessId);

impl Business<'_> {
    /// The filter of the table whose columns are `C`: this business's rows.
    pub fn filter<C: BusinessColumns>(&self) -> Condition {
        Condition::all().add(C::BUSINESS_ID.eq(self.0))
    }
}

/// Several businesses' data in one mode: a sweep over businesses (e.g. which have a working
/// live key), still never another mode's rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tenants<'a> {
    pub business_ids: &'a [BusinessId],
    pub mode: Mode,
}

impl Tenants<'_> {
    /// The filter of the table whose columns are `C`: its rows of these businesses in this mode.
    pub fn filter<C: TenantColumns>(&self) -> Condition {
        Condition::all()
            .add(C::BUSINESS_ID.is_in(self.business_ids))
            .add(C::MODE.eq(self.mode))
    }
}
