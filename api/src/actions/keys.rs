//! Rolling and revoking secret keys (`api admin key`, the Developers page).

use domain::Mode;
use domain::ids::BusinessId;
use store::audit::Actor;
use store::keys::{self, Expect, KeyAction, KeyChange};

use crate::state::AuthCache;

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("no business {0}")]
    NoSuchBusiness(BusinessId),
    #[error(transparent)]
    Db(#[from] sea_orm::DbErr),
}

/// The change, recorded in the audit log as `actor`'s, when the keys are as `expect` says
/// (else `KeyChange::Stale`, nothing changed). `cache`: this process's authentication cache,
/// which stops honouring a key rolled away "at once" or revoked right now, not after its TTL
/// (the CLI has none).
pub async fn change(
    db: &sea_orm::DatabaseConnection,
    cache: Option<&AuthCache>,
    actor: &Actor,
    business_id: &BusinessId,
    mode: Mode,
    action: KeyAction,
    expect: Expect<'_>,
) -> Result<KeyChange, KeyError> {
    let changed = keys::change_by(
        db,
        actor,
        business_id,
        mode,
        action,
        expect,
        domain::time::now(),
    )
    .await?
    .ok_or_else(|| KeyError::NoSuchBusiness(business_id.clone()))?;
    if let Some(cache) = cache {
        for hash in &changed.key_hashes {
            cache.forget(hash);
        }
    }
    Ok(changed.change)
}
