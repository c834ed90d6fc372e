//! On PostgreSQL, a deposit notification as two statements sent in autocommit
//! (docs/decisions/one-statement-paths.md): the account is read, then ONE statement stores the
//! notification with its outcome, locks the account (unchanged since it was read), records the
//! deposit, its event, delivery and job, and credits the balance with its ledger entry. The
//! transaction path took eight round trips and wrote the notification twice (claimed, then its
//! outcome). Each part is the builder the transaction path runs, so the rules stay in one place.
//!
//! Only a new deposit into a known account is done here. Anything else writes nothing and the
//! transaction path answers it as before: no account with the number; a body stored before or a
//! reference recorded before (the statement stores nothing); and, failing on purpose
//! (`vas_refuse`, m0021) so that the notification it stored goes too, an account changed since
//! it was read, a reference recorded meanwhile, or a credit that would overflow the balance.
//!
//! Locks are taken in the transaction path's order: the notification's key, the account, the
//! deposit's key, the balance.
//!
//! One business's deposits (of one mode) credit one balance row, so they commit one after
//! another, each holding that row through its commit's WAL flush. The deposits that arrive while
//! one commits therefore share the next transaction ([`ROUNDS`]): one commit, and no waiting on
//! the row, for all of them; fewer than [`FEWEST_TOGETHER`] are sent each in autocommit as before.
//! A round writes its deposits' rows one statement per table, the balance credited their sum
//! once, last. Each caller is still answered only once its deposit is committed. A round takes
//! its accounts' locks first, in id order, so that it never waits for an account while it holds
//! the balance (no other path does either: a deposit takes its account before the balance, a
//! payout no account). Should a round find a deposit that is not a plain new one, or fail (a
//! deadlock, a lost connection, even at the commit), it is rolled back and its deposits' own
//! statements are sent each on its own, as a lone deposit's is: a deposit the round did commit
//! then finds its notification stored and is answered as the repeat it is.

use domain::ids::BusinessId;
use std::sync::LazyLock;

use futures::future::BoxFuture;
use sea_orm::sea_query::{Alias, Condition, Expr, ExprTrait, OnConflict, Query, WithClause};
use sea_orm::{ColumnTrait, ConnectionTrait, DatabaseConnection, DbBackend, DbErr, QueryFilter};
use sea_orm::{EntityName, QuerySelect, QueryTrait, Statement, TransactionTrait};

use super::super::{
    Rendered, cte, deliveries, events, has_row, insert_rows, insert_select, is_refused, ledger,
    push_row_values, row_values, with_query,
};
use super::{
    Accepted, Credit, DEPOSIT_KEY, Incoming, NOTIFICATION_KEY, Recorded, Report, Source,
    account_for, announcement, deposit_row, notification_row, push_account_for_values,
    push_recorded_before_values, recorded_before,
};
use crate::accounts::{Account, numbered};
use crate::batch::Keyed;
use domain::Mode;
use domain::provider::{NotificationOutcome, RemoteTransaction};
use entities::{deposit, provider_notification, virtual_account};

/// The statement's SQL per shape: crediting (a deposit into an active account) or not (flagged).
static DEPOSIT: Rendered<bool> = Rendered::new();

