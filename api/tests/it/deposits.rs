//! Deposits as a caller sees them: simulated deposits through the sandbox, signed provider
//! notifications recorded exactly once, flagged deposits, rechecks and worker-recheck.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use outbound::providers::{Providers, SimulatedDeposit};
use reqwest::StatusCode;
use serde_json::{Value, json};
use test_support::store;
use test_support::{
    Backend, TestApp, account_body, eventually, id_of, json, spawn_app, spawn_app_with,
    start_recheck_worker,
};

test_support::on_both_databases!(
    a_simulated_deposit_is_credited_and_announced,
    a_simulated_deposit_is_stored_from_the_sandbox_answer,
    a_handed_over_notification_that_is_not_stored_is_sent_instead,
    a_handed_over_notification_nobody_stored_arrives_after_the_grace,
    money_to_a_deactivated_account_is_flagged,
    notifications_need_a_valid_signature,
    twelve_copies_of_a_notification_make_one_deposit,
    unknown_account_numbers_are_kept_as_unmatched,
    simulate_deposit_is_checked,
    a_lost_notification_is_found_by_the_first_recheck_only,
    rechecks_coalesce_and_check_their_window,
    a_recheck_racing_a_notification_records_once,
    a_recheck_fails_after_provider_errors,
);

async fn simulate(app: &TestApp, id: &str, body: Value) -> reqwest::Response {
    app.post(
        app.test_key(),
        &format!("/v1/virtual-accounts/{id}/simulate-deposit"),
        Some(&body),
    )
    .await
}

async fn deposits(app: &TestApp, id: &str) -> Value {
    app.get_json(
        app.test_key(),
        &format!("/v1/virtual-accounts/{id}/deposits"),
    )
    .await
}

async fn wait_for_deposits(app: &TestApp, id: &str, count: u64) -> Value {
    eventually(Duration::from_secs(15), async || {
        let list = deposits(app, id).await;
        if list["total"] == count {
            Ok(list)
        } else {
            Err(format!("{id}: {list}"))
        }
    })
    .await
}

/// A notification body as a bank sends it, and its signature with the sandbox's secret.
fn notification(
    app: &TestApp,
    account_number: &str,
    reference: &str,
    amount: i64,
) -> (String, String) {
    let body = json!({"event": "transfer.received", "data": {
        "reference": reference, "accountNumber": account_number, "amount": amount, "currency": "NGN",
        "senderName": "Bola Ade", "senderAccountNumber": "0011223344", "senderBankName": "GTBank",
        "narration": "invoice 7", "paidAt": "2026-11-25T10:00:00Z"}})
    .to_string();
    let signature = provider_sandbox::sign(&app.config.sandbox.secret, body.as_bytes());
    (body, signature)
}

async fn notify(
    app: &TestApp,
    bank: &str,
    body: &str,
    signature: Option<&str>,
) -> reqwest::Response {
    let mut req = app
        .client
        .post(app.url(&format!("/providers/{bank}/notifications")))
        .header("content-type", "application/json")
        .body(body.to_owned());
    if let Some(signature) = signature {
        req = req.header("X-Provider-Signature", signature);
    }
    req.send().await.unwrap()
}

async fn a_simulated_deposit_is_credited_and_announced(backend: Backend) {
    let app = spawn_app(backend).await;
    let account = app.active_account(app.test_key(), 1).await;
    let id = id_of(&account);
    let resp = simulate(
        &app,
        &id,
        json!({"amount": 150000, "senderName": "Bola Ade", "narration": "rent"}),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::ACCEPTED);
    let reference = json(resp).await["providerReference"]
        .as_str()
        .unwrap()
        .to_owned();
    let list = wait_for_deposits(&app, &id, 1).await;
    let deposit = &list["data"][0];
    assert!(deposit["id"].as_str().unwrap().starts_with("dep_"));
    assert_eq!(deposit["object"], "deposit");
    assert_eq!(deposit["accountId"], id.as_str());
    assert_eq!(deposit["status"], "credited");
    assert_eq!(deposit["amount"], 150000);
    assert_eq!(deposit["currency"], "NGN");
    assert_eq!(deposit["providerReference"], reference.as_str());
    assert_eq!(deposit["senderName"], "Bola Ade");
    assert_eq!(deposit["narration"], "rent");
    assert_eq!(deposit["source"], "notification");
    assert!(deposit["receivedAt"].is_string());
    let events = store::event_data_of_type(&app.db, "deposit.received")
        .await
        .into_iter()
        .filter(|data| {
            data["providerReference"] == reference.as_str() && data["account"].is_object()
        })
        .count();
    assert_eq!(
        events, 1,
        "deposit.received carries the deposit and its account"
    );
}

