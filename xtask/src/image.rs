//! `cargo xtask image`: OCI images of `bc-api`, `bc-reconciler` and `bcd` built without a
//! container daemon — a root filesystem holding the release binary, the shared libraries
//! `ldd` says it loads (the dynamic loader too), the CA bundle and a non-root user —
//! written as an OCI image layout inside a tar archive (skopeo's `oci-archive:`).
//!
//! Invariant: the same binaries, host files and `SOURCE_DATE_EPOCH` give byte-identical
//! archives, hence the same digests: tar entries are sorted by path with fixed owners,
//! modes and mtimes, gzip carries no time and no name, and the JSON documents are written
//! in one fixed key order.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest as _, Sha256};

use crate::json;

/// One image: what it is called and what it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Image {
    /// The image's name (the archive is `<name>.oci.tar`).
    pub name: &'static str,
    /// The cargo package that builds the binary.
    pub package: &'static str,
    /// The binary's name; it is installed as `/usr/local/bin/<binary>`.
    pub binary: &'static str,
    /// The image's default arguments after the entrypoint.
    pub cmd: &'static [&'static str],
    /// What the image is for (its `org.opencontainers.image.description`).
    pub description: &'static str,
}

/// The three images `cargo xtask image` builds.
pub const IMAGES: &[Image] = &[
    Image {
        name: "bc-api",
        package: "bc-api-bin",
        binary: "bc-api",
        cmd: &["serve"],
        description: "The Better Compute API (bc-api serve; bc-api migrate for the schema).",
    },
    Image {
        name: "bc-reconciler",
        package: "bc-reconciler",
        binary: "bc-reconciler",
        cmd: &[],
        description: "The Better Compute reconcilers (one replica of many).",
    },
    Image {
        name: "bcd",
        package: "bcd",
        binary: "bcd",
        cmd: &[],
        description: "bcd, the Better Compute node agent the substrate DaemonSet runs.",
    },
];

/// The uid and gid every image runs as (the user `nonroot`): numeric and not 0, so a pod
/// with `runAsNonRoot: true` and no `runAsUser` passes the kubelet's check of the image.
pub const USER_ID: u32 = 65532;
/// The user's name in the image's `/etc/passwd` and `/etc/group`.
pub const USER_NAME: &str = "nonroot";
/// Where the binary is installed in the image.
pub const BIN_DIR: &str = "usr/local/bin";
/// The CA bundle's path, on the host and in the image (Debian's `ca-certificates`).
pub const CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";
/// The tag (`org.opencontainers.image.ref.name`) of the one manifest in each archive: the
/// workspace version, which the binaries print with `--version`.
pub const TAG: &str = env!("CARGO_PKG_VERSION");

/// One entry of a tar archive: a directory or a regular file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Path without a leading `/` (directories without a trailing one).
    pub path: String,
    /// Permission bits (`0o755`, `0o1777`, …).
    pub mode: u32,
    /// Owner uid and gid.
    pub owner: u32,
    /// `None` for a directory, the contents for a file.
    pub body: Option<Vec<u8>>,
}

/// A tar archive (POSIX ustar) of `entries`, sorted by path, every entry with `mtime`;
/// an error names a path that does not fit ustar's name fields or that appears twice.
pub fn tar(entries: &[Entry], mtime: u64) -> Result<Vec<u8>, String> {
    let mut sorted: Vec<&Entry> = entries.iter().collect();
    sorted.sort_by(|a, b| a.path.cmp(&b.path));
    if let Some(w) = sorted.windows(2).find(|w| w[0].path == w[1].path) {
        return Err(format!("tar: {} appears twice", w[0].path));
    }
    let mut out = Vec::new();
    for e in sorted {
        let (name, size, flag) = match &e.body {
            None => (format!("{}/", e.path), 0, b'5'),
            Some(body) => (e.path.clone(), body.len(), b'0'),
        };
        out.extend_from_slice(&header(&name, e, size as u64, flag, mtime)?);
        if let Some(body) = &e.body {
            out.extend_from_slice(body);
            out.resize(out.len().next_multiple_of(512), 0);
        }
    }
    // Two zero blocks end the archive.
    out.resize(out.len() + 1024, 0);
    Ok(out)
}

