//! The engine's memory stores, as a user calls them directly.

use std::rc::Rc;

use super::state::{at, at_mut};
use super::Engine;
use super::DEFAULT_MEMORY_STORE;
use crate::error::{ArgError, LockError};
use crate::memory_store::MemoryStore;
use crate::permits::TryAcquire;
use crate::text::text;
use crate::types::StoreRef;
use crate::Millis;

impl Engine {
    /// Adds a memory store and returns its id (that of a dropped store, if any).
    pub fn create_memory_store(&mut self) -> u32 {
        if let Some(id) = self.free_memory.pop() {
            *at_mut(&mut self.dropped_memory, id) = false;
            return id;
        }
        let id = self.memory.len() as u32;
        self.memory.push(MemoryStore::new(id, Rc::clone(&self.words)));
        self.dropped_memory.push(false);
        id
    }

    /// Forgets memory store `id`, which nothing uses any more (the host's store object
    /// was collected, and the host holds a store while an execution or a lease uses
    /// it): its leases go, and its id is given to the next store created. The default
    /// store is kept, and, as a guard, a store with waiters. Returns whether it was
    /// dropped.
    pub fn drop_memory_store(&mut self, id: u32) -> bool {
        let slot = id as usize;
        if id == DEFAULT_MEMORY_STORE || slot >= self.memory.len() || *at(&self.dropped_memory, id) {
            return false;
        }
        if self.queues.has_waiters(StoreRef::Memory(id)) {
            return false;
        }
        *at_mut(&mut self.memory, id) = MemoryStore::new(id, Rc::clone(&self.words));
        *at_mut(&mut self.dropped_memory, id) = true;
        self.free_memory.push(id);
        true
    }

    pub(super) fn memory_store(&mut self, id: u32) -> Result<&mut MemoryStore, LockError> {
        self.memory.get_mut(id as usize).ok_or_else(|| {
            ArgError::type_error("store", text!("store must be a live memory store, got id ", id)).into()
        })
    }

    /// `acquire` on a memory store, as a user calls it directly: `weight` of the key's
    /// `limit` permits (1 and 1: a plain lease).
    ///
    /// # Errors
    /// An argument error for an unknown store, or a weight outside 1..=limit.
    pub fn memory_acquire(
        &mut self,
        store: u32,
        key: &str,
        owner: &str,
        ttl: Millis,
        limit: u32,
        weight: u32,
    ) -> Result<TryAcquire, LockError> {
        self.tick();
        let now = self.time;
        if limit == 0 || weight == 0 || weight > limit {
            let message = text!("options.weight must be an integer from 1 to the limit (", limit, "), got ", weight);
            return Err(ArgError::range("weight", message).into());
        }
        Ok(self.memory_store(store)?.try_acquire_permits(key, owner, ttl, limit, weight, now))
    }

    /// `renew` on a memory store, as a user calls it directly.
    ///
    /// # Errors
    /// An argument error for an unknown store.
    pub fn memory_renew(&mut self, store: u32, key: &str, owner: &str, ttl: Millis) -> Result<bool, LockError> {
        self.tick();
        let now = self.time;
        let memory = self.memory_store(store)?;
        let before = memory.expires_at(key, now);
        let renewed = memory.renew(key, owner, ttl, now);
        if renewed {
            self.lease_moved(StoreRef::Memory(store), key, before, now.saturating_add(ttl));
        }
        Ok(renewed)
    }

    /// `release` on a memory store, as a user calls it directly; wakes the first waiter
    /// when a lease ended. True when `owner` held a live lease.
    ///
    /// # Errors
    /// An argument error for an unknown store.
    pub fn memory_release(&mut self, store: u32, key: &str, owner: &str) -> Result<bool, LockError> {
        self.tick();
        let now = self.time;
        let released = self.memory_store(store)?.release(key, owner, now);
        if released {
            self.released(StoreRef::Memory(store), key);
        }
        Ok(released)
    }

    /// Milliseconds left on the live lease of `key`, `None` when free. Advisory: the
    /// answer may be stale by the time it is read.
    ///
    /// # Errors
    /// An argument error for an unknown store.
    pub fn memory_ttl(&mut self, store: u32, key: &str) -> Result<Option<Millis>, LockError> {
        self.tick();
        let now = self.time;
        Ok(self.memory_store(store)?.expires_at(key, now).map(|at| at - now))
    }

    /// The number of keys held or waited for on a memory store.
    ///
    /// # Errors
    /// An argument error for an unknown store.
    pub fn memory_size(&mut self, store: u32) -> Result<usize, LockError> {
        self.tick();
        let now = self.time;
        let reference = StoreRef::Memory(store);
        let queues = &self.queues;
        let mem = self.memory.get(store as usize).ok_or_else(|| {
            LockError::from(ArgError::type_error("store", text!("store must be a live memory store, got id ", store)))
        })?;
        let mut size = 0;
        mem.each_live_key(now, &mut |_| size += 1);
        queues.each_key(reference, &mut |key| size += usize::from(!mem.is_held(key, now)));
        Ok(size)
    }

    /// Entries a memory store keeps, live or lapsed, for memory tests.
    ///
    /// # Errors
    /// An argument error for an unknown store.
    pub fn memory_entries(&mut self, store: u32) -> Result<usize, LockError> {
        Ok(self.memory_store(store)?.entries())
    }
}
