//! Local handoff on a JS store: a lease passed from one execution of this engine to
//! the next one waiting for its key, with no store call.
//!
//! A store opts in with a turn ([`Engine::set_store_handoff`]). What must hold, and why
//! it does (docs/redis-handover.md says it at length):
//! - Every holder's token is larger than every token issued before its hold began. A
//!   lease handed over gets the previous holder's token + 1. The store's grant `T` came
//!   with its clock in microseconds or more (a store that opts in promises that), and
//!   the engine hands out at most one local token per microsecond since that grant was
//!   answered, so a local token never runs ahead of the store's clock by more than `T`
//!   did. Every renewal and release carries the holder's token, and the store's next
//!   grant is larger than it. A lease that ends without either (a pause longer than
//!   ttl, a store that lost its data) is granted again only later, by the store's
//!   clock, than every local token it could hide.
//! - A lease is handed over only while it is live by this engine's clock (counted from
//!   when its try or renewal was sent) and within the store's turn, counted from when
//!   the store granted it: a process keeps a key others wait for no longer than that.
//! - While an execution here holds the key, a new waiter for it waits here, without a
//!   store call; once the lease goes back to the store, the first waiter here asks.
//! - A lease handed over is its new holder's for that holder's own ttl: the store's lease
//!   (the previous holder's, with its ttl) is renewed at once to it, unless the new
//!   holder renews every ttl/3 anyway with that same ttl (a manual lease does not).

use super::state::{
    current_layer, exec_at, layer_at, take_acquiring, Exec, Grant, HeadLeft, Held, Layer, LayerState, Phase,
};
use super::Engine;
use crate::polling::Backoff;
use crate::types::{Effect, Event, ExecOptions, Outcome, StoreRef, Wake};
use crate::Millis;

/// Executions with this bit are the engine's own, keeping a parked lease: hosts
/// number theirs below it.
pub const PARKED: u32 = 1 << 31;

/// Whether `exec` is an execution that keeps a parked lease.
pub(super) fn is_parked(exec: u32) -> bool {
    exec & PARKED != 0
}

impl Engine {
    /// Makes JS store `store` hand leases over between this engine's executions, each
    /// process keeping a key for at most `turn` ms at a time; `None` stops it. The store
    /// must raise a key's token floor to the token a renewal or release carries, and
    /// grant only tokens larger than that floor and than its clock in microseconds.
    pub fn set_store_handoff(&mut self, store: u32, turn: Option<Millis>) {
        self.turns.retain(|&(id, _)| id != store);
        self.turns.extend(turn.map(|turn| (store, turn)));
    }

    /// The turn of a JS store that hands leases over locally.
    pub(super) fn turn_of(&self, store: StoreRef) -> Option<Millis> {
        let StoreRef::External { id, .. } = store else { return None };
        self.turns.iter().find(|&&(s, _)| s == id).map(|&(_, turn)| turn)
    }

    /// Lock `layer` of `exec` was just granted `token` by its store, from a try sent at
    /// `sent_at`: on a store that hands over locally, it starts a chain of local holders.
    pub(super) fn note_grant(&mut self, exec: u32, layer: u32, token: u64, sent_at: Millis) {
        let now_us = self.clock.now_micros();
        let Some(l) = self.layer_mut(exec, layer) else { return };
        let LayerState::Held(h) = &mut l.state else { return };
        h.grant = Some(Grant { token, answered_us: now_us, turn_from: sent_at });
        self.holders.push((exec, layer));
    }

    /// The lock of this engine that holds `key` on `store`, if one does. The holders are
    /// the leases held on such stores, one per key: few, and looked through in turn.
    pub(super) fn local_holder(&self, store: StoreRef, key: &str) -> Option<u32> {
        self.holders.iter().find_map(|&(exec, layer)| {
            let l = self.execs.get(&exec)?.layers.get(layer as usize)?;
            (matches!(l.state, LayerState::Held(_)) && l.spec.store == store && l.spec.key == key).then_some(exec)
        })
    }

    /// Lock `layer` of `exec` no longer holds its key here.
    pub(super) fn forget_holder(&mut self, exec: u32, layer: u32) {
        if let Some(at) = self.holders.iter().position(|&h| h == (exec, layer)) {
            self.holders.swap_remove(at);
        }
    }

