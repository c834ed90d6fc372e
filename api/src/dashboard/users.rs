//! Adding a user to a business, one implementation for `api admin user create`, `api dev`'s demo
//! user and (later) the Team page: a generated password, shown once, stored as Argon2id.

use domain::Role;
use domain::user::{generate_password, normalise_email};
use sea_orm::DatabaseConnection;
use serde::Serialize;
use shared::db::users::{self, CreateOutcome};

/// What `api admin user create` prints: the only time the password is shown.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IssuedUser {
    pub id: String,
    pub business_id: String,
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
    NoSuchBusiness(String),
    #[error("a user with this e-mail already exists")]
    EmailTaken,
    #[error(transparent)]
    Other(#[from] anyhow::Error),
}

pub async fn create_user(
    db: &DatabaseConnection,
    business_id: &str,
    email: &str,
    role: Role,
) -> Result<IssuedUser, CreateUserError> {
    let email = normalise_email(email).ok_or(CreateUserError::InvalidEmail)?;
    let password = generate_password();
    let hash = super::auth::hash_password(password.clone()).await?;
    match users::create(db, business_id, &email, role, &hash, domain::time::now())
        .await
        .map_err(anyhow::Error::from)?
    {
        CreateOutcome::Created(user) => Ok(IssuedUser {
            id: user.id,
            business_id: user.business_id,
            email: user.email,
            role: role.as_str(),
            password,
        }),
        CreateOutcome::EmailTaken => Err(CreateUserError::EmailTaken),
        CreateOutcome::NoSuchBusiness => {
            Err(CreateUserError::NoSuchBusiness(business_id.to_owned()))
        }
    }
}