/// [`super::accept`] of a deposit notification; None when it wrote nothing and the transaction
/// path must answer.
pub(super) async fn accept_deposit(
    db: &DatabaseConnection,
    incoming: Incoming<'_>,
    tx: &RemoteTransaction,
    known: Option<&virtual_account::Model>,
) -> Result<Option<Accepted>, DbErr> {
    let report = Report {
        mode: incoming.mode,
        bank: incoming.bank,
        tx,
        source: &Source::Notification,
    };
    let holder = |a: &&virtual_account::Model| {
        a.mode == report.mode
            && a.bank == report.bank
            && a.account_number.as_deref() == Some(tx.account_number.as_str())
    };
    let account = match known.filter(holder) {
        Some(account) => account.clone(),
        None => match numbered::with_number(db, report.mode, report.bank, &tx.account_number) {
            Some(account) => Account::clone(&account),
            None => match account_for(report).one(db).await? {
                Some(account) => {
                    numbered::keep(db, &account);
                    account
                }
                None => return Ok(None),
            },
        },
    };
    let now = incoming.now;
    let row = deposit_row(&account, report, now);

    // The notification, stored once with what became of it.
    let (id, mut claimed) = notification_row(incoming);
    claimed.outcome = sea_orm::ActiveValue::Set(NotificationOutcome::Recorded);
    claimed.provider_reference = sea_orm::ActiveValue::Set(Some(tx.reference.clone()));
    claimed.deposit_id = sea_orm::ActiveValue::Set(Some(row.id.clone()));
    let (event_type, data) = announcement(&row, &account);
    let event = events::new_event(&account.business_id, report.mode, event_type, &data, now);
    // The URL is written from the business's row; the placeholder is never stored.
    let delivery = deliveries::new_delivery(&event, "", now);
    let credit = Credit::of(&row);
    let entry = credit
        .as_ref()
        .map(|credit| ledger::new_entry(&credit.movement()));

    // In the order the statement below binds them; `1` is each `EXISTS (SELECT 1 …)`.
    let mut values = Vec::with_capacity(90);
    push_row_values(&mut values, &claimed, |_| false)?;
    push_recorded_before_values(&mut values, report);
    push_account_for_values(&mut values, report);
    values.extend([
        account.id.as_str().into(),
        account.status.into(),
        account.updated_at.into(),
        1i32.into(),
    ]);
    push_row_values(
        &mut values,
        &deposit::ActiveModel::from(row.clone()),
        |_| false,
    )?;
    deliveries::push_event_with_delivery_values(&mut values, &event, &delivery)?;
    if let (Some(credit), Some(entry)) = (&credit, &entry) {
        ledger::push_credit_values(&mut values, &credit.movement(), entry)?;
        values.push(1i32.into());
    }
    values.push(1i32.into());

    let statement = DEPOSIT.statement(credit.is_some(), values, || {
        // A reference recorded before (a bank's report again, in another body) stores nothing
        // here, so that usual duplicate costs no failed statement; one recorded meanwhile is
        // caught below.
        let mut stored = row_values(&claimed, |_| None)?;
        stored.and_where(
            Expr::exists(
                recorded_before(report)
                    .select_only()
                    .expr(Expr::val(1))
                    .into_query(),
            )
            .not(),
        );
        let mut notification =
            insert_select::<provider_notification::Entity>(stored, "the notification")?;
        notification
            .on_conflict(
                OnConflict::columns(NOTIFICATION_KEY)
                    .do_nothing()
                    .to_owned(),
            )
            .returning_col(provider_notification::Column::Id);

        // The account, locked as the transaction path locks it, only as it was read.
        let locked = account_for(report)
            .select_only()
            .column(virtual_account::Column::Id)
            .filter(virtual_account::Column::Id.eq(account.id.as_str()))
            .filter(virtual_account::Column::Status.eq(account.status))
            .filter(virtual_account::Column::UpdatedAt.eq(account.updated_at))
            .filter(has_row("ntf"))
            .lock_exclusive()
            .into_query();

        let mut deposit_values = row_values(&deposit::ActiveModel::from(row.clone()), |_| None)?;
        deposit_values.from(Alias::new("acct"));
        let mut insert_deposit = insert_select::<deposit::Entity>(deposit_values, "the deposit")?;
        insert_deposit
            .on_conflict(OnConflict::columns(DEPOSIT_KEY).do_nothing().to_owned())
            .returning_col(deposit::Column::Id);

        let mut with = WithClause::new();
        with.cte(cte("ntf", notification))
            .cte(cte("acct", locked))
            .cte(cte("dep", insert_deposit));
        for part in deliveries::event_with_delivery(&event, &delivery, Some("dep"))? {
            with.cte(part);
        }
        if let (Some(credit), Some(entry)) = (&credit, &entry) {
            for part in ledger::credit_ctes(&credit.movement(), entry, "dep")? {
                with.cte(part);
            }
        }
        // Stored, but not a new deposit (the account changed, the reference is known) or,
        // credited, no entry (the balance would overflow): fail, so that nothing stays.
        let mut not_new = Condition::any().add(has_row("dep").not());
        if credit.is_some() {
            not_new = not_new.add(has_row("entry").not());
        }
        let mut answer = Query::select();
        answer
            .expr_as(
                Expr::case(
                    not_new,
                    Expr::cust("vas_refuse('not a new deposit: the transaction answers it')"),
                ),
                Alias::new("refused"),
            )
            .from(Alias::new("ntf"));
        Ok(DbBackend::Postgres.build(&with_query(with, answer)))
    })?;
    let business = (account.business_id.clone(), report.mode);
    // What a round counts itself (see `in_transaction`); rows the statement did not insert
    // are not found there.
    let mut inserted = vec![
        (deposit::Entity.table_name(), row.id.to_string()),
        (entities::event::Entity.table_name(), event.id.to_string()),
        (
            entities::delivery::Entity.table_name(),
            delivery.0.id.to_string(),
        ),
    ];
    if let Some(entry) = &entry {
        inserted.push((
            entities::ledger_entry::Entity.table_name(),
            entry.id.to_string(),
        ));
    }
    let pending = Pending {
        db: db.clone(),
        account: account.id.to_string(),
        statement,
        inserted,
        rows: Rows {
            read: (account.status, account.updated_at),
            notification: claimed,
            deposit: deposit::ActiveModel::from(row.clone()),
            event: entities::event::ActiveModel::from(event),
            delivery: entities::delivery::ActiveModel::from(delivery.0),
            job: delivery.1,
            credit: credit.map(|credit| credit.amount).zip(entry),
        },
    };
    let stored = ROUNDS.submit(business, pending).await.unwrap_or_else(|| {
        Err(DbErr::Custom(
            "the round of the deposit's business ended without an answer".into(),
        ))
    })?;
    if !stored {
        // Changed since it was read, perhaps: the transaction path reads it, and so does the
        // next deposit.
        numbered::forget(db, &account);
    }
    Ok(stored.then(|| Accepted::Stored {
        id,
        recorded: Recorded::New(Box::new(row)),
        outcome: NotificationOutcome::Recorded,
    }))
}

/// A business and mode: whose balance row a deposit credits.
type Business = (BusinessId, Mode);

/// What became of a deposit's statement: true when it stored the deposit, false when it wrote
/// nothing and the transaction path must answer.
type Stored = Result<bool, DbErr>;

/// The deposit statements waiting for their business's next round.
static ROUNDS: LazyLock<Keyed<Business, Pending, Stored>> =
    LazyLock::new(|| Keyed::new(MOST_IN_A_ROUND, run_round));

/// Deposits in one transaction at most: the balance row is held for all of them.
const MOST_IN_A_ROUND: usize = 64;

/// Fewer deposits than this are sent each in autocommit, side by side: a transaction's three
/// round trips (`BEGIN`, the accounts' locks, `COMMIT`) cost more than the commits it saves.
const FEWEST_TOGETHER: usize = 4;

