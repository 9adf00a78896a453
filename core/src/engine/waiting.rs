//! Waiting for a held key: the queues in arrival order, and who tries when.

use super::state::{at, current_layer, HeadLeft, Layer, LayerState, TryResult};
use super::Engine;
use crate::types::{Effect, StoreRef, Wake};
use crate::waiters::HeadChange;
use crate::Millis;

impl Engine {
    /// A store announced that the lease on `key` ended: the first waiter for it tries
    /// at once instead of at its next poll.
    pub fn released(&mut self, store: StoreRef, key: &str) {
        if self.queues.is_empty() {
            return;
        }
        self.tick();
        if let Some(head) = self.queues.head(store, key) {
            let layer = self.execs.get(&head).map_or(0, current_layer);
            let Some(a) = self.acquiring_mut(head, layer) else { return };
            if a.in_flight.is_some() {
                a.release_seen = true;
            } else {
                self.try_acquire(head, layer);
            }
        }
    }

    /// A store that grants on release ([`Wake::Grant`]) handed the lease on `key` to
    /// `owner` with fencing token `token`, at most `age` ms ago by this engine's clock
    /// (`None`: the store cannot tell, because the grant's message overtook the answer to
    /// the try that queued the owner). Returns whether the grant was this engine's: for
    /// one of its waiters on the key, or for a lease it already holds. A grant it does
    /// not claim is left to the store, which may have other listeners to offer it to,
    /// and releases it when nobody claims it.
    ///
    /// The waiter holds the lease from `age` ms ago, as if it had sent an acquire then
    /// (without an age: from when its try still in flight was sent, the try that queued
    /// it), and that try is forgotten: its answer is this same lease, or "held". A grant
    /// too old to count on is not run: the waiter asks again, and a store that grants on
    /// release answers a waiter's try with the lease it was handed, counted again from
    /// that try.
    pub fn granted(&mut self, store: StoreRef, key: &str, owner: &str, token: u64, age: Option<Millis>) -> bool {
        self.tick();
        let now = self.time;
        if !matches!(store, StoreRef::External { .. }) {
            return false;
        }
        let Some((exec, layer, held)) = self.find_owner(store, key, owner) else { return false };
        if held {
            // Granted already by the owner's own try, whose answer came first.
            return true;
        }
        let Some(l) = self.layer_mut(exec, layer) else { return false };
        let ttl = l.spec.ttl;
        let LayerState::Acquiring(a) = &mut l.state else { return false };
        a.release_seen = false;
        let in_flight = a.in_flight.take();
        if let Some((request, _)) = in_flight {
            self.requests.remove(&request);
        }
        let since = match (age, in_flight) {
            // Granted before this engine's clock began: too old to place on it, asked again.
            (Some(age), _) => now.checked_sub(age),
            (None, Some((_, sent_at))) => Some(sent_at),
            (None, None) => None,
        };
        match since {
            Some(since) if since.saturating_add(ttl) > now => {
                self.on_try(exec, layer, since, TryResult::Granted(token))
            }
            _ => self.try_acquire(exec, layer),
        }
        true
    }

    /// The layer that acquires (`held`: false) or holds (true) `key` on `store` under
    /// `owner`. The first waiter is looked at first; other executions are searched only
    /// when it is not the one (a grant for a later waiter, or a duplicate).
    pub(super) fn find_owner(&self, store: StoreRef, key: &str, owner: &str) -> Option<(u32, u32, bool)> {
        let matches = |l: &Layer| l.owner == owner && l.spec.store == store && l.spec.key == key;
        if let Some(head) = self.queues.head(store, key) {
            let e = self.execs.get(&head)?;
            let layer = current_layer(e);
            if e.layers.get(layer as usize).is_some_and(|l| matches(l) && matches!(l.state, LayerState::Acquiring(_))) {
                return Some((head, layer, false));
            }
        }
        self.execs.iter().find_map(|(&exec, e)| {
            e.layers.iter().enumerate().find_map(|(i, l)| match l.state {
                LayerState::Acquiring(_) if matches(l) => Some((exec, i as u32, false)),
                LayerState::Held(_) if matches(l) => Some((exec, i as u32, true)),
                _ => None,
            })
        })
    }

