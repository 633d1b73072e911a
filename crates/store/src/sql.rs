//! The small SQL toolkit of the adapter: statements written once with `?` placeholders
//! and rendered per backend, and typed decoding of result rows.
//!
//! Invariant: values always travel as bound parameters, never spliced into SQL text; the
//! only text this module builds is placeholders. A row that cannot be decoded is an
//! `Internal` error naming the column, never a panic.

use std::str::FromStr;

use bc_domain::id::{Id, IdKind};
use bc_domain::ports::CursorKey;
use bc_domain::{StoreError, Timestamp};
use sea_orm::{DbBackend, QueryResult, Statement, Value};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Renders `sql` (with `?` placeholders) for `backend`: PostgreSQL gets `$1, $2, …`.
/// No statement of this crate has a `?` inside a string literal, so a plain scan is exact.
pub(crate) fn stmt(backend: DbBackend, sql: &str, values: Vec<Value>) -> Statement {
    let text = match backend {
        DbBackend::Postgres => {
            let mut out = String::with_capacity(sql.len() + 16);
            let mut n = 0;
            for ch in sql.chars() {
                if ch == '?' {
                    n += 1;
                    out.push('$');
                    out.push_str(&n.to_string());
                } else {
                    out.push(ch);
                }
            }
            out
        }
        _ => sql.to_owned(),
    };
    Statement::from_sql_and_values(backend, text, values)
}

/// `?, ?, ?` for `n` values.
pub(crate) fn placeholders(n: usize) -> String {
    vec!["?"; n].join(", ")
}

/// The two-argument minimum: `LEAST` on PostgreSQL, scalar `MIN` on SQLite.
pub(crate) fn least(backend: DbBackend) -> &'static str {
    match backend {
        DbBackend::Postgres => "LEAST",
        _ => "MIN",
    }
}

/// The two-argument maximum: `GREATEST` on PostgreSQL, scalar `MAX` on SQLite.
pub(crate) fn greatest(backend: DbBackend) -> &'static str {
    match backend {
        DbBackend::Postgres => "GREATEST",
        _ => "MAX",
    }
}

/// A list's page key as a bound value, and the value below every key (so the first page
/// also reads an index range, `key > lowest`, rather than scanning from the start).
pub(crate) trait SqlKey: CursorKey {
    /// The key as bound.
    fn value(&self) -> Value;
    /// Below every stored key.
    fn lowest() -> Value;
}

impl<K: IdKind> SqlKey for Id<K> {
    fn value(&self) -> Value {
        s(self)
    }
    fn lowest() -> Value {
        s("")
    }
}

impl SqlKey for String {
    fn value(&self) -> Value {
        s(self)
    }
    fn lowest() -> Value {
        s("")
    }
}

impl SqlKey for u64 {
    fn value(&self) -> Value {
        // Keys are autoincrement numbers, far below i64::MAX; saturate rather than wrap.
        Value::from(i64::try_from(*self).unwrap_or(i64::MAX))
    }
    fn lowest() -> Value {
        Value::from(i64::MIN)
    }
}

/// A timestamp as stored (unix milliseconds).
pub(crate) fn ts(t: Timestamp) -> Value {
    Value::from(t.unix_ms())
}

/// An optional timestamp as stored.
pub(crate) fn ots(t: Option<Timestamp>) -> Value {
    Value::from(t.map(Timestamp::unix_ms))
}

/// A `u64` (generation, seq) as BIGINT; values above `i64::MAX` cannot occur in practice
/// and are refused rather than wrapped.
pub(crate) fn u64v(n: u64) -> Result<Value, StoreError> {
    i64::try_from(n)
        .map(Value::from)
        .map_err(|_| StoreError::internal(format!("{n} does not fit a BIGINT")))
}

/// An optional unsigned value (`NULL` when absent).
pub(crate) fn opt_u64v(n: Option<u64>) -> Result<Value, StoreError> {
    match n {
        Some(n) => u64v(n),
        None => Ok(Value::BigInt(None)),
    }
}

/// A string value.
pub(crate) fn s(v: impl AsRef<str>) -> Value {
    Value::from(v.as_ref().to_owned())
}

/// An optional string value.
pub(crate) fn os<T: AsRef<str>>(v: Option<T>) -> Value {
    Value::from(v.map(|x| x.as_ref().to_owned()))
}

/// The JSON text of a value.
pub(crate) fn json<T: Serialize>(v: &T) -> Result<Value, StoreError> {
    serde_json::to_string(v)
        .map(Value::from)
        .map_err(|e| StoreError::internal(format!("cannot encode JSON: {e}")))
}

