//! Storage: every query the processes need, on PostgreSQL or SQLite, over the rows of the
//! `entities` crate. With it: the tenant scope every query of a business's rows goes through
//! (`tenant`), the group commit of database work (`batch`), the outbox table the jobs are written
//! to in the transaction of the change that causes them (`outbox`), and the event data written
//! with each change, in the shapes of the `views` crate.

pub mod accounts;
pub mod audit;
pub mod batch;
pub mod businesses;
pub mod changes;
pub mod day_counts;
pub mod deliveries;
pub mod deposits;
pub mod events;
pub mod failover;
pub mod home;
pub mod idempotency;
pub mod keys;
pub mod ledger;
pub mod list_counts;
pub mod outbox;
pub mod paging;
pub mod payouts;
pub mod read;
pub mod rechecks;
pub mod reencrypt;
pub mod tallies;
pub mod tenant;
pub mod tls;
pub mod users;

use std::time::Duration;

use sea_orm::{ConnectOptions, Database, DatabaseConnection, DbBackend, DbErr, SqlErr};

/// How long a query waits for a connection before failing (during a failover, the time the new
/// primary has to appear before the request answers 503).
pub const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(10);

/// A pooled connection is pinged before it is handed out only once it has sat idle this long
/// (docs/decisions/patched-database-driver.md). sqlx pings on every acquire by default, and again
/// on every release: two round trips per statement beside the statement's one. The ping on release
/// is skipped for a connection that has just answered everything asked of it (vendor/README.md:
/// sqlx-postgres, patched), so a connection a query broke is still pinged and discarded; a server
/// that went away while a connection sat idle is caught here; one that went away in the last second
/// fails that query, which answers 503 as any lost connection does ([`failover::is_unavailable`]).
pub const PING_IF_IDLE_FOR: Duration = Duration::from_secs(1);

/// Opens a pool. SQLite gets one connection: its writers serialise anyway, and one connection
/// turns "database is locked" errors into an orderly queue.
/// A libpq multi-host URL (`postgres://u@h1,h2/vas?target_session_attrs=read-write`) gets a pool
/// that follows the primary across failovers ([`failover`]). TLS as the URL says ([`tls`]).
pub async fn connect(url: &str, max_connections: u32) -> Result<DatabaseConnection, DbErr> {
    let url = &tls::libpq_url(url, None);
    if let Some(multi) = failover::MultiHost::parse(url).map_err(DbErr::Custom)? {
        return failover::connect_primary(&multi, max_connections, ACQUIRE_TIMEOUT).await;
    }
    usable(url)?;
    let sqlite = url.starts_with("sqlite:");
    let mut options = ConnectOptions::new(url.to_owned());
    options
        .max_connections(if sqlite { 1 } else { max_connections })
        .min_connections(if sqlite { 1 } else { 2 })
        .acquire_timeout(ACQUIRE_TIMEOUT)
        .test_before_acquire_if_idle_for(PING_IF_IDLE_FOR)
        .sqlx_logging(false);
    let db = Database::connect(options).await?;
    if db.get_database_backend() == DbBackend::Sqlite {
        use sea_orm::ConnectionTrait;
        db.execute_unprepared(
            "PRAGMA foreign_keys = ON; PRAGMA journal_mode = WAL; PRAGMA busy_timeout = 5000;",
        )
        .await?;
    }
    Ok(db)
}

/// The read replica of `VAS_DATABASE__READ_URL` (one host, or several of which the first that
/// answers now is used), opened lazily: a replica that is down at start makes the lists read the
/// primary ([`read`]) rather than stop the process.
pub async fn connect_replica(url: &str, max_connections: u32) -> Result<DatabaseConnection, DbErr> {
    let url = &tls::libpq_url(url, None);
    let mut urls = vec![url.to_owned()];
    if let Some(multi) = failover::MultiHost::parse(url).map_err(DbErr::Custom)? {
        urls = (0..multi.hosts.len()).map(|i| multi.url_for(i)).collect();
    }
    usable(&urls[0])?;
    let lazy = |url: &str| {
        let mut options = ConnectOptions::new(url.to_owned());
        options
            .max_connections(max_connections)
            .min_connections(0)
            .acquire_timeout(Duration::from_secs(2))
            .test_before_acquire_if_idle_for(PING_IF_IDLE_FOR)
            .connect_lazy(true)
            .sqlx_logging(false);
        options
    };
    for url in &urls {
        let db = Database::connect(lazy(url)).await?;
        if db.ping().await.is_ok() {
            return Ok(db);
        }
    }
    Database::connect(lazy(&urls[0])).await
}

/// Refuses what sea-orm cannot open before it does: its error would repeat the whole string,
/// password and all (libpq's key/value form, another scheme).
fn usable(url: &str) -> Result<(), DbErr> {
    match url::Url::parse(url) {
        Ok(parsed) if matches!(parsed.scheme(), "postgres" | "postgresql" | "sqlite") => Ok(()),
        _ => Err(DbErr::Conn(sea_orm::RuntimeErr::Internal(
            "the database URL is neither postgres://… nor sqlite://… (libpq's key/value form is not accepted)"
                .to_owned(),
        ))),
    }
}

/// The time by the database's clock on PostgreSQL (the moment of the call, not the transaction's
/// start), so api instances whose clocks differ agree on creation stamps and the rolling-hour
/// limit; SQLite serves one process, whose clock it is.
pub async fn clock<C: sea_orm::ConnectionTrait>(
    db: &C,
) -> Result<chrono::DateTime<chrono::Utc>, DbErr> {
    use sea_orm::Statement;
    if db.get_database_backend() != DbBackend::Postgres {
        return Ok(domain::time::now());
    }
    let row = db
        .query_one_raw(Statement::from_string(
            DbBackend::Postgres,
            "SELECT clock_timestamp() AS now",
        ))
        .await?
        .ok_or_else(|| DbErr::Custom("clock_timestamp() returned no row".into()))?;
    row.try_get("", "now")
}

