//! Secret keys as callers and operators see them: rolling with and without a grace, revoking,
//! the last-used minute, the auth cache and the limit on failed authentications per address.

use domain::ids::BusinessId;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use chrono::{DateTime, Utc};
use crypto::Cipher;
use domain::Mode;
use domain::keys::{KeyGrace, generate_secret_key, hash_secret_key};
use entities::api_key;
use ops::config::Config;
use reqwest::StatusCode;
use sea_orm::{ConnectionTrait, DatabaseConnection, EntityTrait, TransactionTrait};
use sea_orm_migration::MigratorTrait;
use serde_json::Value;
use store::keys::{self, KeyAction, KeyChange, RolledKey};
use test_support::{Backend, TestApp, TestDb, spawn_app};

test_support::on_both_databases!(
    rolling_without_a_grace_stops_the_old_key_at_once,
    rolling_with_a_grace_keeps_the_old_key_until_the_grace_ends,
    a_third_roll_leaves_at_most_two_working_keys,
    revoking_stops_every_working_key_and_a_roll_issues_a_fresh_one,
    last_use_is_recorded_to_the_minute_without_a_write_per_request,
    failed_authentications_are_limited_per_client_address,
    a_cached_key_still_works_from_an_address_over_the_limit,
    a_key_that_worked_is_served_after_its_cache_entry_expires_from_an_address_over_the_limit,
    behind_a_trusted_proxy_failures_count_per_forwarded_client,
    the_migration_moves_every_key_hash,
);

/// The app served once more as `api serve` serves it (with each connection's peer address),
/// with its own configuration, counting the statements it runs on `api_keys`.
struct Served {
    base: String,
    key_reads: Arc<AtomicUsize>,
    key_writes: Arc<AtomicUsize>,
}

async fn serve_with_peer_addresses(app: &TestApp, tweak: impl FnOnce(&mut Config)) -> Served {
    let mut config = app.config.clone();
    tweak(&mut config);
    let key_reads = Arc::new(AtomicUsize::new(0));
    let key_writes = Arc::new(AtomicUsize::new(0));
    let mut db = app.db.clone();
    let (reads, writes) = (key_reads.clone(), key_writes.clone());
    db.set_metric_callback(move |info| {
        let sql = info.statement.sql.trim_start();
        if sql.contains("api_keys") {
            if sql.starts_with("SELECT") {
                reads.fetch_add(1, Ordering::SeqCst);
            } else if sql.starts_with("UPDATE") {
                writes.fetch_add(1, Ordering::SeqCst);
            }
        }
    });
    let cipher = Arc::new(Cipher::new(&app.crypto_key, &[]).unwrap());
    let state = api::AppState::new(db, cipher, config, app.relay.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let service = api::router(state).into_make_service_with_connect_info::<SocketAddr>();
    tokio::spawn(async move { axum::serve(listener, service).await.unwrap() });
    Served {
        base: format!("http://{addr}"),
        key_reads,
        key_writes,
    }
}

/// A client whose connections come from `ip` (any address of 127.0.0.0/8 is this machine).
fn client_from(ip: &str) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(ip.parse::<IpAddr>().unwrap())
        .build()
        .unwrap()
}

/// The status of listing accounts with `key`.
async fn list_status(client: &reqwest::Client, base: &str, key: &str) -> StatusCode {
    client
        .get(format!("{base}/v1/virtual-accounts"))
        .bearer_auth(key)
        .send()
        .await
        .expect("request sent")
        .status()
}

async fn works(app: &TestApp, key: &str) -> bool {
    match list_status(&app.client, &app.base, key).await {
        StatusCode::OK => true,
        StatusCode::UNAUTHORIZED => false,
        other => panic!("unexpected {other}"),
    }
}

async fn roll(app: &TestApp, grace_secs: u64) -> RolledKey {
    let grace = KeyGrace::from_secs(grace_secs).unwrap();
    match change(app, KeyAction::Roll(grace)).await {
        KeyChange::Rolled(rolled) => rolled,
        other => panic!("not a roll: {other:?}"),
    }
}

async fn change(app: &TestApp, action: KeyAction) -> KeyChange {
    keys::change(
        &app.db,
        &app.business.id,
        Mode::Test,
        action,
        domain::time::now(),
    )
    .await
    .unwrap()
    .expect("the business exists")
}

