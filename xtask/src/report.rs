//! The benchmark report `cargo xtask bench` writes: it reads the figures the benchmarks
//! appended to `target/bench/figures.jsonl` (one JSON object per line, written by
//! `bc_testkit::bench::emit`) and writes `report.md` and `report.json` with, per figure,
//! the median, the spread, the sample count, the reference and the ratio to it.
//!
//! Invariant: every number in the report is computed here from the samples, in one place;
//! a line that cannot be read, a sample that failed and a figure that saw errors are all
//! shown as such, never dropped silently.

use std::fmt::Write as _;

use crate::json::{self, Value};

/// What a figure is set against, as read from its line.
#[derive(Debug, Clone, PartialEq)]
pub struct Against {
    /// `ceiling`, `peer`, `target` or `baseline`.
    pub reference: String,
    /// What it is, e.g. "events.list (cheapest authenticated method)".
    pub name: String,
    /// Its samples: one per run of the figure when measured in the same runs, or one.
    pub samples: Vec<f64>,
}

/// One figure, as read from its line.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    /// The benchmark that measured it.
    pub bench: String,
    /// What was measured.
    pub name: String,
    /// Unit of the samples.
    pub unit: String,
    /// Whether more is better.
    pub higher_is_better: bool,
    /// The samples; a failed one is NaN (`null` in the line).
    pub samples: Vec<f64>,
    /// Requests or operations that failed while it was measured.
    pub errors: u64,
    /// What it is judged against.
    pub against: Option<Against>,
}

/// Reads the figure lines; lines that are not figures come back as problems naming them.
pub fn read_figures(text: &str) -> (Vec<Figure>, Vec<String>) {
    let (mut figures, mut problems) = (Vec::new(), Vec::new());
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match json::parse(line).and_then(|v| figure(&v)) {
            Ok(f) => figures.push(f),
            Err(e) => problems.push(format!("figures.jsonl line {}: {e}", i + 1)),
        }
    }
    (figures, problems)
}

/// A figure from its JSON object.
fn figure(v: &Value) -> Result<Figure, String> {
    let text = |v: &Value, key: &str| {
        v.get(key).and_then(Value::as_str).map(str::to_owned).ok_or(format!("no string `{key}`"))
    };
    let samples = |v: &Value| -> Result<Vec<f64>, String> {
        let items = v.get("samples").and_then(Value::as_array).ok_or("no array `samples`")?;
        let out: Result<Vec<f64>, String> = items
            .iter()
            .map(|s| match s {
                Value::Null => Ok(f64::NAN),
                s => s.as_f64().ok_or_else(|| "a sample is not a number".to_owned()),
            })
            .collect();
        out.and_then(|s| if s.is_empty() { Err("no samples".into()) } else { Ok(s) })
    };
    let higher_is_better = match text(v, "better")?.as_str() {
        "higher" => true,
        "lower" => false,
        other => return Err(format!("`better` is {other:?}, not \"higher\" or \"lower\"")),
    };
    let errors = match v.get("errors") {
        None => 0,
        Some(e) => {
            e.as_f64().filter(|n| *n >= 0.0 && n.fract() == 0.0).ok_or("`errors` is not a count")?
                as u64
        }
    };
    let against = match v.get("against") {
        None | Some(Value::Null) => None,
        Some(a) => Some(Against {
            reference: text(a, "reference")?,
            name: text(a, "name")?,
            samples: samples(a)?,
        }),
    };
    Ok(Figure {
        bench: text(v, "bench")?,
        name: text(v, "name")?,
        unit: text(v, "unit")?,
        higher_is_better,
        samples: samples(v)?,
        errors,
        against,
    })
}

/// Median and spread of a figure's finite samples.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stats {
    /// Finite samples.
    pub n: usize,
    /// Samples that failed (not finite).
    pub failed: usize,
    /// Their median (the mean of the middle two when `n` is even).
    pub median: f64,
    /// Smallest.
    pub min: f64,
    /// Largest.
    pub max: f64,
}

impl Stats {
    /// (max − min) ÷ |median|: how far apart the repeated runs were, relative to the figure.
    pub fn relative_spread(&self) -> f64 {
        if self.median == 0.0 { f64::NAN } else { (self.max - self.min) / self.median.abs() }
    }
}

