//! The worker's shared rounds of database work keep each job's promises: several messages'
//! jobs started in one statement start only the due, unfinished jobs of the queue; several
//! attempts recorded in one transaction each move their delivery on only if it is still on the
//! schedule they were read from (a duplicate run in the same round records its attempt and
//! leaves the delivery alone); and runs finished together end as each would alone. On SQLite
//! (no RETURNING here) and on PostgreSQL when TEST_DATABASE_URL is set.

use domain::ids::JobId;
use std::time::Duration;

use domain::DeliveryStatus;
use jobs::{ProvisioningJob, WebhookJob};
use sea_orm::{ActiveModelTrait, ActiveValue::Set, IntoActiveModel};
use store::deliveries::{self, AttemptRecord, AttemptWrite, Next};
use store::outbox::{self, JobOutcome};
use test_support::{Backend, TestDb, on_both_databases, setup};

on_both_databases!(
    a_round_starts_only_due_unfinished_jobs_of_its_queue,
    attempts_recorded_together_move_each_delivery_on_once,
    a_round_of_distinct_deliveries_moves_each_on_as_alone,
    runs_finished_together_end_as_each_would_alone,
);

fn ok_attempt(url: &str) -> AttemptRecord {
    AttemptRecord {
        attempted_at: domain::time::now(),
        url: Some(url.to_owned()),
        status_code: 200,
        duration_ms: 3,
        response_excerpt: Some("ok".into()),
        error: None,
    }
}

async fn a_round_starts_only_due_unfinished_jobs_of_its_queue(backend: Backend) {
    let db = TestDb::new(&backend).await;
    let setup = setup(&db.url, None).await;
    let now = domain::time::now();
    let job = |n: usize| WebhookJob::Deliver {
        delivery_id: domain::ids::DeliveryId::unchecked(format!("whd_{n}")),
    };
    let due = outbox::enqueue(&setup.db, &job(1), now, now).await.unwrap();
    let later = now + chrono::Duration::hours(1);
    let early = outbox::enqueue(&setup.db, &job(2), later, now)
        .await
        .unwrap();
    let finished = outbox::enqueue(&setup.db, &job(3), now, now).await.unwrap();
    outbox::mark(&setup.db, &finished, outbox::Mark::Completed, now)
        .await
        .unwrap();
    let other = ProvisioningJob::Provision {
        account_id: domain::ids::AccountId::unchecked("va_1"),
    };
    let other_queue = outbox::enqueue(&setup.db, &other, now, now).await.unwrap();

    let ids = [
        &due,
        &early,
        &finished,
        &other_queue,
        &JobId::unchecked("job_missing"),
    ]
    .map(JobId::clone);
    let started = outbox::start_due(&setup.db, "webhooks", &ids, domain::time::now())
        .await
        .unwrap();
    let started_ids: Vec<&str> = started.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(started_ids, vec![due.as_str()], "{backend:?}");
    assert!(started[0].started_at.is_some(), "returned as started");
    for id in [&early, &finished, &other_queue] {
        let row = outbox::find(&setup.db, id).await.unwrap().unwrap();
        assert_eq!(row.started_at, None, "{id} untouched ({backend:?})");
    }
}