/// The database's clock as an expression of the statement being built (`clock_timestamp()`, read
/// when the row is written, after any lock the statement waited for); SQLite serves one process,
/// whose clock it is. The one-statement form of [`clock`].
pub(crate) fn clock_expr(backend: DbBackend) -> sea_orm::sea_query::Expr {
    use sea_orm::sea_query::Expr;
    if backend == DbBackend::Postgres {
        Expr::cust("clock_timestamp()")
    } else {
        Expr::val(domain::time::now())
    }
}

/// The select list of an `INSERT … SELECT` of one row, in the order of its entity's columns:
/// the expression `computed` gives for a column (a stamp, a value from a `WITH`), else the
/// row's value, which must be set.
pub(crate) fn row_values<A: sea_orm::ActiveModelTrait>(
    row: &A,
    computed: impl Fn(&<A::Entity as sea_orm::EntityTrait>::Column) -> Option<sea_orm::sea_query::Expr>,
) -> Result<sea_orm::sea_query::SelectStatement, DbErr> {
    use sea_orm::Iterable;
    use sea_orm::sea_query::{Expr, Query};
    let mut values = Query::select();
    for col in <A::Entity as sea_orm::EntityTrait>::Column::iter() {
        let expr = match computed(&col) {
            Some(expr) => expr,
            None => Expr::val(column_value(row, col)?),
        };
        values.expr(expr);
    }
    Ok(values)
}

/// The values [`row_values`] binds for `row`, in the same order, pushed onto `into`: every
/// column but the `computed` ones (a [`Rendered`] statement's list of values).
pub(crate) fn push_row_values<A: sea_orm::ActiveModelTrait>(
    into: &mut Vec<sea_orm::Value>,
    row: &A,
    computed: impl Fn(&<A::Entity as sea_orm::EntityTrait>::Column) -> bool,
) -> Result<(), DbErr> {
    use sea_orm::Iterable;
    for col in <A::Entity as sea_orm::EntityTrait>::Column::iter() {
        if !computed(&col) {
            into.push(column_value(row, col)?);
        }
    }
    Ok(())
}

fn column_value<A: sea_orm::ActiveModelTrait>(
    row: &A,
    col: <A::Entity as sea_orm::EntityTrait>::Column,
) -> Result<sea_orm::Value, DbErr> {
    row.get(col)
        .into_value()
        .ok_or_else(|| DbErr::Custom(format!("an insert leaves {col:?} unset")))
}

/// A hot statement's SQL, rendered by its builders once per shape (docs/benchmarks.md: building,
/// rendering and dropping the creation's two statements was a quarter of the api's CPU per
/// creation). Each call lists its values by hand, in the order the builders bind them, beside
/// the builders (`push_row_values`, `…_values` functions); the cached SQL is sent with them.
/// The builders stay the one description of the SQL: a shape's first call sends what they
/// built, and caches it only if the hand-listed values are the same; in debug builds (every
/// test) every call builds the statement too and panics on any difference.
pub(crate) struct Rendered<K> {
    shapes: std::sync::RwLock<Vec<(K, std::sync::Arc<str>)>>,
}

impl<K: PartialEq> Rendered<K> {
    pub(crate) const fn new() -> Self {
        Rendered {
            shapes: std::sync::RwLock::new(Vec::new()),
        }
    }

    /// The statement of this `shape` with these `values`; `build` makes it with the builders.
    /// What is sent is always the kept text with the listed values (tests run the path
    /// production runs), but for values that disagree with the builders' in a release build:
    /// then the builders' statement is sent and nothing kept.
    pub(crate) fn statement(
        &self,
        shape: K,
        values: Vec<sea_orm::Value>,
        build: impl FnOnce() -> Result<sea_orm::Statement, DbErr>,
    ) -> Result<sea_orm::Statement, DbErr> {
        use std::sync::PoisonError;
        let cached = self
            .shapes
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .find(|(known, _)| *known == shape)
            .map(|(_, sql)| std::sync::Arc::clone(sql));
        let sql = match cached {
            Some(sql) if !cfg!(debug_assertions) => sql,
            cached => {
                let built = build()?;
                let agree =
                    built.values.as_ref().map_or(&[][..], |v| &v.0[..]) == values.as_slice();
                debug_assert!(
                    agree,
                    "hand-listed values differ from the builders'\n{:?}\n{:?}\n{}",
                    values, built.values, built.sql
                );
                if !agree {
                    tracing::error!(sql = %built.sql, "a statement's listed values differ from its builders': not cached");
                    return Ok(built);
                }
                match cached {
                    Some(sql) => {
                        debug_assert_eq!(*sql, built.sql, "a shape rendered two texts");
                        sql
                    }
                    None => {
                        let sql: std::sync::Arc<str> = built.sql.into();
                        let mut shapes =
                            self.shapes.write().unwrap_or_else(PoisonError::into_inner);
                        if !shapes.iter().any(|(known, _)| *known == shape) {
                            shapes.push((shape, std::sync::Arc::clone(&sql)));
                        }
                        sql
                    }
                }
            }
        };
        Ok(sea_orm::Statement::from_sql_and_values(
            DbBackend::Postgres,
            sql.to_string(),
            values,
        ))
    }
}

