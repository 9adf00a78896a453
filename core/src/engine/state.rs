//! What the engine keeps per execution and per lock while it runs.

use crate::error::{StoreFailure, StoreMethod};
use crate::fast_hash::IdMap;
use crate::polling::Backoff;
use crate::timers::TimerTarget;
use crate::types::{ExecOptions, LockSpec, Outcome, StoreRef};
use crate::Millis;

/// A lock being acquired: its deadline, its place in the queue, its try in flight.
#[derive(Debug)]
pub(super) struct Acquiring {
    pub(super) deadline: Option<Millis>,
    pub(super) backoff: Backoff,
    pub(super) queued: bool,
    pub(super) in_flight: Option<(u32, Millis)>,
    pub(super) next_try: Option<Millis>,
    /// A release was announced while a try was in flight: that try may have been
    /// answered "held" just before the release, so the next try goes at once.
    pub(super) release_seen: bool,
    /// A try of a JS store was sent: a granting store may have queued this owner.
    pub(super) asked_store: bool,
    /// Permits: the key's token floor when the last try was sent. Holders' grants may be
    /// answered in any order; each must only exceed what was seen before it was asked.
    pub(super) sent_floor: u64,
}

/// A lock held: when its lease ends, when it is renewed next.
#[derive(Debug)]
pub(super) struct Held {
    pub(super) expires_at: Millis,
    pub(super) renew_at: Option<Millis>,
    /// The renewal in flight: request, when it was sent, and the ttl it asked for.
    pub(super) in_flight: Option<(u32, Millis, Millis)>,
    pub(super) retry: Backoff,
    /// `extend()` calls waiting for an answer.
    pub(super) extend_pending: u32,
    /// On a store that hands leases over locally: the store's grant this lease came
    /// from, which bounds the tokens handed out after it (see `handoff.rs`).
    pub(super) grant: Option<Grant>,
    /// A lease released and kept for the next execution here that asks: until when.
    pub(super) linger_until: Option<Millis>,
}

/// The store's grant a lease handed over locally started from.
#[derive(Debug, Clone, Copy)]
pub(super) struct Grant {
    /// The token the store granted; local tokens count up from it.
    pub(super) token: u64,
    /// When the grant was answered, on the engine's microsecond clock.
    pub(super) answered_us: u64,
    /// When the try it answered was sent: this process's turn counts from then.
    pub(super) turn_from: Millis,
}

/// Where one lock of an execution stands.
#[derive(Debug)]
pub(super) enum LayerState {
    Idle,
    Acquiring(Acquiring),
    Held(Held),
    /// Lost. `release_by`: the store may still hold this owner's lease (the loss was a
    /// timeout, not a refusal), so a best-effort release is sent, waited for until then.
    Lost {
        release_by: Option<Millis>,
    },
    Releasing {
        request: u32,
        deadline: Millis,
        was_live: bool,
        after_loss: bool,
    },
    Done,
}

/// One lock of an execution (a layer: locks nest, outermost first).
#[derive(Debug)]
pub(super) struct Layer {
    pub(super) spec: LockSpec,
    pub(super) owner: String,
    pub(super) token: Option<u64>,
    pub(super) started_at: Millis,
    pub(super) state: LayerState,
    pub(super) timer_at: Option<Millis>,
    pub(super) timer_generation: u32,
    /// Whether the armed timer keeps the process alive ([`keeps_alive`]).
    pub(super) timer_keeps_alive: bool,
    /// Whether the release deleted this owner's live lease.
    pub(super) released_as_owner: bool,
    /// The lease was handed over from another execution of this engine: its owner is
    /// that acquire's, which the host has not seen for this lock.
    pub(super) inherited: bool,
}

impl Layer {
    pub(super) fn new(spec: LockSpec) -> Self {
        Layer {
            spec,
            owner: String::new(),
            token: None,
            started_at: 0,
            state: LayerState::Idle,
            timer_at: None,
            timer_generation: 0,
            timer_keeps_alive: false,
            released_as_owner: false,
            inherited: false,
        }
    }

    /// Makes a finished layer as new, for `spec`, keeping the memory of its strings.
    pub(super) fn reset(&mut self, spec: &LockSpec) {
        self.spec.store = spec.store;
        self.spec.key.clone_from(&spec.key);
        self.spec.ttl = spec.ttl;
        self.spec.wait = spec.wait;
        self.spec.linger = spec.linger;
        self.spec.name.clone_from(&spec.name);
        self.spec.limit = spec.limit;
        self.spec.weight = spec.weight;
        self.owner.clear();
        self.token = None;
        self.started_at = 0;
        self.state = LayerState::Idle;
        self.timer_at = None;
        self.timer_generation = 0;
        self.timer_keeps_alive = false;
        self.released_as_owner = false;
        self.inherited = false;
    }
}

