//! The accounts API as a caller sees it, on SQLite and on PostgreSQL.

mod common;

use common::{Backend, account_body, spawn_app, spawn_app_with, start_instance};
use domain::nuban;
use reqwest::StatusCode;
use serde_json::{Value, json};

on_both_databases!(
    test_bank_answers_201_with_a_valid_nuban,
    provider_banks_answer_202_and_leave_a_provisioning_job,
    every_field_error_is_listed_in_one_422,
    bad_headers_and_bodies_get_their_problem,
    every_bad_key_gets_the_same_401,
    live_keys_wait_for_kyb_and_modes_never_mix,
    browsers_are_refused_and_no_cors_headers_are_sent,
    replays_return_the_first_status_and_create_nothing,
    sixty_parallel_requests_with_one_key_create_one_account,
    customer_reference_returns_the_live_account,
    the_hourly_limit_is_exact_under_concurrency,
    listing_pages_searches_and_filters,
    deactivation_is_idempotent_and_refuses_failed_accounts,
    request_ids_are_echoed_or_generated,
    problems_are_documented,
    secrets_never_leave_in_plain_text,
    reencrypting_after_a_key_rotation_retires_the_old_key,
);

async fn json(resp: reqwest::Response) -> Value {
    resp.json().await.expect("JSON body")
}

async fn test_bank_answers_201_with_a_valid_nuban(backend: Backend) {
    let app = spawn_app(backend).await;
    let resp = app
        .create(app.test_key(), "k-1", &account_body(1, "test-bank"))
        .await;
    assert_eq!(resp.status(), StatusCode::CREATED);
    let account = json(resp).await;
    assert!(account["id"].as_str().unwrap().starts_with("va_"));
    assert_eq!(account["object"], "virtual_account");
    assert_eq!(account["mode"], "test");
    assert_eq!(account["status"], "active");
    assert_eq!(account["accountName"], "Acme Ltd/Ada Obi 1");
    assert_eq!(account["bankName"], "Test Bank");
    assert_eq!(account["customerPhone"], "+2348031234567");
    assert_eq!(account["identityType"], "bvn");
    assert!(account["activatedAt"].is_string());
    assert!(account["deactivatedAt"].is_null());
    let number = account["accountNumber"].as_str().unwrap();
    assert!(
        nuban::is_valid("999", number),
        "{number} has a bad check digit"
    );

    // The same account at both paths.
    for path in ["/virtual-accounts/", "/v1/virtual-accounts/"] {
        let got = app
            .get(
                app.test_key(),
                &format!("{path}{}", account["id"].as_str().unwrap()),
            )
            .await;
        assert_eq!(got.status(), StatusCode::OK);
        assert_eq!(json(got).await, account);
    }
}

async fn provider_banks_answer_202_and_leave_a_provisioning_job(backend: Backend) {
    let app = spawn_app(backend).await;
    for (n, bank) in ["access-bank", "titan-trust-bank"].iter().enumerate() {
        let resp = app
            .create(
                app.test_key(),
                &format!("k-{n}"),
                &account_body(n as u32, bank),
            )
            .await;
        assert_eq!(resp.status(), StatusCode::ACCEPTED, "{bank}");
        let account = json(resp).await;
        assert_eq!(account["status"], "pending");
        assert!(account["accountNumber"].is_null());
        assert_eq!(account["preferredBank"], *bank);
        let id = account["id"].as_str().unwrap();
        let jobs = app
            .count(&format!(
                "SELECT COUNT(*) FROM outbox WHERE queue = 'provisioning' AND completed_at IS NULL \
                 AND payload LIKE '%{id}%'"
            ))
            .await;
        assert_eq!(jobs, 1, "one open provisioning job for {id}");
    }
    // Wema Bank numbers at once, like the test bank; its job is already done.
    let resp = app
        .create(app.test_key(), "k-wema", &account_body(9, "wema-bank"))
        .await;
    assert_eq!(resp.status(), StatusCode::CREATED);
    let account = json(resp).await;
    assert!(nuban::is_valid(
        "035",
        account["accountNumber"].as_str().unwrap()
    ));
    assert_eq!(account["bankName"], "Wema Bank");
    let open = app
        .count(
            "SELECT COUNT(*) FROM outbox WHERE completed_at IS NULL AND payload LIKE '%provision%'",
        )
        .await;
    assert_eq!(open, 2);
}

