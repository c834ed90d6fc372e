//! The OpenAPI document (`/openapi.json`) and its page (`/docs`): OpenAPI 3.1, every operation
//! with the error statuses its rules imply, each error one `Problem`, every operation served under
//! `/` and `/v1`, and the answers shaped as documented.
//!
//! The router and the document come from one registration (`api::routes::api`), so there is no
//! list of routes here: the checks walk the served document and hold the router to it.

use api::error::ProblemCode;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use test_support::{Backend, TestApp, account_body, spawn_app};

/// docs/api/errors.md's table: every code a caller can meet, the payout ones included.
const SPEC_CODES: &[&str] = &[
    "invalid_json",
    "idempotency_key_missing",
    "idempotency_key_invalid",
    "unauthorized",
    "kyb_not_approved",
    "browser_request_refused",
    "test_mode_only",
    "not_found",
    "idempotency_key_in_use",
    "invalid_state",
    "settlement_account_missing",
    "payouts_on_hold",
    "payload_too_large",
    "unsupported_media_type",
    "validation_failed",
    "idempotency_key_reused",
    "identity_rejected",
    "insufficient_balance",
    "bank_account_not_found",
    "rate_limited",
    "internal_error",
];

const METHODS: &[&str] = &[
    "get", "put", "post", "delete", "patch", "head", "options", "trace",
];

fn resolve<'a>(doc: &'a Value, value: &'a Value) -> &'a Value {
    match value.get("$ref").and_then(Value::as_str) {
        Some(reference) => {
            let pointer = reference.strip_prefix('#').expect("local reference");
            let target = doc
                .pointer(pointer)
                .unwrap_or_else(|| panic!("{reference} does not resolve"));
            resolve(doc, target)
        }
        None => value,
    }
}

/// Every operation of the document: (METHOD, path, operation).
fn operations(doc: &Value) -> Vec<(String, String, Value)> {
    let mut found = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in METHODS {
            if let Some(op) = item.get(*method) {
                found.push((method.to_uppercase(), path.clone(), op.clone()));
            }
        }
    }
    found
}

/// Whether the operation needs a secret key (the others are public: notifications are
/// authenticated by their signature).
fn authenticated(op: &Value) -> bool {
    match op.get("security") {
        None => false,
        Some(security) => {
            assert_eq!(security, &json!([{"bearerAuth": []}]));
            true
        }
    }
}

