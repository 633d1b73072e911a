//! Server-side-apply field sets: an object flattened into the field paths a manager can
//! own — with associative list items addressed by their keys
//! (`.spec.template.spec.containers[name="c"].image`), set items by value and atomic lists
//! as one leaf — reading and writing values at such paths, and `managedFields`
//! (`FieldsV1`) both ways.
//!
//! Invariant: the list semantics come from `schema` only; a path names one leaf (a
//! scalar, an atomic list, an empty object, a set item) or one associative list item (its
//! "." entry), so two managers conflict exactly when they set the same leaf to different
//! values, as structured-merge-diff decides.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use super::schema::{ListType, Ty};

/// One step of a field path.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Seg {
    /// An object field.
    Field(String),
    /// An associative list item: its key fields and their values (JSON text), in the
    /// list's key order.
    Key(Vec<(String, String)>),
    /// A set item: its value (JSON text).
    Value(String),
}

/// A field path from the object root.
pub type FieldPath = Vec<Seg>;

/// What sits at a path of a flattened object.
#[derive(Debug, Clone, PartialEq)]
pub enum Leaf {
    /// A value (scalar, atomic list, empty object, set item).
    Value(Value),
    /// An associative list item (the "." entry of `FieldsV1`).
    Item,
}

/// The path of a field name list (tests and callers building plain paths).
pub fn path(fields: &[&str]) -> FieldPath {
    fields.iter().map(|f| Seg::Field((*f).to_owned())).collect()
}

/// `.spec.template.spec.containers[name="c"].image`, as the apiserver prints paths in
/// conflict messages and causes.
pub fn display(path: &[Seg]) -> String {
    let mut s = String::new();
    for seg in path {
        match seg {
            Seg::Field(f) => {
                s.push('.');
                s.push_str(f);
            }
            Seg::Key(kvs) => {
                let inner: Vec<String> = kvs.iter().map(|(k, v)| format!("{k}={v}")).collect();
                s.push('[');
                s.push_str(&inner.join(","));
                s.push(']');
            }
            Seg::Value(v) => {
                s.push_str("[=");
                s.push_str(v);
                s.push(']');
            }
        }
    }
    s
}

/// The value a missing key field stands for: `protocol` is `TCP` when left out (ports are
/// keyed by `containerPort` and `protocol`, and the server defaults the protocol).
fn key_default(field: &str) -> Value {
    match field {
        "protocol" => Value::String("TCP".into()),
        _ => Value::Null,
    }
}

/// The key segment of an associative list item (`None` if the item is not an object).
pub fn item_key(item: &Value, keys: &[&str]) -> Option<Seg> {
    let obj = item.as_object()?;
    Some(Seg::Key(
        keys.iter()
            .map(|k| {
                let v = obj.get(*k).cloned().unwrap_or_else(|| key_default(k));
                ((*k).to_owned(), v.to_string())
            })
            .collect(),
    ))
}

/// Whether `v` is the JSON `text` (key and set-item values are kept as JSON text).
fn json_is(v: &Value, text: &str) -> bool {
    serde_json::to_string(v).is_ok_and(|s| s == text)
}

fn matches_key(item: &Value, kvs: &[(String, String)]) -> bool {
    let Some(obj) = item.as_object() else { return false };
    kvs.iter().all(|(k, v)| {
        let have = obj.get(k).cloned().unwrap_or_else(|| key_default(k));
        json_is(&have, v)
    })
}

/// The leaves of `v`, an object of type `ty`.
pub fn leaves(v: &Value, ty: Ty) -> BTreeMap<FieldPath, Leaf> {
    let mut out = BTreeMap::new();
    walk(v, ty, &mut Vec::new(), &mut out);
    out
}

