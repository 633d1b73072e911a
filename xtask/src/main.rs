//! Project tasks, run as `cargo xtask <task>`: the test command (with throwaway PostgreSQL
//! and NATS), the CI gate, the benchmarks and their report, the generated reference docs,
//! the generated Kubernetes field table ([`kube_wire`]), the container images and the
//! conformance run against DigitalOcean. Nearly std-only so that it builds in seconds:
//! the docs are written by a bc-api example it runs, the conformance run is the
//! `bc-conformance` binary it runs, the report's JSON is read and written by [`json`], and the images need only a
//! hash and gzip (`sha2`, pure-Rust `flate2`).

mod image;
mod image_check;
mod json;
mod kube_wire;
mod report;
mod services;

use std::env;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, ExitStatus, Stdio};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use services::{Services, Wanted};

/// Usage text printed by `cargo xtask help` and on argument errors.
const USAGE: &str = "\
usage: cargo xtask <task>

tasks:
  test [--require-services] [--soak] [-- <args for the test runner>]
      Start a throwaway PostgreSQL and nats-server on loopback when their binaries are
      present, export BC_TEST_POSTGRES_URL / BC_TEST_NATS_URL, run the workspace's tests
      (cargo nextest if installed, plus doctests; else cargo test) and stop the servers.
      --require-services: fail if a service cannot be started, and tell the tests
      (BC_REQUIRE_SERVICES=1) that skipping is a failure.
      --soak: tell the tests (BC_SOAK=1) to run their long fault variants (hundreds of
      process kills instead of tens); minutes, not seconds.
      Package selection in the extra args (-p NAME) replaces --workspace; without one,
      the run ends with `image --check` (a release build of the three binaries, started
      at nice 19 in the background beside the test binaries' build, its output in
      target/image-build.log). The summary gives each phase's wall time. Under CI=true,
      CARGO_INCREMENTAL=0 unless set.
  ci [--soak] [-- <args for the test runner>]
      cargo fmt --check, cargo clippy -D warnings, then test --require-services.
  docs
      Write the API reference generated from bc-api's method registry:
      docs/reference/api/<resource>.md and docs/reference/openapi.json.
  image [--check] [--no-build]
      Build bc-api, bc-reconciler and bcd in release mode and write an OCI image of each,
      target/image/<name>.oci.tar (no container daemon needed; the same inputs give the
      same digest). Publish one with
      skopeo copy oci-archive:target/image/bcd.oci.tar docker://REGISTRY/bcd:TAG
      --check: also build each again to compare the bytes, read it with skopeo, unpack
      it with umoci and run its binary with --version from its own root as its user
      (needs root, skopeo and umoci).
      --no-build: pack the release binaries already in target/release as they are.
  conformance [--provider digitalocean|gke] [--digitalocean-api-url URL]
              [--gke-api-url URL] [--gcp-token-url URL] [--sweep-only]
      Run the provider adapters' contract (crates/conformance, the same checks its tests
      run against the simulator) against a real provider. DigitalOcean (the default):
      the API token in BC_CONFORMANCE_DIGITALOCEAN_TOKEN (region:
      BC_CONFORMANCE_DIGITALOCEAN_REGION, default nyc1); a one-node s-1vcpu-2gb cluster,
      a second node pool resized and deleted, a one-unit regional load balancer created,
      updated and deleted. GKE (--provider gke): the service-account key file named by
      BC_CONFORMANCE_GKE_KEY_FILE (zone: BC_CONFORMANCE_GKE_LOCATION, default
      us-central1-a); a one-node e2-medium zonal cluster, a second node pool resized and
      deleted, and an autopilot cluster in the zone's region refusing node pools. Both:
      the substrate's Namespace, Secret, ServiceAccount and DaemonSet applied in the
      cluster and refused where a tenant's stand. Everything is named bc-conf-<run>-…
      and tagged (GKE: labelled) bc-conformance; a sweeper deletes whatever carries
      both, first and last (also after a failure). Prints what it made, for how long,
      and the cost at list prices (cents; 25-40 minutes). Without the credentials it
      names the variables and exits 0 with `skipped`. Never run in CI.
      --digitalocean-api-url URL: any DigitalOcean-shaped API (e.g. bc-sim's).
      --gke-api-url URL, --gcp-token-url URL: any GKE-shaped API and token endpoint.
      --sweep-only: only delete what earlier (crashed) runs left.
  bench [--quick] [NAME...] [-- <args for the benchmark>]
      Build the named benchmarks (all that exist when none is named) in release mode,
      run each with a throwaway PostgreSQL (BC_TEST_POSTGRES_URL) when available and
      BC_BENCH_JSON=target/bench/figures.jsonl, then write target/bench/report.md and
      report.json (median, spread, reference and ratio of every figure).
      --quick: each benchmark's short version (the whole suite in about a minute).
  kube-wire --api <DIR> --apimachinery <DIR> --tag <TAG> [--out <FILE>]
      Generate crates/domain/src/kube_wire/table.rs, the JSON field rules (name,
      omitempty, pointer, slice/map/struct/scalar, +default) of the Kubernetes types the
      simulated API server serves, from checkouts (bare or not) of kubernetes/api and
      kubernetes/apimachinery at TAG (e.g. v0.33.1, the newest minor the simulator serves).
  help
      Print this text.";

/// The benchmarks: name, package, and crate directory under `crates/` that holds
/// `examples/<name>_bench.rs`. Example names must differ across the workspace, or their
/// binaries collide in `target/*/examples/`.
const BENCHES: &[Bench] = &[
    Bench { name: "store", package: "bc-store", dir: "store", runs: &[] },
    Bench { name: "sim", package: "bc-sim", dir: "sim", runs: &[] },
    Bench { name: "authz", package: "bc-api", dir: "api", runs: &[] },
    Bench { name: "api", package: "bc-api", dir: "api", runs: &[] },
    Bench { name: "reconcile", package: "bc-reconcile", dir: "reconcile", runs: &[] },
    Bench {
        name: "memory",
        package: "bc-stack",
        dir: "stack",
        runs: &["bc-api-bin", "bc-reconciler"],
    },
];

/// Where `cargo xtask docs` writes, relative to the workspace root.
const DOCS_DIR: &str = "docs/reference";

/// One benchmark: an example named `<name>_bench` in a crate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Bench {
    /// Name given on the command line.
    name: &'static str,
    /// Cargo package that holds the example.
    package: &'static str,
    /// Directory of the crate under `crates/`.
    dir: &'static str,
    /// Packages whose binaries the benchmark runs as processes: built by the images' release
    /// build, so building them never counts in the benchmark's wall time.
    runs: &'static [&'static str],
}

