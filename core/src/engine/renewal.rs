//! Holding a lease: renewal every ttl/3, extend, and loss.

use super::state::{at, at_mut, layer_at, LayerState, Origin, Phase};
use super::Engine;
use crate::error::{ArgError, LockError, StoreFailure, StoreMethod};
use crate::polling::{renew_after, Backoff};
use crate::types::{Effect, Event, Extend, Outcome, StoreRef};
use crate::Millis;

impl Engine {
    /// Points the lock's timer at its next renewal, or at its expiry.
    pub(super) fn arm_held(&mut self, exec: u32, layer: u32) {
        let Some(l) = self.layer_mut(exec, layer) else { return };
        let LayerState::Held(h) = &l.state else { return };
        let at = match (h.in_flight, h.renew_at) {
            (None, Some(renew)) => Some(renew.min(h.expires_at)),
            // A renewal (or an extend) in flight is bounded by the lease; without renewal
            // (a manual lease) nothing is due before expiry, where the lease is over.
            (Some(_), _) | (None, None) => Some(h.expires_at),
        };
        let at = match h.linger_until {
            Some(until) => at.map(|at| at.min(until)),
            None => at,
        };
        self.arm(exec, layer, at);
    }

    /// Renews lock `layer` of `exec` now.
    pub(super) fn renew(&mut self, exec: u32, layer: u32) {
        let now = self.time;
        let Some(l) = self.layer_mut(exec, layer) else { return };
        let (store, ttl) = (l.spec.store, l.spec.ttl);
        match store {
            StoreRef::Memory(id) => {
                let l = layer_at(&self.execs, exec, layer);
                let before = at(&self.memory, id).expires_at(&l.spec.key, now);
                let renewed = at_mut(&mut self.memory, id).renew(&l.spec.key, &l.owner, ttl, now);
                if renewed && before.is_some_and(|b| now.saturating_add(ttl) < b) {
                    let key = l.spec.key.clone();
                    self.lease_moved(store, &key, before, now.saturating_add(ttl));
                }
                self.on_renew(exec, layer, now, ttl, Ok(renewed));
            }
            StoreRef::External { id, .. } => {
                let request = self.send(Origin::Layer { exec, layer }, StoreMethod::Renew, id, now);
                if let Some(LayerState::Held(h)) = self.layer_mut(exec, layer).map(|l| &mut l.state) {
                    h.in_flight = Some((request, now, ttl));
                }
                self.arm_held(exec, layer);
            }
        }
    }

    /// A renewal sent at `sent_at` for `ttl` was answered.
    pub(super) fn on_renew(
        &mut self,
        exec: u32,
        layer: u32,
        sent_at: Millis,
        ttl: Millis,
        result: Result<bool, StoreFailure>,
    ) {
        let now = self.time;
        let Some(e) = self.execs.get_mut(&exec) else { return };
        let renews = e.options.renew;
        let Some(l) = e.layers.get_mut(layer as usize) else { return };
        let wanted_ttl = l.spec.ttl;
        let token = l.token.unwrap_or_default();
        let LayerState::Held(h) = &mut l.state else { return };
        h.in_flight = None;
        // Lapsed before the answer came, or renewed to a lease (a shorter extend) that
        // ran out before it came: lost, by the holder's clock.
        if now >= h.expires_at || (matches!(result, Ok(true)) && now >= sent_at.saturating_add(ttl)) {
            self.lose(exec, layer, false);
            return;
        }
        // An extend asked for another ttl while this renewal was in flight: ask again.
        if matches!(result, Ok(true)) && h.extend_pending > 0 && ttl != wanted_ttl {
            h.expires_at = sent_at.saturating_add(ttl);
            self.renew(exec, layer);
            return;
        }
        let extended = std::mem::take(&mut h.extend_pending);
        let ok = matches!(result, Ok(true));
        let refused = matches!(result, Ok(false));
        match result {
            Ok(true) => {
                // Due ttl/3 after the lease was last set, which ends ttl after that.
                let due = h.expires_at.saturating_sub(wanted_ttl).saturating_add(renew_after(wanted_ttl));
                let lag = now.saturating_sub(due);
                h.expires_at = sent_at.saturating_add(ttl);
                h.renew_at = renews.then(|| sent_at.saturating_add(renew_after(ttl)));
                h.retry = Backoff::default();
                self.arm_held(exec, layer);
                self.event(exec, layer, Event::Renewed { token, lag });
            }
            Ok(false) => {}
            Err(failure) => {
                h.renew_at = renews.then(|| now.saturating_add(h.retry.next_delay()));
                self.arm_held(exec, layer);
                self.event(exec, layer, Event::RenewalFailed { failure });
            }
        }
        self.answer_extends(exec, ok, extended);
        // "Not yours": lost, after the pending extends are answered (`lose` winds a manual
        // lease down, and its handle then no longer listens for them).
        if refused {
            self.lose(exec, layer, true);
        }
    }

