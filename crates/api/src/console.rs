//! The web console (SPEC §14): static HTML, CSS and ES modules embedded in the binary and
//! served under [`CONSOLE_PATH`]; the page calls the same JSON API with the token its
//! reader gave it, so everything it shows is decided by the API, never by the browser.
//!
//! Invariants: every console answer — a page, an asset, or a 404 — carries
//! [`CONTENT_SECURITY_POLICY`], so the page runs only the scripts and styles served here
//! (no inline script or style, no request to another origin); nothing here reads a token
//! (it travels in the page's `Authorization` header to `/api/…` only); the assets are
//! fixed at build time, so what a test saw is what the binary serves.

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

/// Where the console is served.
pub const CONSOLE_PATH: &str = "/console";
/// The policy on every console answer.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'";

/// One embedded file: its name under `/console/`, media type and bytes.
struct Asset {
    name: &'static str,
    media_type: &'static str,
    body: &'static str,
}

const HTML: &str = "text/html; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";
const SVG: &str = "image/svg+xml";

/// The console's files (the page itself is `index.html`).
const ASSETS: &[Asset] = &[
    Asset { name: "index.html", media_type: HTML, body: include_str!("../console/index.html") },
    Asset { name: "console.css", media_type: CSS, body: include_str!("../console/console.css") },
    Asset { name: "app.js", media_type: JS, body: include_str!("../console/app.js") },
    Asset { name: "api.js", media_type: JS, body: include_str!("../console/api.js") },
    Asset { name: "views.js", media_type: JS, body: include_str!("../console/views.js") },
    Asset { name: "fmt.js", media_type: JS, body: include_str!("../console/fmt.js") },
    Asset { name: "favicon.svg", media_type: SVG, body: include_str!("../console/favicon.svg") },
];

/// The names of the embedded files, for tests that fetch each one.
pub fn asset_names() -> impl Iterator<Item = &'static str> {
    ASSETS.iter().map(|a| a.name)
}

/// The console's routes, to be merged into the API's router.
pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route(CONSOLE_PATH, get(|| async { serve("index.html") }))
        .route("/console/", get(|| async { serve("index.html") }))
        .route("/console/{*file}", get(|Path(file): Path<String>| async move { serve(&file) }))
}

fn serve(name: &str) -> Response {
    let mut resp = match ASSETS.iter().find(|a| a.name == name) {
        Some(a) => {
            let mut r = a.body.into_response();
            r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(a.media_type));
            r
        }
        // The path is not echoed: it is the caller's text.
        None => (StatusCode::NOT_FOUND, "no such file in the console\n").into_response(),
    };
    let h = resp.headers_mut();
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    // The page never hands its address to another site (it holds no secret, but its
    // route names objects).
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    // A new binary's assets are picked up at once; they are small.
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_asset_carries_the_policy_and_its_type() {
        for name in asset_names() {
            let r = serve(name);
            assert_eq!(r.status(), StatusCode::OK, "{name}");
            assert_eq!(r.headers()[header::CONTENT_SECURITY_POLICY], CONTENT_SECURITY_POLICY);
            assert!(r.headers().contains_key(header::CONTENT_TYPE));
        }
        let missing = serve("nope.js");
        assert_eq!(missing.status(), StatusCode::NOT_FOUND);
        assert_eq!(missing.headers()[header::CONTENT_SECURITY_POLICY], CONTENT_SECURITY_POLICY);
    }

    /// CSP `default-src 'self'` blocks inline scripts, inline `style` attributes and
    /// `<style>` elements: the page must hold none, or it would break in the browser.
    #[test]
    fn the_page_holds_nothing_inline_that_the_policy_blocks() {
        let html = ASSETS.iter().find(|a| a.name == "index.html").unwrap().body;
        assert!(!html.contains("style="), "an inline style attribute");
        assert!(!html.contains("<style"), "an inline style element");
        let lower = html.to_ascii_lowercase();
        for (i, _) in lower.match_indices(" on") {
            let word: String =
                lower[i + 3..].chars().take_while(|c| c.is_ascii_alphabetic()).collect();
            assert!(!lower[i + 3 + word.len()..].starts_with('='), "an inline handler on{word}=");
        }
        for (i, _) in html.match_indices("<script") {
            let tag = &html[i..i + html[i..].find('>').unwrap()];
            assert!(tag.contains("src="), "an inline script: {tag}");
        }
        for a in ASSETS.iter().filter(|a| a.media_type == JS) {
            assert!(!a.body.contains("eval("), "{} calls eval", a.name);
            assert!(!a.body.contains("innerHTML"), "{} writes innerHTML", a.name);
            // The one absolute URL allowed is SVG's namespace name, which is never fetched.
            let body = a.body.replace("http://www.w3.org/2000/svg", "");
            assert!(
                !body.contains("http://") && !body.contains("https://") && !body.contains("//cdn"),
                "{} names another origin",
                a.name
            );
        }
    }
}
