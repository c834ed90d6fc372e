//! `bench lists` against the real api on PostgreSQL (skipped without TEST_DATABASE_URL): the
//! loaded accounts are listed and searched like any others, the deposits, events, payouts and
//! ledger rows it loads are counted by the database as inserted, the home page's figures are
//! read over them and the deliveries it loads, and every case is measured.

use bench::lists::{self, ListsSettings};
use std::time::Duration;
use test_support::{Backend, spawn_app};

#[tokio::test]
async fn loads_lists_searches_and_explains_on_postgres() {
    let Some(backend) = Backend::postgres() else {
        eprintln!("skipped: TEST_DATABASE_URL is not set");
        return;
    };
    let app = spawn_app(backend).await;
    let settings = ListsSettings {
        database_url: app.test_db.url.clone(),
        api: app.base.clone(),
        key: app.business.test.secret_key.clone(),
        business: None,
        accounts: 1_000,
        rows: 3_000,
        requests: 3,
        warmup: 1,
        page_size: 20,
        deep_page: 10,
        api_pid: Some(std::process::id()),
        timeout: Duration::from_secs(30),
    };
    let report = lists::run(&settings).await.expect("bench lists");
    assert_eq!((report.accounts, report.loaded), (1_000, 1_000));
    let totals: Vec<_> = report
        .cases
        .iter()
        .map(|c| (c.name.as_str(), c.total))
        .collect();
    assert_eq!(
        totals[..11],
        [
            ("page 1", Some((1_000, false))),
            ("q = one account's e-mail", Some((1, false))),
            // Parts of that e-mail find that account alone.
            ("q = part of an e-mail (local part + @)", Some((1, false))),
            ("q = part of an e-mail (digits + @)", Some((1, false))),
            // The number is found through `account_numbers`, not the text's trigram index.
            ("q = one account's number", Some((1, false))),
            ("q = part of a number (its last 6 digits)", Some((1, false))),
            // Every 50th loaded account is deactivated: `account_states` holds each status.
            ("status=active", Some((980, false))),
            ("status=deactivated", Some((20, false))),
            ("q matching nothing", Some((0, false))),
            (
                "cursor hops from page 10 (nextCursor)",
                Some((1_000, false))
            ),
            ("page=10 (offset; no goal)", Some((1_000, false))),
        ]
    );
    // Each other list: loaded, its maintained count right after the load, and every total
    // answered exact (events: one in 100 flagged; payouts: one in 20 failed).
    for other in &report.others {
        assert_eq!(
            (other.rows, other.loaded, other.checked),
            (3_000, 3_000, Some((3_000, 3_000))),
            "{:?}",
            other.list
        );
    }
    assert_eq!(
        totals[11..],
        [
            ("deposits: page 1", Some((3_000, false))),
            (
                "deposits: cursor hops from page 10 (nextCursor)",
                Some((3_000, false))
            ),
            ("events: page 1", Some((3_000, false))),
            ("events: page 1, type=deposit.flagged", Some((30, false))),
            (
                "events: cursor hops from page 10 (nextCursor)",
                Some((3_000, false))
            ),
            (
                "events: type=deposit.flagged, cursor hops from page 1 (nextCursor)",
                Some((30, false))
            ),
            ("payouts: page 1", Some((3_000, false))),
            ("payouts: page 1, status=failed", Some((150, false))),
            (
                "payouts: cursor hops from page 10 (nextCursor)",
                Some((3_000, false))
            ),
            (
                "payouts: status=failed, cursor hops from page 3 (nextCursor)",
                Some((150, false))
            ),
            ("ledger: page 1", Some((3_000, false))),
            (
                "ledger: cursor hops from page 10 (nextCursor)",
                Some((3_000, false))
            ),
            ("home page: every figure (store::home::read)", None),
        ]
    );
    // One delivery per loaded event, and the home page's figures are those rows': 1 in 50 dead,
    // 1 in 100 retrying, the rest succeeded.
    assert_eq!(report.deliveries, Some(3_000));
    let home = store::home::read(
        &app.db,
        &app.business.id,
        domain::Mode::Test,
        chrono::Utc::now(),
    )
    .await
    .unwrap();
    let outcomes = &home.deliveries;
    assert_eq!(
        (
            outcomes.succeeded,
            outcomes.retrying,
            outcomes.waiting,
            outcomes.dead
        ),
        (2_910, 30, 0, 60)
    );
    assert!(outcomes.last_failure.is_some());
    for case in &report.cases {
        assert_eq!(
            case.stats.statuses.get(&200).copied(),
            Some(3),
            "{}: {:?}",
            case.name,
            case.stats.error_samples
        );
    }
    // The accounts' 9 (a search by number and a status filter among them), the others', and the
    // home page's two counted from the rows.
    assert_eq!(report.plans.len(), 9 + 3 + 4 + 4 + 3 + 2);
    assert!(report.api_rss_kb.is_some());
    let text = report.to_text();
    assert!(text.contains("| page 1 |"), "{text}");

    // A rerun finds the accounts there and loads none.
    let again = lists::run(&settings).await.expect("rerun");
    assert_eq!((again.accounts, again.loaded), (1_000, 0));
    assert!(
        again
            .others
            .iter()
            .all(|o| o.loaded == 0 && o.rows == 3_000)
    );

    // The loaded accounts read like any others: one by the API shows its fields.
    let page = app
        .get_json(app.test_key(), "/v1/virtual-accounts?pageSize=1")
        .await;
    let account = &page["data"][0];
    assert!(
        account["customerEmail"].as_str().unwrap().contains('@'),
        "{page}"
    );
    assert_eq!(
        account["accountNumber"].as_str().unwrap().len(),
        10,
        "{page}"
    );
}
