//! The one way every list of the contract pages (docs/api/paging-and-search.md): newest first on
//! (created_at, id), by `page` (offset, allowed however deep) or by `cursor` (keyset: constant time
//! per page), with a `total` that is exact without a search or up to a cap, and an estimate beyond
//! it.
//!
//! A list builds its filtered `Select`, names its filter in a [`Filter`] (what a cursor is bound
//! to), and calls [`fetch`] and [`exact_total`] or [`capped_total`].

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use chrono::{DateTime, SecondsFormat, Utc};
use domain::ids::BusinessId;
use sea_orm::sea_query::{Alias, Expr, Query, SelectStatement, SimpleExpr};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DbBackend, DbErr, EntityTrait, PaginatorTrait, QueryFilter,
    QueryOrder, QuerySelect, QueryTrait, Select, Statement,
};
use subtle::ConstantTimeEq;

use crypto::Cipher;

/// Up to this many matches a searched total is counted exactly (docs/api/paging-and-search.md).
pub const EXACT_TOTAL_UP_TO: u64 = 10_000;

/// Where a page starts: after `skipped` items by offset, or just after a row by key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Position {
    /// 1-based page number.
    Page(u64),
    After(Keyset),
}

/// The last row of a page (its order key) and how many items came before the next page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keyset {
    pub created_at: DateTime<Utc>,
    pub id: String,
    pub skipped: u64,
}

/// The limits of every list's paging (docs/api/paging-and-search.md), the API's and the dashboard's
/// alike: page numbers 1 to `MAX_PAGE`, pages of 1 to `MAX_PAGE_SIZE` items, and no cursor longer
/// than `MAX_CURSOR_CHARS` (ours are about 200 characters).
pub const MAX_PAGE: u64 = 1_000_000;
pub const MAX_PAGE_SIZE: u64 = 100;
pub const MAX_CURSOR_CHARS: usize = 1_000;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageRequest {
    pub page_size: u64,
    pub position: Position,
}

impl PageRequest {
    /// The 1-based number of the page asked for (for a cursor: as if the same page size had been
    /// used all along).
    pub fn page(&self) -> u64 {
        match &self.position {
            Position::Page(page) => *page,
            Position::After(key) => key.skipped / self.page_size.max(1) + 1,
        }
    }

    fn skipped(&self) -> u64 {
        match &self.position {
            Position::Page(page) => (page.max(&1) - 1) * self.page_size,
            Position::After(key) => key.skipped,
        }
    }
}

/// What a list is filtered by, as one canonical text: a cursor is valid for exactly this filter
/// (the list, the business, the mode and every query parameter but the paging ones).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filter(String);

impl Filter {
    /// `list` names the list (`accounts`, `deposits:<account id>`…); `parts` are its filter
    /// parameters by name, absent ones as None.
    pub fn new(
        list: &str,
        business_id: &BusinessId,
        mode: domain::Mode,
        parts: &[(&str, Option<&str>)],
    ) -> Self {
        // JSON keeps every value unambiguous (no separator inside a value can forge another).
        let parts: Vec<serde_json::Value> = parts
            .iter()
            .map(|(name, value)| serde_json::json!([name, value]))
            .collect();
        Self(serde_json::json!([list, business_id, mode.as_str(), parts]).to_string())
    }
}

const CURSOR_PURPOSE: &str = "list-cursor";
const CURSOR_VERSION: &str = "c1";

/// The opaque `nextCursor`: base64url of `c1 \n skipped \n created_at \n id \n mac`, the MAC a
/// keyed digest of the rest and the filter. Only this service (its encryption key, current or
/// previous) can make one, and one made for another filter does not verify.
pub fn encode_cursor(cipher: &Cipher, filter: &Filter, key: &Keyset) -> String {
    let body = format!(
        "{CURSOR_VERSION}\n{}\n{}\n{}",
        key.skipped,
        key.created_at.to_rfc3339_opts(SecondsFormat::AutoSi, true),
        key.id
    );
    let mac = cipher.digest(CURSOR_PURPOSE, signed(&body, filter).as_bytes());
    B64.encode(format!("{body}\n{mac}"))
}

