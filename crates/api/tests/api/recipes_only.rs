//! No test harness writes a unit of work by hand (issue 29 item 10): every write the API
//! makes of a pool, a load balancer, a cluster or a node pool — and the quota booking
//! that goes with a load balancer — is one recipe of `bc_domain::recipes`, called by the
//! handler and by the harnesses alike, so a harness cannot drift from what the API
//! writes (the reconcilers' harness once made pools without their events or default
//! quotas).
//!
//! The rule, precisely: in the test support of every crate and binary (`src/testing.rs`,
//! `src/testing/**`, `crates/testkit/src/**`) and in their tests (`tests/**`), no code
//! (comments removed) names one of the recipes' write constructors ([`RECIPE_WRITES`]).
//! bc-store's own tests are not scanned: they test how the store applies each write.
//! The exceptions are listed in [`ALLOWED`], each with its reason and its exact count (a
//! new use in the same file fails, and so does an entry no longer needed).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The `Write` variants a recipe makes (named without their enum so that this file does
/// not match itself).
const RECIPE_WRITES: [&str; 9] = [
    "InsertPool",
    "UpdatePool",
    "InsertLoadBalancer",
    "UpdateLoadBalancer",
    "BookQuota",
    "InsertCluster",
    "UpdateCluster",
    "InsertNodePool",
    "UpdateNodePool",
];

/// `(file, variant, count, why)`: the writes a test may make by hand, which neither a
/// request nor a reconciler makes — none: the API tests' fixture goes through the
/// recipes, and rows only a reconciler writes come from the reconciler (a run of it,
/// `Harness::reconcile_once`, or its public decisions). An entry needs its reason.
const ALLOWED: &[(&str, &str, usize, &str)] = &[];

/// The repository's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).ancestors().nth(2).unwrap().to_path_buf()
}

/// The files the rule covers: test support and tests, bc-store's tests excepted.
fn scanned(root: &Path) -> Vec<PathBuf> {
    let mut packages = Vec::new();
    for parent in ["crates", "bins"] {
        for p in std::fs::read_dir(root.join(parent)).unwrap().flatten() {
            packages.push(p.path());
        }
    }
    let mut files = Vec::new();
    for p in packages {
        if p.ends_with("crates/store") {
            continue;
        }
        let testing = p.join("src/testing.rs");
        if testing.is_file() {
            files.push(testing);
        }
        bc_testkit::layers::rust_files(&p.join("src/testing"), &mut files);
        bc_testkit::layers::rust_files(&p.join("tests"), &mut files);
        if p.ends_with("crates/testkit") {
            bc_testkit::layers::rust_files(&p.join("src"), &mut files);
        }
    }
    files.sort();
    files
}

/// `src` without its `//` comments (doc comments included).
fn code(src: &str) -> String {
    src.lines().map(|l| l.find("//").map_or(l, |i| &l[..i])).collect::<Vec<_>>().join("\n")
}

/// How often each recipe write's constructor (`Write::<Variant>`, not a longer name) is
/// named in `code`.
fn constructors(code: &str) -> BTreeMap<&'static str, usize> {
    let mut found = BTreeMap::new();
    for variant in RECIPE_WRITES {
        let needle = format!("Write::{variant}");
        let n = code
            .match_indices(&needle)
            .filter(|(i, _)| {
                let next = code[i + needle.len()..].chars().next();
                !next.is_some_and(|c| c.is_alphanumeric() || c == '_')
            })
            .count();
        if n > 0 {
            found.insert(variant, n);
        }
    }
    found
}

#[test]
fn the_scan_sees_a_hand_built_unit_of_work_and_not_a_comment() {
    // Spelled `W::` here so that this file does not match itself.
    let src = "let uow = UnitOfWork::new().write(W::InsertLoadBalancer(lb))\n\
               .write(W::BookQuota { pool_id, resource }); // W::InsertPool(p)\n\
               let other = W::InsertPoolish;"
        .replace("W::", "Write::");
    let found = constructors(&code(&src));
    assert_eq!(found, BTreeMap::from([("BookQuota", 1), ("InsertLoadBalancer", 1)]));
}

#[test]
fn no_harness_writes_a_recipes_unit_of_work_by_hand() {
    let root = root();
    let files = scanned(&root);
    assert!(
        files.iter().any(|f| f.ends_with("crates/reconcile/src/testing/mod.rs")),
        "the reconcilers' harness is scanned"
    );
    let mut seen: BTreeMap<(String, &str), usize> = BTreeMap::new();
    for f in &files {
        let rel = f.strip_prefix(&root).unwrap().to_string_lossy().replace('\\', "/");
        let src = std::fs::read_to_string(f).unwrap();
        for (variant, n) in constructors(&code(&src)) {
            seen.insert((rel.clone(), variant), n);
        }
    }
    let mut problems = Vec::new();
    for ((file, variant), n) in &seen {
        let allowed = ALLOWED.iter().find(|(f, v, _, _)| f == file && v == variant);
        match allowed {
            Some((_, _, count, _)) if count == n => {}
            Some((_, _, count, why)) => problems
                .push(format!("{file}: Write::{variant} {n} times, allowed {count} ({why})")),
            None => problems.push(format!(
                "{file}: Write::{variant} built by hand {n} time(s): call its recipe in \
                 bc_domain::recipes instead"
            )),
        }
    }
    for (file, variant, _, _) in ALLOWED {
        if !seen.contains_key(&(file.to_string(), *variant)) {
            problems.push(format!("{file}: Write::{variant} is allowed but no longer used"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
