//! Kubernetes objects as a real API server writes them: Go's `encoding/json` over the
//! `k8s.io/api` and `k8s.io/apimachinery` types, from the field table generated from those
//! types ([`table`], written by `cargo xtask kube-wire`). [`encode`] gives what the server
//! answers for an object (an `omitempty` field left out when empty, every other field
//! written — its zero when absent —, a struct never left out, quantities and times in the
//! form their `MarshalJSON` writes); [`normalise`] gives what of a manifest survives the
//! trip (the same, without filling in zeros), so a reconciler compares what it would send
//! with what a server can give back.
//!
//! Invariants: the rules come only from the generated table (never a hand-picked list);
//! a field the table does not know (a newer Kubernetes' field) is kept as given; both
//! functions are idempotent, and `normalise` of what `encode` wrote changes nothing.

pub mod quantity;
mod table;

use serde_json::{Map, Value};

pub use table::SOURCE;

/// What a field holds, as Go's `encoding/json` sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// A string (or a named string type).
    Str,
    /// An integer.
    Int,
    /// A float.
    Float,
    /// A bool.
    Bool,
    /// `[]byte`: a base64 string.
    Bytes,
    /// `resource.Quantity` (a struct with its own `MarshalJSON`).
    Quantity,
    /// `metav1.Time`: RFC 3339 in seconds, `null` when zero.
    Time,
    /// `metav1.MicroTime`: RFC 3339 in microseconds, `null` when zero.
    MicroTime,
    /// `metav1.Duration`: a Go duration string.
    Duration,
    /// `intstr.IntOrString`: a number or a string.
    IntOrString,
    /// `runtime.RawExtension`, `metav1.FieldsV1`: raw JSON, written as given.
    Raw,
    /// `interface{}`: any JSON, `null` when nil.
    Any,
    /// A struct of the table.
    Struct(Ty),
    /// A pointer.
    Ptr(&'static Shape),
    /// A slice.
    Slice(&'static Shape),
    /// A map with string keys.
    Map(&'static Shape),
}

impl Shape {
    /// Whether `omitempty` can leave it out: Go's `isEmptyValue` knows bools, numbers,
    /// strings, slices, maps, pointers and interfaces — never a struct.
    fn omittable(self) -> bool {
        !matches!(
            self,
            Shape::Struct(_)
                | Shape::Quantity
                | Shape::Time
                | Shape::MicroTime
                | Shape::Duration
                | Shape::IntOrString
                | Shape::Raw
        )
    }

    /// Whether a present (non-null) value is Go's empty value of this shape.
    fn is_empty(self, v: &Value) -> bool {
        match (self, v) {
            (Shape::Str | Shape::Bytes, Value::String(s)) => s.is_empty(),
            (Shape::Int | Shape::Float, Value::Number(n)) => n.as_f64() == Some(0.0),
            (Shape::Bool, Value::Bool(b)) => !b,
            (Shape::Slice(_), Value::Array(a)) => a.is_empty(),
            (Shape::Map(_), Value::Object(m)) => m.is_empty(),
            _ => false,
        }
    }
}

/// A struct type of the table (an index into it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ty(pub u16);

/// One field of a Go struct, as its `json` tag and type say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    /// The JSON name.
    pub json: &'static str,
    /// The Go type as written in the source (`*int64`, `[]Container`, `ResourceList`).
    pub go_type: &'static str,
    /// `omitempty`.
    pub omitempty: bool,
    /// What it holds.
    pub shape: Shape,
    /// A `+default=` marker's value (JSON text), the declarative default.
    pub default: Option<&'static str>,
}

impl Field {
    /// Whether the Go field is a pointer.
    pub fn is_pointer(&self) -> bool {
        matches!(self.shape, Shape::Ptr(_))
    }

    /// Whether `v` (the field's value, `None` when absent) is what Go defaulting code
    /// treats as unset: absent or `null`, or — for a field that is not a pointer, a
    /// slice or a map — its zero value (`if obj.X == ""`).
    pub fn is_unset(&self, v: Option<&Value>) -> bool {
        match v {
            None | Some(Value::Null) => true,
            Some(v) => match self.shape {
                Shape::Str | Shape::Int | Shape::Float | Shape::Bool => self.shape.is_empty(v),
                Shape::IntOrString => v.as_i64() == Some(0) || v.as_str() == Some(""),
                _ => false,
            },
        }
    }
}

/// A Go struct: its name (`core/v1.PodSpec`) and its JSON fields in declaration order
/// (inlined embedded structs' fields in place).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GoStruct {
    /// `<group>/<version>.<Name>`: `core/v1.Pod`, `apps/v1.DaemonSet`, `meta/v1.Status`.
    pub name: &'static str,
    /// The fields.
    pub fields: &'static [Field],
}

