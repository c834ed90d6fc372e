//! Idempotency keys (docs/api/idempotency.md): one home for the key handling of every create. A key
//! is claimed `in_flight` in the create's transaction, names the resource it made, and is completed
//! with the status first answered; the same key again replays that answer, with another body it
//! is refused, and while the first request runs it is `in use`. Keys of different operations
//! never meet: each operation (`Scope`) has its own namespace.

use chrono::{DateTime, Utc};
use domain::ids::BusinessId;
use sea_orm::{
    ActiveValue::Set, ConnectionTrait, DatabaseTransaction, DbBackend, DbErr, EntityTrait,
    Statement,
};
use sha2::{Digest, Sha256};

use crate::tenant::Tenant;
use crypto::RequestDigest;
use domain::Mode;
use domain::idempotency::KeyState;
use entities::idempotency_key;

pub use idempotency_key::Model as StoredKey;

/// The operation a key belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// `POST /virtual-accounts`: stored under the caller's key as it is (as before scopes).
    Accounts,
    /// `POST /payouts`.
    Payouts,
}

impl Scope {
    /// The key as stored. A header value cannot hold a control character, so the payout
    /// prefix (ending in U+001F) can never be spelled by an account key.
    fn stored(self, key: &str) -> String {
        match self {
            Scope::Accounts => key.to_owned(),
            Scope::Payouts => format!("payouts\u{1f}{key}"),
        }
    }
}

/// A caller's key for one request.
#[derive(Clone, Copy)]
pub struct Key<'a> {
    pub business_id: &'a BusinessId,
    pub mode: Mode,
    pub scope: Scope,
    pub key: &'a str,
    /// The canonical body's keyed digest: the same key with another body is refused.
    pub request: &'a RequestDigest,
}

/// What claiming a key found.
#[derive(Debug)]
pub enum Claim {
    /// The key is new and now ours (`in_flight`), in the caller's transaction.
    New,
    /// The key was there already.
    Seen(StoredKey),
}