impl Bench {
    /// The example's name, `<name>_bench`.
    fn example(&self) -> String {
        format!("{}_bench", self.name)
    }

    /// Path of the example's source, relative to the workspace root.
    fn example_path(&self) -> PathBuf {
        Path::new("crates").join(self.dir).join("examples").join(format!("{}.rs", self.example()))
    }
}

/// Options of the test task.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct TestArgs {
    /// Fail when a service is missing, and tell the tests so.
    require_services: bool,
    /// Run the long (soak) variants of the fault tests: `BC_SOAK=1` for the tests.
    soak: bool,
    /// Extra arguments for the test runner (after `--`).
    extra: Vec<String>,
}

/// A parsed command line.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Task {
    /// `cargo xtask test`.
    Test(TestArgs),
    /// `cargo xtask ci`.
    Ci(TestArgs),
    /// `cargo xtask bench`.
    Bench {
        /// Benchmark names; empty means all that exist.
        names: Vec<String>,
        /// `--quick`: each benchmark's short version.
        quick: bool,
        /// Arguments passed to each benchmark (after `--`).
        args: Vec<String>,
    },
    /// `cargo xtask docs`.
    Docs,
    /// `cargo xtask image`.
    Image {
        /// `--check`: verify the images after writing them.
        check: bool,
        /// `--no-build`: pack the release binaries as they are.
        build: bool,
    },
    /// `cargo xtask kube-wire`.
    KubeWire(kube_wire::Args),
    /// `cargo xtask conformance`: the arguments for `bc-conformance`.
    Conformance(Vec<String>),
    /// `cargo xtask help`.
    Help,
}

/// Parses the arguments after `cargo xtask`.
fn parse_args(args: &[String]) -> Result<Task, String> {
    let Some((task, rest)) = args.split_first() else {
        return Err("no task given".into());
    };
    let (own, extra) = match rest.iter().position(|a| a == "--") {
        Some(i) => (&rest[..i], rest[i + 1..].to_vec()),
        None => (rest, Vec::new()),
    };
    match task.as_str() {
        "test" | "ci" => {
            let mut test = TestArgs { require_services: task == "ci", soak: false, extra };
            for arg in own {
                match arg.as_str() {
                    "--require-services" => test.require_services = true,
                    "--soak" => test.soak = true,
                    other => {
                        return Err(format!(
                            "unknown argument `{other}` for `{task}` \
                             (test runner arguments go after `--`)"
                        ));
                    }
                }
            }
            Ok(if task == "ci" { Task::Ci(test) } else { Task::Test(test) })
        }
        "bench" => {
            let (mut names, mut quick) = (Vec::new(), false);
            for arg in own {
                if arg == "--quick" {
                    quick = true;
                    continue;
                }
                if arg.starts_with('-') {
                    return Err(format!(
                        "unknown argument `{arg}` for `bench` (benchmark arguments go after `--`)"
                    ));
                }
                if BENCHES.iter().all(|b| b.name != arg) {
                    return Err(format!(
                        "unknown benchmark `{arg}`; known: {}",
                        BENCHES.iter().map(|b| b.name).collect::<Vec<_>>().join(", ")
                    ));
                }
                names.push(arg.clone());
            }
            Ok(Task::Bench { names, quick, args: extra })
        }
        "docs" => match own.first() {
            None if extra.is_empty() => Ok(Task::Docs),
            _ => Err("`docs` takes no arguments".into()),
        },
        "image" if extra.is_empty() => {
            let (mut check, mut build) = (false, true);
            for arg in own {
                match arg.as_str() {
                    "--check" => check = true,
                    "--no-build" => build = false,
                    other => return Err(format!("unknown argument `{other}` for `image`")),
                }
            }
            Ok(Task::Image { check, build })
        }
        "image" => Err("`image` takes only `--check` and `--no-build`".into()),
        "kube-wire" if extra.is_empty() => Ok(Task::KubeWire(kube_wire::Args::parse(own)?)),
        // bc-conformance checks its own arguments (one parser, the one its tests run).
        "conformance" if extra.is_empty() => Ok(Task::Conformance(own.to_vec())),
        "conformance" => Err("`conformance` takes its arguments without `--`".into()),
        "help" | "--help" | "-h" => Ok(Task::Help),
        other => Err(format!("unknown task `{other}`")),
    }
}

/// Tells whether runner arguments choose the packages themselves (`-p`, or their own
/// `--workspace`); then xtask adds no `--workspace` (cargo ignores `-p` next to it and
/// rejects it twice). Only arguments before an inner `--` count.
fn selects_packages(extra: &[String]) -> bool {
    extra.iter().take_while(|a| *a != "--").any(|a| {
        a == "-p"
            || a == "--package"
            || a == "--workspace"
            || a == "--all"
            || a.starts_with("--package=")
            || is_short_p_with_value(a)
    })
}

/// Tells whether an argument is `-pNAME`.
fn is_short_p_with_value(a: &str) -> bool {
    a.len() > 2 && a.starts_with("-p") && !a.starts_with("--")
}

/// The package and feature selection within runner arguments, to reuse for the doctest run
/// (the other runner arguments may be nextest-only). Packages for which `has_lib` says
/// `false` are dropped (`cargo test --doc` refuses packages without a library); `None`
/// when packages were selected but none of them has a library.
fn selection_args(extra: &[String], has_lib: &dyn Fn(&str) -> bool) -> Option<Vec<String>> {
    const WITH_VALUE: &[&str] = &["--exclude", "-F", "--features"];
    const FLAGS: &[&str] =
        &["--workspace", "--all", "--all-features", "--no-default-features", "--release"];
    let mut out = Vec::new();
    let (mut selected, mut kept) = (0, 0);
    let mut iter = extra.iter().take_while(|a| *a != "--");
    while let Some(arg) = iter.next() {
        let package = if arg == "-p" || arg == "--package" {
            Some(iter.next().cloned().unwrap_or_default())
        } else if let Some(name) = arg.strip_prefix("--package=") {
            Some(name.to_string())
        } else if is_short_p_with_value(arg) {
            Some(arg[2..].to_string())
        } else {
            None
        };
        if let Some(package) = package {
            selected += 1;
            if has_lib(&package) {
                kept += 1;
                out.push("-p".into());
                out.push(package);
            }
        } else if WITH_VALUE.contains(&arg.as_str()) {
            out.push(arg.clone());
            if let Some(value) = iter.next() {
                out.push(value.clone());
            }
        } else if FLAGS.contains(&arg.as_str())
            || ["--exclude=", "--features="].iter().any(|p| arg.starts_with(p))
        {
            out.push(arg.clone());
        }
    }
    (selected == 0 || kept > 0).then_some(out)
}

