//! Listing and searching a business's accounts (docs/api/paging-and-search.md).

use super::*;
use crate::tenant::Tenant;
use domain::ids::BusinessId;

pub struct ListQuery<'a> {
    pub request: &'a paging::PageRequest,
    pub q: Option<&'a str>,
    pub status: Option<AccountStatus>,
    /// Up to this many matches of a search are counted exactly (docs/api/paging-and-search.md:
    /// 10,000).
    pub exact_total_up_to: u64,
}

/// What `q` searches, lower-cased and joined by U+001F (which a search text never holds: the api
/// refuses control characters), so a match never spans two fields. The `m0022_hot_activation`
/// trigram index is on exactly this expression: keep the two the same. The account number is not
/// in it (an account's activation must change no indexed column): see [`list`].
pub const SEARCH_TEXT: &str = "lower(customer_name || chr(31) || customer_email || chr(31) || \
     coalesce(customer_reference, '') || chr(31) || customer_phone)";

/// A page of one business's accounts in one mode, newest first, and the total.
pub async fn list<C: ConnectionTrait>(
    db: &C,
    business_id: &BusinessId,
    mode: Mode,
    query: &ListQuery<'_>,
) -> Result<(paging::Fetched<Account>, paging::Total), DbErr> {
    use sea_orm::RelationTrait;
    use sea_orm::sea_query::{ExprTrait, Query, UnionType};
    use virtual_account::Column as C_;
    let mut select =
        virtual_account::Entity::find().filter(Tenant::new(business_id, mode).filter::<C_>());
    let q = query.q.filter(|q| !q.is_empty());
    // Without a search, a status filter walks `account_states`' (…, status, created_at, id) index
    // and reads each account beside it; with one, the search's index decides and the status is
    // read from the account itself.
    let by_state = query.status.is_some() && q.is_none();
    if let Some(status) = query.status {
        select = if by_state {
            select
                .join_rev(
                    sea_orm::JoinType::InnerJoin,
                    account_state::Relation::Account.def(),
                )
                .filter(Tenant::new(business_id, mode).filter::<account_state::Column>())
                .filter(account_state::Column::Status.eq(status))
        } else {
            select.filter(C_::Status.eq(status))
        };
    }
    if let Some(q) = q {
        // Case-insensitive substring, with LIKE's wildcards in the search text taken literally.
        let escaped = q
            .to_lowercase()
            .replace('\\', "\\\\")
            .replace('%', "\\%")
            .replace('_', "\\_");
        let pattern = format!("%{escaped}%");
        // PostgreSQL's trigram index serves a text of 3 characters or more; a shorter one (which
        // matches many accounts anyway) is served best by walking the newest first with a filter.
        let trigram = db.get_database_backend() == DbBackend::Postgres
            && q.chars().count() >= 3
            && !q.contains('\u{1f}');
        if trigram {
            let text = Expr::cust_with_values(
                format!("{SEARCH_TEXT} LIKE $1 ESCAPE '\\'"),
                [pattern.clone()],
            );
            // Account numbers are ten digits (domain::nuban): only digits can match one, and
            // then the accounts whose number matches (`account_numbers`' own trigram index) join
            // those whose text does, as one set the planner can read from both indexes.
            if q.bytes().all(|b| b.is_ascii_digit()) {
                use account_number::Column as N;
                // A whole number is one account's at most, per mode and bank: the primary key
                // finds it in a few probes, where the trigram index (over every business's
                // numbers) reads the digits' long lists
                // (docs/benchmarks.md#a-searchs-total-beside-its-page).
                let banks = domain::Bank::ALL.iter().map(|b| b.as_str());
                let number = if domain::nuban::has_shape(q) {
                    Condition::all()
                        .add(Expr::col(N::Bank).is_in(banks))
                        .add(Expr::col(N::AccountNumber).eq(q))
                } else {
                    let like = LikeExpr::new(pattern).escape('\\');
                    Condition::all().add(Expr::col(N::AccountNumber).like(like))
                };
                let mut matching = Query::select()
                    .column(C_::Id)
                    .from(virtual_account::Entity)
                    .cond_where(Tenant::new(business_id, mode).filter::<C_>())
                    .and_where(text)
                    .to_owned();
                matching.union(
                    UnionType::All,
                    Query::select()
                        .column(N::AccountId)
                        .from(account_number::Entity)
                        .cond_where(Tenant::new(business_id, mode).filter::<N>())
                        .cond_where(number)
                        .to_owned(),
                );
                select = select.filter(C_::Id.in_subquery(matching));
            } else {
                select = select.filter(text);
            }
        } else {
            let mut any = Condition::any();
            for col in [
                C_::CustomerName,
                C_::CustomerEmail,
                C_::CustomerReference,
                C_::CustomerPhone,
                C_::AccountNumber,
            ] {
                any = any.add(
                    Expr::expr(Func::lower(Expr::col(col)))
                        .like(LikeExpr::new(pattern.clone()).escape('\\')),
                );
            }
            select = select.filter(any);
        }
    }
    // The total and the page are two statements that need nothing of each other: sent at once
    // (two of the pool's connections), a search's latency is the slower of its two index reads,
    // not their sum (docs/benchmarks.md#a-searchs-total-beside-its-page).
    let total = async {
        if q.is_some() {
            paging::capped_total(db, select.clone(), query.exact_total_up_to).await
        } else {
            // Kept with every creation and status change: a few rows read, not a million
            // counted.
            Ok(paging::Total {
                value: tallies::total(db, business_id, mode, query.status).await?,
                estimate: false,
            })
        }
    };
    let key_of = |a: &Account| (a.created_at, a.id.to_string());
    let fetched = async {
        if by_state {
            use account_state::Column as S;
            paging::fetch(
                db,
                select.clone(),
                S::CreatedAt,
                S::AccountId,
                query.request,
                key_of,
            )
            .await
        } else {
            paging::fetch(
                db,
                select.clone(),
                C_::CreatedAt,
                C_::Id,
                query.request,
                key_of,
            )
            .await
        }
    };
    let (total, fetched) = futures::try_join!(total, fetched)?;
    Ok((fetched, total))
}
