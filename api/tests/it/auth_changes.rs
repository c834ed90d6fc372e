//! A key or KYB change made by any process is honoured by every api process within a second,
//! however long their authentication caches keep keys (docs/decisions/auth-cache.md): `api admin`
//! beside running apis, on PostgreSQL (each api listens for the change) and SQLite (`api dev`'s
//! database).

use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use domain::Mode;
use domain::keys::KeyGrace;
use entities::api_key;
use reqwest::StatusCode;
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, ConnectionTrait, DbBackend, EntityTrait, QueryFilter, Statement};
use store::changes::APPLICATION_NAME;
use store::keys::{self, KeyAction, KeyChange};
use test_support::http::free_port;
use test_support::process::wait_healthy;
use test_support::stack::Stack;
use test_support::{Backend, TestApp, spawn_app_with};

test_support::on_both_databases!(an_admin_revoke_and_kyb_approval_are_honoured_within_a_second);

/// Far longer than any wait here: what a key answers after a change is the change heard, never
/// an entry that expired.
const CACHE_SECS: &str = "600";

const WITHIN: Duration = Duration::from_secs(1);

async fn status(client: &reqwest::Client, base: &str, key: &str) -> StatusCode {
    client
        .get(format!("{base}/v1/virtual-accounts"))
        .bearer_auth(key)
        .send()
        .await
        .expect("request sent")
        .status()
}

/// How long after now `key` first answers `expected` at `base`, asking without pause; panics
/// past [`WITHIN`].
async fn time_until(
    client: &reqwest::Client,
    base: &str,
    key: &str,
    expected: StatusCode,
) -> Duration {
    let started = Instant::now();
    loop {
        let seen = status(client, base, key).await;
        if seen == expected {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < WITHIN,
            "{base} still answers {seen} (not {expected}) {:?} after the change",
            started.elapsed()
        );
    }
}

/// Runs `command` (an operator's `api admin …`) to completion off the runtime.
async fn run_ok(mut command: Command) -> Output {
    tokio::task::spawn_blocking(move || test_support::process::run_ok(&mut command))
        .await
        .unwrap()
}

fn admin(app: &TestApp, args: &[&str]) -> Command {
    let mut command = test_support::process::clean_command(test_support::process::api_binary());
    command
        .env("VAS_DATABASE__URL", &app.test_db.url)
        .arg("admin")
        .args(args);
    command
}

async fn an_admin_revoke_and_kyb_approval_are_honoured_within_a_second(backend: Backend) {
    let app = spawn_app_with(backend, |c| {
        c.http.auth_cache_secs = CACHE_SECS.parse().unwrap()
    })
    .await;
    let id = app.business.id.clone();
    let (test_key, live_key) = (app.test_key().to_owned(), app.live_key().to_owned());
    let client = &app.client;
    // Give the api time to start following changes, then cache both keys as they are.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(status(client, &app.base, &test_key).await, StatusCode::OK);
    assert_eq!(
        status(client, &app.base, &live_key).await,
        StatusCode::FORBIDDEN,
        "KYB pending"
    );

    run_ok(admin(&app, &["key", "revoke", &id, "--mode", "test"])).await;
    time_until(client, &app.base, &test_key, StatusCode::UNAUTHORIZED).await;

    run_ok(admin(&app, &["business", "approve-kyb", &id])).await;
    time_until(client, &app.base, &live_key, StatusCode::OK).await;
}

/// What one stream of requests saw: when each answer came, relative to a reference instant.
struct Answers(Vec<(Instant, StatusCode)>);

/// Sends requests with `key` to `base` one after another until `stop`.
fn stream(base: String, key: String, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<Answers> {
    tokio::spawn(async move {
        let client = reqwest::Client::new();
        let mut answers = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            let seen = status(&client, &base, &key).await;
            answers.push((Instant::now(), seen));
        }
        Answers(answers)
    })
}

