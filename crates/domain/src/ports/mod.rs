//! The ports of DESIGN.md: traits the adapters implement and the core uses.
//!
//! Invariant: nothing here does I/O; every trait is object-safe so the composition root
//! can hold `Arc<dyn …>` and tests can swap in mocks.

pub mod authz;
pub mod clock;
pub mod cluster;
pub mod credentials;
pub mod events;
pub mod provider;
pub mod request_gate;
pub mod secret;
pub mod store;

pub use authz::{Authorizer, Decision, Permission};
pub use clock::{Clock, ManualClock, SystemClock};
pub use cluster::{
    ApplyOutcome, ClusterApi, ClusterClient, ClusterError, ClusterNode, ClusterOps, ClusterSession,
    DeleteOutcome, KubeObject, LoadBalancerService, NamespacedObject, ObjectError, ObjectKind,
    ObjectMeta, ObjectRef, OwnerLabel, OwnerReference, Ownership, PersistentVolumeInfo,
    Preconditions, ProviderBacked, TokenReview, digest_secret_values, manifest_in_place,
    object_in_place,
};
pub use credentials::*;
pub use events::{EventPublisher, PublishError};
pub use provider::*;
pub use request_gate::{Gated, RequestGate, admit_request, gated};
pub use secret::{SecretBox, SecretError};
pub use store::*;
