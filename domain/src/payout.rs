//! Payouts and the balance ledger: statuses and their transitions, what a provider's transfer
//! status means for a payout, the request rules, the settlement schedule. No I/O.

use chrono::{DateTime, Duration, FixedOffset, NaiveDate, NaiveTime, Utc};
use serde_json::{Map, Value};

use crate::settlement_banks::{SettlementBank, check_settlement_account};
use crate::text_enum::text_enum;
use crate::validation::{
    FieldError, bounded_text, optional_string, reject_unknown, required_string,
};

/// The smallest payout: NGN 100.
pub const MIN_PAYOUT: i64 = 10_000;

/// How long live payouts wait after a settlement-account change.
pub const LIVE_HOLD: Duration = Duration::hours(24);

text_enum! {
    /// `pending → processing → succeeded → reversed`; `pending → failed`; `processing → failed`.
    pub enum PayoutStatus {
        Pending = "pending",
        Processing = "processing",
        Succeeded = "succeeded",
        Failed = "failed",
        Reversed = "reversed",
    }
}

impl PayoutStatus {
    /// The state machine: the only transitions a payout may take.
    pub fn can_become(self, next: PayoutStatus) -> bool {
        use PayoutStatus::*;
        matches!(
            (self, next),
            (Pending, Processing)
                | (Pending, Failed)
                | (Processing, Succeeded)
                | (Processing, Failed)
                | (Succeeded, Reversed)
        )
    }

    /// Money still on its way out: counted as `inFlight`.
    pub fn in_flight(self) -> bool {
        matches!(self, PayoutStatus::Pending | PayoutStatus::Processing)
    }

    /// Reaching this status gives the amount back to the balance (a `payout_return`).
    pub fn returns_money(self) -> bool {
        matches!(self, PayoutStatus::Failed | PayoutStatus::Reversed)
    }

    /// The event that announces reaching this status, if any.
    pub fn event(self) -> Option<&'static str> {
        match self {
            PayoutStatus::Succeeded => Some("payout.succeeded"),
            PayoutStatus::Failed => Some("payout.failed"),
            PayoutStatus::Reversed => Some("payout.reversed"),
            PayoutStatus::Pending | PayoutStatus::Processing => None,
        }
    }
}

/// A transfer's status as the payout provider reports it (`GET /transfers/{reference}` or a
/// `transfer.*` notification).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransferState {
    Processing,
    Succeeded,
    Failed,
    Reversed,
    /// The provider never received a transfer with this reference.
    Unknown,
}

/// What a provider's answer means for a payout in `current`: the transitions to make, in order
/// (a payout still `pending` that the provider reports succeeded passes through `processing`;
/// one reported reversed passes through `succeeded`), or none when nothing changes. A payout is
/// only ever moved forward, so a late or repeated answer is harmless.
pub fn payout_steps(current: PayoutStatus, reported: TransferState) -> Vec<PayoutStatus> {
    use PayoutStatus as P;
    let target = match reported {
        TransferState::Unknown => return Vec::new(),
        TransferState::Processing => P::Processing,
        TransferState::Succeeded => P::Succeeded,
        TransferState::Failed => P::Failed,
        TransferState::Reversed => P::Reversed,
    };
    let path: &[P] = match target {
        P::Processing => &[P::Processing],
        P::Succeeded => &[P::Processing, P::Succeeded],
        P::Reversed => &[P::Processing, P::Succeeded, P::Reversed],
        P::Failed => &[P::Failed],
        P::Pending => &[],
    };
    let mut steps = Vec::new();
    let mut at = current;
    for &next in path {
        if at.can_become(next) {
            steps.push(next);
            at = next;
        }
    }
    steps
}

text_enum! {
    /// `manual` (payouts only when asked) or `daily` (the whole available balance each day).
    pub enum Schedule {
        Manual = "manual",
        Daily = "daily",
    }
}

text_enum! {
    /// The kinds of ledger entry: deposits in, payouts out, and a failed or reversed payout's
    /// return.
    pub enum EntryType {
        Deposit = "deposit",
        Payout = "payout",
        PayoutReturn = "payout_return",
    }
}

/// A valid `PUT /settlement-account` body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettlementRequest {
    pub bank: SettlementBank,
    pub account_number: String,
    pub schedule: Schedule,
}

const SETTLEMENT_FIELDS: [&str; 3] = ["bankCode", "accountNumber", "schedule"];