/// The statistics of `samples`, `None` when none of them is finite.
pub fn stats(samples: &[f64]) -> Option<Stats> {
    let mut v: Vec<f64> = samples.iter().copied().filter(|s| s.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    let median = if v.len().is_multiple_of(2) { (v[mid - 1] + v[mid]) / 2.0 } else { v[mid] };
    Some(Stats {
        n: v.len(),
        failed: samples.len() - v.len(),
        median,
        min: v[0],
        max: v[v.len() - 1],
    })
}

/// A figure's ratio to its reference.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ratio {
    /// Whether it was taken run by run (same number of samples on both sides), so that
    /// its spread is the spread of the per-run ratios.
    pub paired: bool,
    /// The ratios' statistics (a single ratio when not paired).
    pub stats: Stats,
}

/// figure ÷ reference: run by run when both have the same number (> 1) of samples, else
/// median ÷ median. `None` when no ratio can be formed (no finite value, or a zero
/// reference).
pub fn ratio(figure: &[f64], reference: &[f64]) -> Option<Ratio> {
    if figure.len() == reference.len() && figure.len() > 1 {
        let per_run: Vec<f64> = figure
            .iter()
            .zip(reference)
            .map(|(f, r)| if *r == 0.0 { f64::NAN } else { f / r })
            .collect();
        return stats(&per_run).map(|stats| Ratio { paired: true, stats });
    }
    let (f, r) = (stats(figure)?.median, stats(reference)?.median);
    if r == 0.0 {
        return None;
    }
    let q = f / r;
    Some(Ratio { paired: false, stats: Stats { n: 1, failed: 0, median: q, min: q, max: q } })
}

/// How one benchmark's run went.
#[derive(Debug, Clone, PartialEq)]
pub struct BenchRun {
    /// Its name (`store`, `api`, …).
    pub name: String,
    /// Its process's exit code (0: passed).
    pub exit_code: u8,
    /// Wall time of its run, seconds (not counting the build).
    pub wall_secs: f64,
}

/// What the report says about the run as a whole.
#[derive(Debug, Clone, PartialEq)]
pub struct Meta {
    /// `--quick` or the full suite.
    pub quick: bool,
    /// UTC date and time of the run.
    pub date: String,
    /// `git rev-parse --short HEAD`, with `+dirty` when the tree had changes.
    pub commit: String,
    /// `std::thread::available_parallelism`.
    pub cores: usize,
    /// Operating system and architecture.
    pub platform: String,
    /// Whether a PostgreSQL was available to the benchmarks.
    pub postgres: bool,
    /// Wall time of building the benchmarks, seconds.
    pub build_secs: f64,
}

/// A number with about three significant digits (whole above 1,000).
pub fn num(v: f64) -> String {
    if !v.is_finite() {
        return "–".into();
    }
    let a = v.abs();
    if a >= 1000.0 || a == 0.0 {
        format!("{v:.0}")
    } else if a >= 100.0 {
        format!("{v:.1}")
    } else if a >= 10.0 {
        format!("{v:.2}")
    } else if a >= 1.0 {
        format!("{v:.3}")
    } else {
        // Three significant digits below 1.
        let decimals = (2 - a.log10().floor() as i32).clamp(3, 12) as usize;
        format!("{v:.decimals$}")
    }
}

/// A relative value as a percentage.
fn pct(v: f64) -> String {
    if v.is_finite() { format!("{:.0}%", v * 100.0) } else { "–".into() }
}

