//! The store's reads: one object, a list (a page at a time, with label and field
//! selectors and continue tokens), and the changes a watch resumes from.
//!
//! Invariant: a read renders what is stored exactly as a write answered it, and changes
//! nothing.

use serde_json::Value;

use super::encode::{labels_of, render, rendered};
use super::list::{decode_continue, encode_continue};
use super::types::{Change, Objects, Page, Query, ns_key};
use crate::kube::error::KubeError;
use crate::kube::resource::Resource;
use crate::kube::selector::Selector;

impl Objects {
    /// One object, rendered.
    pub(crate) fn get(
        &self,
        cluster: &str,
        resource: Resource,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Value, KubeError> {
        let key = (resource, ns_key(resource, namespace), name.to_owned());
        self.stored(cluster, &key)
            .map(|s| render(resource, &key, s))
            .ok_or_else(|| KubeError::missing(resource, name))
    }

    /// Objects of a resource (in one namespace, or all), filtered by a label selector.
    pub(crate) fn list(
        &self,
        cluster: &str,
        resource: Resource,
        namespace: Option<&str>,
        selector: &Selector,
    ) -> Vec<Value> {
        let query = Query {
            namespace: namespace.map(str::to_owned),
            labels: selector.clone(),
            ..Query::default()
        };
        self.page(cluster, resource, &query).map(|p| p.items).unwrap_or_default()
    }

    /// One page of a list.
    pub(crate) fn page(
        &self,
        cluster: &str,
        resource: Resource,
        query: &Query,
    ) -> Result<Page, KubeError> {
        let rv = self.resource_version();
        let start = match &query.continue_from {
            Some(token) => Some(decode_continue(token, self.compacted_of(cluster))?),
            None => None,
        };
        let Some(c) = self.clusters.get(cluster) else {
            return Ok(Page { items: Vec::new(), resource_version: rv, next: None, remaining: 0 });
        };
        let ns_filter = query.namespace.as_deref().filter(|_| resource.namespaced());
        let lo = (resource, ns_filter.unwrap_or_default().to_owned(), String::new());
        let mut selected = c
            .objects
            .range(lo..)
            .take_while(|(k, _)| k.0 == resource && ns_filter.is_none_or(|ns| k.1 == ns))
            .filter(|(k, _)| start.as_ref().is_none_or(|(sns, sname)| (&k.1, &k.2) > (sns, sname)))
            .map(|(k, s)| (k, rendered(resource, k, s)))
            .filter(|(_, o)| query.labels.matches(&labels_of(o)) && query.fields.matches(o));
        let mut items = Vec::new();
        let mut last = None;
        for (k, o) in selected.by_ref() {
            if query.limit > 0 && items.len() == query.limit {
                // One more exists: the page ends at the previous item.
                let remaining = 1 + selected.count();
                let next = last.map(|(ns, name): (String, String)| encode_continue(rv, &ns, &name));
                return Ok(Page { items, resource_version: rv, next, remaining });
            }
            last = Some((k.1.clone(), k.2.clone()));
            items.push(Value::clone(&o));
        }
        Ok(Page { items, resource_version: rv, next: None, remaining: 0 })
    }

    /// The changes of `cluster` after `since`, or 410 Gone when some of them are no
    /// longer kept.
    pub(crate) fn changes_since(
        &self,
        cluster: &str,
        since: u64,
    ) -> Result<Vec<Change>, KubeError> {
        let Some(c) = self.clusters.get(cluster) else { return Ok(Vec::new()) };
        if since < c.compacted {
            return Err(KubeError::expired(format!(
                "too old resource version: {since} ({})",
                c.compacted + 1
            )));
        }
        Ok(c.changes_after(since).cloned().collect())
    }
}
