//! Authentication and authorization cost per request (`cargo xtask bench authz`):
//!
//! - the Cedar decision as the API asks it, on a load balancer's 4-level scope chain, for
//!   tokens holding 1, 5 and 50 grants (one on the chain, the others elsewhere in the
//!   tenant), allowed and denied, and the readable scope of a list for 5 scoped grants;
//! - the token check (`bc_api::auth::authenticate` on a SQLite file store) for a wrong
//!   token that shares 42 of its 43 characters with a real one, against a wrong token
//!   that shares none: the check hashes the presented token and looks the hash up, so its
//!   time must not depend on how much of a token matches (ratio ≈ 1).
//!
//! `--quick`: three short runs instead of five. Invariant: it measures and emits only
//! (bc_testkit::bench); every figure's samples are per-run medians, the compared cases
//! are measured interleaved in the same runs so that their ratio is paired.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use axum::http::{HeaderMap, HeaderValue, header};
use bc_api::auth::{Authentication, authenticate};
use bc_api::authz::{CedarAuthorizer, readable_scope};
use bc_domain::model::{ApiToken, Grant, Role, Scope};
use bc_domain::ports::{Authorizer, Permission, Store, UnitOfWork, Write};
use bc_domain::token::{API_TOKEN_PREFIX, ApiTokenSecret};
use bc_domain::{LoadBalancerId, PoolId, ProviderAccountId, TenantId, TokenId};
use bc_store::SqlStore;
use bc_store::testing::{self as rows, Backend};
use bc_testkit::bench::{self, Against, Better, Figure, Reference};

/// The benchmark's name in the report.
const BENCH: &str = "authz";

/// Runs and calls per run.
struct Plan {
    runs: usize,
    /// Cedar decisions per case per run.
    decisions: usize,
    /// Token checks per kind of wrong token per run.
    checks: usize,
}

const FULL: Plan = Plan { runs: 5, decisions: 4_000, checks: 2_000 };
const QUICK: Plan = Plan { runs: 3, decisions: 1_000, checks: 500 };

