//! Kubernetes label selectors (`k=v`, `k!=v`, `k in (a,b)`, `k notin (a)`, `k`, `!k`,
//! comma = AND), as the apiserver parses them from `?labelSelector=`.
//!
//! Invariant: a selector that does not parse is an error (the face answers 400), never a
//! selector that silently matches everything.

use std::collections::BTreeMap;

/// One requirement of a selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requirement {
    /// `k=v` or `k==v`.
    Equals(String, String),
    /// `k!=v` (also true when `k` is absent, as in Kubernetes).
    NotEquals(String, String),
    /// `k in (a,b)`.
    In(String, Vec<String>),
    /// `k notin (a,b)` (also true when `k` is absent).
    NotIn(String, Vec<String>),
    /// `k`.
    Exists(String),
    /// `!k`.
    DoesNotExist(String),
}

/// A parsed label selector: all requirements must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selector(pub Vec<Requirement>);

impl Selector {
    /// Parses `s`; the empty string selects everything.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut out = Vec::new();
        for part in split_top_level(s)? {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            out.push(parse_requirement(part)?);
        }
        Ok(Self(out))
    }

    /// Whether `labels` satisfy every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|r| match r {
            Requirement::Equals(k, v) => labels.get(k) == Some(v),
            Requirement::NotEquals(k, v) => labels.get(k) != Some(v),
            Requirement::In(k, vs) => labels.get(k).is_some_and(|x| vs.contains(x)),
            Requirement::NotIn(k, vs) => !labels.get(k).is_some_and(|x| vs.contains(x)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::DoesNotExist(k) => !labels.contains_key(k),
        })
    }
}

/// Splits at commas that are not inside `( … )`.
fn split_top_level(s: &str) -> Result<Vec<&str>, String> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth = depth
                    .checked_sub(1)
                    .ok_or_else(|| format!("unbalanced ')' in selector {s:?}"))?
            }
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(format!("unbalanced '(' in selector {s:?}"));
    }
    parts.push(&s[start..]);
    Ok(parts)
}

fn valid_key(k: &str) -> bool {
    !k.is_empty()
        && k.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

fn valid_value(v: &str) -> bool {
    v.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

fn key(k: &str, whole: &str) -> Result<String, String> {
    let k = k.trim();
    if valid_key(k) {
        Ok(k.to_owned())
    } else {
        Err(format!("invalid label key {k:?} in requirement {whole:?}"))
    }
}

fn value(v: &str, whole: &str) -> Result<String, String> {
    let v = v.trim();
    if valid_value(v) {
        Ok(v.to_owned())
    } else {
        Err(format!("invalid label value {v:?} in requirement {whole:?}"))
    }
}

fn parse_set(rest: &str, whole: &str) -> Result<Vec<String>, String> {
    let rest = rest.trim();
    let inner = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| format!("expected '(values)' in requirement {whole:?}"))?;
    let values: Result<Vec<_>, _> = inner.split(',').map(|v| value(v, whole)).collect();
    let values = values?;
    if values.iter().all(|v| v.is_empty()) {
        return Err(format!("empty value set in requirement {whole:?}"));
    }
    Ok(values)
}

fn parse_requirement(part: &str) -> Result<Requirement, String> {
    if let Some(k) = part.strip_prefix('!') {
        return Ok(Requirement::DoesNotExist(key(k, part)?));
    }
    if let Some((k, v)) = part.split_once("!=") {
        return Ok(Requirement::NotEquals(key(k, part)?, value(v, part)?));
    }
    if let Some((k, v)) = part.split_once("==") {
        return Ok(Requirement::Equals(key(k, part)?, value(v, part)?));
    }
    if let Some((k, v)) = part.split_once('=') {
        return Ok(Requirement::Equals(key(k, part)?, value(v, part)?));
    }
    // `k notin (…)` / `k in (…)`: the key is the first word.
    let mut words = part.splitn(2, char::is_whitespace);
    let k = words.next().unwrap_or_default();
    match words.next().map(str::trim_start) {
        None => Ok(Requirement::Exists(key(k, part)?)),
        Some(rest) => {
            if let Some(set) = rest.strip_prefix("notin") {
                Ok(Requirement::NotIn(key(k, part)?, parse_set(set, part)?))
            } else if let Some(set) = rest.strip_prefix("in") {
                Ok(Requirement::In(key(k, part)?, parse_set(set, part)?))
            } else {
                Err(format!("unknown operator in requirement {part:?}"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn every_operator() {
        let l = labels(&[("gpu", "true"), ("tier", "a"), ("better-compute.dev/pool", "p1")]);
        let m = |s: &str| Selector::parse(s).unwrap().matches(&l);
        assert!(m(""));
        assert!(m("gpu=true"));
        assert!(m("gpu==true"));
        assert!(!m("gpu!=true"));
        assert!(m("missing!=x"));
        assert!(m("tier in (a,b)"));
        assert!(m("tier in (a, b),gpu=true"));
        assert!(!m("tier notin (a,b)"));
        assert!(m("missing notin (a)"));
        assert!(m("better-compute.dev/pool"));
        assert!(!m("!gpu"));
        assert!(m("!missing,gpu"));
        assert!(!m("gpu=true,tier=b"));
    }

    #[test]
    fn bad_selectors_are_errors() {
        for s in ["tier in a", "tier in (a", "k=v=w", "tier within (a)", "a b"] {
            assert!(Selector::parse(s).is_err(), "{s}");
        }
    }
}