/// Where an execution stands: acquiring its locks, running its callback, releasing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    Acquiring,
    Running,
    Releasing,
}

/// One execution: its locks, its options, and how it will settle.
#[derive(Debug)]
pub(super) struct Exec {
    pub(super) layers: Vec<Layer>,
    pub(super) options: ExecOptions,
    pub(super) phase: Phase,
    pub(super) lost: Option<u32>,
    pub(super) completion: Option<Outcome>,
}

/// Who waits for the answer to a store call.
#[derive(Debug)]
pub(super) enum Origin {
    /// Lock `layer` of `exec` waits for this answer.
    Layer { exec: u32, layer: u32 },
    /// Nobody waits any more. An acquire keeps what is needed to release a lease that
    /// is granted anyway.
    Abandoned { late_grant: Option<Box<(u32, String, String)>> },
}

/// A store call awaiting its answer.
#[derive(Debug)]
pub(super) struct Request {
    pub(super) origin: Origin,
    pub(super) method: StoreMethod,
    pub(super) sent_at: Millis,
    /// The ttl asked for (acquire, renew).
    pub(super) ttl: Millis,
}

pub(super) fn current_layer(e: &Exec) -> u32 {
    e.layers.iter().position(|l| matches!(l.state, LayerState::Acquiring(_))).unwrap_or(0) as u32
}

/// Whether the timer of layer `l` keeps the process alive: not for a held lease on the
/// memory store (renewing it, or letting it expire, changes nothing anyone waits for),
/// nor for the expiry of a lease that nothing renews or extends; for everything else,
/// whose firing answers someone (a waiter, a store call awaited, a JS store's lease
/// that other processes see).
pub(super) fn keeps_alive(l: &Layer) -> bool {
    match &l.state {
        LayerState::Held(h) => {
            matches!(l.spec.store, StoreRef::External { .. }) && (h.renew_at.is_some() || h.in_flight.is_some())
        }
        _ => true,
    }
}

pub(super) fn is_live(execs: &IdMap<u32, Exec>, t: &TimerTarget) -> bool {
    execs
        .get(&t.exec)
        .and_then(|e| e.layers.get(t.layer as usize))
        .is_some_and(|l| l.timer_generation == t.generation && l.timer_at.is_some())
}

// The engine reaches what it knows to exist (a live execution, its locks, a memory store
// by a checked id) through these: a broken invariant panics here, and since every file
// with a panic adds its path to the wasm module, only this one's is carried.

/// Execution `exec`, which is live.
pub(super) fn exec_at(execs: &IdMap<u32, Exec>, exec: u32) -> &Exec {
    &execs[&exec]
}

/// Lock `layer` of live execution `exec`.
pub(super) fn layer_at(execs: &IdMap<u32, Exec>, exec: u32, layer: u32) -> &Layer {
    &execs[&exec].layers[layer as usize]
}

/// Item `index` of `items`, which holds it.
pub(super) fn at<T>(items: &[T], index: u32) -> &T {
    &items[index as usize]
}

/// Item `index` of `items`, which holds it.
pub(super) fn at_mut<T>(items: &mut [T], index: u32) -> &mut T {
    &mut items[index as usize]
}

/// The acquisition of a lock known to be acquiring.
pub(super) fn still_acquiring(acquiring: Option<&mut Acquiring>) -> &mut Acquiring {
    acquiring.expect("acquiring")
}

/// Ends the acquisition of `l`, which is acquiring; `l` is done.
pub(super) fn take_acquiring(l: &mut Layer) -> Acquiring {
    let LayerState::Acquiring(a) = std::mem::replace(&mut l.state, LayerState::Done) else { unreachable!() };
    a
}

/// A release was asked of a lock that holds nothing to release.
pub(super) fn unreleasable() -> ! {
    unreachable!("only releasable layers are released")
}

#[derive(Debug)]
/// What a try of the store came to.
pub(super) enum TryResult {
    Granted(u64),
    Held {
        until: Option<Millis>,
    },
    /// The key is held or waited for with this limit, not the lock's.
    Mismatch {
        limit: u32,
    },
    Failed(StoreFailure),
}

#[derive(Debug, Clone, Copy)]
/// Why the first waiter of a key left its queue.
pub(super) enum HeadLeft {
    Acquired,
    GaveUp,
}
