//! The OpenAPI v3 documents `kubectl apply` downloads (`/openapi/v3` and one document per
//! group-version): component schemas generated from the `k8s-openapi` types (their
//! `schemars` impls) with the Kubernetes extensions kubectl reads —
//! `x-kubernetes-group-version-kind`, the list and patch markers of `schema` — and one
//! path per served operation, whose PATCH advertises `fieldValidation` so kubectl leaves
//! validation to the server.
//!
//! Invariant: made once per process and Kubernetes version, when first asked for: clients
//! that never ask pay nothing; a document's `hash` is a
//! fingerprint of its bytes, so a client's cache key changes exactly when it does.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};

use schemars::JsonSchema;
use schemars::generate::{SchemaGenerator, SchemaSettings};
use serde_json::{Map, Value, json};

use super::Resource;
use super::schema::{ListType, Ty};

/// A generated document: its bytes and their fingerprint.
#[derive(Debug)]
pub struct Document {
    /// The JSON.
    pub bytes: Vec<u8>,
    /// The `hash` query value of its URL.
    pub hash: String,
}

type Cache = Mutex<BTreeMap<(String, String), Arc<Document>>>;

fn cache() -> &'static Cache {
    static CACHE: OnceLock<Cache> = OnceLock::new();
    CACHE.get_or_init(Cache::default)
}

/// The document of `group`/`version` (`""`/`v1` for the core group) for a cluster at
/// `k8s_version`, if served.
pub fn document(group: &str, version: &str, k8s_version: &str) -> Option<Arc<Document>> {
    if Resource::in_group(group).all(|r| r.version() != version) {
        return None;
    }
    let key = (format!("{group}/{version}"), k8s_version.to_owned());
    if let Some(d) = cache().lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return Some(d.clone());
    }
    let doc = generate(group, version, k8s_version);
    let bytes = serde_json::to_vec(&doc).unwrap_or_default();
    let hash =
        format!("{:016X}{:016X}", crate::fnv1a(&String::from_utf8_lossy(&bytes)), bytes.len());
    let d = Arc::new(Document { bytes, hash });
    cache().lock().unwrap_or_else(|e| e.into_inner()).insert(key, d.clone());
    Some(d)
}

/// The path of a group-version's document (`api/v1`, `apis/apps/v1`).
pub fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() { format!("api/{version}") } else { format!("apis/{group}/{version}") }
}

/// `/openapi/v3`: where each group-version's document is.
pub fn root(k8s_version: &str) -> Value {
    let mut paths = Map::new();
    let mut gvs = vec![("", "v1")];
    gvs.extend(super::discovery::groups());
    for (g, v) in gvs {
        if let Some(d) = document(g, v, k8s_version) {
            let p = gv_path(g, v);
            paths.insert(
                p.clone(),
                json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash={}", d.hash)}),
            );
        }
    }
    json!({"paths": paths})
}

fn schema_of<T: JsonSchema>(generator: &mut SchemaGenerator) {
    let _ = generator.subschema_for::<T>();
}