async fn attempts_recorded_together_move_each_delivery_on_once(backend: Backend) {
    let db = TestDb::new(&backend).await;
    let setup = setup(&db.url, None).await;
    let url = "http://127.0.0.1:9/hook";
    setup.set_url(&setup.business.id, url).await;
    let first = setup.record(&setup.business.id, 1).await;
    let second = setup.record(&setup.business.id, 2).await;
    let delivery_of = async |event: &str| {
        deliveries::for_event(&setup.db, &domain::ids::EventId::unchecked(event))
            .await
            .unwrap()
            .remove(0)
            .0
    };
    let (a, b) = (delivery_of(&first).await, delivery_of(&second).await);
    let found = deliveries::for_attempts(&setup.db, &[a.id.clone(), b.id.clone()])
        .await
        .unwrap();
    assert_eq!(found.len(), 2);
    assert!(found.iter().all(|f| f.event.is_some()
        && f.settings.as_ref().and_then(|s| s.webhook_url.as_deref()) == Some(url)));

    let now = domain::time::now();
    let write = |d: &deliveries::Delivery, next: Next| AttemptWrite {
        delivery: d.clone(),
        job_id: d.job_id.clone().unwrap(),
        attempt: ok_attempt(url),
        next,
        now,
    };
    let retry_at = now + chrono::Duration::seconds(5);
    let moved = deliveries::record_attempts(
        &setup.db,
        &[
            write(&a, Next::Succeeded),
            write(&b, Next::RetryAt(retry_at)),
            // The same run of `a` twice (a duplicate message): recorded, not counted.
            write(&a, Next::Succeeded),
        ],
    )
    .await
    .unwrap();
    assert_eq!(moved, vec![true, true, false], "{backend:?}");
    let a_now = deliveries::find(&setup.db, &a.id).await.unwrap().unwrap();
    assert_eq!(
        (a_now.status, a_now.attempts),
        (DeliveryStatus::Succeeded, 1)
    );
    let b_now = deliveries::find(&setup.db, &b.id).await.unwrap().unwrap();
    assert_eq!((b_now.status, b_now.attempts), (DeliveryStatus::Pending, 1));
    assert_eq!(
        deliveries::attempts(&setup.db, &a.id).await.unwrap().len(),
        2
    );
    assert_eq!(
        deliveries::attempts(&setup.db, &b.id).await.unwrap().len(),
        1
    );
}

/// A round without duplicates (on PostgreSQL, one statement for all of it): each delivery moves
/// to where its attempt says, unless it moved on since it was read (here: another attempt was
/// recorded in between, or a replay gave it a new job); every attempt is recorded either way.
async fn a_round_of_distinct_deliveries_moves_each_on_as_alone(backend: Backend) {
    let db = TestDb::new(&backend).await;
    let setup = setup(&db.url, None).await;
    let url = "http://127.0.0.1:9/hook";
    setup.set_url(&setup.business.id, url).await;
    let mut read = Vec::new();
    for n in 1..=5 {
        let event = setup.record(&setup.business.id, n).await;
        read.push(
            deliveries::for_event(&setup.db, &event)
                .await
                .unwrap()
                .remove(0)
                .0,
        );
    }
    let now = domain::time::now();
    let failed = AttemptRecord {
        status_code: 500,
        error: Some("HTTP 500 Internal Server Error".into()),
        response_excerpt: None,
        ..ok_attempt(url)
    };
    let write = |d: &deliveries::Delivery, attempt: AttemptRecord, next: Next| AttemptWrite {
        delivery: d.clone(),
        job_id: d.job_id.clone().unwrap(),
        attempt,
        next,
        now,
    };
    // The fourth was attempted by another run after our read; the fifth was replayed.
    let moved = deliveries::record_attempts(
        &setup.db,
        &[write(&read[3], ok_attempt(url), Next::Succeeded)],
    )
    .await
    .unwrap();
    assert_eq!(moved, vec![true]);
    let operator = store::audit::Actor::operator_via("worker-webhooks replay");
    deliveries::replay(&setup.db, &operator, &read[4].id, now)
        .await
        .unwrap()
        .unwrap();
    let retry_at = now + chrono::Duration::seconds(30);
    let moved = deliveries::record_attempts(
        &setup.db,
        &[
            write(&read[0], ok_attempt(url), Next::Succeeded),
            write(&read[1], failed.clone(), Next::RetryAt(retry_at)),
            write(&read[2], failed.clone(), Next::Dead),
            write(&read[3], ok_attempt(url), Next::Succeeded),
            write(&read[4], ok_attempt(url), Next::Succeeded),
        ],
    )
    .await
    .unwrap();
    assert_eq!(moved, vec![true, true, true, false, false], "{backend:?}");
    let find = async |i: usize| {
        deliveries::find(&setup.db, &read[i].id)
            .await
            .unwrap()
            .unwrap()
    };
    // (status, attempts, last status code, next attempt, completed)
    let outcome = |d: &deliveries::Delivery| {
        let code = d.last_status_code;
        (
            d.status,
            d.attempts,
            code,
            d.next_attempt_at,
            d.completed_at,
        )
    };
    let succeeded = find(0).await;
    assert_eq!(
        outcome(&succeeded),
        (DeliveryStatus::Succeeded, 1, Some(200), None, Some(now))
    );
    let retrying = find(1).await;
    assert_eq!(
        outcome(&retrying),
        (DeliveryStatus::Pending, 1, Some(500), Some(retry_at), None)
    );
    assert_eq!(
        retrying.last_error.as_deref(),
        Some("HTTP 500 Internal Server Error")
    );
    let dead = find(2).await;
    assert_eq!(
        (dead.status, dead.attempts, dead.completed_at),
        (DeliveryStatus::Dead, 1, Some(now))
    );
    assert_eq!(
        find(3).await.attempts,
        1,
        "the other run's attempt counted once"
    );
    let replayed = find(4).await;
    assert_eq!(
        (replayed.status, replayed.attempts),
        (DeliveryStatus::Pending, 0),
        "the replay's fresh schedule stands"
    );
    for (i, expected) in [1, 1, 1, 2, 1].into_iter().enumerate() {
        let attempts = deliveries::attempts(&setup.db, &read[i].id).await.unwrap();
        assert_eq!(attempts.len(), expected, "attempts of delivery {i}");
    }
    let dead_attempt = &deliveries::attempts(&setup.db, &read[2].id).await.unwrap()[0];
    assert_eq!(
        (dead_attempt.status_code, dead_attempt.url.as_deref()),
        (500, Some(url))
    );
    // Each delivery moved on ended its job in the same commit, as the consumer would have.
    let job = async |i: usize| {
        outbox::find(&setup.db, read[i].job_id.as_ref().unwrap())
            .await
            .unwrap()
            .unwrap()
    };
    let done = job(0).await;
    assert_eq!(
        (done.completed_at, done.dead_at, done.attempts),
        (Some(now), None, 0)
    );
    let again = job(1).await;
    assert_eq!(
        (
            again.completed_at,
            again.dead_at,
            again.run_at,
            again.attempts,
            again.published_at,
            again.last_error.as_deref()
        ),
        (
            None,
            None,
            retry_at,
            1,
            None,
            Some("HTTP 500 Internal Server Error")
        ),
        "due again when its delivery is, for the relay to publish then"
    );
    let given_up = job(2).await;
    assert_eq!(
        (
            given_up.completed_at,
            given_up.dead_at,
            given_up.last_error.as_deref()
        ),
        (
            None,
            Some(now),
            Some("gave up after 1 attempts: HTTP 500 Internal Server Error")
        )
    );
    assert_eq!(
        test_support::store::orphans(&setup.db).await,
        0,
        "every attempt's delivery, event and business is there"
    );
}

