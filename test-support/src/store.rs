//! What is stored, read and changed by name, so a test says what it checks rather than how the
//! tables spell it. Counts are over the whole test database (each test has its own).

use domain::ids::BusinessId;
use entities::{
    business_mode, delivery, delivery_attempt, deposit, event, outbox, provider_notification,
    virtual_account,
};
use sea_orm::entity::prelude::DateTimeUtc;
use sea_orm::sea_query::{Expr, IntoCondition};
use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, DatabaseConnection, EntityTrait, PaginatorTrait,
    QueryFilter, QueryOrder, QuerySelect, Statement,
};
use serde_json::Value;

// ---------------------------------------------------------------------------------------------
// Integrity

/// Rows whose parent is missing, over the relations PostgreSQL no longer checks
/// (docs/decisions/hot-path-foreign-keys.md; SQLite still refuses them): each write path must
/// still write none.
pub async fn orphans(db: &DatabaseConnection) -> i64 {
    let counts: Vec<String> = migrations::UNCHECKED_PARENTS
        .iter()
        .map(|(table, column, parent)| {
            format!(
                "(SELECT count(*) FROM {table} c \
                 WHERE NOT EXISTS (SELECT 1 FROM {parent} p WHERE p.id = c.{column}))"
            )
        })
        .collect();
    let sql = format!("SELECT CAST({} AS BIGINT) AS n", counts.join(" + "));
    let row = db
        .query_one_raw(Statement::from_string(db.get_database_backend(), sql))
        .await
        .expect("count orphans")
        .expect("one row");
    row.try_get("", "n").expect("a count")
}

// ---------------------------------------------------------------------------------------------
// Accounts

/// Virtual accounts stored, of every business and mode.
pub async fn count_accounts(db: &DatabaseConnection) -> u64 {
    virtual_account::Entity::find()
        .count(db)
        .await
        .expect("count")
}

/// Sealed values under the key whose ciphertexts start with `key_prefix`: identities, webhook
/// secrets and previous webhook secrets together.
pub async fn secrets_sealed_with(db: &DatabaseConnection, key_prefix: &str) -> u64 {
    let identities = virtual_account::Entity::find()
        .filter(virtual_account::Column::IdentityEnc.starts_with(key_prefix))
        .count(db)
        .await
        .expect("count");
    let current = business_mode::Entity::find()
        .filter(business_mode::Column::WebhookSecretEnc.starts_with(key_prefix))
        .count(db)
        .await
        .expect("count");
    let previous = business_mode::Entity::find()
        .filter(business_mode::Column::PreviousWebhookSecretEnc.starts_with(key_prefix))
        .count(db)
        .await
        .expect("count");
    identities + current + previous
}

// ---------------------------------------------------------------------------------------------
// Jobs (the outbox)

/// Jobs not completed (waiting, running, or dead): what is still owed.
pub async fn outbox_backlog(db: &DatabaseConnection) -> u64 {
    count_jobs(db, outbox::Column::CompletedAt.is_null()).await
}

/// Jobs given up on (dead-lettered).
pub async fn dead_jobs(db: &DatabaseConnection) -> u64 {
    count_jobs(db, outbox::Column::DeadAt.is_not_null()).await
}

/// Unfinished jobs on the `provisioning` queue about `account_id`.
pub async fn open_provisioning_jobs_for(db: &DatabaseConnection, account_id: &str) -> u64 {
    count_jobs(
        db,
        Condition::all()
            .add(outbox::Column::Queue.eq("provisioning"))
            .add(outbox::Column::CompletedAt.is_null())
            .add(outbox::Column::Payload.contains(account_id)),
    )
    .await
}

/// Unfinished jobs of this kind (`provision`, `close`, `deliver`, `recheck`).
pub async fn open_jobs_of_kind(db: &DatabaseConnection, kind: &str) -> u64 {
    count_jobs(
        db,
        Condition::all()
            .add(outbox::Column::CompletedAt.is_null())
            .add(outbox::Column::Payload.contains(kind_field(kind))),
    )
    .await
}

