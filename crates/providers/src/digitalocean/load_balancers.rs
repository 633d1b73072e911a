//! Load balancers through the [`LoadBalancerProvider`] port (research/digitalocean.md §5).
//!
//! Invariant: create and update send the same whole object (`wire::load_balancer_body`),
//! because a PUT resets every field it leaves out; a "busy" 403 is `Transient`.

use async_trait::async_trait;
use bc_domain::ports::{
    LoadBalancerProvider, LoadBalancerRequest, ProviderLoadBalancer, ProviderResult,
};
use reqwest::Method;

use super::DigitalOcean;
use super::kubernetes::seg;
use super::wire::{LoadBalancerEnvelope, WireLoadBalancer, load_balancer_body};

fn lb_path(id: &str) -> String {
    format!("/v2/load_balancers/{}", seg(id))
}

#[async_trait]
impl LoadBalancerProvider for DigitalOcean {
    async fn list(&self) -> ProviderResult<Vec<ProviderLoadBalancer>> {
        let lbs = self.list_all("/v2/load_balancers", |l: &WireLoadBalancer| &l.id).await?;
        Ok(lbs.into_iter().map(WireLoadBalancer::into_port).collect())
    }

    async fn get(&self, id: &str) -> ProviderResult<ProviderLoadBalancer> {
        let lb: LoadBalancerEnvelope = self.transport.get_json(&lb_path(id), &[]).await?;
        Ok(lb.load_balancer.into_port())
    }

    async fn create(&self, req: &LoadBalancerRequest) -> ProviderResult<ProviderLoadBalancer> {
        let body = load_balancer_body(req);
        let lb: LoadBalancerEnvelope =
            self.transport.send_json(Method::POST, "/v2/load_balancers", &body).await?;
        Ok(lb.load_balancer.into_port())
    }

    async fn update(
        &self,
        id: &str,
        req: &LoadBalancerRequest,
    ) -> ProviderResult<ProviderLoadBalancer> {
        let body = load_balancer_body(req);
        let lb: LoadBalancerEnvelope =
            self.transport.send_json(Method::PUT, &lb_path(id), &body).await?;
        Ok(lb.load_balancer.into_port())
    }

    async fn delete(&self, id: &str) -> ProviderResult<()> {
        self.transport.send(Method::DELETE, &lb_path(id), &[], None).await?;
        Ok(())
    }
}