/// A deposit's statement, built, the account it locks, the counted rows it inserts (table, id),
/// and those rows as a round writes them.
struct Pending {
    db: DatabaseConnection,
    account: String,
    statement: Statement,
    inserted: Vec<(&'static str, String)>,
    rows: Rows,
}

/// What a round writes of one deposit, table by table (`in_transaction`): the statement's rows,
/// and its account's status and last change as they were read.
struct Rows {
    read: (domain::AccountStatus, chrono::DateTime<chrono::Utc>),
    notification: provider_notification::ActiveModel,
    deposit: deposit::ActiveModel,
    event: entities::event::ActiveModel,
    delivery: entities::delivery::ActiveModel,
    job: entities::outbox::ActiveModel,
    /// The amount credited and its entry, all but the balance after it and its stamp.
    credit: Option<(i64, ledger::Entry)>,
}

/// A round of one business's deposit statements, what became of each.
fn run_round(_business: &Business, round: Vec<Pending>) -> BoxFuture<'static, Vec<Stored>> {
    Box::pin(async move {
        let deposits = round.len();
        let outcome = if deposits >= FEWEST_TOGETHER {
            match together(&round).await {
                Ok(true) => {
                    count_round(RoundOutcome::Together, deposits);
                    return round.iter().map(|_| Ok(true)).collect();
                }
                // One of them is not a plain new deposit: the usual reason, and its own answer.
                Ok(false) => {
                    tracing::debug!(
                        deposits,
                        "a round of deposits rolled back; sent each on its own"
                    );
                    RoundOutcome::Refused
                }
                Err(e) => {
                    tracing::warn!(
                        error = %e,
                        deposits,
                        "a round of deposits failed; sent each on its own"
                    );
                    RoundOutcome::Failed
                }
            }
        } else {
            RoundOutcome::Alone
        };
        count_round(outcome, deposits);
        futures::future::join_all(
            round
                .into_iter()
                .map(|pending| async move { alone(&pending.db, pending.statement).await }),
        )
        .await
    })
}

/// What became of a round: the `outcome` label of its metrics.
#[derive(Clone, Copy)]
enum RoundOutcome {
    /// Written by one transaction.
    Together,
    /// Fewer than [`FEWEST_TOGETHER`] waiting: each sent in autocommit.
    Alone,
    /// Rolled back because one of them was not a plain new deposit; then each on its own.
    Refused,
    /// Rolled back on any other error (a deadlock, a lost connection); then each on its own.
    Failed,
}

impl RoundOutcome {
    fn label(self) -> &'static str {
        match self {
            RoundOutcome::Together => "together",
            RoundOutcome::Alone => "alone",
            RoundOutcome::Refused => "refused",
            RoundOutcome::Failed => "failed",
        }
    }
}

/// `deposit_rounds_total{outcome}` and `deposit_round_deposits_total{outcome}`: how often
/// one business's deposits share a commit, and how many at a time (the second over the first).
fn count_round(outcome: RoundOutcome, deposits: usize) {
    metrics::counter!("deposit_rounds_total", "outcome" => outcome.label()).increment(1);
    metrics::counter!("deposit_round_deposits_total", "outcome" => outcome.label())
        .increment(deposits as u64);
}

/// One deposit's statement in autocommit.
async fn alone(db: &DatabaseConnection, statement: Statement) -> Stored {
    match db.query_one_raw(statement).await {
        Ok(stored) => Ok(stored.is_some()),
        Err(e) if is_refused(&e) => Ok(false),
        Err(e) => Err(e),
    }
}

/// The round in one transaction, its accounts locked first in id order; any error rolls all of
/// it back. False: one of its deposits is not a plain new deposit (rolled back too).
async fn together(round: &[Pending]) -> Result<bool, DbErr> {
    let txn = round[0].db.begin().await?;
    match in_transaction(&txn, round).await {
        Ok(Some(held_from)) => {
            txn.commit().await?;
            count_held(held_from.elapsed());
            Ok(true)
        }
        outcome => {
            // Its own error, if any, says no more than the statement's.
            let _ = txn.rollback().await;
            outcome.map(|_| false)
        }
    }
}

/// `deposit_round_balance_held_seconds`: how long each round written together held its
/// business's balance row, from the statement that credits it through its commit. Its sum over
/// `deposit_round_deposits_total{outcome="together"}` is the time the row is held per deposit
/// (docs/decisions/grouped-deposit-rounds.md).
fn count_held(held: std::time::Duration) {
    metrics::histogram!("deposit_round_balance_held_seconds").record(held.as_secs_f64());
}

