//! What a substrate keeps inside its cluster, through the cluster's Kubernetes API: the
//! pool's Namespace, ServiceAccount, join Secret and DaemonSet applied, its Nodes
//! listed for join accounting (a joined node the cluster stopped listing ends after a
//! grace, its credential with it), and its objects deleted at teardown.
//!
//! Invariants: **ownership first** — every object is read before it is applied or
//! deleted; one without our label, or with another pool's, is never touched and puts
//! the substrate in `error` naming it (it recovers on the run after the tenant removes
//! it); **secrets stay put** — the join token exists in plaintext only in the Secret
//! manifest sent to the cluster; the store keeps its hash, and the Secret is compared
//! through digests.

use std::collections::BTreeSet;

use bc_domain::Timestamp;
use bc_domain::model::JoinToken;
use bc_domain::name::LABEL_SUBSTRATE_POOL;
use bc_domain::policy::Flavor;
use bc_domain::ports::cluster::ownership;
use bc_domain::ports::{
    ApplyOutcome, ClusterClient, ClusterError, ClusterSession, DeleteOutcome, ObjectKind,
    Ownership, PAGE_SIZE_MAX, PageRequest, UnitOfWork, Write,
};
use bc_domain::rules::join::waiting_to_join;
use bc_domain::token::{join_token, sha256_hex};

use super::decide::{Progress, UNLISTED_NODE_GRACE, nodes_to_end};
use super::{Run, cluster_failure, objects};
use crate::reconciler::ReconcileError;

