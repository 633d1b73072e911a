//! Paging on the wire (SPEC §2): `pageSize` 1–500 (default 100), opaque `pageToken`s,
//! and the two traits a list method's input and output have, so one loop pages through
//! any list.
//!
//! Invariant: a token is only ever shaped here (base64url, at most 512 characters); what
//! it means (the cursor, bound to the list that issued it) is the server's.

use std::borrow::Cow;

use bc_domain::ports::{PAGE_SIZE_DEFAULT, PAGE_SIZE_MAX};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize};

/// Most characters of a page token.
const MAX_TOKEN_LEN: usize = 512;
/// The rule of a page token's text (base64url without padding).
const TOKEN_PATTERN: &str = "^[A-Za-z0-9_-]+$";

/// A page size, 1 to 500.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PageSize(u32);

impl PageSize {
    /// `n` if it is 1 to 500.
    pub fn new(n: u32) -> Option<Self> {
        (1..=PAGE_SIZE_MAX).contains(&n).then_some(PageSize(n))
    }

    /// The number.
    pub fn get(self) -> u32 {
        self.0
    }
}

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
    /// A token as the server issues it (from bc-domain's cursor encoding).
    pub fn issued(text: String) -> Self {
        PageToken(text)
    }

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

/// A list method's input: it asks for one page at a time.
pub trait ListInput {
    /// The `pageToken` it asks with.
    fn page_token(&self) -> Option<&PageToken>;
    /// Asks for the page after the one `token` ended.
    fn set_page_token(&mut self, token: Option<PageToken>);
    /// The `pageSize` it asks for.
    fn page_size(&self) -> Option<PageSize>;
}

/// A list method's output: one page of items and, while more remain, the next token.
pub trait ListOutput {
    /// What it lists.
    type Item;
    /// A page of `items`, with `next` while more remain.
    fn from_page(items: Vec<Self::Item>, next: Option<PageToken>) -> Self;
    /// The items and the next token.
    fn into_page(self) -> (Vec<Self::Item>, Option<PageToken>);
}
