//! The totals of the deposits, events, payouts and ledger lists are maintained counts
//! (`m0017_list_counts`), not counts of the rows on every request: after concurrent deposits
//! (credited and flagged), payouts created and moved along in parallel, events, and after rows
//! are moved between filters or deleted by hand, every `total` a caller is answered, for every
//! filter value, equals the rows stored, and is never an estimate. A database migrated with rows
//! already there starts with their counts. The home page's daily figures (`m0028_day_counts`)
//! equal the rows too: deposits by Lagos day, around midnight, and deliveries by outcome after
//! concurrent rounds of attempts, replays and deletes.

use chrono::Utc;
use domain::ids::BusinessId;
use domain::payout::{PayoutStatus, TransferState};
use domain::provider::RemoteTransaction;
use domain::{Bank, DepositStatus, EventType, Mode};
use entities::{deposit, event, ledger_entry, payout};
use reqwest::StatusCode;
use sea_orm::sea_query::Expr;
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, PaginatorTrait, QueryFilter,
    QuerySelect,
};
use serde_json::json;
use store::deposits::{self, ModeQuery, Source};
use store::list_counts::{self, List};
use store::paging::Total;
use store::payouts::{self, Reported};
use test_support::{Backend, TestApp, id_of, json, spawn_app};

test_support::on_both_databases!(
    totals_equal_the_rows_after_concurrent_writes_moves_and_deletes,
    the_migration_counts_the_rows_already_there,
    day_figures_equal_the_rows_after_rounds_replays_and_deletes,
);

/// `total` and `totalIsEstimate` of a list as a caller is answered.
async fn answered(app: &TestApp, path: &str) -> (u64, bool) {
    let sep = if path.contains('?') { '&' } else { '?' };
    let resp = app
        .get(app.test_key(), &format!("{path}{sep}pageSize=1"))
        .await;
    assert_eq!(resp.status(), StatusCode::OK, "{path}");
    let page = json(resp).await;
    (
        page["total"].as_u64().unwrap(),
        page["totalIsEstimate"].as_bool().unwrap(),
    )
}

/// Every list and filter value: the answered total is the stored rows' count, exact.
async fn every_total_is_the_rows(app: &TestApp, accounts: &[String]) {
    let db = &app.db;
    let business = &app.business.id;
    for account in accounts {
        let rows = deposit::Entity::find()
            .filter(deposit::Column::AccountId.eq(account.as_str()))
            .count(db)
            .await
            .unwrap();
        let path = format!("/v1/virtual-accounts/{account}/deposits");
        assert_eq!(answered(app, &path).await, (rows, false), "{path}");
    }
    let events = || {
        event::Entity::find()
            .filter(event::Column::BusinessId.eq(business))
            .filter(event::Column::Mode.eq(Mode::Test))
    };
    let rows = events().count(db).await.unwrap();
    assert!(rows > 0);
    assert_eq!(answered(app, "/v1/events").await, (rows, false));
    for t in EventType::ALL {
        let rows = events()
            .filter(event::Column::EventType.eq(t))
            .count(db)
            .await
            .unwrap();
        let path = format!("/v1/events?type={t}");
        assert_eq!(answered(app, &path).await, (rows, false), "{path}");
    }
    let payouts = || {
        payout::Entity::find()
            .filter(payout::Column::BusinessId.eq(business))
            .filter(payout::Column::Mode.eq(Mode::Test))
    };
    let rows = payouts().count(db).await.unwrap();
    assert!(rows > 0);
    assert_eq!(answered(app, "/v1/payouts").await, (rows, false));
    for s in PayoutStatus::ALL {
        let rows = payouts()
            .filter(payout::Column::Status.eq(s))
            .count(db)
            .await
            .unwrap();
        let path = format!("/v1/payouts?status={s}");
        assert_eq!(answered(app, &path).await, (rows, false), "{path}");
    }
    let rows = ledger_entry::Entity::find()
        .filter(ledger_entry::Column::BusinessId.eq(business))
        .filter(ledger_entry::Column::Mode.eq(Mode::Test))
        .count(db)
        .await
        .unwrap();
    assert!(rows > 0);
    assert_eq!(
        answered(app, "/v1/balance/transactions").await,
        (rows, false)
    );
    // The dashboard's Deposits page without a search: every status and none.
    for status in [
        None,
        Some(DepositStatus::Credited),
        Some(DepositStatus::Flagged),
    ] {
        let mut select = deposit::Entity::find()
            .filter(deposit::Column::BusinessId.eq(business))
            .filter(deposit::Column::Mode.eq(Mode::Test));
        if let Some(status) = status {
            select = select.filter(deposit::Column::Status.eq(status));
        }
        let rows = select.count(db).await.unwrap();
        let query = ModeQuery {
            business_id: business,
            mode: Mode::Test,
            search: None,
            status,
        };
        let total = deposits::total_for_mode(db, &query, 1).await.unwrap();
        let exact = Total {
            value: rows,
            estimate: false,
        };
        assert_eq!(total, exact, "dashboard deposits {status:?}");
    }
    // Nothing of the test mode is counted in live.
    for list in [List::Deposits, List::Events, List::Payouts, List::Ledger] {
        let live = list_counts::total(db, business, Mode::Live, list, None).await;
        assert_eq!(live.unwrap().value, 0, "{list:?}");
    }
}

