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