    /// Pushes a manual lease (its only lock) out to now + `ttl` (or its own ttl), now.
    /// `Done(false)` when the lease is gone: released, lost or lapsed. A later automatic
    /// renewal uses the new ttl.
    ///
    /// # Errors
    /// An argument error for a ttl of zero.
    pub fn extend(&mut self, exec: u32, ttl: Option<Millis>) -> Result<Extend, LockError> {
        self.tick();
        if ttl == Some(0) {
            return Err(ArgError::range("ttl", "ttl must be positive, got 0".into()).into());
        }
        let now = self.time;
        let Some(l) = self.layer_mut(exec, 0) else { return Ok(Extend::Done(false)) };
        let LayerState::Held(h) = &mut l.state else { return Ok(Extend::Done(false)) };
        if h.expires_at <= now {
            return Ok(Extend::Done(false));
        }
        if let Some(ttl) = ttl {
            l.spec.ttl = ttl;
        }
        let LayerState::Held(h) = &mut l.state else { return Ok(Extend::Done(false)) };
        h.extend_pending += 1;
        if h.in_flight.is_none() {
            self.renew(exec, 0);
        }
        if let Some(Effect::Extended { exec: e, ok }) = self.effects.back() {
            if *e == exec {
                let ok = *ok;
                self.effects.pop_back();
                return Ok(Extend::Done(ok));
            }
        }
        Ok(Extend::Pending)
    }

    /// `refused`: the store said the lease is not ours (nothing to release); otherwise the
    /// lease ran out on the holder's clock and the store may still hold it.
    pub(super) fn lose(&mut self, exec: u32, layer: u32, refused: bool) {
        let now = self.time;
        let Some(l) = self.layer_mut(exec, layer) else { return };
        let ttl = l.spec.ttl;
        let (extend_pending, in_flight) = match &l.state {
            LayerState::Held(h) => (h.extend_pending, h.in_flight),
            _ => (0, None),
        };
        if let Some((request, _, _)) = in_flight {
            self.abandon(request);
        }
        self.answer_extends(exec, false, extend_pending);
        self.forget_holder(exec, layer);
        let Some(l) = self.layer_mut(exec, layer) else { return };
        l.state = LayerState::Lost { release_by: (!refused).then(|| now.saturating_add(ttl)) };
        let key = l.spec.key.clone();
        self.arm(exec, layer, None);
        // The loss is told before anything the freed key leads to (the next holder's
        // `acquired`), on every path.
        self.event(exec, layer, Event::Lost { refused });
        if let Some((store, key)) = self.turn_key(exec, layer) {
            self.wake_local_waiter(store, &key);
        }
        let Some(e) = self.execs.get_mut(&exec) else { return };
        e.lost.get_or_insert(layer);
        let (manual, renews) = (e.options.manual, e.options.renew);
        match e.phase {
            // Only its holder's release() ends a manual lease, and a holder may never call
            // it (a lease taken to run a job at most once a minute, left to lapse). One that
            // is over is wound down now, so that nothing stays behind; its release() then
            // answers false. One granted and over before the host took the grant (a tiny
            // ttl, a busy host) was granted all the same: its caller gets the handle (it
            // was given the key and its token), already over, its signal aborted; never
            // `undefined`, which says the key stayed held.
            Phase::Running if manual => {
                // Only an auto-renewed lease is lost to its holder (its signal aborts);
                // one without renewals simply lapses, as its holder was told it would.
                if renews || self.run_pending(exec) {
                    self.effects.push_back(Effect::Lost { exec, layer });
                }
                self.wind_down(exec, Outcome::Value);
            }
            Phase::Running => self.effects.push_back(Effect::Lost { exec, layer }),
            // An outer lock lost while an inner one is still being acquired: the
            // callback never starts (so there is no signal to abort, no onLockLost).
            Phase::Acquiring => self.wind_down(exec, Outcome::Error(LockError::LostBeforeStart { key })),
            Phase::Releasing => {}
        }
    }
}
