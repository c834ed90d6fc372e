//! What the alerting gauges read from the database (`deploy/prometheus/vas.rules.yml`): the
//! businesses whose webhooks have failed longest (`webhook_endpoint_failing_seconds`), on both
//! databases.

use store::deliveries::{self, AttemptRecord, Next};
use test_support::{Backend, TestDb, on_both_databases, setup};

/// Records one attempt of the only delivery of `event`, answered `status`.
async fn attempt(db: &sea_orm::DatabaseConnection, event: &str, status: i32, next: Next) {
    let (delivery, _) = deliveries::for_event(db, &domain::ids::EventId::unchecked(event))
        .await
        .unwrap()
        .remove(0);
    let now = domain::time::now();
    let record = AttemptRecord {
        attempted_at: now,
        url: Some(delivery.url.clone()),
        status_code: status,
        duration_ms: 5,
        response_excerpt: None,
        error: None,
    };
    let job = delivery.job_id.clone().unwrap();
    assert!(
        deliveries::record_attempt(db, &delivery, &job, &record, &next, now)
            .await
            .unwrap()
    );
}

async fn the_businesses_failing_longest_come_first(backend: Backend) {
    let test_db = TestDb::new(&backend).await;
    let s = setup(&test_db.url, None).await;
    let failing = s.business.id.clone();
    let healthy = s.other_business("Healthy Ltd").await.id;
    let later = s.other_business("Later Ltd").await.id;
    for business in [&failing, &healthy, &later] {
        s.set_url(business, "https://hooks.example.com/vas").await;
    }
    let retry = Next::RetryAt(domain::time::now() + chrono::Duration::minutes(5));
    let first = s.record(&failing, 1).await;
    attempt(&s.db, &first, 500, retry.clone()).await;
    let ok = s.record(&healthy, 2).await;
    attempt(&s.db, &ok, 200, Next::Succeeded).await;
    // Not attempted yet: not failing.
    s.record(&healthy, 3).await;
    let second = s.record(&later, 4).await;
    attempt(&s.db, &second, 0, retry).await;

    let shown = deliveries::failing_longest(&s.db, 5).await.unwrap();
    let names: Vec<&str> = shown.iter().map(|(b, _)| b.as_str()).collect();
    assert_eq!(names, [failing.as_str(), later.as_str()]);
    let (created, _) = deliveries::for_event(&s.db, &first)
        .await
        .unwrap()
        .remove(0);
    assert_eq!(
        shown[0].1, created.created_at,
        "since its oldest failing delivery"
    );
    assert_eq!(
        deliveries::failing_longest(&s.db, 1).await.unwrap().len(),
        1
    );
}

on_both_databases!(the_businesses_failing_longest_come_first);

/// Payouts straight into the table, as the worker leaves them: `n` in `status`, sent by `bank`
/// `minutes_ago`.
async fn payouts(
    s: &test_support::Setup,
    n: usize,
    status: domain::payout::PayoutStatus,
    bank: domain::Bank,
    minutes_ago: i64,
) {
    use sea_orm::{ActiveValue::Set, EntityTrait};
    let now = domain::time::now();
    let sent = now - chrono::Duration::minutes(minutes_ago);
    let rows: Vec<_> = (0..n)
        .map(|_| entities::payout::ActiveModel {
            id: Set(domain::ids::PayoutId::new()),
            business_id: Set(s.business.id.clone()),
            mode: Set(domain::Mode::Test),
            status: Set(status),
            amount: Set(1_000),
            currency: Set("NGN".into()),
            reference: Set(None),
            narration: Set(None),
            bank_code: Set("035".into()),
            bank_name: Set("Wema Bank".into()),
            account_number: Set("0123456789".into()),
            account_name: Set("Ada Obi".into()),
            session_id: Set(None),
            failure_reason: Set(None),
            sent_at: Set(Some(sent)),
            created_at: Set(sent),
            completed_at: Set(None),
            updated_at: Set(sent),
            provider_bank: Set(Some(bank)),
            lease_token: Set(None),
            lease_until: Set(None),
        })
        .collect();
    // SQLite takes a bounded number of variables per statement.
    for chunk in rows.chunks(40) {
        entities::payout::Entity::insert_many(chunk.to_vec())
            .exec_without_returning(&s.db)
            .await
            .unwrap();
    }
}

/// `payouts_processing_oldest_seconds{bank}`: per bank, when its oldest payout still
/// `processing` was sent; settled payouts, however old or many, do not count, and on PostgreSQL
/// they are not read either (the statement walks `payouts_status_bank_sent`).
async fn the_oldest_processing_payout_per_bank(backend: Backend) {
    use domain::Bank::{AccessBank, WemaBank};
    use domain::payout::PayoutStatus::{Failed, Processing, Succeeded};
    let test_db = TestDb::new(&backend).await;
    let s = setup(&test_db.url, None).await;
    payouts(&s, 2_000, Succeeded, WemaBank, 600).await;
    payouts(&s, 3, Failed, AccessBank, 300).await;
    payouts(&s, 1, Processing, WemaBank, 9).await;
    payouts(&s, 2, Processing, WemaBank, 3).await;
    payouts(&s, 1, Processing, AccessBank, 1).await;

    let mut oldest = store::payouts::oldest_processing(&s.db).await.unwrap();
    oldest.sort_by_key(|(bank, _)| bank.map(|b| b.as_str()));
    let minutes: Vec<(Option<domain::Bank>, i64)> = oldest
        .iter()
        .map(|(bank, sent)| {
            let sent = sent.expect("a processing payout was sent");
            (*bank, (domain::time::now() - sent).num_minutes())
        })
        .collect();
    assert_eq!(minutes, [(Some(AccessBank), 1), (Some(WemaBank), 9)]);

    if backend.is_postgres() {
        use sea_orm::ConnectionTrait;
        s.db.execute_unprepared("ANALYZE payouts").await.unwrap();
        let statement = store::payouts::oldest_processing_statement(sea_orm::DbBackend::Postgres);
        let explained = sea_orm::Statement::from_sql_and_values(
            sea_orm::DbBackend::Postgres,
            format!("EXPLAIN {}", statement.sql),
            statement.values.map(|v| v.0).unwrap_or_default(),
        );
        let plan: Vec<String> =
            s.db.query_all_raw(explained)
                .await
                .unwrap()
                .iter()
                .map(|row| row.try_get_by_index::<String>(0).unwrap())
                .collect();
        let plan = plan.join("\n");
        assert!(plan.contains("payouts_status_bank_sent"), "{plan}");
        assert!(!plan.contains("Seq Scan"), "{plan}");
    }
}

on_both_databases!(the_oldest_processing_payout_per_bank);
