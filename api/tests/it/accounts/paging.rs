//! docs/api/paging-and-search.md's list rules on the accounts and events lists: a cursor walks
//! every item exactly once, newest first, and is refused for another filter or when forged; `total`
//! is exact without `q` or up to the cap, an estimate beyond it; a filter (`status`, `type`) of the
//! accounts, events and payouts lists takes only its enumeration's values.

use domain::Mode;
use reqwest::StatusCode;
use serde_json::{Value, json as value};
use test_support::{Backend, TestApp, account_body, json, spawn_app, spawn_app_with};

test_support::on_both_databases!(
    a_cursor_walk_returns_every_account_once_newest_first,
    a_cursor_walk_over_events_ends_with_a_null_cursor,
    cursors_of_another_filter_or_forged_ones_are_refused,
    total_is_exact_up_to_the_cap_then_an_estimate,
    a_filter_outside_its_values_is_refused_naming_them_all,
);

async fn create_accounts(app: &TestApp, n: u32) -> Vec<String> {
    let mut ids = Vec::new();
    for n in 0..n {
        let account = json(
            app.create(
                app.test_key(),
                &format!("k{n}"),
                &account_body(n, "test-bank"),
            )
            .await,
        )
        .await;
        ids.push(account["id"].as_str().unwrap().to_owned());
    }
    ids
}

fn ids(page: &Value) -> Vec<String> {
    page["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_str().unwrap().to_owned())
        .collect()
}

/// Follows `nextCursor` from `first` to the end: every page's ids, and its `page` numbers.
async fn walk(app: &TestApp, path: &str, first: &str) -> (Vec<String>, Vec<u64>) {
    let mut page = app
        .get_json(app.test_key(), &format!("{path}?{first}"))
        .await;
    let (mut seen, mut numbers) = (Vec::new(), Vec::new());
    loop {
        seen.extend(ids(&page));
        numbers.push(page["page"].as_u64().unwrap());
        assert_eq!(page["totalIsEstimate"], false);
        let Some(cursor) = page["nextCursor"].as_str().map(str::to_owned) else {
            assert!(page["nextCursor"].is_null(), "{page}");
            break;
        };
        let next = format!("{path}?{first}&cursor={cursor}");
        let resp = app.get(app.test_key(), &next).await;
        assert_eq!(resp.status(), StatusCode::OK, "{next}");
        page = json(resp).await;
        assert!(numbers.len() < 100, "the walk ends");
    }
    (seen, numbers)
}

async fn a_cursor_walk_returns_every_account_once_newest_first(backend: Backend) {
    let app = spawn_app(backend).await;
    let created = create_accounts(&app, 23).await;
    let newest_first: Vec<String> = created.iter().rev().cloned().collect();
    let listed = app
        .get_json(app.test_key(), "/v1/virtual-accounts?pageSize=100")
        .await;
    assert_eq!(ids(&listed), newest_first);

    let (seen, pages) = walk(&app, "/v1/virtual-accounts", "pageSize=5").await;
    assert_eq!(seen, newest_first, "every account once, newest first");
    assert_eq!(pages, [1, 2, 3, 4, 5]);

    // The same walk with a search (the trigram path on PostgreSQL) and a status filter.
    let (seen, _) = walk(&app, "/v1/virtual-accounts", "pageSize=4&q=ADA1").await;
    let expected: Vec<String> = newest_first
        .iter()
        .zip((0..23u32).rev())
        .filter(|(_, n)| n.to_string().starts_with('1'))
        .map(|(id, _)| id.clone())
        .collect();
    assert_eq!(seen, expected, "ada1, ada10…ada19");
    let (seen, _) = walk(&app, "/v1/virtual-accounts", "pageSize=6&status=active").await;
    assert_eq!(seen, newest_first);

    // A page by number and the page a cursor reaches agree.
    let third = app
        .get_json(app.test_key(), "/v1/virtual-accounts?pageSize=5&page=3")
        .await;
    assert_eq!(ids(&third), newest_first[10..15]);
    assert!(third["nextCursor"].is_string());
    let fourth_by_cursor = app
        .get_json(
            app.test_key(),
            &format!(
                "/v1/virtual-accounts?pageSize=5&cursor={}",
                third["nextCursor"].as_str().unwrap()
            ),
        )
        .await;
    assert_eq!(ids(&fourth_by_cursor), newest_first[15..20]);
    assert_eq!(fourth_by_cursor["page"], 4);
    let last = app
        .get_json(app.test_key(), "/v1/virtual-accounts?pageSize=5&page=5")
        .await;
    assert!(last["nextCursor"].is_null(), "null on the last page");
}

async fn a_cursor_walk_over_events_ends_with_a_null_cursor(backend: Backend) {
    let app = spawn_app(backend).await;
    let mut recorded = Vec::new();
    for n in 0..11 {
        recorded.push(
            app.record_event(&app.business.id, Mode::Test, &value!({"n": n}))
                .await,
        );
    }
    recorded.reverse();
    let listed = app
        .get_json(app.test_key(), "/v1/events?pageSize=100")
        .await;
    assert_eq!(ids(&listed), recorded, "newest first");
    let (seen, pages) = walk(&app, "/v1/events", "pageSize=3").await;
    assert_eq!(seen, recorded);
    assert_eq!(pages, [1, 2, 3, 4]);
}

async fn refused(app: &TestApp, path: &str) {
    let resp = app.get(app.test_key(), path).await;
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY, "{path}");
    let body = json(resp).await;
    assert_eq!(body["code"], "validation_failed", "{path}");
    assert_eq!(body["errors"][0]["field"], "cursor", "{path}: {body}");
}

