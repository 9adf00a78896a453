//! What both bindings share at their boundary, so that the napi and wasm bindings only
//! convert types: the numbers of the protocol (this file), the decoding of lock
//! arguments ([`args`]), the status word each call returns ([`words`]) and the flat
//! form of effects ([`flat`]). lib/host/protocol.cjs names every number here the same way,
//! and core/tests/protocol.rs fails when the two disagree.

mod args;
pub mod flat;
mod words;

pub use args::{duration_arg, exec_options, granted, lock_spec, store_ref, PendingLocks};
pub use flat::take_flat_effects;
pub use words::{answer_call, extend_status, finish_call, finish_status, start_word};

use crate::engine::Engine;
use crate::types::HostTimer;

/// Bits of the status word every mutating binding call returns.
pub mod status {
    /// Effects wait: call `takeEffects()`.
    pub const EFFECTS: u32 = 16;
    /// Ref the host timer (it is armed early enough).
    pub const TIMER_REF: u32 = 32;
    /// Unref the host timer: no engine timer that keeps the process alive is live.
    /// With [`TIMER_ARM`]: arm it unref'd.
    pub const TIMER_UNREF: u32 = 64;
    /// (Re)arm the host timer at `armAt()`, ref'd unless [`TIMER_UNREF`] comes with it.
    pub const TIMER_ARM: u32 = 128;
    /// `start`: every lock was granted in the call; run the callback now (the token
    /// rides above the status bits).
    pub const STARTED_RUNNING: u32 = 1;
    /// `start` (asked with [`super::DIRECT`]): the only thing to do is the execution's
    /// first acquire, of lock 0 on a host store. The call is taken (it is not among the
    /// effects) and its request id rides above the status bits: the host calls the
    /// store itself, with the lock's key, ttl and the owner of `layerOwner(exec, 0)`.
    pub const STARTED_STORE_CALL: u32 = 6;
    /// As [`STARTED_STORE_CALL`], for an acquire that asks the store to queue the owner.
    pub const STARTED_STORE_CALL_QUEUED: u32 = 7;
    /// `finish`: settled in the call with the callback's value.
    pub const FINISHED_VALUE: u32 = 2;
    /// `finish`: settled in the call with the callback's error.
    pub const FINISHED_CALLBACK_ERROR: u32 = 3;
    /// `finish`: settled in the call with a `LockLostError` (the callback failed after
    /// a loss).
    pub const FINISHED_LOST: u32 = 4;
    /// `finish` of a manual lease: released, but it had lapsed or been taken over.
    pub const FINISHED_NOT_HELD: u32 = 5;
    /// `finish` (asked to hand off): the release granted the lock to the next waiter,
    /// whose execution id rides above the status bits; run it now. Its `run` effect is
    /// taken: it is not among the effects. A flag: it may come with a `FINISHED_*` code.
    pub const FINISHED_HANDOFF: u32 = 8;
    /// `finish` (asked to hand off): the only thing to do is the release of lock 0 on a
    /// host store, taken as [`STARTED_STORE_CALL`] is (the owner: that of its acquire).
    pub const FINISHED_STORE_CALL: u32 = 6;
    /// An acquire's answer granted the innermost lock: run the callback now, under the
    /// token just answered.
    pub const ANSWERED_RUNNING: u32 = 1;
    /// An answer settled the execution with the callback's value.
    pub const ANSWERED_VALUE: u32 = 2;
    /// An answer settled the execution with the callback's error.
    pub const ANSWERED_CALLBACK_ERROR: u32 = 3;
    /// A release's answer settled a manual lease that had lapsed or been taken over.
    pub const ANSWERED_NOT_HELD: u32 = 5;
    /// `granted`: the grant was for this engine's waiter (or a lease it holds).
    pub const GRANT_CLAIMED: u32 = 1;
    /// `extend`: the lease was pushed out.
    pub const EXTENDED: u32 = 1;
    /// `extend`: the lease is gone (released, lost or lapsed) or the store refused.
    pub const NOT_EXTENDED: u32 = 2;
    /// `memRelease`: the owner held a live lease.
    pub const MEMORY_RELEASED: u32 = 1;
    /// The host's bits: [`EFFECTS`] and the timer actions.
    pub const HOST_BITS: u32 = EFFECTS | TIMER_REF | TIMER_UNREF | TIMER_ARM;
    /// The call's own result, whose meaning depends on the call.
    pub const RESULT_BITS: u32 = 15;
    /// A payload (a token, an execution id, a request id) rides above the status bits,
    /// as this many times its value.
    pub const PAYLOAD_UNIT: f64 = 256.0;
}

/// Option bit of `start`: the host can call a store at once, nothing else running
/// (it is not applying effects), so the first acquire may come back in the status word
/// ([`status::STARTED_STORE_CALL`]).
pub const DIRECT: u32 = 8;

/// Folds the engine's pending work into a status word: the host timer action (arming
/// time in `arm_at`) and whether effects wait.
pub fn status_flags(engine: &mut Engine, arm_at: &mut f64) -> u32 {
    let mut flags = 0;
    match engine.host_timer() {
        HostTimer::Keep => {}
        HostTimer::Ref => flags |= status::TIMER_REF,
        HostTimer::Unref => flags |= status::TIMER_UNREF,
        HostTimer::Arm { at, keep_alive } => {
            *arm_at = at as f64;
            flags |= status::TIMER_ARM;
            if !keep_alive {
                flags |= status::TIMER_UNREF;
            }
        }
    }
    if engine.has_effects() {
        flags |= status::EFFECTS;
    }
    flags
}

/// Option bits of `start` that shape the execution ([`DIRECT`] is the status word's
/// business, not the execution's).
pub mod exec_option {
    /// Renew the leases while the callback runs.
    pub const RENEW: u32 = 1;
    /// Report events (the pipeline has a telemetry listener).
    pub const TELEMETRY: u32 = 2;
    /// A manual lease (`acquireLock`): held until released by hand.
    pub const MANUAL: u32 = 4;
}

/// Store kinds as hosts number them.
pub mod store_kind {
    /// A memory store of this engine.
    pub const MEMORY: u32 = 0;
    /// A host store that does not announce releases: polled.
    pub const POLLED: u32 = 1;
    /// A host store that announces releases.
    pub const ANNOUNCING: u32 = 2;
    /// A host store that queues waiters and grants them the lease as it is released.
    pub const GRANTING: u32 = 3;
}

/// A lock's kind argument is its store's kind plus `LINGER_UNIT` × its linger in ms
/// ([`LockSpec::linger`]).
pub const LINGER_UNIT: u32 = 256;

/// A panic's message, from its payload (`panic!` with a literal gives a `&str`, with
/// arguments a `String`), for the Error a binding throws in its place.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic in the engine".to_owned())
}
