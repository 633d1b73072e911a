//! The command tree, generated from the method catalogue (bc-api-types, the registry's
//! declarations): one command per resource, one subcommand per method, its help the
//! method's description and its flags the input's fields; and how a parsed command
//! becomes the method's JSON body.
//!
//! Invariant: nothing here names a method: a method added to the catalogue has its
//! command, flags and help with no change to this file (the test `every_method_has_a_command`
//! holds the tree to the server's registry).

use bc_client::api::{Entry, Resource};
use clap::{Arg, ArgAction, ArgMatches, Command};
use serde_json::{Map, Value};

use crate::Failure;

/// The command name of a resource: short names for the ones typed most, else the
/// resource's name in kebab case (a new resource gets one without a change here).
pub fn resource_command(resource: &Resource) -> String {
    match resource.name {
        "providerAccounts" => "accounts".into(),
        "kubernetesSubstrates" => "substrates".into(),
        "kubernetesClusters" => "clusters".into(),
        "kubernetesNodePools" => "nodepools".into(),
        "loadBalancers" => "lb".into(),
        other => kebab(other),
    }
}

/// `providerAccountId` → `provider-account-id`.
pub fn kebab(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        if c.is_ascii_uppercase() {
            if !out.is_empty() {
                out.push('-');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// A description as a terminal shows it: Markdown links as their words (`[pools](/docs/…)`
/// reads `pools`), no code quotes.
pub fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        let link = rest[open + 1..].find("](").and_then(|close| {
            let words = &rest[open + 1..open + 1 + close];
            let after = &rest[open + 1 + close + 2..];
            (!words.contains('[')).then_some(())?;
            after.find(')').map(|end| (words, &after[end + 1..]))
        });
        match link {
            Some((words, after)) => {
                out.push_str(&rest[..open]);
                out.push_str(words);
                rest = after;
            }
            None => {
                out.push_str(&rest[..=open]);
                rest = &rest[open + 1..];
            }
        }
    }
    out.push_str(rest);
    out.replace('`', "")
}

/// The first sentence of a description, [`plain`], for the one-line help: up to the
/// first full stop that ends a sentence — followed by a space or the end, outside
/// parentheses, and not an abbreviation's (`e.g.`).
pub fn first_sentence(text: &str) -> String {
    let text = plain(text);
    let mut depth = 0i32;
    for (i, c) in text.char_indices() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            '.' if depth <= 0 => {
                let ends = text[i + 1..].chars().next().is_none_or(char::is_whitespace);
                let before = &text[..i];
                let abbreviation = ["e.g", "i.e", "etc", "vs"].iter().any(|a| before.ends_with(a));
                if ends && !abbreviation {
                    return text[..=i].to_owned();
                }
            }
            _ => {}
        }
    }
    text
}

/// One input field as a command-line argument.
#[derive(Debug, Clone)]
pub struct Field {
    /// Its wire name, e.g. `providerAccountId`.
    pub name: &'static str,
    /// Its JSON Schema (inlined).
    pub schema: Value,
    /// Whether the input requires it.
    pub required: bool,
}

impl Field {
    /// The argument's id and long flag: the kebab-case name.
    pub fn flag(&self) -> String {
        kebab(self.name)
    }

    /// The JSON types the schema allows (`string`, `integer`, …; several for `anyOf`).
    fn types(&self) -> Vec<String> {
        let mut out = Vec::new();
        collect_types(&self.schema, &mut out);
        out
    }

    /// A flag without a value (`--include-archived`).
    fn is_bool(&self) -> bool {
        self.types() == ["boolean"]
    }

    /// A value given as JSON (`--policy '{…}'` or `--policy @policy.json`).
    fn is_json(&self) -> bool {
        let t = self.types();
        t.is_empty() || t.iter().any(|t| t == "object" || t == "array")
    }
}

