//! On PostgreSQL, each of an ordinary creation's two transactions as ONE statement sent in
//! autocommit (docs/decisions/one-statement-paths.md): one round trip each where six were (BEGIN,
//! four or five statements, COMMIT). Each statement's parts are the builders the transaction path
//! runs one by one, so the rules stay in one place; the statement commits exactly what that
//! transaction would have.
//!
//! Only the ordinary case is done here. Anything else the first statement meets makes it write
//! nothing and the transaction path answers it as before: a key seen before or a
//! customerReference with a live account claim nothing; a live account committed meanwhile, a
//! creation over the hourly limit or a rolling hour's mark already past the stamp make it fail on
//! purpose (`vas_refuse`, m0021: an autocommit statement that fails leaves nothing, and PostgreSQL
//! logs the failure). The second statement applies only an `Active` answer to
//! a still-pending account; anything else is the transaction path's.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Alias, Asterisk, Condition, Expr, ExprTrait, Query, WithClause};
use sea_orm::{ConnectionTrait, DbBackend, DbErr, FromQueryResult, QuerySelect, QueryTrait};

use super::super::{
    Rendered, cte, has_row, insert_select, is_refused, outbox, push_row_values, row_values,
    tallies, with_query,
};
use super::{
    Account, CreateOutcome, CreateRequest, LimitState, account_insert, account_row, idempotency_of,
    limit_of, live_by_reference, push_live_by_reference_values, push_settle_active_values,
    settle_update, stamped, status_of,
};
use crypto::Cipher;
use domain::AccountStatus;
use domain::ids::{AccountId, JobId};
use domain::provider::ProvisioningOutcome;
use entities::{outbox as outbox_row, virtual_account};
use jobs::ProvisioningJob;

/// The first statement's SQL per shape: with a customerReference or without (its live-account
/// check), and the bank's grace (written into the job's due time).
static CREATE: Rendered<(bool, i64)> = Rendered::new();
/// The second statement's SQL: one shape.
static SETTLE_ACTIVE: Rendered<()> = Rendered::new();

