//! The per-cluster Kubernetes HTTP face (placeholder).

use std::sync::Arc;

use crate::SimState;

/// Kubernetes objects of every simulated cluster.
#[derive(Debug, Default)]
pub struct KubeStore {}

/// The routes under `/k8s/{cluster_id}`.
pub fn router(_state: Arc<SimState>) -> axum::Router {
    axum::Router::new()
}
