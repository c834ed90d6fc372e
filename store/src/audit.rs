//! The audit log (docs/dashboard.md): every change to a business made by a dashboard user, a secret
//! key through the API (account creation aside: the hottest write, and the account is its own
//! record) or an operator's `api admin` command is recorded by the function that makes it, in the
//! same transaction, so a change and its record commit together or not at all.

use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use sea_orm::sea_query::{Expr, ExprTrait, OnConflict};
use sea_orm::{ActiveValue::Set, ConnectionTrait, DbErr, EntityTrait, QueryFilter};

use super::paging;
use crate::tenant::Business;
use domain::ids::{AuditId, BusinessId, KeyId, UserId};
use domain::{AuditAction, Mode};
use entities::audit_entry;

pub use audit_entry::Model as AuditEntry;

/// Who acts: a signed-in user (their id and e-mail, and the address their request came from), a
/// secret key through the API (its id and the address), or an operator at the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor {
    pub user_id: Option<UserId>,
    pub email: Option<String>,
    pub key_id: Option<KeyId>,
    pub client_addr: Option<String>,
    pub operator: Option<Operator>,
}

/// An operator's command: the host account that ran it, and which command it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operator {
    pub account: String,
    pub via: &'static str,
}

impl Actor {
    /// An operator's `api admin` command, run by this host account: no user, no address.
    pub fn operator() -> Actor {
        Actor::operator_via("api admin")
    }

    /// An operator's command `via` (`worker-webhooks replay`, `api dev`), run by this host
    /// account.
    pub fn operator_via(via: &'static str) -> Actor {
        Actor {
            user_id: None,
            email: None,
            key_id: None,
            client_addr: None,
            operator: Some(Operator {
                account: host_account(),
                via,
            }),
        }
    }

    /// Someone not (yet) signed in, known only by their address: a failed sign-in for an e-mail
    /// that belongs to no one.
    pub fn anonymous(client_addr: Option<String>) -> Actor {
        Actor {
            user_id: None,
            email: None,
            key_id: None,
            client_addr,
            operator: None,
        }
    }

    pub fn user(user_id: &UserId, email: &str, client_addr: Option<String>) -> Actor {
        Actor {
            user_id: Some(user_id.to_owned()),
            email: Some(email.to_owned()),
            key_id: None,
            client_addr,
            operator: None,
        }
    }

    /// A request of the API, made with the secret key `key_id`.
    pub fn api_key(key_id: &KeyId, client_addr: Option<String>) -> Actor {
        Actor {
            user_id: None,
            email: None,
            key_id: Some(key_id.to_owned()),
            client_addr,
            operator: None,
        }
    }
}

/// The account this process runs as: the name of its effective uid (what `id -un` says, which
/// no variable can change), else `$USER` or `$LOGNAME`, else "unknown".
fn host_account() -> String {
    whoami::username()
        .ok()
        .or_else(|| std::env::var("USER").ok())
        .or_else(|| std::env::var("LOGNAME").ok())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

/// Who made an entry, as people read it: the user's e-mail, the API key's id, or an operator.
pub fn actor_label(entry: &AuditEntry) -> String {
    match (&entry.actor_email, &entry.actor_key_id) {
        (Some(email), _) => email.clone(),
        (None, Some(key_id)) => format!("API key {key_id}"),
        // An operator's command has no address; someone who is not signed in has one.
        (None, None) if entry.client_addr.is_some() => "Someone not signed in".into(),
        (None, None) => match (&entry.actor_operator, &entry.actor_via) {
            (Some(account), Some(via)) => format!("Operator ({account}) via {via}"),
            // Recorded before operators' accounts were kept.
            _ => "An operator (api admin)".into(),
        },
    }
}

/// What was done, to what.
#[derive(Debug, Clone)]
pub struct Entry<'a> {
    /// None only for what concerns no business (a failed sign-in for an unknown e-mail).
    pub business_id: Option<&'a BusinessId>,
    pub action: AuditAction,
    pub mode: Option<Mode>,
    pub target: Option<String>,
    pub detail: Option<String>,
}

