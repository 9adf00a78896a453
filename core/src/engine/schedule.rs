//! Time: the engine's timers, the host's one timer, and a fake clock's advance.

use super::state::TryResult;
use super::state::{is_live, keeps_alive, LayerState};
use super::Engine;
use super::MAX_FAKE_TIME;
use crate::clock::Clock;
use crate::error::{ArgError, LockError, StoreFailure};
use crate::text::text;
use crate::timers::TimerTarget;
use crate::types::{HostTimer, Outcome};
use crate::Millis;

impl Engine {
    /// Runs every timer due at the clock's current time.
    pub fn run_due(&mut self) {
        self.tick();
        let now = self.time;
        while let Some((at, target)) = self.next_live_timer() {
            if at > now {
                break;
            }
            let kept_alive = self.layer_mut(target.exec, target.layer).is_some_and(|l| {
                l.timer_at = None;
                std::mem::take(&mut l.timer_keeps_alive)
            });
            self.timers.pop(true, kept_alive);
            self.on_layer_timer(target.exec, target.layer);
        }
    }

    /// The host's timer fired, or the host knows it never will (it was armed through a
    /// `setTimeout` that is no longer the one in use): it is no longer armed. Runs what
    /// is due.
    pub fn on_timer(&mut self) {
        self.host_armed = None;
        self.host_refed = false;
        self.run_due();
    }

    /// Moves a fake clock forward by `ms`, running every timer on the way at its own
    /// instant, in order.
    ///
    /// # Errors
    /// An argument error when the engine's clock is not fake.
    pub fn advance(&mut self, ms: Millis) -> Result<(), LockError> {
        let Some(fake) = self.fake.clone() else {
            return Err(ArgError::type_error("timeProvider", "only a fake time provider can be advanced".into()).into());
        };
        if ms > MAX_FAKE_TIME - fake.now() {
            return Err(ArgError::range(
                "ms",
                text!(
                    "advance(",
                    ms,
                    ") would move the fake clock past ",
                    MAX_FAKE_TIME,
                    " ms (it reads ",
                    fake.now(),
                    ")"
                ),
            )
            .into());
        }
        let target = fake.now() + ms;
        while let Some((at, _)) = self.next_live_timer() {
            if at > target {
                break;
            }
            fake.set(at);
            self.run_due();
        }
        fake.set(target);
        self.run_due();
        Ok(())
    }

    /// Moves a fake clock without running timers, to model a host that was too busy to
    /// run them. Only for tests.
    #[doc(hidden)]
    pub fn advance_clock_only_for_tests(&mut self, ms: Millis) {
        if let Some(fake) = &self.fake {
            fake.set(fake.now().saturating_add(ms));
        }
    }

    /// The earliest live timer.
    pub fn next_deadline(&mut self) -> Option<Millis> {
        self.next_live_timer().map(|(at, _)| at)
    }

    /// What a host with a single timer must do now so that [`Engine::on_timer`]
    /// is called no later than the earliest deadline, and so that the timer keeps the
    /// process alive only while some engine timer that keeps it alive is live: one that
    /// something observable waits on (a waiter's try or deadline, the answer of a JS
    /// store, the renewal of a JS store's lease). The renewal of a memory-store lease
    /// and the expiry of a lease nobody renews change nothing anyone waits for, so they
    /// never keep a process alive on their own. Fake engines never ask for a host timer.
    ///
    /// The engine does not trust the host's timer to fire: a deadline already past runs
    /// here, on the call that asks, and a host timer that should have fired by now and
    /// has not is taken as lost and armed again.
    pub fn host_timer(&mut self) -> HostTimer {
        if self.fake.is_some() {
            return HostTimer::Keep;
        }
        let now = self.time;
        if self.next_deadline().is_some_and(|at| at <= now) {
            self.run_due();
        }
        if self.host_armed.is_some_and(|armed| armed < now) {
            self.host_armed = None;
        }
        let keep_alive = self.timers.keeps_alive();
        match self.next_deadline() {
            None if self.host_refed => {
                self.host_refed = false;
                HostTimer::Unref
            }
            None => HostTimer::Keep,
            Some(at) => match self.host_armed {
                Some(armed) if armed <= at && self.host_refed == keep_alive => HostTimer::Keep,
                Some(armed) if armed <= at => {
                    self.host_refed = keep_alive;
                    if keep_alive {
                        HostTimer::Ref
                    } else {
                        HostTimer::Unref
                    }
                }
                _ => {
                    self.host_armed = Some(at);
                    self.host_refed = keep_alive;
                    HostTimer::Arm { at, keep_alive }
                }
            },
        }
    }

