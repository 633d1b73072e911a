//! Validation of the served kinds as the apiserver validates them
//! (`k8s.io/kubernetes/pkg/apis/*/validation`): what a real server refuses with 422
//! `Invalid` — names, label keys and values, required fields, a workload selector that
//! does not match its template labels, container and env rules, tolerations, Secret and
//! ConfigMap keys, immutable fields — with the field paths and the wording of
//! `field.Error`, so a bug in what we apply fails here as it would on DOKS.
//!
//! Invariant: every rule reports the field it concerns; validation reads the object after
//! defaults (as the apiserver does) and never changes it.

use std::collections::BTreeSet;
use std::sync::OnceLock;

use bc_domain::name::{
    LABEL_KEY_NAME_MAX, LABEL_KEY_NAME_PATTERN, LABEL_KEY_PREFIX_MAX, LABEL_KEY_PREFIX_PATTERN,
    LABEL_VALUE_MAX, LABEL_VALUE_PATTERN, NAME_PATTERN,
};
use regex::Regex;
use serde_json::{Map, Value};

use super::Resource;
use super::error::{Cause, KubeError};
use super::selector::{Requirement, Selector};

// The 422 that carries problems lives with them, so the error module needs nothing of
// validation (no import circle between the two).
impl KubeError {
    /// 422 `Invalid`: `DaemonSet.apps "x" is invalid: [a: …, b: …]` with one cause per
    /// problem; `details.kind` is the kind here, as the apiserver writes it.
    pub fn invalid(resource: Resource, name: &str, problems: &[Problem]) -> Self {
        let list: Vec<String> = problems.iter().map(Problem::message).collect();
        let what = match list.as_slice() {
            [one] => one.clone(),
            many => format!("[{}]", many.join(", ")),
        };
        let mut e = Self::new(
            422,
            "Invalid",
            format!("{} \"{name}\" is invalid: {what}", resource.qualified_kind()),
        );
        e.details.kind = Some(resource.kind().to_owned());
        e.details.name = Some(name.to_owned());
        e.details.group = (!resource.group().is_empty()).then(|| resource.group().to_owned());
        e.details.causes = problems.iter().map(Problem::cause).collect();
        e
    }
}

/// One validation failure (`field.Error`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// `FieldValueRequired`, `FieldValueInvalid`, …
    pub reason: &'static str,
    /// `spec.selector`.
    pub field: String,
    /// What follows `<field>: ` in the message, e.g. `Required value`.
    pub detail: String,
}

impl Problem {
    fn new(reason: &'static str, field: &str, detail: String) -> Self {
        Self { reason, field: field.to_owned(), detail }
    }
    /// `Required value`.
    pub fn required(field: &str) -> Self {
        Self::new("FieldValueRequired", field, "Required value".into())
    }
    /// `Invalid value: <value>: <why>`.
    pub fn invalid(field: &str, value: &str, why: &str) -> Self {
        let detail = if why.is_empty() {
            format!("Invalid value: {value}")
        } else {
            format!("Invalid value: {value}: {why}")
        };
        Self::new("FieldValueInvalid", field, detail)
    }
    /// `Unsupported value: "x": supported values: "a", "b"`.
    pub fn not_supported(field: &str, value: &str, supported: &[&str]) -> Self {
        let list: Vec<String> = supported.iter().map(|s| format!("\"{s}\"")).collect();
        Self::new(
            "FieldValueNotSupported",
            field,
            format!("Unsupported value: {}: supported values: {}", quote(value), list.join(", ")),
        )
    }
    /// `Forbidden: <why>`.
    pub fn forbidden(field: &str, why: &str) -> Self {
        Self::new("FieldValueForbidden", field, format!("Forbidden: {why}"))
    }
    /// `Duplicate value: <value>`.
    pub fn duplicate(field: &str, value: &str) -> Self {
        Self::new("FieldValueDuplicate", field, format!("Duplicate value: {value}"))
    }
    /// `Not found: <value>`.
    pub fn not_found(field: &str, value: &str) -> Self {
        Self::new("FieldValueNotFound", field, format!("Not found: {value}"))
    }
    /// `Too long: may not be more than N bytes`.
    pub fn too_long(field: &str, max: usize) -> Self {
        Self::new("FieldValueTooLong", field, format!("Too long: may not be more than {max} bytes"))
    }

    /// `<field>: <detail>`.
    pub fn message(&self) -> String {
        format!("{}: {}", self.field, self.detail)
    }

    /// As a Status cause.
    pub fn cause(&self) -> Cause {
        Cause {
            reason: self.reason.into(),
            message: self.detail.clone(),
            field: self.field.clone(),
        }
    }
}

/// `"x"` with Go's quoting of strings.
pub fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