/// Tells whether a workspace package has a library target, judged from the members'
/// manifests (`src/lib.rs` or a `[lib]` section); unknown packages count as having one.
fn package_has_lib(root: &Path, package: &str) -> bool {
    let member_dirs = ["crates", "bins"]
        .iter()
        .filter_map(|d| std::fs::read_dir(root.join(d)).ok())
        .flat_map(|entries| entries.filter_map(|e| e.ok()).map(|e| e.path()))
        .chain([root.join("xtask")]);
    for dir in member_dirs {
        let Ok(manifest) = std::fs::read_to_string(dir.join("Cargo.toml")) else { continue };
        if manifest_package_name(&manifest).as_deref() == Some(package) {
            return dir.join("src/lib.rs").is_file()
                || manifest.lines().any(|l| l.trim() == "[lib]");
        }
    }
    true
}

/// The `name` of the `[package]` section of a Cargo manifest.
fn manifest_package_name(manifest: &str) -> Option<String> {
    let mut in_package = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_package = line == "[package]";
        } else if in_package && let Some(value) = line.strip_prefix("name") {
            let value = value.trim_start().strip_prefix('=')?.trim();
            return Some(value.trim_matches('"').to_string());
        }
    }
    None
}

/// The cargo invocations (argument lists) that run the tests; `has_lib` tells which
/// packages have a library (for the doctest run).
fn test_commands(
    nextest: bool,
    extra: &[String],
    has_lib: &dyn Fn(&str) -> bool,
) -> Vec<Vec<String>> {
    let scope: Vec<String> =
        if selects_packages(extra) { Vec::new() } else { vec!["--workspace".into()] };
    let strings = |items: &[&str]| items.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    if nextest {
        // Like cargo test, a selection without tests is not a failure.
        let mut run = strings(&["nextest", "run"]);
        run.extend(scope.iter().cloned());
        run.extend(strings(&["--no-fail-fast", "--no-tests=warn"]));
        run.extend(extra.iter().cloned());
        // The build first, on its own, so that the summary tells building from running:
        // `cargo test --no-run` is what nextest runs to build, and nextest's `--no-run`
        // refuses the run's options (`--no-fail-fast`, `--no-tests`, the caller's).
        let mut build = strings(&["test"]);
        build.extend(scope.iter().cloned());
        build.push("--no-run".into());
        build.extend(selection_args(extra, &|_| true).unwrap_or_default());
        let mut commands = vec![build, run];
        // nextest does not run doctests.
        if let Some(selection) = selection_args(extra, has_lib) {
            let mut doc = strings(&["test"]);
            doc.extend(scope);
            doc.push("--doc".into());
            doc.extend(selection);
            commands.push(doc);
        }
        commands
    } else {
        let mut run = strings(&["test"]);
        run.extend(scope);
        run.push("--no-fail-fast".into());
        run.extend(extra.iter().cloned());
        vec![run]
    }
}

/// Tells whether the test run should build without incremental compilation: under CI
/// (`CI` is `true` or `1`) every crate is built once, so the incremental directories
/// (gigabytes for the workspace's test binaries) only cost time and disk; a
/// `CARGO_INCREMENTAL` the caller set is left alone.
fn builds_once(ci: Option<&str>, incremental_set: bool) -> bool {
    let ci = ci.is_some_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "true" | "1"));
    ci && !incremental_set
}

/// Maps a child's exit status to this process's exit code (128+signal when killed).
fn exit_code(status: ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(0), _) => 0,
        (Some(c), _) => u8::try_from(c).ok().filter(|c| *c != 0).unwrap_or(1),
        (None, Some(sig)) => u8::try_from(128 + sig).unwrap_or(1),
        (None, None) => 1,
    }
}

/// The workspace root (the parent of this crate's directory).
fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).to_path_buf()
}

