//! The engine: every decision of every execution, with no I/O of its own.
//!
//! The host (a binding) calls in when something happens (an execution starts, a store
//! answers, a callback settles, a timer is due) and reads back [`Effect`]s: store calls
//! to make, callbacks to run, losses to signal, executions to settle. A memory store
//! answers inside the call, so an uncontended execution on it is two plain calls
//! ([`Engine::start`], [`Engine::finish`]) and no effect at all.
//!
//! ## Parts
//! Each file adds one part of `impl Engine`; this one holds the struct, its
//! constructors, the effect queue and the helpers every part shares.
//! - `executions.rs`: the calls a host makes (start, finish, cancel, store answers).
//! - `acquire.rs`: a try of the store, and what its answer leads to.
//! - `waiting.rs`: the queues of a held key, announced releases and grants.
//! - `renewal.rs`: a held lease renewed every ttl/3, extended, or lost.
//! - `release.rs`: winding an execution down, releasing innermost first, settling.
//! - `handoff.rs`: a JS store's lease handed from one execution here to the next.
//! - `schedule.rs`: the per-lock timers, the host's one timer, a fake clock's advance.
//! - `memory.rs`: the memory stores as a user calls them directly.
//! - `fast.rs`: the words shared with the host's fast path, fast holds it hands over,
//!   and the inner locks under way that it must leave to the engine.
//! - `state.rs`: what is kept per execution and per lock.

mod acquire;
mod executions;
mod fast;
mod handoff;
mod inspect;
mod memory;
mod release;
mod renewal;
mod schedule;
mod state;
mod waiting;

use std::collections::VecDeque;
use std::fmt;
use std::rc::Rc;

use crate::clock::{Clock, FakeClock};
use crate::defined::DefinedLocks;
use crate::error::StoreMethod;
use crate::fast_hash::IdMap;
use crate::fast_words::FastWords;
use crate::fencing::TokenFloors;
use crate::memory_store::MemoryStore;
use crate::owner_ids::OwnerIds;
use crate::timers::TimerQueue;
use crate::types::{Effect, Event, StoreRef, Wake};
use crate::waiters::WaitQueues;
use crate::Millis;
use state::{layer_at, Acquiring, Exec, Layer, LayerState, Origin, Request};
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
    /// The token counter and busy counts the host's fast path reads (see `fast.rs`).
    words: Rc<FastWords>,
    dropped_memory: Vec<bool>,
    free_memory: Vec<u32>,
    execs: IdMap<u32, Exec>,
    queues: WaitQueues<StoreRef>,
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
    /// JS stores that hand leases over locally, with their turns (see `handoff.rs`).
    turns: Vec<(u32, Millis)>,
    /// The locks (execution, layer) that hold a lease on such a store.
    holders: Vec<(u32, u32)>,
    /// The last id given to a parked lease's execution (see `handoff.rs`).
    next_parked: u32,
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
        let words = Rc::new(FastWords::default());
        Engine {
            clock,
            fake: None,
            owners,
            floors,
            memory: vec![MemoryStore::new(DEFAULT_MEMORY_STORE, Rc::clone(&words))],
            words,
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
            turns: Vec::new(),
            holders: Vec::new(),
            next_parked: 0,
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

    /// Makes every owner id drawn from now on start with `prefix`
    /// ([`OwnerIds::set_prefix`]): the host says there which process the ids are from.
    pub fn set_owner_prefix(&mut self, prefix: &str) {
        self.owners.set_prefix(prefix);
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
    /// execution, its token in the fast words' handoff word: the host runs it at once
    /// instead of draining effects. Otherwise takes nothing.
    pub fn take_sole_run(&mut self) -> Option<u32> {
        match self.effects.front() {
            Some(&Effect::Run { exec, token }) if self.effects.len() == 1 => {
                self.effects.clear();
                self.words.set_handoff_token(token);
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

    /// Queues a `method` call of host store `store` for `origin`; its request id.
    fn send(&mut self, origin: Origin, method: StoreMethod, store: u32, now: Millis) -> u32 {
        let request = self.next_request_id();
        let layer_of = match origin {
            Origin::Layer { exec, layer } => Some((exec, layer)),
            Origin::Abandoned { .. } => None,
        };
        let ttl = layer_of.map_or(0, |(exec, layer)| layer_at(&self.execs, exec, layer).spec.ttl);
        self.requests.insert(request, Request { origin, method, sent_at: now, ttl });
        if let Some((exec, layer)) = layer_of {
            let l = layer_at(&self.execs, exec, layer);
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
                handed_over: l.inherited,
            });
        }
        request
    }

    /// A request id that is not 0 and not in use.
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

    /// Emits a telemetry event, when the execution asked for them.
    fn event(&mut self, exec: u32, layer: u32, event: Event) {
        if self.execs.get(&exec).is_some_and(|e| e.options.telemetry) {
            self.effects.push_back(Effect::Event { exec, layer, event });
        }
    }

    /// Answers `count` pending `extend()` calls of `exec` with `ok`, one effect each.
    fn answer_extends(&mut self, exec: u32, ok: bool, count: u32) {
        for _ in 0..count {
            self.effects.push_back(Effect::Extended { exec, ok });
        }
    }

    /// Whether `exec`'s `run` effect is still waiting for the host to take it.
    fn run_pending(&self, exec: u32) -> bool {
        self.effects.iter().any(|effect| matches!(effect, Effect::Run { exec: e, .. } if *e == exec))
    }

    /// Lock `layer` of `exec`, if the execution is live.
    fn layer_mut(&mut self, exec: u32, layer: u32) -> Option<&mut Layer> {
        self.execs.get_mut(&exec)?.layers.get_mut(layer as usize)
    }

    /// The acquisition of lock `layer` of `exec`, while it is acquiring.
    fn acquiring_mut(&mut self, exec: u32, layer: u32) -> Option<&mut Acquiring> {
        match &mut self.layer_mut(exec, layer)?.state {
            LayerState::Acquiring(a) => Some(a),
            _ => None,
        }
    }
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
