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
use std::sync::LazyLock;

use futures::future::BoxFuture;
use sea_orm::{
    ConnectionTrait, DatabaseConnection, DbBackend, DbErr, FromQueryResult, QuerySelect,
    QueryTrait, Statement,
};

use super::super::batch::Keyed;
use super::super::{
    Rendered, cte, has_row, insert_select, is_refused, outbox, pg_time, push_row_values,
    row_values, tallies, with_query,
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
///
/// Activations that come while one is being written share the next statement
/// ([`ACTIVATIONS`]): one round trip and one commit for all of them
/// (docs/decisions/one-statement-paths.md).
pub(super) async fn settle_active(
    db: &DatabaseConnection,
    req: &CreateRequest<'_>,
    account_id: &AccountId,
    job_id: &JobId,
    outcome: &ProvisioningOutcome,
    now: DateTime<Utc>,
) -> Result<Option<Account>, DbErr> {
    let Some(activation) = activation(db, req, account_id, job_id, outcome, now)? else {
        return Ok(None);
    };
    ACTIVATIONS
        .submit(crate::database_of(db), activation)
        .await
        .unwrap_or_else(|| {
            Err(DbErr::Custom(
                "the round of the activation ended without an answer".into(),
            ))
        })
}

/// [`settle_active`]'s statement and round row; None for an answer that is not `Active`.
fn activation(
    db: &DatabaseConnection,
    req: &CreateRequest<'_>,
    account_id: &AccountId,
    job_id: &JobId,
    outcome: &ProvisioningOutcome,
    now: DateTime<Utc>,
) -> Result<Option<Activation>, DbErr> {
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
    let (_, _, stored_key) = key.id();
    Ok(Some(Activation {
        db: db.clone(),
        statement,
        row: ActivationRow {
            account_id: account_id.to_string(),
            account_number: account_number.clone(),
            job_id: job_id.to_string(),
            key: stored_key,
            shard: tallies::shard_of(account_id),
            now: pg_time(now),
        },
    }))
}

/// The activations waiting for the next round of their database.
static ACTIVATIONS: LazyLock<Keyed<String, Activation, Activated>> =
    LazyLock::new(|| Keyed::new(MOST_IN_A_ROUND, run_round));

/// Activations in one statement at most.
const MOST_IN_A_ROUND: usize = 64;

/// What became of an activation: the account activated, or None for the transaction path.
type Activated = Result<Option<Account>, DbErr>;

/// An activation: its own statement (sent when it is alone in its round, or when the round's
/// statement fails) and its row of a round's statement.
struct Activation {
    db: DatabaseConnection,
    statement: Statement,
    row: ActivationRow,
}

/// One row of [`ACTIVATE_ROUND`]'s parameter: what the activation's own statement binds but the
/// account's business and mode, which the round reads from the account it updates.
#[derive(serde::Serialize)]
struct ActivationRow {
    account_id: String,
    account_number: String,
    job_id: String,
    key: String,
    /// The count's shard ([`tallies::shard_of`]).
    shard: i32,
    now: String,
}

/// A round of activations: one alone is its own statement; several are [`ACTIVATE_ROUND`],
/// each one's own statement again if that fails (two given one number, a deadlock).
fn run_round(_database: &String, round: Vec<Activation>) -> BoxFuture<'static, Vec<Activated>> {
    Box::pin(async move {
        let activations = round.len();
        let outcome = if activations > 1 {
            match together(&round).await {
                Ok(activated) => {
                    count_round("together", activations);
                    return activated;
                }
                // Two given one number is the usual reason: the bank's error, each its answer.
                Err(e) => {
                    tracing::debug!(
                        error = %e,
                        activations,
                        "a round of activations failed; sent each on its own"
                    );
                    "failed"
                }
            }
        } else {
            "alone"
        };
        count_round(outcome, activations);
        futures::future::join_all(round.into_iter().map(|activation| async move {
            let row = activation.db.query_one_raw(activation.statement).await?;
            row.map(|row| Account::from_query_result(&row, ""))
                .transpose()
        }))
        .await
    })
}

/// `activation_rounds_total{outcome}` and `activation_round_accounts_total{outcome}`: how often
/// activations share a statement, and how many at a time.
fn count_round(outcome: &'static str, activations: usize) {
    metrics::counter!("activation_rounds_total", "outcome" => outcome).increment(1);
    metrics::counter!("activation_round_accounts_total", "outcome" => outcome)
        .increment(activations as u64);
}

