//! Paging of store lists and the opaque page token the API hands out (SPEC §2:
//! `pageSize` 1–500, default 100; `pageToken` opaque; `nextPageToken` while more remain).
//!
//! Invariant: a list pages inside its query (ordered by its key, `key > after`, `LIMIT`),
//! so a page is short only when it is the last; a token is bound to the list that made it
//! (its name, e.g. the API method `pools.list`, travels inside it) and decodes only there,
//! to that list's key type — a token of another list, or any text `encode` did not make,
//! is an input error naming `pageToken`, never a wrong or silently empty page.

use std::fmt;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use crate::error::Error;
use crate::id::{Id, IdKind};

/// `pageSize` when the caller gives none.
pub const PAGE_SIZE_DEFAULT: u32 = 100;
/// The largest `pageSize` the API accepts.
pub const PAGE_SIZE_MAX: u32 = 500;
/// The version tag inside every token, so the encoding can change without reading old
/// tokens wrongly.
const TOKEN_VERSION: &str = "1";

/// A list's sort key as it travels inside a page token.
pub trait CursorKey: Sized + Clone {
    /// The key as text.
    fn to_cursor_text(&self) -> String;
    /// The key back from its text; `None` if the text is not a key of this type.
    fn from_cursor_text(text: &str) -> Option<Self>;
}

impl<K: IdKind> CursorKey for Id<K> {
    fn to_cursor_text(&self) -> String {
        self.as_str().to_owned()
    }
    fn from_cursor_text(text: &str) -> Option<Self> {
        Id::parse(text).ok()
    }
}

impl CursorKey for u64 {
    fn to_cursor_text(&self) -> String {
        self.to_string()
    }
    fn from_cursor_text(text: &str) -> Option<Self> {
        text.parse().ok()
    }
}

impl CursorKey for String {
    fn to_cursor_text(&self) -> String {
        self.clone()
    }
    fn from_cursor_text(text: &str) -> Option<Self> {
        Some(text.to_owned())
    }
}

/// Where the next page of a list starts: the key of the last item served. Opaque to API
/// callers ([`PageCursor::encode`] / [`PageCursor::decode`], bound to the list's name);
/// typed for the store.
#[derive(Clone, PartialEq, Eq)]
pub struct PageCursor<K>(K);

impl<K: CursorKey> PageCursor<K> {
    /// The cursor after `last` (the store builds these).
    pub fn after(last: K) -> Self {
        Self(last)
    }

    /// The key the next page starts after.
    pub fn key(&self) -> &K {
        &self.0
    }

    /// The `pageToken` / `nextPageToken` text of list `list` (e.g. `pools.list`).
    pub fn encode(&self, list: &str) -> String {
        URL_SAFE_NO_PAD.encode(format!("{TOKEN_VERSION}\n{list}\n{}", self.0.to_cursor_text()))
    }

    /// A `pageToken` of list `list` back; anything `encode` did not make for this list
    /// (and so for its key type) is `INVALID_ARGUMENT` on `pageToken`.
    pub fn decode(list: &str, token: &str) -> Result<Self, Error> {
        let bad = || {
            Error::invalid(
                "pageToken",
                format!("pageToken is not a nextPageToken of {list}; start again without it"),
            )
        };
        let bytes = URL_SAFE_NO_PAD.decode(token).map_err(|_| bad())?;
        let text = String::from_utf8(bytes).map_err(|_| bad())?;
        let mut parts = text.splitn(3, '\n');
        let (Some(TOKEN_VERSION), Some(made_by), Some(key)) =
            (parts.next(), parts.next(), parts.next())
        else {
            return Err(bad());
        };
        if made_by != list {
            return Err(bad());
        }
        K::from_cursor_text(key).map(Self).ok_or_else(bad)
    }
}

impl<K: fmt::Debug> fmt::Debug for PageCursor<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PageCursor({:?})", self.0)
    }
}

/// One page to read: items with a key greater than `after`'s, at most `limit` of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageRequest<K> {
    /// Where to start; `None` for the first page.
    pub after: Option<PageCursor<K>>,
    /// Most items (a zero limit reads one).
    pub limit: u32,
}

impl<K> PageRequest<K> {
    /// The first page of `limit` items.
    pub fn first(limit: u32) -> Self {
        Self { after: None, limit }
    }
}

