//! What a store holds for one key, as `inspect` shows it: the holder and the waiters
//! in queue order. Reading it changes nothing: no lease is extended, taken or woken.

use crate::text::text;
use crate::Millis;

/// The leases on a key and who waits for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inspection {
    /// The key's limit: 1 for a plain lease (or none), more for a key held with permits.
    pub limit: u32,
    /// The live leases, oldest grant first (none: a key with waiters only is between
    /// two holders).
    pub holders: Vec<InspectedHolder>,
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
    /// How many of the key's permits it holds (1 for a plain lease).
    pub weight: u32,
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
    /// empty for nothing there; else the key's limit and how many holders follow, each
    /// holder's owner, token, time left and weight, then each waiter's owner and time
    /// waited. Numbers are written in decimal (with `text!`: no `core::fmt` in the wasm
    /// module): tokens stay exact up to 2^53 in JavaScript.
    pub fn into_words(inspection: Option<Inspection>) -> Vec<String> {
        let Some(found) = inspection else { return Vec::new() };
        let mut words = Vec::with_capacity(2 + 4 * found.holders.len() + 2 * found.waiters.len());
        words.push(text!(found.limit));
        words.push(text!(found.holders.len()));
        for h in found.holders {
            words.push(h.owner);
            words.push(text!(h.token));
            words.push(text!(h.left));
            words.push(text!(h.weight));
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
    fn the_flat_form_is_limit_holders_then_waiters() {
        assert!(Inspection::into_words(None).is_empty());
        let found = Inspection {
            limit: 3,
            holders: vec![
                InspectedHolder { owner: "a".into(), token: 7, left: 250, weight: 2 },
                InspectedHolder { owner: "c".into(), token: 8, left: 300, weight: 1 },
            ],
            waiters: vec![InspectedWaiter { owner: "b".into(), waited: 12 }],
        };
        let waiting = Inspection { limit: 1, holders: Vec::new(), waiters: found.waiters.clone() };
        assert_eq!(
            Inspection::into_words(Some(found)),
            ["3", "2", "a", "7", "250", "2", "c", "8", "300", "1", "b", "12"]
        );
        assert_eq!(Inspection::into_words(Some(waiting)), ["1", "0", "b", "12"]);
    }
}