fn collect_types(schema: &Value, out: &mut Vec<String>) {
    match schema.get("type") {
        Some(Value::String(t)) if t != "null" => out.push(t.clone()),
        Some(Value::Array(ts)) => out.extend(
            ts.iter().filter_map(Value::as_str).filter(|t| *t != "null").map(str::to_owned),
        ),
        _ => {}
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(branches)) = schema.get(key) {
            branches.iter().for_each(|b| collect_types(b, out));
        }
    }
    if out.is_empty() && schema.get("enum").is_some() {
        out.push("string".into());
    }
    out.dedup();
}

/// A method's fields (but `tenantId`, which comes from `--tenant`), in declaration order.
pub fn fields(entry: &Entry) -> Vec<Field> {
    let schema = entry.input_schema();
    let required: Vec<&str> = schema["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    entry
        .input_fields()
        .into_iter()
        .filter(|f| *f != "tenantId")
        .map(|name| Field {
            name,
            schema: schema["properties"][name].clone(),
            required: required.contains(&name),
        })
        .collect()
}

/// A string property of an object field, also given as its own flag (`--service-account-key
/// @key.json` for `credentials.serviceAccountKey`): a secret is typed or read from a file
/// without writing JSON around it.
#[derive(Debug, Clone)]
pub struct SubField {
    /// The object field, e.g. `credentials`.
    pub parent: &'static str,
    /// The property, e.g. `serviceAccountKey`.
    pub name: String,
    /// Its description.
    pub help: String,
}

impl SubField {
    /// The flag: the property's kebab-case name.
    pub fn flag(&self) -> String {
        kebab(&self.name)
    }
}

/// Flags every command has (the global ones among them), which a property never takes.
const TAKEN_FLAGS: [&str; 6] = ["file", "output", "tenant", "watch", "token", "api-url"];

/// The string properties of the method's object fields whose flags are free (not a
/// field's, not a global one, not another property's).
pub fn sub_fields(entry: &Entry) -> Vec<SubField> {
    let fields = fields(entry);
    let mut used: Vec<String> = TAKEN_FLAGS.iter().map(|s| (*s).to_owned()).collect();
    used.extend(fields.iter().map(Field::flag));
    let mut out = Vec::new();
    for f in fields.iter().filter(|f| f.is_json()) {
        let Some(Value::Object(props)) = f.schema.get("properties") else { continue };
        for (name, schema) in props {
            let mut types = Vec::new();
            collect_types(schema, &mut types);
            let flag = kebab(name);
            if types != ["string"] || used.contains(&flag) {
                continue;
            }
            used.push(flag);
            let doc = schema.get("description").and_then(Value::as_str).unwrap_or("");
            out.push(SubField { parent: f.name, name: name.clone(), help: doc.replace('`', "") });
        }
    }
    out
}

/// Whether the method takes a `requestId` (a create).
pub fn is_create(entry: &Entry) -> bool {
    entry.input_fields().contains(&"requestId")
}

/// Whether the method takes a `tenantId`.
pub fn takes_tenant(entry: &Entry) -> bool {
    entry.input_fields().contains(&"tenantId")
}

/// The field also given as the command's one positional argument: the first required
/// `…Id` of a method other than a create (`bc substrates get POOL`).
pub fn positional(entry: &Entry) -> Option<Field> {
    if is_create(entry) {
        return None;
    }
    fields(entry).into_iter().find(|f| f.required && f.name.ends_with("Id"))
}

/// The field a resource's objects are named by in its methods (`poolId` for pools and
/// substrates, `loadBalancerId` for load balancers): the positional of its first method
/// that has one.
pub fn id_field(resource: &str) -> Option<&'static str> {
    bc_client::api::catalogue()
        .iter()
        .filter(|e| e.info.resource.name == resource)
        .find_map(positional)
        .map(|f| f.name)
}

/// Whether the method is a single-object read that `--watch` can follow.
pub fn is_get(entry: &Entry) -> bool {
    entry.info.name == "get"
}

