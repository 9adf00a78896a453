//! The in-process lease store: atomic by construction (one thread owns it), fencing
//! tokens from the engine's one counter, memory bounded by live leases.

use std::rc::Rc;

use crate::fast_hash::KeyMap;
use crate::fast_words::FastWords;
use crate::inspection::InspectedHolder;
use crate::memory_permits::PermitKeys;
use crate::permits::TryAcquire;
use crate::Millis;

/// A live or lapsed lease on one key.
#[derive(Debug, Clone)]
struct Lease {
    owner: String,
    expires_at: Millis,
    /// The fencing token the lease was granted with (for inspection).
    token: u64,
}

/// The live lease on a key, as [`MemoryStore::holder`] shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Holder<'a> {
    /// Who holds it.
    pub owner: &'a str,
    /// Its fencing token.
    pub token: u64,
    /// When it runs out, unless renewed.
    pub expires_at: Millis,
}

/// Leases of one process, kept in a map from key to lease.
///
/// Fencing tokens come from a single counter for the whole engine (the token word of
/// [`FastWords`], which the host's fast path advances too), so they increase per key
/// across release and expiry without the store remembering any key it no longer holds.
/// Every entry not released counts in its bucket of the busy words, from the grant to
/// its release or sweep: the host grants a key on its own only where none does.
///
/// Lapsed leases are swept when a new key comes in and either the map has doubled
/// since the last sweep or every lease known at the last sweep has run out, and when
/// releases have left half the map released: memory stays within about twice the
/// live leases (plus a small constant), however many keys were ever locked, also when
/// only keys seen before come back after a burst.
///
/// The store does not know about waiters: the engine keeps those, and wakes them when
/// [`MemoryStore::release`] reports that a lease ended.
#[derive(Debug)]
pub struct MemoryStore {
    leases: KeyMap<String, Lease>,
    /// This store's id among its engine's memory stores (its busy words are per id).
    id: u32,
    words: Rc<FastWords>,
    sweep_at: usize,
    /// The latest expiry granted since the last sweep: once it has passed, every lease
    /// that existed then has lapsed or been renewed, and a sweep is worth its cost.
    sweep_after: Millis,
    /// Releases since the last sweep: once they reach half the entries, a sweep is worth
    /// its cost (amortised, one entry looked at per release).
    released_since_sweep: usize,
    /// Keys held with permits (`memory_permits.rs`), apart from the plain leases: a key
    /// is never in both with a live holder.
    permits: PermitKeys,
}

const MIN_SWEEP: usize = 64;

impl Default for MemoryStore {
    /// A store of its own, with words no host reads.
    fn default() -> Self {
        MemoryStore::new(0, Rc::default())
    }
}

impl Drop for MemoryStore {
    fn drop(&mut self) {
        for (key, lease) in &self.leases {
            if lease.expires_at != RELEASED {
                self.words.unmark(self.id, key);
            }
        }
        self.permits.unmark_all(&self.words, self.id);
    }
}

/// The expiry of a released entry (a lease always ends after the instant it began).
const RELEASED: Millis = 0;

impl MemoryStore {
    /// Memory store `id` of an engine whose shared words are `words`.
    pub fn new(id: u32, words: Rc<FastWords>) -> Self {
        MemoryStore {
            leases: KeyMap::default(),
            id,
            words,
            sweep_at: MIN_SWEEP,
            sweep_after: 0,
            released_since_sweep: 0,
            permits: PermitKeys::default(),
        }
    }

    /// Takes the lease on `key` for `owner` until `now + ttl` if no live lease exists.
    pub fn try_acquire(&mut self, key: &str, owner: &str, ttl: Millis, now: Millis) -> TryAcquire {
        if !self.permits.is_empty() {
            if let Some(k) = self.permits.live(key, now) {
                return TryAcquire::Mismatch { limit: k.limit };
            }
        }
        let expires_at = now.saturating_add(ttl);
        if let Some(lease) = self.leases.get_mut(key) {
            if lease.expires_at > now {
                return TryAcquire::Held { until: lease.expires_at };
            }
            if lease.expires_at == RELEASED {
                self.words.mark(self.id, key);
            }
            lease.owner.clear();
            lease.owner.push_str(owner);
            lease.expires_at = expires_at;
        } else {
            self.insert(key, owner, expires_at, now);
        }
        self.sweep_after = self.sweep_after.max(expires_at);
        let token = self.words.next_token();
        if let Some(lease) = self.leases.get_mut(key) {
            lease.token = token;
        }
        TryAcquire::Acquired(token)
    }