/// `n` transactions paid now to the accounts numbered `numbers`, in turn, recorded at once.
async fn deposit_concurrently(db: &DatabaseConnection, numbers: &[String], from: usize, n: usize) {
    let tasks = (from..from + n).map(|i| {
        let db = db.clone();
        let tx = RemoteTransaction {
            reference: format!("TXN-{i:06}"),
            account_number: numbers[i % numbers.len()].clone(),
            amount: 100_000,
            currency: "NGN".into(),
            sender_name: Some("Chidi Okeke".into()),
            sender_account_number: None,
            sender_bank_name: None,
            narration: None,
            paid_at: Utc::now(),
        };
        tokio::spawn(async move {
            let recorded = deposits::record(
                &db,
                Mode::Test,
                Bank::TestBank,
                &tx,
                Source::Notification,
                Utc::now(),
            )
            .await
            .unwrap();
            assert!(
                matches!(recorded, deposits::Recorded::New(_)),
                "{recorded:?}"
            );
        })
    });
    for task in futures::future::join_all(tasks).await {
        task.unwrap();
    }
}

async fn totals_equal_the_rows_after_concurrent_writes_moves_and_deletes(backend: Backend) {
    let app = spawn_app(backend).await;
    let settlement = app
        .client
        .put(app.url("/v1/settlement-account"))
        .bearer_auth(app.test_key())
        .json(&json!({"bankCode": "058",
                      "accountNumber": domain::nuban::account_number("058", 12_345_678).unwrap()}))
        .send()
        .await
        .unwrap();
    assert_eq!(settlement.status(), StatusCode::OK);
    let mut accounts = Vec::new();
    let mut numbers = Vec::new();
    for n in 0..3 {
        let body = app.active_account(app.test_key(), n).await;
        accounts.push(id_of(&body));
        numbers.push(body["accountNumber"].as_str().unwrap().to_owned());
    }
    // Deposits to the third arrive after its deactivation: flagged.
    let resp = app.deactivate(app.test_key(), &accounts[2]).await;
    assert_eq!(resp.status(), StatusCode::OK);

    deposit_concurrently(&app.db, &numbers, 0, 30).await;

    // Deposits, payouts created and moved along, and events, all at once.
    let payouts_made = 16;
    let deposits = deposit_concurrently(&app.db, &numbers, 30, 30);
    let events = futures::future::join_all((0..20).map(|n| {
        let app = &app;
        async move {
            let data = json!({"id": format!("va_{n}")});
            app.record_event(&app.business.id, Mode::Test, &data).await
        }
    }));
    let payouts = futures::future::join_all((0..payouts_made).map(|n| {
        let app = &app;
        async move {
            let resp = app
                .client
                .post(app.url("/v1/payouts"))
                .bearer_auth(app.test_key())
                .header("Idempotency-Key", format!("p-{n}"))
                .json(&json!({"amount": 10_000}))
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status(), StatusCode::ACCEPTED);
            let id = domain::ids::PayoutId::unchecked(id_of(&json(resp).await));
            // A quarter stay pending; the others move, some several steps in one transaction.
            let states: &[TransferState] = match n % 4 {
                0 => &[],
                1 => &[TransferState::Processing, TransferState::Succeeded],
                2 => &[TransferState::Failed],
                _ => &[TransferState::Reversed],
            };
            for state in states {
                let reported = Reported {
                    state: *state,
                    session_id: None,
                    failure_reason: None,
                };
                payouts::apply(&app.db, &id, &reported)
                    .await
                    .unwrap()
                    .unwrap();
            }
        }
    }));
    tokio::join!(deposits, events, payouts);
    every_total_is_the_rows(&app, &accounts).await;

    // Rows moved to another filter value and deleted by hand (as an operator's purge would)
    // leave the counts right too.
    let some_events: Vec<String> = event::Entity::find()
        .select_only()
        .column(event::Column::Id)
        .filter(event::Column::EventType.eq(EventType::DepositReceived))
        .limit(5)
        .into_tuple()
        .all(&app.db)
        .await
        .unwrap();
    event::Entity::update_many()
        .col_expr(
            event::Column::EventType,
            Expr::value(EventType::WebhookTest.as_str()),
        )
        .filter(event::Column::Id.is_in(some_events.clone()))
        .exec(&app.db)
        .await
        .unwrap();
    event::Entity::delete_many()
        .filter(event::Column::EventType.eq(EventType::VirtualAccountDeactivated))
        .filter(event::Column::Id.is_not_in(some_events))
        .exec(&app.db)
        .await
        .unwrap();
    deposit::Entity::delete_many()
        .filter(deposit::Column::AccountId.eq(accounts[1].as_str()))
        .filter(deposit::Column::ProviderReference.like("TXN-00003%"))
        .exec(&app.db)
        .await
        .unwrap();
    ledger_entry::Entity::delete_many()
        .filter(ledger_entry::Column::EntryType.eq(domain::payout::EntryType::PayoutReturn))
        .exec(&app.db)
        .await
        .unwrap();
    payout::Entity::delete_many()
        .filter(payout::Column::Status.eq(PayoutStatus::Failed))
        .exec(&app.db)
        .await
        .unwrap();
    assert!(
        payouts::list(
            &app.db,
            &app.business.id,
            Mode::Test,
            Some(PayoutStatus::Failed),
            &page1()
        )
        .await
        .unwrap()
        .1
        .value
            == 0
    );
    every_total_is_the_rows(&app, &accounts).await;
}

