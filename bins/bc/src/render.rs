//! Output: `table` (a few readable columns per resource, states coloured only on a
//! terminal), `json`, `yaml`, and `id` (the object's id only, for scripts).
//!
//! Invariant: `json` and `yaml` print the API's answer as it came (a list's pages joined
//! into one list); `table` only chooses and formats fields, it never computes new ones.

use serde_json::Value;

/// The output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Columns.
    Table,
    /// The answer as JSON (one document per line while watching).
    Json,
    /// The answer as YAML (`---` between documents while watching).
    Yaml,
    /// Only the object's id (one per line for a list), for scripts.
    Id,
}

impl Format {
    /// `table`, `json` or `yaml`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "table" => Some(Format::Table),
            "json" => Some(Format::Json),
            "yaml" => Some(Format::Yaml),
            "id" => Some(Format::Id),
            _ => None,
        }
    }
}

/// The columns of a resource's table: header and JSON pointer.
fn columns(resource: &str) -> &'static [(&'static str, &'static str)] {
    match resource {
        "pools" => &[
            ("POOL", "/poolId"),
            ("NAME", "/name"),
            ("STATE", "/state"),
            ("GEN", "/generation"),
            ("CREATED", "/createdAt"),
        ],
        "quotas" => &[("RESOURCE", "/resource"), ("LIMIT", "/limit"), ("USED", "/used")],
        "providerAccounts" => &[
            ("ACCOUNT", "/providerAccountId"),
            ("NAME", "/name"),
            ("PROVIDER", "/provider"),
            ("CREATED", "/createdAt"),
        ],
        "kubernetesSubstrates" => &[
            ("POOL", "/poolId"),
            ("MODE", "/mode"),
            ("STATE", "/state"),
            ("LISTED", "/nodesListed"),
            ("JOINED", "/nodesJoined"),
            ("CLUSTER", "/clusterId"),
            ("MESSAGE", "/message"),
        ],
        "kubernetesClusters" => &[
            ("CLUSTER", "/clusterId"),
            ("NAME", "/name"),
            ("REGION", "/region"),
            ("VERSION", "/version"),
            ("STATE", "/state"),
            ("MESSAGE", "/message"),
        ],
        "kubernetesNodePools" => &[
            ("NODE POOL", "/nodePoolId"),
            ("NAME", "/name"),
            ("SIZE", "/size"),
            ("COUNT", "/count"),
            ("READY", "/nodes/ready"),
            ("STATE", "/state"),
        ],
        "loadBalancers" => &[
            ("LOAD BALANCER", "/loadBalancerId"),
            ("NAME", "/name"),
            ("TYPE", "/type"),
            ("REGION", "/region"),
            ("IP", "/ip"),
            ("STATE", "/state"),
        ],
        "bookings" => &[
            ("BOOKING", "/bookingId"),
            ("POOL", "/poolId"),
            ("NODE", "/nodeName"),
            ("STATE", "/state"),
            ("ENDS", "/endsAt"),
        ],
        "billing" => &[
            ("METER", "/meter"),
            ("RESOURCE", "/resource"),
            ("POOL", "/poolId"),
            ("HOURS", "/quantity"),
            ("FROM", "/from"),
            ("TO", "/to"),
        ],
        "events" => {
            &[("SEQ", "/seq"), ("TIME", "/time"), ("TYPE", "/type"), ("SUBJECT", "/subject")]
        }
        _ => &[],
    }
}

/// The items of a list answer (its one array field) or the answer itself as one row.
fn rows(answer: &Value) -> Vec<&Value> {
    if let Value::Object(map) = answer {
        let arrays: Vec<&Vec<Value>> = map.values().filter_map(Value::as_array).collect();
        let only_a_page = map.iter().all(|(k, v)| v.is_array() || k == "nextPageToken");
        if arrays.len() == 1 && only_a_page {
            return arrays[0].iter().collect();
        }
    }
    vec![answer]
}

