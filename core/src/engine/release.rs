//! Winding an execution down: leaving its queue, releasing leases, settling.

use super::handoff::is_parked;
use super::state::HeadLeft;
use super::state::{
    at, at_mut, is_live, layer_at, take_acquiring, unreleasable, Layer, LayerState, Origin, Phase, Request,
};
use super::Engine;
use super::{MAX_ABANDONED_ACQUIRES, MAX_SPARE};
use crate::error::{LockError, StoreFailure, StoreMethod};
use crate::types::{Effect, Event, Outcome, StoreRef, Wake};

impl Engine {
    /// Stops acquiring, then releases held leases innermost first; settles with
    /// `outcome` when the last release is done.
    pub(super) fn wind_down(&mut self, exec: u32, outcome: Outcome) {
        let Some(e) = self.execs.get_mut(&exec) else { return };
        if e.phase == Phase::Releasing {
            return;
        }
        e.phase = Phase::Releasing;
        let cancelled = matches!(outcome, Outcome::Error(LockError::Cancelled));
        e.completion = Some(outcome);
        let acquiring = e.layers.iter().position(|l| matches!(l.state, LayerState::Acquiring(_)));
        if let Some(layer) = acquiring {
            let layer = layer as u32;
            let l = at_mut(&mut e.layers, layer);
            let a = take_acquiring(l);
            let (store, key) = (l.spec.store, l.spec.key.clone());
            if let Some((request, _)) = a.in_flight {
                self.abandon(request);
            }
            self.arm(exec, layer, None);
            if a.queued {
                self.leave_queue(exec, store, &key, HeadLeft::GaveUp);
            }
            // A granting store may have queued this owner (a waiter that times out has
            // left with its last try). Once the key's last waiter here leaves, the
            // host's unwatch takes them all out; before that, only a release by this
            // owner does, so that the next release is not handed to it.
            if cancelled
                && matches!(store, StoreRef::External { wake: Wake::Grant, .. })
                && self.queues.head(store, &key).is_some()
            {
                self.release_orphan(exec, layer);
            }
        }
        self.release_next(exec);
    }

    /// Releases the innermost lock still held; settles once none is.
    pub(super) fn release_next(&mut self, exec: u32) {
        let now = self.time;
        let Some(e) = self.execs.get_mut(&exec) else { return };
        let releasable = |l: &Layer| matches!(l.state, LayerState::Held(_) | LayerState::Lost { release_by: Some(_) });
        let Some(layer) = e.layers.iter().rposition(releasable) else {
            let mut outcome = e.completion.take().unwrap_or(Outcome::Value);
            if e.options.manual && outcome == Outcome::Value && !e.layers.iter().all(|l| l.released_as_owner) {
                outcome = Outcome::NotHeld;
            }
            self.drop_exec(exec);
            // A parked lease's execution is the engine's own: no host waits for it.
            if !is_parked(exec) {
                self.effects.push_back(Effect::Settled { exec, outcome });
            }
            return;
        };
        let layer = layer as u32;
        if self.hand_over(exec, layer) || self.park(exec, layer) {
            self.release_next(exec);
            return;
        }
        self.forget_holder(exec, layer);
        let Some(e) = self.execs.get_mut(&exec) else { return };
        let l = at_mut(&mut e.layers, layer);
        // What the store may still hold, and until when: a held lease until its expiry,
        // a lease lost by timeout for at most one more ttl.
        let (expires_at, after_loss) = match std::mem::replace(&mut l.state, LayerState::Done) {
            LayerState::Held(h) => {
                if let Some((request, _, _)) = h.in_flight {
                    self.abandon(request);
                }
                self.answer_extends(exec, false, h.extend_pending);
                (h.expires_at, false)
            }
            LayerState::Lost { release_by } => (release_by.unwrap_or(now), true),
            _ => unreleasable(),
        };
        self.arm(exec, layer, None);
        let l = layer_at(&self.execs, exec, layer);
        match l.spec.store {
            StoreRef::Memory(id) => {
                let released = at_mut(&mut self.memory, id).release(&l.spec.key, &l.owner, now);
                let wake = released && !self.queues.is_empty();
                if let Some(l) = self.layer_mut(exec, layer) {
                    l.released_as_owner = released && !after_loss;
                }
                if !after_loss {
                    self.event(exec, layer, Event::Released);
                }
                if wake {
                    // The first waiter tries now (`released`, then `try_acquire`); its
                    // grant runs it within this call. The key is lent for the wake
                    // rather than copied: waking touches only the waiters.
                    let key = self.layer_mut(exec, layer).map(|l| std::mem::take(&mut l.spec.key)).unwrap_or_default();
                    self.released(StoreRef::Memory(id), &key);
                    if let Some(l) = self.layer_mut(exec, layer) {
                        l.spec.key = key;
                    }
                }
                self.release_next(exec);
            }
            StoreRef::External { id, .. } => {
                let request = self.send(Origin::Layer { exec, layer }, StoreMethod::Release, id, now);
                // A release is worth waiting for only while the lease would live.
                let deadline = expires_at.max(now);
                let was_live = expires_at > now && !after_loss;
                if let Some(l) = self.layer_mut(exec, layer) {
                    l.state = LayerState::Releasing { request, deadline, was_live, after_loss };
                }
                self.arm(exec, layer, Some(deadline));
            }
        }
    }