async fn working_keys(app: &TestApp) -> usize {
    keys::list_working(&app.db, &app.business.id, Mode::Test, domain::time::now())
        .await
        .unwrap()
        .len()
}

fn parse_time(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().to_utc()
}

async fn rolling_without_a_grace_stops_the_old_key_at_once(backend: Backend) {
    let app = spawn_app(backend).await;
    let old = app.test_key().to_owned();
    assert!(works(&app, &old).await);
    let before = domain::time::now();
    let rolled = roll(&app, 0).await;
    assert!(rolled.secret_key.starts_with("sk_test_"));
    assert_ne!(rolled.secret_key, old);
    let stopped = parse_time(rolled.previous_key_expires_at.as_deref().unwrap());
    assert!(stopped >= before - chrono::TimeDelta::seconds(1) && stopped <= domain::time::now());
    assert!(!works(&app, &old).await, "the old key stops at once");
    assert!(works(&app, &rolled.secret_key).await);
    assert_eq!(working_keys(&app).await, 1);
    // The live key is untouched.
    assert_eq!(
        list_status(&app.client, &app.base, app.live_key()).await,
        StatusCode::FORBIDDEN,
        "kyb_not_approved, not 401"
    );
    // The new key is stored only as its hash, with its last four characters.
    let stored = api_key::Entity::find().all(&app.db).await.unwrap();
    let new_row = stored
        .iter()
        .find(|k| k.key_hash == hash_secret_key(&rolled.secret_key))
        .expect("stored by hash");
    assert_eq!(
        new_row.last_four.as_deref(),
        Some(&rolled.secret_key[rolled.secret_key.len() - 4..])
    );
    assert!(
        !String::from_utf8_lossy(&app.test_db.raw_contents()).contains(&rolled.secret_key),
        "the key itself is stored nowhere"
    );
}

async fn rolling_with_a_grace_keeps_the_old_key_until_the_grace_ends(backend: Backend) {
    let app = spawn_app(backend).await;
    let old = app.test_key().to_owned();
    // A second instance that caches keys for a minute.
    let cached = serve_with_peer_addresses(&app, |c| c.http.auth_cache_secs = 60).await;
    let rolled = roll(&app, 3).await;
    let until = parse_time(rolled.previous_key_expires_at.as_deref().unwrap());
    assert!(
        works(&app, &old).await,
        "the old key works during the grace"
    );
    assert!(works(&app, &rolled.secret_key).await);
    assert_eq!(working_keys(&app).await, 2);
    for _ in 0..2 {
        assert_eq!(
            list_status(&app.client, &cached.base, &old).await,
            StatusCode::OK
        );
    }
    assert_eq!(
        cached.key_reads.load(Ordering::SeqCst),
        1,
        "looked up once, then served from the cache"
    );
    let wait = (until - domain::time::now()).to_std().unwrap_or_default();
    tokio::time::sleep(wait + Duration::from_millis(200)).await;
    assert!(!works(&app, &old).await, "the grace has ended");
    assert!(works(&app, &rolled.secret_key).await);
    assert_eq!(
        list_status(&app.client, &cached.base, &old).await,
        StatusCode::UNAUTHORIZED,
        "a cached key stops when its grace ends, not when the cache entry does"
    );
    assert_eq!(working_keys(&app).await, 1);
}

async fn a_third_roll_leaves_at_most_two_working_keys(backend: Backend) {
    let app = spawn_app(backend).await;
    let first = app.test_key().to_owned();
    let second = roll(&app, 3600).await;
    let third = roll(&app, 3600).await;
    let until = parse_time(third.previous_key_expires_at.as_deref().unwrap());
    assert!(until > domain::time::now() + chrono::TimeDelta::minutes(59));
    assert!(
        !works(&app, &first).await,
        "the key already expiring stops at once"
    );
    assert!(works(&app, &second.secret_key).await);
    assert!(works(&app, &third.secret_key).await);
    assert_eq!(working_keys(&app).await, 2);
}

