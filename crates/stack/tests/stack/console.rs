//! The web console (SPEC §14) in a real browser: Debian's headless chromium driven through
//! chromedriver against an in-process dev stack on loopback. Signs in by the printed link
//! and by paste, watches a substrate reach `ready` without a reload, sees a pool-scoped
//! token read only its pool, is sent back to sign-in when its token is revoked, moves
//! through the pools to a pool's page and back and signs out by the keyboard alone, checks
//! the CSP header on every console answer and that no request left loopback, and saves a
//! screenshot of each view under `target/console-screenshots/`.
//!
//! A missing chromium or chromedriver skips these tests, and fails them when services are
//! required (`BC_REQUIRE_SERVICES=1` or `CI=true`; `.ci/run` installs both).

pub(crate) mod webdriver;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bc_domain::model::{Grant, Role, Scope};
use bc_domain::{PoolId, TenantId};
use bc_sim::config::Delays;
use bc_stack::dev::{DEV_TENANT, DevStack};
use bc_stack::testing::{self, Backend, Later, Scratch};
use serde_json::{Value, json};
use webdriver::Browser;

/// How long the simulator takes to make a cluster, on the stack's clock.
const CLUSTER_PROVISION: Duration = Duration::from_secs(30);

fn screenshots() -> PathBuf {
    // `target/tmp` is the test's scratch; the screenshots go beside it, under `target/`.
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("the target directory")
        .join("console-screenshots")
}

fn visible(id: &str) -> String {
    format!("!document.getElementById('{id}').hidden")
}

/// The pool ids the pools view lists.
const LISTED_POOLS: &str =
    "Array.from(document.querySelectorAll('a[data-pool]')).map(a => a.dataset.pool).join(',')";

async fn sign_in_by_paste(browser: &Browser, token: &str) {
    browser
        .js("document.getElementById('signin-tenant').value = ''; document.getElementById('signin-token').value = '';", json!([]))
        .await;
    browser.type_into("#signin-tenant", DEV_TENANT).await;
    // Enter in the token field submits the form: the keyboard path.
    browser.type_into("#signin-token", &format!("{token}\u{E007}")).await;
}

/// Makes pool `name` of `count` nodes of one flavor, with a substrate (a cluster made for
/// it in the simulated DigitalOcean) or without; returns its id.
async fn create_pool(stack: &DevStack, name: &str, substrate: bool, count: u32) -> String {
    let mut policy = json!({"flavors": [{"name": "cpu", "size": "s-2vcpu-4gb", "count": count}]});
    if substrate {
        policy["substrate"] = json!({"kind": "kubernetes", "account": stack.account_id,
                                     "cluster": {"create": {"region": "nyc1"}}});
    }
    let made = stack
        .call("pools.create", json!({"tenantId": DEV_TENANT, "name": name, "policy": policy}))
        .await
        .unwrap_or_else(|e| panic!("pools.create {name}: {e}"));
    made["poolId"].as_str().expect("poolId").to_owned()
}

/// Signs out by the keyboard: Tab to the button, Enter.
async fn sign_out(browser: &Browser) {
    browser.tab_to("#sign-out").await;
    browser.keys("\u{E007}").await;
    browser.wait("the sign-in form", &visible("signin")).await;
    let kept = browser.js("return sessionStorage.getItem('bc.console.token')", json!([])).await;
    assert_eq!(kept, Value::Null, "signing out forgets the token");
}