    /// Queues `exec` behind the waiters of `key`; the first one starts the watch.
    pub(super) fn join_queue(&mut self, exec: u32, store: StoreRef, key: &str) {
        if self.queues.push(store, key, exec) {
            if let StoreRef::Memory(id) = store {
                self.words.mark(id, key);
            }
            self.watch(store, key, true);
        }
    }

    /// Starts or stops listening for releases of `key`, on a store that announces them.
    fn watch(&mut self, store: StoreRef, key: &str, watch: bool) {
        if let StoreRef::External { id, wake: Wake::Announce | Wake::Grant } = store {
            self.effects.push_back(Effect::Watch { store: id, key: key.to_owned(), watch });
        }
    }

    /// Takes `exec` out of `key`'s queue; `why` decides what the new first waiter does.
    pub(super) fn leave_queue(&mut self, exec: u32, store: StoreRef, key: &str, why: HeadLeft) {
        let change = self.queues.remove(store, key, exec);
        if change == HeadChange::Emptied {
            if let StoreRef::Memory(id) = store {
                self.words.unmark(id, key);
            }
            self.watch(store, key, false);
        }
        if let HeadChange::NewHead(next) = change {
            let layer = self.execs.get(&next).map_or(0, current_layer);
            let permits = self.layer_mut(next, layer).is_some_and(|l| l.spec.has_permits());
            match why {
                // Permits may be left after a grant: the next waiter asks at once, in
                // turn, so that waiters are let in in arrival order while they fit.
                HeadLeft::Acquired if permits => self.try_new_head(next),
                // A granting store hands the lease only to waiters it has queued: the
                // new head asks now, so that the store queues it behind the holder.
                // Not while an execution here holds the key (handed over to it): the lease
                // comes from here, and the new head polls as any other.
                HeadLeft::Acquired
                    if matches!(store, StoreRef::External { wake: Wake::Grant, .. })
                        && (self.turn_of(store).is_none() || self.local_holder(store, key).is_none()) =>
                {
                    if self.acquiring_mut(next, layer).is_some_and(|a| a.in_flight.is_none()) {
                        self.try_acquire(next, layer);
                    }
                }
                // The lock was just taken: the new head waits for the next release or
                // poll, as the old head did.
                HeadLeft::Acquired => {
                    let now = self.time;
                    let until = match store {
                        StoreRef::Memory(id) => at(&self.memory, id).expires_at(key, now),
                        StoreRef::External { .. } => None,
                    };
                    if let Some(a) = self.acquiring_mut(next, layer) {
                        if a.in_flight.is_none() {
                            let next_try = until.unwrap_or_else(|| now.saturating_add(a.backoff.next_delay()));
                            a.next_try = Some(a.deadline.map_or(next_try, |d| next_try.min(d)));
                        }
                    }
                    self.arm_acquiring(next, layer);
                }
                // The head gave up: the key may be free, so the new head tries now.
                HeadLeft::GaveUp => self.try_new_head(next),
            }
        }
    }

    /// The memory lease on `key` now ends at `until` instead of `before` (a renewal or an
    /// extend to a shorter ttl): its first waiter, told the old end, tries at the new one.
    pub(super) fn lease_moved(&mut self, store: StoreRef, key: &str, before: Option<Millis>, until: Millis) {
        if before.is_none_or(|b| until >= b) {
            return;
        }
        let Some(head) = self.queues.head(store, key) else { return };
        let layer = self.execs.get(&head).map_or(0, current_layer);
        let Some(a) = self.acquiring_mut(head, layer) else { return };
        if a.in_flight.is_none() && a.next_try.is_some_and(|t| t > until) {
            a.next_try = Some(until);
            self.arm_acquiring(head, layer);
        }
    }

    /// Lets `exec`, the new head of a queue whose head gave up, try now. A head that gives
    /// up in turn (its deadline has passed too) hands on to the next one: that chain,
    /// as long as the queue (thousands of waiters with one deadline), runs as a loop here,
    /// not as a recursion that would overflow the stack.
    pub(super) fn try_new_head(&mut self, exec: u32) {
        self.heads_to_try.push_back(exec);
        if self.trying_heads {
            return;
        }
        self.trying_heads = true;
        while let Some(next) = self.heads_to_try.pop_front() {
            let layer = self.execs.get(&next).map_or(0, current_layer);
            if self.acquiring_mut(next, layer).is_some_and(|a| a.in_flight.is_none()) {
                self.try_acquire(next, layer);
            }
        }
        self.trying_heads = false;
    }
}