/// A cell's text.
fn cell(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => "-".into(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// A state in colour (on a terminal only).
fn paint(state: &str, color: bool) -> String {
    if !color {
        return state.to_owned();
    }
    let code = match state {
        "ready" | "active" => "32",
        "error" => "31",
        "pending" | "provisioning" | "updating" | "deleting" | "new" => "33",
        "deleted" | "archived" | "ended" => "2",
        _ => return state.to_owned(),
    };
    format!("\x1b[{code}m{state}\x1b[0m")
}

/// The table of `answer` (one row, or one per item of a list), for `resource`.
pub fn table(resource: &str, answer: &Value, color: bool) -> String {
    let rows = rows(answer);
    let mut cols: Vec<(String, String)> =
        columns(resource).iter().map(|(h, p)| ((*h).to_owned(), (*p).to_owned())).collect();
    if cols.is_empty() {
        // A resource without a layout: its scalar fields, in the answer's order.
        if let Some(Value::Object(first)) = rows.first() {
            cols = first
                .iter()
                .filter(|(_, v)| !v.is_object() && !v.is_array())
                .take(8)
                .map(|(k, _)| (crate::commands::kebab(k).to_uppercase(), format!("/{k}")))
                .collect();
        }
    }
    let cells: Vec<Vec<String>> =
        rows.iter().map(|r| cols.iter().map(|(_, p)| cell(r.pointer(p))).collect()).collect();
    let mut widths: Vec<usize> = cols.iter().map(|(h, _)| h.chars().count()).collect();
    for row in &cells {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    let line = |out: &mut String, values: Vec<String>, raw: &[String]| {
        let last = values.len().saturating_sub(1);
        for (i, (v, r)) in values.iter().zip(raw).enumerate() {
            out.push_str(v);
            if i < last {
                let pad = widths[i] - r.chars().count() + 2;
                out.push_str(&" ".repeat(pad));
            }
        }
        out.push('\n');
    };
    let headers: Vec<String> = cols.iter().map(|(h, _)| h.clone()).collect();
    line(&mut out, headers.clone(), &headers);
    for row in cells {
        let shown: Vec<String> = row
            .iter()
            .zip(&cols)
            .map(|(c, (h, _))| if h == "STATE" { paint(c, color) } else { c.clone() })
            .collect();
        line(&mut out, shown, &row);
    }
    out
}

/// `answer` in `format`, ending with a newline.
pub fn render(format: Format, resource: &str, answer: &Value, color: bool) -> String {
    match format {
        Format::Table => table(resource, answer, color),
        Format::Json => {
            let mut s = serde_json::to_string_pretty(answer).unwrap_or_default();
            s.push('\n');
            s
        }
        Format::Yaml => yaml(answer),
        Format::Id => ids(resource, answer),
    }
}

/// The object's own id, or each item's for a list (`poolId` of a pool or a substrate,
/// `loadBalancerId` of a load balancer: the field its methods name it by).
fn ids(resource: &str, answer: &Value) -> String {
    let Some(key) = crate::commands::id_field(resource) else { return String::new() };
    rows(answer)
        .into_iter()
        .filter_map(|r| r.get(key).and_then(Value::as_str))
        .map(|id| format!("{id}\n"))
        .collect()
}

/// One document while watching: `json` on one line, `yaml` after `---`, `table` as is.
pub fn render_watched(format: Format, resource: &str, answer: &Value, color: bool) -> String {
    match format {
        Format::Json => format!("{answer}\n"),
        Format::Yaml => format!("---\n{}", yaml(answer)),
        Format::Table => table(resource, answer, color),
        Format::Id => ids(resource, answer),
    }
}

fn yaml(answer: &Value) -> String {
    let mut s = serde_saphyr::to_string(answer).unwrap_or_default();
    if !s.ends_with('\n') {
        s.push('\n');
    }
    s
}
