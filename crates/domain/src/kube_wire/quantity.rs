//! `resource.Quantity` as `k8s.io/apimachinery/pkg/api/resource` reads and writes it: the
//! parse of `ParseQuantity` (sign, digits, fraction, a decimal-SI, binary-SI or exponent
//! suffix; anything finer than a nano rounded up), the string `MarshalJSON` writes — the
//! input itself when the parser judged it canonical, else `CanonicalizeBytes`' form
//! (`"0.1"` → `"100m"`, `"1000m"` → `"1"`, `"1024Mi"` → `"1Gi"`) — and `RoundUp`, which
//! `SetDefaults_ResourceList` applies at milli scale.
//!
//! Invariant: a value is kept exactly (an `i128` mantissa and a power of ten); a value that
//! does not fit is reported as [`QuantityError::TooLarge`] and never rounded silently.

use std::fmt;

/// How a quantity is written (`resource.Format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `1e3`, `12e6`.
    DecimalExponent,
    /// `1Ki`, `5Gi`.
    BinarySi,
    /// `100m`, `1k`, `5G`.
    DecimalSi,
}

/// Why a string is not a quantity: the messages of `resource`'s errors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QuantityError {
    /// `ErrFormatWrong`.
    Format,
    /// `ErrNumeric`.
    Numeric,
    /// `ErrSuffix`.
    Suffix,
    /// Beyond what this implementation keeps exactly (38 digits).
    TooLarge,
}

impl fmt::Display for QuantityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            QuantityError::Format => {
                "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
            }
            QuantityError::Numeric => "unable to parse numeric part of quantity",
            QuantityError::Suffix => "unable to parse quantity's suffix",
            QuantityError::TooLarge => "quantity too large to be kept exactly",
        })
    }
}

impl std::error::Error for QuantityError {}

/// A parsed quantity: `mantissa × 10^exp`, its format, and the input string when the
/// parser keeps it for `MarshalJSON`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quantity {
    mantissa: i128,
    exp: i32,
    format: Format,
    /// `Quantity.s`: the string written as it was given.
    kept: Option<String>,
    /// The `int64Amount` scale of the fast path (`None`: the `inf.Dec` path).
    fast_scale: Option<i32>,
}

/// The lowest scale a quantity keeps (`resource.Nano`).
const NANO: i32 = -9;

const DEC_SUFFIXES: &[(&str, i32)] = &[
    ("n", -9),
    ("u", -6),
    ("m", -3),
    ("", 0),
    ("k", 3),
    ("M", 6),
    ("G", 9),
    ("T", 12),
    ("P", 15),
    ("E", 18),
];
const BIN_SUFFIXES: &[(&str, u32)] =
    &[("", 0), ("Ki", 10), ("Mi", 20), ("Gi", 30), ("Ti", 40), ("Pi", 50), ("Ei", 60)];

/// The pieces `parseQuantityString` cuts a string into.
struct Pieces<'a> {
    positive: bool,
    num: &'a str,
    denom: &'a str,
    suffix: &'a str,
}

fn is_digit(b: u8) -> bool {
    b.is_ascii_digit()
}

/// `parseQuantityString`: sign, numerator (leading zeros stripped, `"0"` when none are
/// left), fraction, suffix.
fn pieces(s: &str) -> Result<Pieces<'_>, QuantityError> {
    let b = s.as_bytes();
    let end = b.len();
    let mut pos = 0;
    let mut positive = true;
    match b.first() {
        Some(b'-') => {
            positive = false;
            pos += 1;
        }
        Some(b'+') => pos += 1,
        _ => {}
    }
    while pos < end && b[pos] == b'0' {
        pos += 1;
    }
    if pos >= end {
        return Ok(Pieces { positive, num: "0", denom: "", suffix: "" });
    }
    let start = pos;
    while pos < end && is_digit(b[pos]) {
        pos += 1;
    }
    let num = if pos == start { "0" } else { &s[start..pos] };
    let mut denom = "";
    if pos < end && b[pos] == b'.' {
        pos += 1;
        let d = pos;
        while pos < end && is_digit(b[pos]) {
            pos += 1;
        }
        denom = &s[d..pos];
    }
    let suffix_start = pos;
    while pos < end && b"eEinumkKMGTP".contains(&b[pos]) {
        pos += 1;
    }
    if pos < end && (b[pos] == b'-' || b[pos] == b'+') {
        pos += 1;
    }
    while pos < end && is_digit(b[pos]) {
        pos += 1;
    }
    if pos < end {
        return Err(QuantityError::Format);
    }
    Ok(Pieces { positive, num, denom, suffix: &s[suffix_start..] })
}

