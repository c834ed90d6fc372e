//! The rules of a webhook URL, in one place for `api admin webhook set` and the dashboard's
//! Developers page (SPEC §4): http or https; live URLs https and public only (checked again at
//! every delivery, after DNS); test mode may deliver to this machine.

use domain::Mode;

use crate::ssrf::{self, SsrfError};

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
    #[error("refused: {0}")]
    Refused(#[from] SsrfError),
}

/// The URL, parsed, when `mode`'s events may go to it.
pub async fn check(mode: Mode, raw: &str) -> Result<url::Url, WebhookUrlError> {
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
    // Live events go to public addresses only (checked again at every delivery, after DNS);
    // test mode may deliver to this machine.
    if mode == Mode::Live {
        ssrf::check_url(&parsed).await?;
    }
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn test_urls_may_be_local_and_live_ones_must_be_public_https() {
        assert!(
            check(Mode::Test, "http://127.0.0.1:9000/hook")
                .await
                .is_ok()
        );
        assert_eq!(
            check(Mode::Test, "ftp://example.com/").await,
            Err(WebhookUrlError::Scheme)
        );
        assert_eq!(
            check(Mode::Test, "not a url").await,
            Err(WebhookUrlError::Invalid)
        );
        assert_eq!(
            check(Mode::Live, "http://203.0.113.9/hook").await,
            Err(WebhookUrlError::LiveNotHttps)
        );
        assert!(matches!(
            check(Mode::Live, "https://127.0.0.1/hook").await,
            Err(WebhookUrlError::Refused(_))
        ));
        let long = format!("https://example.com/{}", "a".repeat(MAX_URL_CHARS));
        assert_eq!(
            check(Mode::Test, &long).await,
            Err(WebhookUrlError::TooLong)
        );
    }
}
