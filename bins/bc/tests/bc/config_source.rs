//! Where `bc` takes its URL and token from, run as a user runs it: a checked-out directory's
//! `.bc-dev/` never receives a token from anywhere else (issue 29, item 1).
//!
//! The servers are loopback listeners that record what reaches them; each accepts for a
//! bounded time and is joined at the end of its test.

use std::io::{Read as _, Write as _};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_bc");
const USER_TOKEN: &str = "bc_usertokenusertokenusertokenusertokenuserto";

/// A loopback listener that records each request's head and answers 401 with an API error.
struct Capture {
    url: String,
    seen: Arc<Mutex<Vec<String>>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Capture {
    fn start() -> Capture {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        listener.set_nonblocking(true).expect("nonblocking");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (s, st) = (seen.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(60);
            while !st.load(std::sync::atomic::Ordering::SeqCst) && Instant::now() < deadline {
                match listener.accept() {
                    Ok((mut conn, _)) => {
                        let _ = conn.set_nonblocking(false);
                        let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
                        let mut buf = vec![0u8; 16 * 1024];
                        let mut len = 0;
                        while len < buf.len() {
                            match conn.read(&mut buf[len..]) {
                                Ok(0) | Err(_) => break,
                                Ok(n) => len += n,
                            }
                            if buf[..len].windows(4).any(|w| w == b"\r\n\r\n") {
                                break;
                            }
                        }
                        s.lock().expect("lock").push(String::from_utf8_lossy(&buf[..len]).into());
                        let body = r#"{"error":{"code":"UNAUTHENTICATED","message":"captured"}}"#;
                        let _ = write!(
                            conn,
                            "HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                            body.len()
                        );
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        });
        Capture { url, seen, stop, thread: Some(thread) }
    }

    /// What reached this server; stops it.
    fn finish(mut self) -> Vec<String> {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            t.join().expect("capture thread");
        }
        self.seen.lock().expect("lock").clone()
    }
}

/// `bc args…` in `dir` with HOME in `home` and no BC_* variables but `env`.
fn bc(dir: &Path, home: &Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .current_dir(dir)
        .env("HOME", home)
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("BC_API_URL")
        .env_remove("BC_TOKEN")
        .env_remove("BC_TENANT")
        .env("NO_COLOR", "1");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("bc runs")
}

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("bc-config-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch");
    dir
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("dir");
    std::fs::write(path, text).expect("write");
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_directory_naming_a_server_without_a_token_never_receives_the_users_token() {
    let repo_server = Capture::start();
    let user_server = Capture::start();
    let (repo, home) = (scratch("repo"), scratch("home"));
    write(&repo.join(".bc-dev/bc.toml"), &format!("api_url = \"{}\"\n", repo_server.url));
    write(
        &home.join(".config/bc/config.toml"),
        &format!("api_url = \"{}\"\ntoken = \"{USER_TOKEN}\"\n", user_server.url),
    );
    // The token in the user's config, and then in the environment.
    let from_config = bc(&repo, &home, &[], &["pools", "list", "--tenant", "t"]);
    let from_env =
        bc(&repo, &home, &[("BC_TOKEN", USER_TOKEN)], &["pools", "list", "--tenant", "t"]);
    let verbose = bc(&repo, &home, &[], &["pools", "list", "--tenant", "t", "-v"]);
    let (repo_seen, user_seen) = (repo_server.finish(), user_server.finish());
    assert!(
        repo_seen.is_empty(),
        "the server named by ./.bc-dev/ received: {repo_seen:?}\n{}\n{}",
        stderr(&from_config),
        stderr(&from_env)
    );
    assert!(
        user_seen.iter().any(|r| r.contains(&format!("Bearer {USER_TOKEN}"))),
        "the user's server gets the user's token: {user_seen:?}"
    );
    assert!(stderr(&verbose).contains("config.toml"), "-v names the source: {}", stderr(&verbose));
    let _ = std::fs::remove_dir_all(&repo);
    let _ = std::fs::remove_dir_all(&home);
}

#[test]
fn a_directory_naming_a_remote_server_with_its_token_is_not_used_without_dev() {
    let user_server = Capture::start();
    let (repo, home) = (scratch("remote"), scratch("remote-home"));
    write(
        &repo.join(".bc-dev/bc.toml"),
        "api_url = \"https://elsewhere.invalid\"\ntoken = \"bc_repo\"\n",
    );
    write(
        &home.join(".config/bc/config.toml"),
        &format!("api_url = \"{}\"\ntoken = \"{USER_TOKEN}\"\n", user_server.url),
    );
    let out = bc(&repo, &home, &[], &["pools", "list", "--tenant", "t", "-v"]);
    let seen = user_server.finish();
    assert!(seen.iter().any(|r| r.contains(USER_TOKEN)), "{seen:?}\n{}", stderr(&out));
    assert!(stderr(&out).contains("not loopback"), "-v says why: {}", stderr(&out));
    let _ = std::fs::remove_dir_all(&repo);
    let _ = std::fs::remove_dir_all(&home);
}

#[test]
fn a_loopback_dev_directory_with_both_is_used_and_dev_forces_it() {
    let dev_server = Capture::start();
    let (repo, home) = (scratch("dev"), scratch("dev-home"));
    write(&repo.join(".bc-dev/bc.toml"), &format!("api_url = \"{}\"\n", dev_server.url));
    write(&repo.join(".bc-dev/token"), "bc_devtoken\n");
    let out = bc(&repo, &home, &[], &["pools", "list", "--tenant", "t", "-v"]);
    let seen = dev_server.finish();
    assert!(seen.iter().any(|r| r.contains("Bearer bc_devtoken")), "{seen:?}\n{}", stderr(&out));
    assert!(stderr(&out).contains(".bc-dev"), "-v names the source: {}", stderr(&out));
    let _ = std::fs::remove_dir_all(&repo);
    let _ = std::fs::remove_dir_all(&home);
}