impl Run<'_> {
    /// The pool's Namespace, ServiceAccount, join Secret and DaemonSet, each applied
    /// only when it is not in place, never over someone else's.
    pub(super) async fn objects(
        &self,
        session: &ClusterSession,
        flavors: &[Flavor],
        waiting: &mut Vec<String>,
    ) -> Result<Option<Progress>, ReconcileError> {
        let pool = self.pool_id();
        let owner = objects::owner(&pool);
        let settings = &self.deps.settings;
        let mut applied = Vec::new();
        for kind in objects::APPLY_ORDER {
            let r = objects::object_ref(&pool, kind);
            let meta = match session.read_object(&r).await {
                Ok(m) => m,
                Err(e) => return cluster_failure(e).map(Some),
            };
            if let Some(m) = &meta
                && let Ownership::Foreign(o) = ownership(&m.labels, &owner)
            {
                return Ok(Some(Progress::error(objects::foreign_message(
                    &r,
                    o.as_deref(),
                    &pool,
                ))));
            }
            let object = match kind {
                ObjectKind::Secret => {
                    let live = match meta.as_ref().and_then(objects::secret_token_digest) {
                        Some(d) => self
                            .deps
                            .store
                            .join_token_find(&d)
                            .await?
                            .filter(|t| t.pool_id == pool)
                            .map(|t| t.token_hash),
                        None => None,
                    };
                    if meta.as_ref().is_some_and(|m| {
                        objects::secret_in_place(m, &pool, live.as_deref(), &settings.public_url)
                    }) {
                        continue;
                    }
                    // Gone, altered, or holding a revoked token: a new token, its hash
                    // stored (the old revoked) before the Secret carries it.
                    let token = join_token(self.r.entropy.bytes32());
                    let uow = UnitOfWork::new()
                        .write(Write::RevokeJoinTokens { pool_id: pool.clone(), at: self.now })
                        .write(Write::InsertJoinToken(JoinToken {
                            pool_id: pool.clone(),
                            token_hash: sha256_hex(token.expose().as_bytes()),
                            created_at: self.now,
                            revoked_at: None,
                        }));
                    self.commit(uow).await?;
                    objects::join_secret(&pool, &token, &settings.public_url)
                }
                ObjectKind::Namespace => objects::namespace(&pool),
                ObjectKind::ServiceAccount => objects::service_account(&pool),
                ObjectKind::DaemonSet => {
                    objects::daemonset(&pool, flavors, &settings.bcd_image, &settings.public_url)
                }
            };
            // Compared as a server answers it (never as sent: a real server leaves out
            // empty `omitempty` fields such as `tolerations: []`).
            if kind != ObjectKind::Secret
                && meta.as_ref().is_some_and(|m| {
                    bc_domain::ports::object_in_place(kind, &object.manifest, &m.content)
                })
            {
                continue;
            }
            self.act.ensure_held(self.deps).await?;
            // Decided on the read above (ownership first), not on a second read.
            match session.apply_owned_after(&object, &owner, meta).await {
                Ok(ApplyOutcome::Foreign { owner: o }) => {
                    return Ok(Some(Progress::error(objects::foreign_message(
                        &r,
                        o.as_deref(),
                        &pool,
                    ))));
                }
                Ok(_) => applied.push(r.to_string()),
                Err(e) => return cluster_failure(e).map(Some),
            }
        }
        if !applied.is_empty() {
            waiting.push(format!("applied {}", applied.join(", ")));
        }
        Ok(None)
    }

    /// Lists the pool's Nodes and accounts for their joins.
    pub(super) async fn nodes(
        &mut self,
        session: &ClusterSession,
    ) -> Result<Option<Progress>, ReconcileError> {
        let pool = self.pool_id();
        let listed = match session.list_nodes(&format!("{LABEL_SUBSTRATE_POOL}={pool}")).await {
            Ok(n) => n,
            Err(e) => return cluster_failure(e).map(Some),
        };
        let listed: Vec<String> = listed.into_iter().map(|n| n.name).collect();
        // Only live nodes are read: those the cluster stopped listing end after a grace,
        // so what is paged through stays about the size of the cluster.
        let mut live = Vec::new();
        let mut page = PageRequest::first(PAGE_SIZE_MAX);
        loop {
            let p = self.deps.store.node_list_by_pool(&pool, &page).await?;
            let next = p.next_request(PAGE_SIZE_MAX);
            live.extend(p.items);
            match next {
                Some(next) => page = next,
                None => break,
            }
        }
        let names: BTreeSet<&str> = listed.iter().map(String::as_str).collect();
        let ends = nodes_to_end(&live, &names, self.now, UNLISTED_NODE_GRACE);
        if !ends.is_empty() {
            let mut uow = UnitOfWork::new();
            for n in &ends {
                uow = uow.write(Write::EndNode {
                    node_id: n.node_id.clone(),
                    credential_hash: n.credential_hash.clone(),
                    at: self.now,
                });
            }
            self.commit(uow).await?;
        }
        let mut joined = BTreeSet::new();
        let mut last_join: Option<Timestamp> = None;
        for n in &live {
            if listed.contains(&n.node_name) {
                last_join = last_join.max(Some(n.joined_at));
            }
            joined.insert(n.node_name.clone());
        }
        self.join =
            Some(waiting_to_join(&listed, &joined, self.sub.waiting_to_join, last_join, self.now));
        Ok(None)
    }

    /// Deletes our DaemonSet, Secret and ServiceAccount, then our Namespace unless
    /// something of someone else's is in it (which deleting the Namespace would take
    /// along): one of our names held by a foreign object (`foreign`, the substrate's
    /// error), or — when `look_inside`, since a Namespace in a cluster being deleted goes
    /// with it anyway — any other object this system did not make (`kept`, named in an
    /// event, the Namespace left in place).
    pub(super) async fn delete_objects(
        &self,
        session: &ClusterSession,
        look_inside: bool,
    ) -> Result<Result<Removed, ClusterError>, ReconcileError> {
        let pool = self.pool_id();
        let owner = objects::owner(&pool);
        let mut removed = Removed::default();
        for kind in objects::APPLY_ORDER.iter().rev() {
            let r = objects::object_ref(&pool, *kind);
            if *kind == ObjectKind::Namespace {
                if removed.foreign.is_some() {
                    break;
                }
                if look_inside {
                    let inside = match session.list_namespace(&r.name).await {
                        Ok(inside) => inside,
                        Err(e) => return Ok(Err(e)),
                    };
                    let foreign = objects::foreign_in_namespace(&pool, &inside);
                    if !foreign.is_empty() {
                        removed.kept = Some(objects::namespace_kept_message(&pool, &foreign));
                        break;
                    }
                }
            }
            self.act.ensure_held(self.deps).await?;
            match session.delete_owned(&r, &owner).await {
                Ok(DeleteOutcome::Foreign { owner: o }) => {
                    removed
                        .foreign
                        .get_or_insert_with(|| objects::foreign_message(&r, o.as_deref(), &pool));
                }
                Ok(_) => {}
                Err(e) => return Ok(Err(e)),
            }
        }
        Ok(Ok(removed))
    }
}

/// What a teardown's deletion of our objects left in place, and why.
#[derive(Debug, Default)]
pub(super) struct Removed {
    /// One of our names is held by an object we did not make: the substrate's error.
    pub foreign: Option<String>,
    /// The Namespace stays, holding objects we did not make: the event's message.
    pub kept: Option<String>,
}
