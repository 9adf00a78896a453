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
use std::hash::Hasher;

/// How many keys an engine can remember a token floor for at once: a table of this many
/// slots, in which a key's floor lasts until a key that hashes to the same slot takes it.
pub const TOKEN_FLOOR_SLOTS: usize = 1024;

/// One slot: the store, a 128-bit hash of the key keyed by the engine's random seed (so a
/// key's memory costs the same whatever its length, and no two keys can be made to
/// share a floor), and the largest token seen for it. An empty slot has a zero hash,
/// which no key has but with a chance of 2^-128.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Floor {
    store: u32,
    hash: [u64; 2],
    token: u64,
}

/// The largest token seen per recent key, in [`TOKEN_FLOOR_SLOTS`] slots (allocated on
/// the first grant of a JS store).
#[derive(Debug)]
pub(crate) struct TokenFloors {
    seeds: [u64; 2],
    /// A fixed length: the slot index is checked when compiled.
    slots: Option<Box<[Floor; TOKEN_FLOOR_SLOTS]>>,
}

impl TokenFloors {
    pub fn new(seeds: [u64; 2]) -> Self {
        TokenFloors { seeds, slots: None }
    }

    /// Takes `token` for `key` on `store` as its new floor when it is larger than the
    /// floor; otherwise keeps the floor and returns it: the store's tokens went back.
    ///
    /// With `sent_floor` (the floor when the acquire was sent: permits, whose holders'
    /// grants may be answered in any order), the token need only exceed that; the floor
    /// becomes the larger of the two.
    pub fn admit(&mut self, store: u32, key: &str, token: u64, sent_floor: Option<u64>) -> Result<(), u64> {
        let hash = self.hash(key);
        let slot = self.slot(store, &hash);
        let known = slot.store == store && slot.hash == hash;
        match sent_floor {
            Some(floor) if token <= floor => return Err(floor),
            Some(_) if known => {
                slot.token = slot.token.max(token);
                return Ok(());
            }
            None if known && token <= slot.token => return Err(slot.token),
            _ => {}
        }
        *slot = Floor { store, hash, token };
        Ok(())
    }

    /// The floor of `key` on `store`: the largest token seen for it (0: none known).
    pub fn floor(&mut self, store: u32, key: &str) -> u64 {
        let hash = self.hash(key);
        let slot = self.slot(store, &hash);
        if slot.store == store && slot.hash == hash {
            slot.token
        } else {
            0
        }
    }

    fn hash(&self, key: &str) -> [u64; 2] {
        self.seeds.map(|seed| {
            let mut h = DefaultHasher::new();
            h.write_u64(seed);
            h.write(key.as_bytes());
            h.finish()
        })
    }

    fn slot(&mut self, store: u32, hash: &[u64; 2]) -> &mut Floor {
        let slots = self.slots.get_or_insert_with(|| Box::new([Floor::default(); TOKEN_FLOOR_SLOTS]));
        &mut slots[(hash[0] ^ u64::from(store)) as usize % TOKEN_FLOOR_SLOTS]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_must_be_larger_than_the_last_one_seen_for_its_key_and_store() {
        let mut floors = TokenFloors::new([1, 2]);
        assert_eq!(floors.admit(7, "k", 5, None), Ok(()));
        assert_eq!(floors.admit(7, "k", 3, None), Err(5));
        assert_eq!(floors.admit(7, "k", 5, None), Err(5));
        assert_eq!(floors.admit(7, "k", 6, None), Ok(()));
        assert_eq!(floors.admit(7, "other", 1, None), Ok(()), "each key has its own floor");
        assert_eq!(floors.admit(8, "k", 1, None), Ok(()), "each store has its own floor");
        // Permits: answers in any order, each above the floor when its acquire was sent.
        let sent = floors.floor(7, "k");
        assert_eq!(floors.admit(7, "k", 9, Some(sent)), Ok(()));
        assert_eq!(floors.admit(7, "k", 8, Some(sent)), Ok(()), "granted before 9, answered after");
        assert_eq!(floors.floor(7, "k"), 9, "the floor is the larger");
        assert_eq!(floors.admit(7, "k", 6, Some(sent)), Err(sent));
    }

    #[test]
    fn floors_take_a_fixed_table_and_a_key_is_forgotten_when_another_takes_its_slot() {
        let mut floors = TokenFloors::new([1, 2]);
        assert!(floors.slots.is_none(), "nothing before the first grant");
        for i in 0..2 * TOKEN_FLOOR_SLOTS {
            floors.admit(1, &format!("key-{i}"), 100, None).unwrap();
        }
        assert!(floors.slots.is_some());
        let last = format!("key-{}", 2 * TOKEN_FLOOR_SLOTS - 1);
        assert_eq!(floors.admit(1, &last, 1, None), Err(100), "the last key is remembered");
        let forgotten =
            (0..TOKEN_FLOOR_SLOTS).filter(|i| floors.admit(1, &format!("key-{i}"), 1, None).is_ok()).count();
        assert!(forgotten > TOKEN_FLOOR_SLOTS / 2, "most of the first keys' slots were taken: {forgotten}");
    }
}
