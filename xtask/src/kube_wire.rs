//! `cargo xtask kube-wire`: generates `crates/domain/src/kube_wire/table.rs`, the JSON
//! field rules of the Kubernetes types the simulated API server serves, from the Go
//! sources of `kubernetes/api` and `kubernetes/apimachinery` at one tag: per struct, per
//! field, its JSON name, `omitempty`, its Go type, its shape (pointer, slice, map,
//! struct, scalar, or a type with its own `MarshalJSON`) and its `+default=` marker.
//!
//! Invariants: every rule is read from the Go source (struct fields and their `json`
//! tags; inlined embedded structs flattened as `encoding/json` flattens them); a type the
//! generator cannot resolve, a tag option the encoder does not implement (`omitzero`,
//! `string`) or a line it cannot read fails the run instead of guessing; the sources are
//! read with `git show <tag>:<path>` from the given checkouts (bare or not) and never
//! copied, and the table's header names the repository, tag, commit and files.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where the table is written, relative to the workspace root.
pub const OUT: &str = "crates/domain/src/kube_wire/table.rs";

/// The arguments of `cargo xtask kube-wire`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Args {
    /// A checkout (or bare clone) of `kubernetes/api`.
    pub api: PathBuf,
    /// A checkout (or bare clone) of `kubernetes/apimachinery`.
    pub apimachinery: PathBuf,
    /// The tag of both (`v0.33.1`).
    pub tag: String,
    /// Where to write (default [`OUT`] under the workspace root).
    pub out: Option<PathBuf>,
}

impl Args {
    /// Parses `--api DIR --apimachinery DIR --tag TAG [--out FILE]`.
    pub fn parse(args: &[String]) -> Result<Self, String> {
        let mut map: HashMap<&str, String> = HashMap::new();
        let mut it = args.iter();
        while let Some(a) = it.next() {
            let key = match a.as_str() {
                "--api" | "--apimachinery" | "--tag" | "--out" => a.as_str(),
                other => return Err(format!("unknown argument `{other}` for `kube-wire`")),
            };
            let v = it.next().ok_or_else(|| format!("`{key}` needs a value"))?;
            map.insert(key, v.clone());
        }
        let need = |k: &str| map.get(k).cloned().ok_or_else(|| format!("`kube-wire` needs {k}"));
        Ok(Self {
            api: need("--api")?.into(),
            apimachinery: need("--apimachinery")?.into(),
            tag: need("--tag")?,
            out: map.get("--out").map(PathBuf::from),
        })
    }
}

/// One Go source file of the table: repository, path, and the package it declares.
struct SourceFile {
    repo: usize,
    path: &'static str,
    package: &'static str,
}

/// The repositories: display name, and which argument names its checkout.
const REPOS: [&str; 2] = ["kubernetes/api", "kubernetes/apimachinery"];

const FILES: &[SourceFile] = &[
    SourceFile { repo: 0, path: "core/v1/types.go", package: "k8s.io/api/core/v1" },
    SourceFile { repo: 0, path: "apps/v1/types.go", package: "k8s.io/api/apps/v1" },
    SourceFile {
        repo: 1,
        path: "pkg/apis/meta/v1/types.go",
        package: "k8s.io/apimachinery/pkg/apis/meta/v1",
    },
    SourceFile {
        repo: 1,
        path: "pkg/apis/meta/v1/watch.go",
        package: "k8s.io/apimachinery/pkg/apis/meta/v1",
    },
];

/// The short package names the table uses (`core/v1.Pod`).
fn short_package(import: &str) -> Option<&'static str> {
    Some(match import {
        "k8s.io/api/core/v1" => "core/v1",
        "k8s.io/api/apps/v1" => "apps/v1",
        "k8s.io/apimachinery/pkg/apis/meta/v1" => "meta/v1",
        _ => return None,
    })
}

