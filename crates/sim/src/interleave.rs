//! Other actors at chosen moments: one-shot actions the simulator runs at a point of a
//! request's handling — between a client's read and its write, between the pages of a
//! list — so tests can reproduce races deterministically, whatever client is racing.
//!
//! Invariant: an action runs once, at the first moment that matches, with no lock of the
//! simulator held (it may use the model and the Kubernetes store freely).

use std::sync::Mutex;

use crate::SimState;
use crate::kube::resource::Resource;

/// An action of another actor.
pub type Action = Box<dyn FnOnce(&SimState) + Send>;

/// When an action runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Moment {
    /// Just before the next write (create, apply, delete) to a `resource` object of the
    /// cluster is carried out (after its gate).
    BeforeKubeWrite {
        /// Cluster id.
        cluster: String,
        /// Resource.
        resource: Resource,
    },
    /// Just after the DigitalOcean face served page `page` of the list route `route`
    /// (a `routes::key`, e.g. `GET /v2/load_balancers`), before the answer leaves.
    AfterListPage {
        /// Route key.
        route: String,
        /// Page number (from 1).
        page: usize,
    },
}

/// The queued actions.
#[derive(Default)]
pub struct Interleaves(Mutex<Vec<(Moment, Action)>>);

impl std::fmt::Debug for Interleaves {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let queued: Vec<Moment> = self.lock().iter().map(|(m, _)| m.clone()).collect();
        f.debug_tuple("Interleaves").field(&queued).finish()
    }
}

impl Interleaves {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(Moment, Action)>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `action` once, at `moment`.
    pub fn at(&self, moment: Moment, action: impl FnOnce(&SimState) + Send + 'static) {
        self.lock().push((moment, Box::new(action)));
    }

    /// Runs `action` just before the next write to a `resource` object of `cluster_id`
    /// (e.g. the tenant creates or replaces the object a client has just read).
    pub fn before_next_kube_write(
        &self,
        cluster_id: &str,
        resource: Resource,
        action: impl FnOnce(&SimState) + Send + 'static,
    ) {
        self.at(Moment::BeforeKubeWrite { cluster: cluster_id.to_owned(), resource }, action);
    }

    /// Runs `action` just after page `page` of list route `route` is served (e.g. an
    /// object is deleted while a client walks the pages).
    pub fn after_list_page(
        &self,
        route: &str,
        page: usize,
        action: impl FnOnce(&SimState) + Send + 'static,
    ) {
        self.at(Moment::AfterListPage { route: route.to_owned(), page }, action);
    }

    /// Runs the first action queued for `moment`, if any (call with no lock held).
    pub(crate) fn run(&self, state: &SimState, moment: &Moment) {
        let action = {
            let mut queued = self.lock();
            queued.iter().position(|(m, _)| m == moment).map(|i| queued.remove(i).1)
        };
        if let Some(action) = action {
            action(state);
        }
    }
}
