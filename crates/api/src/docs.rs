//! The reference docs (one Markdown page per resource, in the seed's layout) and the
//! OpenAPI 3.1 document, generated from the registry, and the providers page, generated
//! from the adapters' declarations — never written by hand.
//!
//! Invariants: the output is a pure function of the registry and the declarations (same
//! inputs, same bytes), so the committed files can be compared with a fresh generation;
//! the constraints a page prints are read from the same input schema requests are
//! checked against.

use std::collections::BTreeMap;

use bc_domain::ErrorCode;
use bc_domain::model::ClusterMode;
use bc_domain::ports::{PoolUpgrades, ProviderOffer};
use serde_json::{Map, Value, json};

use crate::VERSION;
use crate::registry::{Method, Registry};
use bc_api_types::meta::{Authorization, PHASE, Resource, STATUS};

/// Every generated file under `docs/reference/`, as (relative path, contents): one page
/// per resource in `api/`, `openapi.json`, and `providers.md` from the adapters'
/// declarations `offers` (the composition's, e.g. `bc_providers::offers()`: this crate
/// knows no adapter).
pub fn generated_files(registry: &Registry, offers: &[ProviderOffer]) -> Vec<(String, String)> {
    let mut files: Vec<(String, String)> = reference_pages(registry)
        .into_iter()
        .map(|(name, page)| (format!("api/{name}"), page))
        .collect();
    let openapi = serde_json::to_string_pretty(&openapi(registry)).expect("JSON serializes");
    files.push(("openapi.json".into(), openapi + "\n"));
    files.push(("providers.md".into(), providers_page(offers)));
    files
}

/// One row's cell of a provider on the providers page.
type Cell<'a> = dyn Fn(&ProviderOffer) -> String + 'a;

