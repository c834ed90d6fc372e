//! Stored enumerations are read as the domain's types: a status, mode, bank or identity type that
//! is none of them is an error when its row is read, never a silently chosen default.

use domain::ids::KeyId;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::Value;
use test_support::{Backend, TestApp, account_body, spawn_app, start_provisioning_worker, store};

test_support::on_both_databases!(
    an_unknown_status_is_an_error_not_shown,
    an_unknown_identity_type_is_never_opened_as_a_bvn,
);

async fn json(resp: reqwest::Response) -> Value {
    resp.json().await.expect("JSON body")
}

async fn corrupt(app: &TestApp, column: &str, value: &str, id: &str) {
    store::corrupt_account_column(&app.db, id, column, value).await;
}

async fn an_unknown_status_is_an_error_not_shown(backend: Backend) {
    let app = spawn_app(backend).await;
    let created = json(
        app.create(app.test_key(), "k", &account_body(1, "test-bank"))
            .await,
    )
    .await;
    let id = created["id"].as_str().unwrap();
    // A value no version of the service writes (a hand edit, a newer version's state).
    corrupt(&app, "status", "archived", id).await;
    for path in [
        format!("/v1/virtual-accounts/{id}"),
        "/v1/virtual-accounts".to_owned(),
    ] {
        let resp = app.get(app.test_key(), &path).await;
        assert_eq!(resp.status(), StatusCode::INTERNAL_SERVER_ERROR, "{path}");
        let body = json(resp).await;
        assert_eq!(body["code"], "internal_error", "{path}: {body}");
        assert!(
            !body.to_string().contains("archived"),
            "{path}: not shown to the caller: {body}"
        );
    }
}

/// The provisioning worker opens an account with the stored identity type. One it cannot read
/// used to be sent as a BVN; now the job fails (and says why) and nothing reaches the bank.
async fn an_unknown_identity_type_is_never_opened_as_a_bvn(backend: Backend) {
    use ::store::accounts::{self, CreateOutcome, CreateRequest};
    use crypto::Cipher;
    use domain::{Mode, NewAccount};

    let app = spawn_app(backend).await;
    let cipher = Cipher::new(&app.crypto_key, &[]).unwrap();
    let body = account_body(1, "test-bank");
    let account = NewAccount::parse(body.as_object().unwrap(), Mode::Test).unwrap();
    // Written as the API writes it, without the API's own call to the bank: the worker opens it.
    let (outcome, _) = accounts::create(
        &app.db,
        &cipher,
        &CreateRequest {
            business_id: &app.business.id,
            business_name: &app.business.name,
            mode: Mode::Test,
            key_id: &KeyId::unchecked("key_test"),
            idempotency_key: "k",
            request: &crypto::RequestDigest::new(&cipher, "{}"),
            account: &account,
            limit_per_hour: 500,
            provider_grace: chrono::Duration::zero(),
        },
        domain::time::now(),
    )
    .await
    .unwrap();
    let CreateOutcome::Started { account, job_id } = outcome else {
        panic!("not started: {outcome:?}");
    };
    corrupt(&app, "identity_type", "passport", &account.id).await;

    let _worker = start_provisioning_worker(&app, app.shutdown.clone());
    app.relay.kick();
    let started = Instant::now();
    while !store::job(&app.db, &job_id)
        .await
        .last_error
        .is_some_and(|e| e.contains("passport"))
    {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the job never reported the unreadable identity type"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        store::account_status_and_number(&app.db, &account.id).await,
        ("pending".to_owned(), None),
        "still pending, no number"
    );
    let at_bank = app
        .client
        .get(format!(
            "{}/test-bank/accounts/{}",
            app.sandbox_url, account.id
        ))
        .bearer_auth(&app.config.sandbox.key)
        .send()
        .await
        .unwrap();
    assert_eq!(at_bank.status(), StatusCode::NOT_FOUND, "never opened");
}
