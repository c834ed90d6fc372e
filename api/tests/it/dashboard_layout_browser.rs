//! Every dashboard page at a phone's, a tablet's and a desktop's width (390, 768 and 1366 px) in
//! headless Chromium, with data enough to fill its tables: no page is wider than its window, no
//! element sticks out of its card (a table that scrolls inside its own box may, below desktop
//! width), every status pill and every figure on the home page is one line, the business's name
//! is shown whole, and every section is reachable from the navigation (on a phone, from its
//! menu). The home page's charts name their scale and days, and the dashboard reads in the dark
//! colour scheme too. Without Chromium the tests say they were skipped; under CI a missing
//! Chromium fails.
//!
//! Each page is saved as a screenshot at each width (`VAS_SCREENSHOTS`, else /tmp/vas-screens),
//! `layout-<page>-<width>-N.png`, and the home page in the dark scheme as
//! `dark-home-<width>-N.png`, for people to look at.

use std::time::Duration;

use chrono::Utc;
use domain::{Mode, Role};
use serde_json::json;
use test_support::browser::fantoccini::{Client, Locator};
use test_support::browser::{self, Browser, signed_in};
use test_support::dashboard::add_user;
use test_support::{Backend, BankDeposit, Receiver, Reply, TestApp, account_body, spawn_app};

const WIDTHS: [(u32, u32); 3] = [(390, 844), (768, 1024), (1366, 900)];

/// What is wrong with the page's layout at this width, one line each (empty: nothing).
const LAYOUT_PROBLEMS: &str = r#"
const out = [];
const desktop = window.innerWidth >= 1200;
const page = document.documentElement;
if (page.scrollWidth > window.innerWidth) {
  out.push(`the page is ${page.scrollWidth}px wide in a ${window.innerWidth}px window`);
}
const name = (el) => {
  const text = (el.innerText || el.textContent || '').trim().replace(/\s+/g, ' ').slice(0, 40);
  return `<${el.tagName.toLowerCase()} class="${el.className}"> "${text}"`;
};
const scrolls = (el) => ['auto', 'scroll'].includes(getComputedStyle(el).overflowX);
for (const box of document.querySelectorAll('main .card, main .table-wrap, main .filters')) {
  if (scrolls(box) && desktop && box.scrollWidth > box.clientWidth + 1) {
    out.push(`${name(box)} scrolls sideways (${box.scrollWidth}px in ${box.clientWidth}px)`);
  }
}
for (const el of document.querySelectorAll('main *')) {
  const box = el.parentElement.closest('.card, .table-wrap, .filters');
  if (!box) continue;
  // Inside a box that scrolls on its own, content may be wider than the box.
  let up = el.parentElement, inside = false;
  while (up && !inside) { inside = scrolls(up); if (up === box) break; up = up.parentElement; }
  if (inside) continue;
  const r = el.getBoundingClientRect();
  // Hidden, or placed off-screen on purpose for screen readers only.
  if (r.width === 0 || r.height === 0 || r.right < 0) continue;
  const b = box.getBoundingClientRect();
  if (r.right > b.right + 1 || r.left < b.left - 1) {
    out.push(`${name(el)} sticks out of ${name(box)} (${Math.round(r.left)}–${Math.round(r.right)} in ${Math.round(b.left)}–${Math.round(b.right)})`);
  }
}
for (const pill of document.querySelectorAll('.badge')) {
  const s = getComputedStyle(pill);
  const r = pill.getBoundingClientRect();
  if (r.height === 0) continue;
  const line = parseFloat(s.lineHeight) + parseFloat(s.paddingTop) + parseFloat(s.paddingBottom)
    + parseFloat(s.borderTopWidth) + parseFloat(s.borderBottomWidth);
  if (r.height > line + 1) out.push(`the pill ${name(pill)} is ${Math.round(r.height)}px tall, its line ${Math.round(line)}px`);
}
for (const figure of document.querySelectorAll('.stat-value')) {
  const s = getComputedStyle(figure);
  const r = figure.getBoundingClientRect();
  if (r.height > parseFloat(s.lineHeight) + 1 || figure.scrollWidth > figure.clientWidth + 1) {
    out.push(`the figure ${name(figure)} does not fit on one line of its card (${Math.round(r.height)}px tall, ${figure.scrollWidth}px in ${figure.clientWidth}px)`);
  }
}
const business = document.querySelector('.business');
if (business && business.scrollWidth > business.clientWidth + 1) {
  out.push(`the business's name is cut (${business.scrollWidth}px in ${business.clientWidth}px)`);
}
return out;
"#;