/// The providers page: what each adapter declares it offers (SPEC §1, §5), one column per
/// provider, read from the declarations the API itself reads — so the page cannot say
/// what the server does not do.
pub fn providers_page(offers: &[ProviderOffer]) -> String {
    let mut out = String::from(
        "# Providers\n\nWhat each provider offers, as its adapter declares it (`ProviderOffer`); \
         the API reads the same declaration, and a call a provider cannot serve is \
         FAILED_PRECONDITION naming the provider and what it lacks (e.g. \
         `loadBalancers.create` on an account of a provider without load balancers). Every \
         method, state, event and rule of the contract holds on each; a node pool's `count` \
         is its total on every provider, and an autopilot cluster has no node pools (its \
         nodes are counted from the cluster).\n\n",
    );
    let yes_no = |b: bool| if b { "yes" } else { "no" };
    let rows: [(&str, &Cell<'_>); 8] = [
        ("Cluster modes", &|o| {
            o.cluster_modes.iter().map(|m| code(&wire_name(m))).collect::<Vec<_>>().join(", ")
        }),
        ("Node pools through this system", &|o| yes_no(o.node_pools).to_owned()),
        ("Load balancer types", &|o| {
            if o.load_balancer_types.is_empty() {
                "none (`loadBalancers.create` is FAILED_PRECONDITION)".to_owned()
            } else {
                let t: Vec<String> =
                    o.load_balancer_types.iter().map(|t| code(&wire_name(t))).collect();
                t.join(", ")
            }
        }),
        ("Longest cluster or node-pool name", &|o| format!("{} characters", o.name_max)),
        ("Resource labels", &|o| o.label_rule.describe().to_owned()),
        ("Node counts (`count`, `autoScale`: totals)", &|o| o.count_placement.to_owned()),
        ("Autopilot `region`", &|o| {
            if !o.cluster_modes.contains(&ClusterMode::Autopilot) {
                "no autopilot clusters".to_owned()
            } else if o.autopilot_regions_only {
                "a region only (not a zone)".to_owned()
            } else {
                "a region or a zone".to_owned()
            }
        }),
        ("Upgrades", &|o| match o.pool_upgrades {
            PoolUpgrades::WithControlPlane => {
                "the cluster's upgrade upgrades every node pool with it".to_owned()
            }
            PoolUpgrades::OneByOne => "the control plane first, then each node pool by its own \
                 operation, one at a time (`updating` meanwhile)"
                .to_owned(),
        }),
    ];
    out.push_str("| |");
    for o in offers {
        out.push_str(&format!(" {} |", code(o.provider.as_str())));
    }
    out.push_str("\n|---|");
    out.push_str(&"---|".repeat(offers.len()));
    out.push('\n');
    for (what, cell) in rows {
        out.push_str(&format!("| {what} |"));
        for o in offers {
            out.push_str(&format!(" {} |", cell(o)));
        }
        out.push('\n');
    }
    out
}

/// A value's wire name, as the API serializes it (`autopilot`, `regional`).
fn wire_name(v: impl serde::Serialize) -> String {
    match serde_json::to_value(v) {
        Ok(Value::String(s)) => s,
        other => format!("{other:?}"),
    }
}

/// The pages: (file name, Markdown) per resource, e.g. `kubernetes-substrates.md`.
pub fn reference_pages(registry: &Registry) -> Vec<(String, String)> {
    registry
        .resources()
        .into_iter()
        .map(|r| (format!("{}.md", r.page), resource_page(registry, r)))
        .collect()
}

/// One resource's page.
pub fn resource_page(registry: &Registry, resource: &Resource) -> String {
    let methods: Vec<&Method> = registry.of(resource).collect();
    let mut out = String::new();
    out.push_str(&format!("# {}\n\n{}\n\n", resource.name, resource.description));
    out.push_str(&format!("All {} methods are served by bc-api {}.\n\n", methods.len(), VERSION));
    out.push_str("| Method | Kind | Authorization | Phase | Status |\n|---|---|---|---|---|\n");
    for m in &methods {
        out.push_str(&format!(
            "| {} | {} | {} | {PHASE} | {STATUS} |\n",
            m.info.name,
            m.info.kind.as_str(),
            m.info.authorization
        ));
    }
    for m in &methods {
        out.push_str(&method_section(m));
    }
    out
}

/// The authorization as the seed's bullet writes it: `compute:kubernetes:read@compute-tenant`.
fn compact_authorization(a: Authorization) -> String {
    match a {
        Authorization::Permission { permission, on } => {
            format!("{}@{}", permission.as_str(), on.as_str())
        }
        other => other.to_string(),
    }
}

fn method_section(m: &Method) -> String {
    let info = &m.info;
    let also: String = m
        .also_authorization()
        .iter()
        .map(|a| {
            format!(
                "\n- Also: {}@{}, on the object named by `{}` when it is set",
                a.permission.as_str(),
                a.on.as_str(),
                a.field
            )
        })
        .collect();
    let mut out = format!(
        "\n## {}\n\n`POST {}`\n\n{}\n\n- Kind: {}\n- Authorization: {}{also}\n- Module: {}\n- Phase: {PHASE} ({STATUS})\n\n### Input\n\n",
        info.name,
        info.path(),
        info.description,
        info.kind.as_str(),
        compact_authorization(info.authorization),
        info.resource.module,
    );
    let mut rows = Vec::new();
    field_rows(m.input_schema(), "", m.input_fields(), &mut rows);
    if rows.is_empty() {
        out.push_str("None: the body is `{}`.\n");
        return out;
    }
    out.push_str("| Field | Type | Required | Constraints |\n|---|---|---|---|\n");
    for row in rows {
        out.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            row.field,
            row.kind,
            if row.required { "yes" } else { "no" },
            row.constraints
        ));
    }
    if let Some(keys) = exactly_one(m.input_schema()) {
        out.push_str(&format!("\nExactly one of {} is set.\n", keys.join(", ")));
    }
    out
}

