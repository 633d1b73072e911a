//! The reconcilers, listed once: the one place that says which reconciler claims which
//! work kind. Every composition root — bc-stack's wiring, the embedding example, the
//! tests' harness, the benchmark — builds its reconcilers here.
//!
//! Invariant: exactly one reconciler per [`WorkKind`]; a new kind is added here and
//! nowhere else.

use std::sync::Arc;

use bc_domain::ports::WorkKind;

use crate::clusters::ClusterReconciler;
use crate::node_pools::NodePoolReconciler;
use crate::provider_resources::LoadBalancers;
use crate::provider_resources::plan::Timing;
use crate::reconciler::Reconciler;
use crate::shared::Entropy;
use crate::substrates::SubstrateReconciler;

/// The reconciler of `kind`, drawing randomness (join tokens, event ids) from `entropy`,
/// with the load balancer reconciler's waits at their DigitalOcean-scale defaults.
pub fn reconciler_of(kind: WorkKind, entropy: Arc<dyn Entropy>) -> Arc<dyn Reconciler> {
    reconciler_with(kind, entropy, Timing::default())
}

/// The reconciler of `kind`, the load balancer reconciler waiting by `timing`.
pub fn reconciler_with(
    kind: WorkKind,
    entropy: Arc<dyn Entropy>,
    timing: Timing,
) -> Arc<dyn Reconciler> {
    match kind {
        WorkKind::Substrates => Arc::new(SubstrateReconciler::new(entropy)),
        WorkKind::Clusters => Arc::new(ClusterReconciler::new(entropy)),
        WorkKind::NodePools => Arc::new(NodePoolReconciler::new(entropy)),
        WorkKind::ProviderResources => Arc::new(LoadBalancers::new(timing, entropy)),
    }
}

/// The reconcilers of `kinds` (every kind when empty; each once, in [`WorkKind::ALL`]
/// order), as [`reconciler_with`] makes them.
pub fn reconcilers(
    kinds: &[WorkKind],
    entropy: Arc<dyn Entropy>,
    timing: &Timing,
) -> Vec<Arc<dyn Reconciler>> {
    WorkKind::ALL
        .into_iter()
        .filter(|k| kinds.is_empty() || kinds.contains(k))
        .map(|k| reconciler_with(k, entropy.clone(), timing.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shared::OsEntropy;

    fn kinds(of: &[WorkKind]) -> Vec<WorkKind> {
        reconcilers(of, Arc::new(OsEntropy), &Timing::default()).iter().map(|r| r.kind()).collect()
    }

    #[test]
    fn every_kind_has_its_reconciler_once_and_a_choice_keeps_only_its_kinds() {
        assert_eq!(kinds(&[]), WorkKind::ALL.to_vec());
        for k in WorkKind::ALL {
            assert_eq!(reconciler_of(k, Arc::new(OsEntropy)).kind(), k);
        }
        let chosen = [WorkKind::ProviderResources, WorkKind::Substrates, WorkKind::Substrates];
        assert_eq!(kinds(&chosen), vec![WorkKind::Substrates, WorkKind::ProviderResources]);
    }
}