impl<K: CursorKey> PageRequest<K> {
    /// The page an API list call of `list` asks for, checked as SPEC §2 says: `pageSize`
    /// 1–500 (default 100) and a `pageToken` this list made, each error naming its field.
    pub fn from_api(
        list: &str,
        page_size: Option<u32>,
        page_token: Option<&str>,
    ) -> Result<Self, Error> {
        let limit = page_size.unwrap_or(PAGE_SIZE_DEFAULT);
        if !(1..=PAGE_SIZE_MAX).contains(&limit) {
            return Err(Error::invalid(
                "pageSize",
                format!("pageSize must be between 1 and {PAGE_SIZE_MAX}, not {limit}"),
            ));
        }
        let after = page_token.map(|t| PageCursor::decode(list, t)).transpose()?;
        Ok(Self { after, limit })
    }
}

/// One page of a list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page<T, K> {
    /// Items, in key order.
    pub items: Vec<T>,
    /// Where the next page starts, while more remain.
    pub next: Option<PageCursor<K>>,
}

impl<T, K: CursorKey> Page<T, K> {
    /// The `nextPageToken` of an API answer of list `list`.
    pub fn next_page_token(&self, list: &str) -> Option<String> {
        self.next.as_ref().map(|c| c.encode(list))
    }

    /// The request for the next page of `limit` items, while more remain (for loops that
    /// walk a whole list: `while let Some(r) = req { …; req = page.next_request(n) }`).
    pub fn next_request(&self, limit: u32) -> Option<PageRequest<K>> {
        self.next.clone().map(|c| PageRequest { after: Some(c), limit })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;
    use crate::id::{ClusterId, PoolId};

    #[test]
    fn tokens_round_trip_and_are_opaque() {
        let id = PoolId::generate(1_764_000_000_000, 42);
        let c = PageCursor::after(id.clone());
        let token = c.encode("pools.list");
        assert!(!token.contains("pool_"), "{token}");
        assert_eq!(PageCursor::<PoolId>::decode("pools.list", &token).unwrap().key(), &id);
        let n = PageCursor::after(77u64).encode("billing.usage");
        assert_eq!(*PageCursor::<u64>::decode("billing.usage", &n).unwrap().key(), 77);
    }

    #[test]
    fn foreign_or_malformed_tokens_name_page_token() {
        let pool_token = PageCursor::after(PoolId::generate(1, 1)).encode("pools.list");
        let cluster_token =
            PageCursor::after(ClusterId::generate(1, 1)).encode("kubernetesClusters.list");
        // The same key type, but another list: still refused.
        let other_list = PageCursor::after(PoolId::generate(1, 1)).encode("bookings.list");
        let unversioned = URL_SAFE_NO_PAD.encode("pool_01hq3k5v9x8y7z6w5v4t3s2r1q");
        let old_format = URL_SAFE_NO_PAD.encode("1:pool_01hq3k5v9x8y7z6w5v4t3s2r1q");
        for bad in [
            cluster_token.as_str(),
            other_list.as_str(),
            "",
            "!!!",
            "bm9wZQ",
            unversioned.as_str(),
            old_format.as_str(),
        ] {
            let e = PageCursor::<PoolId>::decode("pools.list", bad).unwrap_err();
            assert_eq!(
                (e.code, e.field.as_deref()),
                (ErrorCode::InvalidArgument, Some("pageToken"))
            );
            assert!(e.message.contains("pools.list"), "{}", e.message);
        }
        assert!(PageCursor::<PoolId>::decode("pools.list", &pool_token).is_ok());
        assert!(PageCursor::<u64>::decode("pools.list", &pool_token).is_err());
    }

    #[test]
    fn page_size_follows_spec() {
        let r = PageRequest::<PoolId>::from_api("pools.list", None, None).unwrap();
        assert_eq!((r.limit, r.after), (PAGE_SIZE_DEFAULT, None));
        assert_eq!(
            PageRequest::<PoolId>::from_api("pools.list", Some(500), None).unwrap().limit,
            500
        );
        for bad in [0, 501] {
            let e = PageRequest::<PoolId>::from_api("pools.list", Some(bad), None).unwrap_err();
            assert_eq!(e.field.as_deref(), Some("pageSize"));
        }
        let e = PageRequest::<PoolId>::from_api("pools.list", Some(10), Some("x")).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("pageToken"));
    }

    #[test]
    fn next_request_carries_the_cursor() {
        let page: Page<(), u64> = Page { items: vec![], next: Some(PageCursor::after(9)) };
        let next = page.next_request(5).unwrap();
        assert_eq!((next.after.unwrap().key(), next.limit), (&9, 5));
        assert_eq!(Page::<(), u64> { items: vec![], next: None }.next_request(5), None);
        assert!(page.next_page_token("probe.list").is_some());
    }
}
