//! How the dashboard's long lists (deposits, events, payouts, the ledger) page: the shared paged
//! lists of `store::paging`, walked by the same signed cursors as the API ("Next" is a
//! cursor, constant time however deep), with a page number for going back.

use store::paging::{
    self, Fetched, Filter, Keyset, MAX_CURSOR_CHARS, MAX_PAGE, PageRequest, Position, Total,
};

use crate::dashboard::view;
use crate::extract::QueryPairs;
use crate::state::AppState;

/// The query parameters of one list on a page (a page with two lists names them apart).
#[derive(Clone, Copy)]
pub struct Params {
    pub cursor: &'static str,
    pub page: &'static str,
}

pub const PLAIN: Params = Params {
    cursor: "cursor",
    page: "page",
};

/// One list on a page: its query parameters, the filter its cursors are bound to, and what the
/// query asks of it.
pub struct List {
    pub params: Params,
    pub filter: Filter,
    pub request: PageRequest,
}

impl List {
    /// What the query asks of a list bound to `filter`: a cursor this service issued for that
    /// filter (one for another filter, or forged, reads as the first page: a stale link is not
    /// worth an error page), else a page number.
    pub fn read(
        state: &AppState,
        query: &QueryPairs,
        params: Params,
        filter: Filter,
        page_size: u64,
    ) -> List {
        let after = query
            .get(params.cursor)
            .filter(|c| c.len() <= MAX_CURSOR_CHARS)
            .and_then(|c| paging::decode_cursor(&state.cipher, &filter, c));
        let position = match after {
            Some(key) => Position::After(key),
            None => Position::Page(
                query
                    .get(params.page)
                    .and_then(|p| p.parse::<u64>().ok())
                    .filter(|p| (1..=MAX_PAGE).contains(p))
                    .unwrap_or(1),
            ),
        };
        List {
            params,
            filter,
            request: PageRequest {
                page_size,
                position,
            },
        }
    }

    /// The pager under this list at `path`, which read `fetched` of `total`; its links keep
    /// `keep`. `noun`: the item, singular and plural.
    pub fn pager<M>(
        &self,
        state: &AppState,
        path: &str,
        keep: &[(&str, &str)],
        fetched: &Fetched<M>,
        total: Total,
        noun: (&str, &str),
    ) -> Pager {
        Pager::new(
            state,
            PagerInput {
                path,
                keep,
                params: self.params,
                request: &self.request,
                rows: fetched.rows.len(),
                total,
                next: fetched.next.as_ref(),
                filter: &self.filter,
                noun,
            },
        )
    }
}

/// The pager under a list.
pub struct Pager {
    /// "1–25 of 1,204 deposits"; empty for an empty page.
    pub showing: String,
    pub page: u64,
    /// "40,000", or "about 40,000" when the total is an estimate.
    pub pages: String,
    pub prev_href: Option<String>,
    pub next_href: Option<String>,
}

struct PagerInput<'a> {
    /// The page's path.
    pub path: &'a str,
    /// The query parameters every link keeps (filters, the other list's position).
    pub keep: &'a [(&'a str, &'a str)],
    pub params: Params,
    pub request: &'a PageRequest,
    pub rows: usize,
    pub total: Total,
    pub next: Option<&'a Keyset>,
    pub filter: &'a Filter,
    /// The item, singular and plural: ("deposit", "deposits").
    pub noun: (&'a str, &'a str),
}

impl Pager {
    fn new(state: &AppState, input: PagerInput<'_>) -> Pager {
        let page = input.request.page();
        let size = input.request.page_size.max(1);
        let href = |extra: (&str, &str)| {
            let mut pairs: Vec<(&str, &str)> = input.keep.to_vec();
            pairs.push(extra);
            format!("{}{}", input.path, view::query(&pairs))
        };
        let prev_page = (page.saturating_sub(1)).to_string();
        let prev_href = (page > 1).then(|| {
            href((
                input.params.page,
                if page == 2 { "" } else { prev_page.as_str() },
            ))
        });
        let next_href = input.next.map(|key| {
            let cursor = paging::encode_cursor(&state.cipher, input.filter, key);
            href((input.params.cursor, cursor.as_str()))
        });
        let first = (page - 1) * size + 1;
        let total = input.total;
        let showing = if input.rows == 0 {
            String::new()
        } else {
            format!(
                "{}–{} of {}{} {}",
                grouped(first),
                grouped(first + input.rows as u64 - 1),
                if total.estimate { "about " } else { "" },
                grouped(total.value),
                if total.value == 1 {
                    input.noun.0
                } else {
                    input.noun.1
                }
            )
        };
        Pager {
            showing,
            page,
            pages: format!(
                "{}{}",
                if total.estimate { "about " } else { "" },
                grouped(total.value.div_ceil(size).max(page))
            ),
            prev_href,
            next_href,
        }
    }
}

/// 1234567 as "1,234,567".
pub fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A search text from the query: trimmed, and None (with the reason for the person) when it is
/// too long or holds control characters, as the API's `q` refuses.
pub fn search_text<'q>(query: &'q QueryPairs, name: &str) -> (&'q str, Option<&'static str>) {
    let raw = query.get(name).unwrap_or("").trim();
    if raw.chars().count() > 200 {
        ("", Some("Search text is at most 200 characters."))
    } else if raw.chars().any(char::is_control) {
        ("", Some("Search text cannot hold control characters."))
    } else {
        (raw, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_grouped_in_thousands() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1_000), "1,000");
        assert_eq!(grouped(1_234_567), "1,234,567");
    }
}
