//! What every route does the same way: problem+json errors for bad headers and bodies (400, 404,
//! 405, 413, 415, 422), one 401 for every bad key, browsers refused without CORS headers,
//! request ids echoed or generated, and documented problem types.

use reqwest::StatusCode;
use test_support::{Backend, TestApp, account_body, expect_problem, json, spawn_app, store};

test_support::on_both_databases!(
    bad_headers_and_bodies_get_their_problem,
    every_bad_key_gets_the_same_401,
    browsers_are_refused_and_no_cors_headers_are_sent,
    request_ids_are_echoed_or_generated,
    problems_are_documented,
);

async fn bad_headers_and_bodies_get_their_problem(backend: Backend) {
    let app = spawn_app(backend).await;
    let url = app.url("/v1/virtual-accounts");
    let body = account_body(1, "test-bank").to_string();
    let get = |path: &str| app.client.get(app.url(path));
    let post = |path: &str| app.client.post(app.url(path));
    // A create with this Idempotency-Key (none when None), content type and body.
    let create = |key: Option<&str>, content_type: &str, body: &str| {
        let request = app
            .client
            .post(&url)
            .header("content-type", content_type)
            .body(body.to_owned());
        match key {
            Some(key) => request.header("Idempotency-Key", key),
            None => request,
        }
    };
    let cases: Vec<(reqwest::RequestBuilder, u16, &str)> = vec![
        (
            create(None, "application/json", &body),
            400,
            "idempotency_key_missing",
        ),
        (
            create(Some(""), "application/json", &body),
            400,
            "idempotency_key_invalid",
        ),
        (
            create(Some(&"x".repeat(201)), "application/json", &body),
            400,
            "idempotency_key_invalid",
        ),
        (
            create(Some("k"), "application/json", "{not json"),
            400,
            "invalid_json",
        ),
        (
            create(Some("k"), "application/json", "[1,2]"),
            400,
            "invalid_json",
        ),
        (
            create(Some("k"), "text/plain", &body),
            415,
            "unsupported_media_type",
        ),
        (
            create(
                Some("k"),
                "application/json",
                &format!("{{\"customerName\":\"{}\"}}", "x".repeat(70_000)),
            ),
            413,
            "payload_too_large",
        ),
        (app.client.delete(&url), 405, "method_not_allowed"),
        (get("/v1/nothing-here"), 404, "not_found"),
        // A path segment that is not UTF-8 once decoded names nothing.
        (get("/v1/virtual-accounts/%FF%FE"), 404, "not_found"),
        (
            get("/v1/virtual-accounts/va_x/rechecks/%C3%28"),
            404,
            "not_found",
        ),
        (get("/v1/events/%80"), 404, "not_found"),
        // NUL is UTF-8, but PostgreSQL text cannot hold it: still a clear answer, never a 500.
        (get("/v1/virtual-accounts/va_%00"), 404, "not_found"),
        (
            post("/v1/virtual-accounts/%00/deactivate"),
            404,
            "not_found",
        ),
        (
            get("/v1/virtual-accounts?q=a%00b"),
            422,
            "validation_failed",
        ),
        (get("/v1/problems/%FF"), 404, "not_found"),
    ];
    for (req, status, code) in cases {
        let resp = req.bearer_auth(app.test_key()).send().await.unwrap();
        expect_problem(resp, status, code).await;
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
    let unknown = domain::keys::generate_secret_key(domain::Mode::Test);
    // A revoked key is refused like one that never existed.
    store::revoke_key(&app.db, &app.business.id, "live").await;
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

/// `GET /v1/virtual-accounts` with the test key and one header more.
async fn list_with_header(app: &TestApp, name: &str, value: &str) -> reqwest::Response {
    app.client
        .get(app.url("/v1/virtual-accounts"))
        .bearer_auth(app.test_key())
        .header(name, value)
        .send()
        .await
        .unwrap()
}

async fn browsers_are_refused_and_no_cors_headers_are_sent(backend: Backend) {
    let app = spawn_app(backend).await;
    let resp = list_with_header(&app, "Origin", "https://shop.example.com").await;
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

async fn request_ids_are_echoed_or_generated(backend: Backend) {
    let app = spawn_app(backend).await;
    let resp = list_with_header(&app, "X-Request-Id", "trace-abc-123").await;
    assert_eq!(resp.headers()["x-request-id"], "trace-abc-123");
    // Whatever a tracing system uses, echoed as sent.
    for id in [
        "00-4bf92f3577b34da6-00f067aa0ba902b7-01",
        "{trace}/span=7",
        "a\"b",
    ] {
        let resp = list_with_header(&app, "X-Request-Id", id).await;
        assert_eq!(resp.headers()["x-request-id"], id);
    }
    // Not a usable id (spaces, too long): a generated one instead, never an error.
    for id in ["two words".to_owned(), "x".repeat(201)] {
        let resp = list_with_header(&app, "X-Request-Id", &id).await;
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