    /// The lease on `key` went back to the store (released or lost): the first waiter
    /// here, which waited without asking the store, asks now. On a store that announces
    /// releases, it waits for that announcement like every other process's waiter (or
    /// its next poll), so that they all have the same chance at the key.
    pub(super) fn wake_local_waiter(&mut self, store: StoreRef, key: &str) {
        if self.turn_of(store).is_none() || self.local_holder(store, key).is_some() {
            return;
        }
        let Some(head) = self.queues.head(store, key) else { return };
        let layer = self.execs.get(&head).map_or(0, current_layer);
        let now = self.time;
        let Some(a) = self.acquiring_mut(head, layer).filter(|a| a.in_flight.is_none()) else { return };
        if matches!(store, StoreRef::External { wake: Wake::Announce, .. }) {
            if a.next_try.is_none() {
                let next = now.saturating_add(a.backoff.next_delay());
                a.next_try = Some(a.deadline.map_or(next, |d| next.min(d)));
                self.arm_acquiring(head, layer);
            }
        } else {
            self.try_acquire(head, layer);
        }
    }

    /// Whether lock `layer` of `exec`'s lease can pass to another execution here now:
    /// live, within the store's turn, and with a token the bound above allows.
    fn can_pass(&self, exec: u32, layer: u32) -> bool {
        let now = self.time;
        let l = layer_at(&self.execs, exec, layer);
        let (Some(turn), LayerState::Held(h), Some(token)) = (self.turn_of(l.spec.store), &l.state, l.token) else {
            return false;
        };
        let Some(grant) = h.grant else { return false };
        let issued = token.saturating_add(1) - grant.token;
        now < h.expires_at
            && now < grant.turn_from.saturating_add(turn)
            && issued <= self.clock.now_micros().saturating_sub(grant.answered_us)
    }

    /// The waiter lock `layer` of `exec`'s lease can be handed to now, if any: the first
    /// waiter here for its key.
    fn successor(&self, exec: u32, layer: u32) -> Option<(u32, u32)> {
        let l = layer_at(&self.execs, exec, layer);
        let next = self.queues.head(l.spec.store, &l.spec.key).filter(|&n| n != exec)?;
        let e = self.execs.get(&next)?;
        let next_layer = current_layer(e);
        let w = e.layers.get(next_layer as usize)?;
        // Not a waiter whose try is on its way to the store: the store could grant it
        // the key after this process let it go, and it would be held after everything
        // here has settled.
        let idle = matches!(&w.state, LayerState::Acquiring(a) if a.in_flight.is_none());
        (idle && w.spec.store == l.spec.store && w.spec.key == l.spec.key && self.can_pass(exec, layer))
            .then_some((next, next_layer))
    }

    /// Hands lock `layer` of `exec`, being released, to the first waiter here when it
    /// can (see [`Engine::successor`]); whether it did.
    pub(super) fn hand_over(&mut self, exec: u32, layer: u32) -> bool {
        let Some((next, next_layer)) = self.successor(exec, layer) else { return false };
        self.pass_lease(exec, layer, next, next_layer);
        true
    }