async fn cursors_of_another_filter_or_forged_ones_are_refused(backend: Backend) {
    let app = spawn_app(backend).await;
    create_accounts(&app, 4).await;
    for n in 0..3 {
        app.record_event(&app.business.id, Mode::Test, &value!({"n": n}))
            .await;
    }
    let page = app
        .get_json(app.test_key(), "/v1/virtual-accounts?pageSize=1&q=ada")
        .await;
    let cursor = page["nextCursor"].as_str().unwrap().to_owned();
    let ok = app
        .get(
            app.test_key(),
            &format!("/v1/virtual-accounts?pageSize=1&q=ada&cursor={cursor}"),
        )
        .await;
    assert_eq!(ok.status(), StatusCode::OK);

    for other in ["q=obi", "q=ADA", "", "status=pending&q=ada"] {
        refused(
            &app,
            &format!("/v1/virtual-accounts?{other}&cursor={cursor}"),
        )
        .await;
    }
    refused(&app, &format!("/v1/events?cursor={cursor}")).await;
    refused(
        &app,
        &format!("/v1/virtual-accounts?q=ada&page=2&cursor={cursor}"),
    )
    .await;
    // Forged: the cursor's bytes altered, or something that never was a cursor.
    let mut altered = cursor.clone().into_bytes();
    let at = altered.len() / 2;
    altered[at] = if altered[at] == b'A' { b'B' } else { b'A' };
    let altered = String::from_utf8(altered).unwrap();
    for forged in [
        altered.as_str(),
        "abc",
        "",
        "YzEKMAoyMDI1LTAxLTAxVDAwOjAwOjAwWgp2YV8x",
    ] {
        refused(&app, &format!("/v1/virtual-accounts?q=ada&cursor={forged}")).await;
    }
    // Another business's cursor (same filter, same mode) does not read this business's list.
    let events = app.get_json(app.test_key(), "/v1/events?pageSize=1").await;
    let events_cursor = events["nextCursor"].as_str().unwrap().to_owned();
    let other = app
        .other_business("Other Ltd", domain::KybStatus::Pending)
        .await;
    let resp = app
        .get(
            &other.test.secret_key,
            &format!("/v1/events?pageSize=1&cursor={events_cursor}"),
        )
        .await;
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
}

async fn total_is_exact_up_to_the_cap_then_an_estimate(backend: Backend) {
    let postgres = backend.is_postgres();
    let app = spawn_app_with(backend, |config| config.limits.list_exact_total = 3).await;
    create_accounts(&app, 6).await;
    let page = |query: &'static str| {
        let app = &app;
        async move {
            app.get_json(app.test_key(), &format!("/v1/virtual-accounts?{query}"))
                .await
        }
    };
    // Without q: exact, whatever the count.
    let all = page("pageSize=2").await;
    assert_eq!(
        (all["total"].clone(), all["totalIsEstimate"].clone()),
        (value!(6), value!(false))
    );
    assert_eq!(all["totalPages"], 3);
    // With q matching at most the cap: exact.
    let few = page("q=user-1").await;
    assert_eq!(
        (few["total"].clone(), few["totalIsEstimate"].clone()),
        (value!(1), value!(false))
    );
    // With q matching more than the cap: PostgreSQL estimates (never below the cap + 1) and says
    // so; SQLite, embedded, counts exactly.
    let many = page("q=example.com&pageSize=4").await;
    assert_eq!(ids(&many).len(), 4, "the page itself is exact");
    if postgres {
        assert_eq!(many["totalIsEstimate"], true, "{many}");
        assert!(many["total"].as_u64().unwrap() >= 4, "{many}");
    } else {
        assert_eq!(
            (many["total"].clone(), many["totalIsEstimate"].clone()),
            (value!(6), value!(false))
        );
    }
    assert!(many["nextCursor"].is_string());
}

async fn a_filter_outside_its_values_is_refused_naming_them_all(backend: Backend) {
    let app = spawn_app(backend).await;
    for (path, field, allowed) in [
        (
            "/v1/virtual-accounts?status=open",
            "status",
            "pending, active, deactivated, failed",
        ),
        (
            "/v1/payouts?status=paid",
            "status",
            "pending, processing, succeeded, failed, reversed",
        ),
        (
            "/v1/events?type=payout.sent",
            "type",
            "virtualaccount.active, virtualaccount.failed, virtualaccount.deactivated, \
             deposit.received, deposit.flagged, payout.succeeded, payout.failed, payout.reversed, \
             settlement_account.updated, webhook.test",
        ),
    ] {
        let body = test_support::expect_problem(
            app.get(app.test_key(), path).await,
            422,
            "validation_failed",
        )
        .await;
        assert_eq!(body["errors"][0]["field"], field, "{path}: {body}");
        assert_eq!(body["errors"][0]["code"], "invalid_value", "{path}: {body}");
        assert_eq!(
            body["errors"][0]["message"],
            format!("{field} must be one of {allowed}"),
            "{path}"
        );
    }
    // A value of the enumeration filters (the same reader, the other way).
    for path in [
        "/v1/virtual-accounts?status=failed",
        "/v1/payouts?status=reversed",
        "/v1/events?type=webhook.test",
    ] {
        let page = app.get_json(app.test_key(), path).await;
        assert_eq!(page["data"], value!([]), "{path}");
    }
}
