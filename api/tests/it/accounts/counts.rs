//! List totals without a search are kept with every creation and status change, not
//! counted over the rows: under concurrent creations (numbered at once, pending, rejected by the
//! bank) and deactivations (of pending and of active accounts) every total a caller sees equals
//! the rows stored.

use domain::AccountStatus;
use entities::virtual_account;
use sea_orm::{ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter};
use serde_json::json;
use test_support::{Backend, TestApp, account_body, spawn_app_with};

test_support::on_both_databases!(totals_never_drift_from_the_rows_under_concurrency,);

/// Stored accounts of the app's business in test mode, of one status or all.
async fn stored(app: &TestApp, status: Option<AccountStatus>) -> u64 {
    let mut select = virtual_account::Entity::find()
        .filter(virtual_account::Column::BusinessId.eq(app.business.id.as_str()));
    if let Some(status) = status {
        select = select.filter(virtual_account::Column::Status.eq(status));
    }
    select.count(&app.db).await.unwrap()
}

/// The `total` a caller is answered for the list, filtered by `status` or not.
async fn answered(app: &TestApp, status: Option<AccountStatus>) -> (u64, bool) {
    let path = match status {
        Some(s) => format!("/v1/virtual-accounts?pageSize=1&status={s}"),
        None => "/v1/virtual-accounts?pageSize=1".to_owned(),
    };
    let page = app.get_json(app.test_key(), &path).await;
    (
        page["total"].as_u64().unwrap(),
        page["totalIsEstimate"].as_bool().unwrap(),
    )
}

async fn totals_never_drift_from_the_rows_under_concurrency(backend: Backend) {
    let requests: u32 = if backend.is_postgres() { 120 } else { 48 };
    let app = spawn_app_with(backend, |c| c.limits.accounts_per_hour = 10_000).await;
    let semaphore = std::sync::Arc::new(tokio::sync::Semaphore::new(24));
    let mut tasks = Vec::new();
    for n in 0..requests {
        let (client, base, key) = (
            app.client.clone(),
            app.base.clone(),
            app.test_key().to_owned(),
        );
        let semaphore = semaphore.clone();
        tasks.push(tokio::spawn(async move {
            let _permit = semaphore.acquire().await.unwrap();
            // test-bank numbers at once, access-bank later (pending), a 99999… identity is
            // rejected by the bank (failed).
            let mut body = account_body(n, ["test-bank", "access-bank"][n as usize % 2]);
            if n % 5 == 0 {
                body["customerBvn"] = json!(format!("99999{:06}", n));
            }
            let resp = client
                .post(format!("{base}/v1/virtual-accounts"))
                .bearer_auth(&key)
                .header("Idempotency-Key", format!("k-{n}"))
                .json(&body)
                .send()
                .await
                .unwrap();
            let status = resp.status().as_u16();
            let created: serde_json::Value = resp.json().await.unwrap();
            assert!([201, 202, 422].contains(&status), "{status}: {created}");
            // Every third created account is deactivated at once, while others are created.
            if status != 422 && n % 3 == 0 {
                let id = created["id"].as_str().unwrap();
                let resp = client
                    .post(format!("{base}/v1/virtual-accounts/{id}/deactivate"))
                    .bearer_auth(&key)
                    .send()
                    .await
                    .unwrap();
                assert_eq!(resp.status().as_u16(), 200);
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }

    assert_eq!(stored(&app, None).await, u64::from(requests));
    for status in [
        None,
        Some(AccountStatus::Pending),
        Some(AccountStatus::Active),
        Some(AccountStatus::Failed),
        Some(AccountStatus::Deactivated),
    ] {
        let rows = stored(&app, status).await;
        assert!(rows > 0, "the run made {status:?} accounts");
        assert_eq!(answered(&app, status).await, (rows, false), "{status:?}");
    }
}