fn generate(group: &str, version: &str, k8s_version: &str) -> Value {
    use k8s_openapi::api::{apps::v1 as apps, core::v1 as core};
    let mut generator = SchemaSettings::openapi3().into_generator();
    let resources: Vec<Resource> =
        Resource::in_group(group).filter(|r| r.version() == version).collect();
    for r in &resources {
        match r {
            Resource::Namespace => schema_of::<core::Namespace>(&mut generator),
            Resource::Secret => schema_of::<core::Secret>(&mut generator),
            Resource::ServiceAccount => schema_of::<core::ServiceAccount>(&mut generator),
            Resource::Node => schema_of::<core::Node>(&mut generator),
            Resource::Pod => schema_of::<core::Pod>(&mut generator),
            Resource::ConfigMap => schema_of::<core::ConfigMap>(&mut generator),
            Resource::Service => schema_of::<core::Service>(&mut generator),
            Resource::Event => schema_of::<core::Event>(&mut generator),
            Resource::DaemonSet => schema_of::<apps::DaemonSet>(&mut generator),
            Resource::Deployment => schema_of::<apps::Deployment>(&mut generator),
            Resource::PersistentVolume => schema_of::<core::PersistentVolume>(&mut generator),
        }
    }
    schema_of::<k8s_openapi::apimachinery::pkg::apis::meta::v1::Status>(&mut generator);
    let mut schemas = generator.take_definitions(true);
    for r in &resources {
        if let Some(Value::Object(s)) = schemas.get_mut(&schema_name(*r)) {
            s.insert(
                "x-kubernetes-group-version-kind".into(),
                json!([{"group": r.group(), "kind": r.kind(), "version": r.version()}]),
            );
        }
    }
    for ty in Ty::all() {
        let Some(name) = ty.schema_name() else { continue };
        let Some(props) = schemas
            .get_mut(name)
            .and_then(|s| s.get_mut("properties"))
            .and_then(Value::as_object_mut)
        else {
            continue;
        };
        for (field, info) in ty.lists() {
            let Some(Value::Object(p)) = props.get_mut(*field) else { continue };
            match info.list {
                ListType::Atomic => {
                    p.insert("x-kubernetes-list-type".into(), json!("atomic"));
                }
                ListType::Set => {
                    p.insert("x-kubernetes-list-type".into(), json!("set"));
                }
                ListType::Map(keys) => {
                    p.insert("x-kubernetes-list-type".into(), json!("map"));
                    p.insert("x-kubernetes-list-map-keys".into(), json!(keys));
                }
            }
            if let Some(k) = info.merge_key {
                p.insert("x-kubernetes-patch-merge-key".into(), json!(k));
            }
            if let Some(s) = info.strategy {
                p.insert("x-kubernetes-patch-strategy".into(), json!(s));
            }
        }
    }
    let mut paths = Map::new();
    for r in &resources {
        operations(*r, &mut paths);
    }
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": k8s_version},
        "paths": paths,
        "components": {"schemas": schemas},
    })
}

/// The component schema name of a kind (`io.k8s.api.apps.v1.DaemonSet`).
pub fn schema_name(r: Resource) -> String {
    let group = if r.group().is_empty() { "core" } else { r.group() };
    format!("io.k8s.api.{group}.{}.{}", r.version(), r.kind())
}

fn query(name: &str, description: &str) -> Value {
    json!({"name": name, "in": "query", "description": description, "schema": {"type": "string", "uniqueItems": true}})
}

