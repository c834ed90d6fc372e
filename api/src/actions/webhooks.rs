//! A mode's webhook URL and secret (`api admin webhook`, the Developers page).

use chrono::Duration;
use crypto::Cipher;
use domain::Mode;
use domain::ids::BusinessId;
use outbound::ssrf::TargetPolicy;
use outbound::webhook_url::{self, WebhookUrlError};
use sea_orm::DatabaseConnection;
use store::audit::Actor;
use store::businesses::{self, Rotation};

/// How long the previous webhook secret keeps signing after a rotation
/// (docs/operations/keys-and-secret-rotation.md).
pub const SECRET_OVERLAP: Duration = Duration::hours(24);

#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    /// The URL breaks a rule of `outbound::webhook_url`.
    #[error(transparent)]
    Refused(#[from] WebhookUrlError),
    #[error("no business {0}")]
    NoSuchBusiness(BusinessId),
    #[error(transparent)]
    Db(#[from] sea_orm::DbErr),
}

/// Sets the URL that receives the mode's events, after the rules of `outbound::webhook_url`
/// under `policy`, recorded in the audit log as `actor`'s. Returns the URL as stored.
pub async fn set_url(
    db: &DatabaseConnection,
    policy: TargetPolicy,
    actor: &Actor,
    business_id: &BusinessId,
    mode: Mode,
    typed: &str,
) -> Result<url::Url, WebhookError> {
    let url = webhook_url::check(mode, typed, policy).await?;
    if !businesses::set_webhook_url_by(db, actor, business_id, mode, url.as_str()).await? {
        return Err(WebhookError::NoSuchBusiness(business_id.clone()));
    }
    Ok(url)
}

/// Issues a new webhook secret; the previous one keeps signing beside it for
/// [`SECRET_OVERLAP`]. `expected_version`: the version a form was shown with (a form sent again
/// finds it gone: `Rotation::Stale`, nothing changed); None rotates whatever is there.
pub async fn rotate_secret(
    db: &DatabaseConnection,
    cipher: &Cipher,
    actor: &Actor,
    business_id: &BusinessId,
    mode: Mode,
    expected_version: Option<&str>,
) -> Result<Rotation, WebhookError> {
    businesses::rotate_webhook_secret_by(
        db,
        cipher,
        actor,
        business_id,
        mode,
        SECRET_OVERLAP,
        expected_version,
    )
    .await?
    .ok_or_else(|| WebhookError::NoSuchBusiness(business_id.clone()))
}