/// Where the table was generated from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Source {
    /// `(repository, tag, commit, files)` of each source.
    pub repos: &'static [(&'static str, &'static str, &'static str, &'static [&'static str])],
}

impl Ty {
    /// The struct.
    pub fn get(self) -> &'static GoStruct {
        &table::STRUCTS[usize::from(self.0)]
    }

    /// `core/v1.PodSpec`.
    pub fn name(self) -> &'static str {
        self.get().name
    }

    /// The fields.
    pub fn fields(self) -> &'static [Field] {
        self.get().fields
    }

    /// The field with JSON name `json`.
    pub fn field(self, json: &str) -> Option<&'static Field> {
        self.fields().iter().find(|f| f.json == json)
    }

    /// The struct a field holds (through a pointer, a slice or a map), if it holds one.
    pub fn struct_of(self, json: &str) -> Option<Ty> {
        fn inner(s: Shape) -> Option<Ty> {
            match s {
                Shape::Struct(t) => Some(t),
                Shape::Ptr(s) | Shape::Slice(s) | Shape::Map(s) => inner(*s),
                _ => None,
            }
        }
        inner(self.field(json)?.shape)
    }
}

/// The struct named `name` (`core/v1.Pod`), if the table has it.
pub fn ty(name: &str) -> Option<Ty> {
    static BY_NAME: std::sync::OnceLock<std::collections::HashMap<&'static str, Ty>> =
        std::sync::OnceLock::new();
    let by_name = BY_NAME.get_or_init(|| {
        (0u16..).zip(table::STRUCTS.iter()).map(|(i, s)| (s.name, Ty(i))).collect()
    });
    by_name.get(name).copied()
}

/// The struct of an object of `apiVersion`/`kind` (`v1`/`Secret`, `apps/v1`/`DaemonSet`,
/// `meta.k8s.io/v1`/`Table`), if the table has it.
pub fn root(api_version: &str, kind: &str) -> Option<Ty> {
    let package = match api_version {
        "v1" => "core/v1",
        "apps/v1" => "apps/v1",
        "meta.k8s.io/v1" => "meta/v1",
        _ => return None,
    };
    match (package, kind) {
        // `Status` is served in every group as `v1` (metav1's, registered unversioned).
        ("core/v1", "Status") => ty("meta/v1.Status"),
        _ => ty(&format!("{package}.{kind}")),
    }
}

/// A value the Go types would refuse while decoding (a quantity or a time that does not
/// parse), by its path (`spec.containers[0].resources.limits.cpu`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Where.
    pub path: String,
    /// Why, in the words of the Go decoder.
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Leave out what Go leaves out; write nothing that was not given.
    Normalise,
    /// Write every field Go writes.
    Encode,
}

/// `v`, an object of struct `ty`, as Go's `encoding/json` writes it after decoding it
/// into the Go type: `omitempty` fields empty (empty string, list or map; zero or false
/// where the field is no pointer) left out, pointers kept even when they point at a
/// zero, every other field written (its zero value when absent: `""`, `0`, `false`,
/// `null`, or the zero struct), quantities and times in their `MarshalJSON` form. What
/// does not parse is left as given and reported.
pub fn encode(ty: Ty, v: &mut Value) -> Vec<Problem> {
    let mut problems = Vec::new();
    value(Shape::Struct(ty), v, Mode::Encode, &mut String::new(), &mut problems);
    problems
}

/// As [`encode`], without writing the fields that were not given: what of a manifest a
/// server keeps and answers (`tolerations: []` and `value: ""` gone, `"0.1"` → `"100m"`).
pub fn normalise(ty: Ty, v: &mut Value) -> Vec<Problem> {
    let mut problems = Vec::new();
    value(Shape::Struct(ty), v, Mode::Normalise, &mut String::new(), &mut problems);
    problems
}

/// The zero value Go writes for a field of `shape` that was not given.
fn zero(shape: Shape, mode: Mode, path: &mut String, problems: &mut Vec<Problem>) -> Value {
    match shape {
        Shape::Str => Value::String(String::new()),
        Shape::Int => Value::from(0),
        Shape::Float => Value::from(0.0),
        Shape::Bool => Value::Bool(false),
        Shape::Quantity => Value::String("0".into()),
        Shape::Duration => Value::String("0s".into()),
        Shape::IntOrString => Value::from(0),
        Shape::Struct(_) => {
            let mut v = Value::Object(Map::new());
            value(shape, &mut v, mode, path, problems);
            v
        }
        Shape::Bytes
        | Shape::Time
        | Shape::MicroTime
        | Shape::Raw
        | Shape::Any
        | Shape::Ptr(_)
        | Shape::Slice(_)
        | Shape::Map(_) => Value::Null,
    }
}