/// A sandbox of the test's own, signing with `secret`, whose notifications go to an inbox of the
/// test's rather than to the service: what it hands over and what it sends are told apart.
async fn sandbox_with_inbox(secret: &str) -> (String, Arc<Mutex<Vec<String>>>) {
    let inbox = Arc::new(Mutex::new(Vec::new()));
    let kept = inbox.clone();
    let receiver = axum::Router::new().route(
        "/providers/{bank}/notifications",
        axum::routing::post(async move |body: String| {
            kept.lock().unwrap().push(body);
            StatusCode::OK
        }),
    );
    let inbox_addr = test_support::http::serve(receiver).await;
    let config = ops::config::SandboxConfig {
        notify_url: Some(format!("http://{inbox_addr}")),
        secret: secret.to_owned(),
        // What the service does not confirm in a second is sent.
        handover_grace_secs: 1,
        ..ops::config::Config::default().sandbox
    };
    let (listener, _) = test_support::http::listener().await;
    let timeouts = ops::config::Config::default().http.server_timeouts();
    let addr = provider_sandbox::spawn(config, listener, timeouts)
        .await
        .unwrap();
    (format!("http://{addr}"), inbox)
}

/// `simulate-deposit` stores the notification the sandbox hands over in its answer: the
/// deposit is listed when the 202 arrives, though the sandbox sends the service nothing, then or
/// after its grace (the service confirmed it).
async fn a_simulated_deposit_is_stored_from_the_sandbox_answer(backend: Backend) {
    let secret = ops::config::Config::default().sandbox.secret;
    let (url, inbox) = sandbox_with_inbox(&secret).await;
    let app = spawn_app_with(backend, |c| c.sandbox.url = Some(url)).await;
    let id = id_of(&app.active_account(app.test_key(), 1).await);
    let resp = simulate(&app, &id, json!({"amount": 4200})).await;
    assert_eq!(resp.status(), StatusCode::ACCEPTED);
    let reference = json(resp).await["providerReference"].clone();
    let listed = deposits(&app, &id).await;
    assert_eq!(listed["total"], 1, "listed by the 202: {listed}");
    assert_eq!(listed["data"][0]["providerReference"], reference);
    assert_eq!(listed["data"][0]["source"], "notification");
    assert_eq!(
        store::count_notifications_for_reference(&app.db, "recorded", reference.as_str().unwrap())
            .await,
        1,
        "stored as the notification it is"
    );
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(
        inbox.lock().unwrap().is_empty(),
        "nothing was sent: the store was confirmed"
    );
}

/// A handed-over notification the service cannot store (here: signed with a secret it does not
/// hold) is sent by the sandbox instead, as a bank sends one, before the 202.
async fn a_handed_over_notification_that_is_not_stored_is_sent_instead(backend: Backend) {
    let (url, inbox) = sandbox_with_inbox("another secret").await;
    let app = spawn_app_with(backend, |c| c.sandbox.url = Some(url)).await;
    let id = id_of(&app.active_account(app.test_key(), 1).await);
    let resp = simulate(&app, &id, json!({"amount": 4300})).await;
    assert_eq!(resp.status(), StatusCode::ACCEPTED);
    let reference = json(resp).await["providerReference"].clone();
    let sent = inbox.lock().unwrap().clone();
    assert_eq!(sent.len(), 1, "sent before the answer");
    let sent: Value = serde_json::from_str(&sent[0]).unwrap();
    assert_eq!(sent["data"]["reference"], reference);
    assert_eq!(deposits(&app, &id).await["total"], 0, "nothing stored");
}

