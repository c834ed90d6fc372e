//! Adding a user to a business (`api admin user create`, `api dev`'s demo user, the Team page):
//! a generated password, shown once, stored as Argon2id, and the addition recorded in the audit
//! log in the same transaction.

use domain::ids::{BusinessId, UserId};
use domain::user::{generate_password, normalise_email};
use domain::{AuditAction, Role};
use sea_orm::{DatabaseConnection, TransactionTrait};
use serde::Serialize;
use store::audit::{self, Actor, Entry};
use store::users::{self, CreateOutcome};

use crate::passwords::Hashing;

/// What `api admin user create` prints: the only time the password is shown.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IssuedUser {
    pub id: UserId,
    pub business_id: BusinessId,
    pub email: String,
    pub role: &'static str,
    pub password: String,
}

impl std::fmt::Debug for IssuedUser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IssuedUser")
            .field("id", &self.id)
            .field("email", &self.email)
            .field("role", &self.role)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CreateUserError {
    #[error("the e-mail is not a valid address")]
    InvalidEmail,
    #[error("there is no business {0}")]
    NoSuchBusiness(BusinessId),
    #[error("a user with this e-mail already exists")]
    EmailTaken,
    #[error(transparent)]
    Other(#[from] anyhow::Error),
}

/// Adds a user as an operator (`api admin user create`, `api dev`'s demo user).
pub async fn create_user(
    db: &DatabaseConnection,
    business_id: &BusinessId,
    email: &str,
    role: Role,
) -> Result<IssuedUser, CreateUserError> {
    let hashing = Hashing::single();
    create_user_by(db, &hashing, &Actor::operator(), business_id, email, role).await
}

pub async fn create_user_by(
    db: &DatabaseConnection,
    hashing: &Hashing,
    actor: &Actor,
    business_id: &BusinessId,
    email: &str,
    role: Role,
) -> Result<IssuedUser, CreateUserError> {
    let email = normalise_email(email).ok_or(CreateUserError::InvalidEmail)?;
    let password = generate_password();
    let hash = hashing.hash(password.clone()).await?;
    let now = domain::time::now();
    let txn = db.begin().await.map_err(anyhow::Error::from)?;
    match users::create(&txn, business_id, &email, role, &hash, now)
        .await
        .map_err(anyhow::Error::from)?
    {
        CreateOutcome::Created(user) => {
            let entry = Entry::new(business_id, AuditAction::UserAdded)
                .target(user.email.as_str())
                .detail(format!("as {}", role.label()));
            audit::record(&txn, actor, entry, now)
                .await
                .map_err(anyhow::Error::from)?;
            txn.commit().await.map_err(anyhow::Error::from)?;
            Ok(IssuedUser {
                id: user.id,
                business_id: user.business_id,
                email: user.email,
                role: role.as_str(),
                password,
            })
        }
        CreateOutcome::EmailTaken => Err(CreateUserError::EmailTaken),
        CreateOutcome::NoSuchBusiness => Err(CreateUserError::NoSuchBusiness(business_id.clone())),
    }
}