/// The subcommand of one method.
pub fn method_command(entry: &Entry) -> Command {
    let info = &entry.info;
    let mut cmd = Command::new(kebab(info.name))
        .about(first_sentence(info.description))
        .long_about(format!(
            "{}\n\nMethod {} ({}), authorized as {}.",
            plain(info.description),
            info.id(),
            info.kind.as_str(),
            info.authorization
        ))
        .arg(Arg::new("file").short('f').long("file").value_name("FILE").help(
            "The input as a JSON or YAML file (- for standard input); flags override its fields",
        ));
    let fields = fields(entry);
    let pos = positional(entry);
    if let Some(p) = &pos {
        cmd = cmd.arg(
            Arg::new("positional")
                .value_name(kebab(p.name.trim_end_matches("Id")).to_uppercase())
                .help(format!("The {} (the same as --{})", p.name, p.flag())),
        );
    }
    let mut used: Vec<String> =
        vec!["file".into(), "output".into(), "tenant".into(), "watch".into()];
    used.extend(fields.iter().map(Field::flag));
    for f in &fields {
        let flag = f.flag();
        let mut arg = Arg::new(flag.clone()).long(flag.clone());
        // `--pool` for `--pool-id`, `--account` for `--provider-account-id`, when free.
        if let Some(base) = flag.strip_suffix("-id") {
            for alias in [base.to_owned(), base.rsplit('-').next().unwrap_or(base).to_owned()] {
                if !used.contains(&alias) {
                    arg = arg.visible_alias(alias.clone());
                    used.push(alias);
                }
            }
        }
        let doc = f.schema.get("description").and_then(Value::as_str).unwrap_or("");
        let mut help = plain(doc);
        if f.required {
            help.push_str(" [required]");
        }
        if f.is_bool() {
            arg = arg
                .value_name("BOOL")
                .num_args(0..=1)
                .default_missing_value("true")
                .value_parser(clap::value_parser!(bool));
        } else if f.is_json() {
            arg = arg.value_name("JSON");
            help.push_str(" (JSON, or @FILE)");
        } else {
            arg = arg.value_name(f.name.to_uppercase().replace("ID", "_ID"));
            if let Some(Value::Array(values)) = f.schema.get("enum") {
                let values: Vec<String> =
                    values.iter().filter_map(Value::as_str).map(str::to_owned).collect();
                arg = arg.value_parser(clap::builder::PossibleValuesParser::new(values));
            }
        }
        cmd = cmd.arg(arg.help(help));
    }
    for s in sub_fields(entry) {
        let help = format!("{} (--{} {}; text, or @FILE)", s.help, kebab(s.parent), s.name);
        cmd = cmd.arg(Arg::new(s.flag()).long(s.flag()).value_name("TEXT").help(help));
    }
    if is_get(entry) {
        cmd = cmd.arg(Arg::new("watch").short('w').long("watch").action(ArgAction::SetTrue).help(
            "Follow the object's events and print it again each time it changes (Ctrl-C stops)",
        ));
    }
    cmd
}

/// Reads `-f FILE` (JSON or YAML; `-` is standard input).
fn read_file(path: &str) -> Result<Value, Failure> {
    let text = if path == "-" {
        std::io::read_to_string(std::io::stdin())
            .map_err(|e| Failure::usage(format!("reading standard input: {e}")))?
    } else {
        std::fs::read_to_string(path).map_err(|e| Failure::usage(format!("reading {path}: {e}")))?
    };
    parse_document(&text).map_err(|e| Failure::usage(format!("{path}: {e}")))
}

/// A JSON document, or failing that a YAML one.
fn parse_document(text: &str) -> Result<Value, String> {
    serde_json::from_str(text).or_else(|json| {
        serde_saphyr::from_str::<Value>(text)
            .map_err(|yaml| format!("neither JSON ({json}) nor YAML ({yaml})"))
    })
}

