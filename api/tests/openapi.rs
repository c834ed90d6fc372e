//! The OpenAPI document (`/openapi.json`) and its page (`/docs`): OpenAPI 3.1, every route the
//! router serves with the error statuses SPEC §2 gives it, each served under `/` and `/v1`, and
//! the answers shaped as documented.

mod common;

use common::{Backend, account_body, spawn_app};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

/// Every route the router serves (at `/…` and at `/v1/…`), with the statuses the document must
/// list for it: successes, then SPEC §2's errors. Written out here, not read from the document,
/// so that a route or status dropped from the annotations fails this test.
const ROUTES: &[(&str, &str, &[u16])] = &[
    (
        "POST",
        "/virtual-accounts",
        &[200, 201, 202, 400, 401, 403, 409, 413, 415, 422, 429, 500],
    ),
    ("GET", "/virtual-accounts", &[200, 401, 403, 422, 500]),
    ("GET", "/virtual-accounts/{id}", &[200, 401, 403, 404, 500]),
    (
        "POST",
        "/virtual-accounts/{id}/deactivate",
        &[200, 400, 401, 403, 404, 409, 413, 415, 422, 500],
    ),
    (
        "GET",
        "/virtual-accounts/{id}/deposits",
        &[200, 401, 403, 404, 422, 500],
    ),
    (
        "POST",
        "/virtual-accounts/{id}/simulate-deposit",
        &[202, 400, 401, 403, 404, 409, 413, 415, 422, 500],
    ),
    (
        "POST",
        "/virtual-accounts/{id}/recheck",
        &[202, 400, 401, 403, 404, 409, 413, 415, 422, 500],
    ),
    (
        "GET",
        "/virtual-accounts/{id}/rechecks/{rid}",
        &[200, 401, 403, 404, 500],
    ),
    (
        "POST",
        "/providers/{bank}/notifications",
        &[200, 400, 401, 403, 404, 413, 422, 500],
    ),
    ("GET", "/events", &[200, 401, 403, 422, 500]),
    ("GET", "/events/{id}", &[200, 401, 403, 404, 500]),
    (
        "POST",
        "/events/{id}/resend",
        &[202, 401, 403, 404, 409, 500],
    ),
    ("GET", "/problems/{code}", &[200, 403, 404]),
    ("GET", "/healthz", &[200, 403]),
    ("GET", "/readyz", &[200, 403, 503]),
    ("GET", "/metrics", &[200, 403]),
    ("GET", "/openapi.json", &[200, 403]),
    ("GET", "/docs", &[200, 403]),
];