impl<'a> Entry<'a> {
    pub fn new(business_id: &'a BusinessId, action: AuditAction) -> Self {
        Entry {
            business_id: Some(business_id),
            action,
            mode: None,
            target: None,
            detail: None,
        }
    }

    /// An entry that belongs to no business: seen by operators, on no Team page.
    pub fn without_business(action: AuditAction) -> Self {
        Entry {
            business_id: None,
            action,
            mode: None,
            target: None,
            detail: None,
        }
    }

    pub fn mode(mut self, mode: Mode) -> Self {
        self.mode = Some(mode);
        self
    }

    pub fn target(mut self, target: impl Into<String>) -> Self {
        self.target = Some(target.into());
        self
    }

    pub fn detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }
}

/// Records one entry, in the caller's transaction.
pub async fn record<C: ConnectionTrait>(
    db: &C,
    actor: &Actor,
    entry: Entry<'_>,
    at: DateTime<Utc>,
) -> Result<(), DbErr> {
    audit_entry::Entity::insert(row(actor, entry, None, at))
        .exec_without_returning(db)
        .await?;
    Ok(())
}

/// Records an entry that may come in a flood: repeats of the same action, `subject` and client
/// address within one minute add to one row's `times` instead of adding rows, so the log grows
/// by at most one row per subject, address and minute. One statement: concurrent repeats on
/// either database count exactly. `subject` names what repeats (never a secret: a hash).
pub async fn record_folded<C: ConnectionTrait>(
    db: &C,
    actor: &Actor,
    entry: Entry<'_>,
    subject: &str,
    at: DateTime<Utc>,
) -> Result<(), DbErr> {
    let minute = at
        .duration_trunc(TimeDelta::minutes(1))
        .unwrap_or(at)
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let fold_key = format!(
        "{} {subject} {} {minute}",
        entry.action.as_str(),
        actor.client_addr.as_deref().unwrap_or("-")
    );
    use audit_entry::Column as C_;
    let times = Expr::col((audit_entry::Entity, C_::Times)).add(1);
    audit_entry::Entity::insert(row(actor, entry, Some(fold_key), at))
        .on_conflict(
            OnConflict::column(C_::FoldKey)
                .target_and_where(Expr::col(C_::FoldKey).is_not_null())
                .value(C_::Times, times)
                .to_owned(),
        )
        .exec_without_returning(db)
        .await?;
    Ok(())
}

fn row(
    actor: &Actor,
    entry: Entry<'_>,
    fold_key: Option<String>,
    at: DateTime<Utc>,
) -> audit_entry::ActiveModel {
    audit_entry::ActiveModel {
        id: Set(AuditId::new()),
        business_id: Set(entry.business_id.cloned()),
        actor_user_id: Set(actor.user_id.clone()),
        actor_email: Set(actor.email.clone()),
        actor_key_id: Set(actor.key_id.clone()),
        action: Set(entry.action),
        mode: Set(entry.mode),
        target: Set(entry.target),
        detail: Set(entry.detail),
        client_addr: Set(actor.client_addr.clone()),
        actor_operator: Set(actor.operator.as_ref().map(|o| o.account.clone())),
        actor_via: Set(actor.operator.as_ref().map(|o| o.via.to_owned())),
        created_at: Set(at),
        times: Set(1),
        fold_key: Set(fold_key),
    }
}

/// A page of a business's entries, newest first, and the total.
pub async fn list<C: ConnectionTrait>(
    db: &C,
    business_id: &BusinessId,
    request: &paging::PageRequest,
) -> Result<(paging::Fetched<AuditEntry>, paging::Total), DbErr> {
    let select =
        audit_entry::Entity::find().filter(Business(business_id).filter::<audit_entry::Column>());
    let total = paging::exact_total(db, select.clone()).await?;
    let fetched = paging::fetch(
        db,
        select,
        audit_entry::Column::CreatedAt,
        audit_entry::Column::Id,
        request,
        |e| (e.created_at, e.id.to_string()),
    )
    .await?;
    Ok((fetched, total))
}
