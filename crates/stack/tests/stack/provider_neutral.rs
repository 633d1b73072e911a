//! No code above the adapters decides anything by a provider's name (SPEC §1, issue 27):
//! what differs between providers is declared once per adapter (`ProviderOffer`) and read
//! from there. This test reads the sources of every crate above `crates/providers` and
//! `crates/sim` and fails on any provider name it finds in code that runs.
//!
//! The rule, precisely. In the non-test code of `crates/{domain,store,reconcile,api,
//! api-types,client,agent,nats,stack}/src` and `bins/*/src` (comments removed; a
//! `#[cfg(test)]` item, a `#[cfg(test)] mod x;` file and the `testing` modules of test
//! fixtures are test code), there is:
//! - no `ProviderKind::<Variant>` path, nor an import of the variants (`ProviderKind::*`
//!   or `ProviderKind::{…}`), so no `match`, `==`, `matches!` or `if let` on one;
//! - no string literal that is a provider's name (`"digitalocean"`, `"gke"`, `"google"`,
//!   any case), so no `match` arm or comparison on the wire name either;
//! - no string literal holding a provider's own label domain, host or node-id scheme
//!   (`digitalocean.com`, `googleapis.com`, `google.com`, `digitalocean://`, `gce://`),
//!   which are facts only an adapter may know.
//!
//! Provider-neutral data is allowed only where [`ALLOWED`] lists it, each with its reason
//! and its exact count (so a new use in the same file still fails, and an entry that is
//! no longer needed fails too). Prose (descriptions, messages) that mentions a provider
//! is not a decision and is not matched: only whole-name literals and the markers above.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use bc_domain::model::ProviderKind;

/// Every provider's wire name; the `match` fails to compile when a provider is added, so
/// the list cannot fall behind.
fn provider_names() -> Vec<&'static str> {
    [ProviderKind::Digitalocean, ProviderKind::Gke]
        .into_iter()
        .map(|p| match p {
            ProviderKind::Digitalocean | ProviderKind::Gke => p.as_str(),
        })
        .chain(["google"])
        .collect()
}

/// Facts of one provider that only its adapter may hold.
const MARKERS: [&str; 5] =
    ["digitalocean.com", "googleapis.com", "google.com", "digitalocean://", "gce://"];

/// `(file, finding, count, why)`: the provider-neutral data that names a provider.
const ALLOWED: &[(&str, &str, usize, &str)] = &[
    (
        "crates/domain/src/model.rs",
        "ProviderKind::Digitalocean",
        1,
        "ProviderKind::as_str: the enum's own wire names",
    ),
    ("crates/domain/src/model.rs", "ProviderKind::Gke", 1, "ProviderKind::as_str"),
    ("crates/domain/src/model.rs", "\"digitalocean\"", 1, "ProviderKind::as_str"),
    ("crates/domain/src/model.rs", "\"gke\"", 1, "ProviderKind::as_str"),
    (
        "crates/domain/src/ports/credentials.rs",
        "ProviderKind::Digitalocean",
        2,
        "the credentials document is a tagged union whose variant is the provider (SPEC §5 \
         defines one document per provider): pairing variant and kind parses the document, \
         it decides no behaviour",
    ),
    ("crates/domain/src/ports/credentials.rs", "ProviderKind::Gke", 2, "as above"),
    (
        "crates/stack/src/wire.rs",
        "ProviderKind::Digitalocean",
        1,
        "the composition root registers each adapter's registry under its kind",
    ),
    ("crates/stack/src/wire.rs", "ProviderKind::Gke", 1, "as above"),
    (
        "crates/stack/src/dev.rs",
        "\"digitalocean\"",
        1,
        "the dev stack (a composition root) makes one account per simulated provider",
    ),
    ("crates/stack/src/dev.rs", "\"gke\"", 1, "as above"),
    (
        "crates/api/src/methods/provider_accounts.rs",
        "\"digitalocean\"",
        1,
        "the method's documented example body",
    ),
    (
        "crates/api/src/methods/agents.rs",
        "digitalocean://",
        1,
        "the documented example of a node's providerNodeId",
    ),
];

/// What a file holds once comments are gone: code with every literal emptied (so braces
/// and names inside strings never count) and the literals, each with its line.
struct Lexed {
    code: String,
    literals: Vec<(usize, usize, String)>,
}

