//! Operator commands: `dead list` and `replay`. They only read and write the database (a replay
//! is a fresh schedule and a job due now); the relay of any running process publishes it.

use std::collections::HashMap;
use std::io::Write;

use chrono::{DateTime, NaiveDate, Utc};
use domain::ids::{BusinessId, DeliveryId, EventId};
use domain::time::rfc3339;
use domain::{DeliveryStatus, EventType, Mode};
use entities::event;
use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter};
use serde::Serialize;
use store::audit::Actor;
use store::deliveries::{self, Delivery};

/// A dead delivery as `dead list` prints it: one JSON object per line.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeadLine {
    pub id: DeliveryId,
    pub event_id: EventId,
    pub event_type: Option<EventType>,
    pub business_id: BusinessId,
    pub mode: Mode,
    pub url: String,
    pub attempts: i32,
    pub last_status_code: Option<i32>,
    pub last_error: Option<String>,
    pub created_at: String,
    pub dead_at: Option<String>,
}

/// Prints every dead delivery (of one business, when given); returns how many.
pub async fn dead_list(
    db: &DatabaseConnection,
    business_id: Option<&BusinessId>,
    out: &mut impl Write,
) -> anyhow::Result<usize> {
    let dead = deliveries::list_dead(db, business_id, None).await?;
    let types = event_types(db, &dead).await?;
    for d in &dead {
        let line = DeadLine {
            id: d.id.clone(),
            event_id: d.event_id.clone(),
            event_type: types.get(&d.event_id).copied(),
            business_id: d.business_id.clone(),
            mode: d.mode,
            url: d.url.clone(),
            attempts: d.attempts,
            last_status_code: d.last_status_code,
            last_error: d.last_error.clone(),
            created_at: rfc3339(&d.created_at),
            dead_at: d.completed_at.as_ref().map(rfc3339),
        };
        writeln!(out, "{}", serde_json::to_string(&line)?)?;
    }
    Ok(dead.len())
}

async fn event_types(
    db: &DatabaseConnection,
    dead: &[Delivery],
) -> anyhow::Result<HashMap<EventId, EventType>> {
    let mut types = HashMap::new();
    let ids: Vec<EventId> = dead.iter().map(|d| d.event_id.clone()).collect();
    for chunk in ids.chunks(500) {
        let rows = event::Entity::find()
            .filter(event::Column::Id.is_in(chunk.to_vec()))
            .all(db)
            .await?;
        types.extend(rows.into_iter().map(|e| (e.id, e.event_type)));
    }
    Ok(types)
}

/// What to replay.
#[derive(Debug, Clone)]
pub enum ReplayTarget {
    Ids(Vec<String>),
    AllDead {
        business_id: Option<BusinessId>,
        since: Option<DateTime<Utc>>,
    },
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ReplayLine<'a> {
    id: &'a str,
    event_id: &'a str,
    status: DeliveryStatus,
    url: &'a str,
}

/// Replays deliveries, each recorded in the audit log as this host account's; prints one line
/// per replayed delivery. Unknown ids are an error, after the known ones were replayed.
pub async fn replay(
    db: &DatabaseConnection,
    target: &ReplayTarget,
    out: &mut impl Write,
) -> anyhow::Result<usize> {
    let now = domain::time::now();
    let actor = Actor::operator_via("worker-webhooks replay");
    let (replayed, missing) = match target {
        ReplayTarget::Ids(ids) => {
            let mut replayed = Vec::new();
            let mut missing = Vec::new();
            for id in ids {
                // Text that is no delivery id names no delivery: unknown, like a missing one.
                let found = match DeliveryId::parse(id) {
                    Ok(id) => deliveries::replay(db, &actor, &id, now).await?,
                    Err(_) => None,
                };
                match found {
                    Some(d) => replayed.push(d),
                    None => missing.push(id.clone()),
                }
            }
            (replayed, missing)
        }
        ReplayTarget::AllDead { business_id, since } => (
            deliveries::replay_all_dead(db, &actor, business_id.as_ref(), *since, now).await?,
            Vec::new(),
        ),
    };
    for d in &replayed {
        let line = ReplayLine {
            id: &d.id,
            event_id: &d.event_id,
            status: d.status,
            url: &d.url,
        };
        writeln!(out, "{}", serde_json::to_string(&line)?)?;
    }
    anyhow::ensure!(
        missing.is_empty(),
        "no such delivery: {}",
        missing.join(", ")
    );
    Ok(replayed.len())
}

/// `--since`: an RFC 3339 time, a date (midnight UTC), or a span back from now such as `30m`,
/// `12h` or `7d`.
pub fn parse_since(value: &str, now: DateTime<Utc>) -> Result<DateTime<Utc>, String> {
    let value = value.trim();
    if let Ok(t) = DateTime::parse_from_rfc3339(value) {
        return Ok(t.with_timezone(&Utc));
    }
    if let Ok(d) = NaiveDate::parse_from_str(value, "%Y-%m-%d") {
        return Ok(d.and_hms_opt(0, 0, 0).expect("midnight exists").and_utc());
    }
    let split = value
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(value.len());
    let (number, unit) = value.split_at(split);
    let n: i64 = number
        .parse()
        .map_err(|_| format!("`{value}` is not a time (RFC 3339, YYYY-MM-DD, or e.g. 12h)"))?;
    let span = match unit {
        "s" => chrono::Duration::seconds(n),
        "m" => chrono::Duration::minutes(n),
        "h" => chrono::Duration::hours(n),
        "d" => chrono::Duration::days(n),
        _ => {
            return Err(format!(
                "`{value}` is not a time (RFC 3339, YYYY-MM-DD, or e.g. 12h)"
            ));
        }
    };
    Ok(now - span)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_takes_times_dates_and_spans() {
        let now = DateTime::parse_from_rfc3339("2025-03-10T12:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(
            parse_since("2025-03-01T08:30:00+01:00", now).unwrap(),
            DateTime::parse_from_rfc3339("2025-03-01T07:30:00Z").unwrap()
        );
        assert_eq!(
            parse_since("2025-03-01", now).unwrap(),
            DateTime::parse_from_rfc3339("2025-03-01T00:00:00Z").unwrap()
        );
        assert_eq!(
            parse_since("12h", now).unwrap(),
            now - chrono::Duration::hours(12)
        );
        assert_eq!(
            parse_since("7d", now).unwrap(),
            now - chrono::Duration::days(7)
        );
        assert!(parse_since("yesterday", now).is_err());
        assert!(parse_since("5w", now).is_err());
    }
}