/// Jobs of this kind about `account_id`, finished or not.
pub async fn jobs_of_kind_for(db: &DatabaseConnection, kind: &str, account_id: &str) -> u64 {
    count_jobs(
        db,
        Condition::all()
            .add(outbox::Column::Payload.contains(kind_field(kind)))
            .add(outbox::Column::Payload.contains(account_id)),
    )
    .await
}

/// Jobs about `account_id` that carry the id of the request that caused them (`req_…`).
pub async fn jobs_carrying_a_request_id_for(db: &DatabaseConnection, account_id: &str) -> u64 {
    count_jobs(
        db,
        Condition::all()
            .add(outbox::Column::Payload.contains(account_id))
            .add(outbox::Column::RequestId.starts_with("req_")),
    )
    .await
}

/// One job's progress as its row records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobState {
    /// Runs that ended in a retry.
    pub attempts: i32,
    pub last_error: Option<String>,
    /// Handed to the broker (and not rescheduled since).
    pub published: bool,
    pub completed: bool,
    pub dead: bool,
}

/// The job `job_id` as its row stands.
pub async fn job(db: &DatabaseConnection, job_id: &str) -> JobState {
    let row = outbox::Entity::find_by_id(domain::ids::JobId::unchecked(job_id))
        .one(db)
        .await
        .expect("read job")
        .unwrap_or_else(|| panic!("no job {job_id}"));
    JobState {
        attempts: row.attempts,
        last_error: row.last_error,
        published: row.published_at.is_some(),
        completed: row.completed_at.is_some(),
        dead: row.dead_at.is_some(),
    }
}

async fn count_jobs(db: &DatabaseConnection, filter: impl IntoCondition) -> u64 {
    outbox::Entity::find()
        .filter(filter)
        .count(db)
        .await
        .expect("count")
}

/// How a job's payload names its kind (`{"kind":"provision",…}`).
fn kind_field(kind: &str) -> String {
    format!("\"kind\":\"{kind}\"")
}

// ---------------------------------------------------------------------------------------------
// Events, deliveries and attempts

/// Events recorded, of every type.
pub async fn count_events(db: &DatabaseConnection) -> u64 {
    event::Entity::find().count(db).await.expect("count")
}

/// Events of this type (e.g. `virtualaccount.active`).
pub async fn count_events_of_type(db: &DatabaseConnection, event_type: &str) -> u64 {
    event::Entity::find()
        .filter(event::Column::EventType.eq(event_type))
        .count(db)
        .await
        .expect("count")
}

/// The deposit events recorded: (`deposit.received`, `deposit.flagged`).
pub async fn count_deposit_events(db: &DatabaseConnection) -> (u64, u64) {
    (
        count_events_of_type(db, "deposit.received").await,
        count_events_of_type(db, "deposit.flagged").await,
    )
}

/// Events of this type whose data mentions `subject` (an account id, a provider reference).
pub async fn count_events_about(db: &DatabaseConnection, event_type: &str, subject: &str) -> u64 {
    event::Entity::find()
        .filter(event::Column::EventType.eq(event_type))
        .filter(event::Column::Data.contains(subject))
        .count(db)
        .await
        .expect("count")
}

/// The `data` of every event of this type, as JSON.
pub async fn event_data_of_type(db: &DatabaseConnection, event_type: &str) -> Vec<Value> {
    event::Entity::find()
        .select_only()
        .column(event::Column::Data)
        .filter(event::Column::EventType.eq(event_type))
        .into_tuple::<String>()
        .all(db)
        .await
        .expect("read events")
        .iter()
        .map(|data| serde_json::from_str(data).expect("event data is JSON"))
        .collect()
}

/// Deliveries, in any state.
pub async fn count_deliveries(db: &DatabaseConnection) -> u64 {
    delivery::Entity::find().count(db).await.expect("count")
}

