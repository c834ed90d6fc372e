//! Dashboard users, their sessions and the sign-in throttle (docs/dashboard.md). Passwords arrive
//! hashed and TOTP secrets sealed: nothing here sees a secret in plain text, and session tokens are
//! known only by their SHA-256.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, ExprTrait, OnConflict};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, DbErr, EntityTrait, PaginatorTrait,
    QueryFilter, QueryOrder, TransactionSession, TransactionTrait,
};

use super::audit::{self, Actor, Entry};
use crate::tenant::Business;
use domain::ids::{BusinessId, SessionId, UserId};
use domain::user::Throttle;
use domain::{AuditAction, KybStatus, Role};
use entities::{business, dashboard_session, sign_in_throttle, user};

pub use dashboard_session::Model as Session;
pub use user::Model as User;

/// The context a user's TOTP secret is sealed under: its user, so it cannot be moved to another.
pub fn totp_context(user_id: &UserId) -> String {
    format!("{user_id}:totp_secret")
}

#[derive(Debug)]
pub enum CreateOutcome {
    Created(Box<User>),
    /// Another user has this e-mail (addresses are unique across businesses).
    EmailTaken,
    NoSuchBusiness,
}

/// Adds a user to a business. `email` is already normalised, `password_hash` an Argon2id string.
pub async fn create<C: ConnectionTrait + TransactionTrait>(
    db: &C,
    business_id: &BusinessId,
    email: &str,
    role: Role,
    password_hash: &str,
    now: DateTime<Utc>,
) -> Result<CreateOutcome, DbErr> {
    if super::businesses::find(db, business_id).await?.is_none() {
        return Ok(CreateOutcome::NoSuchBusiness);
    }
    let row = User {
        id: UserId::new(),
        business_id: business_id.clone(),
        email: email.to_owned(),
        role,
        password_hash: password_hash.to_owned(),
        totp_secret_enc: None,
        totp_pending_enc: None,
        totp_last_step: None,
        created_at: now,
        updated_at: now,
    };
    let model: user::ActiveModel = row.clone().into();
    // In a savepoint, so a duplicate leaves a caller's transaction usable on PostgreSQL.
    let savepoint = db.begin().await?;
    match user::Entity::insert(model)
        .exec_without_returning(&savepoint)
        .await
    {
        Ok(_) => {
            savepoint.commit().await?;
            Ok(CreateOutcome::Created(Box::new(row)))
        }
        Err(e) if super::is_unique_violation(&e) => {
            savepoint.rollback().await?;
            Ok(CreateOutcome::EmailTaken)
        }
        Err(e) => Err(e),
    }
}

pub async fn find<C: ConnectionTrait>(db: &C, id: &UserId) -> Result<Option<User>, DbErr> {
    user::Entity::find_by_id(id.clone()).one(db).await
}

pub async fn find_by_email<C: ConnectionTrait>(db: &C, email: &str) -> Result<Option<User>, DbErr> {
    user::Entity::find()
        .filter(user::Column::Email.eq(email))
        .one(db)
        .await
}

/// A business's users, oldest first.
pub async fn list_for_business<C: ConnectionTrait>(
    db: &C,
    business_id: &BusinessId,
) -> Result<Vec<User>, DbErr> {
    user::Entity::find()
        .filter(Business(business_id).filter::<user::Column>())
        .order_by_asc(user::Column::CreatedAt)
        .order_by_asc(user::Column::Id)
        .all(db)
        .await
}

pub async fn count<C: ConnectionTrait>(db: &C) -> Result<u64, DbErr> {
    user::Entity::find().count(db).await
}

/// Sets a new password hash and ends every session of the user except `keep` (the one that
/// changed it), recorded in the audit log, in one transaction.
pub async fn set_password(
    db: &DatabaseConnection,
    actor: &Actor,
    user: &User,
    password_hash: &str,
    keep: Option<&str>,
    now: DateTime<Utc>,
) -> Result<(), DbErr> {
    let txn = db.begin().await?;
    user::Entity::update_many()
        .col_expr(user::Column::PasswordHash, password_hash.into())
        .col_expr(user::Column::UpdatedAt, now.into())
        .filter(user::Column::Id.eq(user.id.as_str()))
        .exec(&txn)
        .await?;
    let mut others = dashboard_session::Entity::delete_many()
        .filter(dashboard_session::Column::UserId.eq(user.id.as_str()));
    if let Some(keep) = keep {
        others = others.filter(dashboard_session::Column::Id.ne(keep));
    }
    let ended = others.exec(&txn).await?.rows_affected;
    let entry = Entry::new(&user.business_id, AuditAction::PasswordChanged)
        .target(user.email.as_str())
        .detail(format!("{ended} other sessions ended"));
    audit::record(&txn, actor, entry, now).await?;
    txn.commit().await
}