fn re(cell: &'static OnceLock<Regex>, pattern: &str) -> &'static Regex {
    cell.get_or_init(|| Regex::new(pattern).expect("a valid pattern"))
}

const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const DNS1035_LABEL_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
const QUALIFIED_NAME_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
const CONFIG_KEY_MSG: &str = "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";
const ENV_NAME_MSG: &str = "a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', and must not start with a digit (e.g. 'my.env-name',  or 'MY_ENV.NAME',  or 'MyEnvName1', regex used for validation is '[-._a-zA-Z][-._a-zA-Z0-9]*')";

/// The reasons a string is not a DNS-1123 label (empty when it is one).
pub fn dns1123_label(s: &str) -> Vec<String> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let mut why = Vec::new();
    if s.len() > 63 {
        why.push("must be no more than 63 characters".to_owned());
    }
    if !re(&RE, NAME_PATTERN).is_match(s) {
        why.push(DNS1123_LABEL_MSG.to_owned());
    }
    why
}

/// The reasons a string is not a DNS-1123 subdomain.
pub fn dns1123_subdomain(s: &str) -> Vec<String> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let mut why = Vec::new();
    if s.len() > 253 {
        why.push("must be no more than 253 characters".to_owned());
    }
    if !re(&RE, LABEL_KEY_PREFIX_PATTERN).is_match(s) {
        why.push(DNS1123_SUBDOMAIN_MSG.to_owned());
    }
    why
}

fn dns1035_label(s: &str) -> Vec<String> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let mut why = Vec::new();
    if s.len() > 63 {
        why.push("must be no more than 63 characters".to_owned());
    }
    if !re(&RE, "^[a-z]([-a-z0-9]*[a-z0-9])?$").is_match(s) {
        why.push(DNS1035_LABEL_MSG.to_owned());
    }
    why
}

/// The reasons a string is not a qualified name (a label or annotation key).
pub fn qualified_name(s: &str) -> Vec<String> {
    static NAME: OnceLock<Regex> = OnceLock::new();
    let (prefix, name) = match s.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, s),
    };
    let mut why = Vec::new();
    if let Some(p) = prefix {
        if p.is_empty() {
            why.push("prefix part must be non-empty".to_owned());
        } else {
            for w in dns1123_subdomain(p) {
                why.push(format!("prefix part {w}"));
            }
        }
        if p.len() > LABEL_KEY_PREFIX_MAX {
            why.push(format!("prefix part must be no more than {LABEL_KEY_PREFIX_MAX} characters"));
        }
    }
    if name.is_empty() {
        why.push("name part must be non-empty".to_owned());
    } else {
        if name.len() > LABEL_KEY_NAME_MAX {
            why.push(format!("name part must be no more than {LABEL_KEY_NAME_MAX} characters"));
        }
        if !re(&NAME, LABEL_KEY_NAME_PATTERN).is_match(name) {
            why.push(QUALIFIED_NAME_MSG.to_owned());
        }
    }
    why
}

fn label_value(s: &str) -> Vec<String> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let mut why = Vec::new();
    if s.len() > LABEL_VALUE_MAX {
        why.push(format!("must be no more than {LABEL_VALUE_MAX} characters"));
    }
    if !re(&RE, LABEL_VALUE_PATTERN).is_match(s) {
        why.push(LABEL_VALUE_MSG.to_owned());
    }
    why
}

fn config_key(s: &str) -> Vec<String> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let mut why = Vec::new();
    if s.len() > 253 {
        why.push("must be no more than 253 characters".to_owned());
    }
    if !re(&RE, "^[-._a-zA-Z0-9]+$").is_match(s) {
        why.push(CONFIG_KEY_MSG.to_owned());
    }
    if s == "." || s == ".." {
        why.push(format!("must not be '{s}'"));
    } else if s.starts_with("..") {
        why.push("must not start with '..'".to_owned());
    }
    why
}

fn env_name(s: &str) -> Vec<String> {
    static RE: OnceLock<Regex> = OnceLock::new();
    if re(&RE, "^[-._a-zA-Z][-._a-zA-Z0-9]*$").is_match(s) {
        Vec::new()
    } else {
        vec![ENV_NAME_MSG.to_owned()]
    }
}

/// Collects the problems of one object.
struct Check {
    out: Vec<Problem>,
}

fn s<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

fn arr<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key).and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default()
}

fn map<'a>(v: &'a Value, key: &str) -> Option<&'a Map<String, Value>> {
    v.get(key).and_then(Value::as_object)
}

/// Go's `%#v` of a string map, as selector messages print labels.
fn go_map(m: Option<&Map<String, Value>>) -> String {
    let inner: Vec<String> = m
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{}:{}", quote(k), quote(v.as_str().unwrap_or_default())))
        .collect();
    format!("map[string]string{{{}}}", inner.join(", "))
}

impl Check {
    fn push(&mut self, p: Problem) {
        self.out.push(p);
    }

    fn each(&mut self, field: &str, value: &str, why: Vec<String>) {
        for w in why {
            self.push(Problem::invalid(field, &quote(value), &w));
        }
    }