async fn runs_finished_together_end_as_each_would_alone(backend: Backend) {
    let db = TestDb::new(&backend).await;
    let setup = setup(&db.url, None).await;
    let now = domain::time::now();
    let mut rows = Vec::new();
    for n in 0..3 {
        let job = WebhookJob::Deliver {
            delivery_id: domain::ids::DeliveryId::unchecked(format!("whd_{n}")),
        };
        let id = outbox::enqueue(&setup.db, &job, now, now).await.unwrap();
        rows.push(outbox::find(&setup.db, &id).await.unwrap().unwrap());
    }
    // One was finished by another run meanwhile: it keeps that ending.
    let mut already = rows[2].clone().into_active_model();
    already.completed_at = Set(Some(now - chrono::Duration::seconds(30)));
    already.update(&setup.db).await.unwrap();
    let runs = vec![
        (rows[0].clone(), JobOutcome::Done),
        (
            rows[1].clone(),
            JobOutcome::Retry {
                after: Duration::from_secs(60),
                error: "HTTP 500".into(),
            },
        ),
        (rows[2].clone(), JobOutcome::Done),
    ];
    outbox::finish_many(&setup.db, &runs, now).await.unwrap();
    let read = async |id: &JobId| outbox::find(&setup.db, id).await.unwrap().unwrap();
    assert_eq!(read(&rows[0].id).await.completed_at, Some(now));
    let retried = read(&rows[1].id).await;
    assert_eq!(retried.completed_at, None);
    assert_eq!(retried.attempts, 1);
    assert_eq!(retried.run_at, now + chrono::Duration::seconds(60));
    assert_eq!(retried.last_error.as_deref(), Some("HTTP 500"));
    assert_eq!(
        read(&rows[2].id).await.completed_at,
        Some(now - chrono::Duration::seconds(30)),
        "{backend:?}"
    );
}