/// A change an owner makes to another user of the business (or to themselves).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberChange {
    Role(Role),
    /// The user and their sessions are deleted: they are signed out at once.
    Remove,
}

#[derive(Debug)]
pub enum MemberOutcome {
    /// Done; the user as they were before.
    Done(Box<User>),
    /// No such user in this business.
    NoSuchUser,
    /// Refused: it would leave the business without an owner.
    LastOwner,
}

/// Changes a user's role or removes them, unless that leaves the business without an owner
/// (`domain::user::keeps_an_owner`), judged and done in one transaction with the business's users
/// locked, so two owners demoting each other at once cannot both succeed. Recorded in the audit
/// log in the same transaction.
pub async fn change_member(
    db: &DatabaseConnection,
    actor: &Actor,
    business_id: &BusinessId,
    user_id: &UserId,
    change: MemberChange,
    now: DateTime<Utc>,
) -> Result<MemberOutcome, DbErr> {
    let txn = db.begin().await?;
    // Writing the business's users first locks them (row locks on PostgreSQL, the write lock on
    // SQLite): concurrent changes run one after the other, each seeing the other's result.
    user::Entity::update_many()
        .col_expr(user::Column::UpdatedAt, Expr::col(user::Column::UpdatedAt))
        .filter(Business(business_id).filter::<user::Column>())
        .exec(&txn)
        .await?;
    let members = list_for_business(&txn, business_id).await?;
    let Some(target) = members.iter().find(|u| &u.id == user_id).cloned() else {
        return Ok(MemberOutcome::NoSuchUser);
    };
    let roles_after = members.iter().filter_map(|u| {
        if u.id != target.id {
            Some(u.role)
        } else {
            match change {
                MemberChange::Role(role) => Some(role),
                MemberChange::Remove => None,
            }
        }
    });
    if !domain::user::keeps_an_owner(roles_after) {
        return Ok(MemberOutcome::LastOwner);
    }
    let entry = match change {
        MemberChange::Role(role) if role == target.role => {
            // Nothing to change, nothing to record.
            return Ok(MemberOutcome::Done(Box::new(target)));
        }
        MemberChange::Role(role) => {
            user::Entity::update_many()
                .col_expr(user::Column::Role, role.into())
                .col_expr(user::Column::UpdatedAt, now.into())
                .filter(user::Column::Id.eq(user_id))
                .exec(&txn)
                .await?;
            Entry::new(business_id, AuditAction::UserRoleChanged)
                .target(target.email.as_str())
                .detail(format!("{} → {}", target.role.label(), role.label()))
        }
        MemberChange::Remove => {
            dashboard_session::Entity::delete_many()
                .filter(dashboard_session::Column::UserId.eq(user_id))
                .exec(&txn)
                .await?;
            user::Entity::delete_by_id(user_id.to_owned())
                .exec(&txn)
                .await?;
            Entry::new(business_id, AuditAction::UserRemoved)
                .target(target.email.as_str())
                .detail(format!("was {}", target.role.label()))
        }
    };
    audit::record(&txn, actor, entry, now).await?;
    txn.commit().await?;
    Ok(MemberOutcome::Done(Box::new(target)))
}

/// Starts (Some) or abandons (None) a TOTP enrolment: the sealed secret waits for a code.
pub async fn set_totp_pending<C: ConnectionTrait>(
    db: &C,
    user_id: &UserId,
    sealed: Option<String>,
    now: DateTime<Utc>,
) -> Result<(), DbErr> {
    user::Entity::update_many()
        .col_expr(user::Column::TotpPendingEnc, sealed.into())
        .col_expr(user::Column::UpdatedAt, now.into())
        .filter(user::Column::Id.eq(user_id))
        .exec(db)
        .await?;
    Ok(())
}

/// The enrolment is confirmed by a code of time step `step`: the pending secret becomes the
/// user's, and that step is used up. False when nothing was pending (or it changed meanwhile).
pub async fn confirm_totp<C: ConnectionTrait>(
    db: &C,
    user_id: &UserId,
    sealed: &str,
    step: u64,
    now: DateTime<Utc>,
) -> Result<bool, DbErr> {
    let res = user::Entity::update_many()
        .col_expr(user::Column::TotpSecretEnc, Some(sealed.to_owned()).into())
        .col_expr(user::Column::TotpPendingEnc, Option::<String>::None.into())
        .col_expr(user::Column::TotpLastStep, Some(step as i64).into())
        .col_expr(user::Column::UpdatedAt, now.into())
        .filter(user::Column::Id.eq(user_id))
        .filter(user::Column::TotpPendingEnc.eq(sealed))
        .exec(db)
        .await?;
    Ok(res.rows_affected == 1)
}