impl Key<'_> {
    pub(crate) fn id(&self) -> (BusinessId, Mode, String) {
        (
            self.business_id.clone(),
            self.mode,
            self.scope.stored(self.key),
        )
    }

    /// The key's row, if any.
    pub async fn find<C: ConnectionTrait>(&self, db: &C) -> Result<Option<StoredKey>, DbErr> {
        idempotency_key::Entity::find_by_id(self.id()).one(db).await
    }

    /// True when `stored` was first used with this request's body.
    pub fn same_request(&self, stored: &StoredKey) -> bool {
        self.request.matches(&stored.request_hash)
    }

    /// On PostgreSQL, a transaction-scoped advisory lock on the key: a second request with the
    /// same key while the first is in its transaction is told so (409) at once instead of
    /// queueing. SQLite runs one transaction at a time, so the second simply sees the first's
    /// result.
    pub async fn try_lock(&self, txn: &DatabaseTransaction) -> Result<bool, DbErr> {
        if txn.get_database_backend() != DbBackend::Postgres {
            return Ok(true);
        }
        let (business, mode, stored) = self.id();
        let digest = Sha256::digest(format!("{business}\0{mode}\0{stored}").as_bytes());
        let lock_id = i64::from_be_bytes(digest[..8].try_into().expect("8 bytes"));
        let row = txn
            .query_one_raw(Statement::from_sql_and_values(
                DbBackend::Postgres,
                "SELECT pg_try_advisory_xact_lock($1) AS claimed",
                [lock_id.into()],
            ))
            .await?
            .ok_or_else(|| DbErr::Custom("advisory lock returned no row".into()))?;
        row.try_get::<bool>("", "claimed")
    }

    /// Inserts the key `in_flight` (naming the resource it is about to make, when the caller
    /// knows its id already: one write instead of two), or finds the row already there. A second
    /// request with the same key while the first's transaction is open waits for it here (the
    /// unique index), then finds the key.
    pub async fn claim<C: ConnectionTrait>(
        &self,
        db: &C,
        resource_id: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<Claim, DbErr> {
        if super::insert_once(db, self.claimed_row(resource_id, now), Self::COLUMNS).await? {
            return Ok(Claim::New);
        }
        self.find(db)
            .await?
            .map(Claim::Seen)
            .ok_or_else(|| DbErr::Custom("idempotency key vanished".into()))
    }

    const COLUMNS: [idempotency_key::Column; 3] = [
        idempotency_key::Column::BusinessId,
        idempotency_key::Column::Mode,
        idempotency_key::Column::Key,
    ];

    /// The key's row as [`Key::claim`] writes it.
    fn claimed_row(
        &self,
        resource_id: Option<&str>,
        now: DateTime<Utc>,
    ) -> idempotency_key::ActiveModel {
        let (business_id, mode, key) = self.id();
        idempotency_key::ActiveModel {
            business_id: Set(business_id),
            mode: Set(mode),
            key: Set(key),
            request_hash: Set(self.request.stored().to_owned()),
            state: Set(KeyState::InFlight),
            response_status: Set(None),
            account_id: Set(resource_id.map(str::to_owned)),
            created_at: Set(now),
            updated_at: Set(now),
        }
    }

    /// [`Key::claim`]'s insert as one statement of a `WITH` (PostgreSQL), claiming only when
    /// `only_if` holds: it returns the key when it claimed it, nothing when the key was there
    /// already or the condition did not hold.
    pub(crate) fn claim_insert(
        &self,
        resource_id: Option<&str>,
        now: DateTime<Utc>,
        only_if: Option<sea_orm::sea_query::Expr>,
    ) -> Result<sea_orm::sea_query::InsertStatement, DbErr> {
        use sea_orm::sea_query::OnConflict;
        let mut values = super::row_values(&self.claimed_row(resource_id, now), |_| None)?;
        if let Some(condition) = only_if {
            values.and_where(condition);
        }
        let mut insert =
            super::insert_select::<idempotency_key::Entity>(values, "the idempotency key")?;
        insert
            .on_conflict(OnConflict::columns(Self::COLUMNS).do_nothing().to_owned())
            .returning_col(idempotency_key::Column::Key);
        Ok(insert)
    }

    /// The values [`Key::claim_insert`] binds before its `only_if` condition's, in its order
    /// (a [`super::Rendered`] statement).
    pub(crate) fn push_claim_values(
        &self,
        into: &mut Vec<sea_orm::Value>,
        resource_id: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<(), DbErr> {
        super::push_row_values(into, &self.claimed_row(resource_id, now), |_| false)
    }

    /// Completes the key with the status answered and the resource it answered with.
    pub async fn complete<C: ConnectionTrait>(
        &self,
        db: &C,
        status: u16,
        resource_id: &str,
        now: DateTime<Utc>,
    ) -> Result<(), DbErr> {
        let update = self.completion(status, resource_id, now);
        let done = db.execute(&update).await?.rows_affected();
        if done != 1 {
            return Err(DbErr::RecordNotUpdated);
        }
        Ok(())
    }

    /// [`Key::complete`]'s statement (a caller may add conditions: part of a `WITH`).
    pub(crate) fn completion(
        &self,
        status: u16,
        resource_id: &str,
        now: DateTime<Utc>,
    ) -> sea_orm::sea_query::UpdateStatement {
        use idempotency_key::Column as Col;
        use sea_orm::{ColumnTrait, QueryFilter, QueryTrait};
        let (business_id, mode, key) = self.id();
        idempotency_key::Entity::update_many()
            .col_expr(Col::State, KeyState::Completed.into())
            .col_expr(Col::ResponseStatus, Some(i32::from(status)).into())
            .col_expr(Col::AccountId, Some(resource_id.to_owned()).into())
            .col_expr(Col::UpdatedAt, now.into())
            .filter(Tenant::new(&business_id, mode).filter::<Col>())
            .filter(Col::Key.eq(key))
            .into_query()
    }

    /// The values [`Key::completion`] binds, in its order (a [`super::Rendered`] statement).
    pub(crate) fn push_completion_values(
        &self,
        into: &mut Vec<sea_orm::Value>,
        status: u16,
        resource_id: &str,
        now: DateTime<Utc>,
    ) {
        let (business_id, mode, key) = self.id();
        into.extend([
            KeyState::Completed.into(),
            Some(i32::from(status)).into(),
            Some(resource_id.to_owned()).into(),
            now.into(),
            business_id.into(),
            mode.into(),
            key.into(),
        ]);
    }
}

/// True when the key's first request finished.
pub fn is_completed(stored: &StoredKey) -> bool {
    stored.state == KeyState::Completed
}

/// The status first answered, once completed.
pub fn completed_status(stored: &StoredKey) -> Option<u16> {
    match stored.response_status {
        Some(status) if is_completed(stored) => u16::try_from(status).ok(),
        _ => None,
    }
}