/// `INSERT INTO <entity> (<every column, in order>) <values>`: the insert of a row whose values
/// come from a `SELECT` ([`row_values`]; a stamp or a value of a `WITH`). `what` names it in an
/// error.
pub(crate) fn insert_select<E: sea_orm::EntityTrait>(
    values: sea_orm::sea_query::SelectStatement,
    what: &str,
) -> Result<sea_orm::sea_query::InsertStatement, DbErr> {
    use sea_orm::Iterable;
    // Built in place: `.to_owned()` on a builder clones the whole statement (docs/benchmarks.md).
    let mut insert = sea_orm::sea_query::Query::insert();
    insert
        .into_table(E::default())
        .columns(E::Column::iter())
        .select_from(values)
        .map_err(|e| DbErr::Custom(format!("{what}: {e}")))?;
    Ok(insert)
}

/// `INSERT INTO <entity> (<every column, in order>) VALUES (…), (…)`: one statement for many rows
/// (a round of deposits, docs/decisions/grouped-deposit-rounds.md), each row's columns from
/// `computed` when it gives one, else from the row, where they must be set. Rows are inserted,
/// and their expressions evaluated, in the order given.
pub(crate) fn insert_rows<'a, A: sea_orm::ActiveModelTrait + 'a>(
    rows: impl IntoIterator<Item = &'a A>,
    computed: impl Fn(&<A::Entity as sea_orm::EntityTrait>::Column) -> Option<sea_orm::sea_query::Expr>,
) -> Result<sea_orm::sea_query::InsertStatement, DbErr> {
    use sea_orm::Iterable;
    use sea_orm::sea_query::Expr;
    type Col<A> = <<A as sea_orm::ActiveModelTrait>::Entity as sea_orm::EntityTrait>::Column;
    let mut insert = sea_orm::sea_query::Query::insert();
    insert
        .into_table(A::Entity::default())
        .columns(Col::<A>::iter());
    for row in rows {
        let exprs = Col::<A>::iter()
            .map(|col| match computed(&col) {
                Some(expr) => Ok(expr),
                None => column_value(row, col).map(Expr::val),
            })
            .collect::<Result<Vec<_>, DbErr>>()?;
        insert.values(exprs).map_err(|e| {
            DbErr::Custom(format!(
                "{}: {e}",
                sea_orm::EntityName::table_name(&A::Entity::default())
            ))
        })?;
    }
    Ok(insert)
}

/// The `SELECT` of an `INSERT … SELECT … ON CONFLICT`: from `only_with` too when given (the
/// insert then writes only when that table of the same `WITH` has a row), and ended by a WHERE,
/// since SQLite reads `ON CONFLICT` after a bare `SELECT … FROM …` as a join clause.
pub(crate) fn upsert_values(
    mut values: sea_orm::sea_query::SelectStatement,
    only_with: Option<&str>,
) -> sea_orm::sea_query::SelectStatement {
    if let Some(table) = only_with {
        values.from(sea_orm::sea_query::Alias::new(table));
    }
    values.and_where(sea_orm::sea_query::Expr::cust("1 = 1"));
    values
}

/// `WITH <parts> <query>`, built in place: sea-query's `WithClause::query` returns a deep copy
/// of the whole statement (`WithQuery::new()…query(q).to_owned()`), which was a tenth of the api's
/// CPU per creation (docs/benchmarks.md: cloning, then dropping, every part of the two statements).
pub(crate) fn with_query(
    with: sea_orm::sea_query::WithClause,
    query: impl Into<sea_orm::sea_query::SubQueryStatement>,
) -> sea_orm::sea_query::WithQuery {
    let mut statement = sea_orm::sea_query::WithQuery::new();
    statement.with_clause(with).query(query.into());
    statement
}

/// A part of a `WITH`: `name AS (query)`.
pub(crate) fn cte(
    name: &str,
    query: impl Into<sea_orm::sea_query::SubQueryStatement>,
) -> sea_orm::sea_query::CommonTableExpression {
    let mut cte = sea_orm::sea_query::CommonTableExpression::new();
    cte.query(query.into())
        .table_name(sea_orm::sea_query::Alias::new(name));
    cte
}

/// `column IN (values)` with the values written into the SQL as constants, not bound. A
/// partial index whose predicate names them (`rechecks_one_open`'s `status IN (…)`) serves only a
/// plan that sees those constants: with parameters, the generic plan of a prepared statement
/// cannot use the index, and PostgreSQL plans the statement afresh on every execution instead
/// (docs/benchmarks.md: 0.65 ms of planning per creation). Only for a closed set of our own values.
pub(crate) fn in_constants<C, V>(
    column: C,
    values: impl IntoIterator<Item = V>,
) -> sea_orm::sea_query::Expr
where
    C: sea_orm::ColumnTrait,
    V: Into<sea_orm::Value>,
{
    use sea_orm::sea_query::{Expr, ExprTrait};
    Expr::col(column.as_column_ref()).is_in(values.into_iter().map(|v| Expr::Constant(v.into())))
}

/// `column = (SELECT value)`: a bound value the planner cannot look up in the statistics, in a
/// custom plan as in the generic one, so that a prepared statement's custom plans cost what its
/// generic plan costs and PostgreSQL settles on the generic one. Compared directly, a business
/// the statistics call small (a new one, whose accounts arrived after the last ANALYZE) got
/// custom plans estimated cheaper than the generic one, and its creations' first statement was
/// planned afresh on every call (docs/benchmarks.md: 12,021 plans for 11,989 creations, 0.58 ms
/// each). For an equality on an indexed column the plan is the generic plan's: the value is a
/// parameter to both.
pub(crate) fn eq_opaque<C, V>(column: C, value: V) -> sea_orm::sea_query::Expr
where
    C: sea_orm::ColumnTrait,
    V: Into<sea_orm::Value>,
{
    use sea_orm::sea_query::{Expr, ExprTrait, Query};
    let mut select = Query::select();
    select.expr(Expr::val(value));
    Expr::col(column.as_column_ref()).eq(Expr::SubQuery(None, Box::new(select.into())))
}

