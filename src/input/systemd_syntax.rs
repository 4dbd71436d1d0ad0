//! systemd's own readers of numbers, sizes and shares, ported so that a value means here exactly
//! what it means to `systemd-run -p` and the manager: `safe_atou64` and `safe_atoi` (C's `strtoull`
//! and `strtol` with base 0 after systemd's `0b`/`0o` prefixes, so `010` is octal and `0x10` hex),
//! `parse_size` (base 10, components added up, fractions in a C `double`), and the share parsers
//! of `percent-util.c` (`%` to two places, `‰` to one, `‱` whole). Each is as in systemd 248 to
//! 262 alike; `permille_v247` is what systemd-run 247 read instead of `permyriad`. C's readers are
//! those of glibc before 2.38, and of systemd 261 and later on any glibc: a systemd-run of 254 to
//! 260 built on glibc 2.38 or later also reads a C23 `0b` prefix after a sign or another `0b`
//! (`+0b101`), which this, like every other systemd-run, refuses.

/// Why systemd refuses a text: C's `EINVAL` or `ERANGE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unread {
    /// Not a number of the kind asked (`EINVAL`).
    Invalid,
    /// A number, out of the range asked (`ERANGE`).
    OutOfRange,
}

/// systemd's `WHITESPACE`, which its readers skip before a number (C's `strtoull` skips
/// `isspace`, which adds `\v` and `\f`).
const WHITESPACE: &[u8] = b" \t\n\r";

fn skip_whitespace(s: &[u8]) -> &[u8] {
    let at = s.iter().position(|b| !WHITESPACE.contains(b));
    &s[at.unwrap_or(s.len())..]
}

/// What C's `strtoull` and `strtol` (glibc, the C locale) read at the start of a text.
struct CNumber {
    negative: bool,
    /// None: more than 64 bits (`ERANGE`).
    magnitude: Option<u64>,
    /// How many bytes were read.
    end: usize,
}

/// `strtoull(s, &end, base)`'s reading: leading `isspace`, a sign, a `0x` prefix (base 16, or 0
/// when a hex digit follows), a leading `0` meaning octal in base 0, then the digits. None where
/// no digit was read (C's `end == s`).
fn c_number(s: &[u8], mut base: u32) -> Option<CNumber> {
    let mut at = s
        .iter()
        .position(|b| !b" \t\n\x0b\x0c\r".contains(b))
        .unwrap_or(s.len());
    let negative = s.get(at) == Some(&b'-');
    if matches!(s.get(at), Some(b'+' | b'-')) {
        at += 1;
    }
    let hex_prefix = s.get(at) == Some(&b'0')
        && matches!(s.get(at + 1), Some(b'x' | b'X'))
        && s.get(at + 2).is_some_and(u8::is_ascii_hexdigit);
    if (base == 0 || base == 16) && hex_prefix {
        at += 2;
        base = 16;
    } else if base == 0 {
        base = if s.get(at) == Some(&b'0') { 8 } else { 10 };
    }
    let start = at;
    let mut magnitude = Some(0u64);
    while let Some(digit) = s.get(at).and_then(|b| char::from(*b).to_digit(base)) {
        magnitude = magnitude
            .and_then(|m| m.checked_mul(u64::from(base)))
            .and_then(|m| m.checked_add(u64::from(digit)));
        at += 1;
    }
    (at > start).then_some(CNumber {
        negative,
        magnitude,
        end: at,
    })
}

/// systemd's `mangle_base`: a `0b` or `0o` prefix chooses base 2 or 8 (else C's base 0).
fn mangle_base(s: &[u8]) -> (&[u8], u32) {
    match s {
        [b'0', b'b' | b'B', rest @ ..] => (rest, 2),
        [b'0', b'o' | b'O', rest @ ..] => (rest, 8),
        _ => (s, 0),
    }
}

/// systemd's `safe_atou64`: what `TasksMax=` and the weights read. A negative number is refused
/// but for `-0`, which is 0.
pub(crate) fn atou64(text: &str) -> Result<u64, Unread> {
    let (s, base) = mangle_base(skip_whitespace(text.as_bytes()));
    let number = c_number(s, base).ok_or(Unread::Invalid)?;
    let magnitude = number.magnitude.ok_or(Unread::OutOfRange)?;
    if number.end != s.len() {
        return Err(Unread::Invalid);
    }
    let value = if number.negative {
        magnitude.wrapping_neg()
    } else {
        magnitude
    };
    if value != 0 && s.first() == Some(&b'-') {
        return Err(Unread::OutOfRange);
    }
    Ok(value)
}

/// systemd's `safe_atoi`: the whole part of a share.
fn atoi(text: &[u8]) -> Result<i32, Unread> {
    let (s, base) = mangle_base(skip_whitespace(text));
    let number = c_number(s, base).ok_or(Unread::Invalid)?;
    // strtol's range is a long's: past it, ERANGE before the end is looked at.
    let magnitude = number
        .magnitude
        .filter(|m| *m <= (1 << 63) - u64::from(!number.negative))
        .ok_or(Unread::OutOfRange)?;
    if number.end != s.len() {
        return Err(Unread::Invalid);
    }
    let value = if number.negative {
        -i128::from(magnitude)
    } else {
        i128::from(magnitude)
    };
    i32::try_from(value).map_err(|_| Unread::OutOfRange)
}