/// A ustar header block.
fn header(name: &str, e: &Entry, size: u64, flag: u8, mtime: u64) -> Result<[u8; 512], String> {
    let mut h = [0u8; 512];
    let (prefix, rest) = split_name(name).ok_or_else(|| format!("tar: path too long: {name}"))?;
    h[..rest.len()].copy_from_slice(rest.as_bytes());
    let fields: [(std::ops::Range<usize>, u64); 5] = [
        (100..108, u64::from(e.mode)),
        (108..116, u64::from(e.owner)),
        (116..124, u64::from(e.owner)),
        (124..136, size),
        (136..148, mtime),
    ];
    for (range, value) in fields {
        let digits = range.len() - 1;
        let text = format!("{value:0digits$o}");
        if text.len() > digits {
            return Err(format!("tar: {value} does not fit a header field of {name}"));
        }
        h[range.start..range.start + digits].copy_from_slice(text.as_bytes());
    }
    h[156] = flag;
    h[257..265].copy_from_slice(b"ustar\x0000");
    h[345..345 + prefix.len()].copy_from_slice(prefix.as_bytes());
    // The checksum is summed with its own field as spaces.
    h[148..156].fill(b' ');
    let sum: u32 = h.iter().map(|b| u32::from(*b)).sum();
    h[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
    Ok(h)
}

/// Splits a path into ustar's prefix (≤ 155 bytes) and name (≤ 100 bytes) at a `/`.
fn split_name(path: &str) -> Option<(&str, &str)> {
    if path.len() <= 100 {
        return Some(("", path));
    }
    let trimmed = path.trim_end_matches('/');
    trimmed.match_indices('/').map(|(i, _)| i).find_map(|i| {
        let (prefix, name) = (&path[..i], &path[i + 1..]);
        (prefix.len() <= 155 && name.len() <= 100).then_some((prefix, name))
    })
}

/// `bytes` gzipped with no time, no name and a fixed OS byte, so equal input gives equal
/// output.
pub fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::GzBuilder::new()
        .mtime(0)
        .operating_system(255)
        .write(Vec::new(), flate2::Compression::best());
    // Writing to a Vec cannot fail.
    let _ = encoder.write_all(bytes);
    encoder.finish().unwrap_or_default()
}

