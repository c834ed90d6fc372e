//! The named counts count what they say (each is also seen at a number other than zero), on
//! SQLite and on PostgreSQL.

use test_support::store::{
    count_accounts, count_deliveries, count_deliveries_with_status, count_deposits, count_events,
    count_events_about, count_events_of_type, count_notifications, dead_jobs,
    delivery_states_of_event, job, make_published_jobs_overdue, open_jobs_of_kind, outbox_backlog,
    secrets_sealed_with,
};
use test_support::{Backend, TestDb, setup};

test_support::on_both_databases!(named_counts_count_what_they_say);

async fn named_counts_count_what_they_say(backend: Backend) {
    let test_db = TestDb::new(&backend).await;
    let setup = setup(&test_db.url, None).await;
    let db = &setup.db;
    let quiet = setup.other_business("Quiet Ltd").await;
    assert_eq!(count_events(db).await, 0);
    assert_eq!(outbox_backlog(db).await, 0);

    // Two events where a URL is set (a delivery and a job each), one where none is.
    setup
        .set_url(&setup.business.id, "http://127.0.0.1:9/hook")
        .await;
    let first = setup.record(&setup.business.id, 1).await;
    setup.record(&setup.business.id, 2).await;
    setup.record(&quiet.id, 3).await;

    assert_eq!(count_events(db).await, 3);
    assert_eq!(
        count_events_of_type(db, "virtualaccount.deactivated").await,
        3
    );
    assert_eq!(count_events_of_type(db, "virtualaccount.active").await, 0);
    assert_eq!(
        count_events_about(db, "virtualaccount.deactivated", "va_1").await,
        1
    );
    assert_eq!(count_deliveries(db).await, 2);
    assert_eq!(count_deliveries_with_status(db, "pending").await, 2);
    assert_eq!(count_deliveries_with_status(db, "succeeded").await, 0);
    assert_eq!(
        delivery_states_of_event(db, &first).await,
        [("pending".to_owned(), 0)]
    );
    assert_eq!(outbox_backlog(db).await, 2);
    assert_eq!(open_jobs_of_kind(db, "deliver").await, 2);
    assert_eq!(open_jobs_of_kind(db, "provision").await, 0);
    assert_eq!(dead_jobs(db).await, 0);

    let (delivery, _) = store::deliveries::for_event(db, &first)
        .await
        .unwrap()
        .remove(0);
    let job_id = delivery.job_id.unwrap();
    let state = job(db, &job_id).await;
    assert!(
        !state.published && !state.completed && !state.dead,
        "{state:?}"
    );
    make_published_jobs_overdue(db).await;
    assert!(job(db, &job_id).await.published);

    // Each business seals a webhook secret per mode with the current key.
    let prefix = setup.cipher.current_prefix();
    assert_eq!(secrets_sealed_with(db, &prefix).await, 4);
    assert_eq!(secrets_sealed_with(db, "v1:another-key:").await, 0);
    assert_eq!(count_accounts(db).await, 0);
    assert_eq!(count_deposits(db).await, 0);
    assert_eq!(count_notifications(db).await, 0);
}