/// Rewrites `v` (present, maybe `null`) as Go writes a value of `shape`.
fn value(shape: Shape, v: &mut Value, mode: Mode, path: &mut String, problems: &mut Vec<Problem>) {
    match (shape, &mut *v) {
        (Shape::Struct(t), Value::Object(m)) => fields(t, m, mode, path, problems),
        (Shape::Ptr(inner), x) if !x.is_null() => value(*inner, x, mode, path, problems),
        (Shape::Slice(elem), Value::Array(items)) => {
            for (i, item) in items.iter_mut().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                element(*elem, item, mode, path, problems);
                path.truncate(len);
            }
        }
        (Shape::Map(elem), Value::Object(m)) => {
            for (k, item) in m.iter_mut() {
                let len = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(k);
                element(*elem, item, mode, path, problems);
                path.truncate(len);
            }
        }
        (Shape::Quantity, Value::String(_) | Value::Number(_)) => {
            let text = match &*v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            match quantity::wire(&text) {
                Ok(s) => *v = Value::String(s),
                Err(quantity::QuantityError::TooLarge) => {}
                Err(e) => problems.push(Problem { path: path.clone(), message: e.to_string() }),
            }
        }
        (Shape::Time | Shape::MicroTime, Value::String(s)) => {
            match time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339) {
                Ok(t) => *v = Value::String(go_time(t, shape == Shape::MicroTime)),
                Err(e) => problems.push(Problem {
                    path: path.clone(),
                    message: format!("parsing time {s:?} as RFC 3339: {e}"),
                }),
            }
        }
        _ => {}
    }
}

/// A slice or map element: `null` decodes to the element's zero (a struct's zero struct,
/// a string's `""`), which is then written.
fn element(
    shape: Shape,
    v: &mut Value,
    mode: Mode,
    path: &mut String,
    problems: &mut Vec<Problem>,
) {
    if v.is_null() {
        *v = zero(shape, mode, path, problems);
    } else {
        value(shape, v, mode, path, problems);
    }
}

/// The fields of struct `t` held in `m`, rewritten in declaration order; keys the table
/// does not know follow, as given.
fn fields(
    t: Ty,
    m: &mut Map<String, Value>,
    mode: Mode,
    path: &mut String,
    problems: &mut Vec<Problem>,
) {
    let mut out = Map::new();
    for f in t.fields() {
        let len = path.len();
        if !path.is_empty() {
            path.push('.');
        }
        path.push_str(f.json);
        // A `null` decodes to the field's zero value, which is then written as Go
        // writes it; an absent field is the zero value too, but `normalise` leaves it out.
        let given = match m.remove(f.json) {
            None if mode == Mode::Normalise => None,
            None | Some(Value::Null) => Some(zero(f.shape, mode, path, problems)),
            Some(mut x) => {
                value(f.shape, &mut x, mode, path, problems);
                Some(x)
            }
        };
        let written = given.filter(|x| {
            let empty = x.is_null() || f.shape.is_empty(x);
            !(f.omitempty && f.shape.omittable() && empty)
        });
        path.truncate(len);
        if let Some(x) = written {
            out.insert(f.json.to_owned(), x);
        }
    }
    out.extend(std::mem::take(m));
    *m = out;
}

/// `metav1.Time.MarshalJSON` (UTC, whole seconds: the fraction is cut, not rounded) or,
/// with `micros`, `metav1.MicroTime`'s (six fraction digits).
fn go_time(t: time::OffsetDateTime, micros: bool) -> String {
    let t = t.to_offset(time::UtcOffset::UTC);
    let secs = format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    );
    if micros { format!("{secs}.{:06}Z", t.microsecond()) } else { format!("{secs}Z") }
}

/// Calls `f` on every struct of the table in `v` (an object of `ty`), parents before
/// their fields, so what `f` adds is visited too: how the generated `SetObjectDefaults_*`
/// functions reach every nested type's defaulter.
pub fn visit(ty: Ty, v: &mut Value, f: &mut dyn FnMut(Ty, &mut Map<String, Value>)) {
    visit_shape(Shape::Struct(ty), v, f);
}

fn visit_shape(shape: Shape, v: &mut Value, f: &mut dyn FnMut(Ty, &mut Map<String, Value>)) {
    match (shape, v) {
        (Shape::Struct(t), Value::Object(m)) => {
            f(t, m);
            for field in t.fields() {
                if let Some(child) = m.get_mut(field.json) {
                    visit_shape(field.shape, child, f);
                }
            }
        }
        (Shape::Ptr(inner), v) => visit_shape(*inner, v, f),
        (Shape::Slice(elem), Value::Array(items)) => {
            for item in items {
                visit_shape(*elem, item, f);
            }
        }
        (Shape::Map(elem), Value::Object(m)) => {
            for item in m.values_mut() {
                visit_shape(*elem, item, f);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests;