impl SettlementRequest {
    pub fn parse(body: &Map<String, Value>) -> Result<Self, Vec<FieldError>> {
        let mut errors = Vec::new();
        reject_unknown(body, &SETTLEMENT_FIELDS, &mut errors);
        let code = required_string(body, "bankCode", &mut errors);
        let number = required_string(body, "accountNumber", &mut errors);
        let schedule = match optional_string(body, "schedule", &mut errors) {
            None => Some(Schedule::Manual),
            Some(s) => Schedule::parse(s).or_else(|| {
                errors.push(FieldError::new(
                    "schedule",
                    "invalid_value",
                    "schedule must be manual or daily",
                ));
                None
            }),
        };
        let bank = match (code, number) {
            (Some(code), Some(number)) => match check_settlement_account(code, number) {
                Ok(bank) => Some(bank),
                Err("unknown_bank") => {
                    errors.push(FieldError::new(
                        "bankCode",
                        "invalid_value",
                        "bankCode is not a bank of GET /banks",
                    ));
                    None
                }
                Err(_) => {
                    errors.push(FieldError::new(
                        "accountNumber",
                        "invalid_format",
                        "accountNumber is not a valid NUBAN for that bank (10 digits, check digit)",
                    ));
                    None
                }
            },
            _ => None,
        };
        match (bank, number, schedule) {
            (Some(bank), Some(number), Some(schedule)) if errors.is_empty() => Ok(Self {
                bank,
                account_number: number.to_owned(),
                schedule,
            }),
            _ => Err(errors),
        }
    }
}

/// A valid `POST /payouts` body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewPayout {
    pub amount: i64,
    pub narration: Option<String>,
    pub reference: Option<String>,
}

const PAYOUT_FIELDS: [&str; 3] = ["amount", "narration", "reference"];

impl NewPayout {
    /// `max_amount` is the configured ceiling (`VAS_PAYOUTS__MAX_AMOUNT`).
    pub fn parse(body: &Map<String, Value>, max_amount: i64) -> Result<Self, Vec<FieldError>> {
        let mut errors = Vec::new();
        reject_unknown(body, &PAYOUT_FIELDS, &mut errors);
        let amount = match body.get("amount") {
            None | Some(Value::Null) => {
                errors.push(FieldError::required("amount"));
                None
            }
            Some(value) => match crate::money::whole_kobo(value) {
                Some(amount) if (MIN_PAYOUT..=max_amount).contains(&amount) => Some(amount),
                Some(_) => {
                    errors.push(FieldError::new(
                        "amount",
                        "out_of_range",
                        format!("amount must be from {MIN_PAYOUT} to {max_amount} kobo"),
                    ));
                    None
                }
                None => {
                    errors.push(FieldError::new(
                        "amount",
                        "invalid_type",
                        "amount must be a whole number of kobo",
                    ));
                    None
                }
            },
        };
        let narration = optional_string(body, "narration", &mut errors)
            .and_then(|v| bounded_text("narration", v, 1, 100, true, &mut errors));
        let reference = optional_string(body, "reference", &mut errors)
            .and_then(|v| bounded_text("reference", v, 1, 100, false, &mut errors));
        match amount {
            Some(amount) if errors.is_empty() => Ok(Self {
                amount,
                narration,
                reference,
            }),
            _ => Err(errors),
        }
    }
}

/// Lagos time (WAT, UTC+1 all year: Nigeria keeps no daylight saving).
fn lagos() -> FixedOffset {
    FixedOffset::east_opt(3600).expect("one hour is a valid offset")
}

/// The Lagos day whose daily payout is due at `now`, if its time of day (`daily_at`, Lagos
/// time) has come; the caller pays it out once per business, mode and day.
pub fn daily_payout_day(now: DateTime<Utc>, daily_at: NaiveTime) -> Option<NaiveDate> {
    let local = now.with_timezone(&lagos());
    (local.time() >= daily_at).then(|| local.date_naive())
}