/// The keys of an object's "exactly one of" rule across its fields (a `oneOf` whose every
/// branch requires one key and states no type), as code.
fn exactly_one(schema: &Value) -> Option<Vec<String>> {
    let branches = schema.get("oneOf")?.as_array()?;
    branches
        .iter()
        .map(|b| match b.get("required")?.as_array()?.as_slice() {
            [key] if b.get("type").is_none() => key.as_str().map(code),
            _ => None,
        })
        .collect()
}

/// One row of an input table.
struct Row {
    field: String,
    kind: String,
    required: bool,
    constraints: String,
}

/// The rows of an object schema's properties, nested objects' fields after their object
/// (`policy.substrate.kind`), array items' as `flavors[].name`. `order` gives the
/// top-level fields in declaration order; nested fields come required first.
fn field_rows(schema: &Value, prefix: &str, order: &[&str], out: &mut Vec<Row>) {
    let schema = unwrap_nullable(schema);
    let (properties, required) = object_parts(schema);
    let mut names: Vec<&String> = properties.keys().collect();
    let rank = |n: &str| {
        order
            .iter()
            .position(|o| *o == n)
            .or_else(|| required.iter().position(|r| r == n).map(|i| 1000 + i))
            .unwrap_or(usize::MAX)
    };
    names.sort_by_key(|n| (rank(n), n.to_string()));
    for name in names {
        let prop = unwrap_nullable(&properties[name]);
        let field = format!("{prefix}{name}");
        out.push(Row {
            field: field.clone(),
            kind: type_name(prop),
            required: required.iter().any(|r| r == name),
            constraints: constraints(prop),
        });
        let item = prop.get("items").map(unwrap_nullable);
        if is_object_with_fields(prop) {
            field_rows(prop, &format!("{field}."), &[], out);
        } else if let Some(item) = item.filter(|i| is_object_with_fields(i)) {
            field_rows(item, &format!("{field}[]."), &[], out);
        }
    }
}

/// The properties and required names of an object schema; for an externally tagged enum
/// (`oneOf` of single-key objects, e.g. `cluster: {create} | {adopt}`), the union of its
/// variants, none required.
fn object_parts(schema: &Value) -> (Map<String, Value>, Vec<String>) {
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        let required = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
            .unwrap_or_default();
        return (props.clone(), required);
    }
    let mut props = Map::new();
    for branch in tagged_variants(schema) {
        if let Some(p) = branch.get("properties").and_then(Value::as_object) {
            props.extend(p.clone());
        }
    }
    (props, Vec::new())
}

/// The branches of an externally tagged enum: a `oneOf` whose branches are objects.
fn tagged_variants(schema: &Value) -> Vec<&Value> {
    schema
        .get("oneOf")
        .and_then(Value::as_array)
        .filter(|b| b.iter().all(|x| x.get("type") == Some(&json!("object"))))
        .map(|b| b.iter().collect())
        .unwrap_or_default()
}

fn is_object_with_fields(schema: &Value) -> bool {
    schema.get("properties").is_some() || !tagged_variants(schema).is_empty()
}

/// `X` for `anyOf: [X, null]`, otherwise the schema itself.
fn unwrap_nullable(schema: &Value) -> &Value {
    if let Some(branches) = schema.get("anyOf").and_then(Value::as_array) {
        let not_null: Vec<&Value> =
            branches.iter().filter(|b| b.get("type") != Some(&json!("null"))).collect();
        if not_null.len() == 1 {
            return not_null[0];
        }
    }
    schema
}

/// The enum values of a schema: `enum`, or a `oneOf` of `const`s.
fn enum_values(schema: &Value) -> Option<Vec<String>> {
    let render = |v: &Value| v.as_str().map(str::to_owned).unwrap_or_else(|| v.to_string());
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        return Some(values.iter().map(render).collect());
    }
    let branches = schema.get("oneOf").and_then(Value::as_array)?;
    branches.iter().map(|b| b.get("const").map(render)).collect()
}

