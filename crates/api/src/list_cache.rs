//! Pages a list method answered, kept as their JSON and answered again while the store's
//! version of that list has not moved (issue 31: a page of 100 pools cost four times the
//! cheapest method in decoding and serializing; Kubernetes' API server answers lists from
//! its watch cache for the same reason).
//!
//! Invariant: a kept page is answered only to a call with the same [`PageKey`] — the
//! method, the tenant, the caller's readable scope and every input that shapes the page —
//! and only while the list's version, read at the start of that call, equals the version
//! read *before* the kept page was. The store raises the version in the commit of every
//! change to the list, so whichever process or replica made the change, a page answered
//! from here is never older than the version its call read. At most [`BUDGET`] bytes of
//! JSON are kept; the oldest pages go first.

use std::collections::{HashMap, VecDeque};
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};

use bc_api_types::MethodId;
use bc_domain::name::TenantId;
use bc_domain::ports::ReadScope;
use serde::{Serialize, Serializer};
use serde_json::value::RawValue;

use crate::error::ApiError;

/// The most bytes of JSON kept: a few hundred first pages of 100 pools, small against the
/// process's 200 MiB at 10,000 objects (docs/benchmarks.md, "memory").
pub const BUDGET: usize = 16 << 20;

/// Everything a list call's page depends on besides the store's contents.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PageKey {
    /// The list method.
    pub method: MethodId,
    /// Whose objects.
    pub tenant: TenantId,
    /// What the caller may read (the store filters the page by it).
    pub scope: ReadScope,
    /// The method's filters, as its input states them (e.g. `includeArchived`).
    pub filters: u64,
    /// The input's `pageSize`.
    pub page_size: Option<u32>,
    /// The input's `pageToken`, already checked to be one of this method's.
    pub page_token: Option<String>,
}

/// A list's answer as JSON: kept from an earlier call, or just made (a handler's
/// [`Answer`](crate::registry::Answer) of `O`).
pub struct PageJson<O> {
    json: Arc<RawValue>,
    output: PhantomData<fn() -> O>,
}

impl<O> Clone for PageJson<O> {
    fn clone(&self) -> Self {
        Self { json: self.json.clone(), output: PhantomData }
    }
}

impl<O: Serialize> PageJson<O> {
    /// `output` as the JSON answer of `method`.
    pub fn of(method: MethodId, output: &O) -> Result<Self, ApiError> {
        let text = serde_json::to_string(output)
            .and_then(RawValue::from_string)
            .map_err(|e| ApiError::internal(format!("{method}: serializing the answer: {e}")))?;
        Ok(Self { json: Arc::from(text), output: PhantomData })
    }
}

impl<O> PageJson<O> {
    /// The JSON text.
    pub fn get(&self) -> &str {
        self.json.get()
    }
}

impl<O> Serialize for PageJson<O> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // Written as it is: the text was serialized from an `O` when it was made.
        self.json.as_ref().serialize(s)
    }
}

/// The pages kept, per key, with the list version each was read at.
#[derive(Default)]
pub struct ListCache {
    inner: Mutex<Kept>,
}

#[derive(Default)]
struct Kept {
    pages: HashMap<PageKey, (u64, Arc<RawValue>)>,
    /// Keys in the order they were first kept: the oldest go first past the budget.
    order: VecDeque<PageKey>,
    bytes: usize,
}

impl std::fmt::Debug for ListCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kept = self.lock();
        f.debug_struct("ListCache")
            .field("pages", &kept.pages.len())
            .field("bytes", &kept.bytes)
            .finish()
    }
}

impl ListCache {
    fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The page kept under `key` if it was read at `version`.
    pub fn get<O>(&self, key: &PageKey, version: u64) -> Option<PageJson<O>> {
        let kept = self.lock();
        let (at, json) = kept.pages.get(key)?;
        (*at == version).then(|| PageJson { json: json.clone(), output: PhantomData })
    }

    /// Keeps `page` under `key`, read at `version` (a version read before the page was).
    /// A page larger than the whole budget is not kept.
    pub fn put<O>(&self, key: PageKey, version: u64, page: &PageJson<O>) {
        let size = page.get().len();
        if size > BUDGET {
            return;
        }
        let mut kept = self.lock();
        let kept = &mut *kept;
        match kept.pages.get_mut(&key) {
            Some((at, json)) => {
                // Never replace a page with one read at an older version (a slow call
                // that read its version before a faster one's).
                if *at > version {
                    return;
                }
                kept.bytes = kept.bytes - json.get().len() + size;
                (*at, *json) = (version, page.json.clone());
            }
            None => {
                kept.bytes += size;
                kept.order.push_back(key.clone());
                kept.pages.insert(key, (version, page.json.clone()));
            }
        }
        while kept.bytes > BUDGET {
            let Some(oldest) = kept.order.pop_front() else { break };
            if let Some((_, json)) = kept.pages.remove(&oldest) {
                kept.bytes -= json.get().len();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(tenant: &str, token: Option<&str>) -> PageKey {
        PageKey {
            method: MethodId { resource: "pools", name: "list" },
            tenant: tenant.parse().unwrap(),
            scope: ReadScope::Tenant,
            filters: 0,
            page_size: None,
            page_token: token.map(str::to_owned),
        }
    }

    fn page(text: &str) -> PageJson<serde_json::Value> {
        PageJson::of(MethodId { resource: "pools", name: "list" }, &serde_json::json!(text))
            .unwrap()
    }

    #[test]
    fn a_kept_page_is_answered_only_at_the_version_it_was_read_at_and_to_its_own_key() {
        let cache = ListCache::default();
        cache.put(key("acme", None), 3, &page("a"));
        let hit: PageJson<serde_json::Value> = cache.get(&key("acme", None), 3).unwrap();
        assert_eq!(hit.get(), r#""a""#);
        assert!(cache.get::<serde_json::Value>(&key("acme", None), 4).is_none());
        assert!(cache.get::<serde_json::Value>(&key("acme", Some("t")), 3).is_none());
        assert!(cache.get::<serde_json::Value>(&key("other", None), 3).is_none());
        let mut narrower = key("acme", None);
        narrower.scope = ReadScope::Granted(Default::default());
        assert!(cache.get::<serde_json::Value>(&narrower, 3).is_none());
    }

    #[test]
    fn a_page_read_at_an_older_version_never_replaces_a_newer_one() {
        let cache = ListCache::default();
        cache.put(key("acme", None), 5, &page("new"));
        cache.put(key("acme", None), 4, &page("old"));
        assert_eq!(
            cache.get::<serde_json::Value>(&key("acme", None), 5).unwrap().get(),
            r#""new""#
        );
        cache.put(key("acme", None), 6, &page("newer"));
        assert_eq!(
            cache.get::<serde_json::Value>(&key("acme", None), 6).unwrap().get(),
            r#""newer""#
        );
    }

    #[test]
    fn the_oldest_pages_go_first_past_the_budget() {
        let cache = ListCache::default();
        let big = "x".repeat(BUDGET / 3);
        for (i, tenant) in ["t1", "t2", "t3", "t4"].into_iter().enumerate() {
            cache.put(key(tenant, None), i as u64, &page(&big));
        }
        assert!(cache.get::<serde_json::Value>(&key("t1", None), 0).is_none());
        assert!(cache.get::<serde_json::Value>(&key("t4", None), 3).is_some());
        assert!(cache.lock().bytes <= BUDGET);
        let too_big = "x".repeat(BUDGET + 1);
        cache.put(key("t5", None), 0, &page(&too_big));
        assert!(cache.get::<serde_json::Value>(&key("t5", None), 0).is_none());
    }
}
