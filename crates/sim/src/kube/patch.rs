//! The PATCH bodies other than server-side apply: JSON merge patch (RFC 7386, what
//! `kubectl label` sends), JSON patch (RFC 6902, `kubectl patch --type json`) and
//! strategic merge patch (what `kubectl apply` and `kubectl edit` send), applied to an
//! object as the apiserver applies them.
//!
//! Invariant: a strategic merge patch merges lists by the keys `schema` names (the same
//! table server-side apply uses) and replaces every other list; its directives
//! (`$patch`, `$retainKeys`, `$setElementOrder/…`, `$deleteFromPrimitiveList/…`) never
//! end up in the object; a patch that cannot apply is an error, never half applied.

use serde_json::{Map, Value};

use super::schema::{ListType, Ty};

/// RFC 7386: objects merge, `null` deletes, anything else replaces.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let t = target.as_object_mut().expect("just made an object");
    for (k, v) in p {
        if v.is_null() {
            t.remove(k);
        } else {
            merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
        }
    }
}

/// RFC 6902 on `target`: every operation or none (the error says which failed).
pub fn json_patch(target: &Value, ops: &Value) -> Result<Value, String> {
    let ops = ops.as_array().ok_or("a JSON patch must be an array of operations")?;
    let mut doc = target.clone();
    for (i, op) in ops.iter().enumerate() {
        let s = |k: &str| op.get(k).and_then(Value::as_str);
        let what = s("op").ok_or(format!("operation {i}: missing \"op\""))?;
        let path = s("path").ok_or(format!("operation {i}: missing \"path\""))?;
        let value = || op.get("value").cloned().ok_or(format!("operation {i}: missing \"value\""));
        match what {
            "add" => add(&mut doc, path, value()?)?,
            "remove" => {
                take(&mut doc, path)?;
            }
            "replace" => {
                take(&mut doc, path)?;
                add(&mut doc, path, value()?)?;
            }
            "move" => {
                let from = s("from").ok_or(format!("operation {i}: missing \"from\""))?;
                let v = take(&mut doc, from)?;
                add(&mut doc, path, v)?;
            }
            "copy" => {
                let from = s("from").ok_or(format!("operation {i}: missing \"from\""))?;
                let v = doc.pointer(from).cloned().ok_or(format!("missing value at {from}"))?;
                add(&mut doc, path, v)?;
            }
            "test" => {
                if doc.pointer(path) != Some(&value()?) {
                    return Err(format!("testing value {path} failed: test failed"));
                }
            }
            other => return Err(format!("operation {i}: unsupported op {other:?}")),
        }
    }
    Ok(doc)
}