    fn name(&mut self, resource: Resource, meta: &Value) {
        let name = s(meta, "name").unwrap_or_default();
        if name.is_empty() {
            if s(meta, "generateName").is_none_or(str::is_empty) {
                self.push(Problem::new(
                    "FieldValueRequired",
                    "metadata.name",
                    "Required value: name or generateName is required".into(),
                ));
            }
            return;
        }
        let why = match resource {
            Resource::Namespace => dns1123_label(name),
            Resource::Service => dns1035_label(name),
            _ => dns1123_subdomain(name),
        };
        self.each("metadata.name", name, why);
    }

    fn labels(&mut self, labels: Option<&Map<String, Value>>, field: &str) {
        for (k, v) in labels.into_iter().flatten() {
            self.each(field, k, qualified_name(k));
            let v = v.as_str().unwrap_or_default();
            self.each(&format!("{field}[{k}]"), v, label_value(v));
        }
    }

    fn metadata(&mut self, resource: Resource, meta: &Value) {
        self.name(resource, meta);
        self.labels(map(meta, "labels"), "metadata.labels");
        let mut total = 0;
        for (k, v) in map(meta, "annotations").into_iter().flatten() {
            self.each("metadata.annotations", k, qualified_name(k));
            total += k.len() + v.as_str().map_or(0, str::len);
        }
        if total > 256 * 1024 {
            self.push(Problem::too_long("metadata.annotations", 256 * 1024));
        }
    }