/// The requests the page sent since the last read (DevTools' `Network.requestWillBeSent`,
/// from chromedriver's performance log): each `{url, method, headers}`.
async fn requests_sent(browser: &Browser) -> Vec<Value> {
    browser
        .log("performance")
        .await
        .iter()
        .filter_map(|e| serde_json::from_str::<Value>(e["message"].as_str()?).ok())
        .filter(|m| m["message"]["method"] == "Network.requestWillBeSent")
        .map(|m| m["message"]["params"]["request"].clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_in_a_real_browser() {
    let Some((chromium, driver)) = webdriver::tools() else { return };
    let scratch = Scratch::new("bc-console");
    let mut options = testing::options(Backend::Sqlite, scratch.path()).await.expect("sqlite");
    let later = Arc::new(Later::default());
    options.clock = Some(later.clone());
    options.delays = Delays { cluster_provision: CLUSTER_PROVISION, ..Delays::fast() };
    let mut again = options.clone();
    let stack = DevStack::start(options).await.expect("dev stack");
    again.listen = stack.api_url.trim_start_matches("http://").parse().expect("the API's address");
    let shots = screenshots();

    // Every console answer carries the policy, the page and each asset alike.
    let http = reqwest::Client::builder().no_proxy().build().expect("client");
    let paths = std::iter::once("/console".to_owned())
        .chain(::bc_api::console::asset_names().map(|n| format!("/console/{n}")))
        .chain(["/console/no-such-file.js".to_owned()]);
    for path in paths {
        let r = http.get(format!("{}{path}", stack.api_url)).send().await.expect(&path);
        let csp =
            r.headers().get("content-security-policy").map(|v| v.to_str().unwrap().to_owned());
        assert_eq!(csp.as_deref(), Some("default-src 'self'"), "{path}");
    }

    let web = create_pool(&stack, "web", true, 2).await;
    let batch = create_pool(&stack, "batch", false, 1).await;
    stack
        .call(
            "loadBalancers.create",
            json!({"tenantId": DEV_TENANT, "poolId": web, "providerAccountId": stack.account_id,
                   "name": "web", "type": "regional", "region": "nyc1",
                   "forwardingRules": [{"entryProtocol": "http", "entryPort": 80, "targetProtocol": "http", "targetPort": 8080}],
                   "targets": {"tag": "web"}}),
        )
        .await
        .expect("loadBalancers.create");
    // An autopilot cluster on the simulated GKE account (issue 30: clusters, standard and
    // autopilot).
    let autopilot = stack
        .call(
            "kubernetesClusters.create",
            json!({"tenantId": DEV_TENANT, "providerAccountId": stack.gke_account_id,
                   "name": "auto", "region": "us-central1", "version": "latest",
                   "mode": "autopilot", "nodePools": []}),
        )
        .await
        .expect("kubernetesClusters.create (autopilot)");
    let autopilot = autopilot["clusterId"].as_str().expect("clusterId").to_owned();

    let browser = Browser::start(&chromium, &driver, 1440, 900).await;
    let mut requests = Vec::new();

    // Sign-in by the printed link: the token leaves the address bar at once.
    let link = stack.console_link();
    assert!(
        stack.banner().contains(&format!("console        {link}\n")),
        "bc-api dev prints the link"
    );
    assert!(link.starts_with(&format!("{}/console#token=bc_", stack.api_url)), "{link}");
    browser.goto(&link).await;
    browser.wait("signed in by the link", &format!("{} && ({LISTED_POOLS})", visible("nav"))).await;
    let url = browser.url().await;
    assert!(!url.contains("token"), "the token left the address bar: {url}");
    assert_eq!(url, format!("{}/console#/pools", stack.api_url));
    let kept = browser
        .js("return [sessionStorage.getItem('bc.console.token'), document.cookie]", json!([]))
        .await;
    assert_eq!(kept, json!([stack.token, ""]), "the token is in sessionStorage, never a cookie");
    let listed = browser
        .wait(
            "both pools",
            &format!("({LISTED_POOLS}).split(',').length === 2 && ({LISTED_POOLS})"),
        )
        .await;
    assert_eq!(listed, json!(format!("{web},{batch}")));
    browser
        .wait("the event stream", "document.getElementById('live').dataset.state === 'live'")
        .await;
    browser.screenshot(&shots.join("pools.png")).await;

    // The pool's page: the substrate is not ready (its cluster waits for the test's
    // clock), then reaches `ready` with its nodes joined, live, in the same document.
    browser.click(&format!("a[data-pool='{web}']")).await;
    let before = browser
        .wait(
            "the substrate before ready",
            "document.querySelector('#substrate-state .badge')?.dataset.state",
        )
        .await;
    assert!(
        before == "pending" || before == "provisioning",
        "before the cluster is made: {before}"
    );
    browser.js("window.sameDocument = 'yes'", json!([])).await;
    later.advance(CLUSTER_PROVISION + Duration::from_secs(1));
    browser
        .wait(
            "the substrate ready with its two nodes joined, without a reload",
            "document.querySelector('#substrate-state .badge')?.dataset.state === 'ready' \
             && document.getElementById('substrate-nodes').textContent.startsWith('2 joined')",
        )
        .await;
    let same = browser
        .js("return [window.sameDocument, document.body.dataset.lastEventId || '']", json!([]))
        .await;
    assert_eq!(same[0], "yes", "the page was not reloaded");
    assert_ne!(same[1], "", "the change came by the event stream");
    browser
        .wait(
            "the load balancer ready on the pool's page",
            "document.querySelector('#pool-lbs [data-state=ready]')",
        )
        .await;
    browser
        .wait(
            "the pool's events",
            "document.querySelectorAll('#pool-events .timeline li').length > 1",
        )
        .await;
    browser.wait("the node pool", "document.querySelector('#pool-nodepools table')").await;
    // Tall enough for the whole pool page (README shows it).
    browser.resize(1280, 2000).await;
    browser.wait("the taller window", "window.innerHeight > 1500").await;
    browser.screenshot(&shots.join("pool.png")).await;
    browser.resize(360, 900).await;
    browser.wait("the narrow layout", "window.innerWidth <= 400").await;
    browser.screenshot(&shots.join("pool-360.png")).await;
    browser.click("#nav a[data-view='pools']").await;
    browser.wait("the pools at 360 px", &format!("({LISTED_POOLS}) === '{web},{batch}'")).await;
    let wide = browser.js("return document.documentElement.scrollWidth", json!([])).await;
    assert!(
        wide.as_u64().is_some_and(|w| w <= 360),
        "the pools page scrolls sideways at 360 px: {wide}"
    );
    browser.screenshot(&shots.join("pools-360.png")).await;
    browser.click(&format!("a[data-pool='{web}']")).await;
    browser.wait("the pool again", "document.querySelector('#substrate-state .badge')").await;
    browser.resize(1440, 900).await;

    // Every other view, by its link.
    // The clusters view shows the autopilot cluster ready, with no node pools.
    let clusters = format!(
        "document.querySelector('[data-cluster] table') \
         && document.querySelector(\"[data-cluster='{autopilot}'] h2 .badge[data-state=ready]\") \
         && document.querySelector(\"[data-cluster='{autopilot}']\").textContent.includes('Autopilot:')"
    );
    for (view, ready) in [
        ("clusters", clusters.as_str()),
        ("load-balancers", "document.querySelector('#view [data-state=ready]')"),
        ("accounts", "document.querySelector('#view table')"),
        ("billing", "document.querySelector('#view figure.chart rect')"),
        ("events", "document.querySelectorAll('#view .timeline li').length > 2"),
    ] {
        browser.click(&format!("#nav a[data-view='{view}']")).await;
        browser.wait(&format!("the {view} view"), ready).await;
        let cmd = browser
            .js("return document.querySelector('#view [data-cmd]')?.dataset.cmd", json!([]))
            .await;
        assert!(
            cmd.as_str().is_some_and(|c| c.starts_with("bc ")),
            "{view} shows its bc command: {cmd}"
        );
        browser.screenshot(&shots.join(format!("{view}.png"))).await;
    }

    // The pools, filtered by name and by substrate state.
    browser.click("#nav a[data-view='pools']").await;
    browser.wait("the pools view", &format!("({LISTED_POOLS}) === '{web},{batch}'")).await;
    browser.type_into("#pool-filter", "bat").await;
    browser.wait("only batch by name", &format!("({LISTED_POOLS}) === '{batch}'")).await;
    browser.type_into("#pool-filter", "\u{E003}\u{E003}\u{E003}").await;
    browser.wait("both again", &format!("({LISTED_POOLS}) === '{web},{batch}'")).await;
    browser.click("#state-filter option[value='ready']").await;
    browser.wait("only the ready one", &format!("({LISTED_POOLS}) === '{web}'")).await;
    browser.click("#state-filter option[value='none']").await;
    browser
        .wait("only the one without substrate", &format!("({LISTED_POOLS}) === '{batch}'"))
        .await;
    browser.click("#state-filter option[value='']").await;
    browser.wait("both again", &format!("({LISTED_POOLS}) === '{web},{batch}'")).await;

    // The keyboard alone: Tab to a pool, Enter opens it, Tab to the navigation's pools
    // and Enter goes back (signing out by keyboard is sign_out's); each focus visible.
    browser.tab_to(&format!("a[data-pool='{web}']")).await;
    browser.keys("\u{E007}").await;
    browser.wait("the pool's page by keyboard", &format!("location.hash.includes('{web}')")).await;
    browser.tab_to("#nav a[data-view='pools']").await;
    browser.keys("\u{E007}").await;
    browser
        .wait("the pools again by keyboard", &format!("({LISTED_POOLS}) === '{web},{batch}'"))
        .await;

    // Nothing left loopback, and the page broke no rule of its policy.
    requests.extend(requests_sent(&browser).await);
    let urls: Vec<String> =
        requests.iter().filter_map(|r| r["url"].as_str().map(str::to_owned)).collect();
    assert!(urls.iter().any(|u| u.contains("/api/compute/events/stream")), "{urls:?}");
    // The browser's own pages (its first blank tab) are not requests on the network.
    let internal = ["chrome:", "chrome-untrusted:", "about:", "data:", "blob:"];
    for u in urls.iter().filter(|u| !internal.iter().any(|p| u.starts_with(p))) {
        assert!(u.starts_with(&format!("{}/", stack.api_url)), "a request left loopback: {u}");
    }
    let console = browser.log("browser").await;
    let refused: Vec<&Value> = console
        .iter()
        .filter(|e| e["message"].as_str().is_some_and(|m| m.contains("Content Security Policy")))
        .collect();
    assert!(refused.is_empty(), "the policy refused something: {refused:?}");

    // A dropped stream: the server stops (with the page connected) and starts again on
    // the same port; the page reconnects with the last id it saw as Last-Event-ID, and
    // what happened since appears without a reload.
    let seen = browser.js("return document.body.dataset.lastEventId", json!([])).await;
    let seen = seen.as_str().expect("the page saw events").to_owned();
    tokio::time::timeout(Duration::from_secs(60), stack.stop())
        .await
        .expect("the server stops while a console holds its event stream open");
    browser
        .wait(
            "the page seeing the drop",
            "document.getElementById('live').dataset.state === 'reconnecting'",
        )
        .await;
    let stack = DevStack::start(again).await.expect("the dev stack again");
    browser
        .wait("the stream again", "document.getElementById('live').dataset.state === 'live'")
        .await;
    requests.extend(requests_sent(&browser).await);
    let resumed: Vec<&Value> = requests
        .iter()
        .filter(|r| r["url"].as_str().is_some_and(|u| u.contains("/events/stream")))
        .collect();
    let sent: Vec<&str> = resumed
        .iter()
        .filter_map(|r| {
            r["headers"]
                .as_object()?
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case("last-event-id"))?
                .1
                .as_str()
        })
        .collect();
    assert!(sent.contains(&seen.as_str()), "a reconnect sent Last-Event-ID {seen}: {resumed:?}");
    browser.js("window.sameDocument = 'still'", json!([])).await;
    let late = create_pool(&stack, "late", true, 1).await;
    browser.wait("the new pool, live", &format!("({LISTED_POOLS}).includes('{late}')")).await;
    assert_eq!(browser.js("return window.sameDocument", json!([])).await, "still");

    // Sign-in by paste with a token that may read one pool: it sees that pool only.
    sign_out(&browser).await;
    let tenant = TenantId::parse(DEV_TENANT).expect("tenant");
    let scope = Scope::Pool(PoolId::parse(&web).expect("pool id"));
    let grants = vec![Grant { role: Role::Viewer, scope, tenant_id: Some(tenant.clone()) }];
    let store = stack.adapters.store.clone();
    let (_, scoped) =
        bc_stack::tokens::create(store.as_ref(), stack.adapters.clock.as_ref(), grants)
            .await
            .expect("a scoped token");
    sign_in_by_paste(&browser, &scoped).await;
    browser.wait("signed in by paste", &format!("{} && ({LISTED_POOLS})", visible("nav"))).await;
    assert_eq!(
        browser.js(&format!("return {LISTED_POOLS}"), json!([])).await,
        json!(web),
        "only its pool"
    );
    browser.screenshot(&shots.join("scoped-viewer.png")).await;

    // A wrong token: the API's message, and the form again.
    sign_out(&browser).await;
    sign_in_by_paste(&browser, "bc_not-a-token").await;
    let message = browser
        .wait("the API's refusal", "document.getElementById('signin-error').textContent")
        .await;
    assert!(message.as_str().is_some_and(|m| m.contains("UNAUTHENTICATED")), "{message}");

    // A revoked token: its stream ends and the page goes back to sign-in, saying why.
    let grants = vec![Grant {
        role: Role::Viewer,
        scope: Scope::Tenant(tenant),
        tenant_id: Some(TenantId::parse(DEV_TENANT).unwrap()),
    }];
    let (id, viewer) =
        bc_stack::tokens::create(store.as_ref(), stack.adapters.clock.as_ref(), grants)
            .await
            .expect("a viewer token");
    sign_in_by_paste(&browser, &viewer).await;
    browser
        .wait(
            "the viewer's event stream",
            "document.getElementById('live').dataset.state === 'live'",
        )
        .await;
    bc_stack::tokens::revoke(store.as_ref(), stack.adapters.clock.as_ref(), &id)
        .await
        .expect("revoke");
    let message = browser
        .wait(
            "back to sign-in after revocation",
            &format!(
                "{} && document.getElementById('signin-error').textContent",
                visible("signin")
            ),
        )
        .await;
    assert!(message.as_str().is_some_and(|m| m.contains("UNAUTHENTICATED")), "{message}");
    assert_eq!(
        browser.js("return sessionStorage.getItem('bc.console.token')", json!([])).await,
        Value::Null
    );
    browser.screenshot(&shots.join("signed-out.png")).await;

    browser.close().await;
    stack.stop().await;
}