async fn every_field_error_is_listed_in_one_422(backend: Backend) {
    let app = spawn_app(backend).await;
    let resp = app
        .create(
            app.test_key(),
            "k",
            &json!({"customerName": " ", "customerEmail": "ada@", "customerPhone": "+4478031234567",
                    "customerBvn": "123", "customerNin": 5, "preferredBank": "gtbank", "extra": true}),
        )
        .await;
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(resp.headers()["content-type"], "application/problem+json");
    let problem = json(resp).await;
    assert_eq!(problem["code"], "validation_failed");
    assert_eq!(problem["type"], "/problems/validation_failed");
    let fields: Vec<&str> = problem["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap())
        .collect();
    for f in [
        "extra",
        "customerName",
        "customerEmail",
        "customerPhone",
        "customerBvn",
        "customerNin",
        "preferredBank",
    ] {
        assert!(fields.contains(&f), "{f} missing from {fields:?}");
    }
    assert_eq!(app.count("SELECT COUNT(*) FROM virtual_accounts").await, 0);

    // test-bank exists only in test mode.
    app.approve_kyb().await;
    let resp = app
        .create(app.live_key(), "k2", &account_body(1, "test-bank"))
        .await;
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let problem = json(resp).await;
    assert_eq!(problem["errors"][0]["field"], "preferredBank");
}

async fn bad_headers_and_bodies_get_their_problem(backend: Backend) {
    let app = spawn_app(backend).await;
    let url = app.url("/v1/virtual-accounts");
    let body = account_body(1, "test-bank").to_string();
    let cases: Vec<(reqwest::RequestBuilder, u16, &str)> = vec![
        (
            app.client
                .post(&url)
                .header("content-type", "application/json")
                .body(body.clone()),
            400,
            "idempotency_key_missing",
        ),
        (
            app.client
                .post(&url)
                .header("Idempotency-Key", "")
                .header("content-type", "application/json")
                .body(body.clone()),
            400,
            "idempotency_key_invalid",
        ),
        (
            app.client
                .post(&url)
                .header("Idempotency-Key", "x".repeat(201))
                .header("content-type", "application/json")
                .body(body.clone()),
            400,
            "idempotency_key_invalid",
        ),
        (
            app.client
                .post(&url)
                .header("Idempotency-Key", "k")
                .header("content-type", "application/json")
                .body("{not json"),
            400,
            "invalid_json",
        ),
        (
            app.client
                .post(&url)
                .header("Idempotency-Key", "k")
                .header("content-type", "application/json")
                .body("[1,2]"),
            400,
            "invalid_json",
        ),
        (
            app.client
                .post(&url)
                .header("Idempotency-Key", "k")
                .header("content-type", "text/plain")
                .body(body.clone()),
            415,
            "unsupported_media_type",
        ),
        (
            app.client
                .post(&url)
                .header("Idempotency-Key", "k")
                .header("content-type", "application/json")
                .body(format!("{{\"customerName\":\"{}\"}}", "x".repeat(70_000))),
            413,
            "payload_too_large",
        ),
        (app.client.delete(&url), 405, "method_not_allowed"),
        (
            app.client.get(app.url("/v1/nothing-here")),
            404,
            "not_found",
        ),
        // A path segment that is not UTF-8 once decoded names nothing.
        (
            app.client.get(app.url("/v1/virtual-accounts/%FF%FE")),
            404,
            "not_found",
        ),
        (
            app.client
                .get(app.url("/v1/virtual-accounts/va_x/rechecks/%C3%28")),
            404,
            "not_found",
        ),
        (app.client.get(app.url("/v1/events/%80")), 404, "not_found"),
        // NUL is UTF-8, but PostgreSQL text cannot hold it: still a clear answer, never a 500.
        (
            app.client.get(app.url("/v1/virtual-accounts/va_%00")),
            404,
            "not_found",
        ),
        (
            app.client
                .post(app.url("/v1/virtual-accounts/%00/deactivate")),
            404,
            "not_found",
        ),
        (
            app.client.get(app.url("/v1/virtual-accounts?q=a%00b")),
            422,
            "validation_failed",
        ),
        (
            app.client.get(app.url("/v1/problems/%FF")),
            404,
            "not_found",
        ),
    ];
    for (req, status, code) in cases {
        let resp = req.bearer_auth(app.test_key()).send().await.unwrap();
        assert_eq!(resp.status().as_u16(), status, "{code}");
        assert_eq!(
            resp.headers()["content-type"],
            "application/problem+json",
            "{code}"
        );
        let problem = json(resp).await;
        assert_eq!(problem["code"], code);
        assert_eq!(problem["status"], status);
    }
    // A key of exactly 200 characters is fine.
    let resp = app
        .create(
            app.test_key(),
            &"y".repeat(200),
            &account_body(1, "test-bank"),
        )
        .await;
    assert_eq!(resp.status(), StatusCode::CREATED);
}

async fn every_bad_key_gets_the_same_401(backend: Backend) {
    let app = spawn_app(backend).await;
    use sea_orm::ConnectionTrait;
    let unknown = domain::keys::generate_secret_key(domain::Mode::Test);
    // A revoked key is refused like one that never existed.
    app.db
        .execute_unprepared(&format!(
            "UPDATE business_modes SET key_revoked_at = CURRENT_TIMESTAMP \
             WHERE business_id = '{}' AND mode = 'live'",
            app.business.id
        ))
        .await
        .unwrap();
    let mut bodies = Vec::new();
    for auth in [
        None,
        Some("Bearer".to_owned()),
        Some("Basic abc".to_owned()),
        Some("Bearer sk_test_short".to_owned()),
        Some(format!("Bearer {unknown}")),
        Some(format!("Bearer {}", app.live_key())),
    ] {
        let mut req = app.client.get(app.url("/v1/virtual-accounts"));
        if let Some(auth) = auth {
            req = req.header("Authorization", auth);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
        let mut problem = json(resp).await;
        problem.as_object_mut().unwrap().remove("requestId");
        bodies.push(problem);
    }
    assert!(
        bodies.windows(2).all(|w| w[0] == w[1]),
        "401s differ: {bodies:?}"
    );
    assert_eq!(bodies[0]["code"], "unauthorized");
    // The scheme's name is case-insensitive.
    let resp = app
        .client
        .get(app.url("/v1/virtual-accounts"))
        .header("Authorization", format!("bearer {}", app.test_key()))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
}

async fn live_keys_wait_for_kyb_and_modes_never_mix(backend: Backend) {
    let app = spawn_app(backend).await;
    let resp = app.get(app.live_key(), "/v1/virtual-accounts").await;
    assert_eq!(resp.status(), StatusCode::FORBIDDEN);
    assert_eq!(json(resp).await["code"], "kyb_not_approved");

    let test_account = json(
        app.create(app.test_key(), "k", &account_body(1, "test-bank"))
            .await,
    )
    .await;
    app.approve_kyb().await;
    let resp = app
        .create(app.live_key(), "k", &account_body(1, "wema-bank"))
        .await;
    assert_eq!(
        resp.status(),
        StatusCode::ACCEPTED,
        "the same idempotency key is free in the other mode"
    );
    let live_account = json(resp).await;
    assert_eq!(live_account["mode"], "live");

    let id = test_account["id"].as_str().unwrap();
    let resp = app
        .get(app.live_key(), &format!("/v1/virtual-accounts/{id}"))
        .await;
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    let resp = app
        .post(
            app.live_key(),
            &format!("/v1/virtual-accounts/{id}/deactivate"),
            None,
        )
        .await;
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    let list = json(app.get(app.live_key(), "/v1/virtual-accounts").await).await;
    assert_eq!(list["total"], 1);
    assert_eq!(list["data"][0]["id"], live_account["id"]);

    // Another business sees neither.
    let cipher = shared::crypto::Cipher::new(&app.crypto_key, &[]).unwrap();
    let other =
        shared::db::businesses::create(&app.db, &cipher, "Other", domain::KybStatus::Approved)
            .await
            .unwrap();
    let resp = app
        .get(
            &other.test.secret_key,
            &format!("/v1/virtual-accounts/{id}"),
        )
        .await;
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    assert_eq!(
        json(
            app.get(&other.test.secret_key, "/v1/virtual-accounts")
                .await
        )
        .await["total"],
        0
    );
}

async fn browsers_are_refused_and_no_cors_headers_are_sent(backend: Backend) {
    let app = spawn_app(backend).await;
    let resp = app
        .client
        .get(app.url("/v1/virtual-accounts"))
        .bearer_auth(app.test_key())
        .header("Origin", "https://shop.example.com")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::FORBIDDEN);
    assert!(
        resp.headers()
            .keys()
            .all(|h| !h.as_str().starts_with("access-control-"))
    );
    assert_eq!(json(resp).await["code"], "browser_request_refused");
    let preflight = app
        .client
        .request(reqwest::Method::OPTIONS, app.url("/v1/virtual-accounts"))
        .header("Origin", "https://shop.example.com")
        .header("Access-Control-Request-Method", "POST")
        .send()
        .await
        .unwrap();
    assert!(
        preflight
            .headers()
            .keys()
            .all(|h| !h.as_str().starts_with("access-control-"))
    );
    assert!(!preflight.status().is_success());
}

async fn replays_return_the_first_status_and_create_nothing(backend: Backend) {
    let app = spawn_app(backend).await;
    let body = account_body(1, "access-bank");
    let first = app.create(app.test_key(), "same", &body).await;
    assert_eq!(first.status(), StatusCode::ACCEPTED);
    assert!(first.headers().get("idempotent-replayed").is_none());
    let first = json(first).await;

    // Same body with its fields in another order (and other spacing) is the same request: sent
    // as raw text, since a serialised `Value` would put the keys back in order.
    let mut pairs: Vec<_> = body.as_object().unwrap().iter().collect();
    pairs.reverse();
    let reordered = format!(
        "{{ {} }}",
        pairs
            .iter()
            .map(|(k, v)| format!("\"{k}\" : {v}"))
            .collect::<Vec<_>>()
            .join(" , ")
    );
    assert!(!reordered.starts_with(&format!(
        "{{ \"{}\"",
        body.as_object().unwrap().keys().next().unwrap()
    )));
    let again = app
        .client
        .post(app.url("/v1/virtual-accounts"))
        .bearer_auth(app.test_key())
        .header("Idempotency-Key", "same")
        .header("content-type", "application/json")
        .body(reordered)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), StatusCode::ACCEPTED);
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    assert_eq!(json(again).await["id"], first["id"]);

    // The replay shows the account as it is now.
    let id = first["id"].as_str().unwrap();
    app.post(
        app.test_key(),
        &format!("/v1/virtual-accounts/{id}/deactivate"),
        None,
    )
    .await;
    let again = json(app.create(app.test_key(), "same", &body).await).await;
    assert_eq!(again["status"], "deactivated");

    let mut other = body.clone();
    other["customerName"] = json!("Someone Else");
    let resp = app.create(app.test_key(), "same", &other).await;
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(json(resp).await["code"], "idempotency_key_reused");
    assert_eq!(app.count("SELECT COUNT(*) FROM virtual_accounts").await, 1);
}