fn unescape(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

fn split(path: &str) -> Result<(String, String), String> {
    let (parent, last) = path.rsplit_once('/').ok_or(format!("invalid JSON pointer {path:?}"))?;
    Ok((parent.to_owned(), unescape(last)))
}

fn add(doc: &mut Value, path: &str, value: Value) -> Result<(), String> {
    if path.is_empty() {
        *doc = value;
        return Ok(());
    }
    let (parent, last) = split(path)?;
    let target = doc.pointer_mut(&parent).ok_or(format!("missing path {parent:?}"))?;
    match target {
        Value::Object(m) => {
            m.insert(last, value);
        }
        Value::Array(a) => {
            let at = if last == "-" {
                a.len()
            } else {
                last.parse::<usize>().ok().filter(|i| *i <= a.len()).ok_or(format!(
                    "add operation does not apply: index {last} out of bounds of {path}"
                ))?
            };
            a.insert(at, value);
        }
        _ => return Err(format!("add operation does not apply: {parent:?} is not a container")),
    }
    Ok(())
}

fn take(doc: &mut Value, path: &str) -> Result<Value, String> {
    let (parent, last) = split(path)?;
    let missing = || format!("remove operation does not apply: doc is missing path: {path:?}");
    match doc.pointer_mut(&parent).ok_or_else(missing)? {
        Value::Object(m) => m.remove(&last).ok_or_else(missing),
        Value::Array(a) => {
            let i = last.parse::<usize>().ok().filter(|i| *i < a.len()).ok_or_else(missing)?;
            Ok(a.remove(i))
        }
        _ => Err(missing()),
    }
}

const PATCH: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const SET_ORDER: &str = "$setElementOrder/";
const DELETE_FROM: &str = "$deleteFromPrimitiveList/";

/// A strategic merge patch on an object of type `ty`.
pub fn strategic_merge_patch(target: &Value, patch: &Value, ty: Ty) -> Result<Value, String> {
    let mut out = target.clone();
    merge_object(&mut out, patch, ty)?;
    Ok(out)
}

fn merge_object(target: &mut Value, patch: &Value, ty: Ty) -> Result<(), String> {
    let p = patch.as_object().ok_or("a strategic merge patch must be a JSON object")?;
    match p.get(PATCH).and_then(Value::as_str) {
        Some("replace") => {
            let mut replaced = p.clone();
            replaced.remove(PATCH);
            *target = Value::Object(replaced);
            return Ok(());
        }
        Some("delete") => {
            *target = Value::Null;
            return Ok(());
        }
        Some("merge") | None => {}
        Some(other) => return Err(format!("unknown patch type: {other}")),
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let t = target.as_object_mut().expect("just made an object");
    if let Some(keep) = p.get(RETAIN_KEYS) {
        let keep: Vec<&str> = keep
            .as_array()
            .ok_or("$retainKeys must be a list")?
            .iter()
            .filter_map(Value::as_str)
            .collect();
        t.retain(|k, _| keep.contains(&k.as_str()));
    }
    for (k, v) in p {
        if k == PATCH || k == RETAIN_KEYS || k.starts_with(SET_ORDER) {
            continue;
        }
        if let Some(field) = k.strip_prefix(DELETE_FROM) {
            let gone = v.as_array().ok_or("$deleteFromPrimitiveList must be a list")?;
            if let Some(Value::Array(items)) = t.get_mut(field) {
                items.retain(|i| !gone.contains(i));
            }
            continue;
        }
        if v.is_null() {
            t.remove(k);
            continue;
        }
        match v {
            Value::Object(_) => {
                let child = t.entry(k.clone()).or_insert(Value::Null);
                merge_object(child, v, ty.field(k))?;
                if child.is_null() {
                    t.remove(k);
                }
            }
            Value::Array(items) => {
                let (info, item_ty) = ty.list(k);
                let merged = match (info.strategy, info.merge_key, info.list) {
                    (Some(s), Some(key), _) if s.contains("merge") => {
                        merge_keyed(t.get(k), items, key, item_ty)?
                    }
                    (Some(s), None, ListType::Set) if s.contains("merge") => {
                        let mut out =
                            t.get(k).and_then(Value::as_array).cloned().unwrap_or_default();
                        for i in items {
                            if !out.contains(i) {
                                out.push(i.clone());
                            }
                        }
                        out
                    }
                    _ => items.clone(),
                };
                t.insert(k.clone(), Value::Array(merged));
            }
            _ => {
                t.insert(k.clone(), v.clone());
            }
        }
    }
    // `$setElementOrder/<list>`: the patched list in the order given, others after.
    for (k, order) in p {
        let Some(field) = k.strip_prefix(SET_ORDER) else { continue };
        let (info, _) = ty.list(field);
        let (Some(Value::Array(items)), Some(order)) = (t.get_mut(field), order.as_array()) else {
            continue;
        };
        let position = |item: &Value| {
            order.iter().position(|o| match info.merge_key {
                Some(key) => o.get(key).is_some() && o.get(key) == item.get(key),
                None => o == item,
            })
        };
        items.sort_by_key(|i| position(i).unwrap_or(usize::MAX));
    }
    Ok(())
}

fn merge_keyed(
    current: Option<&Value>,
    patch: &[Value],
    key: &str,
    item_ty: Ty,
) -> Result<Vec<Value>, String> {
    let mut out = current.and_then(Value::as_array).cloned().unwrap_or_default();
    // `$patch: replace` anywhere in the list: the list becomes the patch's items.
    if patch.iter().any(|i| i.get(PATCH).and_then(Value::as_str) == Some("replace")) {
        return Ok(patch.iter().filter(|i| i.get(PATCH).is_none()).cloned().collect());
    }
    for item in patch {
        let Some(id) = item.get(key) else {
            return Err(format!("map: {item} does not contain declared merge key: {key}"));
        };
        let at = out.iter().position(|o| o.get(key) == Some(id));
        match (item.get(PATCH).and_then(Value::as_str), at) {
            (Some("delete"), Some(i)) => {
                out.remove(i);
            }
            (Some("delete"), None) => {}
            (_, Some(i)) => merge_object(&mut out[i], item, item_ty)?,
            (_, None) => {
                let mut fresh = Value::Object(Map::new());
                merge_object(&mut fresh, item, item_ty)?;
                out.push(fresh);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kube::Resource;
    use serde_json::json;

    #[test]
    fn merge_patch_sets_and_deletes() {
        let mut v = json!({"metadata":{"labels":{"a":"1","b":"2"}}});
        merge_patch(&mut v, &json!({"metadata":{"labels":{"a":null,"c":"3"}}}));
        assert_eq!(v, json!({"metadata":{"labels":{"b":"2","c":"3"}}}));
    }

    #[test]
    fn json_patch_applies_all_or_nothing() {
        let v = json!({"metadata":{"labels":{"a":"1"}}});
        let out = json_patch(
            &v,
            &json!([{"op":"add","path":"/metadata/labels/b~1c","value":"2"},
                   {"op":"test","path":"/metadata/labels/a","value":"1"}]),
        )
        .unwrap();
        assert_eq!(out["metadata"]["labels"]["b/c"], "2");
        assert!(
            json_patch(&v, &json!([{"op":"test","path":"/metadata/labels/a","value":"9"}]))
                .is_err()
        );
        assert!(json_patch(&v, &json!([{"op":"remove","path":"/spec"}])).is_err());
    }

    #[test]
    fn strategic_merge_keys_containers_by_name_and_replaces_other_lists() {
        let ty = Ty::Root(Resource::DaemonSet);
        let ds = json!({"spec":{"template":{"spec":{
            "containers":[{"name":"a","image":"a:1"},{"name":"b","image":"b:1"}],
            "tolerations":[{"operator":"Exists"}]}}}});
        let patch = json!({"spec":{"template":{"spec":{
            "containers":[{"name":"b","image":"b:2"},{"name":"c","image":"c:1"},{"name":"a","$patch":"delete"}],
            "tolerations":[{"key":"k","operator":"Exists"}]}}}});
        let out = strategic_merge_patch(&ds, &patch, ty).unwrap();
        assert_eq!(
            out["spec"]["template"]["spec"]["containers"],
            json!([{"name":"b","image":"b:2"},{"name":"c","image":"c:1"}])
        );
        assert_eq!(
            out["spec"]["template"]["spec"]["tolerations"],
            json!([{"key":"k","operator":"Exists"}])
        );
        let ordered = strategic_merge_patch(
            &out,
            &json!({"spec":{"template":{"spec":{"$setElementOrder/containers":[{"name":"c"},{"name":"b"}]}}}}),
            ty,
        )
        .unwrap();
        assert_eq!(ordered["spec"]["template"]["spec"]["containers"][0]["name"], "c");
        let labels = strategic_merge_patch(
            &json!({"metadata":{"labels":{"a":"1"},"finalizers":["x"]}}),
            &json!({"metadata":{"labels":{"a":null,"b":"2"},"finalizers":["y"],
                "$deleteFromPrimitiveList/finalizers":["x"]}}),
            ty,
        )
        .unwrap();
        assert_eq!(labels, json!({"metadata":{"labels":{"b":"2"},"finalizers":["y"]}}));
    }
}