fn walk(v: &Value, ty: Ty, prefix: &mut FieldPath, out: &mut BTreeMap<FieldPath, Leaf>) {
    match v {
        Value::Object(m) if !m.is_empty() || prefix.is_empty() => {
            for (k, child) in m {
                prefix.push(Seg::Field(k.clone()));
                match child {
                    Value::Array(items) if !items.is_empty() => {
                        let (info, item_ty) = ty.list(k);
                        match info.list {
                            ListType::Atomic => {
                                out.insert(prefix.clone(), Leaf::Value(child.clone()));
                            }
                            ListType::Set => {
                                for item in items {
                                    prefix.push(Seg::Value(item.to_string()));
                                    out.insert(prefix.clone(), Leaf::Value(item.clone()));
                                    prefix.pop();
                                }
                            }
                            ListType::Map(keys) => {
                                for item in items {
                                    match item_key(item, keys) {
                                        Some(seg) => {
                                            prefix.push(seg);
                                            out.insert(prefix.clone(), Leaf::Item);
                                            walk(item, item_ty, prefix, out);
                                            prefix.pop();
                                        }
                                        // Not an object: the list is malformed, and
                                        // validation refuses it; keep it whole here.
                                        None => {
                                            out.insert(prefix.clone(), Leaf::Value(child.clone()));
                                        }
                                    }
                                }
                            }
                        }
                    }
                    _ => walk(child, ty.field(k), prefix, out),
                }
                prefix.pop();
            }
        }
        _ => {
            out.insert(prefix.clone(), Leaf::Value(v.clone()));
        }
    }
}

/// The value at `path`, if any.
pub fn get<'a>(v: &'a Value, path: &[Seg]) -> Option<&'a Value> {
    let mut cur = v;
    for seg in path {
        cur = match seg {
            Seg::Field(f) => cur.as_object()?.get(f)?,
            Seg::Key(kvs) => cur.as_array()?.iter().find(|i| matches_key(i, kvs))?,
            Seg::Value(text) => cur.as_array()?.iter().find(|i| json_is(i, text))?,
        };
    }
    Some(cur)
}

fn get_mut<'a>(v: &'a mut Value, path: &[Seg]) -> Option<&'a mut Value> {
    let mut cur = v;
    for seg in path {
        cur = match seg {
            Seg::Field(f) => cur.as_object_mut()?.get_mut(f)?,
            Seg::Key(kvs) => cur.as_array_mut()?.iter_mut().find(|i| matches_key(i, kvs))?,
            Seg::Value(text) => cur.as_array_mut()?.iter_mut().find(|i| json_is(i, text))?,
        };
    }
    Some(cur)
}

/// The child of `cur` at `seg`, made when missing (objects for fields, items with their
/// key fields for keys, the value for set items); a node of the wrong shape is replaced.
fn child_mut<'a>(cur: &'a mut Value, seg: &Seg) -> &'a mut Value {
    match seg {
        Seg::Field(f) => {
            if !cur.is_object() {
                *cur = Value::Object(Map::new());
            }
            cur.as_object_mut()
                .expect("just made an object")
                .entry(f.clone())
                .or_insert_with(|| Value::Object(Map::new()))
        }
        Seg::Key(kvs) => {
            if !cur.is_array() {
                *cur = Value::Array(Vec::new());
            }
            let items = cur.as_array_mut().expect("just made an array");
            let at = match items.iter().position(|i| matches_key(i, kvs)) {
                Some(i) => i,
                None => {
                    let mut item = Map::new();
                    for (k, v) in kvs {
                        let v: Value = serde_json::from_str(v).unwrap_or(Value::Null);
                        if !v.is_null() {
                            item.insert(k.clone(), v);
                        }
                    }
                    items.push(Value::Object(item));
                    items.len() - 1
                }
            };
            &mut items[at]
        }
        Seg::Value(text) => {
            if !cur.is_array() {
                *cur = Value::Array(Vec::new());
            }
            let items = cur.as_array_mut().expect("just made an array");
            let at = match items.iter().position(|i| json_is(i, text)) {
                Some(i) => i,
                None => {
                    items.push(serde_json::from_str(text).unwrap_or(Value::Null));
                    items.len() - 1
                }
            };
            &mut items[at]
        }
    }
}

