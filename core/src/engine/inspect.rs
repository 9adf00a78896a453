//! Inspecting a memory store: who holds a key, who waits for it, which keys are held.
//! Reads only: nothing here extends, takes or wakes a lease, nor moves a timer.

use super::state::LayerState;
use super::Engine;
use crate::error::{ArgError, LockError};
use crate::inspection::{InspectedWaiter, Inspection};
use crate::memory_store::MemoryStore;
use crate::text::text;
use crate::types::StoreRef;

impl Engine {
    fn memory_store_ref(&self, store: u32) -> Result<&MemoryStore, LockError> {
        self.memory.get(store as usize).ok_or_else(|| {
            ArgError::type_error("store", text!("store must be a live memory store, got id ", store)).into()
        })
    }

    /// The holder of `key` on memory store `store` and its waiters in queue order;
    /// `None` when nobody holds or waits for it.
    ///
    /// # Errors
    /// An argument error for an unknown store.
    pub fn memory_inspect(&mut self, store: u32, key: &str) -> Result<Option<Inspection>, LockError> {
        self.tick();
        let now = self.time;
        let memory = self.memory_store_ref(store)?;
        let (limit, holders) = memory.inspect_holders(key, now);
        let reference = StoreRef::Memory(store);
        // Plain loops, not iterator chains: each chain's code lands in the wasm module.
        let mut waiters = Vec::new();
        if !self.queues.is_empty() {
            for exec in self.queues.waiting(reference, key) {
                let Some(e) = self.execs.get(&exec) else { continue };
                for l in &e.layers {
                    if l.spec.store == reference && l.spec.key == key && matches!(l.state, LayerState::Acquiring(_)) {
                        waiters
                            .push(InspectedWaiter { owner: l.owner.clone(), waited: now.saturating_sub(l.started_at) });
                        break;
                    }
                }
            }
        }
        if holders.is_empty() && waiters.is_empty() {
            return Ok(None);
        }
        Ok(Some(Inspection { limit, holders, waiters }))
    }

    /// Up to `limit` keys with a live lease on memory store `store` that start with
    /// `prefix` and sort after `after`, in order: a page of `list`, whose next page
    /// starts after this one's last key. Each page costs a pass over the store's
    /// entries, and keeps no more than `limit` keys.
    ///
    /// # Errors
    /// An argument error for an unknown store.
    pub fn memory_list(
        &mut self,
        store: u32,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<String>, LockError> {
        self.tick();
        let now = self.time;
        // The `limit` smallest keys seen, in order (a sorted insert: less code in the wasm
        // module than a heap or a sort).
        let mut page: Vec<&str> = Vec::new();
        self.memory_store_ref(store)?.each_live_key(now, &mut |key| {
            if !key.starts_with(prefix) || after.is_some_and(|a| key <= a) {
                return;
            }
            let at = page.partition_point(|k| *k < key);
            if at < limit && at <= page.len() {
                page.insert(at, key);
                page.truncate(limit);
            }
        });
        let mut keys = Vec::with_capacity(page.len());
        for key in page {
            keys.push(key.to_owned());
        }
        Ok(keys)
    }
}

#[cfg(test)]
mod tests {
    use crate::types::{ExecOptions, LockSpec, StoreRef};
    use crate::Engine;

    fn lock(key: &str) -> LockSpec {
        LockSpec {
            store: StoreRef::Memory(0),
            key: key.into(),
            ttl: 3_000,
            wait: None,
            linger: 0,
            name: String::new(),
            limit: 1,
            weight: 1,
        }
    }

    #[test]
    fn a_held_key_shows_its_holder_and_waiters_in_order() {
        let mut e = Engine::with_fake_clock(1_000, [1; 32]);
        e.set_owner_prefix("h:1:");
        let options = ExecOptions { renew: true, telemetry: false, manual: false };
        for exec in 1..=3 {
            e.start(exec, vec![lock("k")], options).unwrap();
            e.advance(10).unwrap();
        }
        let found = e.memory_inspect(0, "k").unwrap().expect("held");
        assert_eq!((found.limit, found.holders.len()), (1, 1));
        let holder = &found.holders[0];
        assert!(holder.owner.starts_with("h:1:"));
        assert_eq!(holder.left, 2_970, "granted at 1000 for 3 s, read at 1030");
        let waited: Vec<u64> = found.waiters.iter().map(|w| w.waited).collect();
        assert_eq!(waited, [20, 10], "the second execution waits longest");
        assert_eq!(e.memory_inspect(0, "other").unwrap(), None);
        assert_eq!(e.memory_list(0, "", None, 10).unwrap(), ["k"]);
        assert!(e.memory_inspect(9, "k").is_err());
    }

    #[test]
    fn list_pages_through_live_keys_in_order() {
        let mut e = Engine::with_fake_clock(0, [1; 32]);
        for key in ["b/2", "a/1", "b/1", "b/3", "c"] {
            e.memory_acquire(0, key, "o", 100, 1, 1).unwrap();
        }
        assert_eq!(e.memory_list(0, "b/", None, 2).unwrap(), ["b/1", "b/2"]);
        assert_eq!(e.memory_list(0, "b/", Some("b/2"), 2).unwrap(), ["b/3"]);
        e.advance(100).unwrap();
        assert!(e.memory_list(0, "", None, 10).unwrap().is_empty(), "lapsed leases are not held");
    }
}