async fn revoking_stops_every_working_key_and_a_roll_issues_a_fresh_one(backend: Backend) {
    let app = spawn_app(backend).await;
    let first = app.test_key().to_owned();
    let second = roll(&app, 3600).await;
    assert!(works(&app, &first).await && works(&app, &second.secret_key).await);
    match change(&app, KeyAction::Revoke).await {
        KeyChange::Revoked(count) => assert_eq!(count, 2),
        other => panic!("not a revocation: {other:?}"),
    }
    assert!(!works(&app, &first).await);
    assert!(!works(&app, &second.secret_key).await);
    assert_eq!(working_keys(&app).await, 0);
    // Revoking again changes nothing; the live mode was never touched.
    assert!(matches!(
        change(&app, KeyAction::Revoke).await,
        KeyChange::Revoked(0)
    ));
    assert_eq!(
        list_status(&app.client, &app.base, app.live_key()).await,
        StatusCode::FORBIDDEN
    );
    let fresh = roll(&app, 3600).await;
    assert_eq!(
        fresh.previous_key_expires_at, None,
        "no key was working to give a grace to"
    );
    assert!(works(&app, &fresh.secret_key).await);
    assert!(!works(&app, &first).await && !works(&app, &second.secret_key).await);
    // Unknown businesses are None, not an error.
    let none = keys::change(
        &app.db,
        &BusinessId::unchecked("biz_nope"),
        Mode::Test,
        KeyAction::Revoke,
        domain::time::now(),
    )
    .await
    .unwrap();
    assert!(none.is_none());
}

/// Waits, if needed, until the current minute has at least 15 s left, so a few requests all
/// fall in one minute.
async fn early_in_a_minute() {
    let second = domain::time::now().timestamp().rem_euclid(60);
    if second > 45 {
        tokio::time::sleep(Duration::from_secs((61 - second) as u64)).await;
    }
}

async fn stored_last_use(db: &DatabaseConnection, key: &str) -> Option<DateTime<Utc>> {
    api_key::Entity::find()
        .all(db)
        .await
        .unwrap()
        .into_iter()
        .find(|k| k.key_hash == hash_secret_key(key))
        .expect("key stored")
        .last_used_at
}

async fn last_use_is_recorded_to_the_minute_without_a_write_per_request(backend: Backend) {
    let app = spawn_app(backend).await;
    let key = app.test_key().to_owned();
    assert_eq!(stored_last_use(&app.db, &key).await, None, "never used");
    for cache_secs in [0, 60] {
        let served = serve_with_peer_addresses(&app, |c| c.http.auth_cache_secs = cache_secs).await;
        early_in_a_minute().await;
        let minute = domain::keys::last_used_minute(domain::time::now());
        // Another minute's stamp, so this instance has something to write.
        app.db
            .execute_unprepared(&format!(
                "UPDATE api_keys SET last_used_at = NULL WHERE key_hash = '{}'",
                hash_secret_key(&key)
            ))
            .await
            .unwrap();
        for _ in 0..10 {
            assert_eq!(
                list_status(&app.client, &served.base, &key).await,
                StatusCode::OK
            );
        }
        // The stamp is written beside the request, not before its answer.
        let stored = test_support::eventually(Duration::from_secs(10), async || {
            match stored_last_use(&app.db, &key).await {
                Some(at) if served.key_writes.load(Ordering::SeqCst) > 0 => Ok(at),
                _ => Err("no last use recorded yet"),
            }
        })
        .await;
        assert_eq!(stored, minute, "to the minute (cache {cache_secs} s)");
        assert_eq!(
            served.key_writes.load(Ordering::SeqCst),
            1,
            "ten requests in one minute write once (cache {cache_secs} s)"
        );
    }
}

