//! Issue 29, item 9: what `bc-api dev` writes for its clients — the operator token, the
//! secret key, `bc.toml`, the simulator's account — is in its directory, readable by its
//! owner only, before the server answers anything: a client that waits for `/healthz`
//! and then reads `token` finds it.
//!
//! Invariants: loopback only; the probe's attempts are bounded; the stack is stopped.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bc_stack::dev::DevStack;
use bc_stack::testing::{self, Backend, Scratch};

/// Attempts of the probe, a millisecond or two apart (ten seconds at most in all).
const PROBES: usize = 5_000;

/// One `GET /healthz` at `addr`; whether it answered 200.
fn healthz(addr: std::net::SocketAddr) -> bool {
    let Ok(mut conn) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) else {
        return false;
    };
    let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
    let req = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    if conn.write_all(req.as_bytes()).is_err() {
        return false;
    }
    let mut answer = String::new();
    let _ = conn.read_to_string(&mut answer);
    answer.starts_with("HTTP/1.1 200")
}

/// The files of `dir` a client of the dev stack reads.
fn client_files(dir: &Path) -> Vec<PathBuf> {
    ["token", "secret.key", "bc.toml", "simulator.json"].iter().map(|f| dir.join(f)).collect()
}

#[cfg(unix)]
fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path).map(|m| m.permissions().mode() & 0o777).unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_is_written_owner_only_before_the_server_answers() {
    let scratch = Scratch::new("bc-dev-files");
    let mut options = testing::options(Backend::Sqlite, scratch.path()).await.expect("sqlite");
    // A port known before the stack binds it, so the probe can knock from the start.
    let free = std::net::TcpListener::bind("127.0.0.1:0").expect("loopback");
    let addr = free.local_addr().expect("address");
    drop(free);
    options.listen = addr;
    let dir = options.dir.clone();
    let probe = {
        let dir = dir.clone();
        tokio::task::spawn_blocking(move || {
            for _ in 0..PROBES {
                if healthz(addr) {
                    // The first answer: what a client reads now.
                    return client_files(&dir)
                        .into_iter()
                        .filter(|f| !f.exists())
                        .map(|f| f.display().to_string())
                        .collect::<Vec<_>>();
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            panic!("/healthz never answered 200 in {PROBES} attempts");
        })
    };
    let stack = DevStack::start(options).await.expect("dev stack");
    let missing = probe.await.expect("probe");
    assert!(missing.is_empty(), "the server answered before it wrote {missing:?}");
    #[cfg(unix)]
    for f in client_files(&dir) {
        assert_eq!(mode(&f), 0o600, "{}", f.display());
    }
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .expect("dir")
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".new"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    stack.stop().await;
}