/// Two `api serve` processes and a stream of requests through each; `api admin key revoke`:
/// a second after the command returns, neither serves the key; `api admin business
/// approve-kyb`: within a second both serve the live key.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_api_processes_honour_an_admin_revoke_and_a_kyb_approval_within_a_second() {
    let Some(stack) = Stack::new(
        test_support::process::api_binary(),
        &[("VAS_HTTP__AUTH_CACHE_SECS", CACHE_SECS)],
    )
    .await
    else {
        return;
    };
    let other = format!("127.0.0.1:{}", free_port());
    let _first = stack.start("api", &["serve"]);
    let _second = stack.start_with("api", &["serve"], &[("VAS_HTTP__BIND", &other)]);
    let bases = [stack.base.clone(), format!("http://{other}")];
    let client = reqwest::Client::new();
    for base in &bases {
        wait_healthy(&client, &format!("{base}/readyz")).await;
    }
    let id = stack.business_id().to_owned();
    let live_key = stack.business["live"]["secretKey"]
        .as_str()
        .unwrap()
        .to_owned();
    for base in &bases {
        assert_eq!(
            status(&client, base, &live_key).await,
            StatusCode::FORBIDDEN
        );
    }

    let stop = Arc::new(AtomicBool::new(false));
    let streams: Vec<_> = bases
        .iter()
        .map(|base| stream(base.clone(), stack.key.clone(), stop.clone()))
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let revoke = ["admin", "key", "revoke", &id, "--mode", "test"];
    let revoked = tokio::task::block_in_place(|| stack.run_ok("api", &revoke));
    let returned = Instant::now();
    assert!(String::from_utf8_lossy(&revoked.stdout).contains("\"revokedKeys\": 1"));
    tokio::time::sleep(WITHIN + Duration::from_millis(1000)).await;
    stop.store(true, Ordering::Relaxed);
    for (base, stream) in bases.iter().zip(streams) {
        let Answers(answers) = stream.await.unwrap();
        let served_before = answers
            .iter()
            .filter(|(at, s)| *at < returned && *s == StatusCode::OK)
            .count();
        assert!(served_before > 0, "{base} served the key before the revoke");
        let last_served = answers
            .iter()
            .filter(|(_, s)| *s == StatusCode::OK)
            .map(|(at, _)| *at)
            .max()
            .expect("served");
        let late = answers
            .iter()
            .filter(|(at, s)| *at > returned + WITHIN && *s == StatusCode::OK)
            .count();
        assert_eq!(
            late, 0,
            "{base} served the revoked key more than a second after the revoke"
        );
        let after = answers
            .iter()
            .filter(|(at, _)| *at > returned + WITHIN)
            .count();
        assert!(after > 0, "{base} was asked after the revoke too");
        eprintln!(
            "{base}: {served_before} served before the revoke returned; the last 200 came {:+} ms \
             from its return; {after} asked a second after, none served",
            signed_ms(last_served, returned)
        );
    }

    tokio::task::block_in_place(|| stack.run_ok("api", &["admin", "business", "approve-kyb", &id]));
    for base in &bases {
        let took = time_until(&client, base, &live_key, StatusCode::OK).await;
        eprintln!(
            "{base}: the live key served {} ms after approve-kyb returned",
            took.as_millis()
        );
    }
}

/// Milliseconds from `reference` to `at`, negative when before.
fn signed_ms(at: Instant, reference: Instant) -> i128 {
    match at.checked_duration_since(reference) {
        Some(d) => d.as_millis() as i128,
        None => -((reference - at).as_millis() as i128),
    }
}

/// The pid of the api's listener for changes on the app's database, if it listens.
async fn listener_pid(app: &TestApp) -> Option<i32> {
    let row = app
        .db
        .query_one_raw(Statement::from_sql_and_values(
            DbBackend::Postgres,
            "SELECT pid FROM pg_stat_activity \
             WHERE application_name = $1 AND datname = current_database() \
             AND query LIKE 'LISTEN%'",
            [APPLICATION_NAME.into()],
        ))
        .await
        .unwrap()?;
    Some(row.try_get_by_index(0).unwrap())
}

/// After its listener's connection is ended by the server (`pg_terminate_backend`), the api
/// forgets what it cached (a change may have gone unheard meanwhile) and listens again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lost_listener_forgets_the_cache_and_listens_again() {
    let Some(backend) = Backend::postgres() else {
        return;
    };
    let app = spawn_app_with(backend, |c| {
        c.http.auth_cache_secs = CACHE_SECS.parse().unwrap()
    })
    .await;
    let key = app.test_key().to_owned();
    let first = test_support::eventually(Duration::from_secs(10), async || {
        listener_pid(&app).await.ok_or("no listener")
    })
    .await;
    assert_eq!(status(&app.client, &app.base, &key).await, StatusCode::OK);
    // Revoked behind the service's back, unannounced, as a change made while nobody listened:
    // the cached key is still served.
    api_key::Entity::update_many()
        .col_expr(api_key::Column::RevokedAt, Expr::value(domain::time::now()))
        .filter(api_key::Column::BusinessId.eq(app.business.id.as_str()))
        .filter(api_key::Column::Mode.eq(Mode::Test))
        .exec(&app.db)
        .await
        .unwrap();
    assert_eq!(status(&app.client, &app.base, &key).await, StatusCode::OK);

    app.db
        .execute_raw(Statement::from_sql_and_values(
            DbBackend::Postgres,
            "SELECT pg_terminate_backend($1)",
            [first.into()],
        ))
        .await
        .unwrap();
    let again = test_support::eventually(Duration::from_secs(5), async || {
        match listener_pid(&app).await {
            Some(pid) if pid != first => Ok(pid),
            seen => Err(format!("listener {seen:?}")),
        }
    })
    .await;
    assert_ne!(again, first);
    assert_eq!(
        status(&app.client, &app.base, &key).await,
        StatusCode::UNAUTHORIZED,
        "the cache was dropped"
    );

    // Listening again: an announced change is heard.
    let roll = KeyAction::Roll(KeyGrace::from_secs(0).unwrap());
    let now = domain::time::now();
    let rolled = match keys::change(&app.db, &app.business.id, Mode::Test, roll, now).await {
        Ok(Some(KeyChange::Rolled(rolled))) => rolled.secret_key,
        other => panic!("not a roll: {other:?}"),
    };
    assert_eq!(
        status(&app.client, &app.base, &rolled).await,
        StatusCode::OK
    );
    test_support::store::revoke_key(&app.db, &app.business.id, "test").await;
    time_until(&app.client, &app.base, &rolled, StatusCode::UNAUTHORIZED).await;
}
