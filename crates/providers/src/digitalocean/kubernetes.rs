//! DOKS through the [`KubernetesProvider`] port: clusters, node pools, nodes, upgrades,
//! options and kubeconfigs (research/digitalocean.md §4.4).
//!
//! Invariant: a kubeconfig (always the bearer-token type, research §4.4) is minted once
//! per cluster — concurrent first callers of one cluster wait for one mint, while other
//! clusters mint in parallel — and reused until less than the refresh margin of its
//! lifetime is left (judged by the injected clock), never per reconcile; it is dropped
//! when the cluster is deleted or its API refuses it. A kubeconfig 404 of a cluster that
//! exists is "not ready yet" (`Transient`), not "gone".

use async_trait::async_trait;
use bc_domain::ProviderError;
use bc_domain::Timestamp;
use bc_domain::model::{ClusterMode, SecretString};
use bc_domain::ports::{
    AssociatedResources, ClusterCredentials, CreateClusterRequest, KubernetesProvider,
    KubernetesVersion, NodePoolRequest, ProviderCluster, ProviderNodePool, ProviderOptions,
    ProviderResult, UpdateClusterRequest,
};
use reqwest::Method;
use serde_json::{Value, json};

use super::DigitalOcean;
use super::wire::{
    ClusterEnvelope, CreateClusterOut, NodePoolEnvelope, NodePoolList, NodePoolOut,
    OptionsEnvelope, UpdateClusterOut, Upgrades, WireAssociated, WireCluster, WireNodePool,
};
use crate::classify::digitalocean;

/// A cached kubeconfig and when its token expires.
#[derive(Debug, Clone)]
pub(crate) struct CredentialCache {
    credentials: ClusterCredentials,
    expires_at: Timestamp,
}

