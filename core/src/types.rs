//! The public types the host and the engine exchange: locks, options, effects, answers.

use crate::error::{LockError, StoreFailure, StoreMethod};
use crate::Millis;

// Named by the documentation's links only.
#[cfg(doc)]
use crate::Engine;
#[cfg(doc)]
use crate::MemoryStore;

/// Where a lock's leases live.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StoreRef {
    /// A [`MemoryStore`] owned by this engine, answered inside the engine's calls.
    Memory(u32),
    /// A store the host calls (a JavaScript object). `wake` says how its waiters learn
    /// that the key may be theirs.
    External {
        /// The host's id for the store.
        id: u32,
        /// How waiters are woken.
        wake: Wake,
    },
}

/// How the waiters of an external store learn that a key was released.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Wake {
    /// They are not told: the first waiter polls with a backoff.
    Poll,
    /// The store announces each release ([`Engine::released`]); the first waiter tries
    /// at once, and polls as a fallback.
    Announce,
    /// The store queues the waiters that asked for a held key and hands the lease to the
    /// first of them in the release itself ([`Engine::granted`]): no try is needed
    /// after a release. Each first waiter asks as soon as it becomes first, so that the
    /// store queues it; polls keep it queued and are the fallback for a lost message.
    Grant,
}

/// One lock of an execution, validated.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LockSpec {
    /// The store holding the lease.
    pub store: StoreRef,
    /// The key; never empty.
    pub key: String,
    /// The lease length, at least 1 ms.
    pub ttl: Millis,
    /// How long to wait for a held lock; `None` waits as long as it takes.
    pub wait: Option<Millis>,
    /// On a store that hands leases over locally: how long a released lease stays with
    /// this engine for the next execution that asks for it (0: none).
    pub linger: Millis,
    /// The name the user gave the lock, for people reading its owner ids ('' for none):
    /// each owner drawn for it reads `<host prefix><name>:<random hex>`.
    pub name: String,
    /// How many permits the key has (1: an exclusive lock, [`crate::permits::SHARED_LIMIT`]: a key used
    /// with shared and exclusive modes).
    pub limit: u32,
    /// How many of them this lock takes: 1 to `limit`.
    pub weight: u32,
}

impl LockSpec {
    /// Whether the lock takes permits of a key that several may hold at once.
    pub fn has_permits(&self) -> bool {
        self.limit > 1
    }
}

/// How an execution behaves besides its locks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExecOptions {
    /// Renew every held lease every ttl/3 (pipelines always do; manual leases opt in).
    pub renew: bool,
    /// Emit [`Effect::Event`]s for telemetry.
    pub telemetry: bool,
    /// A manual lease: no callback; [`Engine::finish`] is its `release()`, which settles
    /// with [`Outcome::NotHeld`] when the lease had lapsed or was taken over, and with
    /// [`LockError::StoreFailed`] when the store failed to release it.
    pub manual: bool,
}

impl Default for ExecOptions {
    fn default() -> Self {
        ExecOptions { renew: true, telemetry: false, manual: false }
    }
}

/// How an execution settles once its leases are released.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Resolve with the callback's value (also after a loss the callback ignored).
    Value,
    /// Reject with the callback's own error.
    CallbackError,
    /// A manual lease was released, but it had lapsed or been taken over first (so
    /// nothing of its owner's was deleted): its `release()` answers false.
    NotHeld,
    /// Reject with this error. For [`LockError::Lost`] the callback's error is its
    /// cause; for [`LockError::StoreFailed`] with [`StoreFailure::Threw`] the store's.
    Error(LockError),
}

/// What the host is asked to do, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Call `store[method](key, owner, ttl)` and report the result with
    /// [`Engine::answer`] under `request`.
    StoreCall {
        /// The request id to answer with.
        request: u32,
        /// The execution that waits for the answer (0 for a clean-up call of none).
        exec: u32,
        /// Which lock of `exec` (0 when `exec` is 0). Every renew and release of a lock
        /// follows an acquire of that same lock with the same key and owner.
        layer: u32,
        /// The host's store id.
        store: u32,
        /// Which method to call.
        method: StoreMethod,
        /// The key.
        key: String,
        /// The owner id.
        owner: String,
        /// The lease length asked for (unused by `release`).
        ttl: Millis,
        /// An acquire on a store that grants on release ([`Wake::Grant`]): true when a
        /// "held" answer leaves the execution waiting (its `wait` has not run out), so
        /// the store should queue the owner for a grant.
        queue: bool,
        /// The lease was handed over from another execution of the engine: its renew or
        /// release names its key and owner, which the host has not seen for this lock.
        handed_over: bool,
    },
    /// Every lock of the execution is held: run its callback (or hand out the lease).
    Run {
        /// The execution.
        exec: u32,
        /// The fencing token of its innermost lock, as granted: a manual lease over
        /// before the host took this effect is no longer in the engine to ask.
        token: u64,
    },
    /// Lock `layer` of a running execution was lost: abort the callback's signal with
    /// a `LockLostError` and call that lock's `onLockLost`.
    Lost {
        /// The execution.
        exec: u32,
        /// Which of its locks, outermost first.
        layer: u32,
    },
    /// The execution is over; settle its promise this way.
    Settled {
        /// The execution.
        exec: u32,
        /// How.
        outcome: Outcome,
    },
    /// An [`Engine::extend`] that went to the store is answered.
    Extended {
        /// The execution (a manual lease).
        exec: u32,
        /// Whether the lease was pushed out.
        ok: bool,
    },
    /// Start (`watch: true`) or stop listening for releases of `key` on an announcing
    /// store: there are waiters for it, or no longer.
    Watch {
        /// The host's store id.
        store: u32,
        /// The key.
        key: String,
        /// Start or stop.
        watch: bool,
    },
    /// A telemetry event for lock `layer` of `exec`.
    Event {
        /// The execution.
        exec: u32,
        /// Which of its locks.
        layer: u32,
        /// What happened.
        event: Event,
    },
}