/// Deliveries in this state (`pending`, `succeeded`, `dead`).
pub async fn count_deliveries_with_status(db: &DatabaseConnection, status: &str) -> u64 {
    delivery::Entity::find()
        .filter(delivery::Column::Status.eq(status))
        .count(db)
        .await
        .expect("count")
}

/// A delivery's state and attempts so far, by the delivery's id.
pub async fn delivery_state(db: &DatabaseConnection, delivery_id: &str) -> (String, i32) {
    delivery_states(db, delivery::Column::Id.eq(delivery_id))
        .await
        .pop()
        .unwrap_or_else(|| panic!("no delivery {delivery_id}"))
}

/// The state and attempts of each delivery of one event.
pub async fn delivery_states_of_event(
    db: &DatabaseConnection,
    event_id: &str,
) -> Vec<(String, i32)> {
    delivery_states(db, delivery::Column::EventId.eq(event_id)).await
}

async fn delivery_states(
    db: &DatabaseConnection,
    filter: impl IntoCondition,
) -> Vec<(String, i32)> {
    delivery::Entity::find()
        .select_only()
        .column(delivery::Column::Status)
        .column(delivery::Column::Attempts)
        .filter(filter)
        .into_tuple::<(String, i32)>()
        .all(db)
        .await
        .expect("read deliveries")
}

/// Delivery attempts whose recorded error mentions every one of `words`.
pub async fn count_attempts_whose_error_mentions(db: &DatabaseConnection, words: &[&str]) -> u64 {
    let mut query = delivery_attempt::Entity::find();
    for word in words {
        query = query.filter(delivery_attempt::Column::Error.contains(*word));
    }
    query.count(db).await.expect("count")
}

// ---------------------------------------------------------------------------------------------
// Deposits and provider notifications

/// Deposits recorded, in any state.
pub async fn count_deposits(db: &DatabaseConnection) -> u64 {
    deposit::Entity::find().count(db).await.expect("count")
}

/// Provider notifications stored, whatever came of them.
pub async fn count_notifications(db: &DatabaseConnection) -> u64 {
    provider_notification::Entity::find()
        .count(db)
        .await
        .expect("count")
}

/// Provider notifications with this outcome (`recorded`, `unmatched`, `invalid`, `ignored`).
pub async fn count_notifications_with_outcome(db: &DatabaseConnection, outcome: &str) -> u64 {
    provider_notification::Entity::find()
        .filter(provider_notification::Column::Outcome.eq(outcome))
        .count(db)
        .await
        .expect("count")
}

/// Notifications with this outcome for this provider reference (as read from the body).
pub async fn count_notifications_for_reference(
    db: &DatabaseConnection,
    outcome: &str,
    reference: &str,
) -> u64 {
    provider_notification::Entity::find()
        .filter(provider_notification::Column::Outcome.eq(outcome))
        .filter(provider_notification::Column::ProviderReference.eq(reference))
        .count(db)
        .await
        .expect("count")
}

/// Notifications with this outcome whose stored body mentions `text` (for bodies that could not
/// be read as a transfer, which have no provider reference).
pub async fn count_notifications_mentioning(
    db: &DatabaseConnection,
    outcome: &str,
    text: &str,
) -> u64 {
    provider_notification::Entity::find()
        .filter(provider_notification::Column::Outcome.eq(outcome))
        .filter(provider_notification::Column::Body.contains(text))
        .count(db)
        .await
        .expect("count")
}

// ---------------------------------------------------------------------------------------------
// Changes made behind the API's back: states a test needs that the API would not (yet) produce.

