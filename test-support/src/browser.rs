//! The dashboard in headless Chromium, driven over WebDriver by a chromedriver of each test's
//! own: start a browser (or say plainly it was skipped), find, fill, click, wait, read, sign in
//! and out, and screenshots.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::TestApp;
use crate::http::free_port;

/// The WebDriver client, for what tests do beyond these helpers (one version, this crate's).
pub use fantoccini;

/// Headless Chromium, driven over WebDriver by a chromedriver of this test's own.
pub struct Browser {
    pub client: fantoccini::Client,
    driver: Driver,
}

struct Driver {
    child: Child,
    port: u16,
    _profile: tempfile::TempDir,
}

impl Drop for Driver {
    fn drop(&mut self) {
        use std::io::{Read, Write};
        // chromedriver's own /shutdown ends its sessions, and the Chromium each started, then
        // itself; only if it does not exit is the process we started killed, by its pid.
        if let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", self.port)) {
            let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
            let _ = stream.write_all(
                b"GET /shutdown HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
            );
            let _ = stream.read_to_end(&mut Vec::new());
        }
        for _ in 0..50 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn installed(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|dir| PathBuf::from(dir).join(program))
        .find(|path| path.is_file())
}

impl Browser {
    /// A fresh browser, or None (with a line saying so) when Chromium is not installed. Under
    /// CI a missing Chromium fails the test instead: the browser tests must run there. Pages'
    /// JavaScript is off unless `javascript` (the dashboard must work without it).
    pub async fn start(test: &str, javascript: bool) -> Option<Browser> {
        Self::launch(test, javascript, false).await
    }

    /// [`Browser::start`] with scripts on (to measure) and the pages asked for their dark
    /// colour scheme (`prefers-color-scheme: dark`), as a system set to dark mode does.
    pub async fn start_dark(test: &str) -> Option<Browser> {
        Self::launch(test, true, true).await
    }

    async fn launch(test: &str, javascript: bool, dark: bool) -> Option<Browser> {
        let (Some(chromium), Some(chromedriver)) = (
            installed("chromium").or_else(|| installed("chromium-browser")),
            installed("chromedriver"),
        ) else {
            if std::env::var_os("CI").is_some() {
                panic!(
                    "CI is set but chromium/chromedriver are not installed: browser tests must run in CI"
                );
            }
            eprintln!(
                "SKIPPED {test}: chromium and chromium-driver are not installed \
                 (apt-get install chromium chromium-driver)"
            );
            return None;
        };
        let port = free_port();
        let mut command = Command::new(chromedriver);
        command
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let child = command.spawn().expect("chromedriver starts");
        let profile = tempfile::tempdir().unwrap();
        let driver = Driver {
            child,
            port,
            _profile: profile,
        };
        let mut args = vec![
            "--headless=new".to_owned(),
            "--no-sandbox".to_owned(),
            "--disable-gpu".to_owned(),
            "--disable-dev-shm-usage".to_owned(),
            "--disable-extensions".to_owned(),
            "--no-first-run".to_owned(),
            "--password-store=basic".to_owned(),
            "--window-size=1280,900".to_owned(),
            format!("--user-data-dir={}", driver._profile.path().display()),
        ];
        if dark {
            // WebDriver cannot emulate the scheme; this flag makes Chromium's own theme dark.
            args.push("--force-dark-mode".to_owned());
        }
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".into(),
            serde_json::json!({
                "binary": chromium,
                "args": args,
                "prefs": {
                    "profile.managed_default_content_settings.javascript":
                        if javascript { 1 } else { 2 },
                },
            }),
        );
        let url = format!("http://127.0.0.1:{port}");
        let mut last_error = None;
        for _ in 0..100 {
            let connector = hyper_util::client::legacy::connect::HttpConnector::new();
            match fantoccini::ClientBuilder::new(connector)
                .capabilities(caps.clone())
                .connect(&url)
                .await
            {
                Ok(client) => return Some(Browser { client, driver }),
                Err(e) => {
                    last_error = Some(e);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
        panic!("chromedriver did not start: {last_error:?}");
    }

    /// Ends the browser session (the driver process is ended when this is dropped).
    pub async fn finish(self) {
        let _ = self.client.close().await;
        drop(self.driver);
    }
}

/// Runs a `screenshots` test's `shots` with a browser (scripts on, only so [`screenshot`] can
/// measure a page's height: the pages have none), an app on SQLite and its owner's (e-mail,
/// password); skipped, saying so, without Chromium.
pub async fn screenshots(shots: impl AsyncFnOnce(&fantoccini::Client, &TestApp, (String, String))) {
    let Some(browser) = Browser::start("screenshots", true).await else {
        return;
    };
    let app = crate::spawn_app(crate::Backend::Sqlite).await;
    let owner = crate::dashboard::add_user(&app, domain::Role::Owner).await;
    shots(&browser.client, &app, owner).await;
    browser.finish().await;
}

/// Where screenshots go: `VAS_SCREENSHOTS`, else /tmp/vas-screens (outside the repository).
pub fn screenshot_dir() -> PathBuf {
    std::env::var_os("VAS_SCREENSHOTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp/vas-screens"))
}

/// Saves the page as PNGs `<dir>/<name>-1.png`, `-2.png`, …: one per window height, scrolling
/// down (at most `max` of them), so each picture is readable at its real size.
pub async fn screenshot(client: &fantoccini::Client, name: &str, max: u32) -> Vec<PathBuf> {
    let dir = screenshot_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let number = |script: &'static str| async move {
        client
            .execute(script, vec![])
            .await
            .ok()
            .and_then(|v| v.as_f64())
            .unwrap_or(0.0)
    };
    let height = number("return document.documentElement.scrollHeight").await;
    let view = number("return window.innerHeight").await.max(1.0);
    let mut paths = Vec::new();
    let mut top = 0.0;
    for i in 1..=max {
        client
            .execute(&format!("window.scrollTo(0, {top})"), vec![])
            .await
            .unwrap();
        let png = client.screenshot().await.unwrap();
        let path = dir.join(format!("{name}-{i}.png"));
        std::fs::write(&path, png).unwrap();
        paths.push(path);
        if top + view >= height {
            break;
        }
        top += view - 40.0;
    }
    client
        .execute("window.scrollTo(0, 0)", vec![])
        .await
        .unwrap();
    paths
}