async fn failed_authentications_are_limited_per_client_address(backend: Backend) {
    let app = spawn_app(backend).await;
    let served = serve_with_peer_addresses(&app, |c| {
        c.limits.auth_failures_per_minute = 5;
        c.http.auth_cache_secs = 0;
    })
    .await;
    let attacker = client_from("127.0.0.1");
    for _ in 0..5 {
        let random = generate_secret_key(Mode::Test);
        assert_eq!(
            list_status(&attacker, &served.base, &random).await,
            StatusCode::UNAUTHORIZED
        );
    }
    let reads = served.key_reads.load(Ordering::SeqCst);
    assert_eq!(reads, 5, "each unknown key was looked up once");
    let mut last_refusal = None;
    for _ in 0..20 {
        let resp = attacker
            .get(format!("{}/v1/virtual-accounts", served.base))
            .bearer_auth(generate_secret_key(Mode::Test))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
        let retry_after: u64 = resp.headers()["retry-after"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!((1..=60).contains(&retry_after), "{retry_after}");
        assert_eq!(resp.headers()["content-type"], "application/problem+json");
        let headers = resp.headers().clone();
        let problem: Value = resp.json().await.unwrap();
        assert_eq!(problem["code"], "rate_limited");
        assert_eq!(problem["status"], 429);
        last_refusal = Some(headers);
    }
    // What the document promises for that 429 is what was sent: every header it marks
    // required, and none of the creation limit's, which this limit does not send.
    let document = test_support::json_of(
        client_from("127.0.0.3").get(format!("{}/openapi.json", served.base)),
    )
    .await;
    let documented = &document["paths"]["/virtual-accounts"]["get"]["responses"]["429"];
    let name = documented["$ref"]
        .as_str()
        .and_then(|r| r.strip_prefix("#/components/responses/"))
        .expect("a shared response");
    let documented = &document["components"]["responses"][name]["headers"];
    let sent = last_refusal.expect("refused");
    let required: Vec<&String> = documented
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, h)| h["required"] == true)
        .map(|(name, _)| name)
        .collect();
    assert!(required.iter().any(|n| *n == "Retry-After"), "{documented}");
    for header in required {
        assert!(
            sent.contains_key(header.as_str()),
            "{header} documented, not sent"
        );
    }
    for header in ["RateLimit", "RateLimit-Policy"] {
        assert!(!sent.contains_key(header), "{header} sent");
        assert!(documented.get(header).is_none(), "{header} documented");
    }
    assert_eq!(
        served.key_reads.load(Ordering::SeqCst),
        reads,
        "refused before any database lookup"
    );
    // Malformed keys count too, and are refused the same way.
    assert_eq!(
        list_status(&attacker, &served.base, "sk_test_short").await,
        StatusCode::TOO_MANY_REQUESTS
    );
    // Another address is unaffected: its valid key works and its bad key is a plain 401.
    let neighbour = client_from("127.0.0.2");
    assert_eq!(
        list_status(&neighbour, &served.base, app.test_key()).await,
        StatusCode::OK
    );
    assert_eq!(
        list_status(&neighbour, &served.base, &generate_secret_key(Mode::Test)).await,
        StatusCode::UNAUTHORIZED
    );
}