/// Splits Rust source into code and string literals, dropping comments. Literals are
/// replaced by `""` in `code`; `literals` holds `(offset in code, line, content)`.
fn lex(src: &str) -> Lexed {
    let b: Vec<char> = src.chars().collect();
    let (mut code, mut literals) = (String::new(), Vec::new());
    let (mut i, mut line) = (0, 1);
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
            continue;
        }
        if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if b[i] == '\n' {
                        line += 1;
                        code.push('\n');
                    }
                    i += 1;
                }
            }
            continue;
        }
        // Raw strings: r"…", r#"…"#, br#"…"# (not the `r` ending an identifier).
        let prev_ident = i > 0 && ident(b[i - 1]);
        if c == 'r' && !prev_ident || (c == 'b' && next == Some('r') && !prev_ident) {
            let start = if c == 'b' { i + 2 } else { i + 1 };
            let mut j = start;
            while b.get(j) == Some(&'#') {
                j += 1;
            }
            if b.get(j) == Some(&'"') {
                let hashes = j - start;
                let (open, mut k) = (line, j + 1);
                let mut s = String::new();
                while k < b.len() {
                    if b[k] == '"' && (1..=hashes).all(|h| b.get(k + h) == Some(&'#')) {
                        break;
                    }
                    if b[k] == '\n' {
                        line += 1;
                    }
                    s.push(b[k]);
                    k += 1;
                }
                literals.push((code.len(), open, s));
                code.push_str("\"\"");
                i = k + 1 + hashes;
                continue;
            }
        }
        if c == '"' {
            let (open, mut k) = (line, i + 1);
            let mut s = String::new();
            while k < b.len() && b[k] != '"' {
                if b[k] == '\\' {
                    s.push(b[k]);
                    k += 1;
                }
                if b[k] == '\n' {
                    line += 1;
                }
                s.push(b[k]);
                k += 1;
            }
            literals.push((code.len(), open, s));
            code.push_str("\"\"");
            i = k + 1;
            continue;
        }
        if c == '\'' {
            // A char literal ('x', '\n', '\u{…}'), else a lifetime.
            let end = if next == Some('\\') {
                (i + 2..b.len()).find(|&k| b[k] == '\'')
            } else if b.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            if let Some(end) = end {
                code.push_str("' '");
                i = end + 1;
                continue;
            }
        }
        if c == '\n' {
            line += 1;
        }
        code.push(c);
        i += 1;
    }
    Lexed { code, literals }
}