/// Telemetry: what happened to a lock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// The lease was acquired after waiting `waited` ms.
    Acquired {
        /// Milliseconds from the first try to the grant.
        waited: Millis,
        /// The fencing token.
        token: u64,
    },
    /// `wait` ran out; the callback will not run.
    Rejected {
        /// Milliseconds waited.
        waited: Millis,
    },
    /// The store failed a try (threw, answered badly, or not within ttl): the
    /// execution rejects with a store error.
    AcquireFailed {
        /// Milliseconds from the first try to the failure.
        waited: Millis,
        /// Why.
        failure: StoreFailure,
    },
    /// The caller cancelled the execution while this lock was being acquired.
    Cancelled {
        /// Milliseconds waited.
        waited: Millis,
    },
    /// The lease was pushed out to now + ttl.
    Renewed {
        /// The fencing token of the lease.
        token: u64,
        /// Milliseconds from when the renewal fell due (ttl/3 after the lease was last
        /// set) to its answer; 0 for one answered early (an `extend`).
        lag: Millis,
    },
    /// A renewal failed and will be retried while the lease is valid.
    RenewalFailed {
        /// Why.
        failure: StoreFailure,
    },
    /// The lease was lost.
    Lost {
        /// The store refused a renewal (the lease was not ours any more); otherwise it
        /// ran out on the holder's clock.
        refused: bool,
    },
    /// The lease was released.
    Released,
    /// The release failed; the lease will expire by itself.
    ReleaseFailed {
        /// Why.
        failure: StoreFailure,
    },
}

/// What [`Engine::start`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Start {
    /// Every lock was granted inside the call: run the callback now. No
    /// [`Effect::Run`] follows.
    Running {
        /// The innermost lock's fencing token.
        token: u64,
    },
    /// The execution waits or talks to a store; effects will say how it goes.
    Pending,
}

/// What [`Engine::finish`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Finish {
    /// Every lease was released inside the call: settle now. No [`Effect::Settled`]
    /// follows.
    Settled(Outcome),
    /// Releases are under way; an [`Effect::Settled`] will follow.
    Pending,
}

/// What [`Engine::extend`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Extend {
    /// Answered inside the call: whether the lease was pushed out.
    Done(bool),
    /// The store was asked; an [`Effect::Extended`] will follow.
    Pending,
}

/// A store's answer, as the host reports it with [`Engine::answer`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// `acquire` resolved: the fencing token, or `None` when the key is held.
    Acquired(Option<u64>),
    /// `renew` resolved.
    Renewed(bool),
    /// `release` resolved: with whether the owner's lease was deleted, when the store
    /// says (`None`: the store returns nothing; the engine then judges by its own clock).
    Released(Option<bool>),
    /// `acquire` resolved `{ limit }`: the key is held or waited for with that limit,
    /// not the one asked for.
    LimitMismatch(u32),
    /// The call threw, rejected, or resolved with a wrong shape.
    Failed(StoreFailure),
}

impl Answer {
    /// Which call this answers, for messages. Not `Debug`: formatting its fields would
    /// bring std's escaping and Unicode tables into the wasm module (a tenth of it).
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Answer::Acquired(_) => "an acquire answer",
            Answer::Renewed(_) => "a renew answer",
            Answer::Released(_) => "a release answer",
            Answer::LimitMismatch(_) => "a limit answer",
            Answer::Failed(_) => "a failure",
        }
    }
}

/// What the host must do with its one timer after a call, from [`Engine::host_timer`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostTimer {
    /// Nothing changed.
    Keep,
    /// (Re)arm the timer to fire at `at`; it keeps the process alive only when
    /// `keep_alive` says so.
    Arm {
        /// When to fire.
        at: Millis,
        /// Whether the timer keeps the process alive (see [`Engine::host_timer`]).
        keep_alive: bool,
    },
    /// The armed timer is early enough; let it keep the process alive again.
    Ref,
    /// No engine timer that keeps the process alive is live: the timer may stay armed
    /// but must not keep the process alive.
    Unref,
}