/// Sets `path` to `value`, making the parents (objects, list items) it needs.
pub fn set(v: &mut Value, path: &[Seg], value: Value) {
    let mut cur = v;
    for seg in path {
        cur = child_mut(cur, seg);
    }
    *cur = value;
}

/// Makes sure the associative list item at `path` exists (with its key fields).
pub fn ensure_item(v: &mut Value, path: &[Seg]) {
    let mut cur = v;
    for seg in path {
        cur = child_mut(cur, seg);
    }
}

/// Removes what `path` names (a field, a list item, a set item), then every parent object
/// or list it leaves empty — but never the top-level `metadata`.
pub fn remove(v: &mut Value, path: &[Seg]) {
    for depth in (1..=path.len()).rev() {
        let (parent_path, seg) = (&path[..depth - 1], &path[depth - 1]);
        let Some(parent) = get_mut(v, parent_path) else { return };
        let last = depth == path.len();
        let removable = |child: &Value| {
            last || child.as_object().is_some_and(Map::is_empty)
                || child.as_array().is_some_and(Vec::is_empty)
        };
        let is_metadata = depth == 1 && *seg == Seg::Field("metadata".into());
        if is_metadata {
            return;
        }
        let removed = match (seg, parent) {
            (Seg::Field(f), Value::Object(m)) if m.get(f).is_some_and(removable) => {
                m.remove(f);
                true
            }
            (Seg::Key(kvs), Value::Array(items)) => {
                match items.iter().position(|i| matches_key(i, kvs)) {
                    Some(i) if removable(&items[i]) => {
                        items.remove(i);
                        true
                    }
                    _ => false,
                }
            }
            (Seg::Value(text), Value::Array(items)) => {
                match items.iter().position(|i| json_is(i, text)) {
                    Some(i) if last => {
                        items.remove(i);
                        true
                    }
                    _ => false,
                }
            }
            _ => false,
        };
        if !removed {
            return;
        }
    }
}

/// Whether `a` is `b` or lies under it.
pub fn is_under(a: &[Seg], b: &[Seg]) -> bool {
    a.len() >= b.len() && a[..b.len()] == *b
}

/// `FieldsV1` for a set of paths: `{"f:metadata":{"f:labels":{"f:app":{}}}}`, list items
/// as `k:{"name":"c"}` with a `.` entry, set items as `v:"x"`.
pub fn fields_v1(paths: &BTreeSet<FieldPath>) -> Value {
    let mut root = Value::Object(Map::new());
    for p in paths {
        let mut cur = &mut root;
        for seg in p {
            let key = match seg {
                Seg::Field(f) => format!("f:{f}"),
                Seg::Key(kvs) => {
                    let obj: Map<String, Value> = kvs
                        .iter()
                        .map(|(k, v)| (k.clone(), serde_json::from_str(v).unwrap_or(Value::Null)))
                        .collect();
                    format!("k:{}", Value::Object(obj))
                }
                Seg::Value(v) => format!("v:{v}"),
            };
            cur = cur
                .as_object_mut()
                .expect("only objects are built")
                .entry(key)
                .or_insert_with(|| Value::Object(Map::new()));
        }
        if matches!(p.last(), Some(Seg::Key(_))) {
            cur.as_object_mut().expect("an object").insert(".".into(), Value::Object(Map::new()));
        }
    }
    root
}

