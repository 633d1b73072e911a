//! A small W3C WebDriver client over reqwest (already in the tree) for the console's
//! browser tests: Debian's `chromedriver` driving headless `chromium`, both on loopback.
//!
//! Invariants: chromedriver runs in its own process group, and dropping [`Browser`]
//! kills that group, so neither chromedriver nor the chromium it started outlives the
//! test, even when the test panics; every wait is a bounded count of short polls that
//! fails naming what it waited for.

use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use serde_json::{Value, json};

/// The W3C name of an element reference in a JSON answer.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";
/// Polls a wait makes before it fails.
pub const POLLS: u32 = 600;
/// The pause between polls.
pub const POLL: Duration = Duration::from_millis(100);

/// chromium and chromedriver, or `None` (after a "skipped" line) when they are missing and
/// not required; with services required a missing one fails the test.
pub fn tools() -> Option<(PathBuf, PathBuf)> {
    let why = "the console's browser tests drive headless Chromium; Debian's chromium and chromium-driver";
    let chromium = bc_sim::testing::required_tool("chromium", why)?;
    let driver = bc_sim::testing::required_tool("chromedriver", why)?;
    Some((chromium, driver))
}

/// One chromedriver with one browser session.
pub struct Browser {
    http: reqwest::Client,
    session: String,
    driver: std::process::Child,
    _profile: bc_stack::testing::Scratch,
}

