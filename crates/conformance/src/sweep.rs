//! The sweeper: deletes every cluster and load balancer named under
//! [`crate::NAME_PREFIX`] and tagged [`crate::TAG`] — what this run made, or what an
//! earlier run left when it crashed — and waits until the provider answers that each is
//! gone.
//!
//! Invariant: an object needs both the prefix and the tag to be deleted (a tenant's
//! object that has one of them by chance is left alone); one sweep at a time per account
//! (two concurrent runs would sweep each other's objects).

use std::io::Write;

use bc_domain::ProviderError;
use bc_domain::ports::{KubernetesProvider, ProviderCluster, ProviderClusterState, ProviderImpl};

use crate::wait::{Deadlines, Seen, not_yet, until, until_gone};
use crate::{ConformanceError, NAME_PREFIX, Result, TAG};

/// Whether an object named `name` with `tags` is one of ours.
pub fn is_ours(name: &str, tags: &[String]) -> bool {
    name.starts_with(NAME_PREFIX) && tags.iter().any(|t| t == TAG)
}

/// What is left of a deleted cluster as read (`None`: it counts as gone).
pub fn cluster_left(c: &ProviderCluster) -> Option<String> {
    (c.state != ProviderClusterState::Deleted).then(|| format!("{:?}", c.state))
}

/// Asks for cluster `id`'s deletion until it is taken (a provider busy with an earlier
/// operation on it answers `Busy`) or the cluster is gone; `step` names the wait.
pub async fn delete_cluster(
    k: &dyn KubernetesProvider,
    deadlines: &Deadlines,
    id: &str,
    step: &str,
) -> Result<()> {
    until(step, deadlines.busy, deadlines.pause_max, || async {
        match k.delete_cluster(id).await {
            Ok(()) | Err(ProviderError::NotFound) => Ok(Seen::Done(())),
            Err(e) => not_yet(step, e),
        }
    })
    .await
}

/// Deletes what [`is_ours`] and waits for each to be gone; `when` names the sweep in
/// what it prints.
pub async fn sweep(
    provider: &dyn ProviderImpl,
    deadlines: &Deadlines,
    when: &str,
    out: &mut dyn Write,
) -> Result<()> {
    let step = format!("sweep ({when})");
    let failed = |error| ConformanceError::Provider { step: step.clone(), error };
    let k = provider.kubernetes();
    let lbs = provider.load_balancers();
    let clusters: Vec<_> = k
        .list_clusters()
        .await
        .map_err(failed)?
        .into_iter()
        .filter(|c| is_ours(&c.name, &c.tags))
        .collect();
    let balancers: Vec<_> = lbs
        .list()
        .await
        .map_err(failed)?
        .into_iter()
        .filter(|l| is_ours(&l.spec.name, &l.spec.tags))
        .collect();
    if clusters.is_empty() && balancers.is_empty() {
        let _ = writeln!(out, "{step}: nothing named {NAME_PREFIX}… and tagged {TAG}");
        return Ok(());
    }
    // Load balancers first: one may target a cluster's nodes.
    for lb in &balancers {
        let _ = writeln!(out, "{step}: deleting load balancer {} ({})", lb.spec.name, lb.id);
        match lbs.delete(&lb.id).await {
            Ok(()) | Err(ProviderError::NotFound) => {}
            Err(e) => return Err(failed(e)),
        }
    }
    for c in &clusters {
        let _ = writeln!(out, "{step}: deleting cluster {} ({})", c.name, c.id);
        if matches!(c.state, ProviderClusterState::Deleting | ProviderClusterState::Deleted) {
            continue;
        }
        delete_cluster(k, deadlines, &c.id, &step).await?;
    }
    for lb in &balancers {
        let what = format!("{step}: load balancer {} gone", lb.spec.name);
        until_gone(&what, deadlines, || lbs.get(&lb.id), |l| Some(format!("{:?}", l.status)))
            .await?;
    }
    for c in &clusters {
        let what = format!("{step}: cluster {} gone", c.name);
        until_gone(&what, deadlines, || k.get_cluster(&c.id), cluster_left).await?;
    }
    let _ = writeln!(
        out,
        "{step}: deleted {} cluster(s) and {} load balancer(s)",
        clusters.len(),
        balancers.len()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_prefix_and_the_tag_together_make_an_object_ours() {
        let tags = |t: &[&str]| t.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert!(is_ours("bc-conf-abc-c", &tags(&["x", TAG])));
        assert!(!is_ours("bc-conf-abc-c", &tags(&["x"])), "no tag");
        assert!(!is_ours("prod-web", &tags(&[TAG])), "no prefix");
        assert!(!is_ours("my-bc-conf-x", &tags(&[TAG])), "prefix not at the start");
    }
}