fn page1() -> store::paging::PageRequest {
    store::paging::PageRequest {
        page_size: 20,
        position: store::paging::Position::Page(1),
    }
}

async fn the_migration_counts_the_rows_already_there(backend: Backend) {
    use sea_orm_migration::MigratorTrait;
    let test_db = test_support::TestDb::new(&backend).await;
    // Every migration before m0017 (the one under test), then rows as they were stored until then.
    let db = test_db.migrated_up_to("m0017").await;
    let at = "2026-01-02T03:04:05Z";
    let mut rows = vec![format!(
        "INSERT INTO businesses (id, name, kyb_status, created_at, updated_at) \
         VALUES ('biz_1', 'Acme', 'approved', '{at}', '{at}')"
    )];
    for (account, number) in [("va_1", "0000000001"), ("va_2", "0000000002")] {
        rows.push(format!(
            "INSERT INTO virtual_accounts (id, business_id, mode, status, bank, account_number, \
             account_name, customer_name, customer_email, customer_phone, customer_reference, \
             identity_type, identity_enc, created_at, activated_at, updated_at) \
             VALUES ('{account}', 'biz_1', 'test', 'active', 'test-bank', '{number}', 'Acme/Ada', \
             'Ada', 'ada@example.com', '+2348030000000', NULL, 'bvn', 'sealed', '{at}', '{at}', '{at}')"
        ));
    }
    // va_1: two credited and one flagged deposit; va_2: one credited.
    for (n, (account, status)) in [
        ("va_1", "credited"),
        ("va_1", "credited"),
        ("va_1", "flagged"),
        ("va_2", "credited"),
    ]
    .into_iter()
    .enumerate()
    {
        rows.push(format!(
            "INSERT INTO deposits (id, account_id, business_id, mode, bank, status, amount, currency, \
             provider_reference, source, received_at, created_at) \
             VALUES ('dep_{n}', '{account}', 'biz_1', 'test', 'test-bank', '{status}', 10000, 'NGN', \
             'TXN{n}', 'notification', '{at}', '{at}')"
        ));
    }
    for (n, (mode, event_type)) in [
        ("test", "deposit.received"),
        ("test", "deposit.received"),
        ("test", "webhook.test"),
        ("live", "webhook.test"),
    ]
    .into_iter()
    .enumerate()
    {
        rows.push(format!(
            "INSERT INTO events (id, business_id, mode, type, data, created_at) \
             VALUES ('evt_{n}', 'biz_1', '{mode}', '{event_type}', '{{}}', '{at}')"
        ));
    }
    for (n, status) in ["pending", "succeeded", "succeeded"]
        .into_iter()
        .enumerate()
    {
        rows.push(format!(
            "INSERT INTO payouts (id, business_id, mode, status, amount, currency, bank_code, \
             bank_name, account_number, account_name, created_at, updated_at) \
             VALUES ('po_{n}', 'biz_1', 'test', '{status}', 10000, 'NGN', '058', 'GTBank', \
             '0123456789', 'Acme', '{at}', '{at}')"
        ));
    }
    for n in 0..3 {
        rows.push(format!(
            "INSERT INTO ledger_entries (id, business_id, mode, type, amount, balance_after, \
             source_id, created_at) \
             VALUES ('btx_{n}', 'biz_1', 'test', 'deposit', 10000, {}, 'dep_{n}', '{at}')",
            10_000 * (n + 1)
        ));
    }
    for sql in rows {
        db.execute_unprepared(&sql).await.unwrap();
    }
    migrations::Migrator::up(&db, None).await.unwrap();
    // The home page's daily figures (m0028) start from the same rows: four deposits that day.
    let day = store::home::day_cuts("2026-01-02T12:00:00Z".parse().unwrap());
    let per_day =
        store::home::deposits_per_day(&db, &BusinessId::unchecked("biz_1"), Mode::Test, &day)
            .await
            .unwrap();
    assert_eq!(per_day[store::home::DAYS - 1].count, 4);
    assert_eq!(per_day[store::home::DAYS - 1].amount, 40_000);
    // And the payouts' amounts by status: one pending payout is on its way out.
    let in_flight = payouts::in_flight(&db, &BusinessId::unchecked("biz_1"), Mode::Test)
        .await
        .unwrap();
    assert_eq!(in_flight, 10_000);

    let total = |list, bucket: Option<&'static str>| {
        let db = db.clone();
        async move {
            list_counts::total(
                &db,
                &BusinessId::unchecked("biz_1"),
                Mode::Test,
                list,
                bucket,
            )
            .await
            .unwrap()
            .value
        }
    };
    assert_eq!(total(List::Deposits, Some("va_1")).await, 3);
    assert_eq!(total(List::Deposits, Some("va_2")).await, 1);
    assert_eq!(total(List::DepositStatuses, None).await, 4);
    assert_eq!(total(List::DepositStatuses, Some("flagged")).await, 1);
    assert_eq!(total(List::Events, None).await, 3);
    assert_eq!(total(List::Events, Some("deposit.received")).await, 2);
    assert_eq!(total(List::Events, Some("webhook.test")).await, 1);
    assert_eq!(total(List::Payouts, None).await, 3);
    assert_eq!(total(List::Payouts, Some("succeeded")).await, 2);
    assert_eq!(total(List::Ledger, None).await, 3);
    let live = list_counts::total(
        &db,
        &BusinessId::unchecked("biz_1"),
        Mode::Live,
        List::Events,
        None,
    )
    .await;
    assert_eq!(live.unwrap().value, 1);

    // What the lists answer, and new rows counted on top of the initial counts.
    store::events::record(
        &db,
        &BusinessId::unchecked("biz_1"),
        Mode::Test,
        EventType::WebhookTest,
        &json!({"message": "hello"}),
        Utc::now(),
    )
    .await
    .unwrap();
    let (_, listed) = store::events::list(
        &db,
        &BusinessId::unchecked("biz_1"),
        Mode::Test,
        None,
        &page1(),
    )
    .await
    .unwrap();
    assert_eq!(
        listed,
        Total {
            value: 4,
            estimate: false
        }
    );
    let (_, ledger) =
        store::ledger::list(&db, &BusinessId::unchecked("biz_1"), Mode::Test, &page1())
            .await
            .unwrap();
    assert_eq!(ledger.value, 3);
}