/// [`screenshot`] at desktop (1280×900) and phone (390×844) width: `<name>-desktop-N.png` and
/// `<name>-phone-N.png`, each path printed; the window is desktop-sized again afterwards.
pub async fn screenshot_both_widths(client: &fantoccini::Client, name: &str, max: u32) {
    for (label, width, height) in [("desktop", 1280, 900), ("phone", 390, 844)] {
        client.set_window_size(width, height).await.unwrap();
        for path in screenshot(client, &format!("{name}-{label}"), max).await {
            eprintln!("screenshot: {}", path.display());
        }
    }
    client.set_window_size(1280, 900).await.unwrap();
}

/// What a `screenshots` test takes of a page: [`screenshot_both_widths`], three pictures a
/// width at most.
pub async fn shoot(client: &fantoccini::Client, name: &str) {
    screenshot_both_widths(client, name, 3).await;
}

/// The element `css` finds on the page (a test failure naming it when there is none).
pub async fn find(c: &fantoccini::Client, css: &str) -> fantoccini::elements::Element {
    c.find(fantoccini::Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("no {css}: {e}"))
}

/// Replaces the text of the field `css` finds with `text`.
pub async fn fill(c: &fantoccini::Client, css: &str, text: &str) {
    let field = find(c, css).await;
    field.clear().await.unwrap();
    field.send_keys(text).await.unwrap();
}

/// Clicks what `css` finds.
pub async fn click(c: &fantoccini::Client, css: &str) {
    find(c, css).await.click().await.unwrap();
}

/// Waits until the page's address satisfies `ready` (a form post and its redirect finished).
pub async fn wait_for_url(
    c: &fantoccini::Client,
    what: &str,
    ready: impl Fn(&url::Url) -> bool,
) -> url::Url {
    for _ in 0..100 {
        let url = c.current_url().await.unwrap();
        if ready(&url) {
            return url;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "the browser never reached {what}; it is at {}",
        c.current_url().await.unwrap()
    );
}

/// The page's text, as a reader sees it.
pub async fn body_text(c: &fantoccini::Client) -> String {
    find(c, "body").await.text().await.unwrap()
}

/// Fills and sends the sign-in form (what follows is the test's to check).
pub async fn sign_in(c: &fantoccini::Client, app: &TestApp, email: &str, password: &str) {
    c.goto(&app.url("/dashboard/sign-in")).await.unwrap();
    fill(c, "#email", email).await;
    fill(c, "#password", password).await;
    click(c, "form button[type=submit]").await;
}

/// Signs in a user without a second step and waits until the dashboard shows.
pub async fn signed_in(c: &fantoccini::Client, app: &TestApp, email: &str, password: &str) {
    sign_in(c, app, email, password).await;
    wait_for_url(c, "the dashboard", |u| u.path() != "/dashboard/sign-in").await;
}

/// Signs out with the page's sign-out button and waits for the sign-in page.
pub async fn sign_out(c: &fantoccini::Client) {
    click(c, "form[action='/dashboard/sign-out'] button").await;
    wait_for_url(c, "the sign-in page", |u| u.path() == "/dashboard/sign-in").await;
}
