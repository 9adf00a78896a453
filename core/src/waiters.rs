//! Waiters, in arrival order, per store and key. Only the first waiter of a key tries
//! the store; the others wait their turn, so a release wakes exactly one execution
//! and a crowd of waiters costs one poll, not one each.

use std::collections::{HashMap, VecDeque};

use crate::engine::{Effect, StoreRef, Wake};
use crate::fast_hash::IdMap;

/// What removing a waiter did to its queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HeadChange {
    /// The queue's head is unchanged (or the queue is gone).
    None,
    /// The removed waiter was first; this one is first now.
    NewHead(u32),
}

#[derive(Debug, Default)]
pub(crate) struct WaitQueues {
    by_store: IdMap<StoreRef, HashMap<String, VecDeque<u32>>>,
}

fn watch(store: StoreRef, key: &str, on: bool) -> Option<Effect> {
    match store {
        StoreRef::External { id, wake: Wake::Announce | Wake::Grant } => {
            Some(Effect::Watch { store: id, key: key.to_owned(), watch: on })
        }
        _ => None,
    }
}

impl WaitQueues {
    /// Appends `exec`; returns the effect that starts watching the key when this is
    /// its first waiter on an announcing store.
    pub fn push(&mut self, store: StoreRef, key: &str, exec: u32) -> Option<Effect> {
        let keys = self.by_store.entry(store).or_default();
        match keys.get_mut(key) {
            Some(queue) => {
                queue.push_back(exec);
                None
            }
            None => {
                keys.insert(key.to_owned(), VecDeque::from([exec]));
                watch(store, key, true)
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.by_store.is_empty()
    }

    pub fn head(&self, store: StoreRef, key: &str) -> Option<u32> {
        self.by_store.get(&store)?.get(key)?.front().copied()
    }

    /// Removes `exec` wherever it stands; returns the new head if it was first, and
    /// the effect that stops watching when the queue emptied.
    pub fn remove(&mut self, store: StoreRef, key: &str, exec: u32) -> (HeadChange, Option<Effect>) {
        let Some(keys) = self.by_store.get_mut(&store) else { return (HeadChange::None, None) };
        let Some(queue) = keys.get_mut(key) else { return (HeadChange::None, None) };
        let was_head = queue.front() == Some(&exec);
        if was_head {
            queue.pop_front();
        } else {
            queue.retain(|&e| e != exec);
        }
        if queue.is_empty() {
            keys.remove(key);
            if keys.is_empty() {
                self.by_store.remove(&store);
            }
            return (HeadChange::None, watch(store, key, false));
        }
        match (was_head, queue.front()) {
            (true, Some(&next)) => (HeadChange::NewHead(next), None),
            _ => (HeadChange::None, None),
        }
    }

    /// Keys with waiters on `store`.
    pub fn keys_of(&self, store: StoreRef) -> impl Iterator<Item = &str> {
        self.by_store.get(&store).into_iter().flat_map(|keys| keys.keys().map(String::as_str))
    }
}