/// The byte ranges of `code` that are test items (`#[cfg(test)]` and what it applies
/// to), and the names of the test modules declared as files (`#[cfg(test)] mod x;`).
fn test_items(code: &str) -> (Vec<(usize, usize)>, Vec<String>) {
    let (mut ranges, mut files) = (Vec::new(), Vec::new());
    let mut from = 0;
    while let Some(at) = code[from..].find("#[cfg(test)]").map(|a| a + from) {
        let rest = &code[at..];
        let brace = rest.find('{');
        let semi = rest.find(';');
        let end = match (brace, semi) {
            (Some(b), Some(s)) if s < b => {
                let decl = rest[..s].trim_end();
                if let Some(m) = decl.rsplit_once("mod ").map(|(_, m)| m.trim()) {
                    files.push(m.to_owned());
                }
                at + s + 1
            }
            (Some(b), _) => {
                let mut depth = 0;
                let mut end = code.len();
                for (k, ch) in code[at + b..].char_indices() {
                    match ch {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = at + b + k + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                end
            }
            (None, Some(s)) => at + s + 1,
            (None, None) => code.len(),
        };
        ranges.push((at, end));
        from = end;
    }
    (ranges, files)
}

/// The directory holding a module file's child modules.
fn children_dir(file: &Path) -> PathBuf {
    let dir = file.parent().unwrap().to_path_buf();
    match file.file_stem().and_then(|s| s.to_str()) {
        Some("mod" | "lib" | "main") => dir,
        Some(stem) => dir.join(stem),
        None => dir,
    }
}

/// Whether a file is test support: a `testing` module (fixtures for tests of this and
/// other crates, behind their `testing` feature).
fn is_testing_module(rel: &str) -> bool {
    rel.ends_with("/testing.rs") || rel.contains("/testing/")
}

/// Every finding of the rule in the scanned sources: `(file, finding) → lines`.
fn findings(root: &Path) -> BTreeMap<(String, String), Vec<usize>> {
    let crates =
        ["domain", "store", "reconcile", "api", "api-types", "client", "agent", "nats", "stack"];
    let mut dirs: Vec<PathBuf> =
        crates.iter().map(|c| root.join("crates").join(c).join("src")).collect();
    for bin in std::fs::read_dir(root.join("bins")).unwrap().flatten() {
        dirs.push(bin.path().join("src"));
    }
    let mut files = Vec::new();
    for d in &dirs {
        assert!(d.is_dir(), "{} is scanned and must exist", d.display());
        bc_testkit::layers::rust_files(d, &mut files);
    }
    files.sort();
    let mut test_files = Vec::new();
    let mut lexed = Vec::new();
    for f in &files {
        let l = lex(&std::fs::read_to_string(f).unwrap());
        let (ranges, mods) = test_items(&l.code);
        for m in mods {
            let dir = children_dir(f);
            test_files.push(dir.join(format!("{m}.rs")));
            test_files.push(dir.join(&m).join("mod.rs"));
        }
        lexed.push((f.clone(), l, ranges));
    }
    let names = provider_names();
    let mut out: BTreeMap<(String, String), Vec<usize>> = BTreeMap::new();
    for (f, l, ranges) in lexed {
        let rel = f.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
        if test_files.contains(&f) || is_testing_module(&rel) {
            continue;
        }
        let in_test = |at: usize| ranges.iter().any(|&(a, b)| a <= at && at < b);
        let line_of = |at: usize| l.code[..at].matches('\n').count() + 1;
        let mut from = 0;
        while let Some(at) = l.code[from..].find("ProviderKind::").map(|a| a + from) {
            let tail = &l.code[at + "ProviderKind::".len()..];
            let variant: String =
                tail.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            let finding = if tail.starts_with('*') || tail.starts_with('{') {
                Some("ProviderKind::* / ProviderKind::{…} (imports the variants)".to_owned())
            } else if variant.starts_with(|c: char| c.is_uppercase()) {
                Some(format!("ProviderKind::{variant}"))
            } else {
                None
            };
            if let Some(finding) = finding.filter(|_| !in_test(at)) {
                out.entry((rel.clone(), finding)).or_default().push(line_of(at));
            }
            from = at + 1;
        }
        for (at, line, s) in &l.literals {
            if in_test(*at) {
                continue;
            }
            let lower = s.trim().to_lowercase();
            if names.contains(&lower.as_str()) {
                out.entry((rel.clone(), format!("\"{lower}\""))).or_default().push(*line);
            }
            for m in MARKERS {
                if lower.contains(m) {
                    out.entry((rel.clone(), m.to_owned())).or_default().push(*line);
                }
            }
        }
    }
    out
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).ancestors().nth(2).unwrap().to_path_buf()
}

#[test]
fn no_code_above_the_adapters_matches_on_a_providers_name() {
    let found = findings(&workspace_root());
    let mut wrong = Vec::new();
    for ((file, finding), lines) in &found {
        let allowed = ALLOWED.iter().find(|(f, x, _, _)| f == file && x == finding);
        match allowed {
            Some((_, _, n, _)) if *n == lines.len() => {}
            Some((_, _, n, _)) => wrong.push(format!(
                "{file}: {finding} at lines {lines:?}: {} uses where {n} are allowed",
                lines.len()
            )),
            None => wrong.push(format!("{file}: {finding} at lines {lines:?}")),
        }
    }
    for (file, finding, _, _) in ALLOWED {
        if !found.contains_key(&(file.to_string(), finding.to_string())) {
            wrong.push(format!("{file}: {finding} is allowed but no longer used: drop the entry"));
        }
    }
    assert!(
        wrong.is_empty(),
        "a provider named above the adapters (declare it in the adapter's ProviderOffer \
         and read it there):\n{}",
        wrong.join("\n")
    );
}

/// The scanner itself: what it must see and what it must not.
#[test]
fn the_scanner_sees_names_in_code_and_not_in_comments_or_tests() {
    let src = r##"
//! Mentions "gke" in a comment: not code.
/* ProviderKind::Gke in a block comment */
fn f(p: ProviderKind, s: &str) -> bool {
    let c = '"'; let l: &'static str = "x";
    match s { "GKE" => true, _ => p == ProviderKind::Digitalocean }
}
const R: &str = r#"node gce://1 "quoted""#;
#[cfg(test)]
mod tests {
    fn t() { let _ = (ProviderKind::Gke, "digitalocean", '{'); }
}
#[cfg(test)]
mod more;
fn after() -> &'static str { "google" }
"##;
    let l = lex(src);
    let (ranges, files) = test_items(&l.code);
    assert_eq!(files, ["more"]);
    let outside: Vec<&str> = l
        .literals
        .iter()
        .filter(|(at, _, _)| !ranges.iter().any(|&(a, b)| a <= *at && *at < b))
        .map(|(_, _, s)| s.as_str())
        .collect();
    assert_eq!(outside, ["x", "GKE", "node gce://1 \"quoted\"", "google"]);
    let kinds: Vec<usize> = l.code.match_indices("ProviderKind::").map(|(at, _)| at).collect();
    let live: Vec<_> =
        kinds.iter().filter(|&&at| !ranges.iter().any(|&(a, b)| a <= at && at < b)).collect();
    assert_eq!(live.len(), 1, "only the comparison in f: {}", l.code);
    assert!(l.code[*live[0]..].starts_with("ProviderKind::Digitalocean"));
}
