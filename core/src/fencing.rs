//! Token floors: the largest fencing token this engine has seen granted per key of a
//! JavaScript store, so that a store whose tokens go back is caught before its lease is
//! used.
//!
//! A store's tokens must only increase per key. The engine can check that only against
//! what it saw itself: the tokens of the keys it recently locked on that store, in this
//! process. Tokens another process was given, or a key's tokens from before the engine
//! forgot it, are out of its sight. Memory stores are not checked: their tokens are the
//! engine's own.

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, VecDeque};
use std::hash::Hasher;

/// How many keys an engine remembers a token floor for; beyond that the floor of the key
/// seen longest ago is forgotten.
pub const MAX_TOKEN_FLOORS: usize = 4096;

/// A key as the floors remember it: the store, and a 128-bit hash of the key, keyed by
/// the engine's random seed (so that a key's memory costs the same whatever its length,
/// and no two keys can be made to share a floor).
type FloorKey = (u32, u64, u64);

/// The largest token seen per key, for at most [`MAX_TOKEN_FLOORS`] keys, forgotten
/// oldest first.
#[derive(Debug)]
pub(crate) struct TokenFloors {
    seeds: [u64; 2],
    floors: HashMap<FloorKey, u64>,
    order: VecDeque<FloorKey>,
}

impl TokenFloors {
    pub fn new(seeds: [u64; 2]) -> Self {
        TokenFloors { seeds, floors: HashMap::new(), order: VecDeque::new() }
    }

    fn floor_key(&self, store: u32, key: &str) -> FloorKey {
        let hash = |seed: u64| {
            let mut h = DefaultHasher::new();
            h.write_u64(seed);
            h.write(key.as_bytes());
            h.finish()
        };
        (store, hash(self.seeds[0]), hash(self.seeds[1]))
    }

    /// Takes `token` for `key` on `store` as its new floor when it is larger than the
    /// floor; otherwise keeps the floor and returns it: the store's tokens went back.
    pub fn admit(&mut self, store: u32, key: &str, token: u64) -> Result<(), u64> {
        let at = self.floor_key(store, key);
        if let Some(floor) = self.floors.get_mut(&at) {
            if token <= *floor {
                return Err(*floor);
            }
            *floor = token;
            return Ok(());
        }
        if self.order.len() >= MAX_TOKEN_FLOORS {
            if let Some(oldest) = self.order.pop_front() {
                self.floors.remove(&oldest);
            }
        }
        self.floors.insert(at, token);
        self.order.push_back(at);
        Ok(())
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.floors.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_must_be_larger_than_the_last_one_seen_for_its_key_and_store() {
        let mut floors = TokenFloors::new([1, 2]);
        assert_eq!(floors.admit(7, "k", 5), Ok(()));
        assert_eq!(floors.admit(7, "k", 3), Err(5));
        assert_eq!(floors.admit(7, "k", 5), Err(5));
        assert_eq!(floors.admit(7, "k", 6), Ok(()));
        assert_eq!(floors.admit(7, "other", 1), Ok(()), "each key has its own floor");
        assert_eq!(floors.admit(8, "k", 1), Ok(()), "each store has its own floor");
    }

    #[test]
    fn floors_are_bounded_and_the_oldest_key_is_forgotten_first() {
        let mut floors = TokenFloors::new([1, 2]);
        for i in 0..MAX_TOKEN_FLOORS + 10 {
            floors.admit(1, &format!("key-{i}"), 100).unwrap();
        }
        assert_eq!(floors.len(), MAX_TOKEN_FLOORS);
        assert_eq!(floors.admit(1, "key-0", 1), Ok(()), "forgotten");
        assert_eq!(floors.admit(1, &format!("key-{}", MAX_TOKEN_FLOORS + 9), 1), Err(100), "remembered");
    }
}