/// A moment's Lagos day, as the home page's charts cut them.
fn lagos_day(at: chrono::DateTime<Utc>) -> chrono::NaiveDate {
    (at + chrono::Duration::hours(1)).date_naive()
}

/// A delivery's outcome on the home page.
fn outcome(d: &store::deliveries::Delivery) -> &'static str {
    match d.status {
        domain::DeliveryStatus::Succeeded => "succeeded",
        domain::DeliveryStatus::Dead => "dead",
        domain::DeliveryStatus::Pending if d.attempts > 0 => "retrying",
        domain::DeliveryStatus::Pending => "waiting",
    }
}

async fn day_figures_equal_the_rows_after_rounds_replays_and_deletes(backend: Backend) {
    use entities::delivery;
    use store::deliveries::{AttemptRecord, AttemptWrite, Next};
    use store::home;

    let app = spawn_app(backend).await;
    app.set_webhook_url(
        &app.business.id,
        Mode::Test,
        "https://hooks.example.com/vas",
    )
    .await;
    let number = app.active_account(app.test_key(), 1).await["accountNumber"]
        .as_str()
        .unwrap()
        .to_owned();
    let now = Utc::now();
    let cuts = home::day_cuts(now);
    // A Lagos midnight two days back: a second before it is the day before's.
    let midnight = cuts[home::DAYS - 2];
    let moments = [
        now,
        now,
        midnight,
        midnight - chrono::Duration::seconds(1),
        now - chrono::Duration::days(8),
        now - chrono::Duration::days(29),
        // Outside the charts' 30 days.
        now - chrono::Duration::days(40),
    ];
    for (i, at) in moments.iter().enumerate() {
        let tx = RemoteTransaction {
            reference: format!("DAY-{i}"),
            account_number: number.clone(),
            amount: 10_000 * (i as i64 + 1),
            currency: "NGN".into(),
            sender_name: None,
            sender_account_number: None,
            sender_bank_name: None,
            narration: None,
            paid_at: *at,
        };
        deposits::record(
            &app.db,
            Mode::Test,
            Bank::TestBank,
            &tx,
            Source::Notification,
            *at,
        )
        .await
        .unwrap();
    }
    // One deposit deleted by hand.
    deposit::Entity::delete_many()
        .filter(deposit::Column::ProviderReference.eq("DAY-1"))
        .exec(&app.db)
        .await
        .unwrap();

    // More events with deliveries, then two concurrent rounds of attempts over distinct
    // deliveries, with every outcome.
    for _ in 0..24 {
        store::events::record(
            &app.db,
            &app.business.id,
            Mode::Test,
            EventType::WebhookTest,
            &json!({"message": "hello"}),
            Utc::now(),
        )
        .await
        .unwrap();
    }
    let stored = |db: DatabaseConnection| async move {
        delivery::Entity::find()
            .filter(delivery::Column::Mode.eq(Mode::Test))
            .all(&db)
            .await
            .unwrap()
    };
    let all = stored(app.db.clone()).await;
    assert!(all.len() >= 24, "{} deliveries", all.len());
    let writes: Vec<AttemptWrite> = all
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 5 != 4)
        .map(|(i, d)| AttemptWrite {
            delivery: d.clone(),
            job_id: d.job_id.clone().unwrap(),
            attempt: AttemptRecord {
                attempted_at: Utc::now(),
                url: Some(d.url.clone()),
                status_code: if i % 5 == 0 { 200 } else { 503 },
                duration_ms: 12,
                response_excerpt: None,
                error: None,
            },
            next: match i % 5 {
                0 => Next::Succeeded,
                1 | 2 => Next::RetryAt(Utc::now() + chrono::Duration::minutes(5)),
                _ => Next::Dead,
            },
            now: Utc::now(),
        })
        .collect();
    let (left, right) = writes.split_at(writes.len() / 2);
    let (a, b) = tokio::join!(
        store::deliveries::record_attempts(&app.db, left),
        store::deliveries::record_attempts(&app.db, right),
    );
    assert!(a.unwrap().into_iter().chain(b.unwrap()).all(|moved| moved));
    // A dead one replayed by hand, a retrying one moved to another day, a waiting one deleted.
    let all = stored(app.db.clone()).await;
    let find = |outcome_name: &str| {
        all.iter()
            .find(|d| outcome(d) == outcome_name)
            .unwrap()
            .id
            .clone()
    };
    let (dead, retrying, waiting) = (find("dead"), find("retrying"), find("waiting"));
    for sql in [
        format!("UPDATE deliveries SET status = 'pending', attempts = 0 WHERE id = '{dead}'"),
        format!(
            "UPDATE deliveries SET created_at = '{}' WHERE id = '{retrying}'",
            (now - chrono::Duration::days(3)).to_rfc3339()
        ),
        format!("DELETE FROM deliveries WHERE id = '{waiting}'"),
    ] {
        app.db.execute_unprepared(&sql).await.unwrap();
    }

    // What the home page reads equals the rows.
    let days: Vec<chrono::NaiveDate> = cuts[..home::DAYS].iter().map(|c| lagos_day(*c)).collect();
    let mut expected = vec![home::DayDeposits::default(); home::DAYS];
    for d in deposit::Entity::find().all(&app.db).await.unwrap() {
        if let Some(i) = days.iter().position(|day| *day == lagos_day(d.received_at)) {
            expected[i].count += 1;
            expected[i].amount += d.amount;
        }
    }
    let answered = home::deposits_per_day(&app.db, &app.business.id, Mode::Test, &cuts)
        .await
        .unwrap();
    assert_eq!(answered, expected);
    assert_eq!(
        answered.iter().map(|d| d.count).sum::<u64>(),
        5,
        "{answered:?}"
    );
    // Midnight splits: the second before is the day before's.
    assert_eq!(answered[home::DAYS - 2].amount, 30_000);
    assert_eq!(answered[home::DAYS - 3].amount, 40_000);

    let all = stored(app.db.clone()).await;
    let mut per_day = vec![home::DayDeliveries::default(); home::DAYS];
    let mut outcomes = home::Deliveries::default();
    for d in &all {
        match outcome(d) {
            "succeeded" => outcomes.succeeded += 1,
            "dead" => outcomes.dead += 1,
            "retrying" => outcomes.retrying += 1,
            _ => outcomes.waiting += 1,
        }
        if let Some(i) = days.iter().position(|day| *day == lagos_day(d.created_at)) {
            per_day[i].total += 1;
            per_day[i].succeeded += u64::from(outcome(d) == "succeeded");
        }
    }
    assert!(outcomes.succeeded > 0 && outcomes.dead > 0 && outcomes.retrying > 0);
    let mut answered = home::deliveries(&app.db, &app.business.id, Mode::Test)
        .await
        .unwrap();
    assert!(answered.last_failure.is_some());
    answered.last_failure = None;
    assert_eq!(answered, outcomes);
    let answered = home::deliveries_per_day(&app.db, &app.business.id, Mode::Test, &cuts)
        .await
        .unwrap();
    assert_eq!(answered, per_day);
    assert_eq!(
        answered.iter().map(|d| d.total).sum::<u64>(),
        all.len() as u64 - 1,
        "the deposit 40 days back is outside"
    );
}

