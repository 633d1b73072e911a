//! Paging of list methods on the wire (SPEC §2): `pageSize` 1–500 (default 100) and
//! opaque `pageToken`s, turned into the store's typed [`PageRequest`] and back.
//!
//! Invariant: there is one page token, bc-domain's [`bc_domain::ports::PageCursor`]
//! encoding, bound to the method that issued it (its id travels inside): a token of
//! `pools.list` given to `loadBalancers.list`, or a token altered by hand, is
//! `INVALID_ARGUMENT` naming `pageToken`, never a wrong page or a 500. This module only
//! documents the wire shape and hands the method's id to that encoding.

use bc_domain::ports::{CursorKey, Page, PageRequest};

pub use bc_api_types::page::{ListInput, ListOutput, PageSize, PageToken};

use crate::error::ApiError;
use bc_api_types::MethodId;

/// The store page a list method's input asks for.
pub trait AskedPage: ListInput {
    /// The store page this call of `method` asks for.
    fn page<K: CursorKey>(&self, method: MethodId) -> Result<PageRequest<K>, ApiError> {
        page_request(method, self.page_size(), self.page_token())
    }
}
impl<T: ListInput> AskedPage for T {}

/// A list method's answer made from a store page.
pub trait AnswerPage: ListOutput + Sized {
    /// The answer of `method` for a store page, each item shown by `show`.
    fn of<T, K: CursorKey>(
        method: MethodId,
        page: Page<T, K>,
        show: impl Fn(T) -> Self::Item,
    ) -> Self {
        let next = next_token(method, &page);
        Self::from_page(page.items.into_iter().map(show).collect(), next)
    }
}
impl<T: ListOutput> AnswerPage for T {}

/// The store page a list call of `method` asks for.
pub fn page_request<K: CursorKey>(
    method: MethodId,
    size: Option<PageSize>,
    token: Option<&PageToken>,
) -> Result<PageRequest<K>, ApiError> {
    let list = method.to_string();
    Ok(PageRequest::from_api(&list, size.map(PageSize::get), token.map(PageToken::as_str))?)
}

/// The `nextPageToken` of `page`, issued by `method`.
pub fn next_token<T, K: CursorKey>(method: MethodId, page: &Page<T, K>) -> Option<PageToken> {
    page.next_page_token(&method.to_string()).map(PageToken::issued)
}

/// An example `pageToken` of `method` (for the method examples).
pub fn example_token<K: CursorKey>(method: MethodId, after: K) -> PageToken {
    let page: Page<(), K> =
        Page { items: vec![], next: Some(bc_domain::ports::PageCursor::after(after)) };
    next_token(method, &page).expect("a page with a next cursor has a token")
}

#[cfg(test)]
mod tests {
    use super::*;
    use bc_domain::PoolId;

    const POOLS_LIST: MethodId = MethodId { resource: "pools", name: "list" };
    const LB_LIST: MethodId = MethodId { resource: "loadBalancers", name: "list" };

    #[test]
    fn tokens_round_trip_and_are_bound_to_their_method() {
        let pool: PoolId = "pool_01jq3k5v9x8y7z6w5v4t3s2r1q".parse().unwrap();
        let t = example_token(POOLS_LIST, pool.clone());
        let back = page_request::<PoolId>(POOLS_LIST, None, Some(&t)).unwrap();
        assert_eq!(back.after.unwrap().key(), &pool);
        let e = page_request::<PoolId>(LB_LIST, None, Some(&t)).unwrap_err();
        assert_eq!(e.field(), Some("pageToken"));
        let json = serde_json::to_string(&t).unwrap();
        let back: PageToken = serde_json::from_str(&json).unwrap();
        assert_eq!(back, t);
        assert!(serde_json::from_str::<PageToken>("\"a b\"").is_err());
        assert!(serde_json::from_str::<PageToken>("\"\"").is_err());
    }

    #[test]
    fn page_size_bounds() {
        assert!(serde_json::from_str::<PageSize>("0").is_err());
        assert!(serde_json::from_str::<PageSize>("501").is_err());
        let size: PageSize = serde_json::from_str("500").unwrap();
        assert_eq!(page_request::<PoolId>(POOLS_LIST, Some(size), None).unwrap().limit, 500);
        assert_eq!(page_request::<PoolId>(POOLS_LIST, None, None).unwrap().limit, 100);
    }
}