/// The types with their own JSON form (a `MarshalJSON`, or a named string elsewhere):
/// (import path, name) → shape.
const SPECIAL: &[(&str, &str, &str)] = &[
    ("k8s.io/apimachinery/pkg/api/resource", "Quantity", "Quantity"),
    ("k8s.io/apimachinery/pkg/util/intstr", "IntOrString", "IntOrString"),
    ("k8s.io/apimachinery/pkg/runtime", "RawExtension", "Raw"),
    ("k8s.io/apimachinery/pkg/types", "UID", "Str"),
    ("k8s.io/apimachinery/pkg/apis/meta/v1", "Time", "Time"),
    ("k8s.io/apimachinery/pkg/apis/meta/v1", "MicroTime", "MicroTime"),
    ("k8s.io/apimachinery/pkg/apis/meta/v1", "Duration", "Duration"),
    ("k8s.io/apimachinery/pkg/apis/meta/v1", "FieldsV1", "Raw"),
];

/// The kinds the simulated API server serves (and their lists), and the metav1 types
/// its answers carry.
const ROOTS: &[(&str, &str)] = &[
    ("k8s.io/api/core/v1", "Namespace"),
    ("k8s.io/api/core/v1", "NamespaceList"),
    ("k8s.io/api/core/v1", "Secret"),
    ("k8s.io/api/core/v1", "SecretList"),
    ("k8s.io/api/core/v1", "ServiceAccount"),
    ("k8s.io/api/core/v1", "ServiceAccountList"),
    ("k8s.io/api/core/v1", "Node"),
    ("k8s.io/api/core/v1", "NodeList"),
    ("k8s.io/api/core/v1", "Pod"),
    ("k8s.io/api/core/v1", "PodList"),
    ("k8s.io/api/core/v1", "ConfigMap"),
    ("k8s.io/api/core/v1", "ConfigMapList"),
    ("k8s.io/api/core/v1", "Service"),
    ("k8s.io/api/core/v1", "ServiceList"),
    ("k8s.io/api/core/v1", "Event"),
    ("k8s.io/api/core/v1", "EventList"),
    ("k8s.io/api/core/v1", "PersistentVolume"),
    ("k8s.io/api/core/v1", "PersistentVolumeList"),
    ("k8s.io/api/apps/v1", "DaemonSet"),
    ("k8s.io/api/apps/v1", "DaemonSetList"),
    ("k8s.io/api/apps/v1", "Deployment"),
    ("k8s.io/api/apps/v1", "DeploymentList"),
    ("k8s.io/apimachinery/pkg/apis/meta/v1", "Status"),
    ("k8s.io/apimachinery/pkg/apis/meta/v1", "WatchEvent"),
    ("k8s.io/apimachinery/pkg/apis/meta/v1", "Table"),
    ("k8s.io/apimachinery/pkg/apis/meta/v1", "PartialObjectMetadata"),
    ("k8s.io/apimachinery/pkg/apis/meta/v1", "PartialObjectMetadataList"),
];

/// A Go type expression.
#[derive(Debug, Clone, PartialEq, Eq)]
enum GoType {
    /// `Name` or `pkg.Name` (the import path resolved; builtins have an empty one).
    Named(String, String),
    Ptr(Box<GoType>),
    Slice(Box<GoType>),
    Map(Box<GoType>),
    Interface,
}

/// A struct field as declared.
#[derive(Debug, Clone)]
struct RawField {
    /// `None` for an embedded field.
    name: Option<String>,
    ty: GoType,
    ty_text: String,
    tag: Option<String>,
    default: Option<String>,
}

#[derive(Debug, Clone)]
enum Decl {
    Struct(Vec<RawField>),
    Alias(GoType),
}

/// Declarations by (import path, name), and each package's constants (for `ref(X)`).
#[derive(Default)]
struct Universe {
    decls: HashMap<(String, String), Decl>,
    consts: HashMap<(String, String), String>,
}