/// The position a cursor stands for, or None when this service did not issue it for `filter`.
pub fn decode_cursor(cipher: &Cipher, filter: &Filter, token: &str) -> Option<Keyset> {
    let text = String::from_utf8(B64.decode(token.as_bytes()).ok()?).ok()?;
    let (body, mac) = text.rsplit_once('\n')?;
    let expected = cipher.digests(CURSOR_PURPOSE, signed(body, filter).as_bytes());
    if !expected
        .iter()
        .any(|e| bool::from(e.as_bytes().ct_eq(mac.as_bytes())))
    {
        return None;
    }
    let mut parts = body.split('\n');
    let (Some(CURSOR_VERSION), Some(skipped), Some(at), Some(id), None) = (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) else {
        return None;
    };
    Some(Keyset {
        skipped: skipped.parse().ok()?,
        created_at: DateTime::parse_from_rfc3339(at).ok()?.with_timezone(&Utc),
        id: id.to_owned(),
    })
}

fn signed(body: &str, filter: &Filter) -> String {
    format!("{body}\n{}", filter.0)
}

/// A page of rows, and the key of its last row when more follow.
#[derive(Debug)]
pub struct Fetched<M> {
    pub rows: Vec<M>,
    pub next: Option<Keyset>,
}

/// One page of `select` (already filtered), newest first on (`created`, `id`): by offset for a
/// page number, by key (`(created, id) < (…)`, which the (…, created_at, id) indexes serve) for a
/// cursor. Reads one row more than the page to know whether another page follows. The order's
/// columns may be a joined table's that carries the same values (an index walked in its stead).
pub async fn fetch<E, C, K>(
    db: &C,
    select: Select<E>,
    created: K,
    id: K,
    request: &PageRequest,
    key_of: impl Fn(&E::Model) -> (DateTime<Utc>, String),
) -> Result<Fetched<E::Model>, DbErr>
where
    E: EntityTrait,
    C: ConnectionTrait,
    K: ColumnTrait,
{
    let mut select = select.order_by_desc(created).order_by_desc(id);
    match &request.position {
        Position::Page(page) => {
            select = select.offset((page.max(&1) - 1) * request.page_size);
        }
        Position::After(key) => {
            select = select.filter(before(created, id, key));
        }
    }
    let mut rows = select.limit(request.page_size + 1).all(db).await?;
    let more = rows.len() as u64 > request.page_size;
    rows.truncate(request.page_size as usize);
    let next = match rows.last() {
        Some(last) if more => {
            let (created_at, id) = key_of(last);
            Some(Keyset {
                created_at,
                id,
                skipped: request.skipped() + request.page_size,
            })
        }
        _ => None,
    };
    Ok(Fetched { rows, next })
}

/// `(created, id) < (key)`: a row-value comparison, which both databases evaluate as the
/// lexicographic order and PostgreSQL serves as one range of a (…, created_at, id) index.
fn before<Col: ColumnTrait>(created: Col, id: Col, key: &Keyset) -> SimpleExpr {
    use sea_orm::sea_query::ExprTrait;
    Expr::tuple([
        Expr::col(created.as_column_ref()),
        Expr::col(id.as_column_ref()),
    ])
    .lt(Expr::tuple([
        Expr::val(key.created_at),
        Expr::val(key.id.clone()),
    ]))
}

/// A list's `total`, and whether it is an estimate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Total {
    pub value: u64,
    pub estimate: bool,
}

/// The exact count of `select` (lists without a search: an index count of the filter).
pub async fn exact_total<E, C>(db: &C, select: Select<E>) -> Result<Total, DbErr>
where
    E: EntityTrait,
    E::Model: Sync,
    C: ConnectionTrait,
{
    Ok(Total {
        value: select.count(db).await?,
        estimate: false,
    })
}