async fn sixty_parallel_requests_with_one_key_create_one_account(backend: Backend) {
    let app = spawn_app(backend).await;
    let body = account_body(7, "test-bank");
    let mut tasks = Vec::new();
    for _ in 0..60 {
        let (client, url, key, body) = (
            app.client.clone(),
            app.url("/v1/virtual-accounts"),
            app.test_key().to_owned(),
            body.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let resp = client
                .post(url)
                .bearer_auth(key)
                .header("Idempotency-Key", "one-key")
                .json(&body)
                .send()
                .await
                .unwrap();
            let replayed = resp.headers().contains_key("idempotent-replayed");
            let status = resp.status().as_u16();
            let body: Value = resp.json().await.unwrap();
            (status, replayed, body)
        }));
    }
    let mut ids = std::collections::HashSet::new();
    let (mut fresh, mut replays, mut in_flight) = (0, 0, 0);
    for task in tasks {
        let (status, replayed, body) = task.await.unwrap();
        match (status, replayed) {
            (201, false) => fresh += 1,
            (201, true) => replays += 1,
            (409, _) => {
                assert_eq!(body["code"], "idempotency_key_in_use");
                in_flight += 1;
                continue;
            }
            other => panic!("unexpected {other:?}: {body}"),
        }
        ids.insert(body["id"].as_str().unwrap().to_owned());
    }
    assert_eq!(fresh, 1, "exactly one request creates");
    assert_eq!(fresh + replays + in_flight, 60);
    assert_eq!(ids.len(), 1, "every answer names the same account");
    assert_eq!(app.count("SELECT COUNT(*) FROM virtual_accounts").await, 1);
}