/// Escapes a table cell.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// The report as Markdown.
pub fn markdown(meta: &Meta, runs: &[BenchRun], figures: &[Figure], problems: &[String]) -> String {
    let mut out = String::new();
    let total: f64 = runs.iter().map(|r| r.wall_secs).sum();
    let _ = writeln!(out, "# Benchmark report ({})\n", if meta.quick { "quick" } else { "full" });
    let _ = writeln!(out, "- date: {}; commit: {}", meta.date, meta.commit);
    let _ = writeln!(out, "- machine: {} cores ({})", meta.cores, meta.platform);
    let _ = writeln!(
        out,
        "- PostgreSQL: {}",
        if meta.postgres { "yes (throwaway, loopback)" } else { "not available: SQLite only" }
    );
    let _ = writeln!(
        out,
        "- wall time: {:.0} s running the benchmarks ({:.0} s building them before)\n",
        total, meta.build_secs
    );
    let _ = writeln!(out, "| benchmark | result | wall time | figures |");
    let _ = writeln!(out, "|---|---|---:|---:|");
    for r in runs {
        let result = if r.exit_code == 0 {
            "passed".to_owned()
        } else {
            format!("**FAILED** (exit code {})", r.exit_code)
        };
        let count = figures.iter().filter(|f| f.bench == r.name).count();
        let _ = writeln!(out, "| {} | {result} | {:.1} s | {count} |", r.name, r.wall_secs);
    }
    if !problems.is_empty() {
        let _ = writeln!(out, "\nProblems reading the figures:\n");
        for p in problems {
            let _ = writeln!(out, "- {p}");
        }
    }
    let mut benches: Vec<&str> = Vec::new();
    for f in figures {
        if !benches.contains(&f.bench.as_str()) {
            benches.push(&f.bench);
        }
    }
    for bench in benches {
        let _ = writeln!(out, "\n## {bench}\n");
        let _ = writeln!(
            out,
            "| figure | median | unit | min–max | spread | n | against | ratio | ratio min–max |"
        );
        let _ = writeln!(out, "|---|---:|---|---:|---:|---:|---|---:|---:|");
        for f in figures.iter().filter(|f| f.bench == bench) {
            let mut name = cell(&f.name);
            if f.errors > 0 {
                let _ = write!(name, " **⚠ {} errors**", f.errors);
            }
            let unit = format!("{} {}", cell(&f.unit), if f.higher_is_better { "↑" } else { "↓" });
            let (median, range, spread, n) = match stats(&f.samples) {
                Some(s) => {
                    let n = if s.failed > 0 {
                        format!("{} (**{} failed**)", s.n, s.failed)
                    } else {
                        s.n.to_string()
                    };
                    let range = if s.n > 1 {
                        format!("{}–{}", num(s.min), num(s.max))
                    } else {
                        "–".to_owned()
                    };
                    let spread = if s.n > 1 { pct(s.relative_spread()) } else { "–".into() };
                    (num(s.median), range, spread, n)
                }
                None => ("**failed**".into(), "–".into(), "–".into(), "0".into()),
            };
            let (against, r, r_range) = match &f.against {
                None => (String::new(), String::new(), String::new()),
                Some(a) => {
                    let value = stats(&a.samples).map_or("–".into(), |s| num(s.median));
                    let against = format!("{}: {} ({value})", a.reference, cell(&a.name));
                    match ratio(&f.samples, &a.samples) {
                        Some(q) if q.paired && q.stats.n > 1 => (
                            against,
                            format!("{}×", num(q.stats.median)),
                            format!("{}–{} (per run)", num(q.stats.min), num(q.stats.max)),
                        ),
                        Some(q) => (against, format!("{}×", num(q.stats.median)), "–".into()),
                        None => (against, "–".into(), "–".into()),
                    }
                }
            };
            let _ = writeln!(
                out,
                "| {name} | {median} | {unit} | {range} | {spread} | {n} | {against} | {r} | {r_range} |"
            );
        }
    }
    let _ = writeln!(
        out,
        "\nmedian and min–max are over the n repeated runs; spread = (max − min) ÷ median; \
         ratio = figure ÷ reference, taken run by run when both were measured in the same \
         runs (then its min–max is over those runs), else median ÷ median; ↑ more is \
         better, ↓ less is better."
    );
    out
}

/// A stats object as JSON members.
fn stats_json(s: Option<Stats>) -> String {
    match s {
        None => "\"n\":0,\"median\":null,\"min\":null,\"max\":null,\"relativeSpread\":null".into(),
        Some(s) => format!(
            "\"n\":{},\"failed\":{},\"median\":{},\"min\":{},\"max\":{},\"relativeSpread\":{}",
            s.n,
            s.failed,
            json::number(s.median),
            json::number(s.min),
            json::number(s.max),
            json::number(if s.n > 1 { s.relative_spread() } else { f64::NAN })
        ),
    }
}