/// `quantitySuffixer.interpret`: base (10 or 2), exponent and format of a suffix.
fn interpret(suffix: &str) -> Result<(u32, i32, Format), QuantityError> {
    if let Some((_, e)) = DEC_SUFFIXES.iter().find(|(s, _)| *s == suffix) {
        return Ok((10, *e, Format::DecimalSi));
    }
    if let Some((_, e)) = BIN_SUFFIXES.iter().skip(1).find(|(s, _)| *s == suffix) {
        return Ok((2, *e as i32, Format::BinarySi));
    }
    let b = suffix.as_bytes();
    if b.len() > 1 && (b[0] == b'e' || b[0] == b'E') {
        let e: i64 = suffix[1..].parse().map_err(|_| QuantityError::Suffix)?;
        let e = i32::try_from(e).map_err(|_| QuantityError::TooLarge)?;
        return Ok((10, e, Format::DecimalExponent));
    }
    Err(QuantityError::Suffix)
}

fn pow10(n: u32) -> Option<i128> {
    10i128.checked_pow(n)
}

/// `mantissa × 10^exp` rounded away from zero to `scale` (a no-op when it is already as
/// coarse): `inf.RoundUp`.
fn round_up_to(mantissa: i128, exp: i32, scale: i32) -> Option<(i128, i32)> {
    if exp >= scale {
        return Some((mantissa, exp));
    }
    let d = pow10(u32::try_from(scale - exp).ok()?)?;
    let q = mantissa / d;
    let r = mantissa % d;
    let q = if r > 0 {
        q + 1
    } else if r < 0 {
        q - 1
    } else {
        q
    };
    Some((q, scale))
}

/// Removes the factors of `base` from `v` (`removeInt64Factors`).
fn remove_factors(mut v: i128, base: i128) -> (i128, i32) {
    let mut times = 0;
    while v.abs() >= base && v % base == 0 {
        v /= base;
        times += 1;
    }
    (v, times)
}