/// systemd's `parse_size(text, 1024)`: a size with binary suffixes (`B K M G T P E`), components
/// added up largest first (`1G512M`), a fraction read in a C `double` and truncated to bytes.
pub(crate) fn size(text: &str) -> Result<u64, Unread> {
    const SUFFIXES: [(&[u8], u64); 8] = [
        (b"E", 1 << 60),
        (b"P", 1 << 50),
        (b"T", 1 << 40),
        (b"G", 1 << 30),
        (b"M", 1 << 20),
        (b"K", 1 << 10),
        (b"B", 1),
        (b"", 1),
    ];
    let t = text.as_bytes();
    let mut p = 0;
    let mut total: u64 = 0;
    let mut first_suffix = 0;
    loop {
        p = t.len() - skip_whitespace(&t[p..]).len();
        let number = c_number(&t[p..], 10).ok_or(Unread::Invalid)?;
        let magnitude = number.magnitude.ok_or(Unread::OutOfRange)?;
        if t[p] == b'-' {
            return Err(Unread::OutOfRange);
        }
        let whole = if number.negative {
            magnitude.wrapping_neg()
        } else {
            magnitude
        };
        let mut e = p + number.end;
        let mut fraction = 0.0f64;
        if t.get(e) == Some(&b'.') {
            e += 1;
            if t.get(e).is_some_and(u8::is_ascii_digit) {
                let digits = c_number(&t[e..], 10).ok_or(Unread::Invalid)?;
                fraction = digits.magnitude.ok_or(Unread::OutOfRange)? as f64;
                for _ in 0..digits.end {
                    fraction /= 10.0;
                }
                e += digits.end;
            }
        }
        e = t.len() - skip_whitespace(&t[e..]).len();
        let (at, (suffix, factor)) = SUFFIXES
            .iter()
            .enumerate()
            .skip(first_suffix)
            .find(|(_, (suffix, _))| t[e..].starts_with(suffix))
            .ok_or(Unread::Invalid)?;
        // As C computes it: the sum wraps for the largest number.
        if whole.wrapping_add(u64::from(fraction > 0.0)) > u64::MAX / factor {
            return Err(Unread::OutOfRange);
        }
        let part = whole
            .wrapping_mul(*factor)
            .wrapping_add((fraction * *factor as f64) as u64);
        total = total.checked_add(part).ok_or(Unread::OutOfRange)?;
        p = e + suffix.len();
        first_suffix = at + 1;
        if p >= t.len() {
            return Ok(total);
        }
    }
}

/// A share in parts of ten thousand, as systemd 248 and later read one (`parse_permyriad_unbounded`):
/// `N‱`, `N‰` or `N.D‰`, `N%`, `N.D%` or `N.DD%`, the whole part read by `safe_atoi`.
pub(crate) fn permyriad(text: &str) -> Result<u32, Unread> {
    let parts = if let Some(whole) = text.strip_suffix('‱') {
        atoi(whole.as_bytes()).map(|v| (v, 0, 1))
    } else if let Some(number) = text.strip_suffix('‰') {
        with_places(number.as_bytes(), 1).map(|(v, q)| (v, q, 10))
    } else {
        let number = text.strip_suffix('%').ok_or(Unread::Invalid)?;
        with_places(number.as_bytes(), 2).map(|(v, q)| (v, q, 100))
    };
    let (whole, places, factor) = parts?;
    share(whole, places, factor)
}

/// A share in parts of a thousand, as systemd-run 247 read one (`parse_permille_unbounded`):
/// `N‰`, `N%` or `N.D%`.
pub(crate) fn permille_v247(text: &str) -> Result<u32, Unread> {
    let (whole, places, factor) = if let Some(whole) = text.strip_suffix('‰') {
        (atoi(whole.as_bytes())?, 0, 1)
    } else {
        let number = text.strip_suffix('%').ok_or(Unread::Invalid)?;
        let (whole, places) = with_places(number.as_bytes(), 1)?;
        (whole, places, 10)
    };
    share(whole, places, factor)
}

/// `whole * factor + places`, refused where negative or past a C `int`, as systemd refuses it.
fn share(whole: i32, places: i32, factor: i32) -> Result<u32, Unread> {
    if whole < 0 || whole > (i32::MAX - places) / factor {
        return Err(Unread::OutOfRange);
    }
    u32::try_from(whole * factor + places).map_err(|_| Unread::OutOfRange)
}