/// The round's statement: each activation's own statement, for every row of the parameter at
/// once (the same conditions and values). The accounts and jobs are found by primary key
/// (`= ANY(…)`), and the counts are added in key order, so that two rounds never take two count
/// rows in opposite orders.
static ACTIVATE_ROUND: LazyLock<String> = LazyLock::new(|| {
    let (active, pending) = (
        AccountStatus::Active.as_str(),
        AccountStatus::Pending.as_str(),
    );
    format!(
        "WITH round AS MATERIALIZED ( \
           SELECT * FROM json_to_recordset($1::json) AS r( \
             account_id text, account_number text, job_id text, key text, shard int, \
             now timestamptz)), \
         upd AS ( \
           UPDATE virtual_accounts AS va SET updated_at = round.now, status = '{active}', \
             account_number = round.account_number, activated_at = round.now \
           FROM round \
           WHERE va.id = ANY(ARRAY(SELECT account_id FROM round)) AND va.id = round.account_id \
             AND va.status = '{pending}' \
             AND NOT EXISTS (SELECT 1 FROM account_numbers AS n WHERE n.mode = va.mode \
               AND n.bank = va.bank AND n.account_number = round.account_number) \
           RETURNING va.*, round.job_id AS round_job, round.key AS round_key, \
             round.shard AS round_shard), \
         counted AS ( \
           INSERT INTO account_counts (business_id, mode, status, shard, n) \
           SELECT business_id, mode, '{active}', round_shard, count(*) FROM upd \
           GROUP BY business_id, mode, round_shard ORDER BY business_id, mode, round_shard \
           ON CONFLICT (business_id, mode, status, shard) \
             DO UPDATE SET n = account_counts.n + excluded.n), \
         job AS ( \
           UPDATE outbox SET updated_at = upd.updated_at, completed_at = upd.updated_at \
           FROM upd \
           WHERE outbox.id = ANY(ARRAY(SELECT round_job FROM upd)) \
             AND outbox.id = upd.round_job AND outbox.completed_at IS NULL), \
         key AS ( \
           UPDATE idempotency_keys AS k SET state = '{completed}', response_status = {status}, \
             account_id = upd.id, updated_at = upd.updated_at \
           FROM upd \
           WHERE k.business_id = upd.business_id AND k.mode = upd.mode \
             AND k.key = upd.round_key) \
         SELECT * FROM upd",
        completed = domain::idempotency::KeyState::Completed.as_str(),
        status = status_of(AccountStatus::Active, true),
    )
});

