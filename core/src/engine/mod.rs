//! The engine: every decision of every execution, with no I/O of its own.
//!
//! The host (a binding) calls in when something happens (an execution starts, a store
//! answers, a callback settles, a timer is due) and reads back [`Effect`]s: store calls
//! to make, callbacks to run, losses to signal, executions to settle. A memory store
//! answers inside the call, so an uncontended execution on it is two plain calls
//! ([`Engine::start`], [`Engine::finish`]) and no effect at all.

mod acquire;
mod executions;
mod memory;
mod release;
mod renewal;
mod state;
mod waiting;

use crate::clock::{Clock, FakeClock};
use crate::defined::DefinedLocks;
use crate::error::{ArgError, LockError, StoreFailure, StoreMethod};
use crate::fast_hash::IdMap;
use crate::fencing::TokenFloors;
use crate::memory_store::MemoryStore;
use crate::owner_ids::OwnerIds;
use crate::timers::{TimerQueue, TimerTarget};
use crate::types::{Effect, Event, HostTimer, StoreRef, Wake};
use crate::waiters::WaitQueues;
use crate::Millis;
use acquire::TryResult;
use state::{is_live, keeps_alive, Acquiring, Exec, Layer, LayerState, Origin, Request};
use std::collections::VecDeque;
use std::fmt;

/// The lock engine of one time source: its memory stores, its executions, its timers.
///
/// All of it runs on the thread that calls it. Nothing in it is `Send`, by design: the
/// host drives it from its event loop, so no call ever crosses a thread.
pub struct Engine {
    clock: Box<dyn Clock>,
    fake: Option<FakeClock>,
    owners: OwnerIds,
    /// Memory stores, by id (ids are checked at start). A store the host dropped is
    /// emptied and its id given to the next store created.
    memory: Vec<MemoryStore>,
    dropped_memory: Vec<bool>,
    free_memory: Vec<u32>,
    execs: IdMap<u32, Exec>,
    queues: WaitQueues,
    requests: IdMap<u32, Request>,
    /// Locks defined ahead by [`Engine::define_lock`].
    defined: DefinedLocks,
    /// The layers of finished single-lock executions, kept for reuse so that an
    /// execution on a defined lock allocates no key or owner id of its own.
    spare_layers: Vec<Vec<Layer>>,
    /// Abandoned acquires still kept (oldest first), so a late grant can be released.
    abandoned: VecDeque<u32>,
    next_request: u32,
    timers: TimerQueue,
    effects: VecDeque<Effect>,
    host_armed: Option<Millis>,
    host_refed: bool,
    /// The time of the current call: the clock is read once per call into the engine
    /// (reading it costs more than most decisions).
    time: Millis,
    /// New queue heads to try because the head before them gave up, and whether they are
    /// being tried (see [`Engine::try_new_head`]).
    heads_to_try: VecDeque<u32>,
    trying_heads: bool,
    /// The largest token granted per recent key of a JS store: a store whose tokens go
    /// back is caught (see [`crate::fencing`]).
    floors: TokenFloors,
}

impl fmt::Debug for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Engine")
            .field("now", &self.time)
            .field("executions", &self.execs.len())
            .field("requests", &self.requests.len())
            .field("live_timers", &self.timers.live())
            .finish_non_exhaustive()
    }
}

/// How many abandoned requests (acquires whose late grant would be released, and the
/// releases of such grants) an engine keeps waiting for an answer.
const MAX_ABANDONED_ACQUIRES: usize = 1024;

/// How many finished executions' layers an engine keeps for reuse.
const MAX_SPARE: usize = 16;

/// The latest time a fake clock reaches: the largest integer a JavaScript number holds
/// exactly. Leases and deadlines are counted from it with room to spare; a clock near
/// `u64::MAX` would saturate `now + ttl` into `now`, and every lease would lapse at once.
pub const MAX_FAKE_TIME: Millis = (1 << 53) - 1;

/// The default memory store every engine starts with.
pub const DEFAULT_MEMORY_STORE: u32 = 0;

impl Engine {
    /// An engine on the host's clock, drawing owner ids from `seed` (256 bits of host
    /// entropy). It starts with one memory store, [`DEFAULT_MEMORY_STORE`].
    pub fn new(clock: Box<dyn Clock>, seed: [u8; 32]) -> Self {
        let mut owners = OwnerIds::new(seed);
        let floors = TokenFloors::new([owners.next_u64(), owners.next_u64()]);
        Engine {
            clock,
            fake: None,
            owners,
            floors,
            memory: vec![MemoryStore::default()],
            dropped_memory: vec![false],
            free_memory: Vec::new(),
            execs: IdMap::default(),
            queues: WaitQueues::default(),
            requests: IdMap::default(),
            abandoned: VecDeque::new(),
            defined: DefinedLocks::default(),
            spare_layers: Vec::new(),
            next_request: 0,
            timers: TimerQueue::default(),
            effects: VecDeque::new(),
            host_armed: None,
            host_refed: false,
            time: 0,
            heads_to_try: VecDeque::new(),
            trying_heads: false,
        }
    }

    /// An engine on a [`FakeClock`] reading `start` (at most [`MAX_FAKE_TIME`]), moved
    /// only by [`Engine::advance`].
    pub fn with_fake_clock(start: Millis, seed: [u8; 32]) -> Self {
        let clock = FakeClock::new(start.min(MAX_FAKE_TIME));
        let mut engine = Engine::new(Box::new(clock.clone()), seed);
        engine.fake = Some(clock);
        engine
    }

