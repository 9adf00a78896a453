//! Owner ids: random, so that two holders (in one process or across a fleet) never
//! share one.

/// Draws owner ids from a xoshiro256** generator seeded once with 256 bits of host
/// entropy (the OS, or `crypto.getRandomValues`).
///
/// Ids only have to be unique, not secret: a store shows them to anyone who can read
/// it. 128 bits from a generator seeded with 256 bits makes a collision between
/// processes as likely as one between two UUIDs.
#[derive(Debug, Clone)]
pub struct OwnerIds {
    state: [u64; 4],
    /// Written before the random part of every id (see [`OwnerIds::set_prefix`]).
    prefix: String,
}

/// The longest prefix an owner id takes: a prefix is meant to be read by people.
pub const MAX_OWNER_PREFIX: usize = 128;

impl OwnerIds {
    /// A generator seeded with `seed`. An all-zero seed (which would make xoshiro
    /// produce only zeros) is replaced by a fixed non-zero one.
    pub fn new(seed: [u8; 32]) -> Self {
        let mut state = [0u64; 4];
        for (word, bytes) in state.iter_mut().zip(seed.chunks_exact(8)) {
            let mut le = [0u8; 8];
            for (to, from) in le.iter_mut().zip(bytes) {
                *to = *from;
            }
            *word = u64::from_le_bytes(le);
        }
        if state == [0; 4] {
            state = [0x9E37_79B9_7F4A_7C15, 0xBF58_476D_1CE4_E5B9, 0x94D0_49BB_1331_11EB, 1];
        }
        OwnerIds { state, prefix: String::new() }
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        let [s0, s1, s2, s3] = &mut self.state;
        let result = s1.wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = *s1 << 17;
        *s2 ^= *s0;
        *s3 ^= *s1;
        *s1 ^= *s2;
        *s0 ^= *s3;
        *s2 ^= t;
        *s3 = s3.rotate_left(45);
        result
    }

    /// Makes every id drawn from now on start with `prefix` (the host passes what a
    /// person reading a store needs to find the process: its host and pid). Ids stay
    /// unique through their random part, whatever the prefix. The host keeps it short
    /// (at most [`MAX_OWNER_PREFIX`] bytes: lib/owner-prefix.cjs).
    pub fn set_prefix(&mut self, prefix: &str) {
        self.prefix.clear();
        self.prefix.push_str(prefix);
    }

    /// A fresh owner id: the prefix, then 32 lowercase hex digits.
    pub fn next_id(&mut self) -> String {
        let mut id = String::with_capacity(32);
        self.write_id(&mut id, "");
        id
    }

    /// Replaces the contents of `out` with a fresh owner id (as [`OwnerIds::next_id`]),
    /// reusing its memory.
    /// A lock's `name`, when not empty, comes after the prefix, followed by `:`.
    pub fn write_id(&mut self, out: &mut String, name: &str) {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let value = (u128::from(self.next_u64()) << 64) | u128::from(self.next_u64());
        out.clear();
        out.push_str(&self.prefix);
        if !name.is_empty() {
            out.push_str(name);
            out.push(':');
        }
        out.extend((0..32).map(|i| char::from(HEX[((value >> (124 - 4 * i)) & 0xf) as usize])));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn ids_are_distinct_hex_and_depend_on_the_seed() {
        let mut ids = OwnerIds::new([7; 32]);
        let drawn: HashSet<String> = (0..10_000).map(|_| ids.next_id()).collect();
        assert_eq!(drawn.len(), 10_000);
        assert!(drawn.iter().all(|id| id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit())));
        let other = OwnerIds::new([8; 32]).next_id();
        assert!(!drawn.contains(&other));
        assert_ne!(OwnerIds::new([0; 32]).next_id(), "0".repeat(32));
        let (mut a, mut b) = (OwnerIds::new([9; 32]), OwnerIds::new([9; 32]));
        let mut reused = "an old id, longer than thirty-two characters".to_owned();
        b.write_id(&mut reused, "");
        assert_eq!(a.next_id(), reused);
    }

    #[test]
    fn a_prefix_comes_first_and_is_bounded() {
        let mut ids = OwnerIds::new([3; 32]);
        ids.set_prefix("web-1:4242:");
        let id = ids.next_id();
        assert!(id.starts_with("web-1:4242:") && id.len() == 11 + 32, "{id}");
        let mut named = String::new();
        ids.write_id(&mut named, "nightly");
        assert!(named.starts_with("web-1:4242:nightly:") && named.len() == 11 + 8 + 32, "{named}");
        ids.set_prefix("");
        assert_eq!(ids.next_id().len(), 32);
    }
}