/// The first transaction of [`super::create`] for an ordinary creation:
/// `WITH claim AS (INSERT key … ON CONFLICT DO NOTHING RETURNING key), acct AS (INSERT account
/// … FROM claim RETURNING *), job AS (INSERT job … FROM acct), counted AS (UPDATE business_modes
/// … FROM acct RETURNING the hour) SELECT acct.*, the hour FROM claim LEFT JOIN acct LEFT JOIN
/// counted`. None when it wrote nothing: the caller runs the transaction path.
pub(super) async fn create<C: ConnectionTrait>(
    db: &C,
    cipher: &Cipher,
    req: &CreateRequest<'_>,
    now: DateTime<Utc>,
) -> Result<Option<(CreateOutcome, LimitState)>, DbErr> {
    let account_id = AccountId::new();
    let key = idempotency_of(req);
    let account = account_row(cipher, req, account_id.clone());
    // The job is stamped by the account's stamp, as the transaction path stamps it.
    let job_id = JobId::new();
    let job = outbox::job_row(
        job_id.clone(),
        &ProvisioningJob::Provision {
            account_id: account_id.clone(),
        },
        now,
        now,
    );
    let job_computed = |col: &outbox_row::Column| {
        matches!(
            col,
            outbox_row::Column::RunAt
                | outbox_row::Column::CreatedAt
                | outbox_row::Column::UpdatedAt
        )
    };
    let reference = req.account.customer_reference.as_deref();

    // In the order the statement below binds them: 51 with a customerReference.
    let mut values = Vec::with_capacity(51);
    key.push_claim_values(&mut values, Some(&account_id), now)?;
    if let Some(reference) = reference {
        push_live_by_reference_values(&mut values, req, reference);
    }
    push_row_values(&mut values, &account, stamped)?;
    push_row_values(&mut values, &job, job_computed)?;
    tallies::push_count_creation_values(&mut values, req.business_id, req.mode);
    values.push(i64::from(req.limit_per_hour).into());

    let shape = (reference.is_some(), req.provider_grace.num_milliseconds());
    let statement = CREATE.statement(shape, values, || {
        // A customerReference with a live account (a caller's get-or-create) claims nothing, so
        // the usual 200 costs no failed statement; one committed meanwhile is caught by the
        // insert.
        let no_live_account = reference.map(|reference| {
            Expr::exists(
                live_by_reference(req, reference)
                    .select_only()
                    .expr(Expr::val(1))
                    .into_query(),
            )
            .not()
        });
        let claim = key.claim_insert(Some(&account_id), now, no_live_account)?;
        let account = account_insert(DbBackend::Postgres, &account, Some("claim"))?;

        let (at, cutoff) = tallies::stamp_of("acct");
        let due = Expr::cust(format!(
            "acct.created_at + interval '{} milliseconds'",
            req.provider_grace.num_milliseconds()
        ));
        let mut job_values = row_values(&job, |col| {
            job_computed(col).then(|| match col {
                outbox_row::Column::RunAt => due.clone(),
                _ => at.clone(),
            })
        })?;
        job_values.from(Alias::new("acct"));
        let insert_job = insert_select::<outbox_row::Entity>(job_values, "the provisioning job")?;

        let mut counted = tallies::count_creation_update(req.business_id, req.mode, at, cutoff);
        counted.from(Alias::new("acct"));

        let acct = Alias::new("acct");
        let hour = Alias::new("counted");
        let in_window = || Expr::col((hour.clone(), Alias::new("in_window")));
        // Not ordinary: a live account has the reference (no account written), the mark is
        // past the stamp (no count), or the count is over the limit.
        let not_ordinary = Condition::any()
            .add(Expr::col((acct.clone(), virtual_account::Column::Id)).is_null())
            .add(in_window().is_null())
            .add(in_window().gt(i64::from(req.limit_per_hour)));
        let mut answer = Query::select();
        answer
            .column((acct.clone(), Asterisk))
            .expr_as(in_window(), Alias::new("in_window"))
            .expr_as(
                Expr::col((hour.clone(), Alias::new("oldest"))),
                Alias::new("oldest"),
            )
            .expr_as(
                Expr::case(
                    not_ordinary,
                    Expr::cust(
                        "vas_refuse('not an ordinary creation: the transaction answers it')",
                    ),
                ),
                Alias::new("refused"),
            )
            .from(Alias::new("claim"))
            .left_join(acct, Expr::cust("true"))
            .left_join(hour, Expr::cust("true"));
        let mut counted = cte("counted", counted);
        counted.columns([Alias::new("in_window"), Alias::new("oldest")]);
        let mut with = WithClause::new();
        with.cte(cte("claim", claim))
            .cte(cte("acct", account))
            .cte(cte("job", insert_job))
            .cte(counted);
        Ok(DbBackend::Postgres.build(&with_query(with, answer)))
    })?;
    let row = match db.query_one_raw(statement).await {
        Ok(Some(row)) => row,
        // The key was there already: nothing written.
        Ok(None) => return Ok(None),
        Err(e) if is_refused(&e) => return Ok(None),
        Err(e) => return Err(e),
    };
    let account = Account::from_query_result(&row, "")?;
    let in_window: i64 = row.try_get("", "in_window")?;
    let oldest: Option<DateTime<Utc>> = row.try_get("", "oldest")?;
    let limit = limit_of(
        req,
        std::cmp::max(in_window, 0) as u64,
        oldest,
        account.created_at,
    );
    Ok(Some((CreateOutcome::Started { account, job_id }, limit)))
}