    /// The engine's current time: never earlier than a time it already acted on, even
    /// when the host's clock is faked and set back meanwhile.
    pub fn now(&self) -> Millis {
        self.clock.now().max(self.time)
    }

    /// Reads the clock for the call that is starting. Time never goes back.
    fn tick(&mut self) {
        self.time = self.time.max(self.clock.now());
    }

    /// Whether the engine runs on a fake clock.
    pub fn is_fake(&self) -> bool {
        self.fake.is_some()
    }

    /// Whether effects wait to be taken.
    pub fn has_effects(&self) -> bool {
        !self.effects.is_empty()
    }

    /// Takes the next effect.
    pub fn take_effect(&mut self) -> Option<Effect> {
        self.effects.pop_front()
    }

    /// When the only pending effect is an [`Effect::Run`] (a release on a memory store
    /// granted the key to the next waiter inside the call), takes it and returns its
    /// execution: the host runs it at once instead of draining effects. Otherwise
    /// takes nothing.
    pub fn take_sole_run(&mut self) -> Option<u32> {
        match self.effects.front() {
            Some(&Effect::Run { exec }) if self.effects.len() == 1 => {
                self.effects.clear();
                Some(exec)
            }
            _ => None,
        }
    }

    /// The only pending effect, if there is exactly one.
    pub fn sole_effect(&self) -> Option<&Effect> {
        match self.effects.len() {
            1 => self.effects.front(),
            _ => None,
        }
    }

    /// The execution waiting for the answer to `request` (none for an unknown or
    /// abandoned request).
    pub fn request_exec(&self, request: u32) -> Option<u32> {
        match self.requests.get(&request)?.origin {
            Origin::Layer { exec, .. } => Some(exec),
            Origin::Abandoned { .. } => None,
        }
    }

    fn send(&mut self, origin: Origin, method: StoreMethod, store: u32, now: Millis) -> u32 {
        let request = self.next_request_id();
        let layer_of = match origin {
            Origin::Layer { exec, layer } => Some((exec, layer)),
            Origin::Abandoned { .. } => None,
        };
        let ttl = layer_of.map_or(0, |(exec, layer)| self.execs[&exec].layers[layer as usize].spec.ttl);
        self.requests.insert(request, Request { origin, method, sent_at: now, ttl });
        if let Some((exec, layer)) = layer_of {
            let l = &self.execs[&exec].layers[layer as usize];
            let queue = method == StoreMethod::Acquire
                && matches!(l.spec.store, StoreRef::External { wake: Wake::Grant, .. })
                && matches!(&l.state, LayerState::Acquiring(a) if a.deadline.is_none_or(|d| d > now));
            self.effects.push_back(Effect::StoreCall {
                request,
                exec,
                layer,
                store,
                method,
                key: l.spec.key.clone(),
                owner: l.owner.clone(),
                ttl: l.spec.ttl,
                queue,
            });
        }
        request
    }

    fn next_request_id(&mut self) -> u32 {
        loop {
            self.next_request = self.next_request.wrapping_add(1);
            // 0 stands for "no request" where effects cite the one whose thrown error is a
            // cause: skipped when the counter wraps (after 2^32 store calls, days of a
            // busy process).
            if self.next_request != 0 && !self.requests.contains_key(&self.next_request) {
                return self.next_request;
            }
        }
    }

    fn event(&mut self, exec: u32, layer: u32, event: Event) {
        if self.execs.get(&exec).is_some_and(|e| e.options.telemetry) {
            self.effects.push_back(Effect::Event { exec, layer, event });
        }
    }

    fn layer_mut(&mut self, exec: u32, layer: u32) -> Option<&mut Layer> {
        self.execs.get_mut(&exec)?.layers.get_mut(layer as usize)
    }

    fn acquiring_mut(&mut self, exec: u32, layer: u32) -> Option<&mut Acquiring> {
        match &mut self.layer_mut(exec, layer)?.state {
            LayerState::Acquiring(a) => Some(a),
            _ => None,
        }
    }
}

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
            self.on_timer(target.exec, target.layer);
        }
    }

    /// The host's timer fired, or the host knows it never will (it was armed through a
    /// `setTimeout` that is no longer the one in use): it is no longer armed. Runs what
    /// is due.
    pub fn on_host_timer(&mut self) {
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
                format!("advance({ms}) would move the fake clock past {MAX_FAKE_TIME} ms (it reads {})", fake.now()),
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

    /// What a host with a single timer must do now so that [`Engine::on_host_timer`]
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

    fn on_timer(&mut self, exec: u32, layer: u32) {
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
    fn arm(&mut self, exec: u32, layer: u32, at: Option<Millis>) {
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

    fn next_live_timer(&mut self) -> Option<(Millis, TimerTarget)> {
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
    ReleaseTimedOut { request: u32 },
    Rearm,
    Nothing,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_ids_skip_zero_when_the_counter_wraps() {
        let mut e = Engine::with_fake_clock(0, [1; 32]);
        e.next_request = u32::MAX - 1;
        assert_eq!(e.next_request_id(), u32::MAX);
        assert_eq!(e.next_request_id(), 1);
    }
}