/// An app on PostgreSQL whose test mode has a webhook URL, so an event makes a delivery and its
/// job; None without `TEST_DATABASE_URL`.
async fn app_with_webhooks() -> Option<(TestApp, BusinessId)> {
    let app = spawn_app(Backend::postgres()?).await;
    let business = app.business.id.clone();
    app.set_webhook_url(&business, Mode::Test, "https://hooks.example.com/vas")
        .await;
    Some((app, business))
}

/// A webhook round's write of `delivery` answered 200 at `now`.
fn succeeded(
    delivery: store::deliveries::Delivery,
    now: chrono::DateTime<Utc>,
) -> store::deliveries::AttemptWrite {
    use store::deliveries::{AttemptRecord, AttemptWrite, Next};
    AttemptWrite {
        job_id: delivery.job_id.clone().unwrap(),
        attempt: AttemptRecord {
            attempted_at: now,
            url: Some(delivery.url.clone()),
            status_code: 200,
            duration_ms: 4,
            response_excerpt: None,
            error: None,
        },
        delivery,
        next: Next::Succeeded,
        now,
    }
}

/// The home page's delivery outcomes of `business`'s test mode, its last failure left out.
async fn counted_deliveries(app: &TestApp, business: &BusinessId) -> store::home::Deliveries {
    let mut counted = store::home::deliveries(&app.db, business, Mode::Test)
        .await
        .unwrap();
    counted.last_failure = None;
    counted
}