/// The second transaction of [`super::settle_creation`] when the bank numbered the account:
/// `WITH upd AS (UPDATE the pending account RETURNING *), its status count, its job completed,
/// its key completed (each only with a row in upd) SELECT * FROM upd`. None when the account was
/// no longer pending or the number is held (nothing written): the caller runs the transaction
/// path.
pub(super) async fn settle_active<C: ConnectionTrait>(
    db: &C,
    req: &CreateRequest<'_>,
    account_id: &AccountId,
    job_id: &JobId,
    outcome: &ProvisioningOutcome,
    now: DateTime<Utc>,
) -> Result<Option<Account>, DbErr> {
    let ProvisioningOutcome::Active { account_number } = outcome else {
        return Ok(None);
    };
    let key = idempotency_of(req);
    let status = status_of(AccountStatus::Active, true);
    // In the order the statement below binds them; `1` is each `EXISTS (SELECT 1 FROM upd)`.
    let mut values = Vec::with_capacity(26);
    push_settle_active_values(&mut values, account_id, account_number, now);
    tallies::push_left_pending_values(
        &mut values,
        req.business_id,
        req.mode,
        account_id,
        AccountStatus::Active,
    )?;
    outbox::push_mark_values(&mut values, job_id, now);
    values.push(1i32.into());
    key.push_completion_values(&mut values, status, account_id, now);
    values.push(1i32.into());

    let statement = SETTLE_ACTIVE.statement((), values, || {
        let update = settle_update(account_id, outcome, now)
            .ok_or_else(|| DbErr::Custom("an active answer always updates".into()))?;
        let mut update = update.into_query();
        update.returning_all();
        let count = tallies::left_pending_insert(
            req.business_id,
            req.mode,
            account_id,
            AccountStatus::Active,
            "upd",
        )?;
        let mut job = outbox::mark_update(job_id, outbox::Mark::Completed, now);
        job.and_where(has_row("upd"));
        let mut completion = key.completion(status, account_id, now);
        completion.and_where(has_row("upd"));
        let mut with = WithClause::new();
        with.cte(cte("upd", update))
            .cte(cte("counted", count))
            .cte(cte("job", job))
            .cte(cte("key", completion));
        let mut answer = Query::select();
        answer.column(Asterisk).from(Alias::new("upd"));
        Ok(DbBackend::Postgres.build(&with_query(with, answer)))
    })?;
    match db.query_one_raw(statement).await? {
        Some(row) => Ok(Some(Account::from_query_result(&row, "")?)),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    //! The statements themselves, on PostgreSQL (`TEST_DATABASE_URL`; skipped without it): that an
    //! ordinary creation is done by them, and that every other case leaves nothing written for
    //! the transaction path. The api's tests check the answers callers see on both databases.
    use sea_orm::DatabaseConnection;

    use super::*;
    use domain::ids::{BusinessId, KeyId};

    /// The secret key the tests' creations name.
    static KEY_TEST: std::sync::LazyLock<KeyId> =
        std::sync::LazyLock::new(|| KeyId::unchecked("key_test"));
    use crate::testing::{count, fresh_database};
    use crypto::RequestDigest;
    use domain::{KybStatus, Mode, NewAccount};
    use test_support::store::orphans;

    /// Keys, accounts, open provisioning jobs, and the business's created tally.
    async fn written(db: &DatabaseConnection) -> [i64; 4] {
        [
            count(db, "SELECT count(*) FROM idempotency_keys").await,
            count(db, "SELECT count(*) FROM virtual_accounts").await,
            count(db, "SELECT count(*) FROM outbox WHERE completed_at IS NULL").await,
            count(
                db,
                "SELECT sum(accounts_created)::bigint FROM business_modes",
            )
            .await,
        ]
    }

    /// An ordinary test-mode creation request: a limit of 100 an hour, the bank's grace 35 s.
    fn request<'a>(
        business: (&'a BusinessId, &'a str),
        key: &'a str,
        digest: &'a RequestDigest,
        account: &'a NewAccount,
    ) -> CreateRequest<'a> {
        CreateRequest {
            business_id: business.0,
            business_name: business.1,
            mode: Mode::Test,
            key_id: &KEY_TEST,
            idempotency_key: key,
            request: digest,
            account,
            limit_per_hour: 100,
            provider_grace: chrono::Duration::seconds(35),
        }
    }

    fn body(n: u32, reference: &str) -> NewAccount {
        let body = serde_json::json!({
            "customerName": format!("Ada Obi {n}"),
            "customerEmail": format!("ada{n}@example.com"),
            "customerPhone": "08031234567",
            "customerBvn": format!("{:011}", 22_200_000_000u64 + u64::from(n)),
            "preferredBank": "wema-bank",
            "customerReference": reference,
        });
        NewAccount::parse(body.as_object().unwrap(), Mode::Test).unwrap()
    }

    /// The second statement (pending → active, with the bank's number) changes no
    /// indexed column of `virtual_accounts`, so PostgreSQL writes it as a HOT update: no new entry
    /// in any of the table's indexes, the trigram one included. (Before m0022 none was.)
    #[tokio::test]
    async fn an_activation_adds_no_index_entry_to_the_accounts() {
        let Some(fresh) = fresh_database().await else {
            return;
        };
        let cipher = Cipher::new(&Cipher::generate_key(), &[]).unwrap();
        let business =
            crate::businesses::create(&fresh.db, &cipher, "One Ltd", KybStatus::Approved)
                .await
                .unwrap();
        // Statistics are the connection's until it reports them: one connection, flushed below.
        let db = fresh.one_connection().await;
        let digest = RequestDigest::new(&cipher, "{\"n\":1}");
        let now = domain::time::now();
        for n in 1..=4u32 {
            let (key, account) = (format!("k{n}"), body(n, &format!("user-{n}")));
            let req = request((&business.id, "One Ltd"), &key, &digest, &account);
            let (outcome, _) = create(&db, &cipher, &req, now)
                .await
                .unwrap()
                .expect("an ordinary creation");
            let CreateOutcome::Started { account, job_id } = outcome else {
                panic!("not started: {outcome:?}");
            };
            let numbered = ProvisioningOutcome::Active {
                account_number: format!("99000000{n:02}"),
            };
            settle_active(&db, &req, &account.id, &job_id, &numbered, now)
                .await
                .unwrap()
                .expect("a pending account numbered");
        }
        db.execute_unprepared("SELECT pg_stat_force_next_flush()")
            .await
            .unwrap();
        let (updates, hot) = (
            count(
                &db,
                "SELECT n_tup_upd FROM pg_stat_user_tables WHERE relname = 'virtual_accounts'",
            )
            .await,
            count(
                &db,
                "SELECT n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'virtual_accounts'",
            )
            .await,
        );
        assert_eq!(
            (updates, hot),
            (4, 4),
            "four activations, each a HOT update"
        );
        // The rows beside them followed (m0022's trigger).
        assert_eq!(
            count(
                &db,
                "SELECT count(*) FROM account_states s JOIN virtual_accounts v \
                 ON v.id = s.account_id AND v.status = s.status WHERE s.status = 'active'"
            )
            .await,
            4
        );
        assert_eq!(
            count(
                &db,
                "SELECT count(*) FROM account_numbers n JOIN virtual_accounts v \
                 ON v.id = n.account_id AND v.account_number = n.account_number"
            )
            .await,
            4
        );
        assert_eq!(orphans(&db).await, 0, "every row's parent is there");
        db.close().await.unwrap();
        fresh.drop().await;
    }

    /// A creation's first statement is planned once per connection, as a prepared statement
    /// should be, not afresh on every call: its live-reference check compares the
    /// generated `live_reference` column, which implies the partial index's predicate, so the
    /// generic plan can use that index (bound statuses once cost every creation 0.65 ms of
    /// planning); and it compares the business
    /// and mode opaquely ([`crate::eq_opaque`]), so that a business the statistics call small
    /// gets no custom plan cheaper than the generic one (compared directly, every creation of a
    /// new business beside a big one was planned afresh: 0.58 ms each).
    #[tokio::test]
    async fn the_first_statement_gets_a_generic_plan() {
        let Some(fresh) = fresh_database().await else {
            return;
        };
        let cipher = Cipher::new(&Cipher::generate_key(), &[]).unwrap();
        let create_business = |name: &'static str| {
            crate::businesses::create(&fresh.db, &cipher, name, KybStatus::Approved)
        };
        let big = create_business("One Ltd").await.unwrap();
        // A business with 20,000 older accounts, and one with none, analysed: on an empty table
        // every plan is cheap and the generic one would be taken whatever the statement said.
        let small = create_business("Two Ltd").await.unwrap();
        fresh
            .db
            .execute_unprepared(&format!(
                "INSERT INTO virtual_accounts (id, business_id, mode, status, bank, \
                 account_number, account_name, customer_name, customer_email, customer_phone, \
                 customer_reference, identity_type, identity_enc, created_at, updated_at) \
                 SELECT 'va_old_' || g, '{id}', 'test', 'active', 'wema-bank', \
                 lpad(g::text, 10, '0'), 'One Ltd/Old ' || g, 'Old ' || g, \
                 'old' || g || '@example.com', '+2348031234567', 'old-' || g, 'bvn', 'x', \
                 now() - interval '2 hours', now() - interval '2 hours' \
                 FROM generate_series(1, 20000) AS g; \
                 UPDATE business_modes SET accounts_expired_until = now() - interval '90 minutes' \
                 WHERE business_id = '{id}'; ANALYZE virtual_accounts",
                id = big.id
            ))
            .await
            .unwrap();
        let digest = RequestDigest::new(&cipher, "{\"n\":1}");
        let plans = |kind: &str| {
            format!(
                "SELECT coalesce(sum({kind}), 0)::bigint FROM pg_prepared_statements \
                 WHERE statement LIKE 'WITH \"claim\"%'"
            )
        };
        for (business, first) in [(&big, 1u32), (&small, 11)] {
            // Prepared statements are the connection's: each business on a connection of its own.
            let db = fresh.one_connection().await;
            // PostgreSQL tries a generic plan after five custom ones.
            for n in first..first + 8 {
                let (key, reference) = (format!("k{n}"), format!("user-{n}"));
                let account = body(n, &reference);
                let req = request((&business.id, &business.name), &key, &digest, &account);
                let created = create(&db, &cipher, &req, domain::time::now()).await;
                assert!(created.unwrap().is_some(), "creation {n} is ordinary");
            }
            let (generic, custom) = (
                count(&db, &plans("generic_plans")).await,
                count(&db, &plans("custom_plans")).await,
            );
            assert_eq!(
                (generic + custom, custom),
                (8, 5),
                "eight creations of {} on one connection: five custom plans, then the generic one",
                business.name
            );
            db.close().await.unwrap();
        }
        assert_eq!(orphans(&fresh.db).await, 0, "every row's parent is there");
        fresh.drop().await;
    }

    #[tokio::test]
    async fn an_ordinary_creation_is_two_statements_and_every_other_case_writes_nothing() {
        let Some(fresh) = fresh_database().await else {
            return;
        };
        let db = &fresh.db;
        let cipher = Cipher::new(&Cipher::generate_key(), &[]).unwrap();
        let business = crate::businesses::create(db, &cipher, "One Ltd", KybStatus::Approved)
            .await
            .unwrap();
        let digest = RequestDigest::new(&cipher, "{\"n\":1}");
        let (first, second) = (body(1, "user-1"), body(2, "user-2"));
        // This test's own hourly limit per call.
        let limited = |key: &'static str, account, limit_per_hour| CreateRequest {
            limit_per_hour,
            ..request((&business.id, "One Ltd"), key, &digest, account)
        };
        let now = domain::time::now();

        // Ordinary: the key, the account, its job and the count, in one statement.
        let (outcome, limit) = create(db, &cipher, &limited("k1", &first, 2), now)
            .await
            .unwrap()
            .expect("an ordinary creation is the statement's");
        let CreateOutcome::Started { account, job_id } = outcome else {
            panic!("not started: {outcome:?}");
        };
        assert_eq!(account.status, AccountStatus::Pending);
        assert_eq!((limit.limit, limit.remaining), (2, 1));
        assert!(limit.reset_secs > 3590, "{limit:?}");
        assert_eq!(written(db).await, [1, 1, 1, 1]);
        let due = count(
            db,
            &format!(
                "SELECT extract(epoch FROM run_at - created_at)::bigint FROM outbox WHERE id = '{job_id}'"
            ),
        )
        .await;
        assert_eq!(
            due, 35,
            "the job is due the grace after the account's stamp"
        );

        // The same key again, a live reference under a new key, and over the limit: nothing.
        assert!(
            create(db, &cipher, &limited("k1", &first, 2), now)
                .await
                .unwrap()
                .is_none()
        );
        assert!(
            create(db, &cipher, &limited("k2", &first, 2), now)
                .await
                .unwrap()
                .is_none()
        );
        assert!(
            create(db, &cipher, &limited("k3", &second, 1), now)
                .await
                .unwrap()
                .is_none()
        );
        assert_eq!(written(db).await, [1, 1, 1, 1]);

        // The bank's number: the account, its count, its job and its key, in one statement.
        let numbered = ProvisioningOutcome::Active {
            account_number: "9900000001".into(),
        };
        let req = limited("k1", &first, 2);
        let active = settle_active(db, &req, &account.id, &job_id, &numbered, now)
            .await
            .unwrap()
            .expect("a pending account numbered is the statement's");
        assert_eq!(active.status, AccountStatus::Active);
        assert_eq!(active.account_number.as_deref(), Some("9900000001"));
        assert_eq!(written(db).await, [1, 1, 0, 1]);
        assert_eq!(
            count(
                db,
                "SELECT response_status::bigint FROM idempotency_keys WHERE state = 'completed'"
            )
            .await,
            201
        );
        assert_eq!(
            count(
                db,
                "SELECT sum(n)::bigint FROM account_counts WHERE status = 'active'"
            )
            .await,
            1
        );
        // Settled already: nothing more.
        assert!(
            settle_active(db, &req, &account.id, &job_id, &numbered, now)
                .await
                .unwrap()
                .is_none()
        );
        assert_eq!(
            count(
                db,
                "SELECT sum(n)::bigint FROM account_counts WHERE status = 'active'"
            )
            .await,
            1
        );
        assert_eq!(orphans(db).await, 0, "every row's parent is there");
        fresh.drop().await;
    }
}