/// `EXISTS (SELECT 1 FROM table)`: the table of the same `WITH` has a row (a part that runs
/// only after another wrote something).
pub(crate) fn has_row(table: &str) -> sea_orm::sea_query::Expr {
    use sea_orm::sea_query::{Alias, Expr, Query};
    let mut select = Query::select();
    select.expr(Expr::val(1)).from(Alias::new(table));
    Expr::exists(select)
}

/// Inserts `row` unless a row with the same `key` (a unique key: the one that makes the fact it
/// records happen once) is there already; true when this call inserted it. The row already there
/// is left as it is, and the caller reads it if it needs it.
pub(crate) async fn insert_once<A, C>(
    db: &C,
    row: A,
    key: impl IntoIterator<Item = <A::Entity as sea_orm::EntityTrait>::Column>,
) -> Result<bool, DbErr>
where
    A: sea_orm::ActiveModelTrait,
    C: sea_orm::ConnectionTrait,
{
    use sea_orm::EntityTrait;
    use sea_orm::sea_query::OnConflict;
    let inserted = A::Entity::insert(row)
        .on_conflict(OnConflict::columns(key).do_nothing().to_owned())
        .exec_without_returning(db)
        .await?;
    Ok(inserted == 1)
}

/// True when the error is a unique-constraint violation (a duplicate that the schema refused),
/// told by its SQLSTATE (PostgreSQL 23505; SQLite's extended codes 2067 and 1555) through sea-orm,
/// never by the message text, which a server with another `lc_messages` words differently.
pub fn is_unique_violation(err: &DbErr) -> bool {
    matches!(err.sql_err(), Some(SqlErr::UniqueConstraintViolation(_)))
}

/// The SQLSTATE of `vas_refuse` (m0021): a statement doing a whole unit of work in autocommit
/// declined a case that is not its own, and left nothing written.
const REFUSED: &str = "VAS01";

/// The PostgreSQL database a connection writes to (host, port and name): what a process-wide
/// round or cache is keyed by, as a process may hold several (the tests do).
pub(crate) fn database_of(db: &sea_orm::DatabaseConnection) -> String {
    let options = db.get_postgres_connection_pool().connect_options();
    format!(
        "{}:{}/{}",
        options.get_host(),
        options.get_port(),
        options.get_database().unwrap_or_default()
    )
}

