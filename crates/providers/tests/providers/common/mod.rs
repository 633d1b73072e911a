//! The DigitalOcean adapter over the simulator's served HTTP face: the one builder the
//! adapter tests share (the simulator side is `bc_sim::testing::Served`), and the one
//! way they bring a cluster to running through any provider's adapter.
//!
//! Invariant: the adapter never sleeps on its token bucket in tests — a wait is reported
//! as `RateLimited` instead — and reads the simulator's clock.

#![allow(dead_code)] // Each test binary uses its own part of this module.

use bc_domain::model::SecretString;
use bc_domain::ports::{CreateClusterRequest, KubernetesProvider, ProviderClusterState};
use bc_providers::digitalocean::{DigitalOcean, DigitalOceanConfig};
use bc_sim::config::RateLimits;
use bc_sim::testing::{Served, TEST_TOKEN};

/// The adapter settings for a server at `base_url`: DigitalOcean's limits as the local
/// budget (whatever the simulator enforces: the tests of its limits need the two to
/// differ), with a bucket that never waits.
pub fn config_for(base_url: &str) -> DigitalOceanConfig {
    bc_sim::testing::adapter_config(base_url, &RateLimits::default())
}

/// The adapter settings for `served`.
pub fn config(served: &Served) -> DigitalOceanConfig {
    config_for(&served.server.url())
}

/// The adapter of the default account.
pub fn adapter(served: &Served) -> DigitalOcean {
    adapter_with(served, config(served), TEST_TOKEN)
}

/// The adapter of account `token` with `config`.
pub fn adapter_with(served: &Served, config: DigitalOceanConfig, token: &str) -> DigitalOcean {
    DigitalOcean::new(config, &SecretString::new(token), served.clock.clone()).expect("adapter")
}

/// Creates cluster `req` through `provider` and steps the simulator 30 s at a time until
/// the provider reports it running (at most 20 steps); its id.
pub async fn running_cluster(
    w: &Served,
    provider: &dyn KubernetesProvider,
    req: &CreateClusterRequest,
) -> String {
    let made = provider.create_cluster(req).await.expect("create");
    for _ in 0..20 {
        if provider.get_cluster(&made.id).await.expect("get").state == ProviderClusterState::Running
        {
            return made.id;
        }
        w.step(30);
    }
    panic!("the cluster did not run within 20 steps");
}
