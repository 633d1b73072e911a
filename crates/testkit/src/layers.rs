//! The module graph of a crate's sources, read from its `use`s and paths, and the circles
//! in it: a test holds a crate to importing downward only (a module never reaches, through
//! any chain of imports, back to itself).
//!
//! Invariant: an edge is a path in code (tests, `#[cfg(test)]` modules and comments left
//! out) that starts `crate::` or `super::`, or, in `lib.rs`, a `use` of a top-level
//! module; it points at the longest module of the crate the path names. A module's own
//! descendants are not edges (declaring a child is containment, not an import), so a
//! parent that calls its children and children that use their parent's helpers are no
//! circle; everything else that ties two modules both ways is.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module's path from the crate root (`""` for the root, `"methods::pools"`).
type Module = String;

/// The modules of the crate whose `src` is `src`, each with the modules it uses.
pub fn module_graph(src: &Path) -> BTreeMap<Module, BTreeSet<Module>> {
    let mut files = BTreeMap::new();
    collect(src, src, &mut files);
    let modules: BTreeSet<Module> = files.keys().cloned().collect();
    files
        .iter()
        .map(|(module, text)| {
            let code = code_of(text);
            let mut uses = BTreeSet::new();
            for path in paths(&code, module, module.is_empty()) {
                if let Some(target) = longest_module(&modules, &path)
                    && target != *module
                    && !is_descendant(&target, module)
                {
                    uses.insert(target);
                }
            }
            (module.clone(), uses)
        })
        .collect()
}

/// Every circle of the crate's module graph, each as the modules on it (sorted), the
/// circles sorted; empty when the crate imports downward only.
pub fn module_cycles(src: &Path) -> Vec<Vec<Module>> {
    let graph = module_graph(src);
    let mut cycles: Vec<Vec<Module>> = strongly_connected(&graph)
        .into_iter()
        .filter(|c| c.len() > 1)
        .map(|mut c| {
            c.sort();
            c
        })
        .collect();
    cycles.sort();
    cycles
}

/// Appends every `.rs` file under `dir` (all depths, each directory's entries in name
/// order) to `out`; a directory that cannot be read adds nothing. The one walker of the
/// repository's sources for the tests that scan them.
pub fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut entries: Vec<_> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The `.rs` files under `dir`, keyed by module path.
fn collect(root: &Path, dir: &Path, out: &mut BTreeMap<Module, String>) {
    let mut paths = Vec::new();
    rust_files(dir, &mut paths);
    for path in paths {
        let rel = path.strip_prefix(root).unwrap_or(&path).with_extension("");
        let mut parts: Vec<String> =
            rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
        if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
            parts.pop();
        }
        if let Ok(text) = std::fs::read_to_string(&path) {
            out.insert(parts.join("::"), text);
        }
    }
}

/// The code of a file: its `#[cfg(test)]` part and its comments left out.
fn code_of(text: &str) -> String {
    let code = text.split("#[cfg(test)]").next().unwrap_or_default();
    code.lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The module paths the code names, resolved to paths from the crate root.
fn paths(code: &str, module: &str, is_root: bool) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let here: Vec<String> =
        module.split("::").filter(|s| !s.is_empty()).map(str::to_owned).collect();
    for (i, _) in code.match_indices("crate::").chain(code.match_indices("super::")) {
        if code[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let (base, rest) = if code[i..].starts_with("crate::") {
            (Vec::new(), &code[i + "crate::".len()..])
        } else {
            let mut rest = &code[i..];
            let mut base = here.clone();
            while let Some(r) = rest.strip_prefix("super::") {
                base.pop();
                rest = r;
            }
            (base, rest)
        };
        out.extend(expand(&base, rest));
    }
    if is_root {
        for line in code.lines() {
            let t = line.trim_start();
            if let Some(rest) = t.strip_prefix("pub use ").or_else(|| t.strip_prefix("use ")) {
                out.extend(expand(&[], rest));
            }
        }
    }
    out
}

/// `a::b::{c, d::e}` after `base` → `base::a::b::c`, `base::a::b::d::e`.
fn expand(base: &[String], rest: &str) -> Vec<Vec<String>> {
    let mut path = base.to_vec();
    let mut s = rest;
    loop {
        let end = s.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(s.len());
        let (segment, after) = s.split_at(end);
        if segment.is_empty() {
            if let Some(group) = after.strip_prefix('{') {
                let close = matching_brace(group);
                return split_top_level(&group[..close])
                    .into_iter()
                    .flat_map(|item| expand(&path, item.trim()))
                    .collect();
            }
            return vec![path];
        }
        path.push(segment.to_owned());
        match after.strip_prefix("::") {
            Some(next) => s = next,
            None => return vec![path],
        }
    }
}

/// The index of the `}` closing a group whose `{` came just before `s`.
fn matching_brace(s: &str) -> usize {
    let mut depth = 0;
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => return i,
            '}' => depth -= 1,
            _ => {}
        }
    }
    s.len()
}

/// The items of a `{…}` group, split at its own commas.
fn split_top_level(s: &str) -> Vec<&str> {
    let (mut out, mut depth, mut start) = (Vec::new(), 0, 0);
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

/// The longest prefix of `path` that is a module of the crate (the root when none is).
fn longest_module(modules: &BTreeSet<Module>, path: &[String]) -> Option<Module> {
    (0..=path.len()).rev().map(|n| path[..n].join("::")).find(|m| modules.contains(m))
}

/// Whether `module` lies inside `ancestor` (the root holds every module).
fn is_descendant(module: &str, ancestor: &str) -> bool {
    ancestor.is_empty() || module.starts_with(&format!("{ancestor}::"))
}

/// Tarjan's strongly connected components of `graph`.
fn strongly_connected(graph: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    struct State<'a> {
        graph: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        out: Vec<Vec<Module>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        let graph = s.graph;
        for w in graph.get(v).into_iter().flatten() {
            if !s.index.contains_key(w.as_str()) {
                visit(s, w);
                let low = s.low[w.as_str()].min(s.low[v]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w.as_str()) {
                let low = s.index[w.as_str()].min(s.low[v]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.to_owned());
                if w == v {
                    break;
                }
            }
            s.out.push(component);
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A throwaway crate `src` with these files.
    fn crate_of(files: &[(&str, &str)]) -> std::path::PathBuf {
        let dir = crate::server::unique_temp_dir("layers").unwrap();
        for (path, text) in files {
            let p = dir.join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        dir
    }

    #[test]
    fn finds_a_circle_through_any_path_form_and_none_through_containment() {
        let dir = crate_of(&[
            ("lib.rs", "pub mod a;\npub mod b;\npub mod c;\npub mod m;\npub use a::X;\n"),
            ("a.rs", "use crate::b::{Y, z::Z};\n"),
            ("b/mod.rs", "pub mod z;\npub fn f() { crate::c::g() }\n"),
            ("b/z.rs", "use super::Y; // crate::a in a comment\n"),
            ("c.rs", "pub fn g() { crate::a::h() }\n#[cfg(test)]\nuse crate::m;\n"),
            ("m/mod.rs", "pub mod k;\nfn f() { k::g() }\n"),
            ("m/k.rs", "use super::f;\n"),
        ]);
        let graph = module_graph(&dir);
        assert_eq!(graph["a"], BTreeSet::from(["b".to_owned(), "b::z".to_owned()]));
        assert_eq!(graph["b::z"], BTreeSet::from(["b".to_owned()]));
        assert!(graph["c"].contains("a") && !graph["c"].contains("m"), "tests are not edges");
        assert_eq!(module_cycles(&dir), vec![vec!["a", "b", "b::z", "c"]]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