async fn customer_reference_returns_the_live_account(backend: Backend) {
    let app = spawn_app(backend).await;
    let first = json(
        app.create(app.test_key(), "a", &account_body(1, "test-bank"))
            .await,
    )
    .await;
    let mut same_ref = account_body(2, "wema-bank");
    same_ref["customerReference"] = first["customerReference"].clone();
    let resp = app.create(app.test_key(), "b", &same_ref).await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(json(resp).await["id"], first["id"]);
    // Its replay answers 200 again.
    let resp = app.create(app.test_key(), "b", &same_ref).await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.headers()["idempotent-replayed"], "true");
    assert_eq!(app.count("SELECT COUNT(*) FROM virtual_accounts").await, 1);

    let id = first["id"].as_str().unwrap();
    app.post(
        app.test_key(),
        &format!("/v1/virtual-accounts/{id}/deactivate"),
        None,
    )
    .await;
    let resp = app.create(app.test_key(), "c", &same_ref).await;
    assert_eq!(
        resp.status(),
        StatusCode::CREATED,
        "a deactivated account frees its reference"
    );
    assert_ne!(json(resp).await["id"], first["id"]);
}

async fn the_hourly_limit_is_exact_under_concurrency(backend: Backend) {
    // PostgreSQL: the contract's figures, 560 requests over two API instances sharing the
    // database. SQLite (one process by design): the same race at a smaller limit.
    let (limit, requests, instances) = match backend {
        Backend::Postgres(_) => (500u32, 560u32, 2),
        Backend::Sqlite => (40, 48, 1),
    };
    let app = spawn_app_with(backend, |c| c.limits.accounts_per_hour = limit).await;
    let mut bases = vec![app.base.clone()];
    for _ in 1..instances {
        bases.push(format!("http://{}", start_instance(&app).await));
    }
    let semaphore = std::sync::Arc::new(tokio::sync::Semaphore::new(64));
    let mut tasks = Vec::new();
    for n in 0..requests {
        let (client, base, key) = (
            app.client.clone(),
            bases[n as usize % bases.len()].clone(),
            app.test_key().to_owned(),
        );
        let semaphore = semaphore.clone();
        tasks.push(tokio::spawn(async move {
            let _permit = semaphore.acquire().await.unwrap();
            let resp = client
                .post(format!("{base}/v1/virtual-accounts"))
                .bearer_auth(key)
                .header("Idempotency-Key", format!("k-{n}"))
                .json(&account_body(n, "test-bank"))
                .send()
                .await
                .unwrap();
            let retry_after = resp
                .headers()
                .get("retry-after")
                .map(|v| v.to_str().unwrap().parse::<u64>().unwrap());
            let has_policy = resp
                .headers()
                .get("ratelimit-policy")
                .is_some_and(|v| v == &format!("\"accounts\";q={limit};w=3600"));
            let has_state = resp
                .headers()
                .get("ratelimit")
                .is_some_and(|v| v.to_str().unwrap().starts_with("\"accounts\";r="));
            (
                n,
                resp.status().as_u16(),
                retry_after,
                has_policy && has_state,
            )
        }));
    }
    let (mut created, mut limited, mut a_created_n) = (0, 0, None);
    for task in tasks {
        let (n, status, retry_after, headers) = task.await.unwrap();
        assert!(headers, "RateLimit headers on every creation response");
        match status {
            201 => {
                created += 1;
                a_created_n.get_or_insert(n);
            }
            429 => {
                limited += 1;
                let secs = retry_after.expect("Retry-After on 429");
                assert!((1..=3600).contains(&secs), "{secs}");
            }
            other => panic!("unexpected status {other}"),
        }
    }
    assert_eq!(created, limit);
    assert_eq!(limited, requests - limit);
    assert_eq!(
        app.count("SELECT COUNT(*) FROM virtual_accounts").await,
        i64::from(limit)
    );

    // A reference hit is not a creation: it is answered even at the limit.
    // (Which 500 of the 560 got in is down to the race: take one that did.)
    let existing = a_created_n.expect("some were created");
    let resp = app
        .create(
            app.test_key(),
            "again",
            &account_body(existing, "test-bank"),
        )
        .await;
    assert_eq!(resp.status(), StatusCode::OK);
    let resp = app
        .create(app.test_key(), "new", &account_body(99_999, "test-bank"))
        .await;
    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        resp.headers()["ratelimit"]
            .to_str()
            .unwrap()
            .split(';')
            .nth(1),
        Some("r=0")
    );
}