/// The service stopped between the sandbox's answer and storing what it handed over (here: a
/// control call made by the test, whose answer nobody stores or confirms): the sandbox sends the
/// notification after its grace, and the deposit is recorded all the same.
async fn a_handed_over_notification_nobody_stored_arrives_after_the_grace(backend: Backend) {
    let app = spawn_app_with(backend, |c| c.sandbox.handover_grace_secs = 1).await;
    let account = app.active_account(app.test_key(), 1).await;
    let deposit = SimulatedDeposit {
        bank: account["preferredBank"].as_str().unwrap().to_owned(),
        account_number: account["accountNumber"].as_str().unwrap().to_owned(),
        amount: 4400,
        sender_name: None,
        narration: None,
        notify: true,
        handover: true,
    };
    let simulated = Providers::from_config(&app.config)
        .simulate_deposit(&deposit)
        .await
        .expect("the sandbox takes the transfer");
    assert!(simulated.notification.is_some(), "handed over");
    let id = id_of(&account);
    assert_eq!(deposits(&app, &id).await["total"], 0);
    let list = wait_for_deposits(&app, &id, 1).await;
    assert_eq!(
        list["data"][0]["providerReference"],
        simulated.provider_reference.as_str()
    );
}

async fn money_to_a_deactivated_account_is_flagged(backend: Backend) {
    let app = spawn_app(backend).await;
    let id = id_of(&app.active_account(app.test_key(), 1).await);
    app.deactivate(app.test_key(), &id).await;
    assert_eq!(
        simulate(&app, &id, json!({"amount": 5000})).await.status(),
        StatusCode::ACCEPTED
    );
    let list = wait_for_deposits(&app, &id, 1).await;
    assert_eq!(list["data"][0]["status"], "flagged");
    assert_eq!(store::count_deposit_events(&app.db).await, (0, 1));
}