/// A number with at most `most` places after its first dot (one place of two counts as tens), as
/// the whole part and the places in units of the last place.
fn with_places(number: &[u8], most: usize) -> Result<(i32, i32), Unread> {
    let Some(dot) = number.iter().position(|b| *b == b'.') else {
        return Ok((atoi(number)?, 0));
    };
    let decimals = &number[dot + 1..];
    if decimals.is_empty() || decimals.len() > most || !decimals.iter().all(u8::is_ascii_digit) {
        return Err(Unread::Invalid);
    }
    let mut places = 0;
    for at in 0..most {
        places = places * 10 + decimals.get(at).map_or(0, |d| i32::from(d - b'0'));
    }
    Ok((atoi(&number[..dot])?, places))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_read_as_safe_atou64_reads_them() {
        for (text, read) in [
            ("8", Ok(8)),
            ("010", Ok(8)),
            ("00064", Ok(52)),
            ("08", Err(Unread::Invalid)),
            ("0x10", Ok(16)),
            ("0X1f", Ok(31)),
            ("0b101", Ok(5)),
            ("0o17", Ok(15)),
            ("+5", Ok(5)),
            (" 5", Ok(5)),
            ("\t5", Ok(5)),
            ("5 ", Err(Unread::Invalid)),
            ("-0", Ok(0)),
            ("-5", Err(Unread::OutOfRange)),
            ("1_000", Err(Unread::Invalid)),
            ("+0o17", Err(Unread::Invalid)),
            ("", Err(Unread::Invalid)),
            ("0x", Err(Unread::Invalid)),
            ("18446744073709551615", Ok(u64::MAX)),
            ("18446744073709551616", Err(Unread::OutOfRange)),
            ("18446744073709551616x", Err(Unread::OutOfRange)),
        ] {
            assert_eq!(atou64(text), read, "{text:?}");
        }
    }

    #[test]
    fn sizes_read_as_parse_size_reads_them() {
        for (text, read) in [
            ("64M", Ok(64 << 20)),
            ("010M", Ok(10 << 20)),
            ("1.5G", Ok(3 << 29)),
            ("1G512M", Ok(1_610_612_736)),
            ("1G 512M", Ok(1_610_612_736)),
            ("1G1", Ok((1 << 30) + 1)),
            ("512M1G", Err(Unread::Invalid)),
            ("5 M", Ok(5 << 20)),
            ("5 ", Ok(5)),
            ("5M ", Err(Unread::Invalid)),
            ("5k", Err(Unread::Invalid)),
            ("0x10", Err(Unread::Invalid)),
            ("+5", Ok(5)),
            ("-0", Err(Unread::OutOfRange)),
            ("-5", Err(Unread::OutOfRange)),
            ("15E", Ok(17_293_822_569_102_704_640)),
            ("15.5E", Err(Unread::OutOfRange)),
            ("16E", Err(Unread::OutOfRange)),
            ("10.M", Ok(10 << 20)),
            (".5M", Err(Unread::Invalid)),
            ("0.5", Ok(0)),
            ("1.5B", Ok(1)),
            ("0.9999999999999999999", Ok(1)),
            ("1.1E", Ok(1_268_213_655_067_531_680)),
            ("0.54P", Ok(607_985_949_695_017)),
            ("1.999999999999999999G", Ok(2_147_483_648)),
            ("0.3M", Ok(314_572)),
            ("2.675K", Ok(2739)),
            ("1.10000000000000000000E", Ok(1_268_213_655_067_531_680)),
            ("0.99999999999999999999", Err(Unread::OutOfRange)),
            ("1.23456789012345678901K", Err(Unread::OutOfRange)),
            ("", Err(Unread::Invalid)),
        ] {
            assert_eq!(size(text), read, "{text:?}");
        }
    }

    #[test]
    fn shares_read_as_systemd_reads_them() {
        for (text, read) in [
            ("50%", Ok(5000)),
            ("12.34%", Ok(1234)),
            ("12.3%", Ok(1230)),
            ("12.345%", Err(Unread::Invalid)),
            ("12.%", Err(Unread::Invalid)),
            (".5%", Err(Unread::Invalid)),
            ("010%", Ok(800)),
            ("0x10%", Ok(1600)),
            (" 5%", Ok(500)),
            ("5 %", Err(Unread::Invalid)),
            ("-0%", Ok(0)),
            ("-0.5%", Ok(50)),
            ("-1%", Err(Unread::OutOfRange)),
            ("5‰", Ok(50)),
            ("5.5‰", Ok(55)),
            ("5.55‰", Err(Unread::Invalid)),
            ("25‱", Ok(25)),
            ("1.5‱", Err(Unread::Invalid)),
            ("21474836.47%", Ok(2_147_483_647)),
            ("21474836.48%", Err(Unread::OutOfRange)),
            ("21474837%", Err(Unread::OutOfRange)),
            ("50", Err(Unread::Invalid)),
        ] {
            assert_eq!(permyriad(text), read, "{text:?}");
        }
        for (text, read) in [
            ("50%", Ok(500)),
            ("12.3%", Ok(123)),
            ("12.34%", Err(Unread::Invalid)),
            ("5‰", Ok(5)),
            ("5.5‰", Err(Unread::Invalid)),
            ("25‱", Err(Unread::Invalid)),
            ("21474837%", Ok(214_748_370)),
        ] {
            assert_eq!(permille_v247(text), read, "{text:?}");
        }
    }
}
