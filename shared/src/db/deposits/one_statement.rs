//! On PostgreSQL, a deposit notification as two statements sent in autocommit (issue 24): the
//! account is read, then ONE statement stores the notification with its outcome, locks the
//! account (unchanged since it was read), records the deposit, its event, delivery and job, and
//! credits the balance with its ledger entry. The transaction path took eight round trips and
//! wrote the notification twice (claimed, then its outcome). Each part is the builder the
//! transaction path runs, so the rules stay in one place.
//!
//! Only a new deposit into a known account is done here. Anything else writes nothing and the
//! transaction path answers it as before: no account with the number; a body stored before or a
//! reference recorded before (the statement stores nothing); and, failing on purpose
//! (`vas_refuse`, m0021) so that the notification it stored goes too, an account changed since
//! it was read, a reference recorded meanwhile, or a credit that would overflow the balance.
//!
//! Locks are taken in the transaction path's order: the notification's key, the account, the
//! deposit's key, the balance.

use sea_orm::sea_query::{Alias, Condition, Expr, ExprTrait, OnConflict, Query, WithClause};
use sea_orm::{ColumnTrait, ConnectionTrait, DbBackend, DbErr, QueryFilter};
use sea_orm::{QuerySelect, QueryTrait};

use super::super::entities::{deposit, provider_notification, virtual_account};
use super::super::{
    Rendered, cte, deliveries, events, has_row, insert_select, is_refused, ledger, push_row_values,
    row_values, with_query,
};
use super::{
    Accepted, Credit, DEPOSIT_KEY, Incoming, NOTIFICATION_KEY, Recorded, Report, Source,
    account_for, announcement, deposit_row, notification_row, push_account_for_values,
    push_recorded_before_values, recorded_before,
};
use domain::provider::{NotificationOutcome, RemoteTransaction};

/// The statement's SQL per shape: crediting (a deposit into an active account) or not (flagged).
static DEPOSIT: Rendered<bool> = Rendered::new();

/// [`super::accept`] of a deposit notification; None when it wrote nothing and the transaction
/// path must answer.
pub(super) async fn accept_deposit<C: ConnectionTrait>(
    db: &C,
    incoming: Incoming<'_>,
    tx: &RemoteTransaction,
) -> Result<Option<Accepted>, DbErr> {
    let report = Report {
        mode: incoming.mode,
        bank: incoming.bank,
        tx,
        source: &Source::Notification,
    };
    let Some(account) = account_for(report).one(db).await? else {
        return Ok(None);
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
    match db.query_one_raw(statement).await {
        Ok(Some(_)) => Ok(Some(Accepted::Stored {
            id,
            recorded: Recorded::New(Box::new(row)),
            outcome: NotificationOutcome::Recorded,
        })),
        // The body was stored before: nothing written.
        Ok(None) => Ok(None),
        Err(e) if is_refused(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    //! The statement itself, on PostgreSQL (`TEST_DATABASE_URL`; skipped without it): a new
    //! deposit is done by it, every other case leaves nothing for the transaction path. The api's
    //! tests check what banks, callers and webhooks see on both databases.
    use sea_orm::DatabaseConnection;

    use super::*;
    use crate::crypto::{Cipher, RequestDigest};
    use crate::db::accounts::{self, CreateOutcome, CreateRequest};
    use crate::db::testing::{count, fresh_database};
    use domain::provider::ProvisioningOutcome;
    use domain::{Bank, KybStatus, Mode, NewAccount};

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

    #[tokio::test]
    async fn a_new_deposit_is_one_statement_and_every_other_case_writes_nothing() {
        let Some(fresh) = fresh_database().await else {
            return;
        };
        let db = &fresh.db;
        let cipher = Cipher::new(&Cipher::generate_key(), &[]).unwrap();
        let business = crate::db::businesses::create(db, &cipher, "Paid Ltd", KybStatus::Approved)
            .await
            .unwrap();
        let body = serde_json::json!({
            "customerName": "Ada Obi",
            "customerEmail": "ada@example.com",
            "customerPhone": "08031234567",
            "customerBvn": "22200000001",
            "preferredBank": "wema-bank",
        });
        let account = NewAccount::parse(body.as_object().unwrap(), Mode::Test).unwrap();
        let digest = RequestDigest::new(&cipher, "{}");
        let request = CreateRequest {
            business_id: &business.id,
            business_name: "Paid Ltd",
            mode: Mode::Test,
            idempotency_key: "k1",
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
            account_number: "9900000001".into(),
        };
        accounts::settle_creation(db, &request, &account.id, &job_id, numbered, now)
            .await
            .unwrap();
        let incoming = |body: &'static str| Incoming {
            mode: Mode::Test,
            bank: Bank::WemaBank,
            body,
            now: domain::time::now(),
        };

        let first = paid("ref-1", 5_000);
        let accepted = accept_deposit(db, incoming("body 1"), &first)
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
            accept_deposit(db, incoming("body 1"), &first)
                .await
                .unwrap()
                .is_none()
        );
        let again = paid("ref-1", 7_000);
        assert!(
            accept_deposit(db, incoming("body 2"), &again)
                .await
                .unwrap()
                .is_none()
        );
        let mut stranger = paid("ref-3", 7_000);
        stranger.account_number = "9900000999".into();
        assert!(
            accept_deposit(db, incoming("body 3"), &stranger)
                .await
                .unwrap()
                .is_none()
        );
        assert_eq!(written(db).await, [1, 1, 1, 1, 5_000]);

        // A balance one more credit would overflow: refused, nothing stays.
        sea_orm::ConnectionTrait::execute_unprepared(
            db,
            &format!("UPDATE balances SET available = {}", i64::MAX - 1_000),
        )
        .await
        .unwrap();
        let big = paid("ref-4", 5_000);
        assert!(
            accept_deposit(db, incoming("body 4"), &big)
                .await
                .unwrap()
                .is_none()
        );
        assert_eq!(
            count(db, "SELECT count(*) FROM provider_notifications").await,
            1
        );
        assert_eq!(count(db, "SELECT count(*) FROM deposits").await, 1);
        fresh.drop().await;
    }
}
