//! What a store holds for one key, as `inspect` shows it: the holder and the waiters
//! in queue order. Reading it changes nothing: no lease is extended, taken or woken.

use crate::text::text;
use crate::Millis;

/// The lease on a key and who waits for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inspection {
    /// The live lease, if any (a key with waiters only is between two holders).
    pub holder: Option<InspectedHolder>,
    /// The waiters, first first.
    pub waiters: Vec<InspectedWaiter>,
}

/// A live lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InspectedHolder {
    /// Its owner id.
    pub owner: String,
    /// Its fencing token.
    pub token: u64,
    /// Milliseconds until it runs out, unless renewed.
    pub left: Millis,
}

/// A waiter for a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InspectedWaiter {
    /// The owner id it will hold the lease under.
    pub owner: String,
    /// Milliseconds since it began asking for the key.
    pub waited: Millis,
}

impl Inspection {
    /// The flat form both bindings return, read by `lib/host/memory-inspect.cjs` only:
    /// empty for nothing there; else the holder's owner (empty for none), token and
    /// time left, then each waiter's owner and time waited. Numbers are written in
    /// decimal (with `text!`: no `core::fmt` in the wasm module): tokens stay exact up to 2^53 in JavaScript.
    pub fn into_words(inspection: Option<Inspection>) -> Vec<String> {
        let Some(found) = inspection else { return Vec::new() };
        let mut words = Vec::with_capacity(3 + 2 * found.waiters.len());
        match found.holder {
            Some(h) => {
                words.push(h.owner);
                words.push(text!(h.token));
                words.push(text!(h.left));
            }
            None => words.resize(3, String::new()),
        }
        for w in found.waiters {
            words.push(w.owner);
            words.push(text!(w.waited));
        }
        words
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flat_form_is_holder_then_waiters() {
        assert!(Inspection::into_words(None).is_empty());
        let found = Inspection {
            holder: Some(InspectedHolder { owner: "a".into(), token: 7, left: 250 }),
            waiters: vec![InspectedWaiter { owner: "b".into(), waited: 12 }],
        };
        let waiting = Inspection { holder: None, waiters: found.waiters.clone() };
        assert_eq!(Inspection::into_words(Some(found)), ["a", "7", "250", "b", "12"]);
        assert_eq!(Inspection::into_words(Some(waiting)), ["", "", "", "b", "12"]);
    }
}