pub async fn remove_totp<C: ConnectionTrait>(
    db: &C,
    user_id: &UserId,
    now: DateTime<Utc>,
) -> Result<(), DbErr> {
    user::Entity::update_many()
        .col_expr(user::Column::TotpSecretEnc, Option::<String>::None.into())
        .col_expr(user::Column::TotpPendingEnc, Option::<String>::None.into())
        .col_expr(user::Column::TotpLastStep, Option::<i64>::None.into())
        .col_expr(user::Column::UpdatedAt, now.into())
        .filter(user::Column::Id.eq(user_id))
        .exec(db)
        .await?;
    Ok(())
}

/// Uses up a TOTP time step: true when it is later than the last one accepted, so a code is
/// accepted once however many requests present it at the same moment (RFC 6238 §5.2).
pub async fn use_totp_step<C: ConnectionTrait>(
    db: &C,
    user_id: &UserId,
    step: u64,
) -> Result<bool, DbErr> {
    let step = step as i64;
    let res = user::Entity::update_many()
        .col_expr(user::Column::TotpLastStep, Some(step).into())
        .filter(user::Column::Id.eq(user_id))
        .filter(
            sea_orm::Condition::any()
                .add(user::Column::TotpLastStep.is_null())
                .add(user::Column::TotpLastStep.lt(step)),
        )
        .exec(db)
        .await?;
    Ok(res.rows_affected == 1)
}

/// A session, its user and the user's business.
#[derive(Debug, Clone)]
pub struct SessionOwner {
    pub session: Session,
    pub user: User,
    pub business: business::Model,
}

impl SessionOwner {
    pub fn kyb_status(&self) -> KybStatus {
        self.business.kyb_status
    }
}

pub async fn open_session<C: ConnectionTrait>(
    db: &C,
    user_id: &UserId,
    token_hash: &str,
    awaiting_totp: bool,
    now: DateTime<Utc>,
) -> Result<Session, DbErr> {
    let row = Session {
        id: SessionId::new(),
        token_hash: token_hash.to_owned(),
        user_id: user_id.to_owned(),
        awaiting_totp,
        created_at: now,
        last_seen_at: now,
    };
    let model: dashboard_session::ActiveModel = row.clone().into();
    dashboard_session::Entity::insert(model)
        .exec_without_returning(db)
        .await?;
    Ok(row)
}

/// The session whose token hashes to `token_hash`, with its user and business; expiry is the
/// caller's to judge.
pub async fn find_session<C: ConnectionTrait>(
    db: &C,
    token_hash: &str,
) -> Result<Option<SessionOwner>, DbErr> {
    let Some(session) = dashboard_session::Entity::find()
        .filter(dashboard_session::Column::TokenHash.eq(token_hash))
        .one(db)
        .await?
    else {
        return Ok(None);
    };
    let Some(user) = find(db, &session.user_id).await? else {
        return Ok(None);
    };
    let Some(business) = super::businesses::find(db, &user.business_id).await? else {
        return Ok(None);
    };
    Ok(Some(SessionOwner {
        session,
        user,
        business,
    }))
}

pub async fn touch_session<C: ConnectionTrait>(
    db: &C,
    id: &str,
    now: DateTime<Utc>,
) -> Result<(), DbErr> {
    dashboard_session::Entity::update_many()
        .col_expr(dashboard_session::Column::LastSeenAt, now.into())
        .filter(dashboard_session::Column::Id.eq(id))
        .exec(db)
        .await?;
    Ok(())
}

pub async fn end_session<C: ConnectionTrait>(db: &C, id: &SessionId) -> Result<(), DbErr> {
    dashboard_session::Entity::delete_by_id(id.clone())
        .exec(db)
        .await?;
    Ok(())
}

/// Forgets sessions that ended by time: created before `created_before` or idle since before
/// `seen_before`.
pub async fn purge_sessions<C: ConnectionTrait>(
    db: &C,
    created_before: DateTime<Utc>,
    seen_before: DateTime<Utc>,
) -> Result<u64, DbErr> {
    Ok(dashboard_session::Entity::delete_many()
        .filter(
            sea_orm::Condition::any()
                .add(dashboard_session::Column::CreatedAt.lt(created_before))
                .add(dashboard_session::Column::LastSeenAt.lt(seen_before)),
        )
        .exec(db)
        .await?
        .rows_affected)
}

fn throttle_of(row: &sign_in_throttle::Model) -> Throttle {
    Throttle {
        attempts: row.attempts,
        window_started_at: row.window_started_at,
        locked_until: row.locked_until,
    }
}

/// The sign-in attempts of an e-mail (by hash), if any.
pub async fn throttle<C: ConnectionTrait>(
    db: &C,
    email_hash: &str,
) -> Result<Option<Throttle>, DbErr> {
    Ok(sign_in_throttle::Entity::find_by_id(email_hash.to_owned())
        .one(db)
        .await?
        .as_ref()
        .map(throttle_of))
}