fn git(dir: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .map_err(|e| format!("git in {}: {e}", dir.display()))?;
    if !out.status.success() {
        return Err(format!(
            "git {} in {}: {}",
            args.join(" "),
            dir.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    String::from_utf8(out.stdout).map_err(|e| format!("{}: not UTF-8: {e}", dir.display()))
}

/// Parses a type expression at the start of `s` in a file with `imports`, returning it
/// and the rest of the text.
fn parse_type<'a>(
    s: &'a str,
    package: &str,
    imports: &HashMap<String, String>,
) -> Result<(GoType, &'a str), String> {
    if let Some(rest) = s.strip_prefix('*') {
        let (t, rest) = parse_type(rest, package, imports)?;
        return Ok((GoType::Ptr(Box::new(t)), rest));
    }
    if let Some(rest) = s.strip_prefix("[]") {
        let (t, rest) = parse_type(rest, package, imports)?;
        return Ok((GoType::Slice(Box::new(t)), rest));
    }
    if let Some(rest) = s.strip_prefix("map[") {
        let close = rest.find(']').ok_or_else(|| format!("unclosed map type in `{s}`"))?;
        let (t, rest) = parse_type(&rest[close + 1..], package, imports)?;
        return Ok((GoType::Map(Box::new(t)), rest));
    }
    if let Some(rest) = s.strip_prefix("interface{}") {
        return Ok((GoType::Interface, rest));
    }
    let end = s.find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.')).unwrap_or(s.len());
    let word = &s[..end];
    if word.is_empty() {
        return Err(format!("no type at `{s}`"));
    }
    let named = match word.split_once('.') {
        Some((alias, name)) => {
            let path =
                imports.get(alias).ok_or_else(|| format!("unknown package `{alias}` in `{s}`"))?;
            GoType::Named(path.clone(), name.to_owned())
        }
        None if is_builtin(word) => GoType::Named(String::new(), word.to_owned()),
        None => GoType::Named(package.to_owned(), word.to_owned()),
    };
    Ok((named, &s[end..]))
}

fn is_builtin(w: &str) -> bool {
    matches!(
        w,
        "string"
            | "bool"
            | "byte"
            | "rune"
            | "int"
            | "int8"
            | "int16"
            | "int32"
            | "int64"
            | "uint"
            | "uint8"
            | "uint16"
            | "uint32"
            | "uint64"
            | "float32"
            | "float64"
    )
}

/// The imports of a Go file: alias → import path.
fn imports(src: &str) -> HashMap<String, String> {
    let mut out = HashMap::new();
    let mut inside = false;
    for line in src.lines() {
        let t = line.trim();
        if t == "import (" {
            inside = true;
            continue;
        }
        if inside && t == ")" {
            break;
        }
        let spec = if inside {
            t
        } else if let Some(rest) = t.strip_prefix("import ") {
            rest
        } else {
            continue;
        };
        let Some(q) = spec.find('"') else { continue };
        let path = spec[q + 1..].trim_end_matches('"').to_owned();
        let alias = spec[..q].trim();
        let alias = if alias.is_empty() {
            path.rsplit('/').next().unwrap_or_default().to_owned()
        } else {
            alias.to_owned()
        };
        out.insert(alias, path);
    }
    out
}

/// Strips a `//` comment (outside back-quoted tags).
fn strip_comment(line: &str) -> &str {
    let mut in_tag = false;
    let b = line.as_bytes();
    for i in 0..b.len() {
        match b[i] {
            b'`' => in_tag = !in_tag,
            b'/' if !in_tag && b.get(i + 1) == Some(&b'/') => return &line[..i],
            _ => {}
        }
    }
    line
}

/// Reads the type declarations and constants of one Go file into `u`.
fn parse_file(src: &str, package: &str, u: &mut Universe) -> Result<(), String> {
    let imports = imports(src);
    let lines: Vec<&str> = src.lines().collect();
    let mut i = 0;
    let mut markers: Vec<String> = Vec::new();
    while i < lines.len() {
        let raw = lines[i];
        i += 1;
        let line = raw.trim();
        // Constants, for `+default=ref(Name)`.
        if let Some((name, value)) = const_value(line) {
            u.consts.insert((package.to_owned(), name), value);
        }
        let Some(rest) = raw.strip_prefix("type ") else { continue };
        let rest = strip_comment(rest).trim();
        let (name, body) = rest.split_once(' ').ok_or_else(|| format!("odd type line `{raw}`"))?;
        let body = body.trim();
        let key = (package.to_owned(), name.to_owned());
        if body == "struct{}" || body == "struct {}" {
            u.decls.insert(key, Decl::Struct(Vec::new()));
            continue;
        }
        if body == "struct {" {
            let mut fields = Vec::new();
            let mut in_block_comment = false;
            loop {
                let Some(l) = lines.get(i) else {
                    return Err(format!("struct {name} is not closed"));
                };
                i += 1;
                let t = l.trim();
                if in_block_comment {
                    in_block_comment = !t.contains("*/");
                    continue;
                }
                if t.starts_with("/*") {
                    in_block_comment = !t.contains("*/");
                    continue;
                }
                if l.starts_with('}') {
                    break;
                }
                if let Some(c) = t.strip_prefix("//") {
                    if let Some(m) = c.trim().strip_prefix('+') {
                        markers.push(m.to_owned());
                    }
                    continue;
                }
                if t.is_empty() {
                    markers.clear();
                    continue;
                }
                let f = parse_field(strip_comment(t).trim(), package, &imports, &markers)
                    .map_err(|e| format!("{package}.{name}: {e}"))?;
                markers.clear();
                if let Some(f) = f {
                    fields.push(f);
                }
            }
            u.decls.insert(key, Decl::Struct(fields));
            continue;
        }
        if body.starts_with("interface") {
            continue;
        }
        let body = body.strip_prefix('=').unwrap_or(body).trim();
        // A declaration of a type this table cannot name (an external alias) is kept
        // unresolved; it fails only if something reachable uses it.
        if let Ok((t, _)) = parse_type(body, package, &imports) {
            u.decls.insert(key, Decl::Alias(t));
        }
    }
    Ok(())
}

/// `Name Type = "value"` or `Name = "value"` (a typed or untyped constant).
fn const_value(line: &str) -> Option<(String, String)> {
    let (lhs, rhs) = line.split_once('=')?;
    let name = lhs.split_whitespace().next()?;
    if !name.chars().next()?.is_ascii_uppercase() || lhs.split_whitespace().count() > 2 {
        return None;
    }
    let v = strip_comment(rhs).trim();
    let literal = (v.starts_with('"') && v.ends_with('"') && v.len() >= 2)
        || v.parse::<i64>().is_ok()
        || v == "true"
        || v == "false";
    literal.then(|| (name.to_owned(), v.to_owned()))
}

/// A field line (`Name Type `tag``, or an embedded `Type `tag``); `None` for an
/// unexported field.
fn parse_field(
    t: &str,
    package: &str,
    imports: &HashMap<String, String>,
    markers: &[String],
) -> Result<Option<RawField>, String> {
    let (decl, tag) = match t.find('`') {
        Some(q) => {
            let end = t.rfind('`').filter(|e| *e > q).ok_or_else(|| format!("odd tag in `{t}`"))?;
            (t[..q].trim(), Some(t[q + 1..end].to_owned()))
        }
        None => (t, None),
    };
    let words: Vec<&str> = decl.split_whitespace().collect();
    let (name, ty_text) = match words.as_slice() {
        [ty] => (None, *ty),
        [name, ty] if !name.ends_with(',') => (Some((*name).to_owned()), *ty),
        _ => return Err(format!("cannot read field `{t}`")),
    };
    if name.as_ref().is_some_and(|n| !n.starts_with(|c: char| c.is_ascii_uppercase())) {
        return Ok(None);
    }
    let (ty, rest) = parse_type(ty_text, package, imports)?;
    if !rest.is_empty() {
        return Err(format!("cannot read type `{ty_text}`"));
    }
    let default = markers.iter().find_map(|m| m.strip_prefix("default=")).map(str::to_owned);
    Ok(Some(RawField { name, ty, ty_text: ty_text.to_owned(), tag, default }))
}

/// `json:"name,opts"` of a tag: (name, options).
fn json_tag(tag: Option<&str>) -> Option<(String, Vec<String>)> {
    let tag = tag?;
    let at = tag.find("json:\"")?;
    let rest = &tag[at + 6..];
    let v = &rest[..rest.find('"')?];
    let mut parts = v.split(',');
    let name = parts.next().unwrap_or_default().to_owned();
    Some((name, parts.map(str::to_owned).collect()))
}

/// A field of the table.
#[derive(Debug, Clone, PartialEq, Eq)]
struct OutField {
    json: String,
    go_type: String,
    omitempty: bool,
    shape: String,
    default: Option<String>,
}

/// Resolves the reachable structs into the table's order (breadth first from the roots).
struct Resolver<'u> {
    u: &'u Universe,
    ids: BTreeMap<(String, String), usize>,
    order: Vec<(String, String)>,
    queue: VecDeque<(String, String)>,
}

impl Resolver<'_> {
    fn struct_id(&mut self, key: &(String, String)) -> usize {
        if let Some(id) = self.ids.get(key) {
            return *id;
        }
        let id = self.order.len();
        self.ids.insert(key.clone(), id);
        self.order.push(key.clone());
        self.queue.push_back(key.clone());
        id
    }

    /// The shape expression of a type.
    fn shape(&mut self, t: &GoType) -> Result<String, String> {
        Ok(match t {
            GoType::Ptr(inner) => format!("Ptr(&{})", self.shape(inner)?),
            GoType::Slice(inner) if **inner == GoType::Named(String::new(), "byte".into()) => {
                "Bytes".into()
            }
            GoType::Slice(inner) => format!("Slice(&{})", self.shape(inner)?),
            GoType::Map(inner) => format!("Map(&{})", self.shape(inner)?),
            GoType::Interface => "Any".into(),
            GoType::Named(path, name) if path.is_empty() => match name.as_str() {
                "string" => "Str".into(),
                "bool" => "Bool".into(),
                "float32" | "float64" => "Float".into(),
                _ => "Int".into(),
            },
            GoType::Named(path, name) => {
                if let Some((_, _, s)) = SPECIAL.iter().find(|(p, n, _)| p == path && n == name) {
                    return Ok((*s).to_owned());
                }
                let key = (path.clone(), name.clone());
                match self.u.decls.get(&key) {
                    Some(Decl::Struct(_)) => format!("Struct(Ty({}))", self.struct_id(&key)),
                    Some(Decl::Alias(a)) => {
                        let a = a.clone();
                        self.shape(&a)?
                    }
                    None => return Err(format!("cannot resolve type {path}.{name}")),
                }
            }
        })
    }

    /// The JSON fields of a struct, embedded inline structs flattened.
    fn fields(&mut self, key: &(String, String)) -> Result<Vec<OutField>, String> {
        let Some(Decl::Struct(raw)) = self.u.decls.get(key) else {
            return Err(format!("{}.{} is not a struct", key.0, key.1));
        };
        let raw = raw.clone();
        let mut out = Vec::new();
        for f in raw {
            let where_ =
                || format!("{}.{}.{}", key.0, key.1, f.name.as_deref().unwrap_or(&f.ty_text));
            let (tag_name, opts) = json_tag(f.tag.as_deref()).unwrap_or_default();
            if tag_name == "-" && opts.is_empty() {
                continue;
            }
            for o in &opts {
                match o.as_str() {
                    "omitempty" | "inline" => {}
                    other => {
                        return Err(format!(
                            "{}: json option `{other}` is not implemented by the encoder",
                            where_()
                        ));
                    }
                }
            }
            if f.name.is_none() && tag_name.is_empty() {
                let GoType::Named(path, name) = &f.ty else {
                    return Err(format!("{}: embedded non-struct", where_()));
                };
                let inner = (path.clone(), name.clone());
                out.extend(self.fields(&inner)?);
                continue;
            }
            let json =
                if tag_name.is_empty() { f.name.clone().unwrap_or_default() } else { tag_name };
            let default = match f.default.as_deref() {
                None => None,
                Some(d) => {
                    Some(self.default_json(d, &key.0).map_err(|e| format!("{}: {e}", where_()))?)
                }
            };
            out.push(OutField {
                json,
                go_type: f.ty_text.clone(),
                omitempty: opts.iter().any(|o| o == "omitempty"),
                shape: self.shape(&f.ty).map_err(|e| format!("{}: {e}", where_()))?,
                default,
            });
        }
        Ok(out)
    }

    /// A `+default=` value as JSON text (`ref(Name)` resolved to the constant).
    fn default_json(&self, d: &str, package: &str) -> Result<String, String> {
        if let Some(name) = d.strip_prefix("ref(").and_then(|r| r.strip_suffix(')')) {
            return self
                .u
                .consts
                .get(&(package.to_owned(), name.to_owned()))
                .cloned()
                .ok_or_else(|| format!("+default=ref({name}): no such constant"));
        }
        Ok(d.to_owned())
    }
}

