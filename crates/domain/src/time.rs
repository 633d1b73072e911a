//! Timestamps: RFC 3339 UTC with millisecond precision on the wire (SPEC §2).
//!
//! Invariant: a `Timestamp` is always UTC and truncated to whole milliseconds, so what is
//! stored, compared and serialized is the same value.

use std::fmt;
use std::ops::{Add, Sub};

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use time::format_description::well_known::Rfc3339;
use time::{Duration, OffsetDateTime, UtcOffset};

/// A UTC instant with millisecond precision.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(OffsetDateTime);

/// Most characters of a time as input (RFC 3339 with a fraction and an offset needs 35).
pub const TIMESTAMP_MAX: usize = 64;

impl Timestamp {
    /// The Unix epoch.
    pub const EPOCH: Timestamp = Timestamp(OffsetDateTime::UNIX_EPOCH);

    /// From an `OffsetDateTime`, converted to UTC and truncated to milliseconds.
    pub fn from_datetime(t: OffsetDateTime) -> Self {
        let t = t.to_offset(UtcOffset::UTC);
        let ms = t.millisecond();
        Self(t.replace_nanosecond(u32::from(ms) * 1_000_000).expect("valid nanosecond"))
    }

    /// From milliseconds since the Unix epoch.
    pub fn from_unix_ms(ms: i64) -> Self {
        Self(OffsetDateTime::UNIX_EPOCH + Duration::milliseconds(ms))
    }

    /// Milliseconds since the Unix epoch.
    pub fn unix_ms(self) -> i64 {
        (self.0 - OffsetDateTime::UNIX_EPOCH).whole_milliseconds() as i64
    }

    /// The underlying `OffsetDateTime` (UTC).
    pub fn datetime(self) -> OffsetDateTime {
        self.0
    }

    /// Parses RFC 3339 (any offset, any precision), normalizing to UTC milliseconds.
    pub fn parse_rfc3339(s: &str) -> Result<Self, time::error::Parse> {
        OffsetDateTime::parse(s, &Rfc3339).map(Self::from_datetime)
    }

    /// `2026-12-02T12:57:15.123Z`.
    pub fn to_rfc3339(self) -> String {
        let t = self.0;
        format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
            t.year(),
            u8::from(t.month()),
            t.day(),
            t.hour(),
            t.minute(),
            t.second(),
            t.millisecond()
        )
    }
}

impl Add<Duration> for Timestamp {
    type Output = Timestamp;
    fn add(self, d: Duration) -> Timestamp {
        Timestamp::from_datetime(self.0 + d)
    }
}
impl Sub<Duration> for Timestamp {
    type Output = Timestamp;
    fn sub(self, d: Duration) -> Timestamp {
        Timestamp::from_datetime(self.0 - d)
    }
}
impl Sub for Timestamp {
    type Output = Duration;
    fn sub(self, other: Timestamp) -> Duration {
        self.0 - other.0
    }
}
impl fmt::Debug for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_rfc3339())
    }
}
impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_rfc3339())
    }
}
impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_rfc3339())
    }
}
impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Timestamp::parse_rfc3339(&s).map_err(|_| {
            serde::de::Error::custom("must be an RFC 3339 time, e.g. 2026-12-02T12:57:15.123Z")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_with_millis_in_utc() {
        let t = Timestamp::parse_rfc3339("2026-12-02T13:57:15.123456+01:00").unwrap();
        assert_eq!(t.to_rfc3339(), "2026-12-02T12:57:15.123Z");
        assert_eq!(Timestamp::from_unix_ms(t.unix_ms()), t);
        assert_eq!(serde_json::to_string(&t).unwrap(), "\"2026-12-02T12:57:15.123Z\"");
        assert!(serde_json::from_str::<Timestamp>("\"yesterday\"").is_err());
    }
}