async fn listing_pages_searches_and_filters(backend: Backend) {
    let app = spawn_app(backend).await;
    let mut ids = Vec::new();
    for n in 0..25 {
        let bank = if n % 5 == 0 {
            "access-bank"
        } else {
            "test-bank"
        };
        let account = json(
            app.create(app.test_key(), &format!("k{n}"), &account_body(n, bank))
                .await,
        )
        .await;
        ids.push(account["id"].as_str().unwrap().to_owned());
    }
    let page1 = json(app.get(app.test_key(), "/v1/virtual-accounts").await).await;
    assert_eq!(page1["total"], 25);
    assert_eq!(page1["page"], 1);
    assert_eq!(page1["pageSize"], 20);
    assert_eq!(page1["totalPages"], 2);
    assert_eq!(page1["data"].as_array().unwrap().len(), 20);
    assert_eq!(page1["data"][0]["id"], ids[24].as_str(), "newest first");
    let page2 = json(
        app.get(app.test_key(), "/v1/virtual-accounts?page=2&pageSize=20")
            .await,
    )
    .await;
    assert_eq!(page2["data"].as_array().unwrap().len(), 5);
    assert_eq!(page2["data"][4]["id"], ids[0].as_str());

    let pending = json(
        app.get(
            app.test_key(),
            "/v1/virtual-accounts?status=pending&pageSize=100",
        )
        .await,
    )
    .await;
    assert_eq!(pending["total"], 5);
    assert!(
        pending["data"]
            .as_array()
            .unwrap()
            .iter()
            .all(|a| a["status"] == "pending")
    );

    // q: case-insensitive substring of name, email, reference, phone or number.
    let by_name = json(
        app.get(app.test_key(), "/v1/virtual-accounts?q=ADA%20OBI%2012")
            .await,
    )
    .await;
    assert_eq!(by_name["total"], 1);
    let by_email = json(
        app.get(app.test_key(), "/v1/virtual-accounts?q=ADA13@")
            .await,
    )
    .await;
    assert_eq!(by_email["data"][0]["customerReference"], "user-13");
    let by_ref = json(
        app.get(app.test_key(), "/v1/virtual-accounts?q=user-2")
            .await,
    )
    .await;
    assert_eq!(by_ref["total"], 6, "user-2 and user-20..24");
    let by_phone = json(
        app.get(app.test_key(), "/v1/virtual-accounts?q=%2B234803")
            .await,
    )
    .await;
    assert_eq!(by_phone["total"], 25);
    let number = page1["data"][0]["accountNumber"]
        .as_str()
        .map(str::to_owned)
        .unwrap_or_else(|| {
            page1["data"][1]["accountNumber"]
                .as_str()
                .unwrap()
                .to_owned()
        });
    let by_number = json(
        app.get(
            app.test_key(),
            &format!("/v1/virtual-accounts?q={}", &number[2..8]),
        )
        .await,
    )
    .await;
    assert!(
        by_number["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["accountNumber"] == number.as_str())
    );
    let wildcard = json(app.get(app.test_key(), "/v1/virtual-accounts?q=%25").await).await;
    assert_eq!(wildcard["total"], 0, "% is taken literally");

    for bad in [
        "page=0",
        "page=x",
        "pageSize=0",
        "pageSize=101",
        "pageSize=1.5",
        "status=open",
        "page=-1",
    ] {
        let resp = app
            .get(app.test_key(), &format!("/v1/virtual-accounts?{bad}"))
            .await;
        assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY, "{bad}");
        assert_eq!(json(resp).await["code"], "validation_failed");
    }
}