/// Routes that take no secret key (notifications are authenticated by their signature).
const PUBLIC: &[&str] = &[
    "/providers/{bank}/notifications",
    "/problems/{code}",
    "/healthz",
    "/readyz",
    "/metrics",
    "/openapi.json",
    "/docs",
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

async fn document(app: &common::TestApp, path: &str) -> Value {
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

    // The document's operations are exactly ROUTES.
    let mut documented = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in METHODS {
            if item.get(*method).is_some() {
                documented.push((method.to_uppercase(), path.clone()));
            }
        }
    }
    let mut expected: Vec<_> = ROUTES
        .iter()
        .map(|(m, p, _)| (m.to_string(), p.to_string()))
        .collect();
    documented.sort();
    expected.sort();
    assert_eq!(
        documented, expected,
        "documented operations ≠ the router's routes"
    );

    let mut operation_ids = std::collections::HashSet::new();
    for (method, path, statuses) in ROUTES {
        let op = &doc["paths"][path][method.to_lowercase()];
        let at = format!("{method} {path}");
        assert!(
            operation_ids.insert(op["operationId"].as_str().expect("operationId").to_owned()),
            "{at}: duplicate operationId"
        );
        assert!(
            op["summary"].as_str().is_some_and(|s| !s.is_empty()),
            "{at}: no summary"
        );
        let responses = op["responses"].as_object().unwrap();
        let mut listed: Vec<u16> = responses.keys().map(|k| k.parse().unwrap()).collect();
        listed.sort();
        assert_eq!(&listed, statuses, "{at}: documented statuses");

        for (status, response) in responses {
            let response = resolve(&doc, response);
            let headers = response["headers"].as_object().unwrap();
            let request_id = resolve(&doc, &headers["X-Request-Id"]);
            assert_eq!(request_id["required"], true, "{at} {status}: X-Request-Id");
            if status.starts_with('4') || status.starts_with('5') {
                if status == "503" {
                    continue; // readyz answers JSON, not a problem
                }
                let content = &response["content"]["application/problem+json"];
                assert!(content.is_object(), "{at} {status}: not problem+json");
                let schema = &content["schema"]["allOf"][0]["$ref"];
                assert_eq!(schema, "#/components/schemas/Problem", "{at} {status}");
                let narrowed = &content["schema"]["allOf"][1]["properties"]["status"]["enum"];
                assert_eq!(
                    narrowed,
                    &json!([status.parse::<u16>().unwrap()]),
                    "{at} {status}"
                );
            }
        }

        // A request id may be sent with every operation.
        let params: Vec<_> = op["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| resolve(&doc, p)["name"].as_str().unwrap().to_owned())
            .collect();
        assert!(
            params.contains(&"X-Request-Id".to_owned()),
            "{at}: {params:?}"
        );
        for segment in path.split('/').filter(|s| s.starts_with('{')) {
            let name = segment.trim_matches(|c| c == '{' || c == '}');
            assert!(
                params.contains(&name.to_owned()),
                "{at}: path parameter {name}"
            );
        }

        // Authenticated operations require the bearer key; the public ones do not.
        let security = op.get("security").cloned().unwrap_or(Value::Null);
        if PUBLIC.contains(path) {
            assert!(security.is_null(), "{at}: public, yet {security}");
        } else {
            assert_eq!(security, json!([{"bearerAuth": []}]), "{at}");
        }
    }

    // The headers SPEC asks for on particular operations.
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
    use domain::{AccountStatus, Bank, EventType, Mode};
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
        EventType::ALL.map(|t| t.as_str().to_owned()).to_vec()
    );
    let codes: Vec<_> = api::error::PROBLEM_TYPES.iter().map(|p| p.code).collect();
    assert_eq!(
        schemas["Problem"]["properties"]["code"]["enum"],
        json!(codes)
    );

    // The create body documents every field and its rules.
    let create = &schemas["CreateAccountRequest"]["allOf"];
    let fields = &create[0]["properties"];
    for field in [
        "customerName",
        "customerEmail",
        "customerPhone",
        "customerBvn",
        "customerNin",
        "preferredBank",
        "customerReference",
    ] {
        assert!(fields[field].is_object(), "CreateAccountRequest.{field}");
    }
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
    let app = spawn_app(Backend::Sqlite).await;
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

    for (method, path, statuses) in ROUTES {
        let concrete = path
            .replace("{id}", &id)
            .replace("{rid}", &rid)
            .replace("{bank}", "test-bank")
            .replace("{code}", "not_found");
        for prefix in ["", "/v1"] {
            let url = app.url(&format!("{prefix}{concrete}"));
            let mut request = app
                .client
                .request(Method::from_bytes(method.as_bytes()).unwrap(), &url);
            if !PUBLIC.contains(path) {
                request = request.bearer_auth(&key);
            }
            if *method == "POST" && *path != "/virtual-accounts" {
                request = request.json(&json!({}));
            }
            let resp = request.send().await.unwrap();
            let status = resp.status().as_u16();
            let at = format!("{method} {prefix}{concrete}");
            assert!(
                statuses.contains(&status),
                "{at}: {status} is not documented"
            );
            assert!(
                resp.headers().contains_key("x-request-id"),
                "{at}: no X-Request-Id"
            );
            if *method == "GET"
                && status == 200
                && !["/metrics", "/docs", "/openapi.json"].contains(path)
            {
                let body: Value = resp.json().await.unwrap();
                assert_shape(&doc, response_schema(&doc, "get", path, 200), &body, &at);
            } else if status >= 400 && status != 503 {
                let content_type = resp.headers()["content-type"].to_str().unwrap().to_owned();
                assert_eq!(content_type, "application/problem+json", "{at}");
                let body: Value = resp.json().await.unwrap();
                assert_shape(
                    &doc,
                    response_schema(&doc, &method.to_lowercase(), path, status),
                    &body,
                    &at,
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
