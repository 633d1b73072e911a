//! Paging of list methods (SPEC §2): `pageSize` 1–500 (default 100) and opaque
//! `pageToken`s.
//!
//! Invariant: a page token is opaque to callers and bound to the method that issued it: a
//! token of `pools.list` given to `loadBalancers.list`, or a token altered by hand, is
//! `INVALID_ARGUMENT` naming `pageToken`, never a wrong page or a 500.

use std::borrow::Cow;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize};

use crate::error::ApiError;
use crate::registry::MethodId;

/// The default page size.
pub const DEFAULT_PAGE_SIZE: u32 = 100;
/// The largest page size.
pub const MAX_PAGE_SIZE: u32 = 500;
/// Most characters of a page token.
const MAX_TOKEN_LEN: usize = 512;
/// The rule of a page token's text (base64url without padding).
const TOKEN_PATTERN: &str = "^[A-Za-z0-9_-]+$";
/// Version tag inside tokens, so their shape can change.
const TOKEN_VERSION: &str = "p1";

/// A page size, 1 to 500.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PageSize(u32);

impl PageSize {
    /// The size, or the default when not given.
    pub fn get(size: Option<PageSize>) -> u32 {
        size.map_or(DEFAULT_PAGE_SIZE, |s| s.0)
    }
}

impl<'de> Deserialize<'de> for PageSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let n = u32::deserialize(d)?;
        if (1..=MAX_PAGE_SIZE).contains(&n) {
            Ok(PageSize(n))
        } else {
            Err(serde::de::Error::custom(format!("must be 1 to {MAX_PAGE_SIZE}, not {n}")))
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
            "maximum": MAX_PAGE_SIZE,
            "default": DEFAULT_PAGE_SIZE,
        })
    }
}

/// An opaque page token, as received or issued.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PageToken(String);

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

impl PageToken {
    /// The token for the page after `cursor` (the store's cursor, as text) of `method`.
    pub fn issue(method: MethodId, cursor: &str) -> Self {
        let text = format!("{TOKEN_VERSION}\n{method}\n{cursor}");
        PageToken(URL_SAFE_NO_PAD.encode(text))
    }

    /// The cursor this token carries, if `method` issued it.
    pub fn cursor(&self, method: MethodId) -> Result<String, ApiError> {
        let refused = || {
            ApiError::invalid(
                "pageToken",
                format!("pageToken is not a nextPageToken of {method}; start again without it"),
            )
        };
        let bytes = URL_SAFE_NO_PAD.decode(&self.0).map_err(|_| refused())?;
        let text = String::from_utf8(bytes).map_err(|_| refused())?;
        let mut parts = text.splitn(3, '\n');
        let (Some(TOKEN_VERSION), Some(m), Some(cursor)) =
            (parts.next(), parts.next(), parts.next())
        else {
            return Err(refused());
        };
        if m != method.to_string() || cursor.is_empty() {
            return Err(refused());
        }
        Ok(cursor.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POOLS_LIST: MethodId = MethodId { resource: "pools", name: "list" };
    const LB_LIST: MethodId = MethodId { resource: "loadBalancers", name: "list" };

    #[test]
    fn tokens_round_trip_and_are_bound_to_their_method() {
        let t = PageToken::issue(POOLS_LIST, "pool_01jq3k5v9x8y7z6w5v4t3s2r1q");
        assert_eq!(t.cursor(POOLS_LIST).unwrap(), "pool_01jq3k5v9x8y7z6w5v4t3s2r1q");
        assert_eq!(t.cursor(LB_LIST).unwrap_err().field(), Some("pageToken"));
        let forged = PageToken("bm90LWEtdG9rZW4".into());
        assert!(forged.cursor(POOLS_LIST).is_err());
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
        assert_eq!(PageSize::get(serde_json::from_str("500").unwrap()), 500);
        assert_eq!(PageSize::get(None), 100);
    }
}
