//! Dashboard test helpers: users, a plain-HTTP "browser" with a cookie jar (for the HTTP
//! tests), and headless Chromium over WebDriver (for the browser tests), with a screenshot
//! helper.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use api::actions::users::create_user;
use domain::Role;
use reqwest::header::{HeaderMap, LOCATION, SET_COOKIE};

use crate::common::TestApp;

pub const SESSION_COOKIE: &str = "vas_session";

/// A user of the app's business with `role`: (e-mail, password).
pub async fn add_user(app: &TestApp, role: Role) -> (String, String) {
    add_user_to(app, &app.business.id, role).await
}

pub async fn add_user_to(app: &TestApp, business_id: &str, role: Role) -> (String, String) {
    let email = format!(
        "{}-{}@example.com",
        role.as_str(),
        ulid::Ulid::new().to_string().to_lowercase()
    );
    let issued = create_user(&app.db, business_id, &email, role)
        .await
        .expect("user created");
    (issued.email, issued.password)
}

/// One answer, read whole.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: String,
}

impl Answer {
    pub fn location(&self) -> &str {
        self.headers
            .get(LOCATION)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }

    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }

    pub fn set_cookies(&self) -> Vec<String> {
        self.headers
            .get_all(SET_COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok().map(str::to_owned))
            .collect()
    }

    /// The first form token on the page.
    pub fn form_token(&self) -> String {
        form_token(&self.body).unwrap_or_else(|| panic!("no form token in {}", self.body))
    }
}

pub fn form_token(body: &str) -> Option<String> {
    let marker = r#"name="form_token" value=""#;
    let start = body.find(marker)? + marker.len();
    let end = body[start..].find('"')?;
    Some(body[start..start + end].to_owned())
}

/// A client that keeps cookies like a browser and does not follow redirects (tests look at
/// them); `follow` follows them.
pub struct Http {
    pub base: String,
    client: reqwest::Client,
    pub cookies: BTreeMap<String, String>,
    /// Every body received, for secrecy checks.
    pub seen: Vec<String>,
}

impl Http {
    pub fn new(app: &TestApp) -> Http {
        Http::at(&app.base)
    }

    pub fn at(base: &str) -> Http {
        Http {
            base: base.trim_end_matches('/').to_owned(),
            client: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
            cookies: BTreeMap::new(),
            seen: Vec::new(),
        }
    }

    fn cookie_header(&self) -> String {
        self.cookies
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    async fn read(&mut self, response: reqwest::Response) -> Answer {
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        for cookie in headers.get_all(SET_COOKIE) {
            let cookie = cookie.to_str().unwrap();
            let pair = cookie.split(';').next().unwrap();
            let (name, value) = pair.split_once('=').unwrap();
            if value.is_empty() || cookie.contains("Max-Age=0") {
                self.cookies.remove(name);
            } else {
                self.cookies.insert(name.to_owned(), value.to_owned());
            }
        }
        let body = response.text().await.unwrap();
        self.seen.push(body.clone());
        Answer {
            status,
            headers,
            body,
        }
    }

    pub fn url(&self, path: &str) -> String {
        if path.starts_with("http") {
            path.to_owned()
        } else {
            format!("{}{path}", self.base)
        }
    }

    pub async fn get(&mut self, path: &str) -> Answer {
        let mut req = self.client.get(self.url(path));
        if !self.cookies.is_empty() {
            req = req.header("cookie", self.cookie_header());
        }
        let response = req.send().await.expect("request sent");
        self.read(response).await
    }

    /// POST a form as a browser would (with an Origin header, as browsers send on forms).
    pub async fn post(&mut self, path: &str, fields: &[(&str, &str)]) -> Answer {
        let body = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(fields)
            .finish();
        let mut req = self
            .client
            .post(self.url(path))
            .header("content-type", "application/x-www-form-urlencoded")
            .header("origin", &self.base)
            .body(body);
        if !self.cookies.is_empty() {
            req = req.header("cookie", self.cookie_header());
        }
        let response = req.send().await.expect("request sent");
        self.read(response).await
    }

    /// Follows redirects from an answer until a page.
    pub async fn follow(&mut self, mut answer: Answer) -> Answer {
        for _ in 0..10 {
            if !(300..400).contains(&answer.status) {
                return answer;
            }
            let location = answer.location().to_owned();
            answer = self.get(&location).await;
        }
        panic!("too many redirects");
    }

    /// Signs in with e-mail and password (no TOTP): the answer to the form's POST.
    pub async fn sign_in_answer(&mut self, email: &str, password: &str) -> Answer {
        let page = self.get("/dashboard/sign-in").await;
        let token = page.form_token();
        self.post(
            "/dashboard/sign-in",
            &[
                ("form_token", &token),
                ("email", email),
                ("password", password),
                ("next", ""),
            ],
        )
        .await
    }

    pub async fn sign_in(&mut self, email: &str, password: &str) {
        let answer = self.sign_in_answer(email, password).await;
        assert_eq!(answer.status, 303, "sign-in failed: {}", answer.body);
        assert!(self.cookies.contains_key(SESSION_COOKIE));
    }
}

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

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Browser {
    /// A fresh browser, or None (with a line saying so) when Chromium is not installed. Under
    /// CI a missing Chromium fails the test instead: the browser tests must run there. Pages'
    /// JavaScript is off unless `javascript` (the dashboard must work without it).
    pub async fn start(test: &str, javascript: bool) -> Option<Browser> {
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
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".into(),
            serde_json::json!({
                "binary": chromium,
                "args": [
                    "--headless=new",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-dev-shm-usage",
                    "--disable-extensions",
                    "--no-first-run",
                    "--password-store=basic",
                    "--window-size=1280,900",
                    format!("--user-data-dir={}", driver._profile.path().display()),
                ],
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

/// Pages in the browser tests: find, fill, click, wait, read, sign in and out.
pub async fn find(c: &fantoccini::Client, css: &str) -> fantoccini::elements::Element {
    c.find(fantoccini::Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("no {css}: {e}"))
}

pub async fn fill(c: &fantoccini::Client, css: &str, text: &str) {
    let field = find(c, css).await;
    field.clear().await.unwrap();
    field.send_keys(text).await.unwrap();
}

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

pub async fn sign_out(c: &fantoccini::Client) {
    click(c, "form[action='/dashboard/sign-out'] button").await;
    wait_for_url(c, "the sign-in page", |u| u.path() == "/dashboard/sign-in").await;
}
