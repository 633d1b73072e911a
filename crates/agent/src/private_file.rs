//! Files that may hold a secret (a key, a token, a simulated cloud's CA key), written the
//! one way every part of the workspace writes them: [`write_private`].
//!
//! Invariant: such a file is readable by its owner only from the moment it exists — it is
//! created with mode 0600, never made at the umask's mode and narrowed after (another user
//! could open it in between and keep reading) — and a reader of its path sees the old
//! content or the new one, whole, never a truncated or half-written file.

use std::io::Write as _;
use std::path::{Path, PathBuf};

/// Writes `bytes` to `path`, readable by its owner only: into a new file beside it created
/// with mode 0600 (`create_new`, so a file left there by someone else is never written
/// through), synced, then renamed over `path`. A leftover of a write that stopped half-way
/// (same name) is removed first. Not for two writers of one path at once: they share the
/// temporary name (every caller writes each of its files from one place at a time).
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let new = temporary(path);
    // A leftover (a crash between create and rename) is ours to replace; whatever its
    // mode, it is not reused.
    match std::fs::remove_file(&new) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let mut open = std::fs::OpenOptions::new();
    open.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut open, 0o600);
    let written = open.open(&new).and_then(|mut file| {
        file.write_all(bytes)?;
        file.sync_all()
    });
    match written.and_then(|()| std::fs::rename(&new, path)) {
        Ok(()) => Ok(()),
        Err(e) => {
            // Best effort: a half-written file is not left beside the real one.
            let _ = std::fs::remove_file(&new);
            Err(e)
        }
    }
}

/// The temporary file [`write_private`] writes before renaming: `.<name>.new` beside
/// `path` (hidden, and on the same file system, so the rename is atomic).
fn temporary(path: &Path) -> PathBuf {
    let mut name = std::ffi::OsString::from(".");
    name.push(path.file_name().unwrap_or_default());
    name.push(".new");
    path.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A new empty directory under the system temp dir (removed by the test).
    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "bc-agent-{name}-{}-{:08x}",
            std::process::id(),
            rand::random::<u32>()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[cfg(unix)]
    fn mode(path: &Path) -> u32 {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    #[cfg(unix)]
    fn a_new_or_replaced_file_is_owner_only_and_no_leftover_is_reused() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = scratch("private-mode");
        let path = dir.join("secret.key");
        write_private(&path, b"one\n").unwrap();
        assert_eq!(mode(&path), 0o600);
        assert_eq!(std::fs::read(&path).unwrap(), b"one\n");

        // A file that was world-readable is replaced by an owner-only one (a write through
        // it would keep its mode).
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        // A world-readable leftover of a stopped write, which a reader may hold open: the
        // secret never goes into it.
        let leftover = temporary(&path);
        std::fs::write(&leftover, b"stale").unwrap();
        std::fs::set_permissions(&leftover, std::fs::Permissions::from_mode(0o666)).unwrap();
        let held = std::fs::File::open(&leftover).unwrap();
        write_private(&path, b"two\n").unwrap();
        assert_eq!(mode(&path), 0o600);
        assert_eq!(std::fs::read(&path).unwrap(), b"two\n");
        let mut seen = String::new();
        std::io::Read::read_to_string(&mut &held, &mut seen).unwrap();
        assert_eq!(seen, "stale", "the leftover's open reader never sees the new text");
        assert!(!leftover.exists(), "no temporary file is left");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_reader_sees_the_old_text_or_the_new_whole_never_part() {
        let dir = scratch("private-atomic");
        let path = dir.join("state.json");
        // Large enough that a write through the file would be seen half-done.
        let (a, b) = (vec![b'a'; 1 << 20], vec![b'b'; 1 << 19]);
        write_private(&path, &a).unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let reader = {
            let (path, stop, a, b) = (path.clone(), stop.clone(), a.clone(), b.clone());
            std::thread::spawn(move || {
                let mut reads = 0u32;
                while !stop.load(std::sync::atomic::Ordering::SeqCst) && reads < 100_000 {
                    let got = std::fs::read(&path).expect("the path always exists");
                    assert!(
                        got == a || got == b,
                        "a reader saw {} bytes, part of a write",
                        got.len()
                    );
                    reads += 1;
                }
                reads
            })
        };
        for i in 0..100 {
            write_private(&path, if i % 2 == 0 { &b } else { &a }).unwrap();
        }
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        assert!(reader.join().expect("no reader saw a partial file") > 0);
        let names: Vec<_> =
            std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["state.json"], "no temporary file is left");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