/// Numbers as a JSON array.
fn nums_json(v: &[f64]) -> String {
    let items: Vec<String> = v.iter().map(|x| json::number(*x)).collect();
    format!("[{}]", items.join(","))
}

/// The report as JSON (the same figures as the Markdown, with their samples).
pub fn json_report(
    meta: &Meta,
    runs: &[BenchRun],
    figures: &[Figure],
    problems: &[String],
) -> String {
    let mut out = String::from("{\n");
    let _ =
        writeln!(out, "  \"mode\": {},", json::string(if meta.quick { "quick" } else { "full" }));
    let _ = writeln!(out, "  \"date\": {},", json::string(&meta.date));
    let _ = writeln!(out, "  \"commit\": {},", json::string(&meta.commit));
    let _ = writeln!(out, "  \"cores\": {},", meta.cores);
    let _ = writeln!(out, "  \"platform\": {},", json::string(&meta.platform));
    let _ = writeln!(out, "  \"postgres\": {},", meta.postgres);
    let _ = writeln!(out, "  \"buildSeconds\": {},", json::number(meta.build_secs));
    let runs_json: Vec<String> = runs
        .iter()
        .map(|r| {
            format!(
                "    {{\"name\":{},\"exitCode\":{},\"passed\":{},\"wallSeconds\":{}}}",
                json::string(&r.name),
                r.exit_code,
                r.exit_code == 0,
                json::number(r.wall_secs)
            )
        })
        .collect();
    let _ = writeln!(out, "  \"benches\": [\n{}\n  ],", runs_json.join(",\n"));
    let figures_json: Vec<String> = figures
        .iter()
        .map(|f| {
            let mut s = format!(
                "    {{\"bench\":{},\"name\":{},\"unit\":{},\"better\":\"{}\",{},\"errors\":{},\"samples\":{}",
                json::string(&f.bench),
                json::string(&f.name),
                json::string(&f.unit),
                if f.higher_is_better { "higher" } else { "lower" },
                stats_json(stats(&f.samples)),
                f.errors,
                nums_json(&f.samples)
            );
            if let Some(a) = &f.against {
                let _ = write!(
                    s,
                    ",\"against\":{{\"reference\":{},\"name\":{},\"median\":{},\"samples\":{}}}",
                    json::string(&a.reference),
                    json::string(&a.name),
                    json::number(stats(&a.samples).map_or(f64::NAN, |s| s.median)),
                    nums_json(&a.samples)
                );
                match ratio(&f.samples, &a.samples) {
                    Some(q) => {
                        let _ = write!(
                            s,
                            ",\"ratio\":{{\"paired\":{},\"median\":{},\"min\":{},\"max\":{}}}",
                            q.paired,
                            json::number(q.stats.median),
                            json::number(q.stats.min),
                            json::number(q.stats.max)
                        );
                    }
                    None => s.push_str(",\"ratio\":null"),
                }
            }
            s.push('}');
            s
        })
        .collect();
    let _ = writeln!(out, "  \"figures\": [\n{}\n  ],", figures_json.join(",\n"));
    let problems: Vec<String> = problems.iter().map(|p| json::string(p)).collect();
    let _ = writeln!(out, "  \"problems\": [{}]", problems.join(", "));
    out.push_str("}\n");
    out
}

/// `secs` since the Unix epoch as `YYYY-MM-DD HH:MM UTC` (civil calendar, no time zone
/// database needed).
pub fn utc_date(secs: u64) -> String {
    let (year, month, day, hour, minute, _) = utc_parts(secs);
    format!("{year:04}-{month:02}-{day:02} {hour:02}:{minute:02} UTC")
}