    fn label_selector(&mut self, sel: &Value, field: &str) {
        for (i, e) in arr(sel, "matchExpressions").iter().enumerate() {
            let at = format!("{field}.matchExpressions[{i}]");
            let key = s(e, "key").unwrap_or_default();
            self.each(&format!("{at}.key"), key, qualified_name(key));
            let values = arr(e, "values");
            match s(e, "operator").unwrap_or_default() {
                "In" | "NotIn" => {
                    if values.is_empty() {
                        self.push(Problem::required(&format!("{at}.values")));
                    }
                }
                "Exists" | "DoesNotExist" => {
                    if !values.is_empty() {
                        self.push(Problem::forbidden(
                            &format!("{at}.values"),
                            "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                        ));
                    }
                }
                other => self.push(Problem::invalid(
                    &format!("{at}.operator"),
                    &quote(other),
                    "not a valid selector operator",
                )),
            }
        }
        self.labels(map(sel, "matchLabels"), &format!("{field}.matchLabels"));
    }

    fn workload(&mut self, resource: Resource, spec: &Value, old: Option<&Value>) {
        let selector = spec.get("selector").filter(|v| !v.is_null());
        let template_labels = spec.pointer("/template/metadata/labels").and_then(Value::as_object);
        let labels: std::collections::BTreeMap<String, String> = template_labels
            .into_iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
            .collect();
        let mismatch = |c: &mut Self| {
            c.push(Problem::invalid(
                "spec.template.metadata.labels",
                &go_map(template_labels),
                "`selector` does not match template `labels`",
            ));
        };
        match selector {
            // A DaemonSet without a selector selects nothing, so its template's labels do
            // not match (upstream `ValidateDaemonSetSpec`); a Deployment's is required.
            None => {
                if resource == Resource::Deployment {
                    self.push(Problem::required("spec.selector"));
                }
                mismatch(self);
            }
            Some(sel) => {
                self.label_selector(sel, "spec.selector");
                let parsed = selector_of(sel);
                if parsed.0.is_empty() {
                    let what = match resource {
                        Resource::DaemonSet => "daemonset",
                        _ => "deployment",
                    };
                    self.push(Problem::invalid(
                        "spec.selector",
                        &go_selector(sel),
                        &format!("empty selector is invalid for {what}"),
                    ));
                } else if !parsed.matches(&labels) {
                    mismatch(self);
                }
            }
        }
        if let (Some(old), Some(sel)) = (old, selector)
            && let Some(old_sel) = old.pointer("/spec/selector")
            && old_sel != sel
        {
            self.push(Problem::invalid("spec.selector", &go_selector(sel), "field is immutable"));
        }
        for f in ["revisionHistoryLimit", "minReadySeconds", "replicas", "progressDeadlineSeconds"]
        {
            if let Some(n) = spec.get(f).and_then(Value::as_i64)
                && n < 0
            {
                self.push(Problem::invalid(
                    &format!("spec.{f}"),
                    &n.to_string(),
                    "must be greater than or equal to 0",
                ));
            }
        }
        match resource {
            Resource::DaemonSet => self.update_strategy(spec),
            _ => self.deployment_strategy(spec),
        }
        match spec.get("template").filter(|t| !t.is_null()) {
            None => self.push(Problem::required("spec.template")),
            Some(t) => {
                if let Some(meta) = t.get("metadata") {
                    self.labels(map(meta, "labels"), "spec.template.metadata.labels");
                }
                match t.get("spec") {
                    Some(pod) => {
                        self.pod_spec(pod, "spec.template.spec");
                        let restart = s(pod, "restartPolicy").unwrap_or("Always");
                        if restart != "Always" {
                            self.push(Problem::not_supported(
                                "spec.template.spec.restartPolicy",
                                restart,
                                &["Always"],
                            ));
                        }
                        if pod.get("activeDeadlineSeconds").is_some() {
                            let owner = match resource {
                                Resource::DaemonSet => "DaemonSet",
                                _ => "ReplicaSet",
                            };
                            self.push(Problem::forbidden(
                                "spec.template.spec.activeDeadlineSeconds",
                                &format!("activeDeadlineSeconds in {owner} is not Supported"),
                            ));
                        }
                    }
                    None => self.push(Problem::required("spec.template.spec.containers")),
                }
            }
        }
    }

    fn update_strategy(&mut self, spec: &Value) {
        let Some(st) = spec.get("updateStrategy") else { return };
        match s(st, "type").unwrap_or_default() {
            "RollingUpdate" => {
                let ru = st.get("rollingUpdate").cloned().unwrap_or(Value::Null);
                let zero = |v: Option<&Value>| match v {
                    Some(Value::Number(n)) => n.as_i64() == Some(0),
                    Some(Value::String(s)) => s == "0" || s == "0%",
                    _ => false,
                };
                if zero(ru.get("maxUnavailable")) && zero(ru.get("maxSurge")) {
                    self.push(Problem::invalid(
                        "spec.updateStrategy.rollingUpdate.maxUnavailable",
                        "0",
                        "may not be 0 when `maxSurge` is 0",
                    ));
                }
            }
            "OnDelete" => {
                if st.get("rollingUpdate").is_some_and(|v| !v.is_null()) {
                    self.push(Problem::forbidden(
                        "spec.updateStrategy.rollingUpdate",
                        "may not be specified when strategy `type` is 'OnDelete'",
                    ));
                }
            }
            other => self.push(Problem::not_supported(
                "spec.updateStrategy.type",
                other,
                &["OnDelete", "RollingUpdate"],
            )),
        }
    }

    fn deployment_strategy(&mut self, spec: &Value) {
        let Some(st) = spec.get("strategy") else { return };
        match s(st, "type").unwrap_or_default() {
            "RollingUpdate" => {}
            "Recreate" => {
                if st.get("rollingUpdate").is_some_and(|v| !v.is_null()) {
                    self.push(Problem::forbidden(
                        "spec.strategy.rollingUpdate",
                        "may not be specified when strategy `type` is 'Recreate'",
                    ));
                }
            }
            other => self.push(Problem::not_supported(
                "spec.strategy.type",
                other,
                &["Recreate", "RollingUpdate"],
            )),
        }
    }

    fn pod_spec(&mut self, pod: &Value, at: &str) {
        let volumes: BTreeSet<&str> =
            arr(pod, "volumes").iter().filter_map(|v| s(v, "name")).collect();
        let mut seen_volumes = BTreeSet::new();
        for (i, v) in arr(pod, "volumes").iter().enumerate() {
            let field = format!("{at}.volumes[{i}].name");
            match s(v, "name") {
                None | Some("") => self.push(Problem::required(&field)),
                Some(n) => {
                    self.each(&field, n, dns1123_label(n));
                    if !seen_volumes.insert(n) {
                        self.push(Problem::duplicate(&field, &quote(n)));
                    }
                }
            }
        }
        let containers = arr(pod, "containers");
        if containers.is_empty() {
            self.push(Problem::required(&format!("{at}.containers")));
        }
        let mut names = BTreeSet::new();
        for (list, items) in
            [("initContainers", arr(pod, "initContainers")), ("containers", containers)]
        {
            for (i, c) in items.iter().enumerate() {
                let cat = format!("{at}.{list}[{i}]");
                self.container(c, &cat, &volumes);
                if let Some(n) = s(c, "name")
                    && !n.is_empty()
                    && !names.insert(n.to_owned())
                {
                    self.push(Problem::duplicate(&format!("{cat}.name"), &quote(n)));
                }
            }
        }
        if let Some(p) = s(pod, "restartPolicy")
            && !["Always", "OnFailure", "Never"].contains(&p)
        {
            self.push(Problem::not_supported(
                &format!("{at}.restartPolicy"),
                p,
                &["Always", "OnFailure", "Never"],
            ));
        }
        if let Some(p) = s(pod, "dnsPolicy")
            && !["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"].contains(&p)
        {
            self.push(Problem::not_supported(
                &format!("{at}.dnsPolicy"),
                p,
                &["ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"],
            ));
        }
        if let Some(sa) = s(pod, "serviceAccountName")
            && !sa.is_empty()
        {
            self.each(&format!("{at}.serviceAccountName"), sa, dns1123_subdomain(sa));
        }
        self.labels(map(pod, "nodeSelector"), &format!("{at}.nodeSelector"));
        for (i, t) in arr(pod, "tolerations").iter().enumerate() {
            self.toleration(t, &format!("{at}.tolerations[{i}]"));
        }
        for (i, secret) in arr(pod, "imagePullSecrets").iter().enumerate() {
            if s(secret, "name").is_none_or(str::is_empty) {
                self.push(Problem::required(&format!("{at}.imagePullSecrets[{i}].name")));
            }
        }
    }

    fn container(&mut self, c: &Value, at: &str, volumes: &BTreeSet<&str>) {
        match s(c, "name") {
            None | Some("") => self.push(Problem::required(&format!("{at}.name"))),
            Some(n) => self.each(&format!("{at}.name"), n, dns1123_label(n)),
        }
        if s(c, "image").is_none_or(|i| i.trim().is_empty()) {
            self.push(Problem::required(&format!("{at}.image")));
        }
        if let Some(p) = s(c, "imagePullPolicy")
            && !["Always", "IfNotPresent", "Never"].contains(&p)
        {
            self.push(Problem::not_supported(
                &format!("{at}.imagePullPolicy"),
                p,
                &["Always", "IfNotPresent", "Never"],
            ));
        }
        for (i, p) in arr(c, "ports").iter().enumerate() {
            let pat = format!("{at}.ports[{i}]");
            self.port_number(p, &pat, "containerPort");
            self.protocol(p, &pat);
        }
        for (i, e) in arr(c, "env").iter().enumerate() {
            self.env_var(e, &format!("{at}.env[{i}]"));
        }
        for (i, m) in arr(c, "volumeMounts").iter().enumerate() {
            let mat = format!("{at}.volumeMounts[{i}]");
            match s(m, "name") {
                None | Some("") => self.push(Problem::required(&format!("{mat}.name"))),
                Some(n) if !volumes.contains(n) => {
                    self.push(Problem::not_found(&format!("{mat}.name"), &quote(n)));
                }
                Some(_) => {}
            }
            if s(m, "mountPath").is_none_or(str::is_empty) {
                self.push(Problem::required(&format!("{mat}.mountPath")));
            }
        }
    }

    /// The port number `field` of the port at `pat` (a container's or a Service's):
    /// required, 1–65535.
    fn port_number(&mut self, p: &Value, pat: &str, field: &str) {
        match p.get(field).and_then(Value::as_i64) {
            None => self.push(Problem::required(&format!("{pat}.{field}"))),
            Some(n) if !(1..=65535).contains(&n) => self.push(Problem::invalid(
                &format!("{pat}.{field}"),
                &n.to_string(),
                "must be between 1 and 65535, inclusive",
            )),
            Some(_) => {}
        }
    }

    /// The `protocol` of the port at `pat`, when given: TCP, UDP or SCTP.
    fn protocol(&mut self, p: &Value, pat: &str) {
        if let Some(proto) = s(p, "protocol")
            && !["TCP", "UDP", "SCTP"].contains(&proto)
        {
            self.push(Problem::not_supported(
                &format!("{pat}.protocol"),
                proto,
                &["SCTP", "TCP", "UDP"],
            ));
        }
    }

    fn env_var(&mut self, e: &Value, at: &str) {
        match s(e, "name") {
            None | Some("") => self.push(Problem::required(&format!("{at}.name"))),
            Some(n) => self.each(&format!("{at}.name"), n, env_name(n)),
        }
        let Some(from) = e.get("valueFrom").filter(|v| !v.is_null()) else { return };
        if s(e, "value").is_some_and(|v| !v.is_empty()) {
            self.push(Problem::invalid(
                &format!("{at}.valueFrom"),
                "\"\"",
                "may not be specified when `value` is not empty",
            ));
        }
        let sources = ["fieldRef", "resourceFieldRef", "configMapKeyRef", "secretKeyRef"];
        let given: Vec<&str> = sources
            .iter()
            .copied()
            .filter(|k| from.get(*k).is_some_and(|v| !v.is_null()))
            .collect();
        match given.as_slice() {
            [] => self.push(Problem::invalid(
                &format!("{at}.valueFrom"),
                "\"\"",
                "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`",
            )),
            [_] => {}
            _ => self.push(Problem::invalid(
                &format!("{at}.valueFrom"),
                "\"\"",
                "may not have more than one field specified at a time",
            )),
        }
        for kind in ["secretKeyRef", "configMapKeyRef"] {
            if let Some(r) = from.get(kind).filter(|v| !v.is_null()) {
                let rat = format!("{at}.valueFrom.{kind}");
                match s(r, "key") {
                    None | Some("") => self.push(Problem::required(&format!("{rat}.key"))),
                    Some(k) => self.each(&format!("{rat}.key"), k, config_key(k)),
                }
                match s(r, "name") {
                    None | Some("") => self.push(Problem::required(&format!("{rat}.name"))),
                    Some(n) => self.each(&format!("{rat}.name"), n, dns1123_subdomain(n)),
                }
            }
        }
        if let Some(f) = from.get("fieldRef").filter(|v| !v.is_null()) {
            let fat = format!("{at}.valueFrom.fieldRef.fieldPath");
            match s(f, "fieldPath") {
                None | Some("") => self.push(Problem::required(&fat)),
                Some(p) => {
                    const PATHS: &[&str] = &[
                        "metadata.annotations",
                        "metadata.labels",
                        "metadata.name",
                        "metadata.namespace",
                        "metadata.uid",
                        "spec.nodeName",
                        "spec.serviceAccountName",
                        "status.hostIP",
                        "status.hostIPs",
                        "status.podIP",
                        "status.podIPs",
                    ];
                    let subscripted = ["metadata.labels['", "metadata.annotations['"]
                        .iter()
                        .any(|pre| p.starts_with(pre) && p.ends_with("']"));
                    if !PATHS.contains(&p) && !subscripted {
                        self.push(Problem::not_supported(&fat, p, PATHS));
                    }
                }
            }
        }
    }

    fn toleration(&mut self, t: &Value, at: &str) {
        let key = s(t, "key").unwrap_or_default();
        let op = s(t, "operator").unwrap_or("Equal");
        let value = s(t, "value").unwrap_or_default();
        if !key.is_empty() {
            self.each(&format!("{at}.key"), key, qualified_name(key));
        }
        if key.is_empty() && op != "Exists" {
            self.push(Problem::invalid(
                &format!("{at}.operator"),
                &quote(op),
                "operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
            ));
        }
        match op {
            "Equal" => {
                self.each(&format!("{at}.value"), value, label_value(value));
            }
            "Exists" => {
                if !value.is_empty() {
                    self.push(Problem::invalid(
                        &format!("{at}.operator"),
                        &format!(
                            "core.Toleration{{Key:{}, Operator:\"Exists\", Value:{}}}",
                            quote(key),
                            quote(value)
                        ),
                        "value must be empty when `operator` is 'Exists'",
                    ));
                }
            }
            other => self.push(Problem::not_supported(
                &format!("{at}.operator"),
                other,
                &["Equal", "Exists"],
            )),
        }
        if let Some(effect) = s(t, "effect")
            && !effect.is_empty()
            && !["NoSchedule", "PreferNoSchedule", "NoExecute"].contains(&effect)
        {
            self.push(Problem::not_supported(
                &format!("{at}.effect"),
                effect,
                &["NoExecute", "NoSchedule", "PreferNoSchedule"],
            ));
        }
        if t.get("tolerationSeconds").is_some_and(|v| !v.is_null())
            && s(t, "effect") != Some("NoExecute")
        {
            self.push(Problem::invalid(
                &format!("{at}.effect"),
                &quote(s(t, "effect").unwrap_or_default()),
                "effect must be 'NoExecute' when `tolerationSeconds` is set",
            ));
        }
    }

    fn data_keys(&mut self, content: &Value, fields: &[&str]) {
        let mut seen = BTreeSet::new();
        for f in fields {
            for k in map(content, f).into_iter().flatten().map(|(k, _)| k) {
                self.each(&format!("{f}[{k}]"), k, config_key(k));
                if !seen.insert(k.clone()) {
                    self.push(Problem::invalid(
                        &format!("{f}[{k}]"),
                        &quote(k),
                        "duplicate of key present in another data field",
                    ));
                }
            }
        }
    }

    fn secret(&mut self, content: &Value, old: Option<&Value>) {
        self.data_keys(content, &["data"]);
        let size: usize = map(content, "data")
            .into_iter()
            .flatten()
            .map(|(_, v)| v.as_str().map_or(0, |s| s.len() * 3 / 4))
            .sum();
        if size > 1024 * 1024 {
            self.push(Problem::too_long("data", 1024 * 1024));
        }
        let ty = s(content, "type").unwrap_or("Opaque");
        let has = |k: &str| map(content, "data").is_some_and(|d| d.contains_key(k));
        let needs: &[&str] = match ty {
            "kubernetes.io/dockerconfigjson" => &[".dockerconfigjson"],
            "kubernetes.io/dockercfg" => &[".dockercfg"],
            "kubernetes.io/tls" => &["tls.crt", "tls.key"],
            "kubernetes.io/ssh-auth" => &["ssh-privatekey"],
            _ => &[],
        };
        for k in needs {
            if !has(k) {
                self.push(Problem::required(&format!("data[{k}]")));
            }
        }
        if let Some(old) = old
            && s(old, "type").unwrap_or("Opaque") != ty
        {
            self.push(Problem::invalid("type", &quote(ty), "field is immutable"));
        }
        if let Some(old) = old
            && old.get("immutable") == Some(&Value::Bool(true))
            && (old.get("data") != content.get("data")
                || content.get("immutable") != Some(&Value::Bool(true)))
        {
            self.push(Problem::forbidden("data", "field is immutable when `immutable` is set"));
        }
    }

    fn service(&mut self, spec: &Value, old: Option<&Value>) {
        let ty = s(spec, "type").unwrap_or("ClusterIP");
        if !["ClusterIP", "NodePort", "LoadBalancer", "ExternalName"].contains(&ty) {
            self.push(Problem::not_supported(
                "spec.type",
                ty,
                &["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"],
            ));
        }
        let ports = arr(spec, "ports");
        if ports.is_empty() && ty != "ExternalName" && s(spec, "clusterIP") != Some("None") {
            self.push(Problem::required("spec.ports"));
        }
        let mut names = BTreeSet::new();
        for (i, p) in ports.iter().enumerate() {
            let pat = format!("spec.ports[{i}]");
            match s(p, "name") {
                Some(n) if !n.is_empty() => {
                    self.each(&format!("{pat}.name"), n, dns1123_label(n));
                    if !names.insert(n) {
                        self.push(Problem::duplicate(&format!("{pat}.name"), &quote(n)));
                    }
                }
                _ if ports.len() > 1 => self.push(Problem::required(&format!("{pat}.name"))),
                _ => {}
            }
            self.port_number(p, &pat, "port");
            self.protocol(p, &pat);
        }
        if let Some(old) = old
            && let (Some(was), Some(now)) = (old.pointer("/spec/clusterIP"), spec.get("clusterIP"))
            && was != now
        {
            self.push(Problem::invalid(
                "spec.clusterIPs[0]",
                &now.to_string(),
                "may not change once set",
            ));
        }
    }
}

/// A LabelSelector object as a [`Selector`] (matchLabels AND matchExpressions).
pub fn selector_of(sel: &Value) -> Selector {
    let mut reqs: Vec<Requirement> = map(sel, "matchLabels")
        .into_iter()
        .flatten()
        .map(|(k, v)| Requirement::Equals(k.clone(), v.as_str().unwrap_or_default().to_owned()))
        .collect();
    for e in arr(sel, "matchExpressions") {
        let key = s(e, "key").unwrap_or_default().to_owned();
        let values: Vec<String> =
            arr(e, "values").iter().filter_map(Value::as_str).map(str::to_owned).collect();
        reqs.push(match s(e, "operator").unwrap_or_default() {
            "In" => Requirement::In(key, values),
            "NotIn" => Requirement::NotIn(key, values),
            "Exists" => Requirement::Exists(key),
            _ => Requirement::DoesNotExist(key),
        });
    }
    Selector(reqs)
}

fn go_selector(sel: &Value) -> String {
    format!(
        "v1.LabelSelector{{MatchLabels:{}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}}",
        go_map(map(sel, "matchLabels"))
    )
}

/// The problems of `content` (an object of `resource`, defaults applied, without
/// `apiVersion`/`kind`), `old` being the stored object on an update.
pub fn validate(resource: Resource, content: &Value, old: Option<&Value>) -> Vec<Problem> {
    let mut c = Check { out: Vec::new() };
    let meta = content.get("metadata").cloned().unwrap_or(Value::Null);
    c.metadata(resource, &meta);
    let spec = content.get("spec").cloned().unwrap_or(Value::Null);
    match resource {
        Resource::DaemonSet | Resource::Deployment => c.workload(resource, &spec, old),
        Resource::Pod => {
            c.pod_spec(&spec, "spec");
            if let Some(old) = old
                && old.pointer("/spec/containers").map(images_stripped)
                    != spec.get("containers").map(images_stripped)
            {
                c.push(Problem::forbidden(
                    "spec",
                    "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
                ));
            }
        }
        Resource::Secret => c.secret(content, old),
        Resource::ConfigMap => c.data_keys(content, &["data", "binaryData"]),
        Resource::Service => c.service(&spec, old),
        // ValidatePersistentVolumeSpec's required fields.
        Resource::PersistentVolume => {
            if spec.pointer("/capacity/storage").is_none_or(Value::is_null) {
                c.push(Problem::required("spec.capacity"));
            }
            if arr(&spec, "accessModes").is_empty() {
                c.push(Problem::required("spec.accessModes"));
            }
        }
        Resource::Node => {
            for (i, t) in arr(&spec, "taints").iter().enumerate() {
                let at = format!("spec.taints[{i}]");
                match s(t, "key") {
                    None | Some("") => c.push(Problem::required(&format!("{at}.key"))),
                    Some(k) => c.each(&format!("{at}.key"), k, qualified_name(k)),
                }
                let effect = s(t, "effect").unwrap_or_default();
                if !["NoSchedule", "PreferNoSchedule", "NoExecute"].contains(&effect) {
                    c.push(Problem::not_supported(
                        &format!("{at}.effect"),
                        effect,
                        &["NoExecute", "NoSchedule", "PreferNoSchedule"],
                    ));
                }
            }
        }
        Resource::Event => {
            // `legacyValidateEvent` (core/validation/events.go): the involved object's
            // namespace is the event's, or empty for an event in `default` (an
            // `involvedObject` is a struct: never absent, only empty).
            let ns = content.pointer("/metadata/namespace").and_then(Value::as_str);
            let involved =
                content.pointer("/involvedObject/namespace").and_then(Value::as_str).unwrap_or("");
            let ok = match involved {
                "" => matches!(ns, None | Some("") | Some("default")),
                other => ns == Some(other),
            };
            if !ok {
                c.push(Problem::invalid(
                    "involvedObject.namespace",
                    &quote(involved),
                    "does not match event.namespace",
                ));
            }
        }
        Resource::Namespace | Resource::ServiceAccount => {}
    }
    c.out
}

/// Containers with their images taken out: what a Pod update may not change.
fn images_stripped(cs: &Value) -> Value {
    let mut cs = cs.clone();
    for c in cs.as_array_mut().into_iter().flatten() {
        if let Some(o) = c.as_object_mut() {
            o.remove("image");
        }
    }
    cs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields(ps: &[Problem]) -> Vec<String> {
        ps.iter().map(Problem::message).collect()
    }

    #[test]
    fn a_daemonset_without_selector_or_with_a_mismatched_one_is_invalid() {
        let mut ds = json!({"metadata":{"name":"bcd"},"spec":{"template":{"metadata":{"labels":{"app":"bcd"}},
            "spec":{"containers":[{"name":"bcd","image":"bcd:1"}]}}}});
        let mismatch = "spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"bcd\"}: `selector` does not match template `labels`";
        // No selector selects nothing: the template's labels do not match it.
        assert_eq!(fields(&validate(Resource::DaemonSet, &ds, None)), vec![mismatch]);
        assert_eq!(
            fields(&validate(Resource::Deployment, &ds, None)),
            vec!["spec.selector: Required value", mismatch]
        );
        ds["spec"]["selector"] = json!({"matchLabels":{"app":"other"}});
        assert_eq!(fields(&validate(Resource::DaemonSet, &ds, None)), vec![mismatch]);
        ds["spec"]["selector"] = json!({"matchLabels":{"app":"bcd"}});
        assert!(validate(Resource::DaemonSet, &ds, None).is_empty());
        let old = ds.clone();
        ds["spec"]["selector"] = json!({"matchLabels":{"app":"bcd","x":"y"}});
        ds["spec"]["template"]["metadata"]["labels"]["x"] = json!("y");
        let p = validate(Resource::DaemonSet, &ds, Some(&old));
        assert_eq!(p.len(), 1);
        assert!(p[0].detail.ends_with("field is immutable"));
    }

    #[test]
    fn names_containers_env_and_tolerations() {
        let ds = json!({"metadata":{"name":"Bad_Name","labels":{"bad key":"v"}},"spec":{
            "selector":{"matchLabels":{"a":"b"}},
            "template":{"metadata":{"labels":{"a":"b"}},"spec":{"restartPolicy":"Never",
              "containers":[{"name":"c","env":[{"name":"1X","valueFrom":{"secretKeyRef":{"name":"s"}}},
                {"name":"N","valueFrom":{"fieldRef":{"fieldPath":"spec.bogus"}}}]}],
              "tolerations":[{"operator":"Exists","value":"x"},{"key":"k","operator":"Sometimes"}]}}}});
        let got = fields(&validate(Resource::DaemonSet, &ds, None));
        let want_prefixes = [
            "metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain",
            "metadata.labels: Invalid value: \"bad key\": name part must consist",
            "spec.template.spec.containers[0].image: Required value",
            "spec.template.spec.containers[0].env[0].name: Invalid value: \"1X\"",
            "spec.template.spec.containers[0].env[0].valueFrom.secretKeyRef.key: Required value",
            "spec.template.spec.containers[0].env[1].valueFrom.fieldRef.fieldPath: Unsupported value: \"spec.bogus\"",
            "spec.template.spec.tolerations[0].operator: Invalid value:",
            "spec.template.spec.tolerations[1].operator: Unsupported value: \"Sometimes\"",
            "spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\"",
        ];
        for w in want_prefixes {
            assert!(got.iter().any(|g| g.starts_with(w)), "missing {w:?} in {got:#?}");
        }
        assert_eq!(got.len(), want_prefixes.len(), "{got:#?}");
    }

    #[test]
    fn secret_keys_and_type_immutability() {
        let s1 =
            json!({"metadata":{"name":"s"},"type":"Opaque","data":{"ok":"eA==","bad/key":"eA=="}});
        assert_eq!(
            fields(&validate(Resource::Secret, &s1, None)),
            vec![format!("data[bad/key]: Invalid value: \"bad/key\": {CONFIG_KEY_MSG}")]
        );
        let s2 = json!({"metadata":{"name":"s"},"type":"kubernetes.io/tls","data":{}});
        let got = fields(&validate(Resource::Secret, &s2, Some(&json!({"type":"Opaque"}))));
        assert!(got.contains(&"data[tls.crt]: Required value".to_owned()), "{got:?}");
        assert!(
            got.iter()
                .any(|g| g.starts_with("type: Invalid value") && g.ends_with("field is immutable"))
        );
    }
}
