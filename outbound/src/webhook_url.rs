//! The rules of a webhook URL, in one place for `api admin webhook set` and the dashboard's
//! Developers page (docs/api/events-and-webhooks.md): http or https; live URLs https; in both modes
//! public addresses only (checked again at every delivery, after DNS), unless the operator allows
//! private ones.

use domain::Mode;

use crate::ssrf::{SsrfError, TargetPolicy};

/// Longer than any real endpoint; a bound for a form field.
pub const MAX_URL_CHARS: usize = 2000;

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum WebhookUrlError {
    #[error("the URL is not valid")]
    Invalid,
    #[error("the URL is longer than {MAX_URL_CHARS} characters")]
    TooLong,
    #[error("the URL must be http or https")]
    Scheme,
    #[error("live webhook URLs must be https")]
    LiveNotHttps,
    /// The reason is in the message and is not also its source, so that printing the error
    /// with its causes (`{:#}`) says it once.
    #[error("refused: {0}")]
    Refused(SsrfError),
}

impl From<SsrfError> for WebhookUrlError {
    fn from(e: SsrfError) -> Self {
        WebhookUrlError::Refused(e)
    }
}

/// The URL, parsed, when `mode`'s events may go to it under `policy`.
pub async fn check(
    mode: Mode,
    raw: &str,
    policy: TargetPolicy,
) -> Result<url::Url, WebhookUrlError> {
    let raw = raw.trim();
    if raw.chars().count() > MAX_URL_CHARS {
        return Err(WebhookUrlError::TooLong);
    }
    let parsed = url::Url::parse(raw).map_err(|_| WebhookUrlError::Invalid)?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(WebhookUrlError::Scheme);
    }
    if mode == Mode::Live && parsed.scheme() != "https" {
        return Err(WebhookUrlError::LiveNotHttps);
    }
    // The same in both modes: a test-mode reply is shown to the developer, so a test URL
    // aimed inside the network would read it (checked again at every delivery, after DNS).
    policy.check_url(&parsed).await?;
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PUBLIC: TargetPolicy = TargetPolicy::PUBLIC_ONLY;

    #[tokio::test]
    async fn urls_must_be_public_in_both_modes_and_live_ones_https() {
        for mode in [Mode::Test, Mode::Live] {
            for url in [
                "https://127.0.0.1:9000/hook",
                "https://[::1]/hook",
                "https://10.0.0.1/hook",
                "https://169.254.169.254/latest/meta-data",
                "https://[::ffff:127.0.0.1]/hook",
                "https://localhost/hook",
            ] {
                assert!(
                    matches!(
                        check(mode, url, PUBLIC).await,
                        Err(WebhookUrlError::Refused(_))
                    ),
                    "{mode} {url}"
                );
            }
        }
        assert!(
            check(Mode::Test, "http://93.184.216.34/hook", PUBLIC)
                .await
                .is_ok()
        );
        assert_eq!(
            check(Mode::Test, "ftp://example.com/", PUBLIC).await,
            Err(WebhookUrlError::Scheme)
        );
        assert_eq!(
            check(Mode::Test, "not a url", PUBLIC).await,
            Err(WebhookUrlError::Invalid)
        );
        assert_eq!(
            check(Mode::Live, "http://203.0.113.9/hook", PUBLIC).await,
            Err(WebhookUrlError::LiveNotHttps)
        );
        let long = format!("https://example.com/{}", "a".repeat(MAX_URL_CHARS));
        assert_eq!(
            check(Mode::Test, &long, PUBLIC).await,
            Err(WebhookUrlError::TooLong)
        );
    }

    #[tokio::test]
    async fn an_operator_may_allow_this_machine_but_never_link_local() {
        let allow = TargetPolicy::ALLOW_PRIVATE;
        assert!(
            check(Mode::Test, "http://127.0.0.1:9000/hook", allow)
                .await
                .is_ok()
        );
        assert!(
            check(Mode::Test, "http://localhost:9000/hook", allow)
                .await
                .is_ok()
        );
        assert!(
            check(Mode::Live, "https://10.0.0.1/hook", allow)
                .await
                .is_ok()
        );
        assert!(matches!(
            check(Mode::Test, "http://169.254.169.254/", allow).await,
            Err(WebhookUrlError::Refused(_))
        ));
    }
}