/// The wire name of a serde enum (`"active"`), as stored in text columns.
pub(crate) fn enum_text<T: Serialize>(v: &T) -> Result<String, StoreError> {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => Ok(s),
        other => Err(StoreError::internal(format!("not a unit enum: {other:?}"))),
    }
}

/// A result row with typed getters that name the column on failure.
pub(crate) struct Row<'a>(pub(crate) &'a QueryResult);

fn bad(col: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::internal(format!("column {col}: {e}"))
}

impl Row<'_> {
    pub(crate) fn string(&self, col: &str) -> Result<String, StoreError> {
        self.0.try_get::<String>("", col).map_err(|e| bad(col, e))
    }
    pub(crate) fn opt_string(&self, col: &str) -> Result<Option<String>, StoreError> {
        self.0.try_get::<Option<String>>("", col).map_err(|e| bad(col, e))
    }
    pub(crate) fn i64(&self, col: &str) -> Result<i64, StoreError> {
        self.0.try_get::<i64>("", col).map_err(|e| bad(col, e))
    }
    pub(crate) fn opt_i64(&self, col: &str) -> Result<Option<i64>, StoreError> {
        self.0.try_get::<Option<i64>>("", col).map_err(|e| bad(col, e))
    }
    pub(crate) fn bool(&self, col: &str) -> Result<bool, StoreError> {
        self.0.try_get::<bool>("", col).map_err(|e| bad(col, e))
    }
    pub(crate) fn bytes(&self, col: &str) -> Result<Vec<u8>, StoreError> {
        self.0.try_get::<Vec<u8>>("", col).map_err(|e| bad(col, e))
    }
    pub(crate) fn u64(&self, col: &str) -> Result<u64, StoreError> {
        let v = self.i64(col)?;
        u64::try_from(v).map_err(|e| bad(col, e))
    }
    pub(crate) fn opt_u64(&self, col: &str) -> Result<Option<u64>, StoreError> {
        self.opt_i64(col)?.map(|v| u64::try_from(v).map_err(|e| bad(col, e))).transpose()
    }
    pub(crate) fn u32(&self, col: &str) -> Result<u32, StoreError> {
        let v = self.i64(col)?;
        u32::try_from(v).map_err(|e| bad(col, e))
    }
    pub(crate) fn ts(&self, col: &str) -> Result<Timestamp, StoreError> {
        self.i64(col).map(Timestamp::from_unix_ms)
    }
    pub(crate) fn opt_ts(&self, col: &str) -> Result<Option<Timestamp>, StoreError> {
        Ok(self.opt_i64(col)?.map(Timestamp::from_unix_ms))
    }
    /// A column parsed with `FromStr` (ids, names).
    pub(crate) fn parse<T: FromStr>(&self, col: &str) -> Result<T, StoreError>
    where
        T::Err: std::fmt::Display,
    {
        self.string(col)?.parse().map_err(|e| bad(col, e))
    }
    pub(crate) fn opt_parse<T: FromStr>(&self, col: &str) -> Result<Option<T>, StoreError>
    where
        T::Err: std::fmt::Display,
    {
        self.opt_string(col)?.map(|v| v.parse().map_err(|e| bad(col, e))).transpose()
    }
    /// A JSON text column.
    pub(crate) fn json<T: DeserializeOwned>(&self, col: &str) -> Result<T, StoreError> {
        serde_json::from_str(&self.string(col)?).map_err(|e| bad(col, e))
    }
    pub(crate) fn opt_json<T: DeserializeOwned>(&self, col: &str) -> Result<Option<T>, StoreError> {
        self.opt_string(col)?.map(|v| serde_json::from_str(&v).map_err(|e| bad(col, e))).transpose()
    }
    /// A serde unit enum stored by its wire name, read straight from the text (no
    /// `serde_json::Value` built per column: every row of a list has a state).
    pub(crate) fn enumv<T: DeserializeOwned>(&self, col: &str) -> Result<T, StoreError> {
        use serde::de::IntoDeserializer;
        let text = self.string(col)?;
        let de: serde::de::value::StrDeserializer<'_, serde::de::value::Error> =
            text.as_str().into_deserializer();
        T::deserialize(de).map_err(|e| bad(col, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postgres_gets_numbered_placeholders() {
        let st = stmt(DbBackend::Postgres, "a = ? AND b IN (?, ?)", vec![]);
        assert_eq!(st.sql, "a = $1 AND b IN ($2, $3)");
        let st = stmt(DbBackend::Sqlite, "a = ?", vec![]);
        assert_eq!(st.sql, "a = ?");
        assert_eq!(placeholders(3), "?, ?, ?");
    }
}
