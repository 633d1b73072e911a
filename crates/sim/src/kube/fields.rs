//! Server-side-apply field sets: flattening an applied manifest into leaf field paths,
//! reading and writing values at a path, and rendering `managedFields` (`FieldsV1`).
//!
//! Invariant: a path names one leaf — a scalar, an array (lists are atomic here) or an
//! empty object — so ownership is tracked per leaf and two managers conflict exactly
//! when they set the same leaf (or one sets a whole subtree) to different values.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

/// A field path: object keys from the root (`["metadata","labels","app"]`).
pub type FieldPath = Vec<String>;

/// `.metadata.labels.app`, as the apiserver prints paths in conflict messages.
pub fn display(path: &[String]) -> String {
    let mut s = String::new();
    for p in path {
        s.push('.');
        s.push_str(p);
    }
    s
}

/// The leaves of `v` with their values.
pub fn leaves(v: &Value) -> BTreeMap<FieldPath, Value> {
    let mut out = BTreeMap::new();
    walk(v, &mut Vec::new(), &mut out);
    out
}

fn walk(v: &Value, prefix: &mut FieldPath, out: &mut BTreeMap<FieldPath, Value>) {
    match v {
        Value::Object(m) if !m.is_empty() || prefix.is_empty() => {
            for (k, child) in m {
                prefix.push(k.clone());
                walk(child, prefix, out);
                prefix.pop();
            }
        }
        _ => {
            out.insert(prefix.clone(), v.clone());
        }
    }
}

/// The value at `path`, if any.
pub fn get<'a>(v: &'a Value, path: &[String]) -> Option<&'a Value> {
    let mut cur = v;
    for p in path {
        cur = cur.as_object()?.get(p)?;
    }
    Some(cur)
}

/// Sets `path` to `value`, making (or replacing non-object) intermediate nodes objects.
pub fn set(v: &mut Value, path: &[String], value: Value) {
    let Some((last, parents)) = path.split_last() else {
        *v = value;
        return;
    };
    let mut cur = v;
    for p in parents {
        if !cur.is_object() {
            *cur = Value::Object(Map::new());
        }
        cur = cur
            .as_object_mut()
            .expect("just made an object")
            .entry(p.clone())
            .or_insert_with(|| Value::Object(Map::new()));
    }
    if !cur.is_object() {
        *cur = Value::Object(Map::new());
    }
    cur.as_object_mut().expect("just made an object").insert(last.clone(), value);
}

/// Removes the leaf at `path` and then every parent object it leaves empty (but never
/// the top-level `metadata`, which every object keeps).
pub fn remove(v: &mut Value, path: &[String]) {
    if path.is_empty() {
        return;
    }
    for depth in (1..=path.len()).rev() {
        let (parent_path, key) = (&path[..depth - 1], &path[depth - 1]);
        let Some(parent) = get_mut(v, parent_path).and_then(Value::as_object_mut) else {
            return;
        };
        let last = depth == path.len();
        let empty_child = parent.get(key).is_some_and(|c| c.as_object().is_some_and(Map::is_empty));
        let is_metadata = depth == 1 && key == "metadata";
        if (last || empty_child) && !is_metadata {
            parent.remove(key);
        } else {
            return;
        }
    }
}

fn get_mut<'a>(v: &'a mut Value, path: &[String]) -> Option<&'a mut Value> {
    let mut cur = v;
    for p in path {
        cur = cur.as_object_mut()?.get_mut(p)?;
    }
    Some(cur)
}

/// Whether `a` is `b` or lies under it.
pub fn is_under(a: &[String], b: &[String]) -> bool {
    a.len() >= b.len() && a[..b.len()] == *b
}

/// `FieldsV1` for a set of leaf paths: `{"f:metadata":{"f:labels":{"f:app":{}}}}`.
pub fn fields_v1(paths: &BTreeSet<FieldPath>) -> Value {
    let mut root = Value::Object(Map::new());
    for p in paths {
        let mut cur = &mut root;
        for seg in p {
            cur = cur
                .as_object_mut()
                .expect("only objects are built")
                .entry(format!("f:{seg}"))
                .or_insert_with(|| Value::Object(Map::new()));
        }
    }
    root
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn p(s: &[&str]) -> FieldPath {
        s.iter().map(|x| (*x).to_owned()).collect()
    }

    #[test]
    fn leaves_set_remove_round_trip() {
        let v = json!({"metadata":{"labels":{"a":"1"}},"spec":{"list":[1,2],"empty":{}}});
        let l = leaves(&v);
        assert_eq!(l.len(), 3);
        assert_eq!(l[&p(&["spec", "empty"])], json!({}));
        let mut w = json!({"metadata":{}});
        for (k, x) in &l {
            set(&mut w, k, x.clone());
        }
        assert_eq!(w, v);
        remove(&mut w, &p(&["metadata", "labels", "a"]));
        remove(&mut w, &p(&["spec", "list"]));
        assert_eq!(w, json!({"metadata":{},"spec":{"empty":{}}}));
        assert_eq!(
            fields_v1(&[p(&["metadata", "labels", "a"])].into_iter().collect()),
            json!({"f:metadata":{"f:labels":{"f:a":{}}}})
        );
    }
}
