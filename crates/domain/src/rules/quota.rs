//! Quota booking as pure arithmetic on a pool's quota row (SPEC §4, §11): the one rule
//! of setting a limit, booking a unit and releasing one. The store (its `quotas` module,
//! the only writer of `used`) locks the row, applies these and writes what they return,
//! so both store backends and the tests agree on it.
//!
//! Invariant: booking never takes `used` above `limit`, releasing never takes it below
//! zero, and setting a limit never changes `used`. No row grants none.

use crate::error::Error;
use crate::model::{Quota, QuotaResource};

/// Why a unit cannot be booked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum QuotaError {
    /// The pool has no quota row for the resource, which grants none.
    #[error(
        "the pool has no quota for this resource, and no quota grants none: ask an operator to set one (quotas.set)"
    )]
    Absent,
    /// Every unit of the limit is booked (or the limit was lowered below what is used).
    #[error(
        "the pool's {} quota is exhausted: {used} of {limit} used", resource.as_str()
    )]
    Exhausted {
        /// The resource.
        resource: QuotaResource,
        /// The limit.
        limit: u32,
        /// Units booked.
        used: u32,
    },
}

impl From<QuotaError> for Error {
    /// Both are `RESOURCE_EXHAUSTED` (SPEC §2: "quota exhausted or absent").
    fn from(e: QuotaError) -> Self {
        Error::exhausted(e.to_string())
    }
}

/// Books one unit: the row with `used + 1`, or why not. `None` (no row) grants none.
pub fn book(quota: Option<Quota>) -> Result<Quota, QuotaError> {
    let q = quota.ok_or(QuotaError::Absent)?;
    // `>=`, not `==`: a limit lowered below `used` refuses until enough are released.
    if q.used >= q.limit {
        return Err(QuotaError::Exhausted { resource: q.resource, limit: q.limit, used: q.used });
    }
    Ok(Quota { used: q.used + 1, ..q })
}

/// Releases one unit; never below zero (a release without a booking, e.g. a retried
/// delete, is harmless).
pub fn release(quota: Quota) -> Quota {
    Quota { used: quota.used.saturating_sub(1), ..quota }
}

/// The row after an operator sets `limit`: `used` is kept (a new row starts at 0), even
/// when the limit goes below it — nothing is evicted; booking just fails until enough
/// units are released. An existing row of another resource is a caller's mix-up and does
/// not lend its `used`.
pub fn set_limit(existing: Option<Quota>, resource: QuotaResource, limit: u32) -> Quota {
    let used = existing.filter(|q| q.resource == resource).map_or(0, |q| q.used);
    Quota { resource, limit, used }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;
    use proptest::prelude::*;

    const LB: QuotaResource = QuotaResource::LoadBalancers;

    fn q(limit: u32, used: u32) -> Quota {
        Quota { resource: LB, limit, used }
    }

    #[test]
    fn no_row_grants_none() {
        assert_eq!(book(None), Err(QuotaError::Absent));
        let e: Error = QuotaError::Absent.into();
        assert_eq!(e.code, ErrorCode::ResourceExhausted);
        assert!(e.message.contains("quotas.set"), "{}", e.message);
    }

    #[test]
    fn books_up_to_the_limit() {
        assert_eq!(book(Some(q(2, 0))), Ok(q(2, 1)));
        assert_eq!(book(Some(q(2, 1))), Ok(q(2, 2)));
        let err = book(Some(q(2, 2))).unwrap_err();
        assert_eq!(err, QuotaError::Exhausted { resource: LB, limit: 2, used: 2 });
        assert!(err.to_string().contains("loadBalancers quota is exhausted: 2 of 2"), "{err}");
        assert!(book(Some(q(0, 0))).is_err(), "a zero limit grants none");
    }

    #[test]
    fn release_never_goes_below_zero() {
        assert_eq!(release(q(3, 2)), q(3, 1));
        assert_eq!(release(q(3, 0)), q(3, 0));
    }

    #[test]
    fn set_limit_keeps_used() {
        assert_eq!(set_limit(None, LB, 5), q(5, 0));
        assert_eq!(set_limit(Some(q(5, 4)), LB, 2), q(2, 4));
        // Lowered below used: booking refused until used drops below the new limit.
        let lowered = set_limit(Some(q(5, 4)), LB, 2);
        assert!(book(Some(lowered)).is_err());
        let r = release(release(release(lowered)));
        assert_eq!(book(Some(r)), Ok(q(2, 2)));
    }

    #[derive(Debug, Clone)]
    enum Op {
        Book,
        Release,
        SetLimit(u32),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => Just(Op::Book),
            3 => Just(Op::Release),
            1 => (0u32..8).prop_map(Op::SetLimit),
        ]
    }

    proptest! {
        /// Against a reference model in signed arithmetic: `used` is always exactly the
        /// successful books minus the effective releases, never negative, and a book
        /// succeeds exactly when a row exists and `used < limit`, leaving `used <= limit`.
        #[test]
        fn sequences_keep_the_invariants(ops in proptest::collection::vec(op(), 0..80)) {
            let mut row: Option<Quota> = None;
            let mut model_used: i64 = 0;
            let mut model_limit: Option<i64> = None;
            for op in ops {
                match op {
                    Op::Book => {
                        let allowed = model_limit.is_some_and(|l| model_used < l);
                        match book(row) {
                            Ok(next) => {
                                prop_assert!(allowed);
                                prop_assert!(next.used <= next.limit);
                                model_used += 1;
                                row = Some(next);
                            }
                            Err(_) => prop_assert!(!allowed),
                        }
                    }
                    Op::Release => {
                        if let Some(r) = row {
                            row = Some(release(r));
                            model_used = (model_used - 1).max(0);
                        }
                    }
                    Op::SetLimit(l) => {
                        row = Some(set_limit(row, LB, l));
                        model_limit = Some(i64::from(l));
                    }
                }
                if let Some(r) = row {
                    prop_assert_eq!(i64::from(r.used), model_used);
                    prop_assert_eq!(Some(i64::from(r.limit)), model_limit);
                }
            }
        }
    }
}
