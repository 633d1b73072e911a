//! The cluster access adapter over kube (placeholder).