/// The round's deposits, one statement per table for all of them, after their accounts' locks:
/// the notifications, the deposits, the events, the deliveries and their jobs, then the balance
/// (credited their sum once) and the ledger entries. The deposits' own statements write the same
/// rows from the same builders; here the rules they check in SQL are checked on the rows each
/// statement returns. When the balance was taken, or None when a deposit is not a plain new one
/// (the caller rolls back and sends each deposit's own statement, which answers it).
async fn in_transaction(
    txn: &sea_orm::DatabaseTransaction,
    round: &[Pending],
) -> Result<Option<std::time::Instant>, DbErr> {
    let mut accounts: Vec<&str> = round.iter().map(|p| p.account.as_str()).collect();
    accounts.sort_unstable();
    accounts.dedup();
    // By primary key whatever the statistics say (`= ANY(ARRAY(…))`), locked in the order sorted.
    // The transaction counts its own inserts (`migrations::counted_by_caller`): the counts'
    // triggers would run at the COMMIT, while the balance is held, once per row and figure.
    // Should no account be locked, nothing is marked, and the count below refuses.
    let lock = LOCK.get_or_init(|| {
        format!(
            "SELECT id, status, updated_at, {} FROM virtual_accounts \
             WHERE id = ANY(ARRAY(SELECT json_array_elements_text($1::json))) \
             ORDER BY id FOR UPDATE",
            migrations::counted_by_caller::mark()
        )
    });
    let locked = txn
        .query_all_raw(Statement::from_sql_and_values(
            DbBackend::Postgres,
            lock.as_str(),
            [super::super::outbox::ids_param(&accounts).into()],
        ))
        .await?;
    // Each account as its deposit read it (any change moves its `updated_at`): what the
    // deposit's own statement locks it on.
    let mut now = std::collections::HashMap::with_capacity(locked.len());
    for row in &locked {
        let id: String = row.try_get("", "id")?;
        let read: (domain::AccountStatus, chrono::DateTime<chrono::Utc>) =
            (row.try_get("", "status")?, row.try_get("", "updated_at")?);
        now.insert(id, read);
    }
    if round
        .iter()
        .any(|p| now.get(&p.account) != Some(&p.rows.read))
    {
        return Ok(None);
    }

    // A notification stored before, or a reference recorded before or meanwhile, stores fewer
    // rows than the round has deposits: the deposit's own statement answers it.
    let mut insert = insert_rows(round.iter().map(|p| &p.rows.notification), |_| None)?;
    insert
        .on_conflict(
            OnConflict::columns(NOTIFICATION_KEY)
                .do_nothing()
                .to_owned(),
        )
        .returning_col(provider_notification::Column::Id);
    if txn.query_all(&insert).await?.len() != round.len() {
        return Ok(None);
    }
    let mut insert = insert_rows(round.iter().map(|p| &p.rows.deposit), |_| None)?;
    insert
        .on_conflict(OnConflict::columns(DEPOSIT_KEY).do_nothing().to_owned())
        .returning_col(deposit::Column::Id);
    if txn.query_all(&insert).await?.len() != round.len() {
        return Ok(None);
    }
    let events = insert_rows(round.iter().map(|p| &p.rows.event), |_| None)?;
    txn.execute(&events).await?;
    // The URL is written from the business's row, as each deposit's statement writes it; with
    // none, no delivery.
    let event = &round[0].rows.event;
    let (business_id, mode) = (event.business_id.as_ref(), *event.mode.as_ref());
    if let Some(url) = crate::businesses::webhook_url(txn, business_id, mode).await? {
        let deliveries = insert_rows(round.iter().map(|p| &p.rows.delivery), |col| {
            matches!(col, entities::delivery::Column::Url).then(|| Expr::val(url.as_str()))
        })?;
        txn.execute(&deliveries).await?;
        let jobs = insert_rows(round.iter().map(|p| &p.rows.job), |_| None)?;
        txn.execute(&jobs).await?;
    }

    // The credits: their sum once, then each entry in id order, its balance the running sum and
    // its stamp the database's clock after the balance's lock, so that the ledger's order
    // (stamp, id) is the order of the balances written.
    let mut entries: Vec<(i64, &ledger::Entry)> = round
        .iter()
        .filter_map(|p| {
            p.rows
                .credit
                .as_ref()
                .map(|(amount, entry)| (*amount, entry))
        })
        .collect();
    let held_from = std::time::Instant::now();
    if let Some(&(_, credited)) = entries.first() {
        entries.sort_unstable_by(|a, b| a.1.id.cmp(&b.1.id));
        let Some(sum) = entries
            .iter()
            .try_fold(0i64, |sum, (amount, _)| sum.checked_add(*amount))
        else {
            return Ok(None);
        };
        let Some(mut after) =
            ledger::credit_sum(txn, &credited.business_id, credited.mode, sum).await?
        else {
            // It would overflow: each deposit's own statement answers it.
            return Ok(None);
        };
        after -= sum;
        let rows: Vec<_> = entries
            .iter()
            .map(|(amount, entry)| {
                after += amount;
                ledger::entered(entry, after)
            })
            .collect();
        txn.execute(&insert_rows(&rows, |col| {
            matches!(col, entities::ledger_entry::Column::CreatedAt)
                .then(|| crate::clock_expr(DbBackend::Postgres))
        })?)
        .await?;
    }
    txn.execute_raw(Statement::from_sql_and_values(
        DbBackend::Postgres,
        migrations::counted_by_caller::COUNT_INSERTED,
        [inserted_param(round).into()],
    ))
    .await?;
    Ok(Some(held_from))
}

/// The round's statement that locks its accounts and marks it as counting its own inserts.
static LOCK: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// The round's counted rows as `vas_count_inserted`'s parameter: per table, the ids.
fn inserted_param(round: &[Pending]) -> String {
    let mut tables: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
    for (table, id) in round.iter().flat_map(|p| &p.inserted) {
        tables.entry(*table).or_default().push(id);
    }
    serde_json::to_string(&tables).expect("strings serialise")
}

#[cfg(test)]
mod tests {
    //! The statement itself, on PostgreSQL (`TEST_DATABASE_URL`; skipped without it): a new
    //! deposit is done by it, every other case leaves nothing for the transaction path. The api's
    //! tests check what banks, callers and webhooks see on both databases.
    use sea_orm::{DatabaseConnection, EntityTrait};

    use super::*;
    use domain::ids::KeyId;

    /// The secret key the tests' creations name.
    static KEY_TEST: std::sync::LazyLock<KeyId> =
        std::sync::LazyLock::new(|| KeyId::unchecked("key_test"));
    use crate::accounts::{self, CreateOutcome, CreateRequest};
    use crate::testing::{count, fresh_database};
    use crypto::{Cipher, RequestDigest};
    use domain::provider::ProvisioningOutcome;
    use domain::{Bank, KybStatus, Mode, NewAccount};
    use test_support::store::orphans;

    /// Notifications, deposits, events, ledger entries, and the balance.
    async fn written(db: &DatabaseConnection) -> [i64; 5] {
        [
            count(db, "SELECT count(*) FROM provider_notifications").await,
            count(db, "SELECT count(*) FROM deposits").await,
            count(db, "SELECT count(*) FROM events").await,
            count(db, "SELECT count(*) FROM ledger_entries").await,
            count(
                db,
                "SELECT coalesce(sum(available), 0)::bigint FROM balances",
            )
            .await,
        ]
    }

    fn paid(reference: &str, amount: i64) -> RemoteTransaction {
        RemoteTransaction {
            reference: reference.into(),
            account_number: "9900000001".into(),
            amount,
            currency: "NGN".into(),
            sender_name: None,
            sender_account_number: None,
            sender_bank_name: None,
            narration: None,
            paid_at: domain::time::now(),
        }
    }