/// Sets an account's status directly (e.g. `failed`, `deactivated`); the business's tallies
/// (list totals) are rebuilt to match, as the service would have kept them.
pub async fn set_account_status(db: &DatabaseConnection, account_id: &str, status: &str) {
    let account =
        virtual_account::Entity::find_by_id(domain::ids::AccountId::unchecked(account_id))
            .one(db)
            .await
            .expect("read account")
            .unwrap_or_else(|| panic!("no account {account_id}"));
    let updated = virtual_account::Entity::update_many()
        .col_expr(virtual_account::Column::Status, Expr::value(status))
        .filter(virtual_account::Column::Id.eq(account_id))
        .exec(db)
        .await
        .expect("update account");
    assert_eq!(updated.rows_affected, 1, "no account {account_id}");
    store::tallies::recount(db, &account.business_id, account.mode)
        .await
        .expect("recount");
}

/// Moves a business's account history `minutes` into the past, as if that much time had passed:
/// every account's creation stamp and the rolling-hour marks kept beside them (so the hourly
/// limit sees exactly what it would an hour later).
pub async fn let_time_pass_for_accounts(
    db: &DatabaseConnection,
    business_id: &BusinessId,
    minutes: i64,
) {
    use sea_orm::{ActiveModelTrait, ActiveValue::Set, IntoActiveModel};
    let by = chrono::Duration::minutes(minutes);
    let accounts = virtual_account::Entity::find()
        .filter(virtual_account::Column::BusinessId.eq(business_id))
        .all(db)
        .await
        .expect("read accounts");
    for account in accounts {
        let created_at = account.created_at - by;
        let mut row = account.into_active_model();
        row.created_at = Set(created_at);
        row.update(db).await.expect("move an account's stamp");
    }
    let modes = business_mode::Entity::find()
        .filter(business_mode::Column::BusinessId.eq(business_id))
        .all(db)
        .await
        .expect("read business modes");
    for mode in modes {
        let (mark, last) = (mode.accounts_expired_until, mode.last_account_at);
        let mut row = mode.into_active_model();
        row.accounts_expired_until = Set(mark.map(|t| t - by));
        row.last_account_at = Set(last.map(|t| t - by));
        row.update(db).await.expect("move the marks");
    }
}

/// Revokes a business's secret key for `mode` (`test` or `live`) now.
pub async fn revoke_key(db: &DatabaseConnection, business_id: &BusinessId, mode: &str) {
    // What `api admin key revoke` does: every working key of the mode stops at once.
    let mode = domain::Mode::parse(mode).expect("test or live");
    let changed = store::keys::change(
        db,
        business_id,
        mode,
        store::keys::KeyAction::Revoke,
        domain::time::now(),
    )
    .await
    .expect("revoke key");
    assert!(changed.is_some(), "no {mode} mode for {business_id}");
}

/// Ends every rotation's overlap: previous webhook secrets expired long ago.
pub async fn expire_previous_webhook_secrets(db: &DatabaseConnection) {
    business_mode::Entity::update_many()
        .col_expr(
            business_mode::Column::PreviousSecretExpiresAt,
            Expr::value(long_ago()),
        )
        .exec(db)
        .await
        .expect("expire previous secrets");
}

/// Every unfinished job last published long ago, as if its message had been lost back then. The
/// jobs of one message (one claim's, sharing a `published_at`) stay one message, a second apart
/// from the next; a job never published is a message of its own.
pub async fn make_published_jobs_overdue(db: &DatabaseConnection) {
    let rows: Vec<(String, Option<DateTimeUtc>)> = outbox::Entity::find()
        .select_only()
        .column(outbox::Column::Id)
        .column(outbox::Column::PublishedAt)
        .filter(outbox::Column::CompletedAt.is_null())
        .order_by_asc(outbox::Column::PublishedAt)
        .into_tuple()
        .all(db)
        .await
        .expect("read jobs");
    let mut messages: Vec<(Option<DateTimeUtc>, Vec<String>)> = Vec::new();
    for (id, published_at) in rows {
        match messages.last_mut() {
            Some((at, ids)) if at.is_some() && *at == published_at => ids.push(id),
            _ => messages.push((published_at, vec![id])),
        }
    }
    for (i, (_, ids)) in messages.into_iter().enumerate() {
        outbox::Entity::update_many()
            .col_expr(
                outbox::Column::PublishedAt,
                Expr::value(long_ago() + chrono::Duration::seconds(i as i64)),
            )
            .filter(outbox::Column::Id.is_in(ids))
            .exec(db)
            .await
            .expect("age jobs");
    }
}