/// A webhook round counts its moves in count rows no deposit round takes (m0029): while a
/// transaction holds the counts of a new delivery (a round of deposits commits its deliveries'
/// counts last, row by row), a round moving another delivery of the same business, day and shard
/// goes through at once instead of waiting for it, so the two can never deadlock. The figures are
/// still the rows once both have committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_webhook_round_never_waits_on_a_deposit_rounds_counts() {
    use sea_orm::{DatabaseTransaction, TransactionTrait};
    use store::home;

    let Some((app, business)) = app_with_webhooks().await else {
        return;
    };
    let event = async |db: &DatabaseTransaction| {
        store::events::record(
            db,
            &business,
            Mode::Test,
            EventType::WebhookTest,
            &json!({"message": "hello"}),
            Utc::now(),
        )
        .await
        .unwrap()
    };
    let delivery_of = async |db: &DatabaseTransaction, event_id: &str| {
        let d = store::deliveries::for_event(db, &domain::ids::EventId::unchecked(event_id))
            .await
            .unwrap()
            .remove(0)
            .0;
        let row = db
            .query_one_raw(sea_orm::Statement::from_sql_and_values(
                sea_orm::DbBackend::Postgres,
                "SELECT hashtext($1) & 15 AS shard",
                [d.id.as_str().into()],
            ))
            .await
            .unwrap()
            .unwrap();
        (d, row.try_get::<i32>("", "shard").unwrap())
    };
    let setup = app.db.begin().await.unwrap();
    let moved = event(&setup).await;
    let (moved, shard) = delivery_of(&setup, &moved.id).await;
    setup.commit().await.unwrap();

    // A deposit round's transaction: new deliveries until one falls in the same shard, their
    // counts taken now rather than at its commit.
    let round = app.db.begin().await.unwrap();
    let mut held = 0;
    loop {
        let e = event(&round).await;
        held += 1;
        if delivery_of(&round, &e.id).await.1 == shard {
            break;
        }
        assert!(held < 500, "no delivery in shard {shard}");
    }
    round
        .execute_unprepared("SET CONSTRAINTS ALL IMMEDIATE")
        .await
        .unwrap();

    let write = succeeded(moved, Utc::now());
    let recorded = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        store::deliveries::record_attempts(&app.db, std::slice::from_ref(&write)),
    )
    .await;
    round.commit().await.unwrap();
    assert_eq!(
        recorded
            .expect("the round waited on the deposit round's counts")
            .unwrap(),
        vec![true]
    );
    assert_eq!(
        counted_deliveries(&app, &business).await,
        home::Deliveries {
            succeeded: 1,
            waiting: held,
            ..Default::default()
        }
    );
}

