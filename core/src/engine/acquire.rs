//! Acquiring a lock: a try of the store, and what its answer leads to.

use super::state::{
    at, at_mut, exec_at, layer_at, still_acquiring, Acquiring, HeadLeft, Held, LayerState, Origin, Phase, TryResult,
};
use super::Engine;
use crate::error::{LockError, StoreFailure, StoreMethod};
use crate::permits::TryAcquire;
use crate::polling::{renew_after, Backoff};
use crate::text::text;
use crate::types::{Effect, Event, Outcome, StoreRef};
use crate::Millis;

impl Engine {
    /// Starts acquiring lock `layer` of `exec` under a fresh owner id.
    pub(super) fn begin_layer(&mut self, exec: u32, layer: u32) {
        let now = self.time;
        let Some(l) = self.execs.get_mut(&exec).and_then(|e| e.layers.get_mut(layer as usize)) else { return };
        self.owners.write_id(&mut l.owner, &l.spec.name);
        l.started_at = now;
        l.state = LayerState::Acquiring(Acquiring {
            deadline: l.spec.wait.map(|w| now.saturating_add(w)),
            backoff: Backoff::default(),
            queued: false,
            in_flight: None,
            next_try: None,
            release_seen: false,
            asked_store: false,
            sent_floor: 0,
        });
        self.try_acquire(exec, layer);
    }

    /// Tries the store once: a memory store answers now, a host store is called.
    pub(super) fn try_acquire(&mut self, exec: u32, layer: u32) {
        let now = self.time;
        let Some(l) = self.layer_mut(exec, layer) else { return };
        let (store, ttl) = (l.spec.store, l.spec.ttl);
        match store {
            StoreRef::Memory(id) => {
                let l = layer_at(&self.execs, exec, layer);
                // Waiters take a memory store's key in arrival order: while some wait for
                // it, only the first may take it. Not a newcomer that comes as the lease
                // lapses before the first waiter's timer fires, nor a later waiter's last
                // try at its deadline.
                let head = if self.queues.is_empty() { None } else { self.queues.head(store, &l.spec.key) };
                let result = if let Some(limit) = head.and_then(|head| self.other_limit(exec, layer, head)) {
                    // Waiters here keep the store from being asked: the key's limit is
                    // checked here instead.
                    TryResult::Mismatch { limit }
                } else if let Some(head) = head.filter(|&h| h != exec) {
                    // A key that ended before its first waiter was told (a shorter lease
                    // set through the store, say): that waiter takes it now, this try after.
                    if !at(&self.memory, id).is_held(&l.spec.key, now) {
                        self.try_new_head(head);
                    }
                    TryResult::Held { until: None }
                } else {
                    let (limit, weight) = (l.spec.limit, l.spec.weight);
                    match at_mut(&mut self.memory, id).try_acquire_permits(
                        &l.spec.key,
                        &l.owner,
                        ttl,
                        limit,
                        weight,
                        now,
                    ) {
                        TryAcquire::Acquired(token) => TryResult::Granted(token),
                        TryAcquire::Held { until } => TryResult::Held { until: Some(until) },
                        TryAcquire::Mismatch { limit } => TryResult::Mismatch { limit },
                    }
                };
                self.on_try(exec, layer, now, result);
            }
            StoreRef::External { id, .. } => {
                // Permits go in in arrival order here too: while others wait for the key
                // in this process, only the first asks the store (a reader that came
                // after a waiting writer would otherwise fit beside the readers inside).
                if layer_at(&self.execs, exec, layer).spec.has_permits() {
                    let key = &layer_at(&self.execs, exec, layer).spec.key;
                    if self.queues.head(store, key).is_some_and(|head| head != exec) {
                        self.on_try(exec, layer, now, TryResult::Held { until: None });
                        return;
                    }
                }
                // Held by an execution here: a waiter that comes waits for it to hand the
                // lease over (or give it back to the store, which wakes the first waiter),
                // asking the store nothing; only the first waiter's polls still go to the
                // store, which is how a store that went away is found.
                if self.turn_of(store).is_some() {
                    let key = &layer_at(&self.execs, exec, layer).spec.key;
                    if let Some(holder) = self.local_holder(store, key).filter(|&holder| holder != exec) {
                        if self.take_parked(holder, exec, layer) {
                            return;
                        }
                        let joining = self.acquiring_mut(exec, layer).is_some_and(|a| !a.queued);
                        let key = &layer_at(&self.execs, exec, layer).spec.key;
                        if joining && self.local_holder(store, key).is_some() {
                            self.on_try(exec, layer, now, TryResult::Held { until: None });
                            return;
                        }
                    }
                }
                let l = layer_at(&self.execs, exec, layer);
                let sent_floor = if l.spec.has_permits() { self.floors.floor(id, &l.spec.key) } else { 0 };
                let request = self.send(Origin::Layer { exec, layer }, StoreMethod::Acquire, id, now);
                if let Some(a) = self.acquiring_mut(exec, layer) {
                    a.in_flight = Some((request, now));
                    a.next_try = None;
                    a.asked_store = true;
                    a.sent_floor = sent_floor;
                }
                self.arm_acquiring(exec, layer);
            }
        }
    }

