//! Lease and wait durations: milliseconds, or strings such as `250ms`, `30s`, `5m`,
//! `1h` and `1m30s`.

use crate::error::ArgError;
use crate::text::text;
use crate::{Millis, MAX_FAKE_TIME};

/// The longest duration a lease or a wait may have: 2^31 − 1 ms (about 24.8 days), the
/// longest delay every JavaScript host can put on one timer.
pub const MAX_DURATION_MS: Millis = 2_147_483_647;

/// Converts a duration given in milliseconds. Fractions round up to the next whole
/// millisecond, so a positive duration never becomes zero.
///
/// `arg` names the option in the error, e.g. `ttl`.
///
/// # Errors
/// [`ArgError`] of kind range when `ms` is NaN, infinite, negative, or above
/// [`MAX_DURATION_MS`].
pub fn from_millis(ms: f64, arg: &str) -> Result<Millis, ArgError> {
    whole_millis(ms, arg, MAX_DURATION_MS, || too_long(ms, arg))
}

/// Converts a step of a fake clock (`FakeTimeProvider.advance`) given in milliseconds:
/// not a lease, so it may be as long as the clock's whole range, [`MAX_FAKE_TIME`].
/// Fractions round up, as for [`from_millis`].
///
/// # Errors
/// [`ArgError`] of kind range when `ms` is NaN, infinite, negative, or above
/// [`MAX_FAKE_TIME`].
pub fn clock_step(ms: f64, arg: &str) -> Result<Millis, ArgError> {
    whole_millis(ms, arg, MAX_FAKE_TIME, || {
        ArgError::range(arg, text!(arg, " must be at most ", MAX_FAKE_TIME, " ms, got ", show(ms)))
    })
}

/// `ms` rounded up to whole milliseconds, when it is a number from 0 to `max`.
fn whole_millis(ms: f64, arg: &str, max: Millis, too_long: impl FnOnce() -> ArgError) -> Result<Millis, ArgError> {
    if ms.is_nan() {
        return Err(ArgError::range(arg, text!(arg, " must be a number of milliseconds, got NaN")));
    }
    if ms < 0.0 {
        return Err(ArgError::range(arg, text!(arg, " must not be negative, got ", show(ms))));
    }
    if ms > max as f64 {
        return Err(too_long());
    }
    Ok(ms.ceil() as Millis)
}

fn too_long(ms: f64, arg: &str) -> ArgError {
    ArgError::range(arg, text!(arg, " must be at most ", MAX_DURATION_MS, " ms (about 24.8 days), got ", show(ms)))
}

/// Parses a duration string: one or more `<number><unit>` parts with units `ms`, `s`,
/// `m` and `h`, largest unit first (`1h30m`, `1m30s`, `1.5s`, `250ms`).
///
/// # Errors
/// [`ArgError`] of kind type when the text is not of that form, of kind range when it
/// is above [`MAX_DURATION_MS`].
pub fn parse(text: &str, arg: &str) -> Result<Millis, ArgError> {
    let unparsable = || {
        ArgError::type_error(
            arg,
            text!(
                arg,
                " must be milliseconds or a duration string like '250ms', '30s', '5m', '1h' or '1m30s', got ",
                quote(text)
            ),
        )
    };
    if text.is_empty() {
        return Err(unparsable());
    }
    let bytes = text.as_bytes();
    // Exact decimal arithmetic, in units of 10^-FRACTION_DIGITS ms: no float rounding (so
    // '0.07s' is 70 ms, not 71), and no float parser in the wasm build (its tables are a
    // quarter of the module).
    let mut total = 0u128;
    let mut cut = false;
    let mut i = 0;
    let mut last_unit_rank = u8::MAX;
    while i < bytes.len() {
        let start = i;
        while i < bytes.len() && (bytes[i].is_ascii_digit() || bytes[i] == b'.') {
            i += 1;
        }
        let (number, number_cut) = decimal(&text[start..i]).ok_or_else(unparsable)?;
        let (unit_ms, rank, len) = match &bytes[i..] {
            [b'm', b's', ..] => (1u128, 0, 2),
            [b's', ..] => (1_000, 1, 1),
            [b'm', ..] => (60_000, 2, 1),
            [b'h', ..] => (3_600_000, 3, 1),
            _ => return Err(unparsable()),
        };
        // Parts go from the largest unit to the smallest, each unit once: `1m30s`, not `30s1m`.
        if rank >= last_unit_rank {
            return Err(unparsable());
        }
        last_unit_rank = rank;
        i += len;
        total = total.saturating_add(number.saturating_mul(unit_ms));
        cut |= number_cut;
    }
    let scale = 10u128.pow(FRACTION_DIGITS);
    // Round up, as `from_millis` does: a positive duration never becomes zero.
    let millis = (total / scale).saturating_add(u128::from(cut || !total.is_multiple_of(scale)));
    if millis > u128::from(MAX_DURATION_MS) {
        return Err(too_long(total as f64 / scale as f64, arg));
    }
    Ok(millis as Millis)
}