    /// Passes the lease of lock `layer` of `exec` to lock `to_layer` of `to`, which is
    /// acquiring its key: it keeps its owner and expiry, and `to` gets the next token.
    fn pass_lease(&mut self, exec: u32, layer: u32, to: u32, to_layer: u32) {
        let now = self.time;
        let Some(l) = self.layer_mut(exec, layer) else { return };
        let LayerState::Held(h) = std::mem::replace(&mut l.state, LayerState::Done) else { return };
        let owner = std::mem::take(&mut l.owner);
        let lease_ttl = l.spec.ttl;
        let token = l.token.unwrap_or_default() + 1;
        let (store, key) = (l.spec.store, l.spec.key.clone());
        l.released_as_owner = true;
        if let Some((request, _, _)) = h.in_flight {
            self.abandon(request);
        }
        self.effects.extend((0..h.extend_pending).map(|_| Effect::Extended { exec, ok: false }));
        self.arm(exec, layer, None);
        self.event(exec, layer, Event::Released);

        let renews = exec_at(&self.execs, to).options.renew;
        let Some(w) = self.layer_mut(to, to_layer) else { return };
        // The store's lease is the previous holder's, with its ttl: the new holder runs on
        // a lease of its own ttl from now, renewed at once to it (under its token), unless
        // it renews every ttl/3 anyway with that same ttl. Otherwise a lease that is never
        // renewed would end with the previous ttl, early (another process takes the key
        // the engine says is held) or late (a short lease never released holds the key
        // for the long one).
        let renew_now = !(renews && w.spec.ttl == lease_ttl);
        let waiting = take_acquiring(w);
        let own_owner = std::mem::replace(&mut w.owner, owner);
        w.inherited = true;
        w.token = Some(token);
        let waited = now - w.started_at;
        w.state = LayerState::Held(Held {
            expires_at: h.expires_at,
            renew_at: if renew_now { Some(now) } else { h.renew_at.or(Some(now)) },
            in_flight: None,
            retry: Backoff::default(),
            extend_pending: 0,
            grant: h.grant,
            linger_until: None,
        });
        let StoreRef::External { id, wake } = store else { return };
        self.forget_holder(exec, layer);
        self.holders.push((to, to_layer));
        // Larger than every token seen for the key: the store's next grant must be too.
        let _ = self.floors.admit(id, &key, token, None);
        // A granting store may have queued the waiter under its own owner id: it leaves
        // that queue, so that no release hands the key to an owner nobody uses.
        if waiting.asked_store && wake == Wake::Grant {
            self.release_unheld(id, key.clone(), own_owner);
        }
        if waiting.queued {
            self.leave_queue(to, store, &key, HeadLeft::Acquired);
        }
        if renew_now {
            self.renew(to, to_layer);
        } else {
            self.arm_held(to, to_layer);
        }
        self.event(to, to_layer, Event::Acquired { waited, token });
        self.held_all_up_to(to, to_layer);
    }

    /// Keeps the lease of lock `layer` of `exec`, being released with nobody here
    /// waiting, for the lock's linger (within the turn and the lease), under an
    /// execution of the engine's own; whether it did.
    pub(super) fn park(&mut self, exec: u32, layer: u32) -> bool {
        let now = self.time;
        let l = layer_at(&self.execs, exec, layer);
        let (linger, Some(turn), LayerState::Held(h)) = (l.spec.linger, self.turn_of(l.spec.store), &l.state) else {
            return false;
        };
        let Some(grant) = h.grant.filter(|_| linger > 0 && !is_parked(exec)) else { return false };
        let until = now.saturating_add(linger).min(grant.turn_from.saturating_add(turn)).min(h.expires_at);
        if until <= now {
            return false;
        }
        let parked = self.next_parked_id();
        let renew = exec_at(&self.execs, exec).options.renew;
        let Some(l) = self.layer_mut(exec, layer) else { return false };
        let LayerState::Held(mut h) = std::mem::replace(&mut l.state, LayerState::Done) else { return false };
        h.linger_until = Some(until);
        let kept = Layer {
            spec: l.spec.clone(),
            owner: std::mem::take(&mut l.owner),
            token: l.token,
            started_at: now,
            state: LayerState::Held(h),
            timer_at: None,
            timer_generation: 0,
            timer_keeps_alive: false,
            released_as_owner: false,
            inherited: true,
        };
        l.released_as_owner = true;
        self.arm(exec, layer, None);
        self.event(exec, layer, Event::Released);
        // A manual execution: a loss winds it down (see `lose`), and nothing settles it.
        let options = ExecOptions { renew, telemetry: false, manual: true };
        self.execs
            .insert(parked, Exec { layers: vec![kept], options, phase: Phase::Running, lost: None, completion: None });
        self.forget_holder(exec, layer);
        self.holders.push((parked, 0));
        self.arm_held(parked, 0);
        true
    }

    /// Lock `layer` of `exec` asks for a key held here: a lease kept for it is its at
    /// once (true); one that can no longer be kept goes back to the store.
    pub(super) fn take_parked(&mut self, holder: u32, exec: u32, layer: u32) -> bool {
        if !is_parked(holder) {
            return false;
        }
        if !self.can_pass(holder, 0) {
            self.wind_down(holder, Outcome::Value);
            return false;
        }
        self.pass_lease(holder, 0, exec, layer);
        self.drop_exec(holder);
        true
    }

    /// An id for a parked lease's execution, in the half of the ids hosts do not use.
    fn next_parked_id(&mut self) -> u32 {
        loop {
            self.next_parked = self.next_parked.wrapping_add(1) | PARKED;
            if !self.execs.contains_key(&self.next_parked) {
                return self.next_parked;
            }
        }
    }
}
