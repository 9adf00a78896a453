//! The memory store's keys held with permits: several holders per key, each with its
//! weight, its own lease and its own fencing token, within the key's limit.
//!
//! A key's holders agree on its limit; a try with another limit is told the key's. The
//! engine keeps the waiters (first come, first served), so the store only counts.

use crate::fast_hash::KeyMap;
use crate::fast_words::FastWords;
use crate::permits::TryAcquire;
use crate::Millis;

/// One holder's permits on a key.
#[derive(Debug, Clone)]
pub(crate) struct Permit {
    pub(crate) owner: String,
    pub(crate) weight: u32,
    pub(crate) expires_at: Millis,
    pub(crate) token: u64,
}

/// A key held with permits: its limit and its holders, oldest grant first.
#[derive(Debug, Default)]
pub(crate) struct PermitKey {
    pub(crate) limit: u32,
    pub(crate) holders: Vec<Permit>,
}

impl PermitKey {
    /// Drops the holders whose lease ran out: their permits return.
    fn drop_lapsed(&mut self, now: Millis) {
        self.holders.retain(|p| p.expires_at > now);
    }

    fn used(&self) -> u64 {
        self.holders.iter().map(|p| u64::from(p.weight)).sum()
    }

    /// When the first of the live holders' leases runs out.
    pub(crate) fn first_expiry(&self, now: Millis) -> Option<Millis> {
        self.holders.iter().map(|p| p.expires_at).filter(|&at| at > now).min()
    }
}

/// The keys of one memory store held with permits. A key is counted in its bucket of the
/// busy words while it has an entry, so the host's fast path never grants it alone.
#[derive(Debug)]
pub(crate) struct PermitKeys {
    keys: KeyMap<String, PermitKey>,
    sweep_at: usize,
}

const MIN_SWEEP: usize = 64;

impl Default for PermitKeys {
    fn default() -> Self {
        PermitKeys { keys: KeyMap::default(), sweep_at: MIN_SWEEP }
    }
}

impl PermitKeys {
    pub(crate) fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The key's entry while it has live holders.
    pub(crate) fn live(&self, key: &str, now: Millis) -> Option<&PermitKey> {
        self.keys.get(key).filter(|k| k.first_expiry(now).is_some())
    }

    /// Takes `weight` of `key`'s `limit` permits for `owner` until `now + ttl`, when they
    /// fit beside the live holders' and the key's limit is `limit`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn try_acquire(
        &mut self,
        words: &FastWords,
        store: u32,
        key: &str,
        owner: &str,
        ttl: Millis,
        limit: u32,
        weight: u32,
        now: Millis,
    ) -> TryAcquire {
        if !self.keys.contains_key(key) {
            if self.keys.len() >= self.sweep_at {
                self.sweep(words, store, now);
            }
            words.mark(store, key);
            self.keys.insert(key.to_owned(), PermitKey { limit, holders: Vec::new() });
        }
        // Inserted above; a miss (impossible) answers "held" rather than carry a panic.
        let Some(k) = self.keys.get_mut(key) else { return TryAcquire::Held { until: now } };
        k.drop_lapsed(now);
        if k.holders.is_empty() {
            k.limit = limit;
        } else if k.limit != limit {
            return TryAcquire::Mismatch { limit: k.limit };
        }
        let fits = k.used() + u64::from(weight) <= u64::from(limit);
        if !fits || k.holders.iter().any(|p| p.owner == owner) {
            let until = k.first_expiry(now).unwrap_or(now);
            return TryAcquire::Held { until };
        }
        let token = words.next_token();
        k.holders.push(Permit { owner: owner.to_owned(), weight, expires_at: now.saturating_add(ttl), token });
        TryAcquire::Acquired(token)
    }

    /// Pushes `owner`'s live permits on `key` out to `now + ttl`; false when it holds none.
    pub(crate) fn renew(&mut self, key: &str, owner: &str, ttl: Millis, now: Millis) -> bool {
        let Some(k) = self.keys.get_mut(key) else { return false };
        match k.holders.iter_mut().find(|p| p.owner == owner && p.expires_at > now) {
            Some(p) => {
                p.expires_at = now.saturating_add(ttl);
                true
            }
            None => false,
        }
    }

    /// Gives `owner`'s permits on `key` back: true when they were live. A key left with
    /// no holder is forgotten.
    pub(crate) fn release(&mut self, words: &FastWords, store: u32, key: &str, owner: &str, now: Millis) -> bool {
        let Some(k) = self.keys.get_mut(key) else { return false };
        let Some(at) = k.holders.iter().position(|p| p.owner == owner) else { return false };
        if at >= k.holders.len() {
            return false;
        }
        let was_live = k.holders.remove(at).expires_at > now;
        k.drop_lapsed(now);
        if k.holders.is_empty() {
            self.keys.remove(key);
            words.unmark(store, key);
        }
        was_live
    }

    /// Calls `each` with every key that has a live holder.
    pub(crate) fn each_live_key<'a>(&'a self, now: Millis, each: &mut dyn FnMut(&'a str)) {
        for (key, k) in &self.keys {
            if k.first_expiry(now).is_some() {
                each(key);
            }
        }
    }

    pub(crate) fn entries(&self) -> usize {
        self.keys.len()
    }

    /// Forgets keys whose holders have all run out; memory stays within about twice the
    /// keys held.
    fn sweep(&mut self, words: &FastWords, store: u32, now: Millis) {
        self.keys.retain(|key, k| {
            let keep = k.first_expiry(now).is_some();
            if !keep {
                words.unmark(store, key);
            }
            keep
        });
        self.sweep_at = (self.keys.len() * 2).max(MIN_SWEEP);
    }

    /// Uncounts every key (the store is dropped).
    pub(crate) fn unmark_all(&self, words: &FastWords, store: u32) {
        for key in self.keys.keys() {
            words.unmark(store, key);
        }
    }
}