async fn a_cached_key_still_works_from_an_address_over_the_limit(backend: Backend) {
    let app = spawn_app(backend).await;
    let served = serve_with_peer_addresses(&app, |c| {
        c.limits.auth_failures_per_minute = 3;
        c.http.auth_cache_secs = 60;
    })
    .await;
    let client = client_from("127.0.0.3");
    assert_eq!(
        list_status(&client, &served.base, app.test_key()).await,
        StatusCode::OK
    );
    for _ in 0..3 {
        assert_eq!(
            list_status(&client, &served.base, &generate_secret_key(Mode::Test)).await,
            StatusCode::UNAUTHORIZED
        );
    }
    assert_eq!(
        list_status(&client, &served.base, &generate_secret_key(Mode::Test)).await,
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(
        list_status(&client, &served.base, app.test_key()).await,
        StatusCode::OK,
        "a key this instance knows to work needs no lookup, so it is not refused"
    );
}

/// Two businesses behind one egress address. The auth cache's entry is long
/// gone (no cache here at all), yet a key that worked from this process is still served after
/// its neighbour's 25 unknown keys; an unknown key is still refused, and a known key that stops
/// working is no longer exempt.
async fn a_key_that_worked_is_served_after_its_cache_entry_expires_from_an_address_over_the_limit(
    backend: Backend,
) {
    let app = spawn_app(backend).await;
    let served = serve_with_peer_addresses(&app, |c| {
        c.limits.auth_failures_per_minute = 20;
        c.http.auth_cache_secs = 0;
    })
    .await;
    let nat = client_from("127.0.0.4");
    assert_eq!(
        list_status(&nat, &served.base, app.test_key()).await,
        StatusCode::OK
    );
    for i in 0..25 {
        let expected = if i < 20 {
            StatusCode::UNAUTHORIZED
        } else {
            StatusCode::TOO_MANY_REQUESTS
        };
        assert_eq!(
            list_status(&nat, &served.base, &generate_secret_key(Mode::Test)).await,
            expected,
            "unknown key {i}"
        );
    }
    assert_eq!(
        list_status(&nat, &served.base, app.test_key()).await,
        StatusCode::OK,
        "the neighbour's failures do not lock out a working key"
    );
    assert_eq!(
        list_status(&nat, &served.base, &generate_secret_key(Mode::Test)).await,
        StatusCode::TOO_MANY_REQUESTS
    );
    // Revoked: one lookup says so, and from then on it is an unknown key like any other.
    change(&app, KeyAction::Revoke).await;
    assert_eq!(
        list_status(&nat, &served.base, app.test_key()).await,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        list_status(&nat, &served.base, app.test_key()).await,
        StatusCode::TOO_MANY_REQUESTS
    );
}

/// Behind a trusted proxy each forwarded client has its own failure count;
/// an untrusted peer's `X-Forwarded-For` is ignored (it cannot escape its own count).
async fn behind_a_trusted_proxy_failures_count_per_forwarded_client(backend: Backend) {
    let app = spawn_app(backend).await;
    let served = serve_with_peer_addresses(&app, |c| {
        c.limits.auth_failures_per_minute = 3;
        c.http.auth_cache_secs = 0;
        c.http.trusted_proxies = "127.0.0.5".parse().unwrap();
    })
    .await;
    let status = |client: reqwest::Client, forwarded: &'static str| {
        let url = format!("{}/v1/virtual-accounts", served.base);
        async move {
            client
                .get(url)
                .bearer_auth(generate_secret_key(Mode::Test))
                .header("x-forwarded-for", forwarded)
                .send()
                .await
                .unwrap()
                .status()
        }
    };
    let proxy = client_from("127.0.0.5");
    for _ in 0..3 {
        // The client's own left-most entry is not believed: the proxy's appended one is.
        let got = status(proxy.clone(), "198.51.100.1, 203.0.113.7").await;
        assert_eq!(got, StatusCode::UNAUTHORIZED);
    }
    let got = status(proxy.clone(), "198.51.100.2, 203.0.113.7").await;
    assert_eq!(got, StatusCode::TOO_MANY_REQUESTS, "203.0.113.7 is over");
    let got = status(proxy.clone(), "203.0.113.8").await;
    assert_eq!(
        got,
        StatusCode::UNAUTHORIZED,
        "another client behind the proxy"
    );
    let untrusted = client_from("127.0.0.6");
    let claimed = ["192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.4"];
    for (i, forwarded) in claimed.into_iter().enumerate() {
        let got = status(untrusted.clone(), forwarded).await;
        let expected = if i < 3 {
            StatusCode::UNAUTHORIZED
        } else {
            StatusCode::TOO_MANY_REQUESTS
        };
        assert_eq!(got, expected, "an untrusted peer counts as itself ({i})");
    }
}

/// Past the old cache's 10,000 entries, unknown keys flushed every cached key. Now they are not
/// cached at all: a working key stays cached (no lookup) however many unknown keys arrive.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_flood_of_unknown_keys_does_not_flush_the_auth_cache() {
    let app = spawn_app(Backend::Sqlite).await;
    let served = serve_with_peer_addresses(&app, |c| {
        c.limits.auth_failures_per_minute = 0;
        c.http.auth_cache_secs = 600;
    })
    .await;
    let key = app.test_key().to_owned();
    assert_eq!(
        list_status(&app.client, &served.base, &key).await,
        StatusCode::OK
    );
    const FLOOD: usize = 10_050;
    let started = std::time::Instant::now();
    let statuses = futures::future::join_all((0..16).map(|_| {
        let (client, base) = (app.client.clone(), served.base.clone());
        async move {
            let mut unauthorized = 0;
            for _ in 0..FLOOD / 16 + 1 {
                let random = generate_secret_key(Mode::Test);
                if list_status(&client, &base, &random).await == StatusCode::UNAUTHORIZED {
                    unauthorized += 1;
                }
            }
            unauthorized
        }
    }))
    .await;
    let flooded: usize = statuses.iter().sum();
    assert!(flooded >= FLOOD, "{flooded}");
    eprintln!("{flooded} unknown keys in {:?}", started.elapsed());
    let reads = served.key_reads.load(Ordering::SeqCst);
    assert_eq!(
        list_status(&app.client, &served.base, &key).await,
        StatusCode::OK
    );
    assert_eq!(
        served.key_reads.load(Ordering::SeqCst),
        reads,
        "the working key was still cached"
    );
}