/// The body a parsed method command asks for: `-f`'s document, the positional, then each
/// flag, and `tenantId` from `--tenant` unless given.
pub fn body(entry: &Entry, m: &ArgMatches, tenant: Option<&str>) -> Result<Value, Failure> {
    let mut body = match m.get_one::<String>("file") {
        Some(path) => read_file(path)?,
        None => Value::Object(Map::new()),
    };
    let Value::Object(map) = &mut body else {
        return Err(Failure::usage("the input file must hold a JSON or YAML object"));
    };
    if let (Some(p), Ok(Some(v))) = (positional(entry), m.try_get_one::<String>("positional")) {
        map.insert(p.name.into(), Value::String(v.clone()));
    }
    for f in fields(entry) {
        let flag = f.flag();
        if f.is_bool() {
            if let Some(v) = m.get_one::<bool>(&flag) {
                map.insert(f.name.into(), Value::Bool(*v));
            }
            continue;
        }
        let Some(text) = m.get_one::<String>(&flag) else { continue };
        let value = if f.is_json() {
            let text = match text.strip_prefix('@') {
                Some(path) => std::fs::read_to_string(path)
                    .map_err(|e| Failure::usage(format!("--{flag} @{path}: {e}")))?,
                None => text.clone(),
            };
            parse_document(&text).map_err(|e| Failure::usage(format!("--{flag}: {e}")))?
        } else if f.types().iter().any(|t| t == "integer" || t == "number") {
            serde_json::from_str::<serde_json::Number>(text)
                .map(Value::Number)
                .map_err(|_| Failure::usage(format!("--{flag}: {text:?} is not a number")))?
        } else {
            Value::String(text.clone())
        };
        map.insert(f.name.into(), value);
    }
    for s in sub_fields(entry) {
        let flag = s.flag();
        let Some(text) = m.get_one::<String>(&flag) else { continue };
        // The file's text as it is (a key file stays the JSON text the server parses).
        let value = match text.strip_prefix('@') {
            Some(path) => std::fs::read_to_string(path)
                .map_err(|e| Failure::usage(format!("--{flag} @{path}: {e}")))?,
            None => text.clone(),
        };
        let parent = map.entry(s.parent).or_insert_with(|| Value::Object(Map::new()));
        let Value::Object(parent) = parent else {
            return Err(Failure::usage(format!(
                "--{flag}: --{} is not an object",
                kebab(s.parent)
            )));
        };
        parent.insert(s.name.clone(), Value::String(value));
    }
    if takes_tenant(entry) && !map.contains_key("tenantId") {
        let tenant = tenant.ok_or_else(|| {
            Failure::usage("no tenant: pass --tenant, set BC_TENANT, or run `bc login --tenant …`")
        })?;
        map.insert("tenantId".into(), Value::String(tenant.to_owned()));
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn create_account() -> Entry {
        bc_client::api::catalogue()
            .into_iter()
            .find(|e| e.info.resource.name == "providerAccounts" && e.info.name == "create")
            .expect("providerAccounts.create")
    }

    #[test]
    fn a_service_account_key_is_read_from_its_file_into_the_credentials() {
        let entry = create_account();
        let flags: Vec<String> = sub_fields(&entry).iter().map(SubField::flag).collect();
        // `--token` is the CLI's own API token, so DigitalOcean's stays in --credentials.
        assert_eq!(flags, ["service-account-key", "project-id"]);
        let dir = std::env::temp_dir().join(format!("bc-cli-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let key = dir.join("key.json");
        let text = "{\"type\": \"service_account\"}\n";
        std::fs::write(&key, text).unwrap();
        let at = format!("@{}", key.display());
        let m = method_command(&entry)
            .try_get_matches_from([
                "create",
                "--provider",
                "gke",
                "--name",
                "g",
                "--service-account-key",
                at.as_str(),
                "--project-id",
                "my-proj-1",
            ])
            .unwrap();
        let body = body(&entry, &m, Some("acme")).unwrap();
        std::fs::remove_dir_all(&dir).ok();
        assert_eq!(body["credentials"]["serviceAccountKey"], text, "the file's text, as it is");
        assert_eq!(body["credentials"]["projectId"], "my-proj-1");
        assert_eq!(body["provider"], "gke");
        // The whole body is what the server's input type reads.
        entry.reserialize(&body).expect("a valid providerAccounts.create input");
    }
}
