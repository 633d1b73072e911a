//! Benchmark figures: the one record every `cargo xtask bench` benchmark emits, so that
//! the report (median, spread, ratio to a ceiling or peer) is computed in one place.
//!
//! A benchmark measures a figure several times and emits it once, with all its samples
//! and, when it has one, what it is judged against (a ceiling measured in the same run,
//! a peer's published figure, or a target). [`emit`] prints a readable line and, when
//! `BC_BENCH_JSON` names a file, appends the figure to it as one JSON line. Invariant:
//! the JSON written here is the whole contract with the report writer in `xtask`.

use std::fmt::Write as _;
use std::io::Write as _;

/// Environment variable naming the JSON-lines file figures are appended to.
pub const BENCH_JSON_VAR: &str = "BC_BENCH_JSON";

/// The flag `cargo xtask bench --quick` passes to every benchmark: its short version.
pub const QUICK_FLAG: &str = "--quick";

/// Whether this benchmark process was asked for its short version (`--quick` among its
/// arguments).
pub fn quick() -> bool {
    std::env::args().skip(1).any(|a| a == QUICK_FLAG)
}

/// Which way is better for a figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Better {
    /// More is better (requests/s, objects/s).
    Higher,
    /// Less is better (latency, calls, bytes).
    Lower,
}

impl Better {
    fn as_str(self) -> &'static str {
        match self {
            Better::Higher => "higher",
            Better::Lower => "lower",
        }
    }
}

/// What a figure's reference is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reference {
    /// The same system's best case, measured in the same run (the cheapest method, say).
    Ceiling,
    /// A peer's figure (research/peers.md), a constant.
    Peer,
    /// A target the project set itself (an issue's number), a constant.
    Target,
    /// A baseline measured in the same run (per-object polling, say).
    Baseline,
}

impl Reference {
    fn as_str(self) -> &'static str {
        match self {
            Reference::Ceiling => "ceiling",
            Reference::Peer => "peer",
            Reference::Target => "target",
            Reference::Baseline => "baseline",
        }
    }
}

/// What a figure is set against. The ratio is figure ÷ reference, sample by sample when
/// both have the same number of samples (measured in the same runs), else median ÷ median.
#[derive(Debug, Clone, PartialEq)]
pub struct Against {
    /// What kind of reference it is.
    pub reference: Reference,
    /// Its name, e.g. "events.list (cheapest authenticated method)" or "Crossplane 100/s".
    pub name: String,
    /// Its samples (one for a constant).
    pub samples: Vec<f64>,
}

impl Against {
    /// A constant reference: a peer's published figure or a target.
    pub fn constant(reference: Reference, name: impl Into<String>, value: f64) -> Self {
        Against { reference, name: name.into(), samples: vec![value] }
    }
}

/// One measured figure.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    /// The benchmark that measured it (`store`, `api`, `reconcile`, …).
    pub bench: &'static str,
    /// What was measured, unique within the benchmark, e.g.
    /// "postgres · 10000 pools · kubernetesSubstrates.get".
    pub name: String,
    /// Unit of the samples, e.g. "req/s", "ms", "calls/h", "MiB".
    pub unit: &'static str,
    /// Which way is better.
    pub better: Better,
    /// One value per repeated measurement (at least one).
    pub samples: Vec<f64>,
    /// What it is judged against, if anything.
    pub against: Option<Against>,
    /// Requests or operations that failed while it was measured (the report flags a
    /// figure with errors; the samples count only what succeeded).
    pub errors: u64,
}

impl Figure {
    /// A figure with no reference.
    pub fn new(
        bench: &'static str,
        name: impl Into<String>,
        unit: &'static str,
        better: Better,
        samples: Vec<f64>,
    ) -> Self {
        Figure { bench, name: name.into(), unit, better, samples, against: None, errors: 0 }
    }

    /// The same figure, set against `against`.
    #[must_use]
    pub fn against(mut self, against: Against) -> Self {
        self.against = Some(against);
        self
    }

    /// The same figure, with `errors` failed requests or operations seen while measuring.
    #[must_use]
    pub fn with_errors(mut self, errors: u64) -> Self {
        self.errors = errors;
        self
    }

    /// The median of the samples (NaN when there are none).
    pub fn median(&self) -> f64 {
        median(&self.samples)
    }