async fn the_migration_moves_every_key_hash(backend: Backend) {
    let test_db = TestDb::new(&backend).await;
    let db = store::connect(&test_db.url, 2).await.unwrap();
    migrations::Migrator::up(&db, Some(5)).await.unwrap();
    let keys: Vec<(String, Mode, String)> = ["biz_01AAA", "biz_01BBB"]
        .into_iter()
        .flat_map(|biz| Mode::ALL.map(|mode| (biz.to_owned(), mode, generate_secret_key(mode))))
        .collect();
    for biz in ["biz_01AAA", "biz_01BBB"] {
        db.execute_unprepared(&format!(
            "INSERT INTO businesses (id, name, kyb_status, created_at, updated_at) \
             VALUES ('{biz}', 'Acme', 'approved', '2024-01-01T00:00:00Z', '2024-01-01T00:00:00Z')"
        ))
        .await
        .unwrap();
    }
    for (biz, mode, key) in &keys {
        // The second business's live key was revoked by hand before this migration.
        let revoked = if biz == "biz_01BBB" && *mode == Mode::Live {
            "'2024-02-01T00:00:00Z'"
        } else {
            "NULL"
        };
        db.execute_unprepared(&format!(
            "INSERT INTO business_modes (business_id, mode, secret_key_hash, key_revoked_at, \
             webhook_secret_enc, created_at, updated_at) VALUES ('{biz}', '{mode}', '{}', \
             {revoked}, 'x', '2024-01-01T00:00:00Z', '2024-01-01T00:00:00Z')",
            hash_secret_key(key)
        ))
        .await
        .unwrap();
    }
    migrations::Migrator::up(&db, None).await.unwrap();
    let now = domain::time::now();
    for (biz, mode, key) in &keys {
        let owner = keys::find_owner(&db, &hash_secret_key(key), now)
            .await
            .unwrap();
        if biz == "biz_01BBB" && *mode == Mode::Live {
            assert!(owner.is_none(), "a revoked key stays revoked");
        } else {
            let owner = owner.expect("the key still works");
            assert_eq!(
                (owner.business_id.as_str(), owner.mode),
                (biz.as_str(), *mode)
            );
        }
    }
    let rows = api_key::Entity::find().all(&db).await.unwrap();
    assert_eq!(rows.len(), 4);
    // The old column is gone, so no second copy of a hash is left behind.
    assert!(
        db.execute_unprepared("SELECT secret_key_hash FROM business_modes")
            .await
            .is_err()
    );
    // A migrated key can be rolled like any other.
    let rolled = keys::change(
        &db,
        &BusinessId::unchecked("biz_01AAA"),
        Mode::Test,
        KeyAction::Roll(KeyGrace::from_secs(0).unwrap()),
        now,
    )
    .await
    .unwrap()
    .unwrap();
    assert!(matches!(rolled, KeyChange::Rolled(_)));
    assert!(
        keys::find_owner(&db, &hash_secret_key(&keys[0].2), domain::time::now())
            .await
            .unwrap()
            .is_none()
    );
}

/// A request answers without waiting for its key's use stamp: with the key's row locked, as a
/// commit that cannot finish holds it (a primary whose synchronous standby is down), a list
/// still answers at once, and the stamp lands once the lock is let go.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_request_does_not_wait_for_its_keys_use_stamp() {
    let Some(backend) = Backend::postgres() else {
        return;
    };
    let app = spawn_app(backend).await;
    let key = app.test_key().to_owned();
    let served = serve_with_peer_addresses(&app, |c| c.http.auth_cache_secs = 0).await;
    early_in_a_minute().await;
    let holder = app.db.begin().await.unwrap();
    holder
        .execute_unprepared(&format!(
            "SELECT id FROM api_keys WHERE key_hash = '{}' FOR UPDATE",
            hash_secret_key(&key)
        ))
        .await
        .unwrap();
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    for _ in 0..3 {
        assert_eq!(
            list_status(&client, &served.base, &key).await,
            StatusCode::OK
        );
    }
    assert_eq!(stored_last_use(&app.db, &key).await, None, "still held");
    holder.rollback().await.unwrap();
    // The row is visible a moment before the statement counter sees the write: wait for both.
    test_support::eventually(Duration::from_secs(10), async || {
        match stored_last_use(&app.db, &key).await {
            Some(_) if served.key_writes.load(Ordering::SeqCst) > 0 => Ok(()),
            _ => Err("no last use recorded yet"),
        }
    })
    .await;
    // A second stamp, had a request claimed one, waited on the same lock and lands as fast.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        served.key_writes.load(Ordering::SeqCst),
        1,
        "one stamp for the minute, however many requests"
    );
}