/// Replaces a job's payload (e.g. with one a newer version might write).
pub async fn overwrite_job_payload(db: &DatabaseConnection, job_id: &str, payload: &str) {
    let updated = outbox::Entity::update_many()
        .col_expr(outbox::Column::Payload, Expr::value(payload))
        .filter(outbox::Column::Id.eq(job_id))
        .exec(db)
        .await
        .expect("update job");
    assert_eq!(updated.rows_affected, 1, "no job {job_id}");
}

fn long_ago() -> DateTimeUtc {
    "2000-01-01T00:00:00Z".parse().expect("a time")
}

/// Deposit conflicts kept for this provider reference whose second report mentions `text`.
pub async fn count_deposit_conflicts(db: &DatabaseConnection, reference: &str, text: &str) -> u64 {
    use entities::deposit_conflict;
    deposit_conflict::Entity::find()
        .filter(deposit_conflict::Column::ProviderReference.eq(reference))
        .filter(deposit_conflict::Column::Reported.contains(text))
        .count(db)
        .await
        .expect("count")
}

/// The request digest an idempotency key stored.
pub async fn idempotency_request_hash(db: &DatabaseConnection, key: &str) -> String {
    use entities::idempotency_key;
    idempotency_key::Entity::find()
        .filter(idempotency_key::Column::Key.eq(key))
        .one(db)
        .await
        .expect("read")
        .expect("the key is stored")
        .request_hash
}

/// Makes a key look as if it was stored before keyed digests (a plain SHA-256 of its body).
pub async fn set_idempotency_request_hash(db: &DatabaseConnection, key: &str, hash: &str) {
    use entities::idempotency_key;
    idempotency_key::Entity::update_many()
        .col_expr(idempotency_key::Column::RequestHash, hash.into())
        .filter(idempotency_key::Column::Key.eq(key))
        .exec(db)
        .await
        .expect("update");
}

/// Makes the database's clock run `hours` ahead for sessions opened from now on (PostgreSQL
/// only): a function shadowing `clock_timestamp()` first on the database's search path.
pub async fn shift_database_clock(db: &DatabaseConnection, database: &str, hours: u32) {
    use sea_orm::ConnectionTrait;
    db.execute_unprepared(&format!(
        "CREATE FUNCTION public.clock_timestamp() RETURNS timestamptz AS \
         $$ SELECT pg_catalog.clock_timestamp() + interval '{hours} hours' $$ LANGUAGE sql"
    ))
    .await
    .expect("create the shadowing function");
    db.execute_unprepared(&format!(
        "ALTER DATABASE {database} SET search_path = public, pg_catalog"
    ))
    .await
    .expect("put it first on the search path");
}

/// Writes a raw text into one column of an account, bypassing the typed entity: a value no
/// version of the service writes (a hand edit, a newer version's state).
pub async fn corrupt_account_column(
    db: &DatabaseConnection,
    account_id: &str,
    column: &str,
    value: &str,
) {
    use sea_orm::ConnectionTrait;
    db.execute_unprepared(&format!(
        "UPDATE virtual_accounts SET {column} = '{value}' WHERE id = '{account_id}'"
    ))
    .await
    .expect("corrupt the account row");
}

/// The account's stored status text and number, read without the typed entity (so a corrupt
/// row can still be inspected).
pub async fn account_status_and_number(
    db: &DatabaseConnection,
    account_id: &str,
) -> (String, Option<String>) {
    use sea_orm::{ConnectionTrait, Statement};
    let backend = db.get_database_backend();
    let row = db
        .query_one_raw(Statement::from_string(
            backend,
            format!(
                "SELECT status, account_number FROM virtual_accounts WHERE id = '{account_id}'"
            ),
        ))
        .await
        .expect("read")
        .expect("the account exists");
    (
        row.try_get_by_index(0).expect("status"),
        row.try_get_by_index(1).expect("number"),
    )
}