    /// A try sent at `sent_at` came to `result`: hold, wait on, or give up.
    pub(super) fn on_try(&mut self, exec: u32, layer: u32, sent_at: Millis, result: TryResult) {
        let now = self.time;
        let Some(e) = self.execs.get(&exec) else { return };
        let l = at(&e.layers, layer);
        let LayerState::Acquiring(a) = &l.state else { return };
        let (store, queued, deadline) = (l.spec.store, a.queued, a.deadline);
        let sent_floor = l.spec.has_permits().then_some(a.sent_floor);
        let (renew, waited) = (e.options.renew, now - l.started_at);
        // The key is copied only on the paths that need it apart from the layer.
        let key_of = |engine: &Self| layer_at(&engine.execs, exec, layer).spec.key.clone();
        match result {
            TryResult::Granted(token) => {
                if let StoreRef::External { id, .. } = store {
                    let key = &layer_at(&self.execs, exec, layer).spec.key;
                    if let Err(floor) = self.floors.admit(id, key, token, sent_floor) {
                        let failure = StoreFailure::BadAnswer(text!(
                            "fencing token ",
                            token,
                            " is not larger than ",
                            floor,
                            ", the last one this process saw for this key: the store's tokens went back"
                        ));
                        self.on_try(exec, layer, sent_at, TryResult::Failed(failure));
                        return;
                    }
                }
                // A holder of permits leaves the queue once it runs: the next waiter, let
                // in then, runs after it, in arrival order.
                let permits = layer_at(&self.execs, exec, layer).spec.has_permits();
                if queued && !permits {
                    self.leave_queue_granted(exec, layer, store);
                }
                let Some(l) = self.layer_mut(exec, layer) else { return };
                let ttl = l.spec.ttl;
                l.token = Some(token);
                l.state = LayerState::Held(Held {
                    expires_at: sent_at.saturating_add(ttl),
                    renew_at: renew.then(|| sent_at.saturating_add(renew_after(ttl))),
                    in_flight: None,
                    retry: Backoff::default(),
                    extend_pending: 0,
                    grant: None,
                    linger_until: None,
                });
                // Permits are not handed over locally: each holder has its own lease.
                if self.turn_of(store).is_some() && !layer_at(&self.execs, exec, layer).spec.has_permits() {
                    self.note_grant(exec, layer, token, sent_at);
                }
                self.arm_held(exec, layer);
                self.event(exec, layer, Event::Acquired { waited, token });
                self.held_all_up_to(exec, layer);
                if queued && permits {
                    self.leave_queue_granted(exec, layer, store);
                }
            }
            TryResult::Held { until } => {
                let key = key_of(self);
                if deadline.is_some_and(|d| now >= d) {
                    self.event(exec, layer, Event::Rejected { waited });
                    self.wind_down(exec, Outcome::Error(LockError::NotAcquired { key }));
                    return;
                }
                if !queued {
                    self.join_queue(exec, store, &key);
                    if let Some(a) = self.acquiring_mut(exec, layer) {
                        a.queued = true;
                    }
                }
                let is_head = self.queues.head(store, &key) == Some(exec);
                let a = still_acquiring(self.acquiring_mut(exec, layer));
                if std::mem::take(&mut a.release_seen) && is_head {
                    self.try_acquire(exec, layer);
                    return;
                }
                let next = if is_head {
                    // A memory store says when the lease ends, and announces an earlier
                    // release: no polling. Other stores are polled with backoff.
                    until.unwrap_or_else(|| now.saturating_add(a.backoff.next_delay()))
                } else {
                    Millis::MAX
                };
                a.next_try = Some(deadline.map_or(next, |d| next.min(d))).filter(|&t| t != Millis::MAX);
                self.arm_acquiring(exec, layer);
            }
            TryResult::Mismatch { limit: held_with } => {
                let key = key_of(self);
                let limit = layer_at(&self.execs, exec, layer).spec.limit;
                self.wind_down(exec, Outcome::Error(LockError::LimitMismatch { key, limit, held_with }));
            }
            TryResult::Failed(failure) => {
                // A store that threw or answered badly may have taken the lease all the
                // same, its answer lost on the way: a release by this owner (which takes
                // nothing that is not its own) frees the key now, not at the lease's
                // expiry. A try that timed out was abandoned instead: a lease in its late
                // answer is released then.
                if !matches!(failure, StoreFailure::TimedOut { .. }) {
                    self.release_orphan(exec, layer);
                }
                let key = key_of(self);
                self.event(exec, layer, Event::AcquireFailed { waited, failure: failure.clone() });
                self.wind_down(
                    exec,
                    Outcome::Error(LockError::StoreFailed { key, method: StoreMethod::Acquire, failure }),
                );
            }
        }
    }