/// The paths a `FieldsV1` value names (the inverse of [`fields_v1`]); `None` when it is
/// not one.
pub fn parse_fields_v1(v: &Value) -> Option<BTreeSet<FieldPath>> {
    fn go(v: &Value, prefix: &mut FieldPath, out: &mut BTreeSet<FieldPath>) -> Option<()> {
        let m = v.as_object()?;
        if m.is_empty() && !prefix.is_empty() {
            out.insert(prefix.clone());
        }
        for (k, child) in m {
            if k == "." {
                out.insert(prefix.clone());
                continue;
            }
            let seg = if let Some(f) = k.strip_prefix("f:") {
                Seg::Field(f.to_owned())
            } else if let Some(j) = k.strip_prefix("k:") {
                let obj: Map<String, Value> = serde_json::from_str(j).ok()?;
                Seg::Key(obj.into_iter().map(|(k, v)| (k, v.to_string())).collect())
            } else if let Some(j) = k.strip_prefix("v:") {
                let v: Value = serde_json::from_str(j).ok()?;
                Seg::Value(v.to_string())
            } else {
                // `i:<index>` (atomic positions) and anything newer: not tracked here.
                continue;
            };
            prefix.push(seg);
            go(child, prefix, out)?;
            prefix.pop();
        }
        Some(())
    }
    let mut out = BTreeSet::new();
    go(v, &mut Vec::new(), &mut out)?;
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kube::Resource;
    use serde_json::json;

    #[test]
    fn leaves_set_remove_round_trip() {
        let ty = Ty::Root(Resource::Namespace);
        let v = json!({"metadata":{"labels":{"a":"1"}},"spec":{"list":[1,2],"empty":{}}});
        let l = leaves(&v, ty);
        assert_eq!(l.len(), 3);
        assert_eq!(l[&path(&["spec", "empty"])], Leaf::Value(json!({})));
        let mut w = json!({"metadata":{}});
        for (k, x) in &l {
            if let Leaf::Value(x) = x {
                set(&mut w, k, x.clone());
            }
        }
        assert_eq!(w, v);
        remove(&mut w, &path(&["metadata", "labels", "a"]));
        remove(&mut w, &path(&["spec", "list"]));
        assert_eq!(w, json!({"metadata":{},"spec":{"empty":{}}}));
    }

    #[test]
    fn containers_are_addressed_by_name_and_ports_by_port_and_protocol() {
        let ds = json!({"spec":{"template":{"spec":{"containers":[
            {"name":"c","image":"i:1","ports":[{"containerPort":80}]}]}}}});
        let l = leaves(&ds, Ty::Root(Resource::DaemonSet));
        let shown: Vec<String> = l.keys().map(|p| display(p)).collect();
        assert!(shown.contains(&r#".spec.template.spec.containers[name="c"].image"#.to_owned()));
        assert!(shown.contains(
            &r#".spec.template.spec.containers[name="c"].ports[containerPort=80,protocol="TCP"].containerPort"#
                .to_owned()
        ));
        let image: Vec<&FieldPath> = l.keys().filter(|p| display(p).ends_with(".image")).collect();
        let mut w = ds.clone();
        set(&mut w, image[0], json!("i:2"));
        assert_eq!(w["spec"]["template"]["spec"]["containers"][0]["image"], "i:2");
        // A new item is made with its key.
        let mut p = path(&["spec", "template", "spec", "containers"]);
        p.push(Seg::Key(vec![("name".into(), "\"d\"".into())]));
        p.push(Seg::Field("image".into()));
        set(&mut w, &p, json!("x"));
        assert_eq!(w["spec"]["template"]["spec"]["containers"][1], json!({"name":"d","image":"x"}));
        remove(&mut w, &p[..p.len() - 1]);
        assert_eq!(w["spec"]["template"]["spec"]["containers"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn fields_v1_round_trips() {
        let ds = json!({"metadata":{"labels":{"a":"b"},"finalizers":["x"]},
            "spec":{"template":{"spec":{"containers":[{"name":"c","image":"i"}]}}}});
        let paths: BTreeSet<FieldPath> =
            leaves(&ds, Ty::Root(Resource::DaemonSet)).into_keys().collect();
        let v1 = fields_v1(&paths);
        assert_eq!(
            v1["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"c\"}"],
            json!({".":{},"f:image":{},"f:name":{}})
        );
        assert_eq!(v1["f:metadata"]["f:finalizers"], json!({"v:\"x\"":{}}));
        assert_eq!(parse_fields_v1(&v1).unwrap(), paths);
    }
}