/// Year, month, day, hour, minute and second (UTC) of `secs` since the Unix epoch.
pub fn utc_parts(secs: u64) -> (i64, i64, i64, u64, u64, u64) {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's days-to-civil.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day, rem / 3600, rem % 3600 / 60, rem % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> Meta {
        Meta {
            quick: true,
            date: "2026-01-02 03:04 UTC".into(),
            commit: "abc1234".into(),
            cores: 2,
            platform: "linux x86_64".into(),
            postgres: true,
            build_secs: 1.0,
        }
    }

    #[test]
    fn median_spread_and_failed_samples() {
        let s = stats(&[3.0, 1.0, 2.0, f64::NAN]).unwrap();
        assert_eq!((s.n, s.failed, s.median, s.min, s.max), (3, 1, 2.0, 1.0, 3.0));
        assert_eq!(s.relative_spread(), 1.0);
        assert_eq!(stats(&[4.0, 1.0, 2.0, 3.0]).unwrap().median, 2.5);
        assert!(stats(&[f64::NAN]).is_none());
        assert!(stats(&[]).is_none());
        assert!(stats(&[0.0, 0.0]).unwrap().relative_spread().is_nan());
    }

    #[test]
    fn ratio_is_paired_run_by_run_when_the_counts_match() {
        // Run by run: 10/5, 30/10, 40/10 → 2, 3, 4. Median ÷ median would be 30/10 = 3
        // too, but the spread is the per-run one.
        let q = ratio(&[10.0, 30.0, 40.0], &[5.0, 10.0, 10.0]).unwrap();
        assert!(q.paired);
        assert_eq!((q.stats.median, q.stats.min, q.stats.max), (3.0, 2.0, 4.0));
        // Pairing matters: 100/50 and 10/10 give 2 and 1 (median 1.5), while
        // median ÷ median is 55/30.
        let q = ratio(&[100.0, 10.0], &[50.0, 10.0]).unwrap();
        assert_eq!(q.stats.median, 1.5);
        // A constant reference: median ÷ median, no spread.
        let q = ratio(&[2.0, 4.0, 6.0], &[4.0]).unwrap();
        assert!(!q.paired);
        assert_eq!((q.stats.median, q.stats.min, q.stats.max), (1.0, 1.0, 1.0));
        // A failed run drops out of the pairs; a zero reference gives no ratio.
        let q = ratio(&[10.0, f64::NAN, 30.0], &[10.0, 10.0, 10.0]).unwrap();
        assert_eq!((q.stats.n, q.stats.failed, q.stats.median), (2, 1, 2.0));
        assert!(ratio(&[1.0], &[0.0]).is_none());
        assert!(ratio(&[f64::NAN], &[1.0]).is_none());
    }

    #[test]
    fn reads_figure_lines_and_names_bad_ones() {
        let text = concat!(
            r#"{"bench":"api","name":"get","unit":"req/s","better":"higher","samples":[10,12,11],"against":{"reference":"ceiling","name":"events.list","samples":[20,20,22]}}"#,
            "\n\n",
            r#"{"bench":"api","name":"create","unit":"req/s","better":"higher","samples":[5,null],"errors":3}"#,
            "\nnot json\n",
            r#"{"bench":"api","name":"x","unit":"ms","better":"sideways","samples":[1]}"#,
            "\n",
            r#"{"bench":"api","name":"x","unit":"ms","better":"lower","samples":[]}"#,
            "\n",
        );
        let (figures, problems) = read_figures(text);
        assert_eq!(figures.len(), 2, "{problems:?}");
        assert_eq!(figures[0].against.as_ref().unwrap().samples, vec![20.0, 20.0, 22.0]);
        assert!(figures[0].higher_is_better);
        assert_eq!(figures[1].errors, 3);
        assert!(figures[1].samples[1].is_nan());
        assert_eq!(problems.len(), 3);
        assert!(problems[0].starts_with("figures.jsonl line 4:"), "{problems:?}");
        assert!(problems[1].contains("sideways"), "{problems:?}");
        assert!(problems[2].contains("no samples"), "{problems:?}");
    }

    #[test]
    fn reads_what_bc_testkit_writes() {
        // The exact line bc_testkit::bench's own test expects `to_json` to produce.
        let line = "{\"bench\":\"api\",\"name\":\"a \\\"quoted\\\"\\nname\",\"unit\":\"req/s\",\
             \"better\":\"higher\",\"samples\":[1.5,null],\"against\":{\"reference\":\"peer\",\
             \"name\":\"Terraform 4 rps\",\"samples\":[4]}}";
        let (figures, problems) = read_figures(line);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(figures[0].name, "a \"quoted\"\nname");
        assert_eq!(figures[0].against.as_ref().unwrap().reference, "peer");
    }

    #[test]
    fn markdown_shows_medians_ratios_errors_and_failures() {
        let (figures, _) = read_figures(concat!(
            r#"{"bench":"api","name":"get | 1k","unit":"req/s","better":"higher","samples":[10,30,40],"against":{"reference":"ceiling","name":"events.list","samples":[5,10,10]}}"#,
            "\n",
            r#"{"bench":"api","name":"create","unit":"req/s","better":"higher","samples":[5],"errors":2}"#,
            "\n",
            r#"{"bench":"store","name":"dead","unit":"ms","better":"lower","samples":[null]}"#,
        ));
        let runs = vec![
            BenchRun { name: "api".into(), exit_code: 0, wall_secs: 12.5 },
            BenchRun { name: "store".into(), exit_code: 101, wall_secs: 3.0 },
        ];
        let md = markdown(&meta(), &runs, &figures, &["line 9: bad".into()]);
        assert!(md.starts_with("# Benchmark report (quick)"), "{md}");
        assert!(md.contains("2 cores"), "{md}");
        assert!(md.contains("| store | **FAILED** (exit code 101) | 3.0 s | 1 |"), "{md}");
        assert!(md.contains("- line 9: bad"), "{md}");
        assert!(
            md.contains(
                "| get \\| 1k | 30.00 | req/s ↑ | 10.00–40.00 | 100% | 3 | ceiling: events.list (10.00) | 3.000× | 2.000–4.000 (per run) |"
            ),
            "{md}"
        );
        assert!(md.contains("create **⚠ 2 errors**"), "{md}");
        assert!(md.contains("| dead | **failed** | ms ↓ |"), "{md}");
    }

    #[test]
    fn json_report_is_valid_json_with_the_computed_figures() {
        let (figures, _) = read_figures(
            r#"{"bench":"api","name":"get","unit":"req/s","better":"higher","samples":[10,30,40],"against":{"reference":"ceiling","name":"events.list","samples":[5,10,10]}}"#,
        );
        let runs = vec![BenchRun { name: "api".into(), exit_code: 0, wall_secs: 2.0 }];
        let text = json_report(&meta(), &runs, &figures, &["p \"q\"".into()]);
        let v = json::parse(&text).expect(&text);
        assert_eq!(v.get("cores").and_then(Value::as_f64), Some(2.0));
        assert_eq!(v.get("mode").and_then(Value::as_str), Some("quick"));
        let f = &v.get("figures").and_then(Value::as_array).unwrap()[0];
        assert_eq!(f.get("median").and_then(Value::as_f64), Some(30.0));
        assert_eq!(f.get("relativeSpread").and_then(Value::as_f64), Some(1.0));
        let r = f.get("ratio").unwrap();
        assert_eq!(r.get("median").and_then(Value::as_f64), Some(3.0));
        assert_eq!(r.get("paired"), Some(&Value::Bool(true)));
        let problems = v.get("problems").and_then(Value::as_array).unwrap();
        assert_eq!(problems[0].as_str(), Some("p \"q\""));
    }

    #[test]
    fn numbers_keep_three_significant_digits() {
        assert_eq!(num(12345.6), "12346");
        assert_eq!(num(123.46), "123.5");
        assert_eq!(num(12.346), "12.35");
        assert_eq!(num(1.2344), "1.234");
        assert_eq!(num(0.012345), "0.0123");
        assert_eq!(num(0.5), "0.500");
        assert_eq!(num(0.0), "0");
        assert_eq!(num(f64::NAN), "–");
    }

    #[test]
    fn dates_are_civil_utc() {
        assert_eq!(utc_date(0), "1970-01-01 00:00 UTC");
        assert_eq!(utc_date(1_700_000_000), "2023-11-14 22:13 UTC");
        assert_eq!(utc_date(951_782_400), "2000-02-29 00:00 UTC");
    }
}
