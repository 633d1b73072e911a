//! The cluster sessions the substrate reconciler keeps (`shared::Sessions`) hold kube
//! clients for the clusters in work only: at most their capacity, none idle past their
//! horizon, none of a cluster forgotten (deleted), and none made with an account's
//! provider instance of before a credential rotation. Each client is made by the
//! production kube adapter against a simulated cluster and watched through a weak
//! reference, so "dropped" means no one holds it any more.

use std::sync::{Arc, Mutex, Weak};

use async_trait::async_trait;
use bc_domain::model::SecretString;
use bc_domain::ports::{Clock, ClusterApi, ClusterClient, ClusterError};
use bc_reconcile::shared::{SESSION_IDLE, Sessions};
use bc_reconcile::testing::Env;

/// The kube adapter, remembering every client it made (weakly).
struct Watched {
    inner: Arc<dyn ClusterApi>,
    made: Mutex<Vec<Weak<dyn ClusterClient>>>,
}

impl Watched {
    fn new(inner: Arc<dyn ClusterApi>) -> Arc<Self> {
        Arc::new(Self { inner, made: Mutex::new(Vec::new()) })
    }

    /// How many of the clients made are still held by someone.
    fn alive(&self) -> usize {
        self.made.lock().unwrap().iter().filter(|c| c.strong_count() > 0).count()
    }
}

#[async_trait]
impl ClusterApi for Watched {
    async fn connect(
        &self,
        kubeconfig: &SecretString,
    ) -> Result<Arc<dyn ClusterClient>, ClusterError> {
        let client = self.inner.connect(kubeconfig).await?;
        self.made.lock().unwrap().push(Arc::downgrade(&client));
        Ok(client)
    }
}

#[tokio::test]
async fn sessions_keep_clients_only_for_clusters_in_work_up_to_their_bound() {
    let env = Env::start().await;
    let pid = env.tenant_cluster();
    let api = Watched::new(env.deps.clusters.clone());
    let provider = env.provider();
    let account = &env.account;
    let sessions = Sessions::bounded(SESSION_IDLE, 2);
    let t0 = env.clock.now();
    let second = time::Duration::seconds(1);
    let use_it = |now| {
        let s = sessions.get(account, provider.clone(), api.clone(), &pid, now);
        async move { s.list_nodes("").await.expect("the cluster's nodes") }
    };

    // A session in use keeps its client between activations.
    use_it(t0).await;
    use_it(t0 + second).await;
    assert_eq!(api.alive(), 1, "one client, kept");
    assert_eq!(api.made.lock().unwrap().len(), 1, "made once for both uses");

    // Two other clusters used since: over the bound of 2, the least recently used goes.
    for (i, other) in ["other-1", "other-2"].into_iter().enumerate() {
        let at = t0 + second * (2 + i as i32);
        let _ = sessions.get(account, provider.clone(), api.clone(), other, at);
    }
    assert_eq!(sessions.len(), 2);
    assert_eq!(api.alive(), 0, "the least recently used session's client is dropped");

    // Idle past the horizon: dropped at the next use of any session.
    let t1 = t0 + time::Duration::minutes(1);
    use_it(t1).await;
    assert_eq!(api.alive(), 1);
    let _ = sessions.get(account, provider.clone(), api.clone(), "other-1", t1 + SESSION_IDLE);
    assert_eq!(api.alive(), 0, "an idle session's client is dropped");
    assert_eq!(sessions.len(), 1, "only the session just used is kept");

    // A deleted cluster's session is forgotten, and its client with it.
    let t2 = t1 + SESSION_IDLE + second;
    use_it(t2).await;
    assert_eq!(api.alive(), 1);
    sessions.forget(account, &pid);
    assert_eq!(api.alive(), 0, "a forgotten cluster's client is dropped");

    // The account's credentials rotated: the observer hands out another provider
    // instance, and the session made with the old one is not used again.
    use_it(t2 + second).await;
    let rotated = env.provider();
    let s = sessions.get(account, rotated, api.clone(), &pid, t2 + second * 2);
    s.list_nodes("").await.expect("the cluster's nodes, with the new instance");
    assert_eq!(api.alive(), 1, "the old instance's client is dropped, the new one's kept");

    // A clock stepped back: sessions last used after "now" have no known age and go.
    drop(s);
    let _ = sessions.get(account, provider.clone(), api.clone(), "other-3", t0);
    assert_eq!(api.alive(), 0, "a session used in the future is dropped");
    assert_eq!(sessions.len(), 1, "only the session just made is kept");
}
