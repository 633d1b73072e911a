//! Paging of list methods on the wire (SPEC §2): `pageSize` 1–500 (default 100) and
//! opaque `pageToken`s, turned into the store's typed [`PageRequest`] and back.
//!
//! Invariant: there is one page token, bc-domain's [`bc_domain::ports::PageCursor`]
//! encoding, bound to the method that issued it (its id travels inside): a token of
//! `pools.list` given to `loadBalancers.list`, or a token altered by hand, is
//! `INVALID_ARGUMENT` naming `pageToken`, never a wrong page or a 500. This module only
//! documents the wire shape and hands the method's id to that encoding.

use std::borrow::Cow;

use bc_domain::ports::{CursorKey, PAGE_SIZE_DEFAULT, PAGE_SIZE_MAX, Page, PageRequest};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize};

use crate::error::ApiError;
use crate::info::MethodId;

/// Most characters of a page token.
const MAX_TOKEN_LEN: usize = 512;
/// The rule of a page token's text (base64url without padding).
const TOKEN_PATTERN: &str = "^[A-Za-z0-9_-]+$";

/// A page size, 1 to 500.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PageSize(u32);

impl<'de> Deserialize<'de> for PageSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let n = u32::deserialize(d)?;
        if (1..=PAGE_SIZE_MAX).contains(&n) {
            Ok(PageSize(n))
        } else {
            Err(serde::de::Error::custom(format!("must be 1 to {PAGE_SIZE_MAX}, not {n}")))
        }
    }
}

impl JsonSchema for PageSize {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> Cow<'static, str> {
        Cow::Borrowed("PageSize")
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "integer",
            "minimum": 1,
            "maximum": PAGE_SIZE_MAX,
            "default": PAGE_SIZE_DEFAULT,
        })
    }
}

/// An opaque page token, as received or issued.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PageToken(String);

impl PageToken {
    /// The token's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl<'de> Deserialize<'de> for PageToken {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        let shaped = !s.is_empty()
            && s.len() <= MAX_TOKEN_LEN
            && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if shaped {
            Ok(PageToken(s))
        } else {
            Err(serde::de::Error::custom("must be a nextPageToken from a previous page"))
        }
    }
}

impl JsonSchema for PageToken {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> Cow<'static, str> {
        Cow::Borrowed("PageToken")
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "type": "string", "maxLength": MAX_TOKEN_LEN, "pattern": TOKEN_PATTERN })
    }
}

/// The store page a list call of `method` asks for.
pub fn page_request<K: CursorKey>(
    method: MethodId,
    size: Option<PageSize>,
    token: Option<&PageToken>,
) -> Result<PageRequest<K>, ApiError> {
    let list = method.to_string();
    Ok(PageRequest::from_api(&list, size.map(|s| s.0), token.map(PageToken::as_str))?)
}

/// The `nextPageToken` of `page`, issued by `method`.
pub fn next_token<T, K: CursorKey>(method: MethodId, page: &Page<T, K>) -> Option<PageToken> {
    page.next_page_token(&method.to_string()).map(PageToken)
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