/// The Type column: `string`, `integer`, `array of object`, `map of string`, …
fn type_name(schema: &Value) -> String {
    let schema = unwrap_nullable(schema);
    if enum_values(schema).is_some() {
        return "string".into();
    }
    if !tagged_variants(schema).is_empty() {
        return "object".into();
    }
    let t = match schema.get("type") {
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(ts)) => {
            ts.iter().filter_map(Value::as_str).find(|t| *t != "null").unwrap_or("null").to_owned()
        }
        _ => return "any".into(),
    };
    match t.as_str() {
        "array" => format!("array of {}", schema.get("items").map_or("any".into(), type_name)),
        "object" if schema.get("properties").is_none() => match map_values(schema) {
            Some(v) => format!("map of {}", type_name(v)),
            None => "object".into(),
        },
        _ => t,
    }
}

/// The value schema of a map (`additionalProperties` or the one `patternProperties`).
fn map_values(schema: &Value) -> Option<&Value> {
    if let Some(p) = schema.get("patternProperties").and_then(Value::as_object) {
        return p.values().next();
    }
    schema.get("additionalProperties").filter(|v| v.is_object())
}

/// Inline code in a table cell (`|` escaped so it does not end the cell).
fn code(s: &str) -> String {
    format!("`{}`", s.replace('|', "\\|"))
}

/// A JSON number as written by a person (`512`, not `512.0`).
fn number(v: &Value) -> String {
    match v.as_f64() {
        Some(f) if f.fract() == 0.0 && f.abs() < 1e15 => format!("{}", f as i64),
        _ => v.to_string(),
    }
}

/// The Constraints column, in the seed's words: "at most 128 characters; matches ^…$".
fn constraints(schema: &Value) -> String {
    let schema = unwrap_nullable(schema);
    let mut parts: Vec<String> = Vec::new();
    if let Some(values) = enum_values(schema) {
        parts.push(format!(
            "one of {}",
            values.iter().map(|v| code(v)).collect::<Vec<_>>().join(", ")
        ));
    }
    if let Some(keys) = exactly_one(schema) {
        parts.push(format!("exactly one of {} is set", keys.join(", ")));
    }
    let variants = tagged_variants(schema);
    if !variants.is_empty() {
        let keys: Vec<String> = variants
            .iter()
            .filter_map(|b| b.get("required")?.as_array()?.first()?.as_str().map(code))
            .collect();
        parts.push(format!("exactly one of {}", keys.join(", ")));
    }
    if let Some(max) = schema.get("maxLength") {
        parts.push(format!("at most {} characters", number(max)));
    }
    if let Some(min) = schema.get("minLength").filter(|m| m.as_u64() > Some(0)) {
        parts.push(format!("at least {} characters", number(min)));
    }
    if let Some(p) = schema.get("pattern").and_then(Value::as_str) {
        parts.push(format!("matches {}", code(p)));
    }
    if schema.get("format").and_then(Value::as_str) == Some("date-time") {
        parts.push("an RFC 3339 time, e.g. `2026-12-02T12:57:15.123Z`".into());
    }
    let (min, max) = (schema.get("minimum"), schema.get("maximum"));
    match (min, max) {
        (Some(a), Some(b)) => parts.push(format!("{} to {}", number(a), number(b))),
        (Some(a), None) if a.as_f64() != Some(0.0) => parts.push(format!("at least {}", number(a))),
        (None, Some(b)) => parts.push(format!("at most {}", number(b))),
        _ => {}
    }
    let (min_items, max_items) = (schema.get("minItems"), schema.get("maxItems"));
    match (min_items, max_items) {
        (Some(a), Some(b)) => parts.push(format!("{} to {} items", number(a), number(b))),
        (Some(a), None) => parts.push(format!(
            "at least {} item{}",
            number(a),
            if a.as_u64() == Some(1) { "" } else { "s" }
        )),
        (None, Some(b)) => parts.push(format!("at most {} items", number(b))),
        _ => {}
    }
    match (schema.get("minProperties"), schema.get("maxProperties")) {
        (Some(a), Some(b)) => parts.push(format!("{} to {} keys", number(a), number(b))),
        (Some(a), None) => parts.push(format!("at least {} keys", number(a))),
        (None, Some(b)) => parts.push(format!("at most {} keys", number(b))),
        _ => {}
    }
    if let Some(p) = schema.get("patternProperties").and_then(Value::as_object) {
        for (key_pattern, value) in p {
            parts.push(format!("keys match {}", code(key_pattern)));
            let values = constraints(value);
            if !values.is_empty() {
                parts.push(format!("values: {values}"));
            }
        }
    }
    if let Some(items) = schema.get("items") {
        let item = unwrap_nullable(items);
        if let Some(keys) = exactly_one(item) {
            parts.push(format!("each: exactly one of {} is set", keys.join(", ")));
        } else if !is_object_with_fields(item) {
            let each = constraints(item);
            if !each.is_empty() {
                parts.push(format!("each: {each}"));
            }
        }
    }
    if schema.get("writeOnly") == Some(&Value::Bool(true)) {
        parts.push("write-only: never returned".into());
    }
    if let Some(d) =
        schema.get("default").filter(|d| !d.is_object() && !d.is_array() && !d.is_null())
    {
        let shown = match d.as_str() {
            Some("") => "\"\"".to_owned(),
            Some(s) => s.to_owned(),
            None => number(d),
        };
        parts.push(format!("default {}", code(&shown)));
    }
    parts.join("; ")
}