/// The median of `v` (sorted in place).
fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Per run, the median time of `n` calls of each of `fs`, called in turn (interleaved, so
/// that each run of one is paired with a run of the others under the same conditions);
/// per function, its samples in µs.
fn interleaved<const K: usize>(
    plan: &Plan,
    n: usize,
    fs: &mut [&mut dyn FnMut(); K],
) -> [Vec<f64>; K] {
    for f in fs.iter_mut() {
        for _ in 0..n / 10 {
            f();
        }
    }
    let mut out: [Vec<f64>; K] = std::array::from_fn(|_| Vec::new());
    for _ in 0..plan.runs {
        let mut times: [Vec<f64>; K] = std::array::from_fn(|_| Vec::with_capacity(n));
        for _ in 0..n {
            for (k, f) in fs.iter_mut().enumerate() {
                let start = Instant::now();
                f();
                times[k].push(start.elapsed().as_secs_f64() * 1e6);
            }
        }
        for k in 0..K {
            out[k].push(median(&mut times[k]));
        }
    }
    out
}

#[tokio::main]
async fn main() {
    let plan = if bench::quick() { &QUICK } else { &FULL };
    cedar(plan);
    rows::run(Backend::File, |store| token_check(plan, store)).await;
}

/// The Cedar decisions.
fn cedar(plan: &Plan) {
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
    let grants = |n: u128| -> Vec<Grant> {
        std::iter::once(on_chain.clone()).chain((1..n).map(elsewhere)).collect()
    };
    let (one, five, fifty) = (grants(1), grants(5), grants(50));
    let decide = |grants: &[Grant], permission: Permission, allowed: bool| {
        let d = authorizer.authorize(&token, grants, permission, &chain);
        assert_eq!(black_box(d).is_allowed(), allowed);
    };
    let (read, manage) = (Permission::LoadBalancersRead, Permission::LoadBalancersManage);
    let [a1, d1, a5, d5, a50, d50] = interleaved(
        plan,
        plan.decisions,
        &mut [
            &mut || decide(&one, read, true),
            &mut || decide(&one, manage, false),
            &mut || decide(&five, read, true),
            &mut || decide(&five, manage, false),
            &mut || decide(&fifty, read, true),
            &mut || decide(&fifty, manage, false),
        ],
    );
    let figure =
        |name: String, samples: Vec<f64>| Figure::new(BENCH, name, "µs", Better::Lower, samples);
    let allow_one = |samples: &Vec<f64>| Against {
        reference: Reference::Baseline,
        name: "allow, 1 grant (same runs)".into(),
        samples: samples.clone(),
    };
    bench::emit(&figure("Cedar decision: allow, 1 grant, 4-level chain".into(), a1.clone()));
    for (n, allow, deny) in [(1, &a1, &d1), (5, &a5, &d5), (50, &a50, &d50)] {
        if n > 1 {
            bench::emit(
                &figure(format!("Cedar decision: allow, {n} grants, 4-level chain"), allow.clone())
                    .against(allow_one(&a1)),
            );
        }
        bench::emit(
            &figure(format!("Cedar decision: deny, {n} grant(s), 4-level chain"), deny.clone())
                .against(Against {
                    reference: Reference::Baseline,
                    name: format!("allow, {n} grant(s) (same runs)"),
                    samples: allow.clone(),
                }),
        );
    }

    let scoped: Vec<Grant> = (0..5u128)
        .map(|i| Grant {
            role: Role::Viewer,
            scope: Scope::LoadBalancer(LoadBalancerId::generate(20, i)),
            tenant_id: Some(tenant.clone()),
        })
        .collect();
    let [list] = interleaved(
        plan,
        plan.decisions,
        &mut [&mut || {
            let s = readable_scope(&authorizer, &token, &scoped, read, &tenant, None);
            black_box(s);
        }],
    );
    bench::emit(&figure("list readable scope, 5 scoped grants".into(), list));
}

/// A token whose text differs from `real`'s in one character only (the second to last:
/// every one of its 6 bits is part of the 256, so the result is still a well-formed token).
fn sharing_all_but_one(real: &str) -> String {
    let mut chars: Vec<char> = real.chars().collect();
    let i = chars.len() - 2;
    chars[i] = if chars[i] == 'A' { 'B' } else { 'A' };
    chars.into_iter().collect()
}

/// A well-formed token that shares no character after `bc_` with `real`, position by
/// position.
fn sharing_none(real: &str) -> String {
    let real: Vec<char> = real.chars().collect();
    for _ in 0..10_000 {
        let candidate = ApiTokenSecret::generate(rand::random()).expose().to_owned();
        let shares =
            candidate.chars().zip(&real).skip(API_TOKEN_PREFIX.len()).any(|(a, b)| a == *b);
        if !shares {
            return candidate;
        }
    }
    unreachable!("one in two random tokens shares no character with another")
}

/// The token check: a real token stored, then wrong tokens near it and far from it.
async fn token_check(plan: &Plan, store: Arc<SqlStore>) {
    store.enforce_index_plans(false);
    let tenant = rows::tenant("acme");
    let real = ApiTokenSecret::generate(rand::random());
    let record = ApiToken {
        token_id: rows::id(),
        token_hash: real.hash(),
        grants: vec![Grant {
            role: Role::Viewer,
            scope: Scope::Tenant(tenant.clone()),
            tenant_id: Some(tenant),
        }],
        created_at: rows::t(0),
        revoked_at: None,
    };
    store.commit(UnitOfWork::new().write(Write::InsertApiToken(record))).await.expect("token");
    let near = sharing_all_but_one(real.expose());
    let far = sharing_none(real.expose());
    assert!(ApiTokenSecret::parse(&near).is_ok() && ApiTokenSecret::parse(&far).is_ok());
    let headers = |token: &str| {
        let mut h = HeaderMap::new();
        let value = HeaderValue::from_str(&format!("Bearer {token}")).expect("header");
        h.insert(header::AUTHORIZATION, value);
        h
    };
    let cases = [headers(&near), headers(&far), headers(real.expose())];
    let store: &dyn Store = &*store;
    // Warm-up, and a check that each case is what it claims.
    for (i, h) in cases.iter().enumerate() {
        for _ in 0..plan.checks / 10 {
            let ok = authenticate(store, Authentication::ApiToken, h).await.is_ok();
            assert_eq!(ok, i == 2, "case {i}");
        }
    }
    let mut samples = [Vec::new(), Vec::new(), Vec::new()];
    for _ in 0..plan.runs {
        let mut times = [Vec::new(), Vec::new(), Vec::new()];
        for _ in 0..plan.checks {
            for (k, h) in cases.iter().enumerate() {
                let start = Instant::now();
                let r = authenticate(store, Authentication::ApiToken, h).await;
                times[k].push(start.elapsed().as_secs_f64() * 1e6);
                black_box(r.is_ok());
            }
        }
        for k in 0..3 {
            samples[k].push(median(&mut times[k]));
        }
    }
    let [near, far, valid] = samples;
    bench::emit(
        &Figure::new(
            BENCH,
            "token check: wrong token sharing 42 of 43 characters with a real one",
            "µs",
            Better::Lower,
            near,
        )
        .against(Against {
            reference: Reference::Baseline,
            name: "wrong token sharing no character (same runs; ≈ 1 expected)".into(),
            samples: far,
        }),
    );
    bench::emit(&Figure::new(BENCH, "token check: the real token", "µs", Better::Lower, valid));
}