/// [`ACTIVATE_ROUND`] for `round`: each activation's account, or None where the account was no
/// longer pending or its number is held (nothing written for it).
async fn together(round: &[Activation]) -> Result<Vec<Activated>, DbErr> {
    let rows: Vec<&ActivationRow> = round.iter().map(|a| &a.row).collect();
    let json = serde_json::to_string(&rows).map_err(|e| DbErr::Custom(e.to_string()))?;
    let statement =
        Statement::from_sql_and_values(DbBackend::Postgres, ACTIVATE_ROUND.as_str(), [json.into()]);
    let mut activated = round[0]
        .db
        .query_all_raw(statement)
        .await?
        .iter()
        .map(|row| Account::from_query_result(row, ""))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(round
        .iter()
        .map(|a| {
            let found = activated
                .iter()
                .position(|account| account.id.as_str() == a.row.account_id);
            Ok(found.map(|i| activated.swap_remove(i)))
        })
        .collect())
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

    /// A cipher, the business "One Ltd" (KYB approved), and a request digest for its creations.
    async fn one_ltd(
        db: &DatabaseConnection,
    ) -> (Cipher, crate::businesses::IssuedBusiness, RequestDigest) {
        let cipher = Cipher::new(&Cipher::generate_key(), &[]).unwrap();
        let business = crate::businesses::create(db, &cipher, "One Ltd", KybStatus::Approved)
            .await
            .unwrap();
        let digest = RequestDigest::new(&cipher, "{\"n\":1}");
        (cipher, business, digest)
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
        let (cipher, business, digest) = one_ltd(&fresh.db).await;
        // Statistics are the connection's until it reports them: one connection, flushed below.
        let db = fresh.one_connection().await;
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
        let (cipher, business, digest) = one_ltd(db).await;
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

    /// Activations that come together are one statement ([`together`]) that writes for each what
    /// its own statement would, and nothing for one that is not ordinary: an account numbered
    /// already, a number another account holds. Two given one number fail the round's statement,
    /// and each is then sent alone: one is activated, the other is the transaction path's.
    #[tokio::test]
    async fn activations_that_come_together_share_one_statement() {
        let Some(fresh) = fresh_database().await else {
            return;
        };
        let db = &fresh.db;
        let (cipher, business, digest) = one_ltd(db).await;
        let now = domain::time::now();
        let keys: Vec<String> = (1..=7).map(|n| format!("k{n}")).collect();
        let bodies: Vec<NewAccount> = (1..=7u32).map(|n| body(n, &format!("user-{n}"))).collect();
        let requests: Vec<CreateRequest<'_>> = keys
            .iter()
            .zip(&bodies)
            .map(|(key, account)| request((&business.id, "One Ltd"), key, &digest, account))
            .collect();
        let mut started = Vec::new();
        for req in &requests {
            let (outcome, _) = create(db, &cipher, req, now).await.unwrap().unwrap();
            let CreateOutcome::Started { account, job_id } = outcome else {
                panic!("not started: {outcome:?}");
            };
            started.push((account.id, job_id));
        }
        let numbered = |number: &str| ProvisioningOutcome::Active {
            account_number: number.into(),
        };
        let activation_of = |i: usize, number: &str| {
            let (account_id, job_id) = &started[i];
            activation(db, &requests[i], account_id, job_id, &numbered(number), now)
                .unwrap()
                .expect("an active answer")
        };
        // The seventh is numbered first, alone.
        settle_active(
            db,
            &requests[6],
            &started[6].0,
            &started[6].1,
            &numbered("9900000007"),
            now,
        )
        .await
        .unwrap()
        .expect("a pending account numbered");

        // Four ordinary, the fifth given the seventh's number, the seventh numbered again.
        let mut round: Vec<Activation> = (0..4)
            .map(|i| activation_of(i, &format!("990000000{}", i + 1)))
            .collect();
        round.push(activation_of(4, "9900000007"));
        round.push(activation_of(6, "9900000077"));
        let activated = together(&round).await.expect("one statement");
        let numbers: Vec<Option<String>> = activated
            .into_iter()
            .map(|a| a.unwrap().and_then(|account| account.account_number))
            .collect();
        assert_eq!(
            numbers,
            [
                Some("9900000001".to_owned()),
                Some("9900000002".to_owned()),
                Some("9900000003".to_owned()),
                Some("9900000004".to_owned()),
                None,
                None,
            ]
        );
        // Each activated as alone: stamped `now`, counted once, its job and its key completed.
        assert_eq!(
            count(
                db,
                &format!(
                    "SELECT count(*) FROM virtual_accounts WHERE status = 'active' \
                 AND activated_at = updated_at AND updated_at = '{}'",
                    pg_time(now)
                )
            )
            .await,
            5
        );
        assert_eq!(
            count(
                db,
                "SELECT sum(n)::bigint FROM account_counts WHERE status = 'active'"
            )
            .await,
            5
        );
        assert_eq!(
            count(
                db,
                "SELECT count(*) FROM idempotency_keys k JOIN virtual_accounts v \
                 ON v.id = k.account_id WHERE k.state = 'completed' \
                 AND k.response_status = 201 AND v.status = 'active' \
                 AND k.updated_at = v.activated_at"
            )
            .await,
            5
        );
        assert_eq!(
            count(
                db,
                "SELECT count(*) FROM outbox o JOIN virtual_accounts v \
                 ON o.payload LIKE '%' || v.id || '%' WHERE o.completed_at IS NULL"
            )
            .await,
            2,
            "the fifth's and the sixth's jobs are open"
        );
        assert_eq!(
            count(
                db,
                &format!(
                    "SELECT count(*) FROM virtual_accounts WHERE id = '{}' AND status = 'pending' \
                 AND account_number IS NULL",
                    started[4].0
                )
            )
            .await,
            1,
            "a number another account holds wrote nothing"
        );
        assert_eq!(
            count(
                db,
                "SELECT count(*) FROM idempotency_keys WHERE state = 'in_flight'"
            )
            .await,
            2
        );
        assert_eq!(
            count(
                db,
                "SELECT count(*) FROM account_numbers n JOIN virtual_accounts v \
                 ON v.id = n.account_id AND v.account_number = n.account_number"
            )
            .await,
            5
        );

        // The fifth and the sixth given one number: the round's statement fails and writes
        // nothing; then each is sent alone, side by side: one takes the number, and the other
        // finds it held or meets the unique index (the transaction path's cases both).
        let round = vec![
            activation_of(4, "9900000050"),
            activation_of(5, "9900000050"),
        ];
        let failed = together(&round).await.map(|_| ()).unwrap_err();
        assert!(crate::is_unique_violation(&failed), "{failed}");
        let mut numbered_alone = 0;
        for answer in run_round(&String::new(), round).await {
            match answer {
                Ok(Some(account)) => {
                    assert_eq!(account.account_number.as_deref(), Some("9900000050"));
                    numbered_alone += 1;
                }
                Ok(None) => {}
                Err(e) => assert!(crate::is_unique_violation(&e), "{e}"),
            }
        }
        assert_eq!(numbered_alone, 1, "one of the two took the number");
        assert_eq!(
            count(
                db,
                "SELECT sum(n)::bigint FROM account_counts WHERE status = 'active'"
            )
            .await,
            6
        );
        assert_eq!(orphans(db).await, 0, "every row's parent is there");
        fresh.drop().await;
    }
}