/// `kubernetesSubstrates` + `get` → `kubernetes_substrates_get`.
fn operation_id(resource: &str, method: &str) -> String {
    let mut out = String::new();
    for c in resource.chars().chain(std::iter::once('_')).chain(method.chars()) {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// The schema of every error answer (SPEC §2).
fn error_schema() -> Value {
    let mut codes: Vec<&str> = [
        ErrorCode::InvalidArgument,
        ErrorCode::FailedPrecondition,
        ErrorCode::Unauthenticated,
        ErrorCode::PermissionDenied,
        ErrorCode::NotFound,
        ErrorCode::AlreadyExists,
        ErrorCode::Aborted,
        ErrorCode::PayloadTooLarge,
        ErrorCode::ResourceExhausted,
        ErrorCode::Internal,
        ErrorCode::Unavailable,
    ]
    .iter()
    .map(|c| c.as_str())
    .collect();
    codes.push(crate::error::Code::MethodNotAllowed.as_str());
    json!({
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["code", "message"],
                "properties": {
                    "code": { "type": "string", "enum": codes },
                    "message": { "type": "string", "description": "What went wrong, in words a caller can act on. Never a secret or SQL." },
                    "field": { "type": "string", "description": "The JSON path of the offending input field, e.g. policy.flavors[1].name." }
                }
            }
        }
    })
}

/// Adds a component schema, which must not differ from one already under that name.
fn add_component(components: &mut BTreeMap<String, Value>, name: &str, schema: &Value) {
    let mut schema = schema.clone();
    if let Some(map) = schema.as_object_mut() {
        map.remove("$schema");
        map.remove("title");
    }
    if let Some(existing) = components.get(name) {
        assert_eq!(existing, &schema, "two different schemas are both named {name}");
    }
    components.insert(name.to_owned(), schema);
}

fn reference(name: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{name}") })
}