/// Decides whether one more attempt for an e-mail (by hash) may be checked, and counts it, in
/// ONE statement: `domain::user::Throttle::admit` as an upsert whose update applies only while
/// the e-mail is not locked. The new state when admitted; None while locked (the row is then
/// left as it is).
///
/// Concurrent attempts cannot both see "four so far": on PostgreSQL, `INSERT … ON CONFLICT DO
/// UPDATE` locks the conflicting row and evaluates the update's WHERE against its latest version
/// (a waiting attempt sees the count the other one wrote); SQLite runs one writing statement at
/// a time. So however many are sent at once, at most five are admitted per window.
pub async fn admit_sign_in_attempt<C: ConnectionTrait>(
    db: &C,
    email_hash: &str,
    now: DateTime<Utc>,
) -> Result<Option<Throttle>, DbErr> {
    use sea_orm::sea_query::Query;
    use sign_in_throttle::Column as C_;
    let first = Throttle::admit(None, now).expect("a first attempt is admitted");
    let old = |c: C_| Expr::col((sign_in_throttle::Entity, c));
    // The rules of `Throttle::admit`, on the stored row (`old`).
    let starts_afresh = old(C_::WindowStartedAt)
        .lte(domain::user::window_cutoff(now))
        .or(old(C_::LockedUntil).is_not_null());
    let attempts: Expr = Expr::case(starts_afresh.clone(), 1)
        .finally(old(C_::Attempts).add(1))
        .into();
    let window_started_at: Expr = Expr::case(starts_afresh, now)
        .finally(old(C_::WindowStartedAt))
        .into();
    let locked_until: Expr = Expr::case(
        attempts.clone().gte(domain::user::SIGN_IN_MAX_ATTEMPTS),
        now + domain::user::SIGN_IN_LOCK,
    )
    .finally(Option::<DateTime<Utc>>::None)
    .into();
    let not_locked = old(C_::LockedUntil)
        .is_null()
        .or(old(C_::LockedUntil).lte(now));
    let statement = Query::insert()
        .into_table(sign_in_throttle::Entity)
        .columns([
            C_::EmailHash,
            C_::Attempts,
            C_::WindowStartedAt,
            C_::LockedUntil,
        ])
        .values_panic([
            email_hash.into(),
            first.attempts.into(),
            first.window_started_at.into(),
            first.locked_until.into(),
        ])
        .on_conflict(
            OnConflict::column(C_::EmailHash)
                .values([
                    (C_::Attempts, attempts),
                    (C_::WindowStartedAt, window_started_at),
                    (C_::LockedUntil, locked_until),
                ])
                .action_and_where(not_locked)
                .to_owned(),
        )
        .returning_all()
        .to_owned();
    let Some(row) = db.query_one(&statement).await? else {
        return Ok(None);
    };
    let row = <sign_in_throttle::Model as sea_orm::FromQueryResult>::from_query_result(&row, "")?;
    Ok(Some(throttle_of(&row)))
}

/// An admitted attempt turned out right: it gives its count back
/// (`domain::user::Throttle::after_success`), in the window it was counted in (`admitted`'s).
pub async fn refund_sign_in_attempt<C: ConnectionTrait>(
    db: &C,
    email_hash: &str,
    admitted: &Throttle,
) -> Result<(), DbErr> {
    use sign_in_throttle::Column as C_;
    let left = Expr::col(C_::Attempts).sub(1);
    sign_in_throttle::Entity::update_many()
        .col_expr(C_::Attempts, left.clone())
        .col_expr(
            C_::LockedUntil,
            Expr::case(
                left.gte(domain::user::SIGN_IN_MAX_ATTEMPTS),
                Expr::col(C_::LockedUntil),
            )
            .finally(Option::<DateTime<Utc>>::None)
            .into(),
        )
        .filter(C_::EmailHash.eq(email_hash))
        .filter(C_::WindowStartedAt.eq(admitted.window_started_at))
        .filter(C_::Attempts.gt(0))
        .exec(db)
        .await?;
    Ok(())
}

/// Forgets the attempts of e-mails whose window is over and that are not locked: their next
/// attempt would start afresh anyway.
pub async fn purge_sign_in_throttles<C: ConnectionTrait>(
    db: &C,
    now: DateTime<Utc>,
) -> Result<u64, DbErr> {
    use sign_in_throttle::Column as C_;
    Ok(sign_in_throttle::Entity::delete_many()
        .filter(C_::WindowStartedAt.lte(domain::user::window_cutoff(now)))
        .filter(
            sea_orm::Condition::any()
                .add(C_::LockedUntil.is_null())
                .add(C_::LockedUntil.lte(now)),
        )
        .exec(db)
        .await?
        .rows_affected)
}
