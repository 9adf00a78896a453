//! Waiters, in arrival order, per store and key. Only the first waiter of a key tries
//! the store; the others wait their turn, so a release wakes exactly one execution
//! and a crowd of waiters costs one poll, not one each.
//!
//! The queues know nothing of the engine: they say what changed (a key's first waiter,
//! a new head, an emptied queue) and the engine decides what that means.

use std::collections::VecDeque;

use crate::fast_hash::{IdMap, KeyMap};

/// What removing a waiter did to its queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HeadChange {
    /// The queue's head is unchanged.
    None,
    /// The removed waiter was first; this one is first now.
    NewHead(u32),
    /// The removed waiter was the last: the key has no waiters any more.
    Emptied,
}

/// The queues of every key with waiters, by store (`S`, the engine's store reference).
#[derive(Debug)]
pub(crate) struct WaitQueues<S> {
    /// Stores with waiters, each once. A list, not a map: a process waits on a handful
    /// of stores at a time, where a scan beats hashing, and one map type fewer is code
    /// the wasm module does not carry.
    by_store: Vec<(S, KeyMap<String, Queue>)>,
    /// Entries looked at by removals, for the test that keeps them bounded.
    #[cfg(test)]
    looked_at: usize,
}

impl<S> Default for WaitQueues<S> {
    fn default() -> Self {
        WaitQueues {
            by_store: Vec::new(),
            #[cfg(test)]
            looked_at: 0,
        }
    }
}

/// One key's waiters. A waiter that leaves from behind the head (it gave up: thousands
/// abort or time out together) is not searched for: it is counted as gone, and its
/// entry is dropped when it reaches the front, or when gone entries outnumber live ones
/// and the queue is compacted. So each leaving costs O(1) amortised, not the length of
/// the queue, and the entries kept stay within about twice the live waiters.
#[derive(Debug)]
struct Queue {
    /// Waiters in arrival order, with the entries of those gone from behind the head.
    /// The front entry is always live.
    entries: VecDeque<u32>,
    /// Executions gone from behind the head, by how many of their entries remain. An id
    /// reused by a later execution is queued after its gone entries, which therefore
    /// come out first.
    gone: IdMap<u32, u32>,
    gone_total: usize,
}

impl Queue {
    fn live(&self) -> usize {
        self.entries.len().saturating_sub(self.gone_total)
    }

    /// Whether `exec` stands for a gone entry, which it then consumes.
    fn take_gone(gone: &mut IdMap<u32, u32>, exec: u32) -> bool {
        let Some(count) = gone.get_mut(&exec) else { return false };
        *count -= 1;
        if *count == 0 {
            gone.remove(&exec);
        }
        true
    }

    /// Drops gone entries from the front, so that the front is live again; returns how
    /// many entries were looked at.
    fn trim_front(&mut self) -> usize {
        let mut looked_at = 0;
        while self.gone_total > 0 {
            let Some(&front) = self.entries.front() else { break };
            looked_at += 1;
            if !Self::take_gone(&mut self.gone, front) {
                break;
            }
            self.entries.pop_front();
            self.gone_total -= 1;
        }
        looked_at
    }

    /// Removes `exec`, which must be queued here (the engine removes a waiter once, and
    /// only one it queued); returns how many entries were looked at.
    fn remove(&mut self, exec: u32) -> usize {
        debug_assert!(
            self.entries.iter().filter(|&&e| e == exec).count() > self.gone.get(&exec).map_or(0, |&n| n as usize),
            "{exec} is not queued"
        );
        if self.entries.front() == Some(&exec) {
            self.entries.pop_front();
            return 1 + self.trim_front();
        }
        if self.entries.back() == Some(&exec) {
            self.entries.pop_back();
            return 1;
        }
        *self.gone.entry(exec).or_default() += 1;
        self.gone_total += 1;
        if self.gone_total <= self.live() + 32 {
            return 1;
        }
        let looked_at = self.entries.len();
        let gone = &mut self.gone;
        self.entries.retain(|&e| !Self::take_gone(gone, e));
        self.gone_total = 0;
        looked_at
    }
}

impl<S: Copy + Eq> WaitQueues<S> {
    /// The place of `store` in `by_store`.
    fn store_at(&self, store: S) -> Option<usize> {
        self.by_store.iter().position(|(s, _)| *s == store)
    }

    fn keys(&self, store: S) -> Option<&KeyMap<String, Queue>> {
        self.by_store.iter().find(|(s, _)| *s == store).map(|(_, keys)| keys)
    }