    /// Takes `weight` of the `limit` permits of `key` for `owner` until `now + ttl`, when
    /// they fit beside the live holders' (see `memory_permits.rs`). A `limit` of 1 is a
    /// plain lease.
    #[allow(clippy::too_many_arguments)]
    pub fn try_acquire_permits(
        &mut self,
        key: &str,
        owner: &str,
        ttl: Millis,
        limit: u32,
        weight: u32,
        now: Millis,
    ) -> TryAcquire {
        if limit <= 1 {
            return self.try_acquire(key, owner, ttl, now);
        }
        if self.is_held_plain(key, now) {
            return TryAcquire::Mismatch { limit: 1 };
        }
        self.permits.try_acquire(&self.words, self.id, key, owner, ttl, limit, weight, now)
    }

    /// Records a lease the host granted on its fast path, with the token it took then,
    /// until `expires_at`. False (and nothing recorded) when the key has a live or lapsed
    /// lease not released: the host grants only keys the engine keeps no record of.
    pub fn adopt(&mut self, key: &str, owner: &str, token: u64, expires_at: Millis, now: Millis) -> bool {
        if let Some(lease) = self.leases.get_mut(key) {
            if lease.expires_at != RELEASED {
                return false;
            }
            self.words.mark(self.id, key);
            lease.owner.clear();
            lease.owner.push_str(owner);
            lease.expires_at = expires_at;
            lease.token = token;
        } else {
            self.insert(key, owner, expires_at, now);
            if let Some(lease) = self.leases.get_mut(key) {
                lease.token = token;
            }
        }
        self.sweep_after = self.sweep_after.max(expires_at);
        true
    }

    fn insert(&mut self, key: &str, owner: &str, expires_at: Millis, now: Millis) {
        let len = self.leases.len();
        if len >= self.sweep_at || (len >= MIN_SWEEP && now >= self.sweep_after) {
            self.sweep(now);
        }
        self.words.mark(self.id, key);
        self.leases.insert(key.to_owned(), Lease { owner: owner.to_owned(), expires_at, token: 0 });
    }

    /// Pushes `owner`'s live lease on `key` out to `now + ttl`. False when the lease
    /// lapsed or belongs to someone else.
    pub fn renew(&mut self, key: &str, owner: &str, ttl: Millis, now: Millis) -> bool {
        match self.leases.get_mut(key) {
            Some(lease) if lease.owner == owner && lease.expires_at > now => {
                lease.expires_at = now.saturating_add(ttl);
                true
            }
            _ => !self.permits.is_empty() && self.permits.renew(key, owner, ttl, now),
        }
    }

    /// Deletes `owner`'s lease on `key`. True when a live lease of that owner ended
    /// (false after a lapse or a takeover; someone else's lease is never touched).
    ///
    /// The entry stays, lapsed, so that the next lease on a hot key reuses its memory;
    /// sweeps remove lapsed entries like any other.
    pub fn release(&mut self, key: &str, owner: &str, now: Millis) -> bool {
        match self.leases.get_mut(key) {
            Some(lease) if lease.owner == owner => {
                let was_live = lease.expires_at > now;
                if lease.expires_at != RELEASED {
                    self.words.unmark(self.id, key);
                }
                lease.expires_at = RELEASED;
                self.released_since_sweep += 1;
                let len = self.leases.len();
                if len >= MIN_SWEEP && self.released_since_sweep * 2 >= len {
                    self.sweep(now);
                }
                was_live
            }
            _ => !self.permits.is_empty() && self.permits.release(&self.words, self.id, key, owner, now),
        }
    }