/// A webhook round's moves go into one count shard (m0034): a round recording ten deliveries of
/// one business upserts its four figures (out of waiting, into succeeded; that day and over all
/// days) once, in one shard of the moves' range, where each delivery's own shard took up to
/// forty; and the figures are still the rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_webhook_rounds_moves_are_counted_in_one_shard() {
    let Some((app, business)) = app_with_webhooks().await else {
        return;
    };
    let now = Utc::now();
    let mut writes = Vec::new();
    for _ in 0..10 {
        let event = store::events::record(
            &app.db,
            &business,
            Mode::Test,
            EventType::WebhookTest,
            &json!({"message": "hello"}),
            now,
        )
        .await
        .unwrap();
        let delivery = store::deliveries::for_event(&app.db, &event.id)
            .await
            .unwrap()
            .remove(0)
            .0;
        writes.push(succeeded(delivery, now));
    }
    let recorded = store::deliveries::record_attempts(&app.db, &writes)
        .await
        .unwrap();
    assert_eq!(recorded, vec![true; 10]);

    let rows = app
        .db
        .query_all_raw(sea_orm::Statement::from_sql_and_values(
            sea_orm::DbBackend::Postgres,
            "SELECT shard, bucket, day, n FROM day_counts \
             WHERE business_id = $1 AND kind = 'deliveries' AND shard >= 16",
            [business.as_str().into()],
        ))
        .await
        .unwrap();
    let shards: std::collections::BTreeSet<i32> = rows
        .iter()
        .map(|r| r.try_get::<i32>("", "shard").unwrap())
        .collect();
    assert_eq!(
        shards.len(),
        1,
        "the round's moves went into shards {shards:?}"
    );
    assert!((16..32).contains(shards.first().unwrap()), "{shards:?}");
    let mut moves: Vec<(String, bool, i64)> = rows
        .iter()
        .map(|r| {
            let day: String = r.try_get("", "day").unwrap();
            (
                r.try_get("", "bucket").unwrap(),
                day.is_empty(),
                r.try_get("", "n").unwrap(),
            )
        })
        .collect();
    moves.sort();
    assert_eq!(
        moves,
        vec![
            ("succeeded".to_owned(), false, 10),
            ("succeeded".to_owned(), true, 10),
            ("waiting".to_owned(), false, -10),
            ("waiting".to_owned(), true, -10),
        ]
    );
    assert_eq!(
        counted_deliveries(&app, &business).await,
        store::home::Deliveries {
            succeeded: 10,
            ..Default::default()
        }
    );
}
