//! Sign-ins sent all at once (docs/dashboard.md): parallel wrong passwords for one e-mail check
//! at most five passwords and then lock it, right password included; and a flood of sign-ins
//! keeps the api's memory bounded and its API answering. Alone in its test binary because both
//! read what is process-wide (`/metrics`' password-check counter, the process's resident
//! memory), and its tests run one at a time for the same reason.

use std::sync::Arc;
use std::time::{Duration, Instant};

use domain::Role;
use test_support::dashboard::{Http, add_user};
use test_support::metrics::{peak_rss_kib, rss_kib};
use test_support::{Backend, spawn_app_with, store};
use tokio::sync::Mutex;

test_support::on_both_databases!(
    parallel_wrong_passwords_check_five_and_then_refuse_the_right_one,
    five_hundred_sign_ins_at_once_keep_memory_bounded_and_the_api_answering,
    an_unknown_email_costs_one_password_check_like_a_known_one,
);

/// One test at a time in this binary (see the module's note).
static ONE_AT_A_TIME: Mutex<()> = Mutex::const_new(());

/// `dashboard_password_checks_total` as `/metrics` shows it (0 before the first check).
async fn password_checks(base: &str) -> u64 {
    let text = reqwest::get(format!("{base}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("dashboard_password_checks_total "))
        .map_or(0, |v| v.trim().parse::<f64>().unwrap() as u64)
}

async fn parallel_wrong_passwords_check_five_and_then_refuse_the_right_one(backend: Backend) {
    let _one = ONE_AT_A_TIME.lock().await;
    // No per-address limit and a long wait for a hash: only the e-mail's lock decides.
    let app = spawn_app_with(backend, |c| {
        c.dashboard.sign_ins_per_minute = 0;
        c.dashboard.password_hash_wait_ms = 60_000;
    })
    .await;
    let (email, password) = add_user(&app, Role::Owner).await;
    let before = password_checks(&app.base).await;

    let mut streams = tokio::task::JoinSet::new();
    for _ in 0..40 {
        let (base, email) = (app.base.clone(), email.clone());
        streams.spawn(async move {
            Http::at(&base)
                .sign_in_answer(&email, "a wrong password, guessed")
                .await
        });
    }
    let answers = streams.join_all().await;
    let checks = password_checks(&app.base).await - before;
    let statuses = |code: u16| answers.iter().filter(|a| a.status == code).count();
    println!(
        "40 parallel wrong passwords: {checks} checked, {} answered 401, {} answered 429",
        statuses(401),
        statuses(429)
    );
    assert_eq!(checks, 5, "passwords checked");
    // The first four checked are wrong; the fifth locks; the rest are refused unchecked.
    assert_eq!((statuses(401), statuses(429)), (4, 36));
    for answer in answers.iter().filter(|a| a.status == 429) {
        assert!(
            answer.body.contains("Too many failed attempts"),
            "{}",
            answer.body
        );
    }

    // Locked: the right password is refused, and not even checked.
    let mut http = Http::new(&app);
    let right = http.sign_in_answer(&email, &password).await;
    assert_eq!(right.status, 429, "{}", right.body);
    assert!(right.body.contains("Too many failed attempts"));
    assert_eq!(password_checks(&app.base).await - before, 5);

    // When the lock ends (moved back in the database rather than waited for), it signs in.
    store::end_sign_in_lockouts(&app.db).await;
    http.sign_in(&email, &password).await;
}

async fn five_hundred_sign_ins_at_once_keep_memory_bounded_and_the_api_answering(backend: Backend) {
    let _one = ONE_AT_A_TIME.lock().await;
    // The per-address limit off: the bound on hashes alone keeps memory (one client address
    // sends everything here; the per-address limit has its own test).
    let app = spawn_app_with(backend, |c| c.dashboard.sign_ins_per_minute = 0).await;
    let mut page = Http::new(&app);
    let token = page.form_token_of("/dashboard/sign-in").await;
    let cookie = page
        .cookies
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("; ");
    // The api runs in this process: its memory is this process's.
    let rss_before = rss_kib().expect("VmRSS");

    // Valid API requests, one after the other, for as long as the flood lasts.
    let flooding = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let api = {
        let (base, key, flooding) = (
            app.base.clone(),
            app.business.test.secret_key.clone(),
            flooding.clone(),
        );
        tokio::spawn(async move {
            let client = reqwest::Client::new();
            let mut answers = Vec::new();
            while flooding.load(std::sync::atomic::Ordering::Relaxed) {
                let status = client
                    .get(format!("{base}/v1/virtual-accounts"))
                    .bearer_auth(&key)
                    .timeout(Duration::from_secs(10))
                    .send()
                    .await
                    .map(|r| r.status().as_u16());
                answers.push(status.map_err(|e| e.to_string()));
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            answers
        })
    };
    let peak = {
        let flooding = flooding.clone();
        tokio::spawn(async move {
            let mut peak = 0;
            while flooding.load(std::sync::atomic::Ordering::Relaxed) {
                peak = peak.max(rss_kib().expect("VmRSS"));
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            peak
        })
    };

    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let started = Instant::now();
    let mut flood = tokio::task::JoinSet::new();
    for i in 0..500 {
        let email = format!("flood-{i}-{}@example.com", ulid::Ulid::new());
        let body = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs([
                ("form_token", token.as_str()),
                ("email", &email),
                ("password", "not the password of anyone"),
            ])
            .finish();
        let request = client
            .post(format!("{}/dashboard/sign-in", app.base))
            .header("content-type", "application/x-www-form-urlencoded")
            .header("origin", &app.base)
            .header("cookie", &cookie)
            .body(body);
        flood.spawn(async move {
            let response = request.send().await.expect("an answer");
            let retry_after = response.headers().contains_key("retry-after");
            (response.status().as_u16(), retry_after)
        });
    }
    let answers = flood.join_all().await;
    let took = started.elapsed();
    flooding.store(false, std::sync::atomic::Ordering::Relaxed);
    let api_answers = api.await.unwrap();
    let peak = peak.await.unwrap();
    let (rss_after, hwm) = (rss_kib().expect("VmRSS"), peak_rss_kib().expect("VmHWM"));
    let count = |code: u16| answers.iter().filter(|(s, _)| *s == code).count();
    println!(
        "500 sign-ins at once in {took:?}: {} answered 401 (checked), {} answered 429 (busy); \
         RSS {rss_before} KiB before, {peak} KiB at the sampled peak, {rss_after} KiB after, \
         {hwm} KiB at the process's peak; {} API requests meanwhile",
        count(401),
        count(429),
        api_answers.len()
    );

    // Every sign-in was checked (401) or refused as busy with a time to come back (429).
    for (status, retry_after) in &answers {
        assert!(
            *status == 401 || (*status == 429 && *retry_after),
            "a sign-in answered {status} (Retry-After: {retry_after})"
        );
    }
    // Memory stayed bounded: 2 hashes of 19 MiB at once, whatever the number of sign-ins. This
    // process also holds the binary's earlier tests (the other backend's app), so what the flood
    // added is what counts, against 256 MiB less what an idle api holds (about 31 MiB).
    const IDLE_API_KIB: u64 = 40 * 1024;
    let added = peak.max(rss_after).saturating_sub(rss_before);
    assert!(
        added + IDLE_API_KIB < 256 * 1024,
        "the flood added {added} KiB (the process's peak: {hwm} KiB)"
    );
    // The API kept answering meanwhile.
    assert!(!api_answers.is_empty());
    for answer in &api_answers {
        assert_eq!(answer, &Ok(200), "an API request during the flood");
    }
}

/// The same work whether or not the e-mail exists (docs/dashboard.md): an unknown one's password is
/// checked against a dummy hash, so its answer takes as long.
async fn an_unknown_email_costs_one_password_check_like_a_known_one(backend: Backend) {
    let _one = ONE_AT_A_TIME.lock().await;
    let app = spawn_app_with(backend, |_| {}).await;
    let (email, _) = add_user(&app, Role::Viewer).await;
    for typed in [email.as_str(), "nobody-at-all@example.com"] {
        let before = password_checks(&app.base).await;
        let answer = Http::new(&app)
            .sign_in_answer(typed, "a wrong password")
            .await;
        assert_eq!(answer.status, 401);
        assert_eq!(password_checks(&app.base).await - before, 1, "{typed}");
    }
}
