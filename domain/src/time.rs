use chrono::{DateTime, SubsecRound, Utc};

/// Now, at the microsecond precision PostgreSQL keeps, so a value reads back equal to what was
/// written on either database.
pub fn now() -> DateTime<Utc> {
    Utc::now().trunc_subsecs(6)
}

/// RFC 3339 UTC with a `Z`, as every response and event shows timestamps.
pub fn rfc3339(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}
