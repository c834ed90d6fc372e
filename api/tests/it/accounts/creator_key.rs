//! The key that created an account (docs/dashboard.md audits changes made through the API; a
//! creation is recorded on the account itself): its id on the account's row, never in the account
//! object.

use ::store::keys::{self, KeyAction, KeyChange};
use domain::Mode;
use domain::keys::KeyGrace;
use reqwest::StatusCode;
use serde_json::Value;
use test_support::{Backend, TestApp, account_body, json, spawn_app, store};

test_support::on_both_databases!(an_account_records_the_key_that_created_it);

/// Creates with `key`: the status, whether it was a replay, and the account.
async fn create(
    app: &TestApp,
    key: &str,
    idempotency_key: &str,
    body: &Value,
) -> (StatusCode, bool, Value) {
    let resp = app.create(key, idempotency_key, body).await;
    let status = resp.status();
    let replayed = resp.headers().contains_key("idempotent-replayed");
    (status, replayed, json(resp).await)
}

async fn an_account_records_the_key_that_created_it(backend: Backend) {
    let app = spawn_app(backend).await;
    let first_key = app.test_key().to_owned();
    let first_id = store::key_id_of(&app.db, &first_key).await;
    let body = account_body(1, "test-bank");
    let (status, _, account) = create(&app, &first_key, "k-1", &body).await;
    assert_eq!(status, StatusCode::CREATED);
    let id = account["id"].as_str().unwrap().to_owned();
    assert_eq!(
        store::account_created_by_key(&app.db, &id).await,
        Some(first_id.clone())
    );
    assert!(
        !account.to_string().contains(first_id.as_str()),
        "the key's id is not in the account object: {account}"
    );

    // Rolled with an hour's grace: the old key still works beside the new one.
    let grace = KeyGrace::from_secs(3600).unwrap();
    let change = keys::change(
        &app.db,
        &app.business.id,
        Mode::Test,
        KeyAction::Roll(grace),
        domain::time::now(),
    )
    .await
    .unwrap();
    let Some(KeyChange::Rolled(rolled)) = change else {
        panic!("not a roll: {change:?}");
    };
    let new_key = rolled.secret_key;
    let new_id = store::key_id_of(&app.db, &new_key).await;
    assert_ne!(new_id, first_id);

    // The same request again with the new key, then the same customer under another
    // Idempotency-Key: the first account each time, still the first key's.
    let (status, replayed, again) = create(&app, &new_key, "k-1", &body).await;
    assert_eq!(
        (status, replayed, &again["id"]),
        (StatusCode::CREATED, true, &account["id"])
    );
    let (status, replayed, again) = create(&app, &new_key, "k-2", &body).await;
    assert_eq!(
        (status, replayed, &again["id"]),
        (StatusCode::OK, false, &account["id"])
    );
    assert_eq!(
        store::account_created_by_key(&app.db, &id).await,
        Some(first_id.clone())
    );

    // Created after the roll: by the new key (answered now or later), or by the old one while it
    // still works.
    for (n, key, bank, expected_status, expected_id) in [
        (2, &new_key, "test-bank", StatusCode::CREATED, &new_id),
        (3, &new_key, "access-bank", StatusCode::ACCEPTED, &new_id),
        (4, &first_key, "test-bank", StatusCode::CREATED, &first_id),
    ] {
        let (status, _, created) = create(
            &app,
            key,
            &format!("after-roll-{n}"),
            &account_body(n, bank),
        )
        .await;
        assert_eq!(status, expected_status, "{bank}: {created}");
        let created = created["id"].as_str().unwrap();
        assert_eq!(
            store::account_created_by_key(&app.db, created)
                .await
                .as_ref(),
            Some(expected_id),
            "account {n}"
        );
    }
}
