//! Listing and reading accounts: pages, search and filters, and what each key may see (live keys
//! wait for KYB; modes and businesses never mix).

use reqwest::StatusCode;
use test_support::{Backend, account_body, json, spawn_app};

test_support::on_both_databases!(
    listing_pages_searches_and_filters,
    live_keys_wait_for_kyb_and_modes_never_mix,
);

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
    let page1 = app.get_json(app.test_key(), "/v1/virtual-accounts").await;
    assert_eq!(page1["total"], 25);
    assert_eq!(page1["page"], 1);
    assert_eq!(page1["pageSize"], 20);
    assert_eq!(page1["totalPages"], 2);
    assert_eq!(page1["data"].as_array().unwrap().len(), 20);
    assert_eq!(page1["data"][0]["id"], ids[24].as_str(), "newest first");
    let page2 = app
        .get_json(app.test_key(), "/v1/virtual-accounts?page=2&pageSize=20")
        .await;
    assert_eq!(page2["data"].as_array().unwrap().len(), 5);
    assert_eq!(page2["data"][4]["id"], ids[0].as_str());

    let pending = app
        .get_json(
            app.test_key(),
            "/v1/virtual-accounts?status=pending&pageSize=100",
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
    let by_name = app
        .get_json(app.test_key(), "/v1/virtual-accounts?q=ADA%20OBI%2012")
        .await;
    assert_eq!(by_name["total"], 1);
    let by_email = app
        .get_json(app.test_key(), "/v1/virtual-accounts?q=ADA13@")
        .await;
    assert_eq!(by_email["data"][0]["customerReference"], "user-13");
    let by_ref = app
        .get_json(app.test_key(), "/v1/virtual-accounts?q=user-2")
        .await;
    assert_eq!(by_ref["total"], 6, "user-2 and user-20..24");
    let by_phone = app
        .get_json(app.test_key(), "/v1/virtual-accounts?q=%2B234803")
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
    let by_number = app
        .get_json(
            app.test_key(),
            &format!("/v1/virtual-accounts?q={}", &number[2..8]),
        )
        .await;
    assert!(
        by_number["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["accountNumber"] == number.as_str())
    );
    // A whole number finds its one account (the banks' numbers are looked up, not scanned)...
    let whole = app
        .get_json(app.test_key(), &format!("/v1/virtual-accounts?q={number}"))
        .await;
    assert_eq!(whole["total"], 1, "{whole}");
    assert_eq!(whole["data"][0]["accountNumber"], number.as_str());
    // ...and ten digits are still searched in the other fields: every phone here is
    // +2348031234567, which holds 8031234567.
    let ten_of_a_phone = app
        .get_json(app.test_key(), "/v1/virtual-accounts?q=8031234567")
        .await;
    assert_eq!(ten_of_a_phone["total"], 25, "{ten_of_a_phone}");
    let wildcard = app
        .get_json(app.test_key(), "/v1/virtual-accounts?q=%25")
        .await;
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
    let resp = app.deactivate(app.live_key(), id).await;
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    let list = app.get_json(app.live_key(), "/v1/virtual-accounts").await;
    assert_eq!(list["total"], 1);
    assert_eq!(list["data"][0]["id"], live_account["id"]);

    // Another business sees neither.
    let other = app
        .other_business("Other", domain::KybStatus::Approved)
        .await;
    let resp = app
        .get(
            &other.test.secret_key,
            &format!("/v1/virtual-accounts/{id}"),
        )
        .await;
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    assert_eq!(
        app.get_json(&other.test.secret_key, "/v1/virtual-accounts")
            .await["total"],
        0
    );
}
