//! Lease and wait durations: milliseconds, or strings such as `250ms`, `30s`, `5m`,
//! `1h` and `1m30s`.

use crate::error::ArgError;
use crate::Millis;

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
    if ms.is_nan() {
        return Err(ArgError::range(arg, format!("{arg} must be a number of milliseconds, got NaN")));
    }
    if ms < 0.0 {
        return Err(ArgError::range(arg, format!("{arg} must not be negative, got {}", show(ms))));
    }
    if ms > MAX_DURATION_MS as f64 {
        return Err(ArgError::range(
            arg,
            format!("{arg} must be at most {MAX_DURATION_MS} ms (about 24.8 days), got {}", show(ms)),
        ));
    }
    Ok(ms.ceil() as Millis)
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
            format!(
                "{arg} must be milliseconds or a duration string like '250ms', '30s', '5m', '1h' or '1m30s', got {}",
                quote(text)
            ),
        )
    };
    if text.is_empty() {
        return Err(unparsable());
    }
    let bytes = text.as_bytes();
    let mut total = 0f64;
    let mut i = 0;
    let mut last_unit_rank = u8::MAX;
    while i < bytes.len() {
        let start = i;
        while i < bytes.len() && (bytes[i].is_ascii_digit() || bytes[i] == b'.') {
            i += 1;
        }
        let number: f64 = text[start..i].parse().map_err(|_| unparsable())?;
        let (unit_ms, rank, len) = match &bytes[i..] {
            [b'm', b's', ..] => (1.0, 0, 2),
            [b's', ..] => (1_000.0, 1, 1),
            [b'm', ..] => (60_000.0, 2, 1),
            [b'h', ..] => (3_600_000.0, 3, 1),
            _ => return Err(unparsable()),
        };
        // Parts go from the largest unit to the smallest, each unit once: `1m30s`, not `30s1m`.
        if rank >= last_unit_rank {
            return Err(unparsable());
        }
        last_unit_rank = rank;
        i += len;
        total += number * unit_ms;
    }
    from_millis(total, arg)
}

/// Shows a number the way JavaScript would, short for huge ones.
fn show(ms: f64) -> String {
    if ms.is_infinite() {
        if ms > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        }
    } else if ms.abs() >= 1e15 {
        format!("{ms:e}")
    } else {
        format!("{ms}")
    }
}

/// Quotes user text for an error message, cut short when it is long.
pub(crate) fn quote(text: &str) -> String {
    const LIMIT: usize = 40;
    match text.char_indices().nth(LIMIT) {
        Some((end, _)) => format!("'{}…' ({} characters)", &text[..end], text.chars().count()),
        None => format!("'{text}'"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn long_text_is_cut_in_messages() {
        let long = "x".repeat(10_000);
        let err = parse(&long, "ttl").unwrap_err();
        assert!(err.message.len() < 200);
        assert!(err.message.contains("10000 characters"));
    }
}