/// `GET /api/compute/events/stream` (Server-Sent Events; not a registry method, as it is
/// not a JSON call): its facts come from the stream's own declaration.
fn stream_operation(error_response: &Value) -> Value {
    use crate::stream::{MAX_STREAMS_PER_TOKEN, RECHECK};
    use bc_api_types::events::{LAST_EVENT_ID, STREAM, SUBJECT_MAX, SUBJECT_PATTERN};
    json!({ "get": {
        "operationId": operation_id(STREAM.resource.name, STREAM.name),
        "tags": [STREAM.resource.name],
        "summary": STREAM.id().to_string(),
        "description": format!("{} Each event is sent as `id: <seq>` and `data: <the event's JSON>` ({{eventId, seq, tenantId, subject, type, time, data}}), in seq order, with keep-alive comments while idle. Reconnect with Last-Event-ID set to the last seq seen to resume after it. The token is checked again at least every {} s: the stream ends once it is revoked or its grants no longer allow compute:events:read on the tenant. A token holds at most {MAX_STREAMS_PER_TOKEN} open streams; one more is RESOURCE_EXHAUSTED.", STREAM.description, RECHECK.as_secs()),
        "x-kind": STREAM.kind.as_str(),
        "x-authorization": STREAM.authorization.to_string(),
        "x-module": STREAM.resource.module,
        "x-phase": PHASE,
        "x-status": STATUS,
        "security": [{ "apiToken": [] }],
        "parameters": [
            { "name": "tenantId", "in": "query", "required": true,
              "schema": { "type": "string", "maxLength": bc_domain::TENANT_ID_MAX, "pattern": bc_domain::TENANT_ID_PATTERN } },
            { "name": "subject", "in": "query", "required": false,
              "schema": { "type": "string", "maxLength": SUBJECT_MAX, "pattern": SUBJECT_PATTERN } },
            { "name": LAST_EVENT_ID, "in": "header", "required": false,
              "description": "The seq of the last event seen.",
              "schema": { "type": "integer", "minimum": 0, "maximum": bc_domain::model::INTEGER_MAX } }
        ],
        "responses": {
            "200": { "description": "An endless stream of events.", "content": { "text/event-stream": { "schema": { "type": "string" } } } },
            "default": error_response
        }
    }})
}

/// The OpenAPI links of a create's answer: to every other method of its resource that
/// names one object and takes nothing the answer lacks (its get, update, delete, …), with
/// a request body whose fields are read from the answer (`$response.body#/poolId`), so a
/// tool can follow a create with calls on what it made.
fn links(registry: &Registry, create: &Method) -> Map<String, Value> {
    let mut out = Map::new();
    if create.info.name != "create" {
        return out;
    }
    let Some(made) = create.output_schema().get("properties").and_then(Value::as_object) else {
        return out;
    };
    for m in registry.of(create.info.resource) {
        if m.info.name == "create" || m.info.name == "list" {
            continue;
        }
        let input = m.input_schema();
        let required = input.get("required").and_then(Value::as_array);
        let names_one = required.into_iter().flatten().filter_map(Value::as_str);
        let takes: Vec<&str> = names_one.collect();
        if takes.is_empty() || !takes.iter().all(|f| made.contains_key(*f)) {
            continue;
        }
        let fields = input.get("properties").and_then(Value::as_object);
        let body: Map<String, Value> = fields
            .into_iter()
            .flat_map(|f| f.keys())
            .filter(|f| made.contains_key(*f))
            .map(|f| (f.clone(), json!(format!("$response.body#/{f}"))))
            .collect();
        out.insert(
            m.info.name.to_owned(),
            json!({
                "operationId": operation_id(m.info.resource.name, m.info.name),
                "description": format!("{} on what this call made.", m.info.id()),
                "requestBody": body,
            }),
        );
    }
    out
}