impl Quantity {
    /// `resource.ParseQuantity` (after `UnmarshalJSON` trimmed the spaces).
    pub fn parse(input: &str) -> Result<Self, QuantityError> {
        let s = input.trim();
        if s.is_empty() {
            return Err(QuantityError::Format);
        }
        if s == "0" {
            return Ok(Self {
                mantissa: 0,
                exp: 0,
                format: Format::DecimalSi,
                kept: Some(s.to_owned()),
                fast_scale: Some(0),
            });
        }
        let p = pieces(s)?;
        let (base, exponent, format) = interpret(p.suffix)?;
        let digits = format!("{}{}", p.num, p.denom);
        let denom_len = i32::try_from(p.denom.len()).map_err(|_| QuantityError::TooLarge)?;
        let sign = if p.positive { 1 } else { -1 };

        // The int64 fast path: the parser keeps the input string when it is canonical.
        let fast = match base {
            10 => {
                let precision = 18 - i64::try_from(digits.len()).unwrap_or(i64::MAX);
                let scale = exponent - denom_len;
                (precision >= 0 && scale >= NANO).then(|| {
                    let v: i64 = digits.parse().ok()?;
                    let keep =
                        scale % 3 == 0 && !digits.ends_with("000") && !digits.starts_with('0');
                    Some((i128::from(v) * sign, scale, keep))
                })
            }
            _ => {
                // Go: 15 - len(num) - int32(float32(exponent)*3/10) - 1.
                let precision = 15
                    - i64::try_from(p.num.len()).unwrap_or(i64::MAX)
                    - i64::from(exponent * 3 / 10)
                    - 1;
                (p.denom.is_empty() && precision >= 0).then(|| {
                    let v: i64 = digits.parse().ok()?;
                    let r = v.checked_mul(1i64 << exponent)?;
                    let keep = exponent % 10 == 0 && (v & 0x07) != 0;
                    Some((i128::from(r) * sign, 0, keep))
                })
            }
        }
        .flatten();
        if let Some((mantissa, scale, keep)) = fast {
            return Ok(Self {
                mantissa,
                exp: scale,
                format,
                kept: keep.then(|| s.to_owned()),
                fast_scale: Some(scale),
            });
        }

        // The `inf.Dec` path: exact, then rounded up to a nano, binary capped at 2^63-1.
        let unscaled: i128 = digits.parse().map_err(|_| QuantityError::TooLarge)?;
        let (mut mantissa, mut exp) = if base == 10 {
            (unscaled, exponent - denom_len)
        } else {
            let factor = 1i128.checked_shl(exponent as u32).ok_or(QuantityError::TooLarge)?;
            (unscaled.checked_mul(factor).ok_or(QuantityError::TooLarge)?, -denom_len)
        };
        if mantissa != 0 {
            (mantissa, exp) = round_up_to(mantissa, exp, NANO).ok_or(QuantityError::TooLarge)?;
        }
        let mut format = format;
        if format == Format::BinarySi {
            let max = i128::from(i64::MAX);
            if Self::cmp_int(mantissa, exp, max) == Some(std::cmp::Ordering::Greater) {
                (mantissa, exp) = (max, 0);
            }
            let below_one = Self::cmp_int(mantissa, exp, 1) == Some(std::cmp::Ordering::Less);
            if mantissa != 0 && below_one {
                format = Format::DecimalSi;
            }
        }
        Ok(Self { mantissa: mantissa * sign, exp, format, kept: None, fast_scale: None })
    }

    /// How `|mantissa × 10^exp|` compares with `n` (`None`: too large to tell here).
    fn cmp_int(mantissa: i128, exp: i32, n: i128) -> Option<std::cmp::Ordering> {
        let m = mantissa.abs();
        if exp >= 0 {
            let v = m.checked_mul(pow10(exp as u32)?);
            return Some(v.map_or(std::cmp::Ordering::Greater, |v| v.cmp(&n)));
        }
        let d = pow10(exp.unsigned_abs())?;
        let whole = m / d;
        Some(match whole.cmp(&n) {
            std::cmp::Ordering::Equal if m % d != 0 => std::cmp::Ordering::Greater,
            other => other,
        })
    }

    /// Whether it is zero.
    pub fn is_zero(&self) -> bool {
        self.mantissa == 0
    }

    /// `Quantity.RoundUp(scale)`: rounds away from zero to `10^scale`; a value already
    /// that coarse keeps its string.
    pub fn round_up(&mut self, scale: i32) -> Result<(), QuantityError> {
        if let Some(s) = self.fast_scale
            && s >= scale
        {
            return Ok(());
        }
        self.kept = None;
        (self.mantissa, self.exp) =
            round_up_to(self.mantissa, self.exp, scale).ok_or(QuantityError::TooLarge)?;
        Ok(())
    }

    /// The string `MarshalJSON` writes.
    pub fn to_wire(&self) -> String {
        if let Some(s) = &self.kept {
            return s.clone();
        }
        self.canonical()
    }