async fn document(app: &TestApp, path: &str) -> Value {
    let resp = app.client.get(app.url(path)).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK, "{path}");
    assert!(resp.headers().contains_key("x-request-id"), "{path}");
    let content_type = resp.headers()["content-type"].to_str().unwrap().to_owned();
    assert!(
        content_type.starts_with("application/json"),
        "{path}: {content_type}"
    );
    resp.json().await.expect("JSON")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_document_is_openapi_3_1_and_lists_every_route_with_its_errors() {
    let app = spawn_app(Backend::Sqlite).await;
    let doc = document(&app, "/openapi.json").await;
    assert_eq!(doc, document(&app, "/v1/openapi.json").await);

    assert!(
        doc["openapi"].as_str().unwrap().starts_with("3.1."),
        "{}",
        doc["openapi"]
    );
    let servers: Vec<_> = doc["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["url"].as_str().unwrap())
        .collect();
    assert_eq!(servers, ["/v1", "/"]);
    let scheme = &doc["components"]["securitySchemes"]["bearerAuth"];
    assert_eq!(scheme["type"], "http");
    assert_eq!(scheme["scheme"], "bearer");

    let operations = operations(&doc);
    assert!(operations.len() >= 18, "{} operations", operations.len());
    let mut operation_ids = std::collections::HashSet::new();
    for (method, path, op) in &operations {
        let at = format!("{method} {path}");
        assert!(
            operation_ids.insert(op["operationId"].as_str().expect("operationId").to_owned()),
            "{at}: duplicate operationId"
        );
        assert!(
            op["summary"].as_str().is_some_and(|s| !s.is_empty()),
            "{at}: no summary"
        );
        let params: Vec<Value> = op["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| resolve(&doc, p).clone())
            .collect();
        let names: Vec<_> = params.iter().map(|p| p["name"].as_str().unwrap()).collect();
        // A request id may be sent with every operation.
        assert!(names.contains(&"X-Request-Id"), "{at}: {names:?}");
        let path_params: Vec<_> = path
            .split('/')
            .filter(|s| s.starts_with('{'))
            .map(|s| s.trim_matches(|c| c == '{' || c == '}'))
            .collect();
        for name in &path_params {
            assert!(names.contains(name), "{at}: path parameter {name}");
        }

        // The error statuses each operation's rules imply (docs/api/errors.md).
        let responses = op["responses"].as_object().unwrap();
        let listed: Vec<u16> = responses.keys().map(|k| k.parse().unwrap()).collect();
        let mut implied = vec![403]; // a browser's request (Origin) is refused anywhere
        if authenticated(op) {
            implied.extend([401, 500]);
        }
        if !path_params.is_empty() {
            implied.push(404);
        }
        // A signed notification is stored and acknowledged whatever it holds
        // (docs/operations/provider-banks.md: the bank always gets 200 once it is stored), so only
        // its size can be refused.
        if op["operationId"] == "receiveProviderNotification" {
            implied.push(413);
        } else if op.get("requestBody").is_some() {
            implied.extend([400, 413, 422]);
        }
        if params.iter().any(|p| p["in"] == "query") {
            implied.push(422);
        }
        for status in implied {
            assert!(
                listed.contains(&status),
                "{at}: {status} not listed in {listed:?}"
            );
        }
        assert!(
            listed.iter().any(|s| (200..300).contains(s)),
            "{at}: no success in {listed:?}"
        );

        for (status, response) in responses {
            let response = resolve(&doc, response);
            let headers = response["headers"].as_object().unwrap();
            let request_id = resolve(&doc, &headers["X-Request-Id"]);
            assert_eq!(request_id["required"], true, "{at} {status}: X-Request-Id");
            let status: u16 = status.parse().unwrap();
            if status < 400 || status == 503 {
                continue; // readyz's 503 answers its readiness, not a problem
            }
            // One Problem, by reference: a generated client has one error type.
            let content = response["content"].as_object().unwrap();
            assert_eq!(
                content.keys().collect::<Vec<_>>(),
                ["application/problem+json"],
                "{at} {status}"
            );
            let content = &content["application/problem+json"];
            assert_eq!(
                content["schema"],
                json!({"$ref": "#/components/schemas/Problem"}),
                "{at} {status}"
            );
            let codes = response["x-problem-codes"]
                .as_array()
                .expect("x-problem-codes");
            assert!(!codes.is_empty(), "{at} {status}");
            for code in codes {
                let code = ProblemCode::parse(code.as_str().unwrap()).expect("a known code");
                assert_eq!(code.status(), status, "{at}: {code} under {status}");
                let example = &content["examples"][code.as_str()]["value"];
                assert_eq!(example["code"], code.as_str(), "{at} {status}");
                assert_eq!(example["status"], status, "{at} {status}");
            }
        }

        // Authenticated operations require the bearer key; the public ones do not (checked
        // against the server in `every_operation_answers_under_both_prefixes_as_documented`).
        authenticated(op);
    }

    // The headers the docs ask for on particular operations.
    let create = &doc["paths"]["/virtual-accounts"]["post"];
    let idempotency = create["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "Idempotency-Key")
        .expect("Idempotency-Key");
    assert_eq!(idempotency["in"], "header");
    assert_eq!(idempotency["required"], true);
    assert_eq!(idempotency["schema"]["minLength"], 1);
    assert_eq!(idempotency["schema"]["maxLength"], 200);
    for status in ["200", "201", "202"] {
        let headers = &create["responses"][status]["headers"];
        for name in ["RateLimit", "RateLimit-Policy", "Idempotent-Replayed"] {
            assert!(headers[name].is_object(), "create {status}: {name}");
        }
        assert_eq!(headers["RateLimit"]["required"], true);
    }
    let limited = resolve(&doc, &create["responses"]["429"]);
    assert_eq!(limited["headers"]["Retry-After"]["required"], true);
    assert_eq!(
        limited["headers"]["Retry-After"]["schema"]["type"],
        "integer"
    );
    assert_eq!(limited["headers"]["RateLimit"]["required"], true);
    // Elsewhere a 429 is the failed-authentication limit, which sends Retry-After only.
    for (method, path) in [
        ("get", "/payouts"),
        ("post", "/payouts"),
        ("get", "/balance"),
    ] {
        let limited = resolve(&doc, &doc["paths"][path][method]["responses"]["429"]);
        let headers = limited["headers"].as_object().expect("headers");
        assert_eq!(headers["Retry-After"]["required"], true, "{method} {path}");
        assert!(
            !headers.contains_key("RateLimit") && !headers.contains_key("RateLimit-Policy"),
            "{method} {path}: {limited}"
        );
    }
    // Resending has a limit of its own per business (docs/api/events-and-webhooks.md), also with
    // Retry-After only.
    let resend = &doc["paths"]["/events/{id}/resend"]["post"]["responses"]["429"];
    assert_eq!(resend["$ref"], "#/components/responses/ResendLimited");
    let limited = resolve(&doc, resend);
    assert_eq!(limited["headers"]["Retry-After"]["required"], true);
    assert!(limited["headers"].get("RateLimit").is_none(), "{limited}");
    let notification = &doc["paths"]["/providers/{bank}/notifications"]["post"];
    assert!(
        notification["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "X-Provider-Signature" && p["required"] == true),
        "X-Provider-Signature"
    );
    let metrics = &doc["paths"]["/metrics"]["get"]["responses"]["200"]["content"];
    assert!(metrics["text/plain"].is_object(), "{metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_schemas_name_the_values_the_domain_uses() {
    use domain::{AccountStatus, Bank, Mode};
    let app = spawn_app(Backend::Sqlite).await;
    let doc = document(&app, "/openapi.json").await;
    let schemas = &doc["components"]["schemas"];
    let enum_of = |name: &str| -> Vec<String> {
        schemas[name]["enum"]
            .as_array()
            .unwrap_or_else(|| panic!("{name} has no enum"))
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(
        enum_of("Bank"),
        Bank::ALL.map(|b| b.slug().to_owned()).to_vec()
    );
    assert_eq!(
        enum_of("AccountStatus"),
        AccountStatus::ALL.map(|s| s.as_str().to_owned()).to_vec()
    );
    assert_eq!(
        enum_of("Mode"),
        Mode::ALL.map(|m| m.as_str().to_owned()).to_vec()
    );
    assert_eq!(
        enum_of("EventType"),
        domain::EventType::ALL
            .map(|t| t.as_str().to_owned())
            .to_vec()
    );
    // One Problem, its code an enum of every code: docs/api/errors.md's, 405's
    // `method_not_allowed`, 408's `request_timeout`, 503's `provider_unavailable` and
    // `service_unavailable` (a database failover, docs/operations/high-availability.md).
    assert_eq!(
        schemas["Problem"]["properties"]["code"]["$ref"],
        "#/components/schemas/ProblemCode"
    );
    let codes = enum_of("ProblemCode");
    let catalogue: Vec<_> = ProblemCode::ALL.iter().map(|c| c.as_str()).collect();
    assert_eq!(codes, catalogue);
    for code in SPEC_CODES {
        assert!(
            codes.iter().any(|c| c == code),
            "{code} is not in ProblemCode"
        );
    }
    assert_eq!(
        codes
            .iter()
            .filter(|c| !SPEC_CODES.contains(&c.as_str()))
            .collect::<Vec<_>>(),
        [
            "method_not_allowed",
            "request_timeout",
            "provider_unavailable",
            "service_unavailable"
        ]
    );
    for name in ["Problem", "FieldError"] {
        assert!(schemas[name].is_object(), "{name}");
    }

    // The create body documents every field and its rules: as many fields as the create
    // parser knows (seven), each one it knows (none is an unknown field to it).
    let create = &schemas["CreateAccountRequest"]["allOf"];
    let fields = &create[0]["properties"];
    let documented = fields
        .as_object()
        .expect("CreateAccountRequest's properties");
    assert_eq!(documented.len(), 7, "{documented:?}");
    for (field, schema) in documented {
        assert!(schema.is_object(), "CreateAccountRequest.{field}");
    }
    let every_field = documented
        .keys()
        .map(|f| (f.clone(), Value::Null))
        .collect();
    let unknown: Vec<String> = domain::NewAccount::parse(&every_field, domain::Mode::Test)
        .err()
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e.code == "unknown_field")
        .map(|e| e.field)
        .collect();
    assert!(
        unknown.is_empty(),
        "documented but unknown to the parser: {unknown:?}"
    );
    assert_eq!(create[0]["additionalProperties"], false);
    assert_eq!(fields["customerBvn"]["pattern"], "^[0-9]{11}$");
    assert_eq!(fields["customerNin"]["pattern"], "^[0-9]{11}$");
    assert_eq!(fields["customerName"]["maxLength"], 100);
    assert_eq!(fields["preferredBank"]["$ref"], "#/components/schemas/Bank");
    assert!(fields["customerPhone"]["pattern"].is_string());
    assert_eq!(create[1]["oneOf"].as_array().unwrap().len(), 2);
}

/// Checks that a JSON object has every `required` member of a documented object schema and no
/// member it does not declare (a shallow check; schemathesis validates in depth).
fn assert_shape(doc: &Value, schema: &Value, value: &Value, what: &str) {
    let schema = resolve(doc, schema);
    if let Some(parts) = schema["allOf"].as_array() {
        for part in parts.iter().filter(|p| p.get("$ref").is_some()) {
            assert_shape(doc, part, value, what);
        }
        return;
    }
    let properties = schema["properties"].as_object().expect("an object schema");
    let object = value
        .as_object()
        .unwrap_or_else(|| panic!("{what}: not an object: {value}"));
    for required in schema["required"].as_array().into_iter().flatten() {
        let name = required.as_str().unwrap();
        assert!(
            object.contains_key(name),
            "{what}: {name} missing from {value}"
        );
    }
    for key in object.keys() {
        assert!(
            properties.contains_key(key),
            "{what}: undocumented member {key}"
        );
    }
}

fn response_schema<'a>(doc: &'a Value, method: &str, path: &str, status: u16) -> &'a Value {
    let response = resolve(
        doc,
        &doc["paths"][path][method]["responses"][status.to_string()],
    );
    let content = response["content"].as_object().expect("content");
    &content.values().next().unwrap()["schema"]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_operation_answers_under_both_prefixes_as_documented() {
    // Every operation is asked without a key, many times over from one address: the limit on
    // failed authentications (tested on its own in keys.rs) is turned off here.
    let app =
        test_support::spawn_app_with(Backend::Sqlite, |c| c.limits.auth_failures_per_minute = 0)
            .await;
    let doc = document(&app, "/openapi.json").await;
    let key = app.test_key().to_owned();

    // A real account and recheck, so the reads find something.
    let created = app
        .create(&key, "openapi-1", &account_body(1, "test-bank"))
        .await;
    assert_eq!(created.status(), StatusCode::CREATED);
    let account: Value = created.json().await.unwrap();
    assert_shape(
        &doc,
        response_schema(&doc, "post", "/virtual-accounts", 201),
        &account,
        "create",
    );
    let id = account["id"].as_str().unwrap().to_owned();
    let recheck = app
        .post(&key, &format!("/v1/virtual-accounts/{id}/recheck"), None)
        .await;
    assert_eq!(recheck.status(), StatusCode::ACCEPTED);
    let recheck: Value = recheck.json().await.unwrap();
    let rid = recheck["id"].as_str().unwrap().to_owned();

    let simulated = app
        .post(
            &key,
            &format!("/v1/virtual-accounts/{id}/simulate-deposit"),
            Some(&json!({"amount": 150000, "notify": false})),
        )
        .await;
    assert_eq!(simulated.status(), StatusCode::ACCEPTED);
    let simulated: Value = simulated.json().await.unwrap();
    assert_shape(
        &doc,
        response_schema(&doc, "post", "/virtual-accounts/{id}/simulate-deposit", 202),
        &simulated,
        "simulate-deposit",
    );

    let mut served = 0;
    for (method, path, op) in operations(&doc) {
        let statuses: Vec<u16> = op["responses"]
            .as_object()
            .unwrap()
            .keys()
            .map(|k| k.parse().unwrap())
            .collect();
        let public = !authenticated(&op);
        let concrete = path
            .replace("{id}", &id)
            .replace("{rid}", &rid)
            .replace("{bank}", "test-bank")
            .replace("{code}", "not_found");
        for prefix in ["", "/v1"] {
            let url = app.url(&format!("{prefix}{concrete}"));
            let at = format!("{method} {prefix}{concrete}");
            let request = |key: Option<&str>| {
                let mut request = app
                    .client
                    .request(Method::from_bytes(method.as_bytes()).unwrap(), &url);
                if let Some(key) = key {
                    request = request.bearer_auth(key);
                }
                if method == "POST" && path != "/virtual-accounts" {
                    request = request.json(&json!({}));
                }
                request
            };

            // The security the document states is the server's: without a key, an
            // authenticated operation is 401 (a public one is checked below, sent as it is).
            if !public {
                let keyless = request(None).send().await.unwrap().status();
                assert_eq!(keyless, StatusCode::UNAUTHORIZED, "{at} without a key");
            }

            let resp = request((!public).then_some(key.as_str()))
                .send()
                .await
                .unwrap();
            let status = resp.status().as_u16();
            if public && status == 401 {
                // Only an operation authenticated otherwise (a required signature header) may
                // refuse a request without a key; any other is missing its `security`.
                let signed = op["parameters"].as_array().unwrap().iter().any(|p| {
                    let p = resolve(&doc, p);
                    p["in"] == "header" && p["required"] == true
                });
                assert!(
                    signed,
                    "{at}: 401 without a key, yet no security is documented"
                );
            }
            assert!(
                statuses.contains(&status),
                "{at}: {status} is not documented"
            );
            assert!(
                resp.headers().contains_key("x-request-id"),
                "{at}: no X-Request-Id"
            );
            if method == "GET"
                && status == 200
                && !["/metrics", "/docs", "/openapi.json"].contains(&path.as_str())
            {
                let body: Value = resp.json().await.unwrap();
                assert_shape(&doc, response_schema(&doc, "get", &path, 200), &body, &at);
            } else if status >= 400 && status != 503 {
                let content_type = resp.headers()["content-type"].to_str().unwrap().to_owned();
                assert_eq!(content_type, "application/problem+json", "{at}");
                let body: Value = resp.json().await.unwrap();
                assert_shape(
                    &doc,
                    response_schema(&doc, &method.to_lowercase(), &path, status),
                    &body,
                    &at,
                );
                let listed = resolve(&doc, &op["responses"][status.to_string()]);
                assert!(
                    listed["x-problem-codes"]
                        .as_array()
                        .unwrap()
                        .contains(&body["code"]),
                    "{at}: {} is not listed under {status}",
                    body["code"]
                );
            }
            served += 1;
        }
    }
    assert_eq!(served, 2 * operations(&doc).len());

    // Nothing undocumented is served on a documented path: another method is 405.
    for (path, item) in doc["paths"].as_object().unwrap() {
        let concrete = path
            .replace("{id}", &id)
            .replace("{rid}", &rid)
            .replace("{bank}", "test-bank")
            .replace("{code}", "not_found");
        for method in ["get", "put", "post", "delete", "patch"] {
            if item.get(method).is_some() {
                continue;
            }
            for prefix in ["", "/v1"] {
                let resp = app
                    .client
                    .request(
                        Method::from_bytes(method.to_uppercase().as_bytes()).unwrap(),
                        app.url(&format!("{prefix}{concrete}")),
                    )
                    .bearer_auth(&key)
                    .send()
                    .await
                    .unwrap();
                assert_eq!(
                    resp.status(),
                    StatusCode::METHOD_NOT_ALLOWED,
                    "{method} {prefix}{concrete} is served but not documented"
                );
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_docs_page_loads_nothing_from_elsewhere() {
    let app = spawn_app(Backend::Sqlite).await;
    for path in ["/docs", "/v1/docs"] {
        let resp = app.client.get(app.url(path)).send().await.unwrap();
        assert_eq!(resp.status(), StatusCode::OK, "{path}");
        let headers = resp.headers().clone();
        assert!(
            headers["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/html")
        );
        let csp = headers["content-security-policy"].to_str().unwrap();
        assert!(
            csp.contains("default-src 'none'") && csp.contains("connect-src 'self'"),
            "{csp}"
        );
        let page = resp.text().await.unwrap();
        assert!(page.contains("fetch(SOURCE"), "the page reads the document");
        assert!(
            page.contains(r#"var SOURCE = "openapi.json""#),
            "relative, so /v1/docs reads /v1/openapi.json"
        );
        for outside in ["http://", "https://", "<link", "src=", "@import", "url("] {
            assert!(!page.contains(outside), "{path} refers outside: {outside}");
        }
    }
}

/// The document is committed (`docs/api/openapi.json`), so every change to the API shows in
/// review as a change to that file: the served one must be it, byte for byte. After a deliberate
/// change, `VAS_BLESS=1 cargo test -p api --test it openapi::` writes the served one there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_served_document_is_the_committed_one() {
    let app = spawn_app(Backend::Sqlite).await;
    let served = document(&app, "/openapi.json").await;
    let text = format!("{}\n", serde_json::to_string_pretty(&served).unwrap());
    let committed =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/api/openapi.json");
    if std::env::var_os("VAS_BLESS").is_some() {
        std::fs::write(&committed, &text).unwrap();
    }
    let on_disk = std::fs::read_to_string(&committed).unwrap_or_default();
    if on_disk != text {
        let first = on_disk
            .lines()
            .zip(text.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| on_disk.lines().count().min(text.lines().count()));
        panic!(
            "the served OpenAPI document differs from docs/api/openapi.json from line {}: \
             served {:?}, committed {:?}. If the API change is meant, run \
             `VAS_BLESS=1 cargo test -p api --test it openapi::` and commit the file",
            first + 1,
            text.lines().nth(first),
            on_disk.lines().nth(first)
        );
    }
}