/// The `reference` of a day's automatic payout.
pub fn daily_reference(day: NaiveDate) -> String {
    format!("auto-{}", day.format("%Y-%m-%d"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn a_payout_moves_only_forward() {
        use PayoutStatus::*;
        for from in PayoutStatus::ALL {
            for to in PayoutStatus::ALL {
                let allowed = matches!(
                    (from, to),
                    (Pending, Processing)
                        | (Pending, Failed)
                        | (Processing, Succeeded)
                        | (Processing, Failed)
                        | (Succeeded, Reversed)
                );
                assert_eq!(from.can_become(to), allowed, "{from:?} → {to:?}");
            }
        }
        assert!(Failed.returns_money() && Reversed.returns_money() && !Succeeded.returns_money());
        assert!(Pending.in_flight() && Processing.in_flight() && !Succeeded.in_flight());
    }

    #[test]
    fn every_provider_answer_maps_to_its_steps() {
        use PayoutStatus::*;
        use TransferState as T;
        let cases = [
            (Pending, T::Processing, vec![Processing]),
            (Pending, T::Succeeded, vec![Processing, Succeeded]),
            (Pending, T::Failed, vec![Failed]),
            (Pending, T::Reversed, vec![Processing, Succeeded, Reversed]),
            (Pending, T::Unknown, vec![]),
            (Processing, T::Processing, vec![]),
            (Processing, T::Succeeded, vec![Succeeded]),
            (Processing, T::Failed, vec![Failed]),
            (Processing, T::Reversed, vec![Succeeded, Reversed]),
            (Succeeded, T::Succeeded, vec![]),
            (Succeeded, T::Reversed, vec![Reversed]),
            (Succeeded, T::Failed, vec![]),
            (Failed, T::Succeeded, vec![]),
            (Reversed, T::Reversed, vec![]),
        ];
        for (current, reported, steps) in cases {
            assert_eq!(
                payout_steps(current, reported),
                steps,
                "{current:?} + {reported:?}"
            );
        }
    }

    #[test]
    fn payout_requests_are_checked() {
        let ok = NewPayout::parse(
            &obj(json!({"amount": 500000, "narration": " rent ", "reference": "r-1"})),
            500_000_000,
        )
        .unwrap();
        assert_eq!(ok.amount, 500_000);
        assert_eq!(ok.narration.as_deref(), Some("rent"));
        assert_eq!(
            NewPayout::parse(&obj(json!({"amount": 10000.0})), 500_000_000)
                .unwrap()
                .amount,
            10_000
        );
        let errors = NewPayout::parse(
            &obj(json!({"amount": 9999, "reference": "", "x": 1})),
            500_000_000,
        )
        .unwrap_err();
        let fields: Vec<_> = errors.iter().map(|e| (e.field.as_str(), e.code)).collect();
        assert!(fields.contains(&("amount", "out_of_range")), "{fields:?}");
        assert!(fields.contains(&("reference", "too_short")), "{fields:?}");
        assert!(fields.contains(&("x", "unknown_field")), "{fields:?}");
        let errors = NewPayout::parse(&obj(json!({"amount": 10.5})), 500_000_000).unwrap_err();
        assert_eq!(errors[0].code, "invalid_type");
        let errors =
            NewPayout::parse(&obj(json!({"amount": 600_000_000})), 500_000_000).unwrap_err();
        assert_eq!(errors[0].code, "out_of_range");
        assert_eq!(
            NewPayout::parse(&obj(json!({})), 1).unwrap_err()[0].code,
            "required"
        );
    }

    #[test]
    fn settlement_requests_check_the_bank_and_the_check_digit() {
        let number = crate::nuban::account_number("058", 12_345_678).unwrap();
        let ok =
            SettlementRequest::parse(&obj(json!({"bankCode": "058", "accountNumber": number})))
                .unwrap();
        assert_eq!(ok.bank.name, "Guaranty Trust Bank");
        assert_eq!(ok.schedule, Schedule::Manual);
        let errors = SettlementRequest::parse(&obj(
            json!({"bankCode": "058", "accountNumber": "0123456789", "schedule": "weekly"}),
        ))
        .unwrap_err();
        let fields: Vec<_> = errors.iter().map(|e| e.field.as_str()).collect();
        assert!(fields.contains(&"schedule"), "{fields:?}");
        let errors =
            SettlementRequest::parse(&obj(json!({"bankCode": "999", "accountNumber": number})))
                .unwrap_err();
        assert_eq!(errors[0].field, "bankCode");
    }

    #[test]
    fn the_daily_payout_is_due_from_its_lagos_time() {
        let at = NaiveTime::from_hms_opt(9, 0, 0).unwrap();
        let utc = |s: &str| s.parse::<DateTime<Utc>>().unwrap();
        // 07:59 UTC is 08:59 in Lagos: not yet.
        assert_eq!(daily_payout_day(utc("2026-11-26T07:59:00Z"), at), None);
        let day = daily_payout_day(utc("2026-11-26T08:00:00Z"), at).unwrap();
        assert_eq!(daily_reference(day), "auto-2026-11-26");
        // 22:59 UTC is 23:59 the same day in Lagos; 23:30 UTC is already the next Lagos day,
        // before its payout time.
        let late = daily_payout_day(utc("2026-11-26T22:59:00Z"), at).unwrap();
        assert_eq!(daily_reference(late), "auto-2026-11-26");
        assert_eq!(daily_payout_day(utc("2026-11-26T23:30:00Z"), at), None);
    }
}
