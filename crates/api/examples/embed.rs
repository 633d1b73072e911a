//! Embedding: another Rust service mounts the bc-api router under its own axum app (at
//! `/compute`) and runs the reconcilers in a tokio runtime of its own on a store handle
//! of its own — both on one SQLite file, both woken by one work notify. The provider and
//! cluster ports are the DigitalOcean and kube adapters of `bc-providers`, pointed here at
//! a simulated cloud on its stepped clock (`bc_sim::testing::Cloud`, the entry for tests
//! with mocked providers); a real service points them at DigitalOcean on the wall clock
//! (as `bc_stack::wire` does).
//!
//! Run it: `cargo run -p bc-api --example embed` (it makes a token, answers one call of
//! each app through the combined router, then shuts both down). Nothing is global: the
//! API is a value built from its ports, the runtime another.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::Request;
use axum::routing::get;
use bc_api::{Api, Ports, Settings};
use bc_domain::model::{ApiToken, Grant, Role, Scope};
use bc_domain::ports::{Clock, Store, UnitOfWork, Write};
use bc_domain::token::ApiTokenSecret;
use bc_reconcile::clusters::ClusterReconciler;
use bc_reconcile::node_pools::NodePoolReconciler;
use bc_reconcile::shared::OsEntropy;
use bc_reconcile::substrates::SubstrateReconciler;
use bc_reconcile::{Deps, LoadBalancers, Reconciler, Runtime, RuntimeConfig, UnsharedObserver};
use bc_sim::testing::Cloud;
use bc_store::{AeadSecretBox, SqlStore};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt as _;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("bc-embed-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let url = format!("sqlite://{}?mode=rwc", dir.join("bc.db").display());

    // The service's own wiring: one key, one simulated cloud and its clock.
    let cloud = Cloud::start().await;
    let clock: Arc<dyn Clock> = cloud.clock.clone();
    let secrets = Arc::new(AeadSecretBox::new(&[42u8; 32])?);
    let providers = cloud.providers(secrets.clone());
    let clusters = cloud.clusters();
    let work = Arc::new(Notify::new());

    // The API on its store handle, mounted under /compute beside the service's routes.
    let api_store: Arc<dyn Store> = Arc::new(SqlStore::connect(&url).await?);
    let api = Api::new(Ports {
        store: api_store.clone(),
        clock: clock.clone(),
        providers: providers.clone(),
        clusters: clusters.clone(),
        secrets: secrets.clone(),
    })
    .settings(Settings::default())
    .work_notify(work.clone())
    .router();
    let app: Router =
        Router::new().route("/", get(|| async { "my service" })).nest("/compute", api);

    // The reconcilers on another store handle, in a tokio runtime of their own.
    let stop = CancellationToken::new();
    let reconcilers = {
        let (url, clock, stop, work) = (url.clone(), clock.clone(), stop.clone(), work.clone());
        std::thread::spawn(move || -> Result<(), String> {
            let rt = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
            rt.block_on(async move {
                let store: Arc<dyn Store> =
                    Arc::new(SqlStore::connect(&url).await.map_err(|e| e.to_string())?);
                let deps = Deps {
                    store,
                    observer: Arc::new(UnsharedObserver::new(providers, clock.clone())),
                    clusters,
                    clock,
                    settings: bc_reconcile::Settings {
                        public_url: "http://127.0.0.1:8080/compute".into(),
                        bcd_image: "ghcr.io/better-compute/bcd:latest".into(),
                    },
                };
                let entropy = Arc::new(OsEntropy);
                let kinds: Vec<Arc<dyn Reconciler>> = vec![
                    Arc::new(SubstrateReconciler::new(entropy.clone())),
                    Arc::new(ClusterReconciler::new(entropy.clone())),
                    Arc::new(NodePoolReconciler::new(entropy)),
                    Arc::new(LoadBalancers::new(Default::default())),
                ];
                let runtime = Runtime::new(deps, kinds, RuntimeConfig::new("embedded-1"))
                    .map_err(|e| e.to_string())?
                    .with_work_notify(work);
                Arc::new(runtime).run(stop).await;
                Ok(())
            })
        })
    };

    // An operator token, then one call to each app through the combined router.
    let secret = ApiTokenSecret::generate(rand::random());
    let token = ApiToken {
        token_id: bc_domain::TokenId::generate(1, rand::random()),
        token_hash: secret.hash(),
        grants: vec![Grant { role: Role::Operator, scope: Scope::System, tenant_id: None }],
        created_at: clock.now(),
        revoked_at: None,
    };
    api_store.commit(UnitOfWork::new().write(Write::InsertApiToken(token))).await?;
    let own = app.clone().oneshot(Request::get("/").body(Body::empty())?).await?;
    println!("GET / -> {}", own.status());
    let pools = app
        .clone()
        .oneshot(
            Request::post("/compute/api/compute/pools/list")
                .header("authorization", format!("Bearer {}", secret.expose()))
                .header("content-type", "application/json")
                .body(Body::from(r#"{"tenantId":"acme"}"#))?,
        )
        .await?;
    println!("POST /compute/api/compute/pools/list -> {}", pools.status());

    stop.cancel();
    reconcilers.join().map_err(|_| "the reconciler thread panicked")??;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
