//! Cedar decision time per request (`cargo xtask bench authz`): the authorizer as the API
//! calls it, on a load balancer's 4-level scope chain, for tokens holding 1, 5 and 50
//! grants (one on the chain, the others elsewhere in the tenant), and the readable scope of
//! a list for a token with 5 scoped grants. Prints median and p99 in microseconds.

use std::hint::black_box;
use std::time::Instant;

use bc_api::authz::{CedarAuthorizer, readable_scope};
use bc_domain::model::{Grant, Role, Scope};
use bc_domain::ports::{Authorizer, Permission};
use bc_domain::{LoadBalancerId, PoolId, ProviderAccountId, TenantId, TokenId};

const ITERATIONS: usize = 20_000;

/// Median and p99 of `f`'s time, in microseconds.
fn measure(mut f: impl FnMut()) -> (f64, f64) {
    for _ in 0..ITERATIONS / 10 {
        f();
    }
    let mut samples: Vec<f64> = (0..ITERATIONS)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    (samples[samples.len() / 2], samples[samples.len() * 99 / 100])
}

fn main() {
    let authorizer = CedarAuthorizer::new();
    let tenant = TenantId::parse("acme").expect("tenant");
    let token = TokenId::generate(1, 1);
    let account = ProviderAccountId::generate(2, 2);
    let lb = LoadBalancerId::generate(3, 3);
    let chain = [
        Scope::LoadBalancer(lb.clone()),
        Scope::ProviderAccount(account.clone()),
        Scope::Tenant(tenant.clone()),
        Scope::System,
    ];
    let elsewhere = |i: u128| Grant {
        role: Role::Editor,
        scope: Scope::Pool(PoolId::generate(10, i)),
        tenant_id: Some(tenant.clone()),
    };
    let on_chain = Grant {
        role: Role::Viewer,
        scope: Scope::Tenant(tenant.clone()),
        tenant_id: Some(tenant.clone()),
    };
    println!("Cedar decision per request ({ITERATIONS} iterations, release build)");
    println!("| case | median µs | p99 µs |");
    println!("|---|---|---|");
    for n in [1u128, 5, 50] {
        let grants: Vec<Grant> =
            std::iter::once(on_chain.clone()).chain((1..n).map(elsewhere)).collect();
        let (p50, p99) = measure(|| {
            let d = authorizer.authorize(&token, &grants, Permission::LoadBalancersRead, &chain);
            assert!(black_box(d).is_allowed());
        });
        println!("| allow, {n} grant(s), 4-level chain | {p50:.1} | {p99:.1} |");
        let (p50, p99) = measure(|| {
            let d = authorizer.authorize(&token, &grants, Permission::LoadBalancersManage, &chain);
            assert!(!black_box(d).is_allowed());
        });
        println!("| deny, {n} grant(s), 4-level chain | {p50:.1} | {p99:.1} |");
    }
    let scoped: Vec<Grant> = (0..5u128)
        .map(|i| Grant {
            role: Role::Viewer,
            scope: Scope::LoadBalancer(LoadBalancerId::generate(20, i)),
            tenant_id: Some(tenant.clone()),
        })
        .collect();
    let (p50, p99) = measure(|| {
        let s = readable_scope(
            &authorizer,
            &token,
            &scoped,
            Permission::LoadBalancersRead,
            &tenant,
            None,
        );
        black_box(s);
    });
    println!("| list readable scope, 5 scoped grants | {p50:.1} | {p99:.1} |");
}
