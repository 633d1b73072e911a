//! Timestamps: RFC 3339 UTC with millisecond precision on the wire (SPEC §2).
//!
//! Invariant: a `Timestamp` is always UTC, truncated to whole milliseconds, and within
//! the years 0000–9999 (what RFC 3339 can write), so what is stored, compared and
//! serialized is the same value; nothing here panics on any input: a parse out of range is
//! an error, arithmetic and conversions past the range saturate at its ends.

use std::fmt;
use std::ops::{Add, Sub};

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use time::format_description::well_known::Rfc3339;
use time::macros::datetime;
use time::{Duration, OffsetDateTime, UtcOffset};

/// A UTC instant with millisecond precision.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(OffsetDateTime);

/// Most characters of a time as input (RFC 3339 with a fraction and an offset needs 35).
pub const TIMESTAMP_MAX: usize = 64;

/// Why a text is not a [`Timestamp`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeError {
    /// Not RFC 3339.
    Syntax,
    /// RFC 3339, but its UTC instant is outside the years 0000–9999.
    OutOfRange,
}

impl fmt::Display for TimeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TimeError::Syntax => "must be an RFC 3339 time, e.g. 2026-12-02T12:57:15.123Z",
            TimeError::OutOfRange => {
                "must be a time in UTC from 0000-01-01T00:00:00Z to 9999-12-31T23:59:59.999Z"
            }
        })
    }
}

impl std::error::Error for TimeError {}

impl Timestamp {
    /// The Unix epoch.
    pub const EPOCH: Timestamp = Timestamp(OffsetDateTime::UNIX_EPOCH);
    /// The earliest instant: the first of the year 0000, UTC.
    pub const MIN: Timestamp = Timestamp(datetime!(0000-01-01 0:00 UTC));
    /// The latest instant: the last millisecond of the year 9999, UTC.
    pub const MAX: Timestamp = Timestamp(datetime!(9999-12-31 23:59:59.999 UTC));

    /// From an `OffsetDateTime`, converted to UTC and truncated to milliseconds; an instant
    /// outside [`Timestamp::MIN`]..=[`Timestamp::MAX`] saturates at that end.
    pub fn from_datetime(t: OffsetDateTime) -> Self {
        Self::checked(t).unwrap_or_else(|_| if t < Self::MIN.0 { Self::MIN } else { Self::MAX })
    }

    /// From an `OffsetDateTime`, converted to UTC and truncated to milliseconds, or
    /// [`TimeError::OutOfRange`] outside [`Timestamp::MIN`]..=[`Timestamp::MAX`].
    pub fn checked(t: OffsetDateTime) -> Result<Self, TimeError> {
        // `to_offset` panics when the UTC year leaves ±9999: compare first (comparison is
        // across offsets), convert after.
        if t < Self::MIN.0 || t > Self::MAX.0 {
            return Err(TimeError::OutOfRange);
        }
        let t = t.checked_to_offset(UtcOffset::UTC).ok_or(TimeError::OutOfRange)?;
        let ms = u32::from(t.millisecond());
        let t = t.replace_nanosecond(ms * 1_000_000).map_err(|_| TimeError::OutOfRange)?;
        Ok(Self(t))
    }

    /// From milliseconds since the Unix epoch, saturating at [`Timestamp::MIN`] and
    /// [`Timestamp::MAX`] (a provider's header may say anything).
    pub fn from_unix_ms(ms: i64) -> Self {
        let (min, max) = (Self::MIN.unix_ms(), Self::MAX.unix_ms());
        Self(OffsetDateTime::UNIX_EPOCH + Duration::milliseconds(ms.clamp(min, max)))
    }

    /// Milliseconds since the Unix epoch.
    pub fn unix_ms(self) -> i64 {
        (self.0 - OffsetDateTime::UNIX_EPOCH).whole_milliseconds() as i64
    }

    /// The underlying `OffsetDateTime` (UTC).
    pub fn datetime(self) -> OffsetDateTime {
        self.0
    }

    /// Parses RFC 3339 (any offset, any precision), normalizing to UTC milliseconds; a
    /// time whose UTC instant leaves the years 0000–9999 is [`TimeError::OutOfRange`].
    pub fn parse_rfc3339(s: &str) -> Result<Self, TimeError> {
        let t = OffsetDateTime::parse(s, &Rfc3339).map_err(|_| TimeError::Syntax)?;
        Self::checked(t)
    }

    /// `2026-12-02T12:57:15.123Z`.
    pub fn to_rfc3339(self) -> String {
        let mut buf = [0u8; RFC3339_LEN];
        self.write_rfc3339(&mut buf).to_owned()
    }