/// `sha256:<hex>` of `bytes`.
pub fn digest(bytes: &[u8]) -> String {
    let mut out = String::from("sha256:");
    for b in Sha256::digest(bytes) {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// The absolute paths of the shared libraries in `ldd`'s output, the dynamic loader
/// included (the kernel's vDSO has no file and is left out); none for a static binary.
/// A library `ldd` could not find is an error naming it.
pub fn shared_libraries(ldd_output: &str) -> Result<Vec<String>, String> {
    let mut paths = Vec::new();
    for line in ldd_output.lines().map(str::trim) {
        if line.contains("statically linked") || line.contains("not a dynamic executable") {
            continue;
        }
        let path = match line.split_once(" => ") {
            Some((name, rest)) => {
                if rest.trim() == "not found" {
                    return Err(format!("ldd: {name} not found"));
                }
                rest.split(" (").next().unwrap_or("").trim()
            }
            None => line.split(" (").next().unwrap_or("").trim(),
        };
        if path.starts_with('/') {
            paths.push(path.to_owned());
        }
    }
    paths.sort();
    paths.dedup();
    Ok(paths)
}

/// Runs `ldd` on `binary` and returns [`shared_libraries`] of its output.
pub fn ldd(binary: &Path) -> Result<Vec<String>, String> {
    let out = Command::new("ldd")
        .arg(binary)
        .output()
        .map_err(|e| format!("cannot run ldd on {}: {e}", binary.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    // ldd exits 1 for a static binary, saying so.
    if !out.status.success() && !text.contains("not a dynamic executable") {
        return Err(format!(
            "ldd {} failed ({}): {}",
            binary.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    shared_libraries(&text)
}

/// The files of an image's root filesystem, read from the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inputs {
    /// The binary's bytes.
    pub binary: Vec<u8>,
    /// Each shared library's path (as the binary asks for it) and bytes.
    pub libraries: Vec<(String, Vec<u8>)>,
    /// The CA bundle.
    pub ca_bundle: Vec<u8>,
}

impl Inputs {
    /// Reads `binary`, the libraries `ldd` lists for it and the CA bundle.
    pub fn read(binary: &Path) -> Result<Inputs, String> {
        let read = |p: &Path| std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()));
        let libraries = ldd(binary)?
            .into_iter()
            .map(|p| read(Path::new(&p)).map(|bytes| (p, bytes)))
            .collect::<Result<_, _>>()?;
        let ca_bundle = read(Path::new(CA_BUNDLE)).map_err(|e| {
            format!("the CA bundle: {e} (Debian's package ca-certificates provides it)")
        })?;
        Ok(Inputs { binary: read(binary)?, libraries, ca_bundle })
    }
}

/// The root filesystem of `image`: the binary in [`BIN_DIR`], each library at the path the
/// binary asks for, the CA bundle, `/etc/passwd` and `/etc/group` with root and
/// [`USER_NAME`], a world-writable `/tmp` and the user's home; every directory on the
/// way, owned by root.
pub fn root_filesystem(image: &Image, inputs: &Inputs) -> Vec<Entry> {
    let mut files: Vec<(String, u32, u32, Option<Vec<u8>>)> = vec![
        (format!("{BIN_DIR}/{}", image.binary), 0o755, 0, Some(inputs.binary.clone())),
        (CA_BUNDLE.into(), 0o644, 0, Some(inputs.ca_bundle.clone())),
        (
            "etc/passwd".into(),
            0o644,
            0,
            Some(
                format!(
                    "root:x:0:0:root:/root:/sbin/nologin\n\
                     {USER_NAME}:x:{USER_ID}:{USER_ID}:{USER_NAME}:/home/{USER_NAME}:/sbin/nologin\n"
                )
                .into_bytes(),
            ),
        ),
        (
            "etc/group".into(),
            0o644,
            0,
            Some(format!("root:x:0:\n{USER_NAME}:x:{USER_ID}:\n").into_bytes()),
        ),
        // glibc resolves host names through this file; without it its default differs.
        ("etc/nsswitch.conf".into(), 0o644, 0, Some(b"hosts: files dns\n".to_vec())),
        ("tmp".into(), 0o1777, 0, None),
        (format!("home/{USER_NAME}"), 0o755, USER_ID, None),
    ];
    for (path, bytes) in &inputs.libraries {
        // The loader must be executable; libraries are read and mapped.
        let mode = if path.contains("/ld-linux") || path.contains("/ld64") { 0o755 } else { 0o644 };
        files.push((path.clone(), mode, 0, Some(bytes.clone())));
    }
    let mut out: BTreeMap<String, Entry> = BTreeMap::new();
    for (path, mode, owner, body) in files {
        let path = path.trim_start_matches('/').to_owned();
        for (i, _) in path.match_indices('/') {
            let dir = path[..i].to_owned();
            out.entry(dir.clone()).or_insert(Entry {
                path: dir,
                mode: 0o755,
                owner: 0,
                body: None,
            });
        }
        out.insert(path.clone(), Entry { path, mode, owner, body });
    }
    out.into_values().collect()
}

/// An image written: where, its digest and its sizes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Built {
    /// The image.
    pub image: Image,
    /// The `oci-archive` file.
    pub archive: PathBuf,
    /// The manifest's digest: the image's digest once pushed (`sha256:…`).
    pub digest: String,
    /// Bytes of the archive file.
    pub archive_size: u64,
    /// Bytes of the compressed layer (what a node pulls).
    pub layer_size: u64,
    /// Bytes of the uncompressed layer (the root filesystem as a tar).
    pub rootfs_size: u64,
}

/// The OCI image layout of one image, as the entries of its archive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// `oci-layout`, `index.json` and `blobs/sha256/*`.
    pub entries: Vec<Entry>,
    /// The manifest's digest.
    pub digest: String,
    /// Bytes of the compressed layer.
    pub layer_size: u64,
    /// Bytes of the uncompressed layer.
    pub rootfs_size: u64,
}

/// The architecture's name in OCI terms (`amd64`, `arm64`).
pub fn oci_architecture() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

/// `secs` since the epoch as RFC 3339 UTC (`1970-01-01T00:00:00Z`).
fn rfc3339(secs: u64) -> String {
    let (y, mo, d, h, mi, s) = crate::report::utc_parts(secs);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
}

/// A JSON array of strings.
fn strings(items: &[&str]) -> String {
    let items: Vec<String> = items.iter().map(|s| json::string(s)).collect();
    format!("[{}]", items.join(","))
}

/// The OCI layout of `image` with one layer, the tar `layer` (entries dated `epoch`).
pub fn layout(image: &Image, layer: &[u8], epoch: u64) -> Layout {
    let gz = gzip(layer);
    let (diff_id, layer_digest) = (digest(layer), digest(&gz));
    let created = rfc3339(epoch);
    let entrypoint = format!("/{BIN_DIR}/{}", image.binary);
    let s = json::string;
    let config = format!(
        concat!(
            r#"{{"architecture":{arch},"config":{{"Cmd":{cmd},"Entrypoint":{entry},"#,
            r#""Env":{env},"Labels":{{"org.opencontainers.image.description":{desc},"#,
            r#""org.opencontainers.image.title":{name},"org.opencontainers.image.version":{tag}}},"#,
            r#""User":{user},"WorkingDir":"/"}},"created":{created},"#,
            r#""history":[{{"created":{created},"created_by":"cargo xtask image"}}],"#,
            r#""os":"linux","rootfs":{{"diff_ids":[{diff}],"type":"layers"}}}}"#
        ),
        arch = s(oci_architecture()),
        cmd = strings(image.cmd),
        entry = strings(&[&entrypoint]),
        env = strings(&[
            "PATH=/usr/local/bin",
            &format!("SSL_CERT_FILE={CA_BUNDLE}"),
            &format!("HOME=/home/{USER_NAME}"),
        ]),
        desc = s(image.description),
        name = s(image.name),
        tag = s(TAG),
        user = s(&format!("{USER_ID}:{USER_ID}")),
        created = s(&created),
        diff = s(&diff_id),
    );
    let manifest = format!(
        concat!(
            r#"{{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","#,
            r#""config":{{"mediaType":"application/vnd.oci.image.config.v1+json","digest":{cd},"size":{cs}}},"#,
            r#""layers":[{{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":{ld},"size":{ls}}}]}}"#
        ),
        cd = s(&digest(config.as_bytes())),
        cs = config.len(),
        ld = s(&layer_digest),
        ls = gz.len(),
    );
    let manifest_digest = digest(manifest.as_bytes());
    let index = format!(
        concat!(
            r#"{{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","#,
            r#""manifests":[{{"mediaType":"application/vnd.oci.image.manifest.v1+json","#,
            r#""digest":{md},"size":{ms},"platform":{{"architecture":{arch},"os":"linux"}},"#,
            r#""annotations":{{"org.opencontainers.image.ref.name":{tag}}}}}]}}"#
        ),
        md = s(&manifest_digest),
        ms = manifest.len(),
        arch = s(oci_architecture()),
        tag = s(TAG),
    );
    let (layer_size, rootfs_size) = (gz.len() as u64, layer.len() as u64);
    let file =
        |path: String, body: Vec<u8>| Entry { path, mode: 0o644, owner: 0, body: Some(body) };
    let dir = |path: &str| Entry { path: path.into(), mode: 0o755, owner: 0, body: None };
    let mut entries = vec![
        dir("blobs"),
        dir("blobs/sha256"),
        file("oci-layout".into(), br#"{"imageLayoutVersion":"1.0.0"}"#.to_vec()),
        file("index.json".into(), index.into_bytes()),
    ];
    for blob in [gz, config.into_bytes(), manifest.into_bytes()] {
        let hex = digest(&blob)["sha256:".len()..].to_owned();
        entries.push(file(format!("blobs/sha256/{hex}"), blob));
    }
    Layout { entries, digest: manifest_digest, layer_size, rootfs_size }
}

/// The image's `oci-archive` bytes and its [`Layout`] figures, from `inputs` with every
/// entry dated `epoch`.
pub fn archive(image: &Image, inputs: &Inputs, epoch: u64) -> Result<(Vec<u8>, Layout), String> {
    let layer = tar(&root_filesystem(image, inputs), epoch)?;
    let layout = layout(image, &layer, epoch);
    Ok((tar(&layout.entries, epoch)?, layout))
}

/// Builds `image` from the release `binary` into `<out_dir>/<name>.oci.tar`.
pub fn build(image: &Image, binary: &Path, out_dir: &Path, epoch: u64) -> Result<Built, String> {
    let inputs = Inputs::read(binary)?;
    let (bytes, layout) = archive(image, &inputs, epoch)?;
    std::fs::create_dir_all(out_dir).map_err(|e| format!("{}: {e}", out_dir.display()))?;
    let path = out_dir.join(format!("{}.oci.tar", image.name));
    std::fs::write(&path, &bytes).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(Built {
        image: *image,
        archive: path,
        digest: layout.digest,
        archive_size: bytes.len() as u64,
        layer_size: layout.layer_size,
        rootfs_size: layout.rootfs_size,
    })
}

/// The date every entry and the image config carry: `SOURCE_DATE_EPOCH` when set (the
/// reproducible-builds convention), else the epoch itself.
pub fn source_date_epoch(value: Option<&str>) -> Result<u64, String> {
    match value.map(str::trim).filter(|v| !v.is_empty()) {
        None => Ok(0),
        Some(v) => v
            .parse()
            .map_err(|_| format!("SOURCE_DATE_EPOCH {v:?} is not a whole number of seconds")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read as _;

    /// An image of nothing in particular, for the pure tests.
    const TEST_IMAGE: Image =
        Image { name: "t", package: "t", binary: "t", cmd: &["run"], description: "test" };

    fn inputs(binary: &[u8]) -> Inputs {
        Inputs {
            binary: binary.to_vec(),
            libraries: vec![
                ("/lib/x86_64-linux-gnu/libc.so.6".into(), b"libc".to_vec()),
                ("/lib64/ld-linux-x86-64.so.2".into(), b"loader".to_vec()),
            ],
            ca_bundle: b"-----BEGIN CERTIFICATE-----".to_vec(),
        }
    }

    fn scratch(kind: &str) -> PathBuf {
        bc_testkit::server::unique_temp_dir(kind).expect("temp dir")
    }

    #[test]
    fn gnu_tar_reads_the_archive_sorted_with_fixed_owners_modes_and_times() {
        // Longer than ustar's 100-byte name field: split into prefix and name.
        let long = format!("{}/{}/{}", "d".repeat(60), "e".repeat(60), "f".repeat(90));
        let file = |path: &str, mode, owner, body: &[u8]| Entry {
            path: path.into(),
            mode,
            owner,
            body: Some(body.to_vec()),
        };
        let dir = |path: &str, mode, owner| Entry { path: path.into(), mode, owner, body: None };
        let entries = vec![
            file("b/c", 0o644, 0, b"hello"),
            dir("b", 0o755, 0),
            dir("tmp", 0o1777, 0),
            dir("home", 0o755, USER_ID),
            dir(&long[..121], 0o755, 0),
            file(&long, 0o755, 0, &[7u8; 700]),
        ];
        let bytes = tar(&entries, 1_700_000_000).unwrap();
        assert_eq!(bytes.len() % 512, 0);
        let dir_path = scratch("tar");
        let archive = dir_path.join("a.tar");
        std::fs::write(&archive, &bytes).unwrap();
        let out = Command::new("tar")
            .args(["--numeric-owner", "--utc", "-tvf"])
            .arg(&archive)
            .output()
            .expect("GNU tar");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let listing = String::from_utf8_lossy(&out.stdout).into_owned();
        let lines: Vec<&str> = listing.lines().collect();
        assert_eq!(lines.len(), 6, "{listing}");
        // Sorted by path, each parent before what it holds.
        assert!(lines[0].starts_with("drwxr-xr-x 0/0 ") && lines[0].ends_with(" b/"), "{listing}");
        assert!(lines[1].starts_with("-rw-r--r-- 0/0 ") && lines[1].contains(" 5 "), "{listing}");
        assert!(lines[2].ends_with(&format!("{}/", &long[..121])), "{listing}");
        assert!(lines[3].ends_with(&long), "{listing}");
        assert!(lines[4].starts_with(&format!("drwxr-xr-x {USER_ID}/{USER_ID} ")), "{listing}");
        assert!(
            lines[5].starts_with("drwxrwxrwt 0/0 ") && lines[5].ends_with(" tmp/"),
            "{listing}"
        );
        assert!(lines.iter().all(|l| l.contains(" 2023-11-14 22:13 ")), "{listing}");
        let x = Command::new("tar").arg("-xf").arg(&archive).arg("-C").arg(&dir_path).status();
        assert!(x.unwrap().success());
        assert_eq!(std::fs::read(dir_path.join(&long)).unwrap(), vec![7u8; 700]);
        std::fs::remove_dir_all(&dir_path).unwrap();
        // A path twice, or one no ustar header can hold, is refused by name.
        let twice = tar(&[dir("b", 0o755, 0), dir("b", 0o700, 0)], 0).unwrap_err();
        assert!(twice.contains("b appears twice"), "{twice}");
        let too_long = tar(&[dir(&"x".repeat(300), 0o755, 0)], 0).unwrap_err();
        assert!(too_long.contains("path too long"), "{too_long}");
    }

    #[test]
    fn the_same_inputs_give_the_same_digest_and_other_inputs_another() {
        let (a, la) = archive(&TEST_IMAGE, &inputs(b"binary"), 0).unwrap();
        let (b, lb) = archive(&TEST_IMAGE, &inputs(b"binary"), 0).unwrap();
        assert_eq!(a, b, "byte for byte");
        assert_eq!(la.digest, lb.digest);
        let (_, other_binary) = archive(&TEST_IMAGE, &inputs(b"binary2"), 0).unwrap();
        let (_, other_date) = archive(&TEST_IMAGE, &inputs(b"binary"), 86_400).unwrap();
        assert_ne!(other_binary.digest, la.digest);
        assert_ne!(other_date.digest, la.digest);
    }

    #[test]
    fn the_root_filesystem_holds_the_binary_its_libraries_certificates_and_the_user() {
        let entries = root_filesystem(&TEST_IMAGE, &inputs(b"binary"));
        let by_path: BTreeMap<&str, &Entry> =
            entries.iter().map(|e| (e.path.as_str(), e)).collect();
        let body = |p: &str| by_path[p].body.as_deref().map(String::from_utf8_lossy);
        assert_eq!(body("usr/local/bin/t").as_deref(), Some("binary"));
        assert_eq!(by_path["usr/local/bin/t"].mode, 0o755);
        assert_eq!(body("lib/x86_64-linux-gnu/libc.so.6").as_deref(), Some("libc"));
        assert_eq!(by_path["lib64/ld-linux-x86-64.so.2"].mode, 0o755, "the loader runs");
        assert_eq!(by_path["lib/x86_64-linux-gnu/libc.so.6"].mode, 0o644);
        assert!(body("etc/ssl/certs/ca-certificates.crt").is_some());
        let passwd = body("etc/passwd").unwrap();
        assert!(passwd.contains(&format!("nonroot:x:{USER_ID}:{USER_ID}:")), "{passwd}");
        assert!(body("etc/group").unwrap().contains(&format!("nonroot:x:{USER_ID}:")));
        assert_eq!((by_path["tmp"].mode, by_path["tmp"].body.is_none()), (0o1777, true));
        assert_eq!(by_path["home/nonroot"].owner, USER_ID);
        // Every parent directory is there, owned by root.
        for e in &entries {
            if let Some((parent, _)) = e.path.rsplit_once('/') {
                let p = by_path.get(parent).unwrap_or_else(|| panic!("no parent of {}", e.path));
                assert!(p.body.is_none() && p.owner == 0, "{parent}");
            }
        }
    }

    #[test]
    fn the_layout_links_index_manifest_config_and_layer_by_digest() {
        let (_, layout) = archive(&TEST_IMAGE, &inputs(b"binary"), 0).unwrap();
        let blob = |d: &str| {
            let path = format!("blobs/sha256/{}", &d["sha256:".len()..]);
            let e = layout.entries.iter().find(|e| e.path == path).expect(&path);
            e.body.clone().unwrap()
        };
        let text = |e: &str| {
            let body = layout.entries.iter().find(|x| x.path == e).unwrap().body.clone().unwrap();
            json::parse(&String::from_utf8(body).unwrap()).unwrap()
        };
        let index = text("index.json");
        let m = &index.get("manifests").unwrap().as_array().unwrap()[0];
        assert_eq!(m.get("digest").unwrap().as_str(), Some(layout.digest.as_str()));
        let ref_name = m.get("annotations").unwrap().get("org.opencontainers.image.ref.name");
        assert_eq!(ref_name.unwrap().as_str(), Some(TAG));
        let manifest_bytes = blob(&layout.digest);
        assert_eq!(digest(&manifest_bytes), layout.digest);
        let manifest = json::parse(&String::from_utf8(manifest_bytes).unwrap()).unwrap();
        let config_digest =
            manifest.get("config").unwrap().get("digest").unwrap().as_str().unwrap();
        let config = json::parse(&String::from_utf8(blob(config_digest)).unwrap()).unwrap();
        let c = config.get("config").unwrap();
        assert_eq!(c.get("User").unwrap().as_str(), Some("65532:65532"));
        let entry = c.get("Entrypoint").unwrap().as_array().unwrap();
        assert_eq!(entry[0].as_str(), Some("/usr/local/bin/t"));
        assert_eq!(c.get("Cmd").unwrap().as_array().unwrap()[0].as_str(), Some("run"));
        assert_eq!(config.get("created").unwrap().as_str(), Some("1970-01-01T00:00:00Z"));
        // The layer: gzip of the root filesystem, whose digest is the config's diff id.
        let layer = &manifest.get("layers").unwrap().as_array().unwrap()[0];
        let gz = blob(layer.get("digest").unwrap().as_str().unwrap());
        assert_eq!(gz.len() as u64, layout.layer_size);
        assert_eq!(&gz[4..8], &[0, 0, 0, 0], "no time in the gzip header");
        let mut tar_bytes = Vec::new();
        flate2::read::GzDecoder::new(&gz[..]).read_to_end(&mut tar_bytes).unwrap();
        assert_eq!(tar_bytes.len() as u64, layout.rootfs_size);
        let diff_ids = config.get("rootfs").unwrap().get("diff_ids").unwrap();
        assert_eq!(diff_ids.as_array().unwrap()[0].as_str(), Some(digest(&tar_bytes).as_str()));
    }

    #[test]
    fn reads_the_libraries_from_ldd_output() {
        let out = "\tlinux-vdso.so.1 (0x00007ffd4d5f1000)\n\
                   \tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x00007f0b1c000000)\n\
                   \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f0b1be00000)\n\
                   \t/lib64/ld-linux-x86-64.so.2 (0x00007f0b1c9d0000)\n";
        assert_eq!(
            shared_libraries(out).unwrap(),
            vec![
                "/lib/x86_64-linux-gnu/libc.so.6",
                "/lib/x86_64-linux-gnu/libgcc_s.so.1",
                "/lib64/ld-linux-x86-64.so.2"
            ]
        );
        let missing = shared_libraries("\tlibssl.so.3 => not found\n").unwrap_err();
        assert!(missing.contains("libssl.so.3 not found"), "{missing}");
        assert!(shared_libraries("\tstatically linked\n").unwrap().is_empty());
        // The real ldd on a real binary lists the loader and libc.
        let host = ldd(Path::new("/usr/bin/true")).unwrap();
        assert!(host.iter().any(|p| p.contains("/ld-linux")), "{host:?}");
        assert!(host.iter().any(|p| p.ends_with("/libc.so.6")), "{host:?}");
    }

    #[test]
    fn reads_source_date_epoch() {
        assert_eq!(source_date_epoch(None), Ok(0));
        assert_eq!(source_date_epoch(Some("")), Ok(0));
        assert_eq!(source_date_epoch(Some("1700000000")), Ok(1_700_000_000));
        assert!(source_date_epoch(Some("yesterday")).unwrap_err().contains("SOURCE_DATE_EPOCH"));
        assert_eq!(rfc3339(1_700_000_000), "2023-11-14T22:13:20Z");
    }
}