    /// The figure as one JSON object on one line.
    pub fn to_json(&self) -> String {
        let mut s = String::from("{");
        let _ = write!(
            s,
            "\"bench\":{},\"name\":{},\"unit\":{},\"better\":\"{}\",\"samples\":{}",
            json_string(self.bench),
            json_string(&self.name),
            json_string(self.unit),
            self.better.as_str(),
            json_nums(&self.samples)
        );
        if self.errors > 0 {
            let _ = write!(s, ",\"errors\":{}", self.errors);
        }
        if let Some(a) = &self.against {
            let _ = write!(
                s,
                ",\"against\":{{\"reference\":\"{}\",\"name\":{},\"samples\":{}}}",
                a.reference.as_str(),
                json_string(&a.name),
                json_nums(&a.samples)
            );
        }
        s.push('}');
        s
    }
}

/// Prints `figure` as a readable line on stdout and, when `BC_BENCH_JSON` is set,
/// appends it to that file as one JSON line.
///
/// # Panics
///
/// When `BC_BENCH_JSON` is set and the file cannot be written (a report missing a figure
/// silently would be worse).
pub fn emit(figure: &Figure) {
    let against = figure.against.as_ref().map_or(String::new(), |a| {
        format!("  vs {} {} {:.3}", a.reference.as_str(), a.name, median(&a.samples))
    });
    let errors =
        if figure.errors > 0 { format!("  {} ERRORS", figure.errors) } else { String::new() };
    println!(
        "bench {} · {}: {:.3} {} (n={}){}{}",
        figure.bench,
        figure.name,
        figure.median(),
        figure.unit,
        figure.samples.len(),
        against,
        errors
    );
    if let Some(path) = std::env::var_os(BENCH_JSON_VAR).filter(|p| !p.is_empty()) {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .unwrap_or_else(|e| panic!("{BENCH_JSON_VAR}={path:?}: {e}"));
        writeln!(file, "{}", figure.to_json())
            .unwrap_or_else(|e| panic!("{BENCH_JSON_VAR}={path:?}: {e}"));
    }
}

/// The peak resident set (`VmHWM` of `/proc/<pid>/status`) of process `pid`, or of this
/// process when `None`, in MiB; NaN where it cannot be read (not Linux, process gone).
pub fn peak_rss_mib(pid: Option<u32>) -> f64 {
    let path = pid.map_or("/proc/self/status".to_owned(), |p| format!("/proc/{p}/status"));
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

/// The median of `values` (NaN when empty; the mean of the middle two when even).
pub fn median(values: &[f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    if v.len().is_multiple_of(2) { (v[mid - 1] + v[mid]) / 2.0 } else { v[mid] }
}

fn json_nums(values: &[f64]) -> String {
    let items: Vec<String> = values.iter().map(|v| json_number(*v)).collect();
    format!("[{}]", items.join(","))
}

/// `v` as a JSON number, `null` when it is not finite (JSON has no NaN). Shared with the
/// report writer in `xtask`, so figures and report encode numbers alike.
pub fn json_number(v: f64) -> String {
    if v.is_finite() { format!("{v}") } else { "null".to_owned() }
}

/// `s` as a JSON string literal (quotes, backslashes and control characters escaped).
/// Shared with the report writer in `xtask`.
pub fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn json_line_escapes_names_and_writes_nan_as_null() {
        let f =
            Figure::new("api", "a \"quoted\"\nname", "req/s", Better::Higher, vec![1.5, f64::NAN])
                .against(Against::constant(Reference::Peer, "Terraform 4 rps", 4.0));
        assert_eq!(
            f.to_json(),
            "{\"bench\":\"api\",\"name\":\"a \\\"quoted\\\"\\nname\",\"unit\":\"req/s\",\
             \"better\":\"higher\",\"samples\":[1.5,null],\"against\":{\"reference\":\"peer\",\
             \"name\":\"Terraform 4 rps\",\"samples\":[4]}}"
        );
        let failed =
            Figure::new("api", "create", "req/s", Better::Higher, vec![2.0]).with_errors(3);
        assert_eq!(
            failed.to_json(),
            "{\"bench\":\"api\",\"name\":\"create\",\"unit\":\"req/s\",\"better\":\"higher\",\
             \"samples\":[2],\"errors\":3}"
        );
    }
}