/// A `cargo` command in the workspace root (the cargo that runs us, when known).
fn cargo() -> Command {
    let mut cmd = Command::new(env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.current_dir(workspace_root());
    cmd
}

/// Runs `cargo <args>` with the services' environment; returns its exit code.
fn run_cargo(args: &[String], services: Option<&Services>) -> u8 {
    run_cargo_env(args, services, &[])
}

/// [`run_cargo`] with extra environment variables for the child.
fn run_cargo_env(args: &[String], services: Option<&Services>, env: &[(&str, &str)]) -> u8 {
    eprintln!("xtask: running cargo {}", args.join(" "));
    let mut cmd = cargo();
    cmd.args(args).envs(env.iter().copied());
    if let Some(s) = services {
        s.apply(&mut cmd);
    }
    match cmd.status() {
        Ok(status) => exit_code(status),
        Err(e) => {
            eprintln!("xtask: cannot run cargo: {e}");
            1
        }
    }
}

/// Runs a release build (`cargo <args>`) with [`release_rustflags`]; returns its exit code.
fn run_release_build(args: &[String]) -> u8 {
    run_cargo_env(args, None, &[("CARGO_ENCODED_RUSTFLAGS", &release_build_flags())])
}

/// [`release_rustflags`] for this checkout, target directory and caller.
fn release_build_flags() -> String {
    let root = workspace_root();
    let cargo_home = env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")));
    release_rustflags(
        &root,
        &target_dir(&root),
        cargo_home.as_deref(),
        env::var("CARGO_ENCODED_RUSTFLAGS").ok().as_deref(),
        env::var("RUSTFLAGS").ok().as_deref(),
    )
}

/// The images' release build running in the background while the tests run, at the
/// lowest CPU priority (`nice -n 19`): the tests, which mostly wait on sockets, timers and
/// child processes, leave one or both cores idle much of the time, and the build takes
/// only that idle time, so the tests run as fast as without it (the kernel gives a nice-19
/// process ~1.5 % of a core against a busy nice-0 one). The image check then finds the
/// binaries built; if this build failed, the image check's own build runs again in the
/// foreground and shows why.
struct BackgroundBuild {
    /// The `nice cargo build --release …` process.
    child: std::process::Child,
    /// Where its output goes (a background build must not interleave with the tests').
    log: PathBuf,
    /// When it started.
    started: Instant,
}

impl BackgroundBuild {
    /// Starts [`image_build_command`] under `nice -n 19`, its output to
    /// `<target>/image-build.log`; `None` (with a line saying why) when it cannot start.
    fn start() -> Option<BackgroundBuild> {
        let log = target_dir(&workspace_root()).join("image-build.log");
        Self::start_cargo(&image_build_command(), log)
    }

    /// Starts `nice -n 19 cargo <args>` with the release builds' flags, its output to `log`.
    fn start_cargo(args: &[String], log: PathBuf) -> Option<BackgroundBuild> {
        let file = log
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::File::create(&log))
            .and_then(|f| Ok((f.try_clone()?, f)));
        let (out, err) = match file {
            Ok(files) => files,
            Err(e) => {
                eprintln!(
                    "xtask: not building the images in the background: {}: {e}",
                    log.display()
                );
                return None;
            }
        };
        let mut cmd = Command::new("nice");
        cmd.arg("-n")
            .arg("19")
            .arg(env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
            .args(args)
            .current_dir(workspace_root())
            .env("CARGO_ENCODED_RUSTFLAGS", release_build_flags())
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        match cmd.spawn() {
            Ok(child) => {
                eprintln!(
                    "xtask: building the images' binaries in the background at nice 19 while \
                     the tests run (output in {})",
                    log.display()
                );
                Some(BackgroundBuild { child, log, started: Instant::now() })
            }
            Err(e) => {
                eprintln!("xtask: not building the images in the background: cannot run nice: {e}");
                None
            }
        }
    }

    /// Waits for the build; returns a line for the summary.
    fn finish(mut self) -> String {
        let waited = Instant::now();
        let status = self.child.wait();
        let (total, wait) = (self.started.elapsed().as_secs_f64(), waited.elapsed().as_secs_f64());
        match status {
            Ok(s) if s.success() => format!(
                "images' release build in the background: done in {total:.0} s \
                 (waited {wait:.0} s for it after the tests)"
            ),
            Ok(s) => format!(
                "images' release build in the background: FAILED ({s}) after {total:.0} s; \
                 see {}; the image check builds again",
                self.log.display()
            ),
            Err(e) => format!("images' release build in the background: cannot wait for it: {e}"),
        }
    }
}

/// The rustc flags of every release build xtask runs (the images' and the benchmarks',
/// alike, so one never rebuilds what the other built), as `CARGO_ENCODED_RUSTFLAGS`: the
/// caller's own flags (`CARGO_ENCODED_RUSTFLAGS`, else `RUSTFLAGS`), then the absolute
/// paths of cargo's home, the checkout and the target directory remapped to fixed ones.
/// Without them a binary — hence its image's digest — depends on where the workspace was
/// checked out: code a build script generates under `OUT_DIR` (cedar's parser) carries its
/// path into panic locations. rustc applies the last matching remap, so the target
/// directory, usually inside the checkout, comes last.
fn release_rustflags(
    root: &Path,
    target: &Path,
    cargo_home: Option<&Path>,
    encoded: Option<&str>,
    plain: Option<&str>,
) -> String {
    let mut flags: Vec<String> = match (encoded, plain) {
        (Some(e), _) if !e.is_empty() => e.split('\x1f').map(str::to_owned).collect(),
        (_, Some(p)) => p.split_whitespace().map(str::to_owned).collect(),
        _ => Vec::new(),
    };
    let remaps = cargo_home
        .map(|h| (h, "/cargo"))
        .into_iter()
        .chain([(root, "/bc"), (target, "/bc/target")]);
    for (from, to) in remaps {
        flags.push(format!("--remap-path-prefix={}={to}", from.display()));
    }
    flags.join("\x1f")
}

/// Tells whether `cargo nextest` is installed.
fn has_nextest() -> bool {
    cargo()
        .args(["nextest", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// `cargo xtask test`: start services, run the tests, stop services, print a summary.
fn run_tests(args: &TestArgs) -> u8 {
    let mut services =
        match Services::start(Wanted { postgres: true, nats: true }, args.require_services) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("xtask: {e}");
                return 1;
            }
        };
    let nextest = has_nextest();
    let mut results = Vec::new();
    let mut code = 0;
    let root = workspace_root();
    let has_lib = |package: &str| package_has_lib(&root, package);
    let mut env: Vec<(&str, &str)> = Vec::new();
    if args.soak {
        env.push(("BC_SOAK", "1"));
    }
    if builds_once(env::var("CI").ok().as_deref(), env::var_os("CARGO_INCREMENTAL").is_some()) {
        env.push(("CARGO_INCREMENTAL", "0"));
    }
    // The image check follows a whole-workspace run; when its tools are here, its release
    // build starts with the test binaries' build. At nice 19 it takes only the CPU that
    // build leaves idle (its serial crates and links) and then the tests' idle time: once
    // the tests had been cut to ~10 minutes, a release build started after the test build
    // was what the run waited for (410 s at its end).
    let images = !selects_packages(&args.extra);
    let mut background = None;
    for (i, cmd) in test_commands(nextest, &args.extra, &has_lib).into_iter().enumerate() {
        if nextest && i == 0 && images && image_check::tools().is_ok() {
            background = BackgroundBuild::start();
        }
        let started = Instant::now();
        let c = run_cargo_env(&cmd, Some(&services), &env);
        results.push(format!(
            "cargo {} ({:.0} s): {}",
            cmd.join(" "),
            started.elapsed().as_secs_f64(),
            if c == 0 { "passed".to_string() } else { format!("FAILED (exit code {c})") }
        ));
        if code == 0 {
            code = c;
        }
    }
    let summary = std::mem::take(&mut services.summary);
    services.stop();
    drop(services);
    if let Some(build) = background {
        results.push(build.finish());
    }
    if images {
        let started = Instant::now();
        let (c, lines) = match image_step(true, args.require_services, true) {
            Ok(lines) => (0, lines),
            Err(e) => {
                eprintln!("xtask: image check: {e}");
                (1, vec![format!("FAILED: {e}")])
            }
        };
        results.push(format!("image check ({:.0} s):", started.elapsed().as_secs_f64()));
        results.extend(lines.into_iter().map(|l| format!("  {l}")));
        if code == 0 {
            code = c;
        }
    }
    eprintln!("xtask: summary");
    for line in summary.iter().chain(&results) {
        eprintln!("  {line}");
    }
    if args.require_services {
        eprintln!("  services required (BC_REQUIRE_SERVICES=1)");
    }
    if args.soak {
        eprintln!("  soak variants (BC_SOAK=1)");
    }
    code
}

/// `cargo xtask ci`: formatting, lints, then the tests with services required.
fn run_ci(args: &TestArgs) -> u8 {
    let steps: [&[&str]; 2] = [
        &["fmt", "--all", "--", "--check"],
        &["clippy", "--workspace", "--all-targets", "--", "-D", "warnings"],
    ];
    for step in steps {
        let step: Vec<String> = step.iter().map(|s| s.to_string()).collect();
        let code = run_cargo(&step, None);
        if code != 0 {
            eprintln!("xtask ci: `cargo {}` failed (exit code {code})", step.join(" "));
            return code;
        }
    }
    run_tests(&TestArgs { require_services: true, soak: args.soak, extra: args.extra.clone() })
}

/// `cargo xtask bench`: build the chosen benchmarks, run each with PostgreSQL available and
/// `BC_BENCH_JSON` set, then write the report. A benchmark that fails makes the exit code
/// non-zero, but the others still run and the report is written for them.
fn run_benches(names: &[String], quick: bool, args: &[String]) -> u8 {
    let root = workspace_root();
    let chosen: Vec<Bench> = if names.is_empty() {
        BENCHES.iter().copied().filter(|b| root.join(b.example_path()).is_file()).collect()
    } else {
        let mut chosen = Vec::new();
        for name in names {
            let Some(bench) = BENCHES.iter().find(|b| b.name == name) else {
                eprintln!("xtask: unknown benchmark `{name}`");
                return 1;
            };
            if !root.join(bench.example_path()).is_file() {
                eprintln!(
                    "xtask: benchmark `{name}` does not exist yet ({} is missing)",
                    bench.example_path().display()
                );
                return 1;
            }
            chosen.push(*bench);
        }
        chosen
    };
    if chosen.is_empty() {
        eprintln!(
            "xtask: no benchmarks exist yet (looked for {})",
            BENCHES
                .iter()
                .map(|b| b.example_path().display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        return 0;
    }
    // Every build before any run, so that each one's wall time is its run alone.
    let build_started = Instant::now();
    for cmd in build_commands(&chosen) {
        let code = run_release_build(&cmd);
        if code != 0 {
            eprintln!("xtask: building the benchmarks failed (exit code {code})");
            return code;
        }
    }
    let build_secs = build_started.elapsed().as_secs_f64();
    let target = target_dir(&root);
    let out_dir = target.join("bench");
    let figures_path = out_dir.join("figures.jsonl");
    if let Err(e) =
        std::fs::create_dir_all(&out_dir).and_then(|()| std::fs::write(&figures_path, b""))
    {
        eprintln!("xtask: cannot prepare {}: {e}", figures_path.display());
        return 1;
    }
    let mut services = match Services::start(Wanted { postgres: true, nats: false }, false) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("xtask: {e}");
            return 1;
        }
    };
    let postgres = services.env.iter().any(|(k, _)| k == "BC_TEST_POSTGRES_URL")
        || env::var_os("BC_TEST_POSTGRES_URL").is_some_and(|v| !v.is_empty());
    let mut code = 0;
    let mut runs = Vec::new();
    for bench in &chosen {
        let binary = target.join("release").join("examples").join(bench.example());
        let mut cmd = Command::new(&binary);
        cmd.current_dir(&root).args(bench_args(quick, args)).env("BC_BENCH_JSON", &figures_path);
        cmd.envs(binaries_env(bench, &target.join("release")));
        services.apply(&mut cmd);
        eprintln!("xtask: running benchmark `{}` ({})", bench.name, binary.display());
        let started = Instant::now();
        let c = match cmd.status() {
            Ok(status) => exit_code(status),
            Err(e) => {
                eprintln!("xtask: cannot run {}: {e}", binary.display());
                1
            }
        };
        let wall_secs = started.elapsed().as_secs_f64();
        eprintln!("xtask: benchmark `{}` took {wall_secs:.1} s", bench.name);
        if c != 0 {
            eprintln!("xtask: benchmark `{}` failed (exit code {c})", bench.name);
            if code == 0 {
                code = c;
            }
        }
        runs.push(report::BenchRun { name: bench.name.to_string(), exit_code: c, wall_secs });
    }
    let summary = std::mem::take(&mut services.summary);
    services.stop();
    drop(services);
    let text = std::fs::read_to_string(&figures_path).unwrap_or_default();
    let (figures, problems) = report::read_figures(&text);
    let meta = report::Meta {
        quick,
        date: report::utc_date(
            SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()),
        ),
        commit: git_commit(&root),
        cores: std::thread::available_parallelism().map_or(0, |n| n.get()),
        platform: format!("{} {}", env::consts::OS, env::consts::ARCH),
        postgres,
        build_secs,
    };
    let md_path = out_dir.join("report.md");
    let json_path = out_dir.join("report.json");
    let written = std::fs::write(&md_path, report::markdown(&meta, &runs, &figures, &problems))
        .and_then(|()| {
            std::fs::write(&json_path, report::json_report(&meta, &runs, &figures, &problems))
        });
    eprintln!("xtask: summary");
    for line in &summary {
        eprintln!("  {line}");
    }
    for r in &runs {
        let result = if r.exit_code == 0 { "passed" } else { "FAILED" };
        eprintln!("  bench {}: {result} in {:.1} s", r.name, r.wall_secs);
    }
    for p in &problems {
        eprintln!("  {p}");
    }
    match written {
        Ok(()) => eprintln!(
            "  {} figures: {} and {}",
            figures.len(),
            md_path.display(),
            json_path.display()
        ),
        Err(e) => {
            eprintln!("xtask: cannot write the report in {}: {e}", out_dir.display());
            if code == 0 {
                code = 1;
            }
        }
    }
    code
}

/// The release builds of the chosen benchmarks: one of their examples, then, when one
/// runs binaries as processes, the images' build of the three binaries. Apart, because a
/// build with an example turns on its crate's dev-dependency features (bc-stack's and
/// bc-sim's `testing`) in every crate it builds: the processes measured are the binaries
/// `cargo xtask image` packs, and an image build after a benchmark compiles nothing.
fn build_commands(chosen: &[Bench]) -> Vec<Vec<String>> {
    let mut cmd: Vec<String> = vec!["build".into(), "--release".into()];
    let mut packages: Vec<&str> = chosen.iter().map(|b| b.package).collect();
    packages.dedup();
    for p in packages {
        cmd.extend(["-p".into(), p.to_string()]);
    }
    for b in chosen {
        cmd.extend(["--example".into(), b.example()]);
    }
    let mut cmds = vec![cmd];
    if chosen.iter().any(|b| !b.runs.is_empty()) {
        cmds.push(image_build_command());
    }
    cmds
}

/// The binaries a benchmark runs as processes, as `BC_<BINARY>_BIN` = the images' release
/// build of each in `release_dir` (`BC_API_BIN`, `BC_RECONCILER_BIN`): the ones
/// [`build_commands`] built. Without them the benchmark built its own, with other flags
/// (a second release build of every dependency, and binaries the images do not pack).
fn binaries_env(bench: &Bench, release_dir: &Path) -> Vec<(String, PathBuf)> {
    bench
        .runs
        .iter()
        .filter_map(|package| image::IMAGES.iter().find(|i| i.package == *package))
        .map(|i| {
            let var = format!("{}_BIN", i.binary.to_uppercase().replace('-', "_"));
            (var, release_dir.join(i.binary))
        })
        .collect()
}

/// The arguments each benchmark gets: `--quick` first when asked, then the user's.
fn bench_args(quick: bool, args: &[String]) -> Vec<String> {
    let mut out: Vec<String> = if quick { vec!["--quick".into()] } else { Vec::new() };
    out.extend(args.iter().cloned());
    out
}

/// Cargo's target directory: `CARGO_TARGET_DIR` when set, else the workspace's `target`.
fn target_dir(root: &Path) -> PathBuf {
    match env::var_os("CARGO_TARGET_DIR").filter(|v| !v.is_empty()) {
        Some(dir) => root.join(dir),
        None => root.join("target"),
    }
}

/// The short commit id of the work tree, `+dirty` when tracked files changed; `unknown`
/// outside git.
fn git_commit(root: &Path) -> String {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .current_dir(root)
            .stderr(Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let Some(commit) = git(&["rev-parse", "--short", "HEAD"]) else {
        return "unknown".into();
    };
    let dirty =
        git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    if dirty { format!("{commit}+dirty") } else { commit }
}

/// The one `cargo build` of the images' binaries, in release mode.
fn image_build_command() -> Vec<String> {
    let mut cmd: Vec<String> = vec!["build".into(), "--release".into()];
    for i in image::IMAGES {
        cmd.extend(["-p".into(), i.package.to_string()]);
    }
    cmd.push("--bins".into());
    cmd
}

/// `n` bytes in MiB with one decimal.
fn mib(n: u64) -> String {
    format!("{:.1} MiB", n as f64 / (1024.0 * 1024.0))
}

/// Builds the binaries (unless not `build`) and writes the images to `target/image`;
/// with `check`, builds each again to compare the bytes and runs [`image_check::check`]
/// on it. Returns one line per image. Without the check's tools, `required` makes that
/// an error, else the step is skipped (before the release build) with a line saying why.
fn image_step(check: bool, required: bool, build: bool) -> Result<Vec<String>, String> {
    let tools = match check.then(image_check::tools) {
        None => None,
        Some(Ok(tools)) => Some(tools),
        Some(Err(e)) if required => return Err(e),
        Some(Err(e)) => return Ok(vec![format!("skipped: {e}")]),
    };
    let epoch = image::source_date_epoch(env::var("SOURCE_DATE_EPOCH").ok().as_deref())?;
    let code = if build { run_release_build(&image_build_command()) } else { 0 };
    if code != 0 {
        return Err(format!("the release build failed (exit code {code})"));
    }
    let root = workspace_root();
    let target = target_dir(&root);
    let out_dir = target.join("image");
    let mut lines = Vec::new();
    for spec in image::IMAGES {
        let binary = target.join("release").join(spec.binary);
        let built = image::build(spec, &binary, &out_dir, epoch)?;
        let mut line = format!(
            "{}: {} {} — layer {} (gzip), root filesystem {}",
            spec.name,
            built.archive.strip_prefix(&root).unwrap_or(&built.archive).display(),
            built.digest,
            mib(built.layer_size),
            mib(built.rootfs_size),
        );
        if let Some(tools) = &tools {
            let inputs = image::Inputs::read(&binary)?;
            let (again, _) = image::archive(spec, &inputs, epoch)?;
            let written = std::fs::read(&built.archive)
                .map_err(|e| format!("{}: {e}", built.archive.display()))?;
            if again != written {
                return Err(format!("{}: a second build from the same inputs differs", spec.name));
            }
            let version = image_check::check(&built, tools)?;
            line.push_str(&format!("; reproducible; runs as {}: {version}", image::USER_ID));
        }
        eprintln!("xtask: image {line}");
        lines.push(line);
    }
    Ok(lines)
}

/// `cargo xtask image [--check] [--no-build]`.
fn run_image(check: bool, build: bool) -> u8 {
    match image_step(check, true, build) {
        Ok(_) => {
            let root = workspace_root();
            let dir = target_dir(&root).join("image");
            let dir = dir.strip_prefix(&root).unwrap_or(&dir).display().to_string();
            for i in image::IMAGES {
                eprintln!(
                    "xtask: publish with: skopeo copy oci-archive:{dir}/{0}.oci.tar docker://REGISTRY/{0}:{1}",
                    i.name,
                    image::TAG
                );
            }
            0
        }
        Err(e) => {
            eprintln!("xtask: image: {e}");
            1
        }
    }
}

/// The cargo invocation of `cargo xtask conformance`: the `bc-conformance` binary with
/// `args` (it reads its token from the environment, which cargo passes on).
fn conformance_command(args: &[String]) -> Vec<String> {
    let mut cmd: Vec<String> =
        ["run", "--quiet", "-p", "bc-conformance", "--bin", "bc-conformance", "--"]
            .iter()
            .map(|s| s.to_string())
            .collect();
    cmd.extend(args.iter().cloned());
    cmd
}

/// `cargo xtask docs`: run bc-api's `gen_docs` example into `docs/reference`.
fn run_docs() -> u8 {
    let dir = workspace_root().join(DOCS_DIR);
    let args: Vec<String> = ["run", "--quiet", "-p", "bc-api", "--example", "gen_docs", "--"]
        .iter()
        .map(|s| s.to_string())
        .chain([dir.display().to_string()])
        .collect();
    run_cargo(&args, None)
}

/// Entry point: parse the task and run it; services are stopped before exiting.
fn main() -> ExitCode {
    let args: Vec<String> = env::args().skip(1).collect();
    let code = match parse_args(&args) {
        Ok(Task::Test(test)) => run_tests(&test),
        Ok(Task::Ci(test)) => run_ci(&test),
        Ok(Task::Bench { names, quick, args }) => run_benches(&names, quick, &args),
        Ok(Task::Docs) => run_docs(),
        Ok(Task::Image { check, build }) => run_image(check, build),
        Ok(Task::Conformance(args)) => run_cargo(&conformance_command(&args), None),
        Ok(Task::KubeWire(a)) => match kube_wire::run(&a, &workspace_root()) {
            Ok(out) => {
                println!("wrote {}", out.display());
                0
            }
            Err(e) => {
                eprintln!("xtask kube-wire: {e}");
                1
            }
        },
        Ok(Task::Help) => {
            println!("{USAGE}");
            0
        }
        Err(e) => {
            eprintln!("xtask: {e}\n\n{USAGE}");
            2
        }
    };
    ExitCode::from(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Turns string literals into owned arguments.
    fn args(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn parses_test_with_flags_and_extra_args() {
        assert_eq!(
            parse_args(&args(&["test", "--require-services", "--", "-p", "bc-store"])),
            Ok(Task::Test(TestArgs {
                require_services: true,
                soak: false,
                extra: args(&["-p", "bc-store"])
            }))
        );
        assert_eq!(
            parse_args(&args(&["test", "--soak", "--", "-p", "bc-reconciler"])),
            Ok(Task::Test(TestArgs {
                require_services: false,
                soak: true,
                extra: args(&["-p", "bc-reconciler"])
            }))
        );
        assert_eq!(
            parse_args(&args(&["ci", "--soak"])),
            Ok(Task::Ci(TestArgs { require_services: true, soak: true, extra: vec![] }))
        );
        assert_eq!(parse_args(&args(&["test"])), Ok(Task::Test(TestArgs::default())));
        assert!(parse_args(&args(&["test", "-p", "x"])).is_err());
        assert!(parse_args(&args(&[])).is_err());
        assert!(parse_args(&args(&["frobnicate"])).is_err());
    }

    #[test]
    fn parses_docs() {
        assert_eq!(parse_args(&args(&["docs"])), Ok(Task::Docs));
        assert!(parse_args(&args(&["docs", "x"])).is_err());
        assert!(parse_args(&args(&["docs", "--", "x"])).is_err());
    }

    #[test]
    fn parses_image() {
        assert_eq!(parse_args(&args(&["image"])), Ok(Task::Image { check: false, build: true }));
        assert_eq!(
            parse_args(&args(&["image", "--no-build", "--check"])),
            Ok(Task::Image { check: true, build: false })
        );
        assert!(parse_args(&args(&["image", "--fast"])).is_err());
        assert!(parse_args(&args(&["image", "--", "x"])).is_err());
        // One release build for the three binaries.
        assert_eq!(
            image_build_command(),
            args(&[
                "build",
                "--release",
                "-p",
                "bc-api-bin",
                "-p",
                "bc-reconciler",
                "-p",
                "bcd",
                "--bins"
            ])
        );
    }

    #[test]
    fn parses_kube_wire() {
        let a =
            parse_args(&args(&["kube-wire", "--api", "a", "--apimachinery", "m", "--tag", "t"]));
        let Ok(Task::KubeWire(k)) = a else { panic!("{a:?}") };
        assert_eq!((k.api.to_str(), k.tag.as_str(), k.out), (Some("a"), "t", None));
        assert!(parse_args(&args(&["kube-wire", "--api", "a"])).is_err());
    }

    #[test]
    fn parses_conformance_and_runs_the_binary_with_its_arguments() {
        let task = parse_args(&args(&["conformance", "--digitalocean-api-url", "http://x"]));
        let Ok(Task::Conformance(a)) = task else { panic!("{task:?}") };
        assert_eq!(
            conformance_command(&a),
            args(&[
                "run",
                "--quiet",
                "-p",
                "bc-conformance",
                "--bin",
                "bc-conformance",
                "--",
                "--digitalocean-api-url",
                "http://x"
            ])
        );
        assert_eq!(parse_args(&args(&["conformance"])), Ok(Task::Conformance(vec![])));
        assert!(parse_args(&args(&["conformance", "--", "x"])).is_err());
        assert!(USAGE.contains("BC_CONFORMANCE_DIGITALOCEAN_TOKEN"));
        assert!(USAGE.contains("BC_CONFORMANCE_GKE_KEY_FILE"));
        let task = parse_args(&args(&["conformance", "--provider", "gke"]));
        let Ok(Task::Conformance(a)) = task else { panic!("{task:?}") };
        assert_eq!(conformance_command(&a)[7..], args(&["--provider", "gke"])[..]);
    }

    #[test]
    fn ci_always_requires_services() {
        assert_eq!(
            parse_args(&args(&["ci"])),
            Ok(Task::Ci(TestArgs { require_services: true, soak: false, extra: vec![] }))
        );
    }

    #[test]
    fn parses_bench_names_and_rejects_unknown_ones() {
        assert_eq!(
            parse_args(&args(&["bench", "store", "--", "--sizes", "1"])),
            Ok(Task::Bench {
                names: args(&["store"]),
                quick: false,
                args: args(&["--sizes", "1"])
            })
        );
        assert_eq!(
            parse_args(&args(&["bench", "--quick", "api", "sim"])),
            Ok(Task::Bench { names: args(&["api", "sim"]), quick: true, args: vec![] })
        );
        assert!(parse_args(&args(&["bench", "--fast"])).is_err());
        let err = parse_args(&args(&["bench", "nope"])).unwrap_err();
        assert!(err.contains("store") && err.contains("sim"), "{err}");
    }

    /// Pretends every package has a library except `xtask`.
    fn lib_unless_xtask(package: &str) -> bool {
        package != "xtask"
    }

    #[test]
    fn package_selection_replaces_workspace() {
        let nextest = test_commands(true, &args(&["-p", "bc-testkit"]), &lib_unless_xtask);
        assert_eq!(nextest[0], args(&["test", "--no-run", "-p", "bc-testkit"]));
        assert_eq!(
            nextest[1],
            args(&["nextest", "run", "--no-fail-fast", "--no-tests=warn", "-p", "bc-testkit"])
        );
        assert_eq!(nextest[2], args(&["test", "--doc", "-p", "bc-testkit"]));
        let plain = test_commands(
            false,
            &args(&["--package=bc-store", "--", "--nocapture"]),
            &lib_unless_xtask,
        );
        assert_eq!(
            plain,
            vec![args(&["test", "--no-fail-fast", "--package=bc-store", "--", "--nocapture"])]
        );
        let all = test_commands(false, &[], &lib_unless_xtask);
        assert_eq!(all, vec![args(&["test", "--workspace", "--no-fail-fast"])]);
    }

    #[test]
    fn doctest_run_keeps_only_selection_args() {
        let extra = args(&["--retries", "2", "-pbc-sim", "--features", "fake", "--", "-p", "x"]);
        assert_eq!(
            selection_args(&extra, &lib_unless_xtask),
            Some(args(&["-p", "bc-sim", "--features", "fake"]))
        );
        let cmds = test_commands(true, &args(&["--retries", "2"]), &lib_unless_xtask);
        assert_eq!(cmds[0], args(&["test", "--workspace", "--no-run"]), "no nextest option");
        assert_eq!(cmds[2], args(&["test", "--workspace", "--doc"]));
        // A `-p` after the inner `--` belongs to the test binary, not to cargo.
        assert!(!selects_packages(&args(&["--", "-p"])));
        // The caller's own --workspace is not doubled.
        let own =
            test_commands(false, &args(&["--workspace", "--exclude", "x"]), &lib_unless_xtask);
        assert_eq!(own[0], args(&["test", "--no-fail-fast", "--workspace", "--exclude", "x"]));
    }

    #[test]
    fn doctest_run_drops_packages_without_a_library() {
        let both = args(&["-p", "xtask", "--package", "bc-sim"]);
        assert_eq!(selection_args(&both, &lib_unless_xtask), Some(args(&["-p", "bc-sim"])));
        let only_bin = test_commands(true, &args(&["-p", "xtask"]), &lib_unless_xtask);
        assert_eq!(only_bin.len(), 2, "a build and a run, no doctest run: {only_bin:?}");
    }

    #[test]
    fn a_background_build_reports_success_and_failure_with_its_log() {
        let dir = bc_testkit::server::unique_temp_dir("xtask-background").unwrap();
        let ok = BackgroundBuild::start_cargo(&args(&["--version"]), dir.join("ok.log"))
            .expect("nice and cargo run");
        let line = ok.finish();
        assert!(line.contains("done in"), "{line}");
        let log = std::fs::read_to_string(dir.join("ok.log")).unwrap();
        assert!(log.starts_with("cargo "), "the child's output goes to its log: {log}");
        let bad = BackgroundBuild::start_cargo(&args(&["no-such-command"]), dir.join("bad.log"))
            .expect("nice and cargo run");
        let line = bad.finish();
        assert!(line.contains("FAILED") && line.contains("bad.log"), "{line}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn ci_builds_without_incremental_unless_the_caller_chose() {
        assert!(builds_once(Some("true"), false));
        assert!(builds_once(Some(" 1 "), false));
        assert!(!builds_once(Some("true"), true), "the caller's CARGO_INCREMENTAL wins");
        assert!(!builds_once(Some("false"), false));
        assert!(!builds_once(None, false));
    }

    #[test]
    fn reads_package_names_from_manifests() {
        let manifest = "[package]\nname = \"bc-x\"\n[dependencies]\nname = \"no\"\n";
        assert_eq!(manifest_package_name(manifest).as_deref(), Some("bc-x"));
        assert_eq!(manifest_package_name("[workspace]\nmembers = []\n"), None);
        let root = workspace_root();
        assert!(!package_has_lib(&root, "xtask"));
        assert!(package_has_lib(&root, "bc-testkit"));
    }

    #[test]
    fn release_builds_remap_the_checkouts_paths_after_the_callers_flags() {
        let (root, target, home) =
            (Path::new("/w/bc"), Path::new("/w/bc/target"), Path::new("/root/.cargo"));
        let remaps = "--remap-path-prefix=/root/.cargo=/cargo\x1f\
                      --remap-path-prefix=/w/bc=/bc\x1f\
                      --remap-path-prefix=/w/bc/target=/bc/target";
        assert_eq!(release_rustflags(root, target, Some(home), None, None), remaps);
        assert_eq!(
            release_rustflags(root, target, Some(home), None, Some(" -C  target-cpu=native ")),
            format!("-C\x1ftarget-cpu=native\x1f{remaps}")
        );
        // Cargo reads CARGO_ENCODED_RUSTFLAGS before RUSTFLAGS; so does xtask.
        assert_eq!(
            release_rustflags(root, target, Some(home), Some("--cfg\x1fa b"), Some("-Cx")),
            format!("--cfg\x1fa b\x1f{remaps}")
        );
        assert_eq!(
            release_rustflags(root, target, None, Some(""), None),
            "--remap-path-prefix=/w/bc=/bc\x1f--remap-path-prefix=/w/bc/target=/bc/target"
        );
    }

    #[test]
    fn bench_builds_once_and_passes_quick_first() {
        let chosen: Vec<Bench> =
            BENCHES.iter().copied().filter(|b| b.name == "authz" || b.name == "api").collect();
        assert_eq!(
            build_commands(&chosen),
            vec![args(&[
                "build",
                "--release",
                "-p",
                "bc-api",
                "--example",
                "authz_bench",
                "--example",
                "api_bench"
            ])]
        );
        // The memory benchmark runs bc-api and bc-reconciler: the images' binaries, built
        // apart from the example (whose dev-dependency features would change them).
        let memory: Vec<Bench> = BENCHES.iter().copied().filter(|b| b.name == "memory").collect();
        let cmds = build_commands(&memory);
        assert_eq!(cmds.len(), 2);
        assert_eq!(cmds[1], image_build_command());
        assert!(!cmds[0].contains(&"--bins".to_string()), "{cmds:?}");
        for p in memory[0].runs {
            assert!(image::IMAGES.iter().any(|i| i.package == *p), "{p} is an image's package");
        }
        assert_eq!(bench_args(true, &args(&["--x"])), args(&["--quick", "--x"]));
        assert_eq!(bench_args(false, &[]), Vec::<String>::new());
    }

    #[test]
    fn bench_table_points_at_example_files() {
        let store = BENCHES.iter().find(|b| b.name == "store").unwrap();
        assert_eq!(store.package, "bc-store");
        assert_eq!(store.example_path(), Path::new("crates/store/examples/store_bench.rs"));
    }

    #[test]
    fn the_memory_bench_runs_the_binaries_the_images_build() {
        let memory = BENCHES.iter().find(|b| b.name == "memory").expect("the memory bench");
        let env = binaries_env(memory, Path::new("/t/release"));
        assert_eq!(
            env,
            vec![
                ("BC_API_BIN".to_string(), PathBuf::from("/t/release/bc-api")),
                ("BC_RECONCILER_BIN".to_string(), PathBuf::from("/t/release/bc-reconciler")),
            ]
        );
        let store = BENCHES.iter().find(|b| b.name == "store").expect("the store bench");
        assert!(binaries_env(store, Path::new("/t/release")).is_empty());
    }
}