    /// Lock `layer` of `exec`'s timer is due: does what is due.
    pub(super) fn on_layer_timer(&mut self, exec: u32, layer: u32) {
        let now = self.time;
        let Some(l) = self.layer_mut(exec, layer) else { return };
        let ttl = l.spec.ttl;
        let due = match &mut l.state {
            LayerState::Acquiring(a) => match a.in_flight {
                Some((request, sent_at)) if now >= sent_at.saturating_add(ttl) => {
                    a.in_flight = None;
                    Due::TryTimedOut { request, sent_at }
                }
                Some(_) => Due::Rearm,
                None if a.next_try.is_some_and(|t| t <= now) => {
                    a.next_try = None;
                    Due::Try
                }
                None => Due::Rearm,
            },
            LayerState::Held(h) if now >= h.expires_at => Due::Lose,
            LayerState::Held(h) if h.linger_until.is_some_and(|t| t <= now) => Due::Unpark,
            LayerState::Held(h) if h.in_flight.is_none() && h.renew_at.is_some_and(|t| t <= now) => Due::Renew,
            LayerState::Held(_) => Due::Rearm,
            LayerState::Releasing { request, deadline, .. } if now >= *deadline => {
                Due::ReleaseTimedOut { request: *request }
            }
            _ => Due::Nothing,
        };
        match due {
            Due::TryTimedOut { request, sent_at } => {
                // A lease granted this late is already worthless.
                self.abandon(request);
                self.on_try(exec, layer, sent_at, TryResult::Failed(StoreFailure::TimedOut { after_ms: ttl }));
            }
            Due::Try => self.try_acquire(exec, layer),
            Due::Renew => self.renew(exec, layer),
            Due::Lose => self.lose(exec, layer, false),
            // Nobody here asked for the parked lease in time: back to the store.
            Due::Unpark => self.wind_down(exec, Outcome::Value),
            Due::ReleaseTimedOut { request } => {
                self.abandon(request);
                self.requests.remove(&request);
                self.on_release(exec, layer, Err(StoreFailure::TimedOut { after_ms: ttl }));
            }
            Due::Rearm => {
                self.arm_acquiring(exec, layer);
                self.arm_held(exec, layer);
            }
            Due::Nothing => {}
        }
    }

    /// Points the layer's one timer at `at` (or nowhere).
    pub(super) fn arm(&mut self, exec: u32, layer: u32, at: Option<Millis>) {
        let Some(e) = self.execs.get_mut(&exec) else { return };
        let Some(l) = e.layers.get_mut(layer as usize) else { return };
        let keeps = at.is_some() && keeps_alive(l);
        if l.timer_at == at {
            if l.timer_keeps_alive != keeps {
                l.timer_keeps_alive = keeps;
                self.timers.keep_alive_changed(keeps);
            }
            return;
        }
        let (was_armed, kept_alive) = (l.timer_at.is_some(), l.timer_keeps_alive);
        l.timer_generation = l.timer_generation.wrapping_add(1);
        l.timer_at = at;
        l.timer_keeps_alive = keeps;
        let generation = l.timer_generation;
        if was_armed {
            let execs = &self.execs;
            self.timers.cancelled(kept_alive, |t| is_live(execs, t));
        }
        if let Some(at) = at {
            self.timers.push(at, TimerTarget { exec, layer, generation }, keeps);
        }
    }

    /// The earliest timer still armed, dropping stale ones on the way.
    pub(super) fn next_live_timer(&mut self) -> Option<(Millis, TimerTarget)> {
        while let Some((at, target)) = self.timers.peek() {
            if is_live(&self.execs, &target) {
                return Some((at, target));
            }
            self.timers.pop(false, false);
        }
        None
    }
}

#[derive(Debug)]
/// What a layer's timer found due when it fired.
enum Due {
    Try,
    TryTimedOut { request: u32, sent_at: Millis },
    Renew,
    Lose,
    Unpark,
    ReleaseTimedOut { request: u32 },
    Rearm,
    Nothing,
}
