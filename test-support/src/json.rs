//! Reading answers: JSON bodies, ids, problem documents.

use serde_json::Value;

/// The response's body as JSON (panics, with the status, when it is not JSON).
pub async fn json(resp: reqwest::Response) -> Value {
    let status = resp.status();
    let text = resp.text().await.expect("a body");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{status}: not JSON ({e}): {text}"))
}

/// Sends `request` and reads the body as JSON, as [`json`] does.
pub async fn json_of(request: reqwest::RequestBuilder) -> Value {
    json(request.send().await.expect("request sent")).await
}

/// Sends `request` and reads the body as text (a `/metrics` exposition, a page).
pub async fn text_of(request: reqwest::RequestBuilder) -> String {
    let resp = request.send().await.expect("request sent");
    resp.text().await.expect("a body")
}

/// The `id` of a resource as the API shows it.
pub fn id_of(resource: &Value) -> String {
    resource["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no id in {resource}"))
        .to_owned()
}

/// Checks an answer is docs/api/errors.md's problem+json with this status and code, and returns it.
pub async fn expect_problem(resp: reqwest::Response, status: u16, code: &str) -> Value {
    assert_eq!(resp.status().as_u16(), status, "{code}");
    assert_eq!(
        resp.headers()["content-type"],
        "application/problem+json",
        "{code}"
    );
    let problem = json(resp).await;
    assert_eq!(problem["code"], code, "{problem}");
    assert_eq!(problem["status"], status, "{problem}");
    problem
}