    /// A business with one active account numbered 9900000001 (and `more` numbered after it):
    /// the business's id and the accounts.
    async fn active_accounts(
        db: &DatabaseConnection,
        more: u32,
    ) -> (BusinessId, Vec<accounts::Account>) {
        let cipher = Cipher::new(&Cipher::generate_key(), &[]).unwrap();
        let business = crate::businesses::create(db, &cipher, "Paid Ltd", KybStatus::Approved)
            .await
            .unwrap();
        let mut active = Vec::new();
        for n in 0..=more {
            let body = serde_json::json!({
                "customerName": "Ada Obi",
                "customerEmail": "ada@example.com",
                "customerPhone": "08031234567",
                "customerBvn": "22200000001",
                "preferredBank": "wema-bank",
            });
            let account = NewAccount::parse(body.as_object().unwrap(), Mode::Test).unwrap();
            let digest = RequestDigest::new(&cipher, "{}");
            let key = format!("k{n}");
            let request = CreateRequest {
                business_id: &business.id,
                business_name: "Paid Ltd",
                mode: Mode::Test,
                key_id: &KEY_TEST,
                idempotency_key: &key,
                request: &digest,
                account: &account,
                limit_per_hour: 10,
                provider_grace: chrono::Duration::seconds(35),
            };
            let now = domain::time::now();
            let (CreateOutcome::Started { account, job_id }, _) =
                accounts::create(db, &cipher, &request, now).await.unwrap()
            else {
                panic!("not created");
            };
            let numbered = ProvisioningOutcome::Active {
                account_number: format!("{}", 9_900_000_001u64 + u64::from(n)),
            };
            accounts::settle_creation(db, &request, &account.id, &job_id, numbered, now)
                .await
                .unwrap();
            active.push(account);
        }
        (business.id, active)
    }