    /// Writes [`Timestamp::to_rfc3339`]'s text into `buf` and returns it, without the
    /// `fmt` machinery or an allocation: every view of a list carries two timestamps,
    /// and formatting them was a third of serializing a page of 100 pools (callgrind,
    /// docs/benchmarks.md "The pools.list page"). The invariant (years 0000–9999) makes
    /// the text fixed-width.
    fn write_rfc3339(self, buf: &mut [u8; RFC3339_LEN]) -> &str {
        fn digits(out: &mut [u8], mut n: u32) {
            for b in out.iter_mut().rev() {
                *b = b'0' + (n % 10) as u8;
                n /= 10;
            }
        }
        let t = self.0;
        // The invariant keeps the year in 0..=9999; clamp rather than trust it blindly, so
        // a broken invariant shows as a wrong year, never as a panic.
        digits(&mut buf[0..4], t.year().clamp(0, 9999) as u32);
        buf[4] = b'-';
        digits(&mut buf[5..7], u32::from(u8::from(t.month())));
        buf[7] = b'-';
        digits(&mut buf[8..10], u32::from(t.day()));
        buf[10] = b'T';
        digits(&mut buf[11..13], u32::from(t.hour()));
        buf[13] = b':';
        digits(&mut buf[14..16], u32::from(t.minute()));
        buf[16] = b':';
        digits(&mut buf[17..19], u32::from(t.second()));
        buf[19] = b'.';
        digits(&mut buf[20..23], u32::from(t.millisecond()));
        buf[23] = b'Z';
        // Only ASCII digits and separators were written.
        std::str::from_utf8(buf).unwrap_or_default()
    }
}

/// Characters of [`Timestamp::to_rfc3339`]'s text: `YYYY-MM-DDTHH:MM:SS.mmmZ`.
const RFC3339_LEN: usize = 24;

impl Add<Duration> for Timestamp {
    type Output = Timestamp;
    fn add(self, d: Duration) -> Timestamp {
        match self.0.checked_add(d) {
            Some(t) => Timestamp::from_datetime(t),
            None if d.is_negative() => Timestamp::MIN,
            None => Timestamp::MAX,
        }
    }
}
impl Sub<Duration> for Timestamp {
    type Output = Timestamp;
    fn sub(self, d: Duration) -> Timestamp {
        match self.0.checked_sub(d) {
            Some(t) => Timestamp::from_datetime(t),
            None if d.is_negative() => Timestamp::MAX,
            None => Timestamp::MIN,
        }
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
        let mut buf = [0u8; RFC3339_LEN];
        s.serialize_str(self.write_rfc3339(&mut buf))
    }
}
impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Timestamp::parse_rfc3339(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_written_text_is_what_fmt_writes_across_the_range() {
        let by_fmt = |t: Timestamp| {
            let d = t.datetime();
            format!(
                "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
                d.year(),
                u8::from(d.month()),
                d.day(),
                d.hour(),
                d.minute(),
                d.second(),
                d.millisecond()
            )
        };
        let (min, max) = (Timestamp::MIN.unix_ms(), Timestamp::MAX.unix_ms());
        let step = (max - min) / 997;
        let mut cases = vec![Timestamp::MIN, Timestamp::MAX, Timestamp::from_unix_ms(0)];
        cases.extend((0..997).map(|i| Timestamp::from_unix_ms(min + i * step + i % 1000)));
        for t in cases {
            assert_eq!(t.to_rfc3339(), by_fmt(t));
            assert_eq!(serde_json::to_string(&t).unwrap(), format!("\"{}\"", by_fmt(t)));
        }
        assert_eq!(Timestamp::MIN.to_rfc3339(), "0000-01-01T00:00:00.000Z");
        assert_eq!(Timestamp::MAX.to_rfc3339(), "9999-12-31T23:59:59.999Z");
    }

    #[test]
    fn formats_with_millis_in_utc() {
        let t = Timestamp::parse_rfc3339("2026-12-02T13:57:15.123456+01:00").unwrap();
        assert_eq!(t.to_rfc3339(), "2026-12-02T12:57:15.123Z");
        assert_eq!(Timestamp::from_unix_ms(t.unix_ms()), t);
        assert_eq!(serde_json::to_string(&t).unwrap(), "\"2026-12-02T12:57:15.123Z\"");
        assert!(serde_json::from_str::<Timestamp>("\"yesterday\"").is_err());
    }

    #[test]
    fn times_past_the_years_0000_to_9999_are_errors_and_arithmetic_saturates() {
        for out in ["9999-12-31T23:59:59-01:00", "0000-01-01T00:00:00+01:00"] {
            assert_eq!(Timestamp::parse_rfc3339(out), Err(TimeError::OutOfRange), "{out}");
            let e = serde_json::from_str::<Timestamp>(&format!("\"{out}\"")).unwrap_err();
            assert!(e.to_string().contains("9999-12-31"), "{e}");
        }
        let max = Timestamp::parse_rfc3339("9999-12-31T23:59:59.999Z").unwrap();
        assert_eq!(max, Timestamp::MAX);
        assert_eq!(Timestamp::parse_rfc3339("0000-01-01T01:00:00+01:00"), Ok(Timestamp::MIN));
        assert_eq!(Timestamp::from_unix_ms(i64::MAX), Timestamp::MAX);
        assert_eq!(Timestamp::from_unix_ms(i64::MIN), Timestamp::MIN);
        assert_eq!(max + Duration::days(2), Timestamp::MAX);
        assert_eq!(Timestamp::MIN - Duration::days(2), Timestamp::MIN);
        assert_eq!(Timestamp::EPOCH + Duration::MAX, Timestamp::MAX);
        assert_eq!(Timestamp::EPOCH - Duration::MAX, Timestamp::MIN);
        assert_eq!(Timestamp::MAX.to_rfc3339(), "9999-12-31T23:59:59.999Z");
    }
}