impl Browser {
    /// Starts chromedriver on a free loopback port and a headless chromium session with a
    /// fresh profile, a window of `width`×`height`, and the browser and network logs on.
    pub async fn start(chromium: &Path, driver: &Path, width: u32, height: u32) -> Self {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
            l.local_addr().expect("its address").port()
        };
        let mut cmd = std::process::Command::new(driver);
        cmd.arg(format!("--port={port}"))
            .arg("--allowed-ips=127.0.0.1")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        for v in
            ["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"]
        {
            cmd.env_remove(v);
        }
        #[cfg(unix)]
        {
            use std::os::unix::process::CommandExt as _;
            cmd.process_group(0);
        }
        let child = cmd.spawn().expect("starting chromedriver");
        let profile = bc_stack::testing::Scratch::new("bc-console-chromium");
        let http = reqwest::Client::builder().no_proxy().build().expect("a client");
        let base = format!("http://127.0.0.1:{port}");
        let mut browser = Self { http, session: String::new(), driver: child, _profile: profile };
        let mut ready = false;
        for _ in 0..POLLS {
            if let Ok(r) = browser.http.get(format!("{base}/status")).send().await
                && r.status().is_success()
            {
                ready = true;
                break;
            }
            tokio::time::sleep(POLL).await;
        }
        assert!(ready, "chromedriver did not answer /status on port {port}");
        let args = [
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            "--no-proxy-server",
            &format!("--user-data-dir={}", browser._profile.path().display()),
            &format!("--window-size={width},{height}"),
        ];
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": chromium, "args": args},
            "goog:loggingPrefs": {"browser": "ALL", "performance": "ALL"},
        }}});
        let r = browser.raw("POST", &format!("{base}/session"), Some(caps)).await;
        browser.session = format!(
            "{base}/session/{}",
            r["sessionId"].as_str().unwrap_or_else(|| panic!("no session: {r}"))
        );
        browser
    }

    async fn raw(&self, verb: &str, url: &str, body: Option<Value>) -> Value {
        self.try_raw(verb, url, body).await.unwrap_or_else(|e| panic!("{e}"))
    }

    /// A WebDriver call; `Err` names the call and WebDriver's error.
    async fn try_raw(&self, verb: &str, url: &str, body: Option<Value>) -> Result<Value, String> {
        let req = match verb {
            "GET" => self.http.get(url),
            "DELETE" => self.http.delete(url),
            _ => self.http.post(url).json(&body.unwrap_or_else(|| json!({}))),
        };
        let resp = req.timeout(Duration::from_secs(60)).send().await.expect("chromedriver answers");
        let status = resp.status();
        let v: Value = resp.json().await.expect("chromedriver's JSON");
        if !status.is_success() {
            return Err(format!("WebDriver {verb} {url}: {status} {v}"));
        }
        Ok(v["value"].clone())
    }

    async fn cmd(&self, verb: &str, path: &str, body: Option<Value>) -> Value {
        self.raw(verb, &format!("{}{path}", self.session), body).await
    }

    /// Opens `url`.
    pub async fn goto(&self, url: &str) {
        self.cmd("POST", "/url", Some(json!({ "url": url }))).await;
    }

    /// The address bar's URL.
    pub async fn url(&self) -> String {
        self.cmd("GET", "/url", None).await.as_str().unwrap_or_default().to_owned()
    }

    /// Runs `script` (a function body; `arguments` are `args`) and returns its result.
    pub async fn js(&self, script: &str, args: Value) -> Value {
        self.cmd("POST", "/execute/sync", Some(json!({ "script": script, "args": args }))).await
    }

    /// Polls `expr` (a JavaScript expression) until it is truthy; returns its value.
    pub async fn wait(&self, what: &str, expr: &str) -> Value {
        let script = format!("try {{ return ({expr}); }} catch (e) {{ return null; }}");
        let mut last = Value::Null;
        for _ in 0..POLLS {
            last = self.js(&script, json!([])).await;
            let truthy = match &last {
                Value::Null => false,
                Value::Bool(b) => *b,
                Value::String(s) => !s.is_empty(),
                Value::Number(n) => n.as_f64() != Some(0.0),
                _ => true,
            };
            if truthy {
                return last;
            }
            tokio::time::sleep(POLL).await;
        }
        panic!("gave up waiting for {what} ({expr}); last: {last}; page: {}", self.text().await);
    }

    /// The page's visible text (for failure messages).
    pub async fn text(&self) -> String {
        let t = self.js("return document.body ? document.body.innerText : ''", json!([])).await;
        t.as_str().unwrap_or_default().chars().take(2000).collect()
    }

    /// The element `css` selects.
    pub async fn find(&self, css: &str) -> String {
        let v = self
            .cmd("POST", "/element", Some(json!({"using": "css selector", "value": css})))
            .await;
        v[ELEMENT].as_str().unwrap_or_else(|| panic!("no element {css}: {v}")).to_owned()
    }

    /// Clicks what `css` selects; found again when a live refresh redrew it between the
    /// finding and the click.
    pub async fn click(&self, css: &str) {
        let mut last = String::new();
        for _ in 0..POLLS {
            let id = self.find(css).await;
            let url = format!("{}/element/{id}/click", self.session);
            match self.try_raw("POST", &url, None).await {
                Ok(_) => return,
                Err(e) if e.contains("stale element reference") => last = e,
                Err(e) => panic!("{e}"),
            }
            tokio::time::sleep(POLL).await;
        }
        panic!("clicking {css}: {last}");
    }

    /// Types `text` into what `css` selects (as keystrokes; `\u{E007}` is Enter).
    pub async fn type_into(&self, css: &str, text: &str) {
        let id = self.find(css).await;
        self.cmd("POST", &format!("/element/{id}/value"), Some(json!({ "text": text }))).await;
    }

    /// Presses `keys` (WebDriver's key codes: `\u{E004}` Tab, `\u{E007}` Enter) on
    /// whatever has the focus, as a person at the keyboard does.
    pub async fn keys(&self, keys: &str) {
        let mut actions = Vec::new();
        for k in keys.chars() {
            actions.push(json!({"type": "keyDown", "value": k.to_string()}));
            actions.push(json!({"type": "keyUp", "value": k.to_string()}));
        }
        let body = json!({"actions": [{"type": "key", "id": "keyboard", "actions": actions}]});
        self.cmd("POST", "/actions", Some(body)).await;
    }

    /// Presses Tab until the focus is on what `css` selects (a hundred times at most),
    /// and checks that the focus shows there (an outline).
    pub async fn tab_to(&self, css: &str) {
        let focused =
            "return !!document.activeElement && document.activeElement.matches(arguments[0])";
        for _ in 0..100 {
            if self.js(focused, json!([css])).await == Value::Bool(true) {
                let shown = "const s = getComputedStyle(document.activeElement);                              return s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) > 0";
                assert_eq!(
                    self.js(shown, json!([])).await,
                    true,
                    "the focus on {css} is not visible"
                );
                return;
            }
            self.keys("\u{E004}").await;
        }
        panic!("a hundred Tabs never reached {css}; page: {}", self.text().await);
    }

    /// Sets the window's size.
    pub async fn resize(&self, width: u32, height: u32) {
        self.cmd("POST", "/window/rect", Some(json!({"width": width, "height": height}))).await;
    }

    /// Saves a PNG of the viewport to `path`.
    pub async fn screenshot(&self, path: &Path) {
        let b64 = self.cmd("GET", "/screenshot", None).await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(b64.as_str().expect("a base64 PNG"))
            .expect("base64");
        std::fs::create_dir_all(path.parent().expect("a directory")).expect("screenshot dir");
        std::fs::write(path, png).expect("writing the screenshot");
    }

    /// The entries of a chromedriver log (`browser`: the console; `performance`: the
    /// DevTools network events) since the last read.
    pub async fn log(&self, kind: &str) -> Vec<Value> {
        let v = self.cmd("POST", "/se/log", Some(json!({ "type": kind }))).await;
        v.as_array().cloned().unwrap_or_default()
    }

    /// Ends the session (chromium exits) and chromedriver.
    pub async fn close(mut self) {
        let _ = self.http.delete(&self.session).timeout(Duration::from_secs(20)).send().await;
        self.kill();
    }

    fn kill(&mut self) {
        // The whole group: chromedriver and the chromium it started.
        let _ = std::process::Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.driver.id())])
            .status();
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if self.driver.try_wait().ok().flatten().is_none() {
            self.kill();
        }
    }
}