/// A timestamp as PostgreSQL reads it back exactly (microseconds, as `domain::time::now` keeps):
/// a value of a round's JSON parameter (`json_to_recordset`).
pub(crate) fn pg_time(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

/// True when the error is `vas_refuse`'s (see [`REFUSED`]).
pub(crate) fn is_refused(err: &DbErr) -> bool {
    has_sqlstate(err, REFUSED)
}

/// PostgreSQL's SQLSTATE for a statement ended to break a deadlock.
const DEADLOCK: &str = "40P01";

/// True when PostgreSQL ended the statement to break a deadlock (see [`DEADLOCK`]).
pub(crate) fn is_deadlock(err: &DbErr) -> bool {
    has_sqlstate(err, DEADLOCK)
}

fn has_sqlstate(err: &DbErr, code: &str) -> bool {
    use sea_orm::{RuntimeErr, sqlx};
    match err {
        DbErr::Exec(RuntimeErr::SqlxError(e)) | DbErr::Query(RuntimeErr::SqlxError(e)) => {
            matches!(&**e, sqlx::Error::Database(e) if e.code().as_deref() == Some(code))
        }
        _ => false,
    }
}

/// How many times [`retrying_deadlocks`] sends a statement at most.
const DEADLOCK_TRIES: usize = 3;
/// How long [`retrying_deadlocks`] waits before sending a statement again, times the tries so far.
const DEADLOCK_PAUSE: Duration = Duration::from_millis(10);

/// Runs `send`, a statement in autocommit, again while PostgreSQL ends it to break a deadlock.
/// Such a statement left nothing written, so sending it again is sending it for the first time.
/// It is sent again after a pause of a few milliseconds, so that the other side of the cycle,
/// woken by its end, takes the rows it waited for first: sent at once, it could take them again
/// and close the same cycle. For statements that take many rows another statement may take in
/// another order (docs/decisions/outbox-and-relay.md).
pub(crate) async fn retrying_deadlocks<T, F, Fut>(what: &str, mut send: F) -> Result<T, DbErr>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, DbErr>>,
{
    let mut tries = 1;
    loop {
        match send().await {
            Err(e) if is_deadlock(&e) && tries < DEADLOCK_TRIES => {
                tracing::warn!(
                    what,
                    tries,
                    "a statement ended to break a deadlock; sent again"
                );
                tokio::time::sleep(DEADLOCK_PAUSE * tries as u32).await;
                tries += 1;
            }
            done => return done,
        }
    }
}

/// Databases of the PostgreSQL-only tests in this crate (`TEST_DATABASE_URL`).
#[cfg(test)]
pub(crate) mod testing {
    use sea_orm::{
        ConnectOptions, ConnectionTrait, Database, DatabaseConnection, DbBackend, Statement,
    };
    use sea_orm_migration::MigratorTrait;

    /// A migrated database of its own on `TEST_DATABASE_URL`'s server.
    pub struct Fresh {
        pub db: DatabaseConnection,
        admin: DatabaseConnection,
        name: String,
        url: String,
    }

    impl Fresh {
        /// A pool of exactly one connection to this database: what a session-level thing
        /// (a prepared statement's plan counts) is read on. Closed by the caller.
        pub async fn one_connection(&self) -> DatabaseConnection {
            let mut options = ConnectOptions::new(self.url.clone());
            options.max_connections(1).min_connections(1);
            Database::connect(options).await.unwrap()
        }

        pub fn url(&self) -> &str {
            &self.url
        }

        /// Ends, from the server's side, every connection to this database but the admin's.
        pub async fn end_connections(&self) {
            let end = format!(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                 WHERE datname = '{}' AND pid <> pg_backend_pid()",
                self.name
            );
            self.admin.execute_unprepared(&end).await.unwrap();
        }

        pub async fn drop(self) {
            self.db.close().await.unwrap();
            let drop = format!("DROP DATABASE {} WITH (FORCE)", self.name);
            self.admin.execute_unprepared(&drop).await.unwrap();
        }
    }

    /// None without `TEST_DATABASE_URL`.
    pub async fn fresh_database() -> Option<Fresh> {
        fresh_database_at(None).await
    }

    /// [`fresh_database`] with only the first `steps` migrations applied (all with None).
    pub async fn fresh_database_at(steps: Option<u32>) -> Option<Fresh> {
        let admin_url = std::env::var("TEST_DATABASE_URL")
            .ok()
            .filter(|u| !u.is_empty())?;
        let admin = Database::connect(&admin_url).await.unwrap();
        let name = format!("vas_shared_{}", domain::ids::new_id("t").to_lowercase());
        admin
            .execute_unprepared(&format!("CREATE DATABASE {name}"))
            .await
            .unwrap();
        let url = format!("{}/{name}", admin_url.rsplit_once('/').unwrap().0);
        let db = Database::connect(&url).await.unwrap();
        migrations::Migrator::up(&db, steps).await.unwrap();
        Some(Fresh {
            db,
            admin,
            name,
            url,
        })
    }

    /// The one bigint a query returns.
    pub async fn count(db: &DatabaseConnection, sql: &str) -> i64 {
        let row = db
            .query_one_raw(Statement::from_string(DbBackend::Postgres, sql.to_owned()))
            .await
            .unwrap()
            .unwrap();
        row.try_get_by_index(0).unwrap()
    }
}

#[cfg(test)]
mod tests {
    use sea_orm::{ConnectionTrait, Statement, TransactionTrait};

    use super::*;

    /// A duplicate insert, then a NOT NULL violation, in one transaction on `url` (one connection,
    /// so a PostgreSQL temporary table stays visible).
    async fn violations(url: &str) -> (DbErr, DbErr) {
        let db = Database::connect(url).await.unwrap();
        let txn = db.begin().await.unwrap();
        txn.execute_unprepared("CREATE TEMPORARY TABLE dup (k TEXT PRIMARY KEY, v TEXT NOT NULL)")
            .await
            .unwrap();
        txn.execute_unprepared("INSERT INTO dup (k, v) VALUES ('a', 'x')")
            .await
            .unwrap();
        let duplicate = txn
            .execute_unprepared("INSERT INTO dup (k, v) VALUES ('a', 'y')")
            .await
            .unwrap_err();
        txn.rollback().await.unwrap();
        let txn = db.begin().await.unwrap();
        txn.execute_unprepared("CREATE TEMPORARY TABLE dup (k TEXT PRIMARY KEY, v TEXT NOT NULL)")
            .await
            .unwrap();
        let null = txn
            .execute_unprepared("INSERT INTO dup (k, v) VALUES ('b', NULL)")
            .await
            .unwrap_err();
        txn.rollback().await.unwrap();
        (duplicate, null)
    }

    /// A pool pings a connection only after it sat idle ([`PING_IF_IDLE_FOR`]): one the server
    /// ended meanwhile is replaced unseen; one ended within that second fails its query as
    /// unavailable (503, never a 500), and the pool is whole again by the next queries.
    #[tokio::test]
    async fn a_connection_the_server_ended_is_replaced() {
        let Some(fresh) = testing::fresh_database().await else {
            return;
        };
        let pool = connect(fresh.url(), 2).await.unwrap();
        let one = || pool.execute_unprepared("SELECT 1");
        one().await.unwrap();

        fresh.end_connections().await;
        tokio::time::sleep(PING_IF_IDLE_FOR + Duration::from_millis(300)).await;
        one()
            .await
            .expect("an idle connection the server ended is pinged and replaced");

        fresh.end_connections().await;
        let mut failed = 0;
        let answered = loop {
            match one().await {
                Ok(_) => break true,
                Err(e) => {
                    assert!(failover::is_unavailable(&e), "not told unavailable: {e}");
                    failed += 1;
                    if failed > 2 {
                        break false;
                    }
                }
            }
        };
        // At most one failure per connection the pool held (2), then a new connection.
        assert!(answered, "still failing after {failed} queries");
        pool.close().await.unwrap();
        fresh.drop().await;
    }

    /// Forwards connections to `target` (host:port) and counts the `Sync` messages clients send
    /// (sqlx's ping is a bare `Sync`; a simple query sends none). Returns the proxy's port.
    async fn counting_syncs(
        target: String,
    ) -> (u16, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicUsize, Ordering};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let syncs = Arc::new(AtomicUsize::new(0));
        let counted = syncs.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let server = tokio::net::TcpStream::connect(&target).await.unwrap();
                let (mut from_client, mut to_client) = client.into_split();
                let (mut from_server, mut to_server) = server.into_split();
                tokio::spawn(
                    async move { tokio::io::copy(&mut from_server, &mut to_client).await },
                );
                let counted = counted.clone();
                tokio::spawn(async move {
                    // The startup message has no type byte; every later one is a type byte and
                    // a length that counts itself.
                    let (mut pending, mut started) = (Vec::new(), false);
                    let mut chunk = [0u8; 8192];
                    while let Ok(n) = from_client.read(&mut chunk).await {
                        if n == 0 || to_server.write_all(&chunk[..n]).await.is_err() {
                            return;
                        }
                        pending.extend_from_slice(&chunk[..n]);
                        loop {
                            let skip = usize::from(started);
                            let Some(len) = pending.get(skip..skip + 4) else {
                                break;
                            };
                            let whole = skip + u32::from_be_bytes(len.try_into().unwrap()) as usize;
                            if pending.len() < whole {
                                break;
                            }
                            if started && pending[0] == b'S' {
                                counted.fetch_add(1, Ordering::Relaxed);
                            }
                            pending.drain(..whole);
                            started = true;
                        }
                    }
                });
            }
        });
        (port, syncs)
    }

    /// A busy pool sends its statement and nothing around it: sqlx's ping on every acquire is
    /// off, and its ping on every release is skipped for a connection that has just answered
    /// (vendor/README.md); each was a round trip per statement beside the statement's own.
    #[tokio::test]
    async fn a_busy_connection_is_not_pinged_before_or_after_use() {
        use sea_orm::Statement;
        use std::sync::atomic::Ordering;
        let Some(fresh) = testing::fresh_database().await else {
            return;
        };
        let url = url::Url::parse(fresh.url()).unwrap();
        let target = format!("{}:{}", url.host_str().unwrap(), url.port().unwrap_or(5432));
        let (port, syncs) = counting_syncs(target).await;
        let mut proxied = url.clone();
        proxied.set_host(Some("127.0.0.1")).unwrap();
        proxied.set_port(Some(port)).unwrap();
        proxied.set_query(Some("sslmode=disable"));
        let pool = connect(proxied.as_str(), 2).await.unwrap();
        pool.execute_unprepared("SELECT 1").await.unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        let before = syncs.load(Ordering::Relaxed);
        for _ in 0..10 {
            pool.execute_unprepared("SELECT 1").await.unwrap();
        }
        // A release's ping would be on its way: give it the time to arrive.
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(
            syncs.load(Ordering::Relaxed) - before,
            0,
            "ten simple queries send no Sync: a Sync here is a ping"
        );
        for n in 0..10i64 {
            let statement = Statement::from_sql_and_values(
                DbBackend::Postgres,
                "SELECT $1::bigint",
                [n.into()],
            );
            pool.query_one_raw(statement).await.unwrap();
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        // Each statement's own Sync, and one more where a connection first prepares it (at most
        // one per pooled connection); a ping beside each statement would make it 20 or more.
        let prepared = syncs.load(Ordering::Relaxed) - before;
        assert!(
            (10..=12).contains(&prepared),
            "{prepared} Syncs for ten prepared statements on two connections"
        );
        pool.close().await.unwrap();
        fresh.drop().await;
    }

    /// A statement PostgreSQL ends to break a deadlock is sent again and then does its work; the
    /// other side of the cycle goes on. The cycle is made on purpose: the statement (in a
    /// function) locks `b`, sleeps, then wants `a`, while a transaction holding `a` wants `b`. The
    /// statement's session waits 50 ms before it looks for a deadlock and the transaction's 10 s,
    /// so the statement's is the one ended.
    #[tokio::test]
    async fn a_statement_ended_by_a_deadlock_is_sent_again() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let Some(fresh) = testing::fresh_database().await else {
            return;
        };
        fresh
            .db
            .execute_unprepared(
                "CREATE TABLE pair (id TEXT PRIMARY KEY, n INT NOT NULL); \
                 INSERT INTO pair VALUES ('a', 0), ('b', 0); \
                 CREATE FUNCTION b_then_a() RETURNS int LANGUAGE plpgsql AS $$ BEGIN \
                   PERFORM set_config('deadlock_timeout', '50ms', true); \
                   UPDATE pair SET n = n + 1 WHERE id = 'b'; \
                   PERFORM pg_sleep(1); \
                   UPDATE pair SET n = n + 1 WHERE id = 'a'; \
                   RETURN 1; END $$",
            )
            .await
            .unwrap();
        let other = fresh.db.begin().await.unwrap();
        other
            .execute_unprepared(
                "SET LOCAL deadlock_timeout = '10s'; UPDATE pair SET n = n + 10 WHERE id = 'a'",
            )
            .await
            .unwrap();
        let sent = std::sync::Arc::new(AtomicUsize::new(0));
        let statement = {
            let (db, sent) = (fresh.db.clone(), sent.clone());
            tokio::spawn(async move {
                retrying_deadlocks("the test's statement", || {
                    sent.fetch_add(1, Ordering::SeqCst);
                    db.execute_unprepared("SELECT b_then_a()")
                })
                .await
            })
        };
        // Once the statement holds `b` (it sleeps with it), the transaction asks for `b`: within
        // the second the statement sleeps, so that the statement is the later to wait and its
        // 50 ms find the cycle.
        let asleep = "SELECT count(*) FROM pg_stat_activity \
                      WHERE query = 'SELECT b_then_a()' AND wait_event = 'PgSleep'";
        for _ in 0..200 {
            if testing::count(&fresh.db, asleep).await == 1 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        other
            .execute_unprepared("UPDATE pair SET n = n + 10 WHERE id = 'b'")
            .await
            .unwrap();
        other.commit().await.unwrap();
        statement.await.unwrap().unwrap();
        // Ended to break the deadlock, then sent again; on a loaded machine the other side may
        // still be slower than the pause, and the same cycle is broken once more.
        let sent = sent.load(Ordering::SeqCst);
        assert!(
            (2..=DEADLOCK_TRIES).contains(&sent),
            "ended to break the deadlock, then sent again: sent {sent} times"
        );
        // Both sides' work, once each: the first try left nothing.
        assert_eq!(
            testing::count(&fresh.db, "SELECT sum(n)::bigint FROM pair").await,
            22
        );
        fresh.drop().await;
    }

    #[tokio::test]
    async fn a_database_url_that_cannot_be_used_is_refused_without_repeating_it() {
        for url in [
            "host=db port=5432 user=vas password=s3cret",
            "mysql://vas:s3cret@db/vas",
        ] {
            let error = connect(url, 1).await.unwrap_err().to_string();
            assert!(!error.contains("s3cret"), "{error}");
            assert!(error.contains("neither postgres://"), "{error}");
        }
    }

    /// PostgreSQL no longer checks the hot paths' foreign keys
    /// (docs/decisions/hot-path-foreign-keys.md): every one of them is gone after m0031 (and
    /// there before it), an orphan is written there and `test_support::store::orphans`, which
    /// the write paths' tests end on, counts it; SQLite still refuses it.
    #[tokio::test]
    async fn an_orphan_is_counted_on_postgres_and_refused_on_sqlite() {
        use sea_orm_migration::MigratorTrait;
        let orphan = "INSERT INTO events (id, business_id, mode, type, data, created_at) \
                      VALUES ('evt_orphan', 'biz_nobody', 'test', 'deposit.received', '{}', \
                      CURRENT_TIMESTAMP)";
        let sqlite = connect("sqlite::memory:", 1).await.unwrap();
        migrations::Migrator::up(&sqlite, None).await.unwrap();
        let refused = sqlite.execute_unprepared(orphan).await.unwrap_err();
        assert!(refused.to_string().contains("FOREIGN KEY"), "{refused}");

        // Foreign keys on each (table, column) of the list, by catalog rather than by name.
        let foreign_keys = async |db: &DatabaseConnection| {
            let mut found = 0;
            for (table, column, _) in migrations::UNCHECKED_PARENTS {
                found += testing::count(
                    db,
                    &format!(
                        "SELECT count(*) FROM pg_constraint c JOIN pg_attribute a \
                         ON a.attrelid = c.conrelid AND a.attnum = ANY(c.conkey) \
                         WHERE c.contype = 'f' AND c.conrelid = '{table}'::regclass \
                         AND a.attname = '{column}'"
                    ),
                )
                .await;
            }
            found
        };
        let before_m0031 = migrations::Migrator::migrations()
            .iter()
            .position(|m| m.name() == "m0031_hot_path_foreign_keys")
            .expect("m0031 is a migration") as u32;
        let Some(before) = testing::fresh_database_at(Some(before_m0031)).await else {
            return;
        };
        assert_eq!(foreign_keys(&before.db).await, 6, "checked before m0031");
        before.drop().await;

        let fresh = testing::fresh_database().await.expect("TEST_DATABASE_URL");
        assert_eq!(foreign_keys(&fresh.db).await, 0, "none checked after it");
        assert_eq!(test_support::store::orphans(&fresh.db).await, 0);
        fresh.db.execute_unprepared(orphan).await.unwrap();
        assert_eq!(test_support::store::orphans(&fresh.db).await, 1);
        fresh.drop().await;
    }

    /// m0032 splits each counts trigger in two, the insert's skipping a transaction that counts
    /// its own inserts (docs/decisions/grouped-deposit-rounds.md); its `down` puts m0017's and
    /// m0028's triggers back.
    #[tokio::test]
    async fn the_counts_triggers_split_for_a_caller_that_counts_and_back() {
        use sea_orm_migration::MigratorTrait;
        let Some(fresh) = testing::fresh_database().await else {
            return;
        };
        let db = &fresh.db;
        let triggers = async |suffix: &str| {
            testing::count(
                db,
                &format!(
                    "SELECT count(*) FROM pg_trigger WHERE tgname ~ '_counted_{suffix}$' \
                     AND pg_get_triggerdef(oid) ~ 'vas.counted_by'"
                ),
            )
            .await
        };
        let all = async |suffix: &str| {
            testing::count(
                db,
                &format!("SELECT count(*) FROM pg_trigger WHERE tgname ~ '_counted_{suffix}$'"),
            )
            .await
        };
        let function = "SELECT count(*) FROM pg_proc WHERE proname = 'vas_count_inserted'";
        // Deposits, events, payouts and ledger entries' totals; deposits, deliveries and
        // payouts' day figures.
        assert_eq!((triggers("insert").await, all("delete").await), (7, 7));
        assert_eq!(
            (all("write").await, testing::count(db, function).await),
            (0, 1)
        );
        down_through(db, "m0032_counted_by_caller").await;
        assert_eq!((all("insert").await, all("delete").await), (0, 0));
        assert_eq!(
            (all("write").await, testing::count(db, function).await),
            (7, 0)
        );
        migrations::Migrator::up(db, None).await.unwrap();
        assert_eq!((triggers("insert").await, all("delete").await), (7, 7));
        fresh.drop().await;
    }

    /// Reverts the migration `name` and every one after it: a test names the migration it
    /// undoes, whatever comes after.
    async fn down_through(db: &DatabaseConnection, name: &str) {
        use sea_orm_migration::MigratorTrait;
        let all = migrations::Migrator::migrations();
        let at = all
            .iter()
            .position(|m| m.name() == name)
            .unwrap_or_else(|| panic!("no migration {name}"));
        let steps = u32::try_from(all.len() - at).unwrap();
        migrations::Migrator::down(db, Some(steps)).await.unwrap();
    }

    /// The tables `vas_count_inserted` reads scanned whole during one call of it on a new
    /// connection (`pg_stat_xact_user_tables` counts what the connection did since it last sent
    /// its statistics, so an older connection's earlier statements would count too).
    async fn whole_scans_of_a_count(fresh: &testing::Fresh) -> i64 {
        let db = fresh.one_connection().await;
        let txn = db.begin().await.unwrap();
        let mark = format!("SELECT {}", migrations::counted_by_caller::mark());
        txn.execute_unprepared(&mark).await.unwrap();
        let ids = r#"{"deposits": ["dep_x"], "events": ["evt_x"], "payouts": ["po_x"],
            "ledger_entries": ["le_x"], "deliveries": ["del_x"]}"#;
        txn.execute_raw(Statement::from_sql_and_values(
            DbBackend::Postgres,
            migrations::counted_by_caller::COUNT_INSERTED,
            [ids.into()],
        ))
        .await
        .unwrap();
        let scans = txn
            .query_one_raw(Statement::from_string(
                DbBackend::Postgres,
                "SELECT coalesce(sum(seq_scan), 0)::bigint FROM pg_stat_xact_user_tables \
                 WHERE relname IN ('deposits', 'events', 'payouts', 'ledger_entries', 'deliveries')",
            ))
            .await
            .unwrap()
            .unwrap()
            .try_get_by_index::<i64>(0)
            .unwrap();
        txn.rollback().await.unwrap();
        db.close().await.unwrap();
        scans
    }

    /// A round's count finds its rows by key even planned on tables too small for an index to
    /// look worth it (a new database): such a plan is kept per connection as the tables grow
    /// (docs/benchmarks.md, "A round's count by key").
    #[tokio::test]
    async fn a_rounds_count_reads_its_rows_by_key_on_small_tables_too() {
        use sea_orm_migration::MigratorTrait;
        let Some(fresh) = testing::fresh_database().await else {
            return;
        };
        assert_eq!(whole_scans_of_a_count(&fresh).await, 0);
        // Without the setting the same call reads the small tables whole: the check can fail.
        down_through(&fresh.db, "m0033_counted_by_key").await;
        assert!(whole_scans_of_a_count(&fresh).await > 0);
        migrations::Migrator::up(&fresh.db, None).await.unwrap();
        assert_eq!(whole_scans_of_a_count(&fresh).await, 0);
        fresh.drop().await;
    }

    #[tokio::test]
    async fn unique_violations_are_told_by_their_code_not_their_wording() {
        let mut urls = vec!["sqlite::memory:".to_owned()];
        urls.extend(
            std::env::var("TEST_DATABASE_URL")
                .ok()
                .filter(|u| !u.is_empty()),
        );
        for url in &urls {
            let (duplicate, null) = violations(url).await;
            assert!(is_unique_violation(&duplicate), "{url}: {duplicate}");
            assert!(!is_unique_violation(&null), "{url}: {null}");
        }
        // The English words alone are not a unique violation (a server set to another language
        // words a real one differently; its code is what counts).
        for text in [
            "duplicate key value violates unique constraint \"dup_pkey\"",
            "UNIQUE constraint failed: dup.k",
        ] {
            assert!(!is_unique_violation(&DbErr::Custom(text.into())), "{text}");
        }
    }
}