    /// The limit a memory-store key is held or waited for with, when it is not that of
    /// lock `layer` of `exec`: its live holders', else its first waiter's (`head`).
    fn other_limit(&self, exec: u32, layer: u32, head: u32) -> Option<u32> {
        if head == exec {
            return None;
        }
        let l = layer_at(&self.execs, exec, layer);
        let StoreRef::Memory(id) = l.spec.store else { return None };
        let theirs = match at(&self.memory, id).held_limit(&l.spec.key, self.time) {
            Some(limit) => limit,
            None => {
                let e = self.execs.get(&head)?;
                e.layers.iter().find(|w| w.spec.store == l.spec.store && w.spec.key == l.spec.key)?.spec.limit
            }
        };
        (theirs != l.spec.limit).then_some(theirs)
    }

    /// Takes lock `layer` of `exec`, just granted, out of its key's queue.
    fn leave_queue_granted(&mut self, exec: u32, layer: u32, store: StoreRef) {
        // The key is lent for the call rather than copied: leaving the queue touches
        // only the waiters behind this execution.
        let key = self.layer_mut(exec, layer).map(|l| std::mem::take(&mut l.spec.key)).unwrap_or_default();
        self.leave_queue(exec, store, &key, HeadLeft::Acquired);
        if let Some(l) = self.layer_mut(exec, layer) {
            l.spec.key = key;
        }
    }

    /// Points the lock's timer at its next try or the timeout of the one in flight.
    pub(super) fn arm_acquiring(&mut self, exec: u32, layer: u32) {
        let Some(l) = self.layer_mut(exec, layer) else { return };
        let LayerState::Acquiring(a) = &l.state else { return };
        let timeout = a.in_flight.map(|(_, sent)| sent.saturating_add(l.spec.ttl));
        let at = match (timeout, a.next_try) {
            (Some(t), Some(n)) => Some(t.min(n)),
            (t, n) => t.or(n),
        };
        self.arm(exec, layer, at);
    }

    /// Lock `layer` of `exec` is held: the next lock is acquired, or the callback runs.
    pub(super) fn held_all_up_to(&mut self, exec: u32, layer: u32) {
        let count = exec_at(&self.execs, exec).layers.len() as u32;
        if layer + 1 < count {
            self.begin_layer(exec, layer + 1);
        } else if let Some(e) = self.execs.get_mut(&exec) {
            e.phase = Phase::Running;
            let token = e.layers.iter().rev().find_map(|l| l.token).unwrap_or_default();
            self.effects.push_back(Effect::Run { exec, token });
        }
    }
}