/// Fraction digits a duration string's numbers keep exactly; later ones only round up.
const FRACTION_DIGITS: u32 = 18;

/// A run of digits and dots as an exact number of 10^-[`FRACTION_DIGITS`] units, and
/// whether non-zero digits were cut after that. `None` unless it is digits with at most
/// one dot and at least one digit (`5`, `1.5`, `.5`, `5.`).
fn decimal(text: &str) -> Option<(u128, bool)> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    if (whole.is_empty() && fraction.is_empty()) || fraction.contains('.') {
        return None;
    }
    let digit = |b: u8| u128::from(b - b'0');
    let mut value = whole.bytes().fold(0u128, |v, b| v.saturating_mul(10).saturating_add(digit(b)));
    let mut kept = 0;
    let mut cut = false;
    for b in fraction.bytes() {
        if kept < FRACTION_DIGITS {
            value = value.saturating_mul(10).saturating_add(digit(b));
            kept += 1;
        } else {
            cut |= b != b'0';
        }
    }
    Some((value.saturating_mul(10u128.pow(FRACTION_DIGITS - kept)), cut))
}

/// Shows a number the way JavaScript would, short for huge ones.
///
/// Integer arithmetic only: float formatting would add a fifth to the wasm module.
fn show(ms: f64) -> String {
    let abs = ms.abs();
    let sign = if ms < 0.0 && (abs * 1000.0).round() >= 1.0 { "-" } else { "" };
    if abs.is_infinite() {
        text!(sign, "Infinity")
    } else if abs >= 1e15 {
        text!(sign, "more than 10^15")
    } else {
        let thousandths = (abs * 1000.0).round() as u64;
        let (whole, fraction) = (thousandths / 1000, thousandths % 1000);
        if fraction == 0 {
            text!(sign, whole)
        } else {
            // Three digits with their leading zeros, less the trailing ones.
            let zeros = if fraction < 10 {
                "00"
            } else if fraction < 100 {
                "0"
            } else {
                ""
            };
            let mut digits = fraction;
            while digits % 10 == 0 {
                digits /= 10;
            }
            text!(sign, whole, ".", zeros, digits)
        }
    }
}

