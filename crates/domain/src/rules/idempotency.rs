//! Idempotent creates (SPEC §2): a create repeated with the same `requestId` and the same
//! body within 24 hours returns the first result and creates nothing; the same
//! `requestId` with another body is `ALREADY_EXISTS`; after 24 hours the `requestId` is
//! free again.
//!
//! Invariant: a record is live exactly while `now < created_at + 24 h`, here and in the
//! store (`LedgerRepo::idempotency_get` and `Write::PutIdempotency` use [`WINDOW_MS`] with
//! the same half-open bound), so a record the purge has not reached yet never answers.

use serde_json::Value;

use crate::error::Error;
use crate::model::IdempotencyRecord;
use crate::time::Timestamp;
use crate::token::sha256_hex;

/// How long a `requestId` is remembered, in milliseconds (24 hours).
pub const WINDOW_MS: i64 = 24 * 60 * 60 * 1000;

/// Whether `record` still answers for its `requestId` at `now`.
pub fn is_live(record: &IdempotencyRecord, now: Timestamp) -> bool {
    now.unix_ms() < record.created_at.unix_ms().saturating_add(WINDOW_MS)
}

/// The oldest `created_at` of a record still live at `now` is just after this bound:
/// records created at or before it are expired (what the purge may drop).
pub fn expired_at_or_before(now: Timestamp) -> Timestamp {
    Timestamp::from_unix_ms(now.unix_ms().saturating_sub(WINDOW_MS))
}

/// What a create call carrying a `requestId` does, given the stored record for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replay<'a> {
    /// No live record: create, and store the result under the `requestId`.
    Create,
    /// The same body within the window: answer with the first response, create nothing.
    Repeat(&'a serde_json::Value),
    /// Another body within the window: `ALREADY_EXISTS`.
    Reused,
}

/// Decides a create call with `body_hash` (SHA-256 hex of its canonical body) against the
/// stored record for its `requestId`, if any.
pub fn replay<'a>(
    record: Option<&'a IdempotencyRecord>,
    body_hash: &str,
    now: Timestamp,
) -> Replay<'a> {
    match record {
        Some(r) if is_live(r, now) && r.body_hash == body_hash => Replay::Repeat(&r.response),
        Some(r) if is_live(r, now) => Replay::Reused,
        _ => Replay::Create,
    }
}

/// The hash a create's body is compared by: SHA-256 hex of its canonical JSON, with every
/// object's keys sorted, so the same body with its fields in another order is the same
/// request (serde_json may keep insertion order, when a crate in the build turns on its
/// `preserve_order` feature, so the order is fixed here rather than assumed).
pub fn body_hash(body: &Value) -> String {
    let mut out = String::new();
    canonical(body, &mut out);
    sha256_hex(out.as_bytes())
}

/// Writes `v` as compact JSON with sorted object keys.
fn canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                canonical(&map[k], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// The `ALREADY_EXISTS` answer to a `requestId` reused with another body.
pub fn reused_error(method: &str, request_id: &str) -> Error {
    Error::already_exists(reused_message(method, request_id))
}

/// The message of [`reused_error`] (also what the store's `RequestIdReused` carries).
pub fn reused_message(method: &str, request_id: &str) -> String {
    format!(
        "requestId {request_id:?} was already used for {method} with a different body in the last 24 hours: use a new requestId"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;
    use crate::name::TenantId;

    fn rec(hash: &str, at: i64) -> IdempotencyRecord {
        IdempotencyRecord {
            tenant_id: TenantId::parse("acme").unwrap(),
            method: "pools.create".into(),
            request_id: "r1".into(),
            body_hash: hash.into(),
            response: serde_json::json!({"poolId": "pool_x"}),
            created_at: Timestamp::from_unix_ms(at),
        }
    }

    #[test]
    fn the_window_is_half_open_24_hours() {
        let r = rec("h", 1_000);
        assert!(is_live(&r, Timestamp::from_unix_ms(1_000)));
        assert!(is_live(&r, Timestamp::from_unix_ms(1_000 + WINDOW_MS - 1)));
        assert!(!is_live(&r, Timestamp::from_unix_ms(1_000 + WINDOW_MS)));
        assert_eq!(
            expired_at_or_before(Timestamp::from_unix_ms(1_000 + WINDOW_MS)).unix_ms(),
            1_000
        );
    }

    #[test]
    fn body_hash_ignores_key_order_but_not_values() {
        let a: Value =
            serde_json::from_str(r#"{"b":1,"a":{"y":[1,{"q":2,"p":3}],"x":"s"}}"#).unwrap();
        let b: Value =
            serde_json::from_str(r#"{"a":{"x":"s","y":[1,{"p":3,"q":2}]},"b":1}"#).unwrap();
        assert_eq!(body_hash(&a), body_hash(&b));
        let c: Value =
            serde_json::from_str(r#"{"a":{"x":"s","y":[{"p":3,"q":2},1]},"b":1}"#).unwrap();
        assert_ne!(body_hash(&a), body_hash(&c), "array order is part of the body");
        assert_ne!(
            body_hash(&serde_json::json!({"a": 1})),
            body_hash(&serde_json::json!({"a": "1"}))
        );
        assert_eq!(body_hash(&a).len(), 64);
    }

    #[test]
    fn same_body_repeats_other_body_is_refused_old_record_is_ignored() {
        let r = rec("h", 0);
        let soon = Timestamp::from_unix_ms(5);
        assert_eq!(replay(Some(&r), "h", soon), Replay::Repeat(&r.response));
        assert_eq!(replay(Some(&r), "other", soon), Replay::Reused);
        assert_eq!(replay(None, "h", soon), Replay::Create);
        let later = Timestamp::from_unix_ms(WINDOW_MS);
        assert_eq!(replay(Some(&r), "other", later), Replay::Create);
        let e = reused_error("pools.create", "r1");
        assert_eq!(e.code, ErrorCode::AlreadyExists);
        assert!(e.message.contains("different body"), "{}", e.message);
    }
}
