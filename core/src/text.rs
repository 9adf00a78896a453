//! Error messages built by concatenation: `text!(a, b, ...)` appends each piece (text or
//! an unsigned integer) to a new `String`. `format!` would instantiate `core::fmt`'s
//! argument machinery for every message in the wasm module a browser downloads.

/// A part of a message.
pub(crate) trait Piece {
    fn push_to(&self, out: &mut String);
}

impl Piece for str {
    fn push_to(&self, out: &mut String) {
        out.push_str(self);
    }
}

impl Piece for String {
    fn push_to(&self, out: &mut String) {
        out.push_str(self);
    }
}

impl<T: Piece + ?Sized> Piece for &T {
    fn push_to(&self, out: &mut String) {
        (**self).push_to(out);
    }
}

impl Piece for u64 {
    fn push_to(&self, out: &mut String) {
        if *self >= 10 {
            (*self / 10).push_to(out);
        }
        out.push(char::from(b'0' + (*self % 10) as u8));
    }
}

impl Piece for u32 {
    fn push_to(&self, out: &mut String) {
        u64::from(*self).push_to(out);
    }
}

impl Piece for usize {
    fn push_to(&self, out: &mut String) {
        (*self as u64).push_to(out);
    }
}

/// The pieces, in order, as one `String`.
macro_rules! text {
    ($($piece:expr),* $(,)?) => {{
        let mut out = String::new();
        $( $crate::text::Piece::push_to(&$piece, &mut out); )*
        out
    }};
}
pub(crate) use text;

#[cfg(test)]
mod tests {
    #[test]
    fn joins_text_and_numbers_as_format_would() {
        let owned = String::from("b");
        for n in [0u64, 7, 10, 1234567890, u64::MAX] {
            assert_eq!(text!("a ", owned, " ", n, "."), format!("a b {n}."));
        }
        assert_eq!(text!(u32::MAX, usize::MAX), format!("{}{}", u32::MAX, usize::MAX));
    }
}