    fn incoming(body: &str) -> Incoming<'_> {
        Incoming {
            mode: Mode::Test,
            bank: Bank::WemaBank,
            body,
            now: domain::time::now(),
        }
    }

    #[tokio::test]
    async fn a_new_deposit_is_one_statement_and_every_other_case_writes_nothing() {
        let Some(fresh) = fresh_database().await else {
            return;
        };
        let db = &fresh.db;
        let (_, active) = active_accounts(db, 0).await;
        let account = &active[0];

        let first = paid("ref-1", 5_000);
        let accepted = accept_deposit(db, incoming("body 1"), &first, None)
            .await
            .unwrap()
            .expect("a new deposit is the statement's");
        let Accepted::Stored {
            recorded: Recorded::New(deposit),
            outcome: NotificationOutcome::Recorded,
            ..
        } = accepted
        else {
            panic!("not recorded: {accepted:?}");
        };
        assert_eq!(deposit.account_id, account.id);
        assert_eq!(written(db).await, [1, 1, 1, 1, 5_000]);
        assert_eq!(
            count(
                db,
                "SELECT count(*) FROM provider_notifications WHERE outcome = 'recorded' AND deposit_id IS NOT NULL"
            )
            .await,
            1
        );
        assert_eq!(
            count(db, "SELECT balance_after FROM ledger_entries").await,
            5_000
        );

        // The same body again; the same reference in another body; a number no account has.
        assert!(
            accept_deposit(db, incoming("body 1"), &first, None)
                .await
                .unwrap()
                .is_none()
        );
        let again = paid("ref-1", 7_000);
        assert!(
            accept_deposit(db, incoming("body 2"), &again, None)
                .await
                .unwrap()
                .is_none()
        );
        let mut stranger = paid("ref-3", 7_000);
        stranger.account_number = "9900000999".into();
        assert!(
            accept_deposit(db, incoming("body 3"), &stranger, None)
                .await
                .unwrap()
                .is_none()
        );
        assert_eq!(written(db).await, [1, 1, 1, 1, 5_000]);

        // The account as a caller read it (`simulate-deposit`) stands in for the look-up, but
        // only as it still is: one read before its last change writes nothing.
        let read = virtual_account::Entity::find_by_id(account.id.clone())
            .one(db)
            .await
            .unwrap()
            .expect("the account");
        let mut stale = read.clone();
        stale.updated_at -= chrono::Duration::seconds(1);
        let second = paid("ref-2", 2_000);
        assert!(
            accept_deposit(db, incoming("body 5"), &second, Some(&stale))
                .await
                .unwrap()
                .is_none(),
            "an account read before it changed"
        );
        assert_eq!(written(db).await, [1, 1, 1, 1, 5_000]);
        let accepted = accept_deposit(db, incoming("body 5"), &second, Some(&read))
            .await
            .unwrap();
        assert!(
            matches!(
                &accepted,
                Some(Accepted::Stored {
                    recorded: Recorded::New(deposit),
                    ..
                }) if deposit.account_id == account.id
            ),
            "{accepted:?}"
        );
        assert_eq!(written(db).await, [2, 2, 2, 2, 7_000]);
        // Another account's row is no stand-in: the number decides, as always.
        let third = paid("ref-5", 1_000);
        let mut other = read.clone();
        other.account_number = Some("9900000999".into());
        assert!(
            accept_deposit(db, incoming("body 6"), &third, Some(&other))
                .await
                .unwrap()
                .is_some()
        );
        assert_eq!(written(db).await, [3, 3, 3, 3, 8_000]);

        // A balance one more credit would overflow: refused, nothing stays.
        sea_orm::ConnectionTrait::execute_unprepared(
            db,
            &format!("UPDATE balances SET available = {}", i64::MAX - 1_000),
        )
        .await
        .unwrap();
        let big = paid("ref-4", 5_000);
        assert!(
            accept_deposit(db, incoming("body 4"), &big, None)
                .await
                .unwrap()
                .is_none()
        );
        assert_eq!(
            count(db, "SELECT count(*) FROM provider_notifications").await,
            3
        );
        assert_eq!(count(db, "SELECT count(*) FROM deposits").await, 3);
        assert_eq!(orphans(db).await, 0, "every row's parent is there");
        fresh.drop().await;
    }

    /// An account as last read stands in for its look-up, and only while it is still so: once
    /// it changed, its deposit writes nothing here, the entry is let go, and the transaction path
    /// answers as it would have (a deactivated account's deposit is flagged, never credited).
    #[tokio::test]
    async fn an_account_as_last_read_saves_its_look_up_and_never_changes_an_answer() {
        let Some(fresh) = fresh_database().await else {
            return;
        };
        let db = &fresh.db;
        let (business, active) = active_accounts(db, 0).await;
        let account = &active[0];
        let number = || numbered::with_number(db, Mode::Test, Bank::WemaBank, "9900000001");
        assert!(
            number().is_none(),
            "nothing is kept before a deposit reads it"
        );

        let first = paid("ref-1", 5_000);
        assert!(
            accept_deposit(db, incoming("body 1"), &first, None)
                .await
                .unwrap()
                .is_some()
        );
        let kept = number().expect("kept once read");
        assert_eq!(kept.id, account.id);
        // `simulate-deposit` finds it by id, for its business and mode only.
        let found = accounts::find_for_deposit(db, &business, Mode::Test, &account.id)
            .await
            .unwrap()
            .expect("the caller's account");
        assert_eq!(found.updated_at, kept.updated_at);
        let stranger = BusinessId::new();
        for (whose, mode) in [(&stranger, Mode::Test), (&business, Mode::Live)] {
            let found = accounts::find_for_deposit(db, whose, mode, &account.id)
                .await
                .unwrap();
            assert!(found.is_none(), "{whose:?} {mode:?}");
        }

        // Deactivated by another process, which this one's entry does not know.
        db.execute_unprepared(&format!(
            "UPDATE virtual_accounts SET status = 'deactivated', deactivated_at = now(), \
             updated_at = now() WHERE id = '{}'",
            account.id
        ))
        .await
        .unwrap();
        let second = paid("ref-2", 2_000);
        assert!(
            accept_deposit(db, incoming("body 2"), &second, None)
                .await
                .unwrap()
                .is_none(),
            "the entry is stale: the statement writes nothing"
        );
        assert!(number().is_none(), "and the entry is let go");
        assert_eq!(written(db).await, [1, 1, 1, 1, 5_000]);
        let accepted = super::super::accept(
            db,
            incoming("body 2"),
            super::super::Notified::Deposit(Some(&second)),
            None,
        )
        .await
        .unwrap();
        let Accepted::Stored {
            recorded: Recorded::New(deposit),
            ..
        } = accepted
        else {
            panic!("not recorded: {accepted:?}");
        };
        assert_eq!(deposit.status, domain::DepositStatus::Flagged);
        assert_eq!(
            written(db).await,
            [2, 2, 2, 1, 5_000],
            "flagged, not credited"
        );

        // The next deposit reads it again and keeps it as it now is.
        let third = paid("ref-3", 1_000);
        accept_deposit(db, incoming("body 3"), &third, None)
            .await
            .unwrap()
            .expect("a flagged deposit is the statement's too");
        assert_eq!(
            number().map(|a| a.status),
            Some(domain::AccountStatus::Deactivated)
        );
        assert_eq!(written(db).await, [3, 3, 3, 1, 5_000]);
        fresh.drop().await;
    }

    /// Ledger entries, and how many transactions wrote them.
    async fn entries_and_transactions(db: &DatabaseConnection) -> [i64; 2] {
        [
            count(db, "SELECT count(*) FROM ledger_entries").await,
            count(db, "SELECT count(DISTINCT xmin::text) FROM ledger_entries").await,
        ]
    }

    /// The rounds' metrics, read from a recorder installed for this test binary.
    struct RoundCounts(metrics_util::debugging::Snapshotter);

    fn round_counts() -> RoundCounts {
        static SNAPSHOTTER: std::sync::OnceLock<metrics_util::debugging::Snapshotter> =
            std::sync::OnceLock::new();
        RoundCounts(
            SNAPSHOTTER
                .get_or_init(|| {
                    let recorder = metrics_util::debugging::DebuggingRecorder::new();
                    let snapshotter = recorder.snapshotter();
                    recorder
                        .install()
                        .expect("no other recorder in this test binary");
                    snapshotter
                })
                .clone(),
        )
    }

    impl RoundCounts {
        /// Per outcome, (rounds, deposits) counted since the last call (reading resets them);
        /// under `held`, the rounds whose hold of the balance was timed.
        fn since(&self) -> std::collections::HashMap<String, (u64, u64)> {
            use metrics_util::debugging::DebugValue;
            let mut counts = std::collections::HashMap::<String, (u64, u64)>::new();
            for (key, _, _, value) in self.0.snapshot().into_vec() {
                let key = key.key();
                if let DebugValue::Histogram(held) = &value
                    && key.name() == "deposit_round_balance_held_seconds"
                {
                    counts.entry("held".into()).or_default().0 += held.len() as u64;
                    continue;
                }
                let (DebugValue::Counter(n), Some(outcome)) =
                    (value, key.labels().find(|l| l.key() == "outcome"))
                else {
                    continue;
                };
                let entry = counts.entry(outcome.value().to_owned()).or_default();
                match key.name() {
                    "deposit_rounds_total" => entry.0 += n,
                    "deposit_round_deposits_total" => entry.1 += n,
                    _ => {}
                }
            }
            counts.retain(|_, (rounds, _)| *rounds > 0);
            counts
        }
    }

    /// Every list total and home-page figure the deposits, events, ledger entries and
    /// deliveries are counted in equals their rows, however they were counted (the triggers, or
    /// a round's own count).
    async fn figures_are_the_rows(db: &DatabaseConnection) {
        let differing = |expected: &str, counted: &str| {
            format!(
                "SELECT count(*) FROM ((({expected}) EXCEPT ({counted})) \
                 UNION ALL (({counted}) EXCEPT ({expected}))) AS differing"
            )
        };
        let lists = differing(
            "SELECT business_id, mode, 'deposits' AS list, account_id AS bucket, count(*) AS n \
             FROM deposits GROUP BY 1, 2, 3, 4 \
             UNION ALL SELECT business_id, mode, 'deposit_statuses', status, count(*) \
             FROM deposits GROUP BY 1, 2, 3, 4 \
             UNION ALL SELECT business_id, mode, 'events', type, count(*) \
             FROM events GROUP BY 1, 2, 3, 4 \
             UNION ALL SELECT business_id, mode, 'ledger', '', count(*) \
             FROM ledger_entries GROUP BY 1, 2, 3, 4",
            "SELECT business_id, mode, list, bucket, sum(n)::bigint FROM list_counts \
             WHERE list <> 'payouts' GROUP BY 1, 2, 3, 4 HAVING sum(n) <> 0",
        );
        assert_eq!(
            count(db, &lists).await,
            0,
            "list totals differ from the rows"
        );
        let days = differing(
            "SELECT business_id, mode, 'deposits' AS kind, count(*) AS n, sum(amount) AS amount \
             FROM deposits GROUP BY 1, 2 \
             UNION ALL SELECT business_id, mode, 'deliveries', count(*), 0 \
             FROM deliveries GROUP BY 1, 2",
            "SELECT business_id, mode, kind, sum(n)::bigint, sum(amount)::bigint FROM day_counts \
             WHERE kind IN ('deposits', 'deliveries') AND day <> '' GROUP BY 1, 2, 3",
        );
        assert_eq!(
            count(db, &days).await,
            0,
            "day figures differ from the rows"
        );
        let outcomes = differing(
            "SELECT business_id, mode, CASE WHEN attempts > 0 THEN 'retrying' ELSE 'waiting' END \
             AS bucket, count(*) AS n FROM deliveries WHERE status = 'pending' GROUP BY 1, 2, 3",
            "SELECT business_id, mode, bucket, sum(n)::bigint FROM day_counts \
             WHERE kind = 'deliveries' AND day = '' GROUP BY 1, 2, 3 HAVING sum(n) <> 0",
        );
        assert_eq!(count(db, &outcomes).await, 0, "delivery outcomes differ");
    }

    #[tokio::test]
    async fn deposits_arriving_while_one_commits_share_the_next_transaction() {
        let Some(fresh) = fresh_database().await else {
            return;
        };
        let db = &fresh.db;
        let (business_id, active) = active_accounts(db, 1).await;
        let deposit_as = |body: String, reference: String, into: usize| {
            let db = db.clone();
            tokio::spawn(async move {
                let mut tx = paid(&reference, 100);
                tx.account_number = format!("{}", 9_900_000_001u64 + into as u64);
                super::super::accept(
                    &db,
                    incoming(&body),
                    super::super::Notified::Deposit(Some(&tx)),
                    None,
                )
                .await
            })
        };
        let deposit = |n: u32, into| deposit_as(format!("body {n}"), format!("ref-{n}"), into);
        let recorded_once = |accepted: Accepted| {
            assert!(
                matches!(
                    accepted,
                    Accepted::Stored {
                        recorded: Recorded::New(_),
                        outcome: NotificationOutcome::Recorded,
                        ..
                    }
                ),
                "not recorded: {accepted:?}"
            );
        };
        let key = (business_id.clone(), Mode::Test);
        let until_waiting = |n: usize| {
            let key = key.clone();
            async move {
                for _ in 0..2_000 {
                    if ROUNDS.waiting(&key) == Some(n) {
                        return;
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                }
                panic!("{n} deposits never waited for the business's round");
            }
        };
        let hold_balance = || async {
            let holder = db.begin().await.unwrap();
            holder
                .execute_unprepared(&format!(
                    "SELECT 1 FROM balances WHERE business_id = '{business_id}' FOR UPDATE"
                ))
                .await
                .unwrap();
            holder
        };
        // With a webhook URL, so that each deposit's delivery is written (and counted) too.
        db.execute_unprepared(&format!(
            "UPDATE business_modes SET webhook_url = 'https://hooks.example.com/vas' \
             WHERE business_id = '{business_id}'"
        ))
        .await
        .unwrap();
        recorded_once(deposit(0, 0).await.unwrap().unwrap());
        let rounds = round_counts();
        rounds.since();

        // While a deposit waits for the balance row (held here), ten more arrive, into both
        // accounts: they wait for its round, then share one transaction.
        let holder = hold_balance().await;
        let first = deposit(1, 0);
        until_waiting(0).await;
        let rest: Vec<_> = (2..12).map(|n| deposit(n, n as usize % 2)).collect();
        until_waiting(10).await;
        holder.rollback().await.unwrap();
        recorded_once(first.await.unwrap().unwrap());
        for answer in rest {
            recorded_once(answer.await.unwrap().unwrap());
        }
        assert_eq!(entries_and_transactions(db).await, [12, 3]);
        let counted = rounds.since();
        assert_eq!(counted.get("together"), Some(&(1, 10)), "{counted:?}");
        assert_eq!(counted.get("held"), Some(&(1, 0)), "its hold timed");
        assert_eq!(
            count(db, "SELECT available FROM balances").await,
            1_200,
            "each credited once"
        );
        assert_eq!(
            count(db, "SELECT count(*) FROM deliveries").await,
            12,
            "a delivery per deposit"
        );
        figures_are_the_rows(db).await;

        // A round one of whose deposits is refused (its account changed since it was read):
        // rolled back, then each deposit on its own, the refused one by the transaction path.
        let holder = hold_balance().await;
        let first = deposit(12, 0);
        until_waiting(0).await;
        let rest = [
            deposit(13, 0),
            deposit(14, 0),
            deposit(15, 0),
            deposit(16, 1),
        ];
        until_waiting(4).await;
        db.execute_unprepared(&format!(
            "UPDATE virtual_accounts SET updated_at = updated_at + interval '1 millisecond' \
             WHERE id = '{}'",
            active[1].id
        ))
        .await
        .unwrap();
        holder.rollback().await.unwrap();
        recorded_once(first.await.unwrap().unwrap());
        for answer in rest {
            recorded_once(answer.await.unwrap().unwrap());
        }
        assert_eq!(entries_and_transactions(db).await, [17, 8]);
        let counted = rounds.since();
        assert_eq!(counted.get("refused"), Some(&(1, 4)), "{counted:?}");
        assert_eq!(counted.get("together"), None, "{counted:?}");
        assert_eq!(
            counted.get("held"),
            None,
            "a round rolled back is not timed"
        );

        // Fewer than FEWEST_TOGETHER waiting: each in autocommit.
        let holder = hold_balance().await;
        let first = deposit(17, 0);
        until_waiting(0).await;
        let rest = [deposit(18, 0), deposit(19, 1)];
        until_waiting(2).await;
        holder.rollback().await.unwrap();
        recorded_once(first.await.unwrap().unwrap());
        for answer in rest {
            recorded_once(answer.await.unwrap().unwrap());
        }
        assert_eq!(entries_and_transactions(db).await, [20, 11]);
        // Other tests' deposits go alone too, meanwhile: at least this test's three.
        let counted = rounds.since();
        let (_, alone) = counted.get("alone").copied().unwrap_or_default();
        assert!(alone >= 3, "{counted:?}");
        assert_eq!(counted.get("together"), None, "{counted:?}");
        assert_eq!(count(db, "SELECT count(*) FROM deposits").await, 20);
        assert_eq!(
            count(db, "SELECT count(*) FROM provider_notifications").await,
            20
        );
        assert_eq!(count(db, "SELECT available FROM balances").await, 2_000);
        let verified = crate::ledger::verify(db).await.unwrap();
        assert!(verified.ok, "the ledger's chain holds: {verified:?}");
        assert_eq!(ROUNDS.waiting(&key), None, "an idle business holds nothing");
        assert_eq!(orphans(db).await, 0, "every row's parent is there");
        figures_are_the_rows(db).await;

        // Without a webhook URL a round writes no delivery, as a deposit's own statement does not.
        db.execute_unprepared(&format!(
            "UPDATE business_modes SET webhook_url = '' WHERE business_id = '{business_id}'"
        ))
        .await
        .unwrap();
        let holder = hold_balance().await;
        let first = deposit(20, 0);
        until_waiting(0).await;
        let rest: Vec<_> = (21..25).map(|n| deposit(n, n as usize % 2)).collect();
        until_waiting(4).await;
        holder.rollback().await.unwrap();
        recorded_once(first.await.unwrap().unwrap());
        for answer in rest {
            recorded_once(answer.await.unwrap().unwrap());
        }
        let counted = rounds.since();
        assert_eq!(counted.get("together"), Some(&(1, 4)), "{counted:?}");
        assert_eq!(entries_and_transactions(db).await, [25, 13]);
        assert_eq!(count(db, "SELECT count(*) FROM deliveries").await, 20);
        assert_eq!(count(db, "SELECT available FROM balances").await, 2_500);

        // A round holding a bank's retry (a body stored before) and a reference recorded before
        // (in another body): rolled back, then each on its own, those two answered as what they
        // are, the others recorded.
        let holder = hold_balance().await;
        let first = deposit(25, 0);
        until_waiting(0).await;
        let rest: Vec<_> = (26..29).map(|n| deposit(n, n as usize % 2)).collect();
        let retried = deposit(7, 1);
        let reused = deposit_as("body 99".into(), "ref-8".into(), 0);
        until_waiting(5).await;
        holder.rollback().await.unwrap();
        recorded_once(first.await.unwrap().unwrap());
        for answer in rest {
            recorded_once(answer.await.unwrap().unwrap());
        }
        let retried = retried.await.unwrap().unwrap();
        assert!(matches!(retried, Accepted::Repeated { .. }), "{retried:?}");
        let reused = reused.await.unwrap().unwrap();
        assert!(
            matches!(
                reused,
                Accepted::Stored {
                    recorded: Recorded::Duplicate,
                    ..
                }
            ),
            "{reused:?}"
        );
        let counted = rounds.since();
        assert_eq!(counted.get("refused"), Some(&(1, 5)), "{counted:?}");
        assert_eq!(counted.get("together"), None, "{counted:?}");
        assert_eq!(entries_and_transactions(db).await[0], 29);
        assert_eq!(count(db, "SELECT count(*) FROM deposits").await, 29);
        assert_eq!(
            count(db, "SELECT count(*) FROM provider_notifications").await,
            30,
            "the reused reference's body stored, the retry's not again"
        );
        assert_eq!(count(db, "SELECT available FROM balances").await, 2_900);
        let verified = crate::ledger::verify(db).await.unwrap();
        assert!(verified.ok, "the ledger's chain holds: {verified:?}");
        assert_eq!(orphans(db).await, 0, "every row's parent is there");
        figures_are_the_rows(db).await;

        // A deposit deleted (a purge) after its round counted it: the triggers take it off.
        db.execute_unprepared(
            "DELETE FROM ledger_entries WHERE id = (SELECT min(id) FROM ledger_entries); \
             DELETE FROM deliveries WHERE id = (SELECT min(id) FROM deliveries)",
        )
        .await
        .unwrap();
        figures_are_the_rows(db).await;

        // Counting without the mark is refused: the triggers counted those rows already.
        let txn = db.begin().await.unwrap();
        let unmarked = txn
            .execute_raw(Statement::from_sql_and_values(
                DbBackend::Postgres,
                migrations::counted_by_caller::COUNT_INSERTED,
                [inserted_param(&[]).into()],
            ))
            .await
            .expect_err("an unmarked transaction's count");
        assert!(
            unmarked.to_string().contains("did not set vas.counted_by"),
            "{unmarked}"
        );
        txn.rollback().await.unwrap();
        fresh.drop().await;
    }
}