    /// A release was answered (or timed out).
    pub(super) fn on_release(&mut self, exec: u32, layer: u32, result: Result<Option<bool>, StoreFailure>) {
        let Some(l) = self.layer_mut(exec, layer) else { return };
        let LayerState::Releasing { was_live, after_loss, .. } = l.state else { return };
        l.state = LayerState::Done;
        l.released_as_owner = !after_loss && matches!(result, Ok(said) if said.unwrap_or(was_live));
        self.arm(exec, layer, None);
        match result {
            // The clean-up after a loss is best effort and not a release to report.
            _ if after_loss => {}
            Ok(_) => self.event(exec, layer, Event::Released),
            Err(failure) => {
                self.answer_release_failure(exec, layer, &failure);
                self.event(exec, layer, Event::ReleaseFailed { failure });
            }
        }
        if let Some((store, key)) = self.turn_key(exec, layer) {
            self.wake_local_waiter(store, &key);
        }
        self.release_next(exec);
    }

    /// The store and key of `exec`'s `layer`, on a store that hands over locally.
    pub(super) fn turn_key(&self, exec: u32, layer: u32) -> Option<(StoreRef, String)> {
        let l = self.execs.get(&exec)?.layers.get(layer as usize)?;
        self.turn_of(l.spec.store).map(|_| (l.spec.store, l.spec.key.clone()))
    }

    /// A manual lease's `release()` was asked for by its caller, who waits for it: a
    /// store that failed to release is its answer (an execution's release is not: its
    /// callback's outcome is, and the failure goes to telemetry).
    /// A release still unanswered when the lease would have ended is not one: whatever
    /// the store does with it, the lease is over, and `release()` answers false.
    pub(super) fn answer_release_failure(&mut self, exec: u32, layer: u32, failure: &StoreFailure) {
        let Some(e) = self.execs.get_mut(&exec) else { return };
        let timed_out = matches!(failure, StoreFailure::TimedOut { .. });
        if timed_out || !e.options.manual || !matches!(e.completion, None | Some(Outcome::Value)) {
            return;
        }
        let Some(l) = e.layers.get(layer as usize) else { return };
        let key = l.spec.key.clone();
        e.completion = Some(Outcome::Error(LockError::StoreFailed {
            key,
            method: StoreMethod::Release,
            failure: failure.clone(),
        }));
    }

    /// Releases the lease an abandoned acquire was granted anyway.
    pub(super) fn release_late_grant(&mut self, req: Request) {
        let Origin::Abandoned { late_grant: Some(grant) } = req.origin else { return };
        let (store, key, owner) = *grant;
        self.release_unheld(store, key, owner);
    }

