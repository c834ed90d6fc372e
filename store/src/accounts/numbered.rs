//! Accounts that hold a number, as last read, so that a deposit into one does not read it again
//! (docs/decisions/one-statement-paths.md, "An account as last read").
//!
//! Once an account holds a number, its number, bank, mode and business never change. What can
//! change (its status, and anything else, each change moving its `updated_at`) the deposit's
//! statement checks as it locks the row: an entry read before a change makes the statement write
//! nothing, the deposit takes the transaction path, which reads the row, and the entry is
//! forgotten. An entry therefore saves a round trip and never changes an answer. PostgreSQL only:
//! SQLite's deposits read the account in their transaction, as before.

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use domain::ids::AccountId;
use domain::{Bank, Mode};
use moka::sync::Cache;
use sea_orm::{DatabaseConnection, DbBackend};

use super::Account;

/// Entries at most. An account is kept under two (its number and its id) sharing one copy of
/// about half a KiB: 4,096 accounts, a few MiB, whoever deposits.
const MOST: u64 = 8_192;
/// An entry unused this long is let go.
const IDLE: Duration = Duration::from_secs(600);

/// How an account is looked for, in the database ([`crate::database_of`]) it was read from.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Key {
    /// A bank's notification names the number.
    Number {
        database: String,
        mode: Mode,
        bank: Bank,
        number: String,
    },
    /// A caller names the id (`simulate-deposit`).
    Id { database: String, id: AccountId },
}

static ACCOUNTS: LazyLock<Cache<Key, Arc<Account>>> = LazyLock::new(|| {
    Cache::builder()
        .max_capacity(MOST)
        .time_to_idle(IDLE)
        .build()
});

/// The database `db` writes to, when its deposits check the account they lock (PostgreSQL).
fn database(db: &DatabaseConnection) -> Option<String> {
    (db.get_database_backend() == DbBackend::Postgres).then(|| crate::database_of(db))
}

fn by_number(database: String, mode: Mode, bank: Bank, number: &str) -> Key {
    Key::Number {
        database,
        mode,
        bank,
        number: number.to_owned(),
    }
}

/// The account of `mode` and `bank` numbered `number`, as last read.
pub(crate) fn with_number(
    db: &DatabaseConnection,
    mode: Mode,
    bank: Bank,
    number: &str,
) -> Option<Arc<Account>> {
    ACCOUNTS.get(&by_number(database(db)?, mode, bank, number))
}

/// The account `id`, as last read.
pub(crate) fn with_id(db: &DatabaseConnection, id: &AccountId) -> Option<Arc<Account>> {
    let id = id.clone();
    ACCOUNTS.get(&Key::Id {
        database: database(db)?,
        id,
    })
}

/// Keeps `account` as just read, if it holds a number.
pub(crate) fn keep(db: &DatabaseConnection, account: &Account) {
    let (Some(database), Some(number)) = (database(db), account.account_number.as_deref()) else {
        return;
    };
    let account = Arc::new(account.clone());
    ACCOUNTS.insert(
        by_number(database.clone(), account.mode, account.bank, number),
        Arc::clone(&account),
    );
    let id = account.id.clone();
    ACCOUNTS.insert(Key::Id { database, id }, account);
}

/// Lets go of `account`: a statement found it changed (or refused its deposit for another
/// reason), so the next deposit into it reads it again.
pub(crate) fn forget(db: &DatabaseConnection, account: &Account) {
    let Some(database) = database(db) else {
        return;
    };
    if let Some(number) = account.account_number.as_deref() {
        ACCOUNTS.invalidate(&by_number(
            database.clone(),
            account.mode,
            account.bank,
            number,
        ));
    }
    let id = account.id.clone();
    ACCOUNTS.invalidate(&Key::Id { database, id });
}