    /// When the live lease on `key` runs out (the first to, of a key held with permits),
    /// or `None` when the key is free.
    pub fn expires_at(&self, key: &str, now: Millis) -> Option<Millis> {
        let plain = self.leases.get(key).map(|lease| lease.expires_at).filter(|&at| at > now);
        if plain.is_some() || self.permits.is_empty() {
            return plain;
        }
        self.permits.live(key, now).and_then(|k| k.first_expiry(now))
    }

    /// The limit `key` is held with: 1 for a plain lease, the key's for permits, `None`
    /// when it is free.
    pub fn held_limit(&self, key: &str, now: Millis) -> Option<u32> {
        if self.is_held_plain(key, now) {
            return Some(1);
        }
        if self.permits.is_empty() {
            return None;
        }
        self.permits.live(key, now).map(|k| k.limit)
    }

    fn is_held_plain(&self, key: &str, now: Millis) -> bool {
        self.leases.get(key).is_some_and(|lease| lease.expires_at > now)
    }

    /// The key's limit and its live holders as `inspect` shows them, oldest grant first.
    /// Reads only.
    pub(crate) fn inspect_holders(&self, key: &str, now: Millis) -> (u32, Vec<InspectedHolder>) {
        let mut holders = Vec::new();
        if let Some(k) = self.permits.live(key, now) {
            for p in &k.holders {
                if p.expires_at > now {
                    let (owner, token, left, weight) = (p.owner.clone(), p.token, p.expires_at - now, p.weight);
                    holders.push(InspectedHolder { owner, token, left, weight });
                }
            }
            return (k.limit, holders);
        }
        if let Some(h) = self.holder(key, now) {
            holders.push(InspectedHolder {
                owner: h.owner.to_owned(),
                token: h.token,
                left: h.expires_at - now,
                weight: 1,
            });
        }
        (1, holders)
    }

