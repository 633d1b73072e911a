//! bc-providers: the adapters of the provider and cluster ports — DigitalOcean
//! (`digitalocean`) and Google Kubernetes Engine (`gke`) over reqwest, the registry of
//! both (`registry`), and cluster access over the `kube` crate (`kube`).
//!
//! Invariant: adapters only translate. Every provider failure is classified once, here,
//! into `bc_domain::ProviderError`; no secret (token, kubeconfig) reaches a log line or
//! an error message.

pub mod classify;
pub mod digitalocean;
pub mod gke;
mod http;
pub mod kube;
pub mod registry;

/// What every adapter of this crate declares it offers, one [`ProviderOffer`] per
/// provider (the reference docs' providers page is generated from these).
///
/// [`ProviderOffer`]: bc_domain::ports::ProviderOffer
pub fn offers() -> Vec<bc_domain::ports::ProviderOffer> {
    vec![digitalocean::offer(), gke::offer()]
}

/// Installs ring as rustls's process-wide crypto provider. reqwest is built with
/// `rustls-no-provider` (so no aws-lc), and panics at `Client::build` without one.
/// Idempotent; call before building any HTTP client.
pub fn install_crypto_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}
