//! New object ids (SPEC §2: lower-case ULIDs after the kind's prefix), from the clock port
//! and the operating system's randomness.
//!
//! Invariant: ids made by one process increase strictly, also within one millisecond and
//! under a stopped test clock (the random part is incremented, as ULID's monotonic mode
//! does), so "order by id" is creation order for everything this API records.

use std::sync::Mutex;

use bc_domain::Timestamp;
use bc_domain::id::{Id, IdKind};

/// The 80 random bits of a ULID.
const RANDOM_BITS: u32 = 80;

/// Makes ids that increase within the process.
#[derive(Debug, Default)]
pub(crate) struct IdSource {
    /// The time and random part of the last id made.
    last: Mutex<(u64, u128)>,
}

impl IdSource {
    /// A new id of kind `K` at `now`.
    pub(crate) fn next<K: IdKind>(&self, now: Timestamp) -> Id<K> {
        let ms = u64::try_from(now.unix_ms()).unwrap_or(0);
        let mask = (1u128 << RANDOM_BITS) - 1;
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        let (ms, random) = if ms > last.0 || last.1 >= mask {
            // A later millisecond (or an exhausted one: move on to the next).
            (ms.max(last.0 + u64::from(last.1 >= mask)), rand::random::<u128>() & (mask >> 1))
        } else {
            // The same millisecond, or a clock that went back: keep increasing.
            (last.0, last.1 + 1)
        };
        *last = (ms, random);
        Id::generate(ms, random)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bc_domain::PoolId;

    #[test]
    fn ids_increase_within_a_millisecond_and_when_the_clock_goes_back() {
        let ids = IdSource::default();
        let t = Timestamp::from_unix_ms(1_764_000_000_000);
        let mut made: Vec<PoolId> = (0..100).map(|_| ids.next(t)).collect();
        made.push(ids.next(Timestamp::from_unix_ms(1_000)));
        made.push(ids.next(Timestamp::from_unix_ms(1_764_000_000_001)));
        assert!(made.windows(2).all(|w| w[0].as_str() < w[1].as_str()), "{made:?}");
    }
}