    /// The live lease on `key`: its owner, token and expiry. Reads only.
    pub fn holder(&self, key: &str, now: Millis) -> Option<Holder<'_>> {
        let lease = self.leases.get(key).filter(|lease| lease.expires_at > now)?;
        Some(Holder { owner: &lease.owner, token: lease.token, expires_at: lease.expires_at })
    }

    /// Whether `key` has a live lease.
    pub fn is_held(&self, key: &str, now: Millis) -> bool {
        self.expires_at(key, now).is_some()
    }

    /// Calls `each` with every key that has a live lease, for
    /// [`Engine::memory_size`](crate::Engine::memory_size) and `list`. A callback, not an
    /// iterator: its one instance is less code in the wasm module than a chain per caller.
    pub(crate) fn each_live_key<'a>(&'a self, now: Millis, each: &mut dyn FnMut(&'a str)) {
        for (key, lease) in &self.leases {
            if lease.expires_at > now {
                each(key);
            }
        }
        self.permits.each_live_key(now, each);
    }

    /// Entries kept, live or lapsed (for memory tests).
    pub fn entries(&self) -> usize {
        self.leases.len() + self.permits.entries()
    }

    fn sweep(&mut self, now: Millis) {
        let (id, words) = (self.id, &self.words);
        self.leases.retain(|key, lease| {
            let keep = lease.expires_at > now;
            if !keep && lease.expires_at != RELEASED {
                words.unmark(id, key);
            }
            keep
        });
        self.sweep_after = self.leases.values().map(|lease| lease.expires_at).max().unwrap_or(now);
        self.leases.shrink_to(self.leases.len() * 2);
        self.sweep_at = (self.leases.len() * 2).max(MIN_SWEEP);
        self.released_since_sweep = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acquire_renew_release_follow_the_owner() {
        let mut store = MemoryStore::default();
        assert_eq!(store.try_acquire("k", "a", 100, 0), TryAcquire::Acquired(1));
        assert_eq!(store.try_acquire("k", "b", 100, 50), TryAcquire::Held { until: 100 });
        assert!(!store.renew("k", "b", 100, 50));
        assert!(store.renew("k", "a", 100, 50));
        assert_eq!(store.expires_at("k", 60), Some(150));
        assert!(!store.release("k", "b", 60));
        assert!(store.is_held("k", 60));
        assert!(store.release("k", "a", 60));
        assert!(!store.is_held("k", 60));
        assert_eq!(store.try_acquire("k", "b", 100, 60), TryAcquire::Acquired(2));
        assert_eq!(store.holder("k", 60), Some(Holder { owner: "b", token: 2, expires_at: 160 }));
        assert_eq!(store.holder("k", 160), None, "a lapsed lease has no holder");
        assert!(store.adopt("fast", "c", 9, 500, 60));
        assert_eq!(store.holder("fast", 60).map(|h| h.token), Some(9));
    }

    #[test]
    fn every_entry_not_released_counts_in_its_bucket_until_released_swept_or_dropped() {
        let words = Rc::new(FastWords::default());
        let mut store = MemoryStore::new(2, Rc::clone(&words));
        assert_eq!(store.try_acquire("k", "a", 100, 0), TryAcquire::Acquired(1));
        assert!(words.is_busy(2, "k") && !words.is_busy(3, "k"));
        assert!(store.release("k", "a", 10));
        assert!(!words.is_busy(2, "k"), "released");
        assert!(store.adopt("k", "fast", 1, 200, 20), "a released entry can take a fast hold");
        assert!(!store.adopt("k", "fast", 1, 200, 300), "a lapsed lease not released cannot");
        assert!(words.is_busy(2, "k"), "lapsed, not released: counted until swept");
        assert_eq!(words.last_token(), 1, "an adopted hold brings its own token");
        for i in 0..MIN_SWEEP {
            let _ = store.try_acquire(&format!("other-{i}"), "a", 1_000, 300);
        }
        drop(store);
        assert!(!words.is_busy(2, "k") && !words.is_busy(2, "other-0"), "a dropped store counts nothing");
    }

    #[test]
    fn lapsed_lease_can_be_taken_and_old_owner_cannot_touch_it() {
        let mut store = MemoryStore::default();
        assert_eq!(store.try_acquire("k", "a", 100, 0), TryAcquire::Acquired(1));
        assert!(!store.renew("k", "a", 100, 100), "a lease is over at its expiry instant");
        assert_eq!(store.try_acquire("k", "b", 100, 100), TryAcquire::Acquired(2));
        assert!(!store.release("k", "a", 150));
        assert!(store.is_held("k", 150));
        assert!(!store.renew("k", "a", 100, 150));
    }

    #[test]
    fn memory_stays_bounded_by_live_leases() {
        let mut store = MemoryStore::default();
        for i in 0..100_000u64 {
            // Never released: each lease lapses after 10 ms.
            let _ = store.try_acquire(&format!("key-{i}"), "a", 10, i);
            assert!(store.entries() <= 2 * 10 + MIN_SWEEP + 1, "{} entries at {i}", store.entries());
        }
        assert_eq!(store.try_acquire("fresh", "a", 10, 200_000), TryAcquire::Acquired(100_001));
    }

    #[test]
    fn released_entries_are_reused_for_a_hot_key_and_swept_for_cold_ones() {
        let mut store = MemoryStore::default();
        for round in 0..1_000 {
            assert!(matches!(store.try_acquire("hot", "a", 100, round), TryAcquire::Acquired(_)));
            assert!(store.release("hot", "a", round));
        }
        assert_eq!(store.entries(), 1, "one entry, reused");
        for i in 0..10_000u64 {
            let key = format!("cold-{i}");
            assert!(matches!(store.try_acquire(&key, "a", 100, 0), TryAcquire::Acquired(_)));
            assert!(store.release(&key, "a", 0));
            assert!(store.entries() <= MIN_SWEEP + 1, "{} entries after {i}", store.entries());
        }
    }

    #[test]
    fn a_burst_of_leases_is_reclaimed_once_they_have_lapsed() {
        let mut store = MemoryStore::default();
        for i in 0..10_000 {
            let _ = store.try_acquire(&format!("burst-{i}"), "a", 5, 0);
        }
        assert_eq!(store.entries(), 10_000);
        let _ = store.try_acquire("later", "a", 5, 10);
        assert_eq!(store.entries(), 1);
    }
}