/// The dashboard's sections a reader can reach now: the navigation's links that are on screen,
/// whole and not hidden (on a phone, once its menu is open).
const REACHABLE_SECTIONS: &str = r#"
const seen = [];
for (const a of document.querySelectorAll('nav a')) {
  const r = a.getBoundingClientRect();
  const s = getComputedStyle(a);
  if (r.width > 0 && r.height > 0 && s.visibility !== 'hidden' && r.left >= 0
      && r.right <= window.innerWidth && r.top >= 0) {
    seen.push(a.textContent.trim());
  }
}
return seen;
"#;

async fn strings(c: &Client, script: &str) -> Vec<String> {
    let value = c.execute(script, vec![]).await.unwrap();
    serde_json::from_value(value).unwrap()
}

/// A business with every kind of row its pages list: active, pending, failed and deactivated
/// accounts, credited and flagged deposits, events whose webhooks failed once and then arrived,
/// a settlement account and payouts. Returns (an active account's id, the failed one's id, an
/// event's id).
async fn fill(app: &TestApp) -> (String, String, String) {
    let receiver = Receiver::start().await;
    receiver.script([Reply::status(500).body("{\"error\":\"temporarily unavailable\"}")]);
    receiver.set_default(Reply::ok().body("ok"));
    app.set_webhook_url(&app.business.id, Mode::Test, &receiver.url)
        .await;
    let _worker = test_support::start_webhooks_worker(app, app.shutdown.clone());
    let mut accounts = Vec::new();
    for n in 0..4 {
        accounts.push(app.active_account(app.test_key(), n).await);
    }
    let pending = app
        .create(
            app.test_key(),
            "acct-pending",
            &account_body(10, "access-bank"),
        )
        .await;
    assert_eq!(pending.status(), 202);
    let mut rejected = account_body(11, "test-bank");
    rejected["customerBvn"] = json!("99999000011");
    let failed = app.create(app.test_key(), "acct-failed", &rejected).await;
    assert_eq!(failed.status(), 422);
    let failed = app
        .get_json(app.test_key(), "/v1/virtual-accounts?status=failed")
        .await;
    let failed_id = failed["data"][0]["id"].as_str().unwrap().to_owned();
    for i in 0..14 {
        let reference = format!("WEMA{:020}", 880_000_000 + i);
        let amount = [150_000, 2_500_050, 75_000_000, 1_999][i % 4];
        let narration = ["Invoice 1042", "School fees, term 2", "Rent for March"][i % 3];
        let deposit = BankDeposit::new(&reference, amount)
            .from("Chukwuemeka Okonkwo-Adeyemi", "First City Monument Bank")
            .narration(narration);
        app.bank_deposit(&accounts[i % 3], deposit).await;
    }
    let resp = app
        .deactivate(app.test_key(), accounts[3]["id"].as_str().unwrap())
        .await;
    assert_eq!(resp.status(), 200);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let late = BankDeposit::new("WEMA000000000LATE", 500_000)
        .from("Chukwuemeka Okonkwo-Adeyemi", "First City Monument Bank")
        .narration("Late transfer");
    app.bank_deposit(&accounts[3], late).await;
    app.set_settlement_account("daily").await;
    for (i, amount) in [500_000i64, 1_000_001, 250_000].into_iter().enumerate() {
        let mut body =
            json!({"amount": amount, "narration": "Weekly sweep to the operating account"});
        if i != 1 {
            body["reference"] = json!(format!("sweep-2026-week-{i}"));
        }
        let r = app
            .client
            .post(app.url("/v1/payouts"))
            .bearer_auth(app.test_key())
            .header("Idempotency-Key", format!("po-{i}"))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 202);
    }
    receiver.wait_for(3, Duration::from_secs(20)).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let events = app
        .get_json(app.test_key(), "/v1/events?type=deposit.received")
        .await;
    let event = events["data"][0]["id"].as_str().unwrap().to_owned();
    (
        accounts[0]["id"].as_str().unwrap().to_owned(),
        failed_id,
        event,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_page_holds_at_phone_tablet_and_desktop_width() {
    // Scripts on only so the test can measure; the pages have none.
    let Some(browser) =
        Browser::start("every_page_holds_at_phone_tablet_and_desktop_width", true).await
    else {
        return;
    };
    let c = &browser.client;
    let app = spawn_app(Backend::Sqlite).await;
    let (email, password) = add_user(&app, Role::Owner).await;
    let (active, failed, event) = fill(&app).await;
    signed_in(c, &app, &email, &password).await;
    let pages = [
        ("home", "/dashboard/test/".to_owned()),
        ("accounts", "/dashboard/test/accounts".to_owned()),
        ("account", format!("/dashboard/test/accounts/{active}")),
        (
            "account-failed",
            format!("/dashboard/test/accounts/{failed}"),
        ),
        ("deposits", "/dashboard/test/deposits".to_owned()),
        ("events", "/dashboard/test/events".to_owned()),
        ("event", format!("/dashboard/test/events/{event}")),
        ("balance", "/dashboard/test/balance".to_owned()),
        ("developers", "/dashboard/test/developers".to_owned()),
        ("team", "/dashboard/test/team".to_owned()),
        ("profile", "/dashboard/profile?mode=test".to_owned()),
    ];
    let sections = [
        "Home",
        "Accounts",
        "Deposits",
        "Events",
        "Balance & payouts",
        "Developers",
        "Team",
    ];
    let mut problems = Vec::new();
    for (width, height) in WIDTHS {
        c.set_window_size(width, height).await.unwrap();
        for (name, path) in &pages {
            c.goto(&app.url(path)).await.unwrap();
            for problem in strings(c, LAYOUT_PROBLEMS).await {
                problems.push(format!("{name} at {width}px: {problem}"));
            }
            // The home page whole: on a phone its charts are screens below its figures.
            let most = if *name == "home" { 8 } else { 2 };
            for path in browser::screenshot(c, &format!("layout-{name}-{width}"), most).await {
                eprintln!("screenshot: {}", path.display());
            }
        }
        // Every section from the navigation: on a narrow screen, once its menu is opened.
        c.goto(&app.url("/dashboard/test/accounts")).await.unwrap();
        if let Ok(menu) = c.find(Locator::Css("details.menu > summary")).await
            && menu.is_displayed().await.unwrap()
        {
            menu.click().await.unwrap();
            for path in browser::screenshot(c, &format!("layout-menu-{width}"), 1).await {
                eprintln!("screenshot: {}", path.display());
            }
        }
        let reachable = strings(c, REACHABLE_SECTIONS).await;
        for section in sections {
            if !reachable.iter().any(|s| s == section) {
                problems.push(format!(
                    "at {width}px \"{section}\" cannot be reached from the navigation (on screen: {reachable:?})"
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    browser.finish().await;
}

/// Each chart on the page: its heading, the y axis's words (top, zero), the x axis's, and its
/// bars' hover texts.
const CHARTS: &str = r#"
const words = (c, css) => [...c.querySelectorAll(css)].map((e) => e.textContent.trim());
return [...document.querySelectorAll('.chart')].map((c) => [
  c.querySelector('h2').textContent.trim(),
  words(c, '.y-axis span'),
  words(c, '.x-axis span'),
  words(c, 'svg rect title'),
]);
"#;

/// What [`CHARTS`] reads of a chart: its heading, the y and x axes' words, its hover texts.
type ChartSeen = (String, Vec<String>, Vec<String>, Vec<String>);

/// Whether the page was asked for its dark scheme, and the contrast (WCAG) against the card of
/// the page, the heading, the charts' axis words and bars.
const COLOURS: &str = r#"
const lum = (css) => {
  const [r, g, b] = css.match(/[\d.]+/g).slice(0, 3).map((v) => {
    v = Number(v) / 255;
    return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
  });
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
};
const of = (css, property) => lum(getComputedStyle(document.querySelector(css))[property]);
const card = of('.card', 'backgroundColor');
const contrast = (l) => (Math.max(l, card) + 0.05) / (Math.min(l, card) + 0.05);
return {
  dark: matchMedia('(prefers-color-scheme: dark)').matches,
  page: of('body', 'backgroundColor'),
  card,
  heading: contrast(of('h1', 'color')),
  axis: contrast(of('.chart .y-axis', 'color')),
  bar: contrast(of('.chart .bar', 'fill')),
};
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_home_charts_name_their_scale_and_days_and_read_in_the_dark() {
    let Some(browser) =
        Browser::start_dark("the_home_charts_name_their_scale_and_days_and_read_in_the_dark").await
    else {
        return;
    };
    let c = &browser.client;
    let app = spawn_app(Backend::Sqlite).await;
    let (email, password) = add_user(&app, Role::Owner).await;
    fill(&app).await;
    signed_in(c, &app, &email, &password).await;
    c.set_window_size(1366, 900).await.unwrap();
    c.goto(&app.url("/dashboard/test/")).await.unwrap();

    // Days as Lagos names them: the last 30, today last.
    let day = |back: i64| {
        (Utc::now() + chrono::Duration::hours(1) - chrono::Duration::days(back))
            .format("%-d %b")
            .to_string()
    };
    let (first, today) = (day(29), day(0));
    let figure = async |id: &str| {
        browser::find(c, &format!("#{id} + .stat-value"))
            .await
            .text()
            .await
            .unwrap()
    };
    let (received, available) = (figure("today").await, figure("available").await);
    let charts: Vec<ChartSeen> =
        serde_json::from_value(c.execute(CHARTS, vec![]).await.unwrap()).unwrap();
    let words = |list: &[&str]| list.iter().map(|w| (*w).to_owned()).collect::<Vec<_>>();
    let chart = |title: &str| {
        charts
            .iter()
            .find(|c| c.0 == title)
            .unwrap_or_else(|| panic!("no chart {title} in {charts:?}"))
    };
    // Every deposit is today's: today's bar is the tallest, and the axis's top is its amount.
    let deposits = chart("Deposits per day");
    assert_eq!(
        deposits.1,
        words(&[received.as_str(), "₦0.00"]),
        "{deposits:?}"
    );
    assert_eq!(
        deposits.2,
        words(&[first.as_str(), today.as_str()]),
        "{deposits:?}"
    );
    assert_eq!(deposits.3.len(), 30, "{deposits:?}");
    assert_eq!(
        deposits.3[29],
        format!("{today}: 15 deposits, {received}"),
        "{deposits:?}"
    );
    let balance = chart("Balance over time");
    assert_eq!(
        balance.1,
        words(&[available.as_str(), "₦0.00"]),
        "{balance:?}"
    );
    assert_eq!(
        balance.2,
        words(&[first.as_str(), today.as_str()]),
        "{balance:?}"
    );
    assert_eq!(
        balance.3[29],
        format!("{today}: {available} at the day's end"),
        "{balance:?}"
    );
    assert_eq!(balance.3[28], format!("{}: ₦0.00 at the day's end", day(1)));
    let payouts = chart("Payouts by outcome");
    assert_eq!(payouts.1, words(&["3", "0"]), "{payouts:?}");
    assert_eq!(
        payouts.2,
        words(&["Pending", "Processing", "Succeeded", "Failed", "Reversed"]),
        "{payouts:?}"
    );
    assert_eq!(payouts.3[0], "Pending: 3", "{payouts:?}");
    let webhooks = chart("Webhook success rate");
    assert_eq!(webhooks.1, words(&["100%", "0%"]), "{webhooks:?}");
    assert_eq!(
        webhooks.2,
        words(&[first.as_str(), today.as_str()]),
        "{webhooks:?}"
    );
    assert_eq!(
        webhooks.3[0],
        format!("{first}: no deliveries"),
        "{webhooks:?}"
    );

    // The dark scheme: a dark page and cards, light words at AA contrast, bars that stand out.
    let colours = c.execute(COLOURS, vec![]).await.unwrap();
    assert_eq!(
        colours["dark"], true,
        "the browser did not ask for the dark scheme"
    );
    let number = |key: &str| colours[key].as_f64().unwrap();
    assert!(number("page") < 0.05, "the page is not dark: {colours}");
    assert!(number("card") < 0.05, "the cards are not dark: {colours}");
    assert!(number("heading") >= 4.5, "{colours}");
    assert!(number("axis") >= 4.5, "the charts' words: {colours}");
    assert!(number("bar") >= 3.0, "the charts' bars: {colours}");
    for (width, height) in [(1366, 900), (390, 844)] {
        c.set_window_size(width, height).await.unwrap();
        for path in browser::screenshot(c, &format!("dark-home-{width}"), 2).await {
            eprintln!("screenshot: {}", path.display());
        }
    }
    browser.finish().await;
}
