//! The rows kept beside each account (m0022, docs/decisions/one-statement-paths.md): its state in
//! `account_states`, its number in `account_numbers`, and the generated `live_reference`, on both
//! databases: filled for accounts written before the migration, and kept by the database's triggers
//! afterwards, whoever writes the account.

use domain::ids::BusinessId;
use sea_orm::{
    ConnectOptions, ConnectionTrait, Database, DatabaseConnection, DbErr, Statement, Value,
};
use sea_orm_migration::MigratorTrait;

use crate::is_unique_violation;
use crate::testing::{Fresh, fresh_database_at};
use crypto::Cipher;
use domain::KybStatus;

/// The migrations before m0022.
fn steps_before_side_rows() -> u32 {
    migrations::Migrator::migrations()
        .iter()
        .position(|m| m.name() == "m0022_hot_activation")
        .expect("m0022 is a migration") as u32
}

/// An in-memory SQLite database (one connection: each would be a database of its own), and
/// PostgreSQL's when `TEST_DATABASE_URL` is set, each migrated up to `steps`.
async fn databases(steps: Option<u32>) -> Vec<(DatabaseConnection, Option<Fresh>)> {
    let mut options = ConnectOptions::new("sqlite::memory:");
    options.max_connections(1).min_connections(1);
    let sqlite = Database::connect(options).await.unwrap();
    migrations::Migrator::up(&sqlite, steps).await.unwrap();
    let mut out = vec![(sqlite, None)];
    if let Some(fresh) = fresh_database_at(steps).await {
        out.push((fresh.db.clone(), Some(fresh)));
    }
    out
}

async fn business(db: &DatabaseConnection) -> BusinessId {
    let cipher = Cipher::new(&Cipher::generate_key(), &[]).unwrap();
    crate::businesses::create(db, &cipher, "One Ltd", KybStatus::Approved)
        .await
        .unwrap()
        .id
}

/// Writes an account as no service code does (the triggers must not depend on who writes).
async fn insert(
    db: &DatabaseConnection,
    business: &str,
    id: &str,
    status: &str,
    number: Option<&str>,
    reference: Option<&str>,
) -> Result<(), DbErr> {
    let text = |v: Option<&str>| v.map_or("NULL".to_owned(), |v| format!("'{v}'"));
    db.execute_unprepared(&format!(
        "INSERT INTO virtual_accounts (id, business_id, mode, status, bank, account_number, \
         account_name, customer_name, customer_email, customer_phone, customer_reference, \
         identity_type, identity_enc, created_at, updated_at) VALUES ('{id}', '{business}', \
         'test', '{status}', 'wema-bank', {}, 'One Ltd/Ada', 'Ada', 'ada@example.com', \
         '+2348031234567', {}, 'bvn', 'x', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z')",
        text(number),
        text(reference),
    ))
    .await
    .map(|_| ())
}

/// Each account's state, number and live reference as the rows beside it say, by account id.
async fn beside(db: &DatabaseConnection) -> Vec<(String, String, Option<String>, Option<String>)> {
    let rows = db
        .query_all_raw(Statement::from_string(
            db.get_database_backend(),
            "SELECT v.id, s.status, n.account_number, v.live_reference FROM virtual_accounts v \
             JOIN account_states s ON s.account_id = v.id AND s.business_id = v.business_id \
               AND s.mode = v.mode AND s.created_at = v.created_at \
             LEFT JOIN account_numbers n ON n.account_id = v.id AND n.mode = v.mode \
               AND n.bank = v.bank AND n.business_id = v.business_id \
             ORDER BY v.id",
        ))
        .await
        .unwrap();
    rows.iter()
        .map(|r| {
            (
                r.try_get_by_index(0).unwrap(),
                r.try_get_by_index(1).unwrap(),
                r.try_get_by_index(2).unwrap(),
                r.try_get_by_index(3).unwrap(),
            )
        })
        .collect()
}

fn row(
    id: &str,
    status: &str,
    number: Option<&str>,
    live: Option<&str>,
) -> (String, String, Option<String>, Option<String>) {
    (
        id.into(),
        status.into(),
        number.map(Into::into),
        live.map(Into::into),
    )
}

/// A business with one pending account, `va_1` with reference `r1`, checked beside it; the
/// business's id.
async fn first_account(db: &DatabaseConnection) -> BusinessId {
    let business = business(db).await;
    insert(db, &business, "va_1", "pending", None, Some("r1"))
        .await
        .unwrap();
    assert_eq!(beside(db).await, [row("va_1", "pending", None, Some("r1"))]);
    business
}