#[cfg(test)]
mod rendered_tests {
    //! [`Rendered`] alone: what it sends, and that a list differing from the builders' is caught.
    use super::Rendered;
    use sea_orm::{DbBackend, Statement, Value};

    fn select(value: i32) -> Statement {
        Statement::from_sql_and_values(DbBackend::Postgres, "SELECT $1", [Value::from(value)])
    }

    #[test]
    fn a_kept_shape_is_sent_with_each_calls_own_values() {
        let rendered = Rendered::<u8>::new();
        let first = rendered
            .statement(0, vec![1.into()], || Ok(select(1)))
            .unwrap();
        assert_eq!(first, select(1));
        let second = rendered
            .statement(0, vec![2.into()], || Ok(select(2)))
            .unwrap();
        assert_eq!(second, select(2), "the kept text, with this call's values");
        assert_eq!(rendered.shapes.read().unwrap().len(), 1);
    }

    #[test]
    #[should_panic(expected = "hand-listed values differ from the builders'")]
    fn a_list_that_differs_from_the_builders_fails_in_tests() {
        let rendered = Rendered::<u8>::new();
        let _ = rendered.statement(0, vec![2.into()], || Ok(select(1)));
    }

    #[test]
    #[should_panic(expected = "a shape rendered two texts")]
    fn a_shape_whose_text_changes_fails_in_tests() {
        let rendered = Rendered::<u8>::new();
        rendered
            .statement(0, vec![1.into()], || Ok(select(1)))
            .unwrap();
        let _ = rendered.statement(0, vec![1.into()], || {
            Ok(Statement::from_sql_and_values(
                DbBackend::Postgres,
                "SELECT $1 + 0",
                [Value::from(1)],
            ))
        });
    }
}