/// Percent-encodes one path segment, so an id can never add a segment or a query.
pub(crate) fn seg(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn cluster_path(id: &str) -> String {
    format!("/v2/kubernetes/clusters/{}", seg(id))
}

fn pool_path(cluster_id: &str, pool_id: &str) -> String {
    format!("{}/node_pools/{}", cluster_path(cluster_id), seg(pool_id))
}

impl DigitalOcean {
    fn credential_cache(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, CredentialCache>> {
        self.credentials.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Drops what is kept for a deleted cluster: its kubeconfig and its mint lock.
    fn forget_cluster(&self, cluster_id: &str) {
        self.invalidate_credentials(cluster_id);
        self.minting.lock().unwrap_or_else(|e| e.into_inner()).remove(cluster_id);
    }

    /// The lock held while `cluster_id`'s kubeconfig is minted (one per cluster).
    fn mint_lock(&self, cluster_id: &str) -> std::sync::Arc<tokio::sync::Mutex<()>> {
        let mut locks = self.minting.lock().unwrap_or_else(|e| e.into_inner());
        locks.entry(cluster_id.to_owned()).or_default().clone()
    }

    fn cached_credentials(&self, cluster_id: &str, now: Timestamp) -> Option<ClusterCredentials> {
        let cache = self.credential_cache();
        let entry = cache.get(cluster_id)?;
        (!self.renewal_due(entry.expires_at, now)).then(|| entry.credentials.clone())
    }

    /// Whether a kubeconfig expiring at `expires_at` is within the refresh margin at
    /// `now`: the one rule for the cache and for sessions holding a kube client.
    fn renewal_due(&self, expires_at: Timestamp, now: Timestamp) -> bool {
        // A margin as long as the lifetime would mint on every call: cap it at half.
        let margin = self.config.kubeconfig_refresh_margin.min(self.config.kubeconfig_expiry / 2);
        let margin = time::Duration::try_from(margin).unwrap_or(time::Duration::minutes(5));
        expires_at - now <= margin
    }
}

#[async_trait]
impl KubernetesProvider for DigitalOcean {
    fn credentials_due(&self, expires_at: Timestamp) -> bool {
        // The kubeconfig's token dies at `expires_at` (DigitalOcean refuses it with 401
        // from then): a session renews it inside the margin, as the cache would, rather
        // than have one call an hour refused.
        self.renewal_due(expires_at, self.transport.clock().now())
    }

    fn invalidate_credentials(&self, cluster_id: &str) {
        self.credential_cache().remove(cluster_id);
    }

    async fn list_clusters(&self) -> ProviderResult<Vec<ProviderCluster>> {
        let clusters = self.list_all("/v2/kubernetes/clusters", |c: &WireCluster| &c.id).await?;
        Ok(clusters.into_iter().map(WireCluster::into_port).collect())
    }

    async fn get_cluster(&self, id: &str) -> ProviderResult<ProviderCluster> {
        let c: ClusterEnvelope = self.transport.get_json(&cluster_path(id), &[]).await?;
        Ok(c.kubernetes_cluster.into_port())
    }

    async fn create_cluster(&self, req: &CreateClusterRequest) -> ProviderResult<ProviderCluster> {
        if req.mode != ClusterMode::Standard {
            // Decided here, without a call: DOKS has no such mode.
            return Err(ProviderError::Refused {
                message: "DigitalOcean offers only standard clusters (no autopilot)".into(),
            });
        }
        let body = serde_json::to_value(CreateClusterOut::from_request(req))
            .map_err(|e| ProviderError::Refused { message: format!("cluster request: {e}") })?;
        let c: ClusterEnvelope =
            self.transport.send_json(Method::POST, "/v2/kubernetes/clusters", &body).await?;
        Ok(c.kubernetes_cluster.into_port())
    }

    async fn update_cluster(
        &self,
        id: &str,
        req: &UpdateClusterRequest,
    ) -> ProviderResult<ProviderCluster> {
        let body = serde_json::to_value(UpdateClusterOut::from_request(req))
            .map_err(|e| ProviderError::Refused { message: format!("cluster update: {e}") })?;
        let c: ClusterEnvelope =
            self.transport.send_json(Method::PUT, &cluster_path(id), &body).await?;
        Ok(c.kubernetes_cluster.into_port())
    }

    async fn delete_cluster(&self, id: &str) -> ProviderResult<()> {
        self.transport.send(Method::DELETE, &cluster_path(id), &[], None).await?;
        self.forget_cluster(id);
        Ok(())
    }

    async fn associated_resources(&self, id: &str) -> ProviderResult<AssociatedResources> {
        let path = format!("{}/destroy_with_associated_resources", cluster_path(id));
        let a: WireAssociated = self.transport.get_json(&path, &[]).await?;
        Ok(a.into_port())
    }

    async fn delete_cluster_selective(
        &self,
        id: &str,
        load_balancer_ids: &[String],
    ) -> ProviderResult<()> {
        let path = format!("{}/destroy_with_associated_resources/selective", cluster_path(id));
        // Volumes and snapshots are not ours to delete: only the listed LBs go.
        let body = json!({
            "load_balancers": load_balancer_ids,
            "volumes": Vec::<String>::new(),
            "volume_snapshots": Vec::<String>::new(),
        });
        self.transport.send(Method::DELETE, &path, &[], Some(&body)).await?;
        self.forget_cluster(id);
        Ok(())
    }

    async fn list_node_pools(&self, cluster_id: &str) -> ProviderResult<Vec<ProviderNodePool>> {
        let path = format!("{}/node_pools", cluster_path(cluster_id));
        let l: NodePoolList = self.transport.get_json(&path, &[]).await?;
        Ok(l.node_pools.unwrap_or_default().into_iter().map(WireNodePool::into_port).collect())
    }

    async fn get_node_pool(
        &self,
        cluster_id: &str,
        node_pool_id: &str,
    ) -> ProviderResult<ProviderNodePool> {
        let p: NodePoolEnvelope =
            self.transport.get_json(&pool_path(cluster_id, node_pool_id), &[]).await?;
        Ok(p.node_pool.into_port())
    }

    async fn create_node_pool(
        &self,
        cluster_id: &str,
        req: &NodePoolRequest,
    ) -> ProviderResult<ProviderNodePool> {
        let path = format!("{}/node_pools", cluster_path(cluster_id));
        let body = serde_json::to_value(NodePoolOut::from_request(req, true))
            .map_err(|e| ProviderError::Refused { message: format!("node pool request: {e}") })?;
        let p: NodePoolEnvelope = self.transport.send_json(Method::POST, &path, &body).await?;
        Ok(p.node_pool.into_port())
    }

    async fn update_node_pool(
        &self,
        cluster_id: &str,
        node_pool_id: &str,
        req: &NodePoolRequest,
    ) -> ProviderResult<ProviderNodePool> {
        // Size is immutable and not sent; count is left out for autoscaled pools (None)
        // so the provider's current count is not reset.
        let body = serde_json::to_value(NodePoolOut::from_request(req, false))
            .map_err(|e| ProviderError::Refused { message: format!("node pool request: {e}") })?;
        let p: NodePoolEnvelope = self
            .transport
            .send_json(Method::PUT, &pool_path(cluster_id, node_pool_id), &body)
            .await?;
        Ok(p.node_pool.into_port())
    }

    async fn delete_node_pool(&self, cluster_id: &str, node_pool_id: &str) -> ProviderResult<()> {
        self.transport
            .send(Method::DELETE, &pool_path(cluster_id, node_pool_id), &[], None)
            .await?;
        Ok(())
    }

    async fn delete_node(
        &self,
        cluster_id: &str,
        node_pool_id: &str,
        node_id: &str,
        skip_drain: bool,
        replace: bool,
    ) -> ProviderResult<()> {
        let path = format!("{}/nodes/{}", pool_path(cluster_id, node_pool_id), seg(node_id));
        // As godo does: each flag is sent only when set (absent means 0).
        let mut query = Vec::new();
        if skip_drain {
            query.push(("skip_drain", "1".to_owned()));
        }
        if replace {
            query.push(("replace", "1".to_owned()));
        }
        self.transport.send(Method::DELETE, &path, &query, None).await?;
        Ok(())
    }

    async fn available_upgrades(&self, cluster_id: &str) -> ProviderResult<Vec<KubernetesVersion>> {
        let path = format!("{}/upgrades", cluster_path(cluster_id));
        let u: Upgrades = self.transport.get_json(&path, &[]).await?;
        // `null` means up to date.
        Ok(u.available_upgrade_versions
            .unwrap_or_default()
            .into_iter()
            .map(|v| v.into_port())
            .collect())
    }

    async fn upgrade_cluster(&self, cluster_id: &str, version: &str) -> ProviderResult<()> {
        let path = format!("{}/upgrade", cluster_path(cluster_id));
        let body: Value = json!({ "version": version });
        self.transport.send(Method::POST, &path, &[], Some(&body)).await?;
        Ok(())
    }

    async fn options(&self) -> ProviderResult<ProviderOptions> {
        let o: OptionsEnvelope = self.transport.get_json("/v2/kubernetes/options", &[]).await?;
        Ok(o.options.unwrap_or_default().into_port())
    }

    async fn credentials(&self, cluster_id: &str) -> ProviderResult<ClusterCredentials> {
        if let Some(c) = self.cached_credentials(cluster_id, self.transport.clock().now()) {
            return Ok(c);
        }
        let lock = self.mint_lock(cluster_id);
        let _minting = lock.lock().await;
        // Someone may have minted while we waited for the lock.
        let now = self.transport.clock().now();
        if let Some(c) = self.cached_credentials(cluster_id, now) {
            return Ok(c);
        }
        let expiry_secs = self.config.kubeconfig_expiry.as_secs().max(60);
        let path = format!("{}/kubeconfig", cluster_path(cluster_id));
        // `type=token`: a bearer token the kube client can use, even where the account
        // enables SSO (whose kubeconfig needs an exec plugin).
        let query = [("expiry_seconds", expiry_secs.to_string()), ("type", "token".to_owned())];
        let reply = match self.transport.send(Method::GET, &path, &query, None).await {
            Ok(reply) => reply,
            Err(ProviderError::NotFound) => {
                let cluster = self.get_cluster(cluster_id).await.map(|_| ());
                return Err(digitalocean::kubeconfig_not_found(cluster_id, cluster));
            }
            Err(e) => return Err(e),
        };
        // The kubeconfig is passed through as YAML text; its token lives as long as we
        // asked, counted from before the request (so we never think it lives longer).
        let expires_at = now + time::Duration::seconds(expiry_secs as i64);
        let credentials = ClusterCredentials {
            kubeconfig: SecretString::new(reply.body),
            expires_at: Some(expires_at),
        };
        self.credential_cache().insert(
            cluster_id.to_owned(),
            CredentialCache { credentials: credentials.clone(), expires_at },
        );
        Ok(credentials)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_segments_cannot_escape() {
        assert_eq!(
            seg("bd5f5959-5e1e-4205-a714-a914373942af"),
            "bd5f5959-5e1e-4205-a714-a914373942af"
        );
        assert_eq!(seg("../x?y=1"), "..%2Fx%3Fy%3D1");
    }
}