    /// Releases whatever lease a failed acquire of `exec`'s `layer` may have left.
    pub(super) fn release_orphan(&mut self, exec: u32, layer: u32) {
        if let Some((store, key, owner)) = self.external_lease(exec, layer) {
            self.release_unheld(store, key, owner);
        }
    }

    /// The JS store, key and owner of `exec`'s `layer`, for a release of a lease it may
    /// have been granted; `None` on a memory store (whose answers are never lost).
    pub(super) fn external_lease(&self, exec: u32, layer: u32) -> Option<(u32, String, String)> {
        let l = self.execs.get(&exec)?.layers.get(layer as usize)?;
        match l.spec.store {
            StoreRef::External { id, .. } => Some((id, l.spec.key.clone(), l.owner.clone())),
            StoreRef::Memory(_) => None,
        }
    }

    /// A release that no execution waits for, of a lease nobody holds for sure.
    pub(super) fn release_unheld(&mut self, store: u32, key: String, owner: String) {
        let now = self.time;
        let request = self.next_request_id();
        let origin = Origin::Abandoned { late_grant: None };
        self.requests.insert(request, Request { origin, method: StoreMethod::Release, sent_at: now, ttl: 0 });
        // Nobody waits for this release either: it counts against the same bound.
        self.remember_abandoned(request);
        self.effects.push_back(Effect::StoreCall {
            request,
            exec: 0,
            layer: 0,
            store,
            method: StoreMethod::Release,
            key,
            owner,
            ttl: 0,
            queue: false,
            handed_over: false,
        });
    }

    /// Nobody waits for `request` any more. Renewals and releases are forgotten at once
    /// (a late answer to an unknown request is ignored); an acquire is kept so that a
    /// lease granted anyway is released, up to a bound on how many are kept.
    pub(super) fn abandon(&mut self, request: u32) {
        let Some(req) = self.requests.get(&request) else { return };
        let late_grant = match (&req.origin, req.method) {
            (&Origin::Layer { exec, layer }, StoreMethod::Acquire) => self.external_lease(exec, layer).map(Box::new),
            _ => None,
        };
        if late_grant.is_none() {
            self.requests.remove(&request);
            return;
        }
        if let Some(req) = self.requests.get_mut(&request) {
            req.origin = Origin::Abandoned { late_grant };
        }
        self.remember_abandoned(request);
    }

    /// Keeps an abandoned request until answered, forgetting the oldest beyond the bound.
    pub(super) fn remember_abandoned(&mut self, request: u32) {
        self.abandoned.push_back(request);
        while self.abandoned.len() > MAX_ABANDONED_ACQUIRES {
            if let Some(oldest) = self.abandoned.pop_front() {
                if matches!(self.requests.get(&oldest), Some(Request { origin: Origin::Abandoned { .. }, .. })) {
                    self.requests.remove(&oldest);
                }
            }
        }
    }

    /// Forgets a settled execution, keeping a single lock for reuse.
    pub(super) fn drop_exec(&mut self, exec: u32) {
        let Some(e) = self.execs.remove(&exec) else { return };
        if e.layers.len() > 1 {
            self.reserve_inner_locks(&e.layers, false);
        }
        if !self.holders.is_empty() {
            self.holders.retain(|&(holder, _)| holder != exec);
        }
        for l in e.layers.iter().filter(|l| l.timer_at.is_some()) {
            let execs = &self.execs;
            self.timers.cancelled(l.timer_keeps_alive, |t| is_live(execs, t));
        }
        // Keys longer than this are not worth keeping around.
        const SPARE_KEY: usize = 256;
        if e.layers.len() == 1
            && at(&e.layers, 0).spec.key.capacity() <= SPARE_KEY
            && self.spare_layers.len() < MAX_SPARE
        {
            self.spare_layers.push(e.layers);
        }
    }
}
