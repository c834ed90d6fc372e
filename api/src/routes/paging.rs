//! The paging parameters every list reads (`page`, `pageSize`, `cursor`;
//! docs/api/paging-and-search.md), and the page it answers: one home for lists of accounts,
//! deposits, events, payouts and the ledger.

use axum::Json;
use domain::FieldError;
use store::paging::{
    self, Fetched, Filter, Keyset, MAX_CURSOR_CHARS, MAX_PAGE, MAX_PAGE_SIZE, PageRequest,
    Position, Total,
};
use utoipa::IntoParams;
use views::Page;

use crate::error::{ApiError, ApiResult};
use crate::extract::QueryPairs;
use crate::state::AppState;

/// The paging parameters as the document states them: every list names this in its `params(…)`.
/// The rules are [`Paging::read`]'s (`MAX_PAGE`, `MAX_PAGE_SIZE`, `MAX_CURSOR_CHARS`).
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // read by `Paging::read` from the query pairs, not through this type
pub struct PageParams {
    /// From 1 (default 1).
    #[param(minimum = 1, maximum = 1000000)]
    page: Option<u64>,
    /// 1–100 (default 20).
    #[param(rename = "pageSize", minimum = 1, maximum = 100)]
    page_size: Option<u64>,
    /// A `nextCursor` of this list with the same filter: the next page, in constant time however deep. Instead of `page`.
    #[param(max_length = 1000)]
    cursor: Option<String>,
}

/// What a list was asked for, and the filter its cursors are bound to.
pub struct Paging {
    pub request: PageRequest,
    filter: Filter,
}

impl Paging {
    /// Reads `page` (1–1,000,000, default 1), `pageSize` (1–100, default 20) and `cursor` (a
    /// `nextCursor` this service issued for this same `filter`; not with `page`). Problems are
    /// pushed onto `errors`.
    pub fn read(
        state: &AppState,
        query: &QueryPairs,
        filter: Filter,
        errors: &mut Vec<FieldError>,
    ) -> Self {
        let page = query.int("page", 1, 1, MAX_PAGE, errors);
        let page_size = query.int("pageSize", 20, 1, MAX_PAGE_SIZE, errors);
        let mut position = Position::Page(page);
        if let Some(cursor) = query.get("cursor") {
            if query.get("page").is_some() {
                errors.push(FieldError::new(
                    "cursor",
                    "invalid_value",
                    "cursor continues a walk: send it instead of page, not with it",
                ));
            } else {
                match (cursor.len() <= MAX_CURSOR_CHARS)
                    .then(|| paging::decode_cursor(&state.cipher, &filter, cursor))
                    .flatten()
                {
                    Some(key) => position = Position::After(key),
                    None => errors.push(FieldError::new(
                        "cursor",
                        "invalid_value",
                        "cursor must be a nextCursor this list returned, with the same filter",
                    )),
                }
            }
        }
        Self {
            request: PageRequest {
                page_size,
                position,
            },
            filter,
        }
    }

    /// [`Paging::read`] after the list's own parameters: 422 with every problem at once.
    pub fn checked(
        state: &AppState,
        query: &QueryPairs,
        filter: Filter,
        mut errors: Vec<FieldError>,
    ) -> ApiResult<Self> {
        let paging = Self::read(state, query, filter, &mut errors);
        if !errors.is_empty() {
            return Err(ApiError::Validation(errors));
        }
        Ok(paging)
    }

    /// The answer of a list: `fetched`'s rows as `view` shows them, with `total` and the cursor.
    pub fn answer<M, T>(
        &self,
        state: &AppState,
        fetched: Fetched<M>,
        total: Total,
        view: impl Fn(&M) -> T,
    ) -> Json<Page<T>> {
        let data = fetched.rows.iter().map(view).collect();
        Json(self.page(state, data, total, fetched.next.as_ref()))
    }

    /// The page of `data`, its `total` and, when more follow, the cursor of the next page.
    pub fn page<T>(
        &self,
        state: &AppState,
        data: Vec<T>,
        total: Total,
        next: Option<&Keyset>,
    ) -> Page<T> {
        let request = &self.request;
        Page {
            data,
            page: request.page(),
            page_size: request.page_size,
            total: total.value,
            total_pages: total.value.div_ceil(request.page_size),
            total_is_estimate: total.estimate,
            next_cursor: next.map(|key| paging::encode_cursor(&state.cipher, &self.filter, key)),
        }
    }
}