/// Quotes user text for an error message, cut short when it is long.
pub(crate) fn quote(text: &str) -> String {
    const LIMIT: usize = 40;
    match text.char_indices().nth(LIMIT) {
        Some((end, _)) => text!("'", &text[..end], "…' (", text.chars().count(), " characters)"),
        None => text!("'", text, "'"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clock_step_may_be_longer_than_a_lease_but_not_than_the_clock() {
        assert_eq!(clock_step(2f64.powi(31), "ms").unwrap(), 1 << 31);
        assert_eq!(clock_step(0.5, "ms").unwrap(), 1);
        assert_eq!(clock_step(MAX_FAKE_TIME as f64, "ms").unwrap(), MAX_FAKE_TIME);
        for bad in [f64::NAN, -1.0, f64::INFINITY, 2f64.powi(53)] {
            assert!(clock_step(bad, "ms").is_err(), "{bad}");
        }
        assert!(from_millis(2f64.powi(31), "ttl").is_err(), "a lease is still bounded by one timer");
    }

    #[test]
    fn parses_every_unit_and_combinations() {
        assert_eq!(parse("250ms", "ttl").unwrap(), 250);
        assert_eq!(parse("30s", "ttl").unwrap(), 30_000);
        assert_eq!(parse("5m", "ttl").unwrap(), 300_000);
        assert_eq!(parse("1h", "ttl").unwrap(), 3_600_000);
        assert_eq!(parse("1m30s", "ttl").unwrap(), 90_000);
        assert_eq!(parse("1h2m3s4ms", "ttl").unwrap(), 3_723_004);
        assert_eq!(parse("1.5s", "ttl").unwrap(), 1_500);
        assert_eq!(parse("0ms", "wait").unwrap(), 0);
    }

    #[test]
    fn decimal_strings_are_exact_and_round_up() {
        assert_eq!(parse("0.07s", "ttl").unwrap(), 70);
        assert_eq!(parse(".5s", "ttl").unwrap(), 500);
        assert_eq!(parse("5.s", "ttl").unwrap(), 5_000);
        assert_eq!(parse("0.0001ms", "ttl").unwrap(), 1);
        assert_eq!(parse("1.0000000000000000000001ms", "ttl").unwrap(), 2);
        assert_eq!(parse("2.5000000000000000000000ms", "ttl").unwrap(), 3);
        assert_eq!(parse("2147483647ms", "ttl").unwrap(), MAX_DURATION_MS);
        assert_eq!(parse("0002147483647ms", "ttl").unwrap(), MAX_DURATION_MS);
        for long in ["2147483647.0000000000000000001ms", "99999999999999999999999999999999999999999999h"] {
            let err = parse(long, "ttl").unwrap_err();
            assert_eq!(err.kind, crate::error::ArgErrorKind::Range, "{long}");
            assert!(err.message.contains("at most"), "{long}: {}", err.message);
        }
        for bad in [".s", "1.2.3s", "..5s"] {
            assert_eq!(parse(bad, "ttl").unwrap_err().kind, crate::error::ArgErrorKind::Type, "{bad}");
        }
    }

    #[test]
    fn rejects_malformed_strings_naming_the_argument() {
        for bad in ["", "30", "s", "30 s", " 30s", "30S", "1s1m", "1s1s", "abc", "-5s", "1..5s", "5d", "ms"] {
            let err = parse(bad, "wait").unwrap_err();
            assert_eq!(err.kind, crate::error::ArgErrorKind::Type, "{bad:?}");
            assert!(err.message.starts_with("wait must be"), "{bad:?}: {}", err.message);
        }
    }

    #[test]
    fn millis_round_up_and_are_bounded() {
        assert_eq!(from_millis(0.2, "ttl").unwrap(), 1);
        assert_eq!(from_millis(0.0, "wait").unwrap(), 0);
        assert_eq!(from_millis(MAX_DURATION_MS as f64, "ttl").unwrap(), MAX_DURATION_MS);
        for bad in [f64::NAN, -1.0, f64::INFINITY, f64::NEG_INFINITY, 1e300] {
            let err = from_millis(bad, "ttl").unwrap_err();
            assert_eq!(err.kind, crate::error::ArgErrorKind::Range);
            assert!(err.message.starts_with("ttl must"), "{}", err.message);
        }
        assert!(parse("25d", "ttl").is_err());
        assert!(parse("600h", "ttl").unwrap_err().message.contains("at most"));
    }

    #[test]
    fn numbers_in_messages_read_like_javascript() {
        assert_eq!(show(-5.0), "-5");
        assert_eq!(show(2.5), "2.5");
        assert_eq!(show(0.125), "0.125");
        assert_eq!(show(3.05), "3.05");
        assert_eq!(show(-0.007), "-0.007");
        assert_eq!(show(10.02), "10.02");
        assert_eq!(show(1e300), "more than 10^15");
        assert_eq!(show(f64::NEG_INFINITY), "-Infinity");
    }

    #[test]
    fn long_text_is_cut_in_messages() {
        let long = "x".repeat(10_000);
        let err = parse(&long, "ttl").unwrap_err();
        assert!(err.message.len() < 200);
        assert!(err.message.contains("10000 characters"));
    }
}