fn operations(r: Resource, paths: &mut Map<String, Value>) {
    let base = if r.group().is_empty() {
        format!("/api/{}", r.version())
    } else {
        format!("/apis/{}/{}", r.group(), r.version())
    };
    let (collection, item) = if r.namespaced() {
        (
            format!("{base}/namespaces/{{namespace}}/{}", r.plural()),
            format!("{base}/namespaces/{{namespace}}/{}/{{name}}", r.plural()),
        )
    } else {
        (format!("{base}/{}", r.plural()), format!("{base}/{}/{{name}}", r.plural()))
    };
    let gvk = json!({"group": r.group(), "kind": r.kind(), "version": r.version()});
    let object = json!({"$ref": format!("#/components/schemas/{}", schema_name(r))});
    let ok = |schema: &Value| json!({"200": {"description": "OK", "content": {"application/json": {"schema": schema}}}});
    let writes = [
        query("dryRun", "When present, indicates that modifications should not be persisted."),
        query(
            "fieldManager",
            "fieldManager is a name associated with the actor or entity that is making these changes.",
        ),
        query(
            "fieldValidation",
            "fieldValidation instructs the server on how to handle objects in the request (POST/PUT/PATCH) containing unknown or duplicate fields. Valid values are: - Ignore - Warn - Strict",
        ),
    ];
    let action =
        |verb: &str, id: &str, params: Vec<Value>, body: Option<Value>, responses: Value| {
            let mut op = json!({
                "operationId": id,
                "parameters": params,
                "responses": responses,
                "x-kubernetes-action": verb,
                "x-kubernetes-group-version-kind": gvk,
            });
            if let Some(b) = body {
                op["requestBody"] = b;
            }
            op
        };
    let json_body = json!({"content": {"application/json": {"schema": object}}, "required": true});
    let patch_body = json!({"content": {
        "application/apply-patch+yaml": {"schema": {"type": "object"}},
        "application/json-patch+json": {"schema": {"type": "object"}},
        "application/merge-patch+json": {"schema": {"type": "object"}},
        "application/strategic-merge-patch+json": {"schema": {"type": "object"}},
    }, "required": true});
    let kind = r.kind();
    let ns = if r.namespaced() { "Namespaced" } else { "" };
    let mut path_params =
        vec![json!({"name": "name", "in": "path", "required": true, "schema": {"type": "string"}})];
    if r.namespaced() {
        path_params.push(json!({"name": "namespace", "in": "path", "required": true, "schema": {"type": "string"}}));
    }
    let mut patch_params = writes.to_vec();
    patch_params.push(query("force", "Force is going to \"force\" Apply requests."));
    paths.insert(
        item,
        json!({
            "get": action("get", &format!("read{ns}{kind}"), vec![], None, ok(&object)),
            "put": action("put", &format!("replace{ns}{kind}"), writes.to_vec(), Some(json_body.clone()), ok(&object)),
            "patch": action("patch", &format!("patch{ns}{kind}"), patch_params, Some(patch_body), ok(&object)),
            "delete": action("delete", &format!("delete{ns}{kind}"), vec![query("dryRun", "")], None,
                ok(&json!({"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.Status"}))),
            "parameters": path_params,
        }),
    );
    let list = json!({"type": "object"});
    let mut collection_params = Vec::new();
    if r.namespaced() {
        collection_params.push(json!({"name": "namespace", "in": "path", "required": true, "schema": {"type": "string"}}));
    }
    paths.insert(
        collection,
        json!({
            "get": action("list", &format!("list{ns}{kind}"), vec![
                query("labelSelector", ""), query("fieldSelector", ""), query("limit", ""),
                query("continue", ""), query("watch", ""), query("resourceVersion", "")], None, ok(&list)),
            "post": action("post", &format!("create{ns}{kind}"), writes.to_vec(), Some(json_body), ok(&object)),
            "parameters": collection_params,
        }),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apps_document_has_the_daemonset_schema_with_kubectl_extensions() {
        let d = document("apps", "v1", "v1.32.6").unwrap();
        let v: Value = serde_json::from_slice(&d.bytes).unwrap();
        let ds = &v["components"]["schemas"]["io.k8s.api.apps.v1.DaemonSet"];
        assert_eq!(ds["x-kubernetes-group-version-kind"][0]["kind"], "DaemonSet");
        let containers =
            &v["components"]["schemas"]["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"];
        assert_eq!(containers["x-kubernetes-patch-merge-key"], "name");
        assert_eq!(containers["x-kubernetes-list-map-keys"], json!(["name"]));
        let patch = &v["paths"]["/apis/apps/v1/namespaces/{namespace}/daemonsets/{name}"]["patch"];
        assert_eq!(patch["x-kubernetes-group-version-kind"]["kind"], "DaemonSet");
        assert!(
            patch["parameters"].as_array().unwrap().iter().any(|p| p["name"] == "fieldValidation")
        );
        assert!(document("batch", "v1", "v1.32.6").is_none());
        let r = root("v1.32.6");
        let url = r["paths"]["apis/apps/v1"]["serverRelativeURL"].as_str().unwrap();
        assert!(url.ends_with(&d.hash), "{url}");
    }
}