async fn deactivation_is_idempotent_and_refuses_failed_accounts(backend: Backend) {
    let app = spawn_app(backend).await;
    let account = json(
        app.create(app.test_key(), "k", &account_body(1, "test-bank"))
            .await,
    )
    .await;
    let id = account["id"].as_str().unwrap();
    let path = format!("/v1/virtual-accounts/{id}/deactivate");
    let resp = app
        .post(
            app.test_key(),
            &path,
            Some(&json!({"reason": "customer left"})),
        )
        .await;
    assert_eq!(resp.status(), StatusCode::OK);
    let first = json(resp).await;
    assert_eq!(first["status"], "deactivated");
    assert!(first["deactivatedAt"].is_string());
    let again = json(app.post(app.test_key(), &path, None).await).await;
    assert_eq!(again, first, "a second deactivation changes nothing");
    let close_jobs = app
        .count(&format!(
            "SELECT COUNT(*) FROM outbox WHERE payload LIKE '%close%' AND payload LIKE '%{id}%'"
        ))
        .await;
    assert_eq!(close_jobs, 1);

    let resp = app
        .post(
            app.test_key(),
            &path,
            Some(&json!({"reason": "x".repeat(201)})),
        )
        .await;
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let resp = app
        .post(app.test_key(), &path, Some(&json!({"why": "x"})))
        .await;
    assert_eq!(json(resp).await["errors"][0]["code"], "unknown_field");

    let other = json(
        app.create(app.test_key(), "k2", &account_body(2, "access-bank"))
            .await,
    )
    .await;
    let other_id = other["id"].as_str().unwrap();
    app.count(&format!(
        "SELECT COUNT(*) FROM virtual_accounts WHERE id = '{other_id}'"
    ))
    .await;
    sea_orm::ConnectionTrait::execute_unprepared(
        &app.db,
        &format!("UPDATE virtual_accounts SET status = 'failed' WHERE id = '{other_id}'"),
    )
    .await
    .unwrap();
    let resp = app
        .post(
            app.test_key(),
            &format!("/v1/virtual-accounts/{other_id}/deactivate"),
            None,
        )
        .await;
    assert_eq!(resp.status(), StatusCode::CONFLICT);
    assert_eq!(json(resp).await["code"], "invalid_state");

    let resp = app
        .post(
            app.test_key(),
            "/v1/virtual-accounts/va_nope/deactivate",
            None,
        )
        .await;
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
}