/// The OpenAPI 3.1 document of the registry, served at `GET /api/openapi.json`.
pub fn openapi(registry: &Registry) -> Value {
    let mut components = BTreeMap::new();
    add_component(&mut components, "Error", &error_schema());
    let error_response = json!({
        "description": "An error: the code's HTTP status and {\"error\":{\"code\",\"message\",\"field\"?}}.",
        "content": { "application/json": { "schema": reference("Error") } }
    });
    let mut paths = Map::new();
    for m in registry.methods() {
        let info = &m.info;
        add_component(&mut components, m.input_name(), m.input_schema());
        add_component(&mut components, m.output_name(), m.output_schema());
        let security = match info.authorization {
            Authorization::Permission { .. } => json!([{ "apiToken": [] }]),
            Authorization::JoinToken => json!([]),
            Authorization::NodeCredential => json!([{ "nodeCredential": [] }]),
        };
        let mut operation = json!({
            "operationId": operation_id(info.resource.name, info.name),
            "tags": [info.resource.name],
            "summary": info.id().to_string(),
            "description": info.description,
            "x-kind": info.kind.as_str(),
            "x-authorization": info.authorization.to_string(),
            "x-module": info.resource.module,
            "x-phase": PHASE,
            "x-status": STATUS,
            "security": security,
            "requestBody": {
                "required": true,
                "content": { "application/json": { "schema": reference(m.input_name()), "example": m.example() } }
            },
            "responses": {
                "200": {
                    "description": "The answer.",
                    "content": { "application/json": { "schema": reference(m.output_name()) } }
                },
                "default": error_response.clone()
            }
        });
        let also = m.also_authorization();
        if !also.is_empty() {
            let text: Vec<String> = also.iter().map(ToString::to_string).collect();
            operation["x-also-authorization"] = json!(text.join("; "));
        }
        let links = links(registry, m);
        if !links.is_empty() {
            operation["responses"]["200"]["links"] = Value::Object(links);
        }
        paths.insert(info.path(), json!({ "post": operation }));
    }
    let plain = |summary: &str, content: &str| {
        json!({ "get": {
            "operationId": summary.trim_start_matches('/').replace(['/', '.'], "_"),
            "summary": summary,
            "security": [],
            "responses": { "200": { "description": content }, "default": error_response.clone() }
        }})
    };
    paths.insert(crate::stream::STREAM_PATH.into(), stream_operation(&error_response));
    paths.insert("/healthz".into(), plain("/healthz", "The process is up."));
    paths.insert("/readyz".into(), plain("/readyz", "The store is reachable and migrated."));
    paths.insert("/metrics".into(), plain("/metrics", "Metrics in the OpenMetrics text format."));
    paths.insert("/api/openapi.json".into(), plain("/api/openapi.json", "This document."));
    let tags: Vec<Value> = registry
        .resources()
        .iter()
        .map(|r| json!({ "name": r.name, "description": r.description }))
        .collect();
    json!({
        "openapi": "3.1.0",
        "jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
        "info": {
            "title": "Better Compute: Kubernetes and provider resources",
            "version": VERSION,
            "description": "Every method is POST /api/compute/<resource>/<method> with a JSON object in and out. Generated from bc-api's method registry."
        },
        "tags": tags,
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {
                "apiToken": { "type": "http", "scheme": "bearer", "description": "An API token: bc_ and 43 base64url characters." },
                "nodeCredential": { "type": "http", "scheme": "bearer", "description": "A node credential from agents.join." }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operation_ids_are_snake_case() {
        assert_eq!(operation_id("kubernetesSubstrates", "get"), "kubernetes_substrates_get");
        assert_eq!(operation_id("pools", "create"), "pools_create");
    }

    #[test]
    fn constraints_read_like_the_seed() {
        let s = json!({"type":"string","maxLength":128,"pattern":"^[A-Za-z0-9._:-]{1,128}$"});
        assert_eq!(constraints(&s), "at most 128 characters; matches `^[A-Za-z0-9._:-]{1,128}$`");
        let n = json!({"type":["integer","null"],"format":"uint32","minimum":1,"maximum":512});
        assert_eq!(constraints(&n), "1 to 512");
        assert_eq!(type_name(&n), "integer");
        let e = json!({"oneOf":[{"type":"string","const":"drain"},{"type":"string","const":"immediate"}],"default":"drain"});
        assert_eq!(constraints(&e), "one of `drain`, `immediate`; default `drain`");
        assert_eq!(
            constraints(&json!({"type":"string","pattern":"^(a|b)$"})),
            "matches `^(a\\|b)$`"
        );
        assert_eq!(constraints(&json!({"type":"integer","minimum":0})), "");
    }
}