/// The count of `select` when it is at most `cap`; beyond it, PostgreSQL's planner estimate
/// (never below `cap + 1`) flagged as one. SQLite, embedded and small, counts exactly.
pub async fn capped_total<E, C>(db: &C, select: Select<E>, cap: u64) -> Result<Total, DbErr>
where
    E: EntityTrait,
    E::Model: Sync,
    C: ConnectionTrait,
{
    let backend = db.get_database_backend();
    if backend != DbBackend::Postgres {
        return exact_total(db, select).await;
    }
    let mut rows: SelectStatement = select.clone().into_query();
    rows.clear_selects()
        .expr(Expr::val(1))
        .limit(cap + 1)
        .clear_order_by();
    let counted = Query::select()
        .expr_as(Expr::cust("count(*)"), Alias::new("n"))
        .from_subquery(rows, Alias::new("capped"))
        .to_owned();
    let row = db
        .query_one_raw(backend.build(&counted))
        .await?
        .ok_or_else(|| DbErr::Custom("count returned no row".into()))?;
    let n: i64 = row.try_get("", "n")?;
    let n = n.max(0) as u64;
    if n <= cap {
        return Ok(Total {
            value: n,
            estimate: false,
        });
    }
    let mut plain: SelectStatement = select.into_query();
    plain.clear_selects().expr(Expr::val(1)).clear_order_by();
    let built = backend.build(&plain);
    let explain = Statement::from_sql_and_values(
        DbBackend::Postgres,
        format!("EXPLAIN (FORMAT JSON) {}", built.sql),
        built.values.map(|v| v.0).unwrap_or_default(),
    );
    let planned = match db.query_one_raw(explain).await? {
        Some(row) => {
            let plan: serde_json::Value = row.try_get_by_index(0)?;
            plan[0]["Plan"]["Plan Rows"].as_f64().unwrap_or(0.0) as u64
        }
        None => 0,
    };
    Ok(Total {
        value: planned.max(cap + 1),
        estimate: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use domain::Mode;

    fn cipher() -> Cipher {
        Cipher::new(&Cipher::generate_key(), &[]).unwrap()
    }

    fn key() -> Keyset {
        Keyset {
            created_at: DateTime::parse_from_rfc3339("2025-01-02T03:04:05.123456Z")
                .unwrap()
                .with_timezone(&Utc),
            id: "va_01ABC".into(),
            skipped: 40,
        }
    }

    #[test]
    fn a_cursor_round_trips_for_its_own_filter_only() {
        let cipher = cipher();
        let (one, two) = (
            BusinessId::unchecked("biz_1"),
            BusinessId::unchecked("biz_2"),
        );
        let filter = Filter::new("accounts", &one, Mode::Test, &[("q", Some("ada"))]);
        let token = encode_cursor(&cipher, &filter, &key());
        assert!(!token.contains(['+', '/', '=']), "url-safe: {token}");
        assert_eq!(decode_cursor(&cipher, &filter, &token), Some(key()));
        for other in [
            Filter::new("accounts", &one, Mode::Test, &[("q", Some("adb"))]),
            Filter::new("accounts", &one, Mode::Test, &[("q", None)]),
            Filter::new("accounts", &two, Mode::Test, &[("q", Some("ada"))]),
            Filter::new("accounts", &one, Mode::Live, &[("q", Some("ada"))]),
            Filter::new("events", &one, Mode::Test, &[("q", Some("ada"))]),
        ] {
            assert_eq!(decode_cursor(&cipher, &other, &token), None, "{other:?}");
        }
        // Another key (another deployment) did not issue it.
        assert_eq!(decode_cursor(&self::cipher(), &filter, &token), None);
    }

    #[test]
    fn a_forged_or_altered_cursor_is_refused() {
        let cipher = cipher();
        let filter = Filter::new("events", &BusinessId::unchecked("biz_1"), Mode::Test, &[]);
        let token = encode_cursor(&cipher, &filter, &key());
        let text = String::from_utf8(B64.decode(&token).unwrap()).unwrap();
        let altered = B64.encode(text.replacen("\n40\n", "\n0\n", 1));
        for bad in [
            "",
            "not base64!",
            &B64.encode("c1\n0\n2025-01-02T03:04:05Z\nva_1\nd1:00000000:00"),
            &altered,
        ] {
            assert_eq!(decode_cursor(&cipher, &filter, bad), None, "{bad}");
        }
    }

    #[test]
    fn rotated_keys_still_read_cursors_made_before() {
        let old = Cipher::generate_key();
        let before = Cipher::new(&old, &[]).unwrap();
        let after = Cipher::new(&Cipher::generate_key(), &[old]).unwrap();
        let filter = Filter::new("events", &BusinessId::unchecked("biz_1"), Mode::Test, &[]);
        let token = encode_cursor(&before, &filter, &key());
        assert_eq!(decode_cursor(&after, &filter, &token), Some(key()));
    }

    #[test]
    fn the_page_number_of_a_cursor_counts_the_items_before_it() {
        let request = PageRequest {
            page_size: 20,
            position: Position::After(key()),
        };
        assert_eq!(request.page(), 3);
        assert_eq!(request.skipped(), 40);
    }
}