/// The short name of a struct key: `core/v1.Pod`.
fn display(key: &(String, String)) -> String {
    let p = short_package(&key.0).map(str::to_owned).unwrap_or_else(|| key.0.clone());
    format!("{p}.{}", key.1)
}

fn rust_str(s: &str) -> String {
    format!("{s:?}")
}

/// Generates the table's source text.
fn generate(args: &Args) -> Result<String, String> {
    let dirs = [&args.api, &args.apimachinery];
    let mut u = Universe::default();
    let mut commits = Vec::new();
    for (i, dir) in dirs.iter().enumerate() {
        let c = git(dir, &["rev-parse", &format!("{}^{{commit}}", args.tag)])?;
        commits.push((REPOS[i], c.trim().to_owned()));
    }
    for f in FILES {
        let src = git(dirs[f.repo], &["show", &format!("{}:{}", args.tag, f.path)])?;
        parse_file(&src, f.package, &mut u)?;
    }
    let mut r = Resolver { u: &u, ids: BTreeMap::new(), order: Vec::new(), queue: VecDeque::new() };
    for (p, n) in ROOTS {
        let key = ((*p).to_owned(), (*n).to_owned());
        if !matches!(u.decls.get(&key), Some(Decl::Struct(_))) {
            return Err(format!("root {p}.{n} is not a struct at {}", args.tag));
        }
        r.struct_id(&key);
    }
    let mut structs: Vec<Vec<OutField>> = Vec::new();
    while let Some(key) = r.queue.pop_front() {
        let id = r.ids[&key];
        let fields = r.fields(&key)?;
        if structs.len() <= id {
            structs.resize(id + 1, Vec::new());
        }
        structs[id] = fields;
    }
    let names: Vec<String> = r.order.iter().map(display).collect();

    let mut s = String::new();
    let files = |repo: usize| -> Vec<&str> {
        FILES.iter().filter(|f| f.repo == repo).map(|f| f.path).collect()
    };
    let _ = writeln!(
        s,
        "//! GENERATED by `cargo xtask kube-wire --api <kubernetes/api> --apimachinery <kubernetes/apimachinery> --tag {}`; do not edit.",
        args.tag
    );
    let _ = writeln!(s, "//! The JSON field rules of the Go types of:");
    for (i, (repo, commit)) in commits.iter().enumerate() {
        let _ = writeln!(s, "//! - {repo} {} (commit {commit}): {}", args.tag, files(i).join(", "));
    }
    let _ = writeln!(
        s,
        "//!\n//! One struct per entry (`core/v1.PodSpec`), one line per JSON field in declaration order:\n\
         //! JSON name, Go type as written, `omitempty` (OMITEMPTY) or not (ALWAYS), shape (`Ptr`,\n\
         //! `Slice`, `Map`, `Struct(Ty(n))` = entry n, named at the line's end, a scalar, or a\n\
         //! type with its own `MarshalJSON`: Quantity, Time, MicroTime, Duration, IntOrString, Raw)\n\
         //! and the `+default=` marker's value (JSON text).\n\
         //!\n\
         //! Invariant: derived from the sources above only; regenerate, never edit."
    );
    s.push_str("\nuse super::Shape::*;\nuse super::{Field, GoStruct, Source, Ty};\n\n");
    s.push_str("const OMITEMPTY: bool = true;\nconst ALWAYS: bool = false;\n\n");
    s.push_str(
        "const fn f(\n    json: &'static str,\n    go_type: &'static str,\n    omitempty: bool,\n    shape: super::Shape,\n    default: Option<&'static str>,\n) -> Field {\n    Field { json, go_type, omitempty, shape, default }\n}\n\n",
    );
    s.push_str("/// Where this table was generated from.\n#[rustfmt::skip]\npub static SOURCE: Source = Source {\n    repos: &[\n");
    for (i, (repo, commit)) in commits.iter().enumerate() {
        let fs: Vec<String> = files(i).iter().map(|f| rust_str(f)).collect();
        let _ = writeln!(
            s,
            "        ({}, {}, {}, &[{}]),",
            rust_str(repo),
            rust_str(&args.tag),
            rust_str(commit),
            fs.join(", ")
        );
    }
    s.push_str("    ],\n};\n\n");
    s.push_str("/// The structs, by `Ty` index.\n#[rustfmt::skip]\npub(super) static STRUCTS: &[GoStruct] = &[\n");
    for (id, fields) in structs.iter().enumerate() {
        let _ =
            writeln!(s, "    // {id}\n    GoStruct {{ name: {}, fields: &[", rust_str(&names[id]));
        for f in fields {
            let default = match &f.default {
                Some(d) => format!("Some({})", rust_str(d)),
                None => "None".into(),
            };
            let refers = f
                .shape
                .split("Ty(")
                .nth(1)
                .and_then(|t| t.split(')').next())
                .and_then(|n| n.parse::<usize>().ok())
                .map(|n| format!(" // {}", names[n]))
                .unwrap_or_default();
            let _ = writeln!(
                s,
                "        f({}, {}, {}, {}, {default}),{refers}",
                rust_str(&f.json),
                rust_str(&f.go_type),
                if f.omitempty { "OMITEMPTY" } else { "ALWAYS" },
                f.shape
            );
        }
        s.push_str("    ] },\n");
    }
    s.push_str("];\n");
    Ok(s)
}

