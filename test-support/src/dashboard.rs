//! The dashboard over plain HTTP: users of a test app's business, and a client that keeps
//! cookies like a browser and shows each redirect (headless Chromium is [`crate::browser`]).

use domain::ids::BusinessId;
use std::collections::BTreeMap;

use api::actions::users::create_user;
use domain::Role;
use reqwest::header::{HeaderMap, LOCATION, SET_COOKIE};

use crate::TestApp;

pub const SESSION_COOKIE: &str = "vas_session";

/// A user of the app's business with `role`: (e-mail, password).
pub async fn add_user(app: &TestApp, role: Role) -> (String, String) {
    add_user_to(app, &app.business.id, role).await
}

/// A user of `business_id` with `role`: (e-mail, password).
pub async fn add_user_to(app: &TestApp, business_id: &BusinessId, role: Role) -> (String, String) {
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

/// The stored user with `email`, if there is one.
pub async fn find_user(app: &TestApp, email: &str) -> Option<store::users::User> {
    store::users::find_by_email(&app.db, email)
        .await
        .expect("users read")
}

/// The stored user with `email` (there must be one).
pub async fn stored_user(app: &TestApp, email: &str) -> store::users::User {
    find_user(app, email)
        .await
        .unwrap_or_else(|| panic!("no user {email}"))
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

/// The first form token in `body`, if there is one.
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

    /// POSTs a form with its form token (`token`, as the page carried it) and `fields`.
    pub async fn post_form(&mut self, path: &str, token: &str, fields: &[(&str, &str)]) -> Answer {
        let fields: Vec<(&str, &str)> = [("form_token", token)]
            .into_iter()
            .chain(fields.iter().copied())
            .collect();
        self.post(path, &fields).await
    }

    /// The form token of the page at `path`.
    pub async fn form_token_of(&mut self, path: &str) -> String {
        self.get(path).await.form_token()
    }

    /// Opens `page` and sends its form to `action` with `fields`, as a person filling it in.
    pub async fn submit(&mut self, page: &str, action: &str, fields: &[(&str, &str)]) -> Answer {
        let token = self.form_token_of(page).await;
        self.post_form(action, &token, fields).await
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

    /// Asserts that a form was taken (a 303) and that the page it leads to says `notice`.
    pub async fn assert_done(&mut self, answer: Answer, notice: &str) {
        assert_eq!(answer.status, 303, "{}", answer.body);
        let page = self.follow(answer).await;
        assert!(page.body.contains(notice), "no {notice:?} in {}", page.body);
    }

    /// Signs in with e-mail and password (no TOTP): the answer to the form's POST.
    pub async fn sign_in_answer(&mut self, email: &str, password: &str) -> Answer {
        let fields = [("email", email), ("password", password), ("next", "")];
        self.submit("/dashboard/sign-in", "/dashboard/sign-in", &fields)
            .await
    }

    /// Signs in with e-mail and password (no TOTP), asserting that it worked.
    pub async fn sign_in(&mut self, email: &str, password: &str) {
        let answer = self.sign_in_answer(email, password).await;
        assert_eq!(answer.status, 303, "sign-in failed: {}", answer.body);
        assert!(self.cookies.contains_key(SESSION_COOKIE));
    }
}

/// The status a sign-in from a fresh client (no cookies) gets: 303 in, 401 refused, 429 locked.
pub async fn sign_in_status(app: &TestApp, email: &str, password: &str) -> u16 {
    Http::new(app).sign_in_answer(email, password).await.status
}

/// Asserts that no page `http` received shows a secret: `app`'s business's keys and webhook
/// secrets (or any `whsec_`), `password`, `http`'s own session token, or any of
/// `identity_numbers`.
pub fn assert_no_secret_seen(
    http: &Http,
    app: &TestApp,
    password: &str,
    identity_numbers: &[String],
) {
    let session_token = http.cookies[SESSION_COOKIE].as_str();
    for body in &http.seen {
        for number in identity_numbers {
            assert!(
                !body.contains(number.as_str()),
                "an identity number in a page"
            );
        }
        for secret in [
            app.business.test.secret_key.as_str(),
            app.business.live.secret_key.as_str(),
            app.business.test.webhook_secret.as_str(),
            app.business.live.webhook_secret.as_str(),
            password,
            session_token,
        ] {
            assert!(!body.contains(secret), "a secret in a page");
        }
        assert!(!body.contains("whsec_"));
    }
}

/// The records of a CSV file as a spreadsheet reads them (RFC 4180: quoted cells with `""` for a
/// quote; every record ends in CRLF, a bare LF only inside quotes).
pub fn parse_csv(text: &str) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    let mut row = Vec::new();
    let mut cell = String::new();
    let mut chars = text.chars().peekable();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                cell.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => cell.push(c),
            (false, '"') => quoted = true,
            (false, ',') => row.push(std::mem::take(&mut cell)),
            (false, '\r') => {
                assert_eq!(chars.next(), Some('\n'), "a CR not followed by LF");
                row.push(std::mem::take(&mut cell));
                rows.push(std::mem::take(&mut row));
            }
            (false, '\n') => panic!("a bare LF ends a record: records end in CRLF"),
            (false, c) => cell.push(c),
        }
    }
    assert!(
        cell.is_empty() && row.is_empty(),
        "the last record ends in CRLF"
    );
    rows
}
