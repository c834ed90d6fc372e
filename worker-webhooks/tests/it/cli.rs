//! The `worker-webhooks` operator commands as an operator runs them: `dead list` and `replay`,
//! against the dev data folder (no database configured) and against PostgreSQL.

use domain::ids::{BusinessId, DeliveryId, EventId};
use std::process::{Command, Output};

use crate::support::binary;
use ::store::audit::actor_label;
use ::store::deliveries::{self, AttemptRecord, Next};
use domain::AuditAction;
use serde_json::Value;
use test_support::{Setup, TestDb, postgres_url, setup, store};

fn run(cmd: &mut Command) -> Output {
    cmd.output().expect("worker-webhooks runs")
}

fn ok_lines(cmd: &mut Command) -> Vec<Value> {
    let out = run(cmd);
    assert!(
        out.status.success(),
        "failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect()
}

/// The account the tests, and so the commands they start, run as.
fn host_account() -> String {
    let out = Command::new("id").arg("-un").output().expect("id runs");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// A delivery of a fresh event to `business_id` that exhausted its schedule.
async fn dead_delivery(setup: &Setup, business_id: &BusinessId, n: usize) -> (DeliveryId, EventId) {
    setup.set_url(business_id, "http://127.0.0.1:9/hook").await;
    let event_id = setup.record(business_id, n).await;
    let (delivery, _) = deliveries::for_event(&setup.db, &event_id)
        .await
        .unwrap()
        .remove(0);
    let attempt = AttemptRecord {
        attempted_at: domain::time::now(),
        url: Some(delivery.url.clone()),
        status_code: 503,
        duration_ms: 12,
        response_excerpt: Some("down".into()),
        error: Some("HTTP 503".into()),
    };
    let job = delivery.job_id.clone().unwrap();
    assert!(
        deliveries::record_attempt(
            &setup.db,
            &delivery,
            &job,
            &attempt,
            &Next::Dead,
            domain::time::now()
        )
        .await
        .unwrap()
    );
    (delivery.id, event_id)
}

/// Everything the commands should do, on whichever database `cmd` reaches.
async fn exercise(setup: &Setup, cmd: impl Fn() -> Command) {
    let acme = setup.business.id.clone();
    let other = setup.other_business("Other Ltd").await.id;
    let (acme_dead, acme_event) = dead_delivery(setup, &acme, 1).await;
    let (other_dead, _) = dead_delivery(setup, &other, 2).await;
    let with = |args: &[&str]| {
        let mut c = cmd();
        c.args(args);
        c
    };

    let all = ok_lines(&mut with(&["dead", "list"]));
    assert_eq!(all.len(), 2);
    let mine = ok_lines(&mut with(&["dead", "list", "--business", &acme]));
    assert_eq!(mine.len(), 1);
    let line = &mine[0];
    assert_eq!(line["id"], acme_dead.as_str());
    assert_eq!(line["eventId"], acme_event.as_str());
    assert_eq!(line["eventType"], "virtualaccount.deactivated");
    assert_eq!(line["businessId"], acme.as_str());
    assert_eq!(line["mode"], "test");
    assert_eq!(line["attempts"], 1);
    assert_eq!(line["lastStatusCode"], 503);
    assert!(line["deadAt"].is_string());

    // Nothing died in the future; then all of one business's dead.
    let none = ok_lines(&mut with(&[
        "replay",
        "--all-dead",
        "--since",
        "2999-01-01",
    ]));
    assert!(none.is_empty());
    let old = deliveries::find(&setup.db, &acme_dead)
        .await
        .unwrap()
        .unwrap();
    let replayed = ok_lines(&mut with(&[
        "replay",
        "--all-dead",
        "--business",
        &acme,
        "--since",
        "1h",
    ]));
    assert_eq!(replayed.len(), 1);
    assert_eq!(replayed[0]["id"], acme_dead.as_str());
    assert_eq!(replayed[0]["eventId"], acme_event.as_str());
    let now = deliveries::find(&setup.db, &acme_dead)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(now.status, domain::DeliveryStatus::Pending);
    assert_eq!(now.attempts, 0, "a fresh schedule");
    assert_eq!(
        now.event_id, old.event_id,
        "the same event: the same webhook-id"
    );
    let job = now.job_id.clone().unwrap();
    assert_ne!(Some(&job), old.job_id.as_ref());
    let state = store::job(&setup.db, &job).await;
    assert!(
        !state.completed && !state.dead && !state.published,
        "a new job, due for the relay to publish: {state:?}"
    );
    assert_eq!(ok_lines(&mut with(&["dead", "list"])).len(), 1);
    // Recorded as the operator's, on the business's Team page.
    let replays: Vec<_> = store::audit_log(&setup.db, &acme)
        .await
        .into_iter()
        .filter(|r| r.action == AuditAction::DeliveryReplayed)
        .collect();
    assert_eq!(replays.len(), 1, "{replays:?}");
    assert_eq!(replays[0].target.as_deref(), Some(acme_event.as_str()));
    assert_eq!(replays[0].mode, Some(domain::Mode::Test));
    assert_eq!(
        actor_label(&replays[0]),
        format!("Operator ({}) via worker-webhooks replay", host_account())
    );

    // By id; unknown ids are an error; the arguments must make sense.
    assert_eq!(ok_lines(&mut with(&["replay", &other_dead])).len(), 1);
    assert!(ok_lines(&mut with(&["dead", "list"])).is_empty());
    let out = run(&mut with(&["replay", "whd_nope"]));
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no such delivery: whd_nope"));
    for args in [
        &["replay"][..],
        &["replay", "--business", &acme],
        &["replay", &acme_dead, "--all-dead"],
        &["replay", "--all-dead", "--since", "last week"],
    ] {
        assert!(!run(&mut with(args)).status.success(), "{args:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_commands_work_on_the_dev_data_folder() {
    let dir = tempfile::tempdir().unwrap();
    // The same file the commands find with no database configured.
    let test_db = TestDb::sqlite_at(&dir.path().join(".vas-dev").join("vas.sqlite"));
    let setup = setup(&test_db.url, None).await;
    let path = dir.path().to_owned();
    exercise(&setup, || binary(&path)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_commands_work_against_postgres() {
    let Some(admin) = postgres_url() else {
        return;
    };
    let test_db = TestDb::postgres(&admin).await;
    let setup = setup(&test_db.url, None).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_owned();
    let url = test_db.url.clone();
    exercise(&setup, || {
        let mut cmd = binary(&path);
        cmd.env("VAS_DATABASE__URL", &url);
        cmd
    })
    .await;
    assert!(
        !dir.path().join(".vas-dev").exists(),
        "a configured database leaves the dev folder alone"
    );
}

#[test]
fn the_worker_names_the_configuration_it_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(&mut binary(dir.path()));
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("VAS_DATABASE__URL"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