async fn request_ids_are_echoed_or_generated(backend: Backend) {
    let app = spawn_app(backend).await;
    let resp = app
        .client
        .get(app.url("/v1/virtual-accounts"))
        .bearer_auth(app.test_key())
        .header("X-Request-Id", "trace-abc-123")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["x-request-id"], "trace-abc-123");
    // Whatever a tracing system uses, echoed as sent.
    for id in [
        "00-4bf92f3577b34da6-00f067aa0ba902b7-01",
        "{trace}/span=7",
        "a\"b",
    ] {
        let resp = app
            .client
            .get(app.url("/v1/virtual-accounts"))
            .bearer_auth(app.test_key())
            .header("X-Request-Id", id)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.headers()["x-request-id"], id);
    }
    // Not a usable id (spaces, too long): a generated one instead, never an error.
    for id in ["two words".to_owned(), "x".repeat(201)] {
        let resp = app
            .client
            .get(app.url("/v1/virtual-accounts"))
            .bearer_auth(app.test_key())
            .header("X-Request-Id", id)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        assert!(
            resp.headers()["x-request-id"]
                .to_str()
                .unwrap()
                .starts_with("req_")
        );
    }
    let resp = app
        .client
        .get(app.url("/v1/virtual-accounts/va_missing"))
        .bearer_auth(app.test_key())
        .send()
        .await
        .unwrap();
    let id = resp.headers()["x-request-id"].to_str().unwrap().to_owned();
    assert!(id.starts_with("req_"));
    assert_eq!(json(resp).await["requestId"], id.as_str());
}