    /// `CanonicalizeBytes`: number and suffix.
    pub fn canonical(&self) -> String {
        if self.mantissa == 0 {
            return "0".into();
        }
        let mut format = self.format;
        if format == Format::BinarySi {
            let small =
                Self::cmp_int(self.mantissa, self.exp, 1024) == Some(std::cmp::Ordering::Less);
            match self.integer() {
                Some(n) if !small => {
                    let (n, times) = remove_factors(n, 1024);
                    if let Some((suffix, _)) = BIN_SUFFIXES.get(times as usize) {
                        return format!("{n}{suffix}");
                    }
                    format = Format::DecimalSi;
                }
                _ => format = Format::DecimalSi,
            }
        }
        let (mut m, times) = remove_factors(self.mantissa, 10);
        let mut e = self.exp + times;
        match e.rem_euclid(3) {
            1 => {
                m *= 10;
                e -= 1;
            }
            2 => {
                m *= 100;
                e -= 2;
            }
            _ => {}
        }
        match format {
            Format::DecimalExponent if e == 0 => m.to_string(),
            Format::DecimalExponent => format!("{m}e{e}"),
            _ => match DEC_SUFFIXES.iter().find(|(_, x)| *x == e) {
                Some((suffix, _)) => format!("{m}{suffix}"),
                // Beyond `E`: Go writes the number without a suffix (a value this large
                // is refused by validation anyway); the exponent form keeps it readable.
                None => format!("{m}e{e}"),
            },
        }
    }

    /// The value as a whole number, when it is one.
    fn integer(&self) -> Option<i128> {
        if self.exp >= 0 {
            return self.mantissa.checked_mul(pow10(self.exp as u32)?);
        }
        let d = pow10(self.exp.unsigned_abs())?;
        (self.mantissa % d == 0).then(|| self.mantissa / d)
    }
}

/// What `MarshalJSON` writes for a quantity given as `s` (see [`Quantity::to_wire`]).
pub fn wire(s: &str) -> Result<String, QuantityError> {
    Ok(Quantity::parse(s)?.to_wire())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_forms_as_go_writes_them() {
        for (given, written) in [
            ("0.1", "100m"),
            ("1000m", "1"),
            ("1024Mi", "1Gi"),
            ("1.5Gi", "1536Mi"),
            ("0.5Gi", "512Mi"),
            ("500Mi", "500Mi"),
            ("100m", "100m"),
            ("1000", "1k"),
            ("100", "100"),
            ("2048", "2048"),
            ("1500m", "1500m"),
            ("1.5", "1500m"),
            ("0.5", "500m"),
            ("1e3", "1e3"),
            ("1.5e3", "1500"),
            ("1E6", "1E6"),
            ("1.5E6", "1500e3"),
            ("10k", "10k"),
            ("1.5k", "1500"),
            ("0", "0"),
            ("0m", "0"),
            ("0Gi", "0"),
            ("1Ki", "1Ki"),
            ("1023Ki", "1023Ki"),
            ("8Mi", "8Mi"),
            ("512Ki", "512Ki"),
            ("0.0000000001", "1n"),
            ("-100m", "-100m"),
            ("-0.1", "-100m"),
            (" 2 ", "2"),
            // The parser keeps a string it judges canonical, quirks included.
            ("+1", "+1"),
            ("01", "01"),
            ("4", "4"),
            ("16Gi", "16Gi"),
            ("4096Mi", "4Gi"),
        ] {
            assert_eq!(wire(given).as_deref(), Ok(written), "{given}");
        }
    }

    #[test]
    fn bad_quantities_say_why() {
        assert_eq!(wire(""), Err(QuantityError::Format));
        assert_eq!(wire("1 Gi"), Err(QuantityError::Format));
        assert_eq!(wire("abc"), Err(QuantityError::Format));
        assert_eq!(wire("1Qi"), Err(QuantityError::Format));
        assert_eq!(wire("1e"), Err(QuantityError::Suffix));
        assert_eq!(wire("1iK"), Err(QuantityError::Suffix));
        assert!(QuantityError::Format.to_string().starts_with("quantities must match"));
    }

    #[test]
    fn round_up_to_milli_keeps_what_is_coarse_enough() {
        for (given, rounded) in
            [("100u", "1m"), ("1.0001", "1001m"), ("250m", "250m"), ("1Gi", "1Gi")]
        {
            let mut q = Quantity::parse(given).unwrap();
            q.round_up(-3).unwrap();
            assert_eq!(q.to_wire(), rounded, "{given}");
        }
    }
}
