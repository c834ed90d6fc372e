use chrono::{DateTime, Utc};
use sea_orm::{ActiveValue::Set, ConnectionTrait, DbErr, EntityTrait};
use serde::{Deserialize, Serialize};

use super::entities::outbox;
use crate::ids::new_id;

/// Jobs carry ids only: a consumer re-reads the row and decides from its state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Job {
    /// Get a number for a pending account (create it at the provider if it never was).
    Provision { account_id: String },
    /// Close a deactivated account at its provider.
    Close { account_id: String },
}

impl Job {
    pub fn queue(&self) -> &'static str {
        match self {
            Job::Provision { .. } | Job::Close { .. } => "provisioning",
        }
    }
}

/// Writes a job in the caller's transaction, so it exists exactly when the change that causes it.
pub async fn enqueue<C: ConnectionTrait>(
    db: &C,
    job: &Job,
    run_at: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<(), DbErr> {
    let row = outbox::ActiveModel {
        id: Set(new_id("job")),
        queue: Set(job.queue().to_owned()),
        payload: Set(serde_json::to_string(job).expect("jobs serialise")),
        run_at: Set(run_at),
        published_at: Set(None),
        created_at: Set(now),
    };
    outbox::Entity::insert(row).exec_without_returning(db).await?;
    Ok(())
}