async fn set(db: &DatabaseConnection, id: &str, assignments: &str) -> Result<u64, DbErr> {
    db.execute_raw(Statement::from_sql_and_values(
        db.get_database_backend(),
        format!("UPDATE virtual_accounts SET {assignments} WHERE id = 'va_{id}'"),
        Vec::<Value>::new(),
    ))
    .await
    .map(|r| r.rows_affected())
}

#[tokio::test]
async fn migrating_fills_the_rows_beside_the_accounts_already_there() {
    for (db, fresh) in databases(Some(steps_before_side_rows())).await {
        let business = business(&db).await;
        insert(
            &db,
            &business,
            "va_1",
            "active",
            Some("9900000001"),
            Some("r1"),
        )
        .await
        .unwrap();
        insert(&db, &business, "va_2", "pending", None, Some("r2"))
            .await
            .unwrap();
        insert(
            &db,
            &business,
            "va_3",
            "deactivated",
            Some("9900000003"),
            Some("r2"),
        )
        .await
        .unwrap();
        insert(&db, &business, "va_4", "failed", None, None)
            .await
            .unwrap();
        migrations::Migrator::up(&db, None).await.unwrap();
        assert_eq!(
            beside(&db).await,
            [
                row("va_1", "active", Some("9900000001"), Some("r1")),
                row("va_2", "pending", None, Some("r2")),
                row("va_3", "deactivated", Some("9900000003"), None),
                row("va_4", "failed", None, None),
            ],
            "{:?}",
            db.get_database_backend()
        );
        if let Some(fresh) = fresh {
            fresh.drop().await;
        }
    }
}

#[tokio::test]
async fn the_rows_beside_an_account_follow_it_whoever_writes_it() {
    for (db, fresh) in databases(None).await {
        let backend = db.get_database_backend();
        let business = first_account(&db).await;

        // Activation: the state follows and the number is registered.
        set(&db, "1", "status = 'active', account_number = '9900000001'")
            .await
            .unwrap();
        assert_eq!(
            beside(&db).await,
            [row("va_1", "active", Some("9900000001"), Some("r1"))]
        );

        // A second live account with the reference, or another account with the number (same
        // mode and bank): unique violations, as the service's writers recognise them.
        let twice = insert(&db, &business, "va_2", "pending", None, Some("r1"))
            .await
            .unwrap_err();
        assert!(is_unique_violation(&twice), "{backend:?}: {twice}");
        insert(&db, &business, "va_2", "pending", None, Some("r2"))
            .await
            .unwrap();
        let held = set(&db, "2", "status = 'active', account_number = '9900000001'")
            .await
            .unwrap_err();
        assert!(is_unique_violation(&held), "{backend:?}: {held}");

        // A number is never changed or taken away once written.
        for change in ["account_number = '9900000009'", "account_number = NULL"] {
            let refused = set(&db, "1", change).await.unwrap_err();
            assert!(
                refused.to_string().contains("never changed"),
                "{backend:?}: {refused}"
            );
        }

        // Deactivation frees the reference for a new live account; the number stays held.
        set(&db, "1", "status = 'deactivated'").await.unwrap();
        insert(&db, &business, "va_3", "pending", None, Some("r1"))
            .await
            .unwrap();
        assert_eq!(
            beside(&db).await,
            [
                row("va_1", "deactivated", Some("9900000001"), None),
                row("va_2", "pending", None, Some("r2")),
                row("va_3", "pending", None, Some("r1")),
            ],
            "{backend:?}"
        );
        if let Some(fresh) = fresh {
            fresh.drop().await;
        }
    }
}

#[tokio::test]
async fn a_migration_that_fails_half_way_leaves_nothing_behind() {
    for (db, fresh) in databases(Some(steps_before_side_rows())).await {
        let backend = db.get_database_backend();
        // A table in the way of the migration's second table: it fails after its first steps.
        db.execute_unprepared("CREATE TABLE account_numbers (x integer)")
            .await
            .unwrap();
        migrations::Migrator::up(&db, None)
            .await
            .expect_err("the table in the way");
        for undone in [
            "SELECT live_reference FROM virtual_accounts",
            "SELECT count(*) FROM account_states",
        ] {
            assert!(
                db.execute_unprepared(undone).await.is_err(),
                "{backend:?}: {undone} should find nothing of the failed migration"
            );
        }
        // Out of the way, it runs whole.
        db.execute_unprepared("DROP TABLE account_numbers")
            .await
            .unwrap();
        migrations::Migrator::up(&db, None).await.unwrap();
        first_account(&db).await;
        if let Some(fresh) = fresh {
            fresh.drop().await;
        }
    }
}