async fn notifications_need_a_valid_signature(backend: Backend) {
    let app = spawn_app(backend).await;
    let account = app.active_account(app.test_key(), 1).await;
    let (body, signature) = notification(
        &app,
        account["accountNumber"].as_str().unwrap(),
        "txn-sig",
        100,
    );
    let forged = provider_sandbox::sign("not-the-secret", body.as_bytes());
    for sig in [
        None,
        Some(forged.as_str()),
        Some("zz"),
        Some(&signature[..10]),
    ] {
        let resp = notify(&app, "test-bank", &body, sig).await;
        assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(json(resp).await["code"], "unauthorized");
    }
    // A body changed after signing fails too.
    let tampered = body.replace("\"amount\":100", "\"amount\":100000");
    assert_eq!(
        notify(&app, "test-bank", &tampered, Some(&signature))
            .await
            .status(),
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(store::count_notifications(&app.db).await, 0);
    assert_eq!(store::count_deposits(&app.db).await, 0);
    assert_eq!(
        notify(&app, "no-such-bank", &body, Some(&signature))
            .await
            .status(),
        StatusCode::NOT_FOUND
    );
    let resp = notify(&app, "test-bank", &body, Some(&signature)).await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(store::count_deposits(&app.db).await, 1);

    // Signed, but not a deposit: stored for operators as invalid and acknowledged (a 4xx would
    // only make the bank send it again); the bank's retries are stored once; nothing recorded.
    let number = account["accountNumber"].as_str().unwrap();
    let (reversal, signed) = notification(&app, number, "txn-reversal", -100);
    for _ in 0..3 {
        let resp = notify(&app, "test-bank", &reversal, Some(&signed)).await;
        assert_eq!(resp.status(), StatusCode::OK);
        assert_eq!(json(resp).await["outcome"], "invalid");
    }
    assert_eq!(
        store::count_notifications_mentioning(&app.db, "invalid", "txn-reversal").await,
        1
    );
    // NUL in free text (PostgreSQL text cannot hold it) is dropped, not a 500.
    let (with_nul, _) = notification(&app, number, "txn-nul", 100);
    let with_nul = with_nul.replace("Bola Ade", "Bola\\u0000Ade");
    let signed = provider_sandbox::sign(&app.config.sandbox.secret, with_nul.as_bytes());
    let resp = notify(&app, "test-bank", &with_nul, Some(&signed)).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let listed = deposits(&app, account["id"].as_str().unwrap()).await;
    assert!(
        listed["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["senderName"] == "BolaAde"),
        "{listed}"
    );
    assert_eq!(store::count_deposits(&app.db).await, 2);
    // Too large, however large: the same problem+json 413.
    let resp = notify(&app, "test-bank", &" ".repeat(70_000), Some(&signature)).await;
    assert_eq!(resp.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(json(resp).await["code"], "payload_too_large");
    // Megabytes are refused on their Content-Length, before the body is read: told over a raw
    // connection, because an HTTP client still writing the body may see the early close instead.
    let head = format!(
        "POST /providers/test-bank/notifications HTTP/1.1\r\nHost: {}\r\n\
         Content-Type: application/json\r\nX-Provider-Signature: {signature}\r\n\
         Content-Length: 3000000\r\nConnection: close\r\n\r\n",
        app.addr
    );
    let mut stream = tokio::net::TcpStream::connect(app.addr).await.unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut stream, head.as_bytes())
        .await
        .unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(
        Duration::from_secs(10),
        tokio::io::AsyncReadExt::read_to_end(&mut stream, &mut answer),
    )
    .await
    .expect("answered without the body")
    .unwrap();
    let answer = String::from_utf8_lossy(&answer).to_ascii_lowercase();
    assert!(answer.starts_with("http/1.1 413"), "{answer}");
    assert!(
        answer.contains("content-type: application/problem+json"),
        "{answer}"
    );
    assert!(answer.contains("payload_too_large"), "{answer}");
}

async fn twelve_copies_of_a_notification_make_one_deposit(backend: Backend) {
    let app = spawn_app(backend).await;
    let account = app.active_account(app.test_key(), 1).await;
    let (body, signature) = notification(
        &app,
        account["accountNumber"].as_str().unwrap(),
        "txn-dup",
        2500,
    );
    let mut tasks = Vec::new();
    for _ in 0..12 {
        let (client, url, body, signature) = (
            app.client.clone(),
            app.url("/v1/providers/test-bank/notifications"),
            body.clone(),
            signature.clone(),
        );
        tasks.push(tokio::spawn(async move {
            client
                .post(url)
                .header("content-type", "application/json")
                .header("X-Provider-Signature", signature)
                .body(body)
                .send()
                .await
                .unwrap()
                .status()
        }));
    }
    for task in tasks {
        assert_eq!(
            task.await.unwrap(),
            StatusCode::OK,
            "every copy is acknowledged"
        );
    }
    assert_eq!(deposits(&app, &id_of(&account)).await["total"], 1);
    assert_eq!(
        store::count_events_of_type(&app.db, "deposit.received").await,
        1
    );
    assert_eq!(
        store::count_notifications(&app.db).await,
        1,
        "the same body from the same bank is stored once"
    );
    assert_eq!(
        store::count_notifications_with_outcome(&app.db, "recorded").await,
        1
    );
}

async fn unknown_account_numbers_are_kept_as_unmatched(backend: Backend) {
    let app = spawn_app(backend).await;
    let (body, signature) = notification(&app, "0000000000", "txn-nobody", 700);
    let resp = notify(&app, "wema-bank", &body, Some(&signature)).await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(json(resp).await["outcome"], "unmatched");
    assert_eq!(
        store::count_notifications_for_reference(&app.db, "unmatched", "txn-nobody").await,
        1
    );
    assert_eq!(store::count_deposits(&app.db).await, 0);
}

async fn simulate_deposit_is_checked(backend: Backend) {
    let app = spawn_app(backend).await;
    let id = id_of(&app.active_account(app.test_key(), 1).await);
    for bad in [
        json!({}),
        json!({"amount": 0}),
        json!({"amount": -5}),
        json!({"amount": 1.5}),
        json!({"amount": "100"}),
        json!({"amount": 100, "colour": "red"}),
        json!({"amount": 100, "notify": "yes"}),
    ] {
        let resp = simulate(&app, &id, bad.clone()).await;
        assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY, "{bad}");
        assert_eq!(json(resp).await["code"], "validation_failed");
    }
    let pending = json(
        app.create(app.test_key(), "p", &account_body(2, "access-bank"))
            .await,
    )
    .await;
    let resp = simulate(&app, &id_of(&pending), json!({"amount": 100})).await;
    assert_eq!(resp.status(), StatusCode::CONFLICT);
    assert_eq!(
        simulate(&app, "va_nope", json!({"amount": 100}))
            .await
            .status(),
        StatusCode::NOT_FOUND
    );
    app.approve_kyb().await;
    let resp = app
        .post(
            app.live_key(),
            &format!("/v1/virtual-accounts/{id}/simulate-deposit"),
            Some(&json!({"amount": 100})),
        )
        .await;
    assert_eq!(resp.status(), StatusCode::FORBIDDEN);
    assert_eq!(json(resp).await["code"], "test_mode_only");
}

/// Polls the recheck until it is completed or failed.
async fn wait_recheck(app: &TestApp, account_id: &str, recheck_id: &str) -> Value {
    eventually(Duration::from_secs(30), async || {
        let recheck = app
            .get_json(
                app.test_key(),
                &format!("/v1/virtual-accounts/{account_id}/rechecks/{recheck_id}"),
            )
            .await;
        if recheck["status"] == "completed" || recheck["status"] == "failed" {
            Ok(recheck)
        } else {
            Err(recheck)
        }
    })
    .await
}

async fn recheck(app: &TestApp, id: &str, body: Option<Value>) -> reqwest::Response {
    app.post(
        app.test_key(),
        &format!("/v1/virtual-accounts/{id}/recheck"),
        body.as_ref(),
    )
    .await
}

async fn a_lost_notification_is_found_by_the_first_recheck_only(backend: Backend) {
    let app = spawn_app(backend).await;
    let _worker = start_recheck_worker(&app, app.shutdown.clone());
    let id = id_of(&app.active_account(app.test_key(), 1).await);
    let resp = simulate(&app, &id, json!({"amount": 99000, "notify": false})).await;
    let reference = json(resp).await["providerReference"]
        .as_str()
        .unwrap()
        .to_owned();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        deposits(&app, &id).await["total"],
        0,
        "the notification was lost"
    );

    let resp = recheck(&app, &id, None).await;
    assert_eq!(resp.status(), StatusCode::ACCEPTED);
    let first = json(resp).await;
    assert!(first["id"].as_str().unwrap().starts_with("rck_"));
    assert_eq!(first["object"], "recheck");
    assert_eq!(first["accountId"], id.as_str());
    assert!(first["depositsFound"].is_null());
    let done = wait_recheck(&app, &id, first["id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "completed");
    assert_eq!(done["depositsFound"], 1);
    assert!(done["completedAt"].is_string());
    let list = deposits(&app, &id).await;
    assert_eq!(list["data"][0]["providerReference"], reference.as_str());
    assert_eq!(list["data"][0]["source"], "recheck");
    assert_eq!(
        store::count_events_of_type(&app.db, "deposit.received").await,
        1
    );

    let second = json(recheck(&app, &id, None).await).await;
    assert_ne!(second["id"], first["id"]);
    let done = wait_recheck(&app, &id, second["id"].as_str().unwrap()).await;
    assert_eq!(done["depositsFound"], 0);
    assert_eq!(deposits(&app, &id).await["total"], 1);
}

async fn rechecks_coalesce_and_check_their_window(backend: Backend) {
    let app = spawn_app(backend).await;
    let id = id_of(&app.active_account(app.test_key(), 1).await);
    // No worker runs: the first stays queued and the second request is given it.
    let first = json(recheck(&app, &id, None).await).await;
    assert_eq!(first["status"], "queued");
    let again = recheck(
        &app,
        &id,
        Some(json!({"from": "2026-11-01T00:00:00Z", "to": "2026-11-02T00:00:00Z"})),
    )
    .await;
    assert_eq!(again.status(), StatusCode::ACCEPTED);
    assert_eq!(json(again).await["id"], first["id"]);
    let to = first["to"].as_str().unwrap();
    let from = chrono::DateTime::parse_from_rfc3339(to).unwrap() - chrono::Duration::hours(24);
    assert_eq!(
        chrono::DateTime::parse_from_rfc3339(first["from"].as_str().unwrap()).unwrap(),
        from,
        "default window: 24 hours"
    );

    let other = id_of(&app.active_account(app.test_key(), 2).await);
    for bad in [
        json!({"from": "2026-11-02T00:00:00Z", "to": "2026-11-01T00:00:00Z"}),
        json!({"from": "2026-09-01T00:00:00Z", "to": "2026-10-03T00:00:00Z"}),
        json!({"from": "yesterday"}),
        json!({"to": "2999-01-01T00:00:00Z"}),
        json!({"since": "2026-11-01T00:00:00Z"}),
    ] {
        let resp = recheck(&app, &other, Some(bad.clone())).await;
        assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY, "{bad}");
    }
    let ok = recheck(
        &app,
        &other,
        Some(json!({"from": "2026-10-01T00:00:00Z", "to": "2026-10-31T23:00:00Z"})),
    )
    .await;
    assert_eq!(ok.status(), StatusCode::ACCEPTED, "a 31-day window is fine");

    let pending = json(
        app.create(app.test_key(), "p", &account_body(3, "access-bank"))
            .await,
    )
    .await;
    let resp = recheck(&app, &id_of(&pending), None).await;
    assert_eq!(resp.status(), StatusCode::CONFLICT);
    assert_eq!(json(resp).await["code"], "invalid_state");
    let resp = app
        .get(
            app.test_key(),
            &format!("/v1/virtual-accounts/{id}/rechecks/rck_nope"),
        )
        .await;
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    let resp = app
        .get(
            app.test_key(),
            &format!(
                "/v1/virtual-accounts/{other}/rechecks/{}",
                first["id"].as_str().unwrap()
            ),
        )
        .await;
    assert_eq!(
        resp.status(),
        StatusCode::NOT_FOUND,
        "a recheck is read through its own account"
    );
}

async fn a_recheck_racing_a_notification_records_once(backend: Backend) {
    let app = spawn_app(backend).await;
    let _worker = start_recheck_worker(&app, app.shutdown.clone());
    let id = id_of(&app.active_account(app.test_key(), 1).await);
    simulate(&app, &id, json!({"amount": 4200, "notify": true})).await;
    let r = json(recheck(&app, &id, None).await).await;
    wait_recheck(&app, &id, r["id"].as_str().unwrap()).await;
    wait_for_deposits(&app, &id, 1).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(deposits(&app, &id).await["total"], 1);
    assert_eq!(
        store::count_events_of_type(&app.db, "deposit.received").await,
        1
    );
}

async fn a_recheck_fails_after_provider_errors(backend: Backend) {
    let app = spawn_app(backend).await;
    let id = id_of(&app.active_account(app.test_key(), 1).await);
    // A worker whose bank is unreachable.
    let mut config = app.config.clone();
    config.sandbox.url = Some("http://127.0.0.1:9".into());
    config.recheck.max_attempts = 2;
    config.recheck.initial_retry_secs = 1;
    let parts = bootstrap::WorkerParts {
        db: app.db.clone(),
        cipher: std::sync::Arc::new(app.cipher()),
        broker: app.broker.clone(),
        relay: app.relay.clone(),
        shutdown: app.shutdown.clone(),
    };
    tokio::spawn(worker_recheck::run_with(config, parts));
    let r = json(recheck(&app, &id, None).await).await;
    let done = wait_recheck(&app, &id, r["id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "failed");
    assert!(
        done["failureReason"].as_str().unwrap().contains("2 tries"),
        "{done}"
    );
    assert!(done["depositsFound"].is_null());
}