async fn problems_are_documented(backend: Backend) {
    let app = spawn_app(backend).await;
    for code in [
        "validation_failed",
        "rate_limited",
        "idempotency_key_in_use",
        "unauthorized",
    ] {
        let resp = app
            .client
            .get(app.url(&format!("/problems/{code}")))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        let doc = json(resp).await;
        assert_eq!(doc["code"], code);
        assert!(doc["description"].as_str().unwrap().len() > 20);
    }
    let resp = app
        .client
        .get(app.url("/v1/problems/nonsense"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
}

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

    let logs = common::captured_logs();
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
    use domain::Mode;
    use sea_orm::EntityTrait;
    use shared::crypto::Cipher;
    use shared::db::entities::{business_mode, virtual_account};
    use shared::db::{accounts, businesses, reencrypt};

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
    let rotated_secret = businesses::rotate_webhook_secret(
        &app.db,
        &old,
        &app.business.id,
        Mode::Test,
        chrono::Duration::hours(24),
    )
    .await
    .unwrap()
    .unwrap();
    let old_prefix = old.current_prefix();
    let sealed_with_old = format!(
        "SELECT (SELECT COUNT(*) FROM virtual_accounts WHERE identity_enc LIKE '{old_prefix}%') \
         + (SELECT COUNT(*) FROM business_modes WHERE webhook_secret_enc LIKE '{old_prefix}%') \
         + (SELECT COUNT(*) FROM business_modes WHERE previous_webhook_secret_enc LIKE '{old_prefix}%')"
    );
    assert_eq!(
        app.count(&sealed_with_old).await,
        5,
        "2 identities, 3 webhook secrets"
    );

    let new_key = Cipher::generate_key();
    let rotating = Cipher::new(&new_key, std::slice::from_ref(&app.crypto_key)).unwrap();
    let dry = reencrypt::run(&app.db, &rotating, true).await.unwrap();
    assert_eq!((dry.identities, dry.webhook_secrets), (2, 3));
    assert_eq!(
        app.count(&sealed_with_old).await,
        5,
        "a dry run changes nothing"
    );

    let report = reencrypt::run(&app.db, &rotating, false).await.unwrap();
    assert_eq!((report.identities, report.webhook_secrets), (2, 3));
    assert!(report.complete(), "{report:?}");
    assert_eq!(report.key_id, rotating.key_id());
    assert_eq!(app.count(&sealed_with_old).await, 0);
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
