//! Issue 20, item 10: the modules of bc-api and bc-domain import downward only. In bc-api
//! the services (`ctx`) sit below the method framework (`registry`, with the facts of
//! bc-api-types), and the contract's registry instance (`methods::registry`) above both;
//! the stream takes its constants from bc-api-types, not from `methods::events`. In bc-domain the error module imports nothing of
//! the crate, each port's error living beside its port. A circle anywhere in either
//! crate fails this test with the modules on it.

use std::path::Path;

use bc_testkit::layers::{module_cycles, module_graph};

fn src(krate: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(krate).join("src")
}

#[test]
fn bc_api_and_bc_domain_modules_import_in_no_circle() {
    for krate in ["api", "domain"] {
        let cycles = module_cycles(&src(krate));
        assert!(cycles.is_empty(), "crates/{krate}: modules importing one another: {cycles:?}");
    }
    // The layers the issue names, edge by edge.
    let api = module_graph(&src("api"));
    for (below, above) in [("ctx", "registry"), ("ctx", "methods"), ("write", "methods")] {
        assert!(!api[below].contains(above), "{below} imports {above}");
    }
    assert!(!api["stream"].contains("methods::events"), "the stream reaches into methods::events");
    let domain = module_graph(&src("domain"));
    assert!(domain["error"].is_empty(), "bc-domain's error imports {:?}", domain["error"]);
}