/// The id (`key_…`) of the secret key that created the account, as its row records it.
pub async fn account_created_by_key(
    db: &DatabaseConnection,
    account_id: &str,
) -> Option<domain::ids::KeyId> {
    virtual_account::Entity::find_by_id(domain::ids::AccountId::unchecked(account_id))
        .one(db)
        .await
        .expect("read the account")
        .expect("the account exists")
        .created_by_key_id
}

/// The id (`key_…`) of a secret key, as the audit log and the accounts it created name it.
pub async fn key_id_of(db: &DatabaseConnection, secret_key: &str) -> domain::ids::KeyId {
    use entities::api_key;
    api_key::Entity::find()
        .filter(api_key::Column::KeyHash.eq(domain::keys::hash_secret_key(secret_key)))
        .one(db)
        .await
        .expect("read the keys")
        .expect("the key exists")
        .id
}

// ---------------------------------------------------------------------------------------------
// Ledger and payouts

/// Ledger entries of every business and mode.
pub async fn count_ledger_entries(db: &DatabaseConnection) -> u64 {
    entities::ledger_entry::Entity::find()
        .count(db)
        .await
        .expect("count")
}

/// Ledger entries whose source is this deposit or payout, of any type.
pub async fn count_ledger_entries_for(db: &DatabaseConnection, source_id: &str) -> u64 {
    use entities::ledger_entry;
    ledger_entry::Entity::find()
        .filter(ledger_entry::Column::SourceId.eq(source_id))
        .count(db)
        .await
        .expect("count")
}

/// Payouts stored, of every business and mode.
pub async fn count_payouts(db: &DatabaseConnection) -> u64 {
    entities::payout::Entity::find()
        .count(db)
        .await
        .expect("count")
}

/// What `api admin ledger verify` checks: every balance is its ledger's sum, every entry's
/// `balance_after` the running sum.
pub async fn ledger_verifies(db: &DatabaseConnection) -> store::ledger::Verification {
    store::ledger::verify(db).await.expect("verify")
}

/// Changes a balance behind the ledger's back (as a bad manual fix would), to see the check
/// catch it.
pub async fn tamper_with_balance(
    db: &DatabaseConnection,
    business_id: &BusinessId,
    mode: &str,
    delta: i64,
) {
    use entities::balance;
    balance::Entity::update_many()
        .col_expr(
            balance::Column::Available,
            sea_orm::sea_query::ExprTrait::add(Expr::col(balance::Column::Available), delta),
        )
        .filter(balance::Column::BusinessId.eq(business_id))
        .filter(balance::Column::Mode.eq(mode))
        .exec(db)
        .await
        .expect("update");
}

async fn execute(db: &DatabaseConnection, statement: &str) {
    use sea_orm::ConnectionTrait;
    db.execute_unprepared(statement)
        .await
        .unwrap_or_else(|e| panic!("{statement}: {e}"));
}

/// Sets a balance behind the ledger's back to exactly `available` kobo.
pub async fn set_balance(
    db: &DatabaseConnection,
    business_id: &BusinessId,
    mode: &str,
    available: i64,
) {
    execute(
        db,
        &format!(
            "UPDATE balances SET available = {available} \
             WHERE business_id = '{business_id}' AND mode = '{mode}'"
        ),
    )
    .await;
}

/// Deletes the ledger entry of this type and source (as a tamper would).
pub async fn delete_ledger_entry(db: &DatabaseConnection, entry_type: &str, source_id: &str) {
    execute(
        db,
        &format!(
            "DELETE FROM ledger_entries WHERE type = '{entry_type}' AND source_id = '{source_id}'"
        ),
    )
    .await;
}