/// Runs `cargo xtask kube-wire`.
pub fn run(args: &Args, root: &Path) -> Result<PathBuf, String> {
    let text = generate(args)?;
    let out = args.out.clone().unwrap_or_else(|| root.join(OUT));
    std::fs::write(&out, text).map_err(|e| format!("writing {}: {e}", out.display()))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn universe(src: &str) -> Universe {
        let mut u = Universe::default();
        parse_file(src, "k8s.io/api/core/v1", &mut u).unwrap();
        u
    }

    const SRC: &str = r#"package v1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	ModeA Mode = "A"
)

type Mode string

type ResourceList map[string]resource.Quantity

// Inner is inlined.
type Inner struct {
	// +optional
	// +default=ref(ModeA)
	Mode Mode `json:"mode,omitempty"`
}

type Outer struct {
	metav1.TypeMeta `json:",inline"`
	Inner `json:",inline"`
	/*
		a block comment
	*/
	Port int32 `json:"Port"` // trailing
	Limits ResourceList `json:"limits,omitempty"`
	Next *Outer `json:"next,omitempty"`
	Data map[string][]byte `json:"data,omitempty"`
	Skipped string `json:"-"`
	private string
	Since metav1.Time `json:"since,omitempty"`
}
"#;

    #[test]
    fn fields_are_read_with_their_tags_inlines_and_markers() {
        let mut u = universe(SRC);
        parse_file(
            "package v1\n\ntype TypeMeta struct {\n\tKind string `json:\"kind,omitempty\"`\n}\n",
            "k8s.io/apimachinery/pkg/apis/meta/v1",
            &mut u,
        )
        .unwrap();
        let mut r =
            Resolver { u: &u, ids: BTreeMap::new(), order: Vec::new(), queue: VecDeque::new() };
        let key = ("k8s.io/api/core/v1".to_owned(), "Outer".to_owned());
        r.struct_id(&key);
        let fields = r.fields(&key).unwrap();
        let rows: Vec<_> = fields
            .iter()
            .map(|f| (f.json.as_str(), f.omitempty, f.shape.as_str(), f.default.as_deref()))
            .collect();
        assert_eq!(
            rows,
            vec![
                ("kind", true, "Str", None),
                ("mode", true, "Str", Some("\"A\"")),
                ("Port", false, "Int", None),
                ("limits", true, "Map(&Quantity)", None),
                ("next", true, "Ptr(&Struct(Ty(0)))", None),
                ("data", true, "Map(&Bytes)", None),
                ("since", true, "Time", None),
            ]
        );
    }

    #[test]
    fn unsupported_options_and_unknown_types_fail() {
        let u = universe(
            "package v1\n\ntype A struct {\n\tX string `json:\"x,omitzero\"`\n\tY Missing `json:\"y\"`\n}\n",
        );
        let mut r =
            Resolver { u: &u, ids: BTreeMap::new(), order: Vec::new(), queue: VecDeque::new() };
        let key = ("k8s.io/api/core/v1".to_owned(), "A".to_owned());
        let e = r.fields(&key).unwrap_err();
        assert!(e.contains("omitzero"), "{e}");
    }

    #[test]
    fn args_need_both_checkouts_and_a_tag() {
        let a = |v: &[&str]| Args::parse(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert!(a(&["--api", "x", "--tag", "v0.33.1"]).is_err());
        let ok = a(&["--api", "x", "--apimachinery", "y", "--tag", "v0.33.1"]).unwrap();
        assert_eq!(ok.tag, "v0.33.1");
        assert!(a(&["--bogus"]).is_err());
    }
}
