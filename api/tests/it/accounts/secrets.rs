//! What must stay secret: identity numbers, keys and webhook secrets never reach a response, a
//! log line or the database in plain text; re-encryption after a key rotation retires the old key.

use reqwest::StatusCode;
use serde_json::{Value, json};
use test_support::{Backend, account_body, captured_logs, spawn_app, store};

test_support::on_both_databases!(
    secrets_never_leave_in_plain_text,
    reencrypting_after_a_key_rotation_retires_the_old_key,
);

async fn secrets_never_leave_in_plain_text(backend: Backend) {
    let app = spawn_app(backend).await;
    let bvn = format!("{:011}", 31_400_000_000u64 + u64::from(rand_u16()));
    let nin = format!("{:011}", 41_500_000_000u64 + u64::from(rand_u16()));
    let mut body = account_body(1, "test-bank");
    body["customerBvn"] = json!(bvn);
    let mut with_nin = account_body(2, "access-bank");
    with_nin.as_object_mut().unwrap().remove("customerBvn");
    with_nin["customerNin"] = json!(nin);

    let mut seen = String::new();
    for (key, b) in [("k1", &body), ("k2", &with_nin)] {
        let resp = app.create(app.test_key(), key, b).await;
        seen.push_str(&format!("{:?}", resp.headers()));
        seen.push_str(&resp.text().await.unwrap());
    }
    seen.push_str(
        &app.get(app.test_key(), "/v1/virtual-accounts")
            .await
            .text()
            .await
            .unwrap(),
    );
    let mut bad = body.clone();
    bad["customerEmail"] = json!("nope");
    seen.push_str(
        &app.create(app.test_key(), "k3", &bad)
            .await
            .text()
            .await
            .unwrap(),
    );
    assert!(seen.contains("va_"), "responses were read");
    for secret in [&bvn, &nin] {
        assert!(
            !seen.contains(secret.as_str()),
            "an identity number reached a response"
        );
    }

    let logs = captured_logs();
    assert!(logs.contains("account created"), "logs were captured");
    for secret in [
        &bvn,
        &nin,
        &app.business.test.secret_key,
        &app.business.test.webhook_secret,
    ] {
        assert!(!logs.contains(secret.as_str()), "a secret reached the logs");
    }

    let raw = app.test_db.raw_contents();
    let raw = String::from_utf8_lossy(&raw);
    assert!(raw.contains("Ada Obi 1"), "the raw dump holds the data");
    for secret in [
        &bvn,
        &nin,
        &app.business.test.secret_key,
        &app.business.live.secret_key,
        &app.business.test.webhook_secret,
        &app.business.live.webhook_secret,
    ] {
        assert!(
            !raw.contains(secret.as_str()),
            "a secret is stored in plain text"
        );
    }
    let webhook_b64 = app
        .business
        .test
        .webhook_secret
        .trim_start_matches("whsec_");
    assert!(!raw.contains(webhook_b64));
}

async fn reencrypting_after_a_key_rotation_retires_the_old_key(backend: Backend) {
    use ::store::{accounts, businesses, reencrypt};
    use crypto::Cipher;
    use domain::Mode;
    use entities::{business_mode, virtual_account};
    use sea_orm::EntityTrait;

    let app = spawn_app(backend).await;
    let mut identities = Vec::new();
    for n in 1..=2u32 {
        let mut body = account_body(n, "test-bank");
        if n == 2 {
            body.as_object_mut().unwrap().remove("customerBvn");
            body["customerNin"] = json!("41500000002");
        }
        let resp = app.create(app.test_key(), &format!("k{n}"), &body).await;
        assert_eq!(resp.status(), StatusCode::CREATED);
        identities.push(
            body.get("customerBvn")
                .or(body.get("customerNin"))
                .and_then(Value::as_str)
                .unwrap()
                .to_owned(),
        );
    }
    let old = Cipher::new(&app.crypto_key, &[]).unwrap();
    // A webhook secret rotation leaves a previous secret beside the current one.
    let rotated_secret = app.rotate_test_webhook_secret().await;
    let old_prefix = old.current_prefix();
    assert_eq!(
        store::secrets_sealed_with(&app.db, &old_prefix).await,
        5,
        "2 identities, 3 webhook secrets"
    );

    let new_key = Cipher::generate_key();
    let rotating = Cipher::new(&new_key, std::slice::from_ref(&app.crypto_key)).unwrap();
    let dry = reencrypt::run(&app.db, &rotating, true).await.unwrap();
    assert_eq!((dry.identities, dry.webhook_secrets), (2, 3));
    assert_eq!(
        store::secrets_sealed_with(&app.db, &old_prefix).await,
        5,
        "a dry run changes nothing"
    );

    let report = reencrypt::run(&app.db, &rotating, false).await.unwrap();
    assert_eq!((report.identities, report.webhook_secrets), (2, 3));
    assert!(report.complete(), "{report:?}");
    assert_eq!(report.key_id, rotating.key_id());
    assert_eq!(store::secrets_sealed_with(&app.db, &old_prefix).await, 0);
    let again = reencrypt::run(&app.db, &rotating, false).await.unwrap();
    assert_eq!((again.identities, again.webhook_secrets), (0, 0));

    // The old key is retired: everything opens with the new key alone.
    let new_only = Cipher::new(&new_key, &[]).unwrap();
    let mut accounts_seen = virtual_account::Entity::find().all(&app.db).await.unwrap();
    accounts_seen.sort_by(|a, b| a.customer_name.cmp(&b.customer_name));
    let revealed: Vec<String> = accounts_seen
        .iter()
        .map(|a| accounts::reveal_identity(&new_only, a).unwrap())
        .collect();
    assert_eq!(revealed, identities);
    let test_mode =
        business_mode::Entity::find_by_id((app.business.id.clone(), domain::Mode::Test))
            .one(&app.db)
            .await
            .unwrap()
            .unwrap();
    let context = businesses::webhook_secret_context(&app.business.id, Mode::Test);
    assert_eq!(
        new_only
            .decrypt(&test_mode.webhook_secret_enc, &context)
            .unwrap(),
        rotated_secret
    );
    assert_eq!(
        new_only
            .decrypt(
                test_mode.previous_webhook_secret_enc.as_deref().unwrap(),
                &context
            )
            .unwrap(),
        app.business.test.webhook_secret
    );

    // A run with a key that opens nothing leaves everything as it is and says what it could not
    // read.
    let stranger = Cipher::new(&Cipher::generate_key(), &[]).unwrap();
    let refused = reencrypt::run(&app.db, &stranger, false).await.unwrap();
    assert!(!refused.complete());
    assert_eq!((refused.identities, refused.webhook_secrets), (0, 0));
    assert_eq!(refused.unreadable.len(), 5, "{:?}", refused.unreadable);
    assert!(
        refused
            .unreadable
            .iter()
            .filter(|r| r.starts_with("va_"))
            .count()
            == 2
    );
    let still = virtual_account::Entity::find().all(&app.db).await.unwrap();
    assert!(
        still
            .iter()
            .all(|a| accounts::reveal_identity(&new_only, a).is_ok())
    );
}

fn rand_u16() -> u16 {
    (std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos()
        % 60_000) as u16
}
