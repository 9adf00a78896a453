//! The words an engine shares with its host for the memory stores' fast path.
//!
//! A host may grant a free memory-store key without calling the engine (a futex's
//! uncontended case). It reads and writes these words, which it sees as a
//! `Float64Array` (napi: an external `ArrayBuffer` over this memory; wasm: a view of
//! linear memory, made again when a grown memory detaches it):
//!
//! - word [`TOKEN_WORD`]: the last fencing token any memory store of the engine
//!   granted. Both sides take the next token by adding one, so tokens rise strictly per
//!   key across the engine's grants and the host's.
//! - word [`HANDOFF_WORD`], the last: the token of the execution the last `finish`
//!   handed a key to, read by the host as it runs it.
//! - words `BUSY_FIRST..`: per bucket of (store, key) ([`bucket`]), how many keys in it
//!   the engine keeps a record of (a lease not released, lapsed or not, a queue of
//!   waiters, or an inner lock of an execution under way). The host grants a key on
//!   its own only when its bucket reads 0: then the engine knows nothing of the key,
//!   and nothing it does can touch it. A collision only sends an execution the slow
//!   way.
//!
//! Only the engine changes the bucket counts; only the host records a fast hold, and it
//! hands one to the engine ([`Engine::adopt`](crate::Engine::adopt)) before any call
//! that could touch the key. Both run on one thread, never at once: a word read or
//! written between two engine calls cannot be torn or reordered.

use std::cell::Cell;

/// The word holding the last memory-store token granted.
pub const TOKEN_WORD: usize = 0;
/// The first busy count.
pub const BUSY_FIRST: usize = 1;
/// How many buckets the busy counts cover (a power of two).
pub const BUCKETS: usize = 1024;
/// The word holding the innermost token of the execution a `finish` just handed the key
/// to (its status word names the execution): the host runs it without asking.
pub const HANDOFF_WORD: usize = BUSY_FIRST + BUCKETS;

/// The bucket of `key` on memory store `store`: FNV-1a over the store id and the key's
/// UTF-16 code units, as a JavaScript host computes it from a string without encoding it.
pub fn bucket(store: u32, key: &str) -> usize {
    let mut hash: u32 = 0x811c_9dc5 ^ store;
    for unit in key.encode_utf16() {
        hash = (hash ^ u32::from(unit)).wrapping_mul(0x0100_0193);
    }
    hash as usize & (BUCKETS - 1)
}

/// The shared words of one engine. Plain numbers (`f64`: exact up to 2^53, as the host
/// reads them); behind `Cell`, since the host writes the token word between calls.
#[derive(Debug)]
pub struct FastWords {
    /// A fixed length: every index (a constant, or a masked bucket) is checked when
    /// compiled, and no panic path is carried for it.
    words: Box<[Cell<f64>; WORDS]>,
}

/// How many words there are.
const WORDS: usize = HANDOFF_WORD + 1;

impl Default for FastWords {
    fn default() -> Self {
        FastWords { words: Box::new([const { Cell::new(0.0) }; WORDS]) }
    }
}

impl FastWords {
    /// The next fencing token of the engine's memory stores.
    pub fn next_token(&self) -> u64 {
        let word = &self.words[TOKEN_WORD];
        let token = word.get() + 1.0;
        word.set(token);
        token as u64
    }

    /// Records the token of the execution a `finish` hands the key to.
    pub(crate) fn set_handoff_token(&self, token: u64) {
        self.words[HANDOFF_WORD].set(token as f64);
    }

    /// The last token granted, by either side.
    pub fn last_token(&self) -> u64 {
        self.words[TOKEN_WORD].get() as u64
    }

    /// One more key of `key`'s bucket has an engine record.
    pub(crate) fn mark(&self, store: u32, key: &str) {
        self.add(store, key, 1.0);
    }

    /// One key of `key`'s bucket no longer has one.
    pub(crate) fn unmark(&self, store: u32, key: &str) {
        self.add(store, key, -1.0);
    }

    #[inline(never)]
    fn add(&self, store: u32, key: &str, by: f64) {
        let word = &self.words[BUSY_FIRST + bucket(store, key)];
        debug_assert!(word.get() + by >= 0.0, "a bucket count went below zero");
        word.set((word.get() + by).max(0.0));
    }

    /// Whether the engine may keep a record of `key` on `store` (its bucket is not 0).
    pub fn is_busy(&self, store: u32, key: &str) -> bool {
        self.words[BUSY_FIRST + bucket(store, key)].get() != 0.0
    }

    /// The words' address, for a binding that exposes them to its host. They stay at this
    /// address for as long as this value lives.
    pub fn as_ptr(&self) -> *mut f64 {
        Cell::as_ptr(&self.words[0])
    }

    /// How many words there are.
    pub fn len(&self) -> usize {
        self.words.len()
    }

    /// Never true: there is always the token word.
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_match_the_hosts_hash() {
        // The same values are asserted in js-tests/fast-path.test.mjs for lib/host/fast-path.cjs.
        assert_eq!(bucket(0, "a"), 0xe40c292c & (BUCKETS - 1));
        assert_eq!(bucket(0, "job-42"), bucket(0, "job-42"));
        assert_ne!(bucket(0, "k"), bucket(1, "k"));
        assert_eq!(bucket(3, "ключ-😀"), bucket(3, "ключ-😀"));
    }

    #[test]
    fn tokens_and_marks_count() {
        let words = FastWords::default();
        assert_eq!(words.next_token(), 1);
        assert_eq!(words.next_token(), 2);
        assert_eq!(words.last_token(), 2);
        assert!(!words.is_busy(0, "k"));
        words.mark(0, "k");
        words.mark(0, "k");
        words.unmark(0, "k");
        assert!(words.is_busy(0, "k"));
        words.unmark(0, "k");
        assert!(!words.is_busy(0, "k"));
    }
}