    /// Appends `exec`; true when it is the key's first waiter (its queue is new).
    pub fn push(&mut self, store: S, key: &str, exec: u32) -> bool {
        let at = match self.store_at(store) {
            Some(at) => at,
            None => {
                self.by_store.push((store, KeyMap::default()));
                self.by_store.len() - 1
            }
        };
        // (`at` is in range: no panic path is carried for it.)
        let Some((_, keys)) = self.by_store.get_mut(at) else { return false };
        match keys.get_mut(key) {
            Some(queue) => {
                queue.entries.push_back(exec);
                false
            }
            None => {
                let queue = Queue { entries: VecDeque::from([exec]), gone: IdMap::default(), gone_total: 0 };
                keys.insert(key.to_owned(), queue);
                true
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.by_store.is_empty()
    }

    pub fn head(&self, store: S, key: &str) -> Option<u32> {
        self.keys(store)?.get(key)?.entries.front().copied()
    }

    /// Removes `exec` (queued on `key`) wherever it stands; says whether the head
    /// changed or the queue emptied.
    pub fn remove(&mut self, store: S, key: &str, exec: u32) -> HeadChange {
        let Some(at) = self.store_at(store) else { return HeadChange::None };
        let Some((_, keys)) = self.by_store.get_mut(at) else { return HeadChange::None };
        let Some(queue) = keys.get_mut(key) else { return HeadChange::None };
        let was_head = queue.entries.front() == Some(&exec);
        let _looked_at = queue.remove(exec);
        #[cfg(test)]
        {
            self.looked_at += _looked_at;
        }
        if queue.live() == 0 {
            keys.remove(key);
            if keys.is_empty() && at < self.by_store.len() {
                self.by_store.swap_remove(at);
            }
            return HeadChange::Emptied;
        }
        match (was_head, queue.entries.front()) {
            (true, Some(&next)) => HeadChange::NewHead(next),
            _ => HeadChange::None,
        }
    }

    /// The waiters of `key` on `store`, first first (those gone from behind the head
    /// left out). Reads only.
    pub fn waiting(&self, store: S, key: &str) -> Vec<u32> {
        let Some(queue) = self.keys(store).and_then(|keys| keys.get(key)) else { return Vec::new() };
        // A gone id's entries come before any entry it was queued again with.
        let mut live = Vec::with_capacity(queue.live());
        let mut skipped: Vec<u32> = Vec::new();
        for &exec in &queue.entries {
            let gone = queue.gone.get(&exec).copied().unwrap_or(0);
            let seen = skipped.iter().filter(|&&e| e == exec).count() as u32;
            if seen < gone {
                skipped.push(exec);
            } else {
                live.push(exec);
            }
        }
        live
    }

    /// Whether `store` has a key with waiters.
    pub fn has_waiters(&self, store: S) -> bool {
        self.store_at(store).is_some()
    }

    /// Calls `each` with every key that has waiters on `store`.
    pub fn each_key(&self, store: S, each: &mut dyn FnMut(&str)) {
        if let Some(keys) = self.keys(store) {
            for key in keys.keys() {
                each(key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Any store: the queues only tell stores apart.
    const MEM: u32 = 0;

    /// Entries looked at while `n` waiters leave one queue in `order` (positions in
    /// arrival order), and whether each left the head as expected.
    fn leave(n: u32, order: impl Fn(u32) -> Vec<u32>) -> usize {
        let mut queues = WaitQueues::<u32>::default();
        for exec in 1..=n {
            queues.push(MEM, "k", exec);
        }
        for exec in order(n) {
            let head = queues.head(MEM, "k");
            let change = queues.remove(MEM, "k", exec);
            if queues.is_empty() {
                assert_eq!(change, HeadChange::Emptied, "the last waiter empties the queue");
            } else if head == Some(exec) {
                // The next live waiter in arrival order is the new head.
                assert_eq!(change, queues.head(MEM, "k").map_or(HeadChange::None, HeadChange::NewHead));
            } else {
                assert_eq!(change, HeadChange::None);
                assert_eq!(queues.head(MEM, "k"), head, "the head stays while others leave");
            }
        }
        assert!(queues.is_empty(), "everyone left");
        queues.looked_at
    }

    #[test]
    fn waiters_leaving_from_anywhere_cost_a_bounded_amount_each() {
        // Thousands of waiters on one key that abort or time out together: from the end
        // of the queue, from the middle, every other one, and the head last.
        type Order = fn(u32) -> Vec<u32>;
        let orders: [(&str, Order); 4] = [
            ("last first", |n| (1..=n).rev().collect()),
            ("behind the head, in order", |n| (2..=n).chain([1]).collect()),
            ("from the middle out", |n| {
                let mid = n / 2;
                (0..n)
                    .map(|i| if i % 2 == 0 { mid - i / 2 } else { mid + 1 + i / 2 })
                    .filter(|&e| e >= 1 && e <= n)
                    .collect()
            }),
            ("every other one, then the rest", |n| (2..=n).step_by(2).chain((1..=n).step_by(2)).collect()),
        ];
        for (name, order) in orders {
            for n in [1_000, 8_000] {
                let all = order(n);
                assert_eq!(all.len(), n as usize, "{name}: a permutation");
                let looked_at = leave(n, order);
                assert!(looked_at <= 4 * n as usize + 64, "{name}: {looked_at} entries looked at for {n} waiters");
            }
        }
    }

    #[test]
    fn waiting_lists_the_live_waiters_in_arrival_order() {
        let mut queues = WaitQueues::<u32>::default();
        assert!(queues.waiting(MEM, "k").is_empty());
        for exec in [4, 2, 9, 7] {
            queues.push(MEM, "k", exec);
        }
        queues.remove(MEM, "k", 9);
        queues.push(MEM, "k", 9);
        assert_eq!(queues.waiting(MEM, "k"), [4, 2, 7, 9], "a waiter queued again stands at the end");
        queues.remove(MEM, "k", 4);
        assert_eq!(queues.waiting(MEM, "k"), [2, 7, 9]);
        assert!(queues.waiting(MEM, "other").is_empty() && queues.waiting(1, "k").is_empty());
    }

    #[test]
    fn an_id_queued_again_after_leaving_from_behind_the_head_waits_its_new_turn() {
        let mut queues = WaitQueues::<u32>::default();
        assert!(queues.push(MEM, "k", 1), "the first waiter opens the queue");
        assert!(!queues.push(MEM, "k", 2) && !queues.push(MEM, "k", 3));
        assert_eq!(queues.remove(MEM, "k", 2), HeadChange::None);
        assert!(!queues.push(MEM, "k", 2));
        assert_eq!(queues.remove(MEM, "k", 1), HeadChange::NewHead(3), "the old entry of 2 is gone");
        assert_eq!(queues.remove(MEM, "k", 3), HeadChange::NewHead(2));
        assert_eq!(queues.remove(MEM, "k", 2), HeadChange::Emptied);
        assert!(queues.is_empty());
    }
}