/// Makes every entry's `balance_after` the running sum again, as someone covering a change to
/// the ledger would (then only the check against the sources can see the change).
pub async fn mend_ledger_chain(db: &DatabaseConnection) {
    execute(
        db,
        "UPDATE ledger_entries SET balance_after = (SELECT SUM(l2.amount) FROM ledger_entries l2 \
           WHERE l2.business_id = ledger_entries.business_id AND l2.mode = ledger_entries.mode \
             AND (l2.created_at < ledger_entries.created_at \
                  OR (l2.created_at = ledger_entries.created_at AND l2.id <= ledger_entries.id)))",
    )
    .await;
}

/// Drops the one-entry-per-(type, source) index, as a careless fix might.
pub async fn drop_ledger_uniqueness(db: &DatabaseConnection) {
    execute(db, "DROP INDEX ledger_entries_type_source").await;
}

/// Writes entry `id` beside the entry of `like_source` (same balance and time): of `entry_type`
/// and `amount`, for `source_id`.
pub async fn forge_ledger_entry(
    db: &DatabaseConnection,
    like_source: &str,
    id: &str,
    entry_type: &str,
    amount: i64,
    source_id: &str,
) {
    execute(
        db,
        &format!(
            "INSERT INTO ledger_entries \
               (id, business_id, mode, type, amount, balance_after, source_id, created_at) \
             SELECT '{id}', business_id, mode, '{entry_type}', {amount}, balance_after, \
                    '{source_id}', created_at \
             FROM ledger_entries WHERE source_id = '{like_source}'"
        ),
    )
    .await;
}

/// Records that a payout was sent through `bank` (as worker-payouts does before sending).
pub async fn set_payout_provider_bank(db: &DatabaseConnection, payout_id: &str, bank: &str) {
    execute(
        db,
        &format!("UPDATE payouts SET provider_bank = '{bank}' WHERE id = '{payout_id}'"),
    )
    .await;
}

/// The unfinished job rows of a queue.
pub async fn open_job_rows(db: &DatabaseConnection, queue: &str) -> Vec<outbox::Model> {
    outbox::Entity::find()
        .filter(outbox::Column::Queue.eq(queue))
        .filter(outbox::Column::CompletedAt.is_null())
        .filter(outbox::Column::DeadAt.is_null())
        .all(db)
        .await
        .expect("jobs")
}

/// Delivery attempts recorded (each one a request made), all of them or those to `url`.
pub async fn count_attempts(db: &DatabaseConnection, url: Option<&str>) -> u64 {
    let mut query = delivery_attempt::Entity::find();
    if let Some(url) = url {
        query = query.filter(delivery_attempt::Column::Url.eq(url));
    }
    query.count(db).await.expect("count")
}

/// Ends every sign-in lockout now (a second ago), rather than waiting fifteen minutes for it.
pub async fn end_sign_in_lockouts(db: &DatabaseConnection) {
    use sea_orm::ConnectionTrait;
    db.execute_unprepared(&format!(
        "UPDATE sign_in_throttles SET locked_until = '{}'",
        (chrono::Utc::now() - chrono::Duration::seconds(1)).to_rfc3339()
    ))
    .await
    .expect("end lockouts");
}

/// Dashboard sessions stored (ended ones are deleted).
pub async fn count_dashboard_sessions(db: &DatabaseConnection) -> u64 {
    entities::dashboard_session::Entity::find()
        .count(db)
        .await
        .expect("count")
}

// ---------------------------------------------------------------------------------------------
// Audit log

/// The audit log of `business_id`, newest first (its first 1,000 entries: more than any test
/// writes).
pub async fn audit_log(
    db: &DatabaseConnection,
    business_id: &BusinessId,
) -> Vec<store::audit::AuditEntry> {
    let page = store::paging::PageRequest {
        page_size: 1000,
        position: store::paging::Position::Page(1),
    };
    let (entries, _) = store::audit::list(db, business_id, &page)
        .await
        .expect("the audit log reads");
    entries.rows
}
