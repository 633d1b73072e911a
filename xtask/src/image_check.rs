//! The check `cargo xtask test` runs on each image `cargo xtask image` wrote: skopeo reads
//! the archive as an OCI image with the digest we computed, umoci unpacks it into a
//! runtime bundle, and the binary runs from that bundle's root filesystem, chrooted, as
//! the user the image names — so a shared library missing from the image, a wrong
//! entrypoint or an image that runs as root fails here, not on a cluster.
//!
//! Invariant: every command it runs is bounded by `timeout`, and its scratch directory
//! is removed on every path.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use bc_testkit::server::{running_as_root, unique_temp_dir, which};

use crate::image::{Built, TAG, USER_ID};
use crate::json;

/// The longest any one command of the check may take.
const COMMAND_TIMEOUT_SECS: u32 = 300;

/// The programs the check runs, found on `PATH`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tools {
    skopeo: PathBuf,
    umoci: PathBuf,
    chroot: PathBuf,
}

/// Finds skopeo, umoci and chroot; an error says what is missing and which Debian
/// package brings it (chroot and umoci's unpacking as the image's owners need root).
pub fn tools() -> Result<Tools, String> {
    let find = |name: &str, package: &str| {
        which(name).ok_or_else(|| format!("{name} is not installed (Debian's package {package})"))
    };
    let tools = Tools {
        skopeo: find("skopeo", "skopeo")?,
        umoci: find("umoci", "umoci")?,
        chroot: which("chroot")
            .or_else(|| Some(PathBuf::from("/usr/sbin/chroot")).filter(|p| p.is_file()))
            .ok_or("chroot is not installed (Debian's package coreutils)")?,
    };
    if !running_as_root() {
        return Err("the image check runs the binaries with chroot, which needs root".into());
    }
    Ok(tools)
}

/// Runs `program args…` under `timeout`; an error quotes what it printed.
fn run(program: &Path, args: &[&str]) -> Result<Output, String> {
    let what = format!("{} {}", program.display(), args.join(" "));
    let out = Command::new("timeout")
        .arg(COMMAND_TIMEOUT_SECS.to_string())
        .arg(program)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run {what}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "`{what}` failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim(),
            String::from_utf8_lossy(&out.stdout).trim()
        ));
    }
    Ok(out)
}

/// Removes its directory when dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Checks one image; returns the line its binary printed for `--version`.
pub fn check(built: &Built, tools: &Tools) -> Result<String, String> {
    let name = built.image.name;
    let archive = built.archive.to_string_lossy().into_owned();
    // 1. skopeo reads it as an OCI image, with our digest and platform.
    let out = run(&tools.skopeo, &["inspect", &format!("oci-archive:{archive}")])?;
    let inspect = json::parse(&String::from_utf8_lossy(&out.stdout))
        .map_err(|e| format!("{name}: skopeo inspect printed no JSON: {e}"))?;
    let field = |k: &str| inspect.get(k).and_then(json::Value::as_str).unwrap_or("");
    if field("Digest") != built.digest {
        return Err(format!(
            "{name}: skopeo reads digest {} but the image was written with {}",
            field("Digest"),
            built.digest
        ));
    }
    if field("Os") != "linux" || field("Architecture") != crate::image::oci_architecture() {
        return Err(format!(
            "{name}: skopeo reads platform {}/{}",
            field("Os"),
            field("Architecture")
        ));
    }
    // 2. umoci unpacks it into a bundle (from the layout inside the archive).
    let scratch = Scratch(unique_temp_dir("image").map_err(|e| format!("scratch dir: {e}"))?);
    let layout = scratch.0.join("layout");
    let bundle = scratch.0.join("bundle");
    std::fs::create_dir(&layout).map_err(|e| format!("{}: {e}", layout.display()))?;
    run(Path::new("tar"), &["-xf", &archive, "-C", &layout.to_string_lossy()])?;
    run(
        &tools.umoci,
        &["unpack", "--image", &format!("{}:{TAG}", layout.display()), &bundle.to_string_lossy()],
    )?;
    // 3. The runtime config umoci made from the image: its user and its entrypoint.
    let config_path = bundle.join("config.json");
    let config = std::fs::read_to_string(&config_path)
        .map_err(|e| format!("{}: {e}", config_path.display()))
        .and_then(|t| json::parse(&t).map_err(|e| format!("{name}: config.json: {e}")))?;
    let process = config.get("process");
    let id = |k: &str| {
        process.and_then(|p| p.get("user")).and_then(|u| u.get(k)).and_then(json::Value::as_f64)
    };
    let (Some(uid), Some(gid)) = (id("uid"), id("gid")) else {
        return Err(format!("{name}: the bundle's config.json names no user"));
    };
    if uid == 0.0 || uid != f64::from(USER_ID) {
        return Err(format!("{name}: the image runs as uid {uid}, not {USER_ID}"));
    }
    let entrypoint = process
        .and_then(|p| p.get("args"))
        .and_then(json::Value::as_array)
        .and_then(|a| a.first())
        .and_then(json::Value::as_str)
        .ok_or_else(|| format!("{name}: the bundle's config.json has no args"))?
        .to_owned();
    // 4. The binary runs from its own root as that user: every library it loads is there.
    let rootfs = bundle.join("rootfs");
    let out = run(
        &tools.chroot,
        &[&format!("--userspec={uid}:{gid}"), &rootfs.to_string_lossy(), &entrypoint, "--version"],
    )
    .map_err(|e| format!("{name}: the binary does not run from its image: {e}"))?;
    let version = String::from_utf8_lossy(&out.stdout).lines().next().unwrap_or("").to_owned();
    if !version.contains(built.image.binary) {
        return Err(format!("{name}: `--version` printed {version:?}"));
    }
    Ok(version)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::{self, Image};

    /// An image of the host's `true` (dynamically linked against glibc, like ours).
    const TRUE: Image = Image {
        name: "true",
        package: "coreutils",
        binary: "true",
        cmd: &[],
        description: "the host's true",
    };

    /// The tools, or `None` (skipped) unless services are required.
    fn tools_or_skip() -> Option<Tools> {
        match tools() {
            Ok(t) => Some(t),
            Err(e) if bc_testkit::services_required() => panic!("image check: {e}"),
            Err(e) => {
                eprintln!("skipped: {e}");
                None
            }
        }
    }

    #[test]
    fn a_binary_runs_from_its_image_and_not_without_its_libraries() {
        let Some(tools) = tools_or_skip() else { return };
        let dir = Scratch(unique_temp_dir("image-test").expect("temp dir"));
        let built = image::build(&TRUE, Path::new("/usr/bin/true"), &dir.0, 0).expect("build");
        let version = check(&built, &tools).expect("the image of true runs");
        assert!(version.contains("true"), "{version}");
        // The same image without the libraries ldd found: the binary cannot start.
        let mut inputs = image::Inputs::read(Path::new("/usr/bin/true")).expect("inputs");
        assert!(!inputs.libraries.is_empty());
        inputs.libraries.clear();
        let (bytes, layout) = image::archive(&TRUE, &inputs, 0).expect("archive");
        let broken = dir.0.join("broken.oci.tar");
        std::fs::write(&broken, &bytes).expect("write");
        let broken = Built { archive: broken, digest: layout.digest, ..built };
        let e = check(&broken, &tools).unwrap_err();
        assert!(e.contains("does not run from its image"), "{e}");
    }
}
