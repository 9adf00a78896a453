//! What both bindings share at their boundary: the flat form of effects, the status
//! word returned by every call, and the decoding of lock arguments. Keeping it here
//! means the napi and wasm bindings only convert types.

use crate::duration;
use crate::engine::Engine;
use crate::error::{ArgError, LockError, StoreFailure, StoreMethod};
use crate::text::text;
use crate::types::{Answer, Effect, Event, HostTimer, LockSpec, Outcome, StoreRef, Wake};
use crate::Millis;

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
    /// `start`: every lock was granted in the call; run the callback now. Also an
    /// acquire's answer that granted the innermost lock ([`answer_call`]): the token
    /// is the one answered.
    pub const RUNNING: u32 = 1;
    /// `finish`: settled in the call with the callback's value (also a release's
    /// answer, [`answer_call`]).
    pub const SETTLED_VALUE: u32 = 2;
    /// `finish`: settled in the call with the callback's error (also a release's
    /// answer).
    pub const SETTLED_CALLBACK_ERROR: u32 = 3;
    /// `finish`: settled in the call with a `LockLostError` (the callback failed after
    /// a loss).
    pub const SETTLED_LOST: u32 = 4;
    /// `finish` of a manual lease (or a release's answer): released, but it had lapsed
    /// or been taken over.
    pub const SETTLED_NOT_HELD: u32 = 5;
    /// `granted`: the grant was for this engine's waiter (or a lease it holds).
    pub const GRANT_CLAIMED: u32 = 1;
    /// `finish` (asked to hand off): the release granted the lock to the next waiter,
    /// whose execution id is above the status bits (256 × id); run it now. Its `run`
    /// effect is taken: it is not among the effects.
    pub const HANDOFF: u32 = 8;
    /// `extend`: the lease was pushed out.
    pub const EXTENDED: u32 = 1;
    /// `extend`: the lease is gone (released, lost or lapsed) or the store refused.
    pub const NOT_EXTENDED: u32 = 2;
    /// `start` (asked with [`super::DIRECT`]): the only thing to do is the execution's
    /// first acquire, of lock 0 on a host store; `finish` (asked to hand off): the
    /// release of lock 0. The call is taken (it is not among the effects) and its
    /// request id is above the status bits (256 × request): the host calls the store
    /// itself, with the lock's key and ttl, and the owner of `layerOwner(exec, 0)` (a
    /// release: that of its acquire).
    pub const STORE_CALL: u32 = 6;
    /// As [`STORE_CALL`], for an acquire that asks the store to queue the owner.
    pub const STORE_CALL_QUEUED: u32 = 7;
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
/// ([`status::STORE_CALL`]).
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

/// Execution options from the host's bits ([`exec_option`]).
pub fn exec_options(bits: u32) -> crate::ExecOptions {
    crate::ExecOptions {
        renew: bits & exec_option::RENEW != 0,
        telemetry: bits & exec_option::TELEMETRY != 0,
        manual: bits & exec_option::MANUAL != 0,
    }
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

/// A store reference from the host's kind and id.
///
/// # Errors
/// An argument error for an unknown store kind.
pub fn store_ref(kind: u32, store: u32) -> Result<StoreRef, LockError> {
    Ok(match kind {
        store_kind::MEMORY => StoreRef::Memory(store),
        store_kind::POLLED => StoreRef::External { id: store, wake: Wake::Poll },
        store_kind::ANNOUNCING => StoreRef::External { id: store, wake: Wake::Announce },
        store_kind::GRANTING => StoreRef::External { id: store, wake: Wake::Grant },
        other => return Err(ArgError::type_error("store", text!("store kind ", other, " is unknown")).into()),
    })
}

/// Hands a store's grant ([`Engine::granted`]) to the engine, from host numbers, and
/// returns [`status::GRANT_CLAIMED`] when the engine claimed it (else 0): the
/// token must be a non-negative safe integer, the age a number of milliseconds (rounded
/// up: the lease is taken to be older, never younger; negative: unknown).
///
/// # Errors
/// An argument error for an unknown store kind, a bad token or a bad age.
pub fn granted(
    engine: &mut Engine,
    kind: u32,
    store: u32,
    key: &str,
    owner: &str,
    token: f64,
    age: f64,
) -> Result<u32, LockError> {
    let store = store_ref(kind, store)?;
    if !((0.0..=MAX_SAFE_INTEGER).contains(&token) && token.fract() == 0.0) {
        return Err(ArgError::range(
            "fencingToken",
            "a grant's fencingToken must be a non-negative safe integer".into(),
        )
        .into());
    }
    if age.is_nan() {
        return Err(ArgError::range("age", "a grant's age must be a number of milliseconds".into()).into());
    }
    let age = (age >= 0.0).then(|| age.ceil().min(u64::MAX as f64) as Millis);
    let claimed = engine.granted(store, key, owner, token as u64, age);
    Ok(if claimed { status::GRANT_CLAIMED } else { 0 })
}

/// 2^53 - 1: the largest integer every JavaScript number holds exactly.
const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

/// Builds a lock from host numbers. `wait` is milliseconds, or negative for "as long as
/// it takes".
///
/// # Errors
/// An argument error for an unknown store kind, an empty key, or a ttl of zero.
pub fn lock_spec(kind: u32, store: u32, key: String, ttl: f64, wait: f64) -> Result<LockSpec, LockError> {
    let (kind, linger) = (kind % LINGER_UNIT, Millis::from(kind / LINGER_UNIT));
    let store = store_ref(kind, store)?;
    let ttl = duration::from_millis(ttl, "ttl")?;
    if ttl == 0 {
        return Err(ArgError::range("ttl", "ttl must be positive, got 0".into()).into());
    }
    let wait = if wait < 0.0 { None } else { Some(duration::from_millis(wait, "wait")?) };
    Ok(LockSpec { store, key, ttl, wait, linger })
}

/// The outer locks of an execution being started, which hosts pass one call at a time
/// (`addLock` for each outer lock, then `start` with the innermost one).
#[derive(Debug, Default)]
pub struct PendingLocks {
    outer: Vec<LockSpec>,
}

impl PendingLocks {
    /// Adds an outer lock for the next [`PendingLocks::start`].
    ///
    /// # Errors
    /// The argument errors of [`lock_spec`]; the locks added so far are then forgotten,
    /// so a pipeline whose locks failed to convert starts nothing.
    pub fn add(&mut self, kind: u32, store: u32, key: String, ttl: f64, wait: f64) -> Result<(), LockError> {
        match lock_spec(kind, store, key, ttl, wait) {
            Ok(spec) => {
                self.outer.push(spec);
                Ok(())
            }
            Err(err) => {
                self.outer.clear();
                Err(err)
            }
        }
    }

    /// Starts `exec` under the outer locks added so far plus this innermost one, with
    /// host option bits ([`exec_options`]).
    ///
    /// # Errors
    /// The argument errors of [`lock_spec`] and [`Engine::start`].
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        &mut self,
        engine: &mut Engine,
        exec: u32,
        options: u32,
        kind: u32,
        store: u32,
        key: String,
        ttl: f64,
        wait: f64,
    ) -> Result<crate::Start, LockError> {
        let mut locks = std::mem::take(&mut self.outer);
        locks.push(lock_spec(kind, store, key, ttl, wait)?);
        engine.start(exec, locks, exec_options(options))
    }
}

/// Validates a duration the host already knows is a number or a string. `Infinity` is
/// accepted only when `infinite_ok` (waiting forever), and comes back as -1.
///
/// # Errors
/// An argument error naming `arg`.
pub fn duration_arg(ms: Option<f64>, text: Option<&str>, arg: &str, infinite_ok: bool) -> Result<f64, LockError> {
    let millis: Millis = match (ms, text) {
        (Some(ms), _) if ms == f64::INFINITY && infinite_ok => return Ok(-1.0),
        (Some(ms), _) => duration::from_millis(ms, arg)?,
        (None, Some(text)) => duration::parse(text, arg)?,
        (None, None) => return Err(ArgError::type_error(arg, text!(arg, " must be a number or a string")).into()),
    };
    Ok(millis as f64)
}

/// Effects in flat form, the way both bindings hand them to JavaScript: one array of
/// numbers (a header, then [`EFFECT_WIDTH`] numbers per effect) and, only when an effect
/// carries text, an array of strings the numbers point into. Building one array of numbers
/// costs far less than building an object per effect. (The Node addon hands over a plain
/// array: for a handful of numbers it is cheaper, and lighter on the collector, than a
/// typed array with its own backing store; wasm-bindgen hands over a `Float64Array`.)
///
/// Header: `numbers[0]` is how many strings there are. Then per effect:
/// `[kind, exec, layer, request, store, a, b, c]`, by kind:
///
/// | kind | fields |
/// | --- | --- |
/// | 1 call | `request`, `exec` (0: none waits), `layer` (of `exec`), `store`; a = method; b = ttl; c = string index of the key (the owner follows it), or -1 for a renew or release of a lock (`exec` not 0): no text, the key and owner are those of the acquire of that same lock, which always comes first (and [`Engine::layer_key`], [`Engine::layer_owner`]) |
/// | 2 run | `exec`; b = the innermost token (-1 when none) |
/// | 3 lost | `exec`, `layer` |
/// | 4 settled | `exec`; a = outcome; for an error: b = error code, `request` = the request whose thrown value is the cause (0: none), `store` = the failed method, c = string index of the message (the key follows it, or is empty) |
/// | 5 extended | `exec`; a = 1 if extended |
/// | 6 watch | `store`; a = 1 to start watching; c = string index of the key |
/// | 7 event | `exec`, `layer`; a = event; b = waited ms; c = token; `request` = the cause's request; `store` = string index of a failure message, or -1 |
///
/// The codes are named in the modules of [`flat`]; lib/protocol.cjs decodes them, and
/// core/tests/protocol.rs checks that both sides agree.
pub mod flat {
    /// Numbers per effect.
    pub const EFFECT_WIDTH: usize = 8;
    /// Where the first effect starts (after the header).
    pub const EFFECT_FIRST: usize = 1;

    /// Slots of an effect record; what a, b and c hold depends on its kind.
    pub mod slot {
        #![allow(missing_docs)]
        pub const KIND: usize = 0;
        pub const EXEC: usize = 1;
        pub const LAYER: usize = 2;
        pub const REQUEST: usize = 3;
        pub const STORE: usize = 4;
        pub const A: usize = 5;
        pub const B: usize = 6;
        pub const C: usize = 7;
    }

    /// Effect kinds.
    pub mod kind {
        #![allow(missing_docs)]
        pub const CALL: f64 = 1.0;
        pub const RUN: f64 = 2.0;
        pub const LOST: f64 = 3.0;
        pub const SETTLED: f64 = 4.0;
        pub const EXTENDED: f64 = 5.0;
        pub const WATCH: f64 = 6.0;
        pub const EVENT: f64 = 7.0;
    }

    /// Store methods, of a call and of a store's failure.
    pub mod method {
        #![allow(missing_docs)]
        pub const ACQUIRE: f64 = 1.0;
        pub const RENEW: f64 = 2.0;
        pub const RELEASE: f64 = 3.0;
        /// A call's acquire that asks a store that grants on release to queue the owner.
        pub const QUEUED_ACQUIRE: f64 = 4.0;
    }

    /// Outcomes of a `settled` effect.
    pub mod outcome {
        #![allow(missing_docs)]
        pub const VALUE: f64 = 1.0;
        pub const CALLBACK_ERROR: f64 = 2.0;
        pub const NOT_HELD: f64 = 3.0;
        pub const ERROR: f64 = 4.0;
    }

    /// Error codes of a `settled` effect with [`outcome::ERROR`].
    pub mod error {
        #![allow(missing_docs)]
        pub const NOT_ACQUIRED: f64 = 1.0;
        pub const LOST: f64 = 2.0;
        pub const STORE_FAILED: f64 = 3.0;
        pub const ABORTED: f64 = 4.0;
        pub const TYPE: f64 = 5.0;
        pub const RANGE: f64 = 6.0;
    }

    /// Telemetry events.
    pub mod event {
        #![allow(missing_docs)]
        pub const ACQUIRED: f64 = 1.0;
        pub const REJECTED: f64 = 2.0;
        pub const RENEWED: f64 = 3.0;
        pub const RENEWAL_FAILED: f64 = 4.0;
        pub const LOST: f64 = 5.0;
        pub const RELEASED: f64 = 6.0;
        pub const RELEASE_FAILED: f64 = 7.0;
        pub const ACQUIRE_FAILED: f64 = 8.0;
        pub const CANCELLED: f64 = 9.0;
    }
}

fn method_code(method: StoreMethod) -> f64 {
    match method {
        StoreMethod::Acquire => flat::method::ACQUIRE,
        StoreMethod::Renew => flat::method::RENEW,
        StoreMethod::Release => flat::method::RELEASE,
    }
}

fn error_code(err: &LockError) -> f64 {
    match err.code() {
        "LOCK_NOT_ACQUIRED" => flat::error::NOT_ACQUIRED,
        "LOCK_LOST" => flat::error::LOST,
        "LOCK_STORE_FAILED" => flat::error::STORE_FAILED,
        "ABORT_ERR" => flat::error::ABORTED,
        "ERR_INVALID_ARG_TYPE" => flat::error::TYPE,
        _ => flat::error::RANGE,
    }
}

fn failure_message(failure: &StoreFailure) -> Option<String> {
    match failure {
        StoreFailure::Threw(_) => None,
        StoreFailure::TimedOut { after_ms } => Some(text!("the store did not answer within ", after_ms, " ms")),
        StoreFailure::BadAnswer(what) => Some(what.clone()),
    }
}

fn cause_of(failure: &StoreFailure) -> f64 {
    match failure {
        StoreFailure::Threw(request) => f64::from(*request),
        _ => 0.0,
    }
}

/// Takes every pending effect of `engine` into `numbers` (cleared first, header
/// included) and `strings` (cleared first).
pub fn take_flat_effects(engine: &mut Engine, numbers: &mut Vec<f64>, strings: &mut Vec<String>) {
    numbers.clear();
    strings.clear();
    numbers.push(0.0);
    fn text(strings: &mut Vec<String>, value: String) -> f64 {
        strings.push(value);
        (strings.len() - 1) as f64
    }
    while let Some(effect) = engine.take_effect() {
        use flat::{event as ev, kind, outcome};
        let record: [f64; flat::EFFECT_WIDTH] = match effect {
            Effect::StoreCall { request, exec, layer, store, method, key, owner, ttl, queue, handed_over } => {
                // The host keeps the key and owner of a lock's acquire for its renewals
                // and its release; a lease handed over names its own.
                let at = if exec != 0 && method != StoreMethod::Acquire && !handed_over {
                    -1.0
                } else {
                    let at = text(strings, key);
                    text(strings, owner);
                    at
                };
                let method = if queue { flat::method::QUEUED_ACQUIRE } else { method_code(method) };
                [kind::CALL, exec.into(), layer.into(), request.into(), store.into(), method, ttl as f64, at]
            }
            Effect::Run { exec } => {
                // The innermost token comes along, saving the host a call per handover.
                let token = engine.token(exec).map_or(-1.0, |t| t as f64);
                [kind::RUN, exec.into(), 0.0, 0.0, 0.0, 0.0, token, 0.0]
            }
            Effect::Lost { exec, layer } => [kind::LOST, exec.into(), layer.into(), 0.0, 0.0, 0.0, 0.0, 0.0],
            Effect::Settled { exec, outcome } => match outcome {
                Outcome::Value => [kind::SETTLED, exec.into(), 0.0, 0.0, 0.0, outcome::VALUE, 0.0, 0.0],
                Outcome::CallbackError => {
                    [kind::SETTLED, exec.into(), 0.0, 0.0, 0.0, outcome::CALLBACK_ERROR, 0.0, 0.0]
                }
                Outcome::NotHeld => [kind::SETTLED, exec.into(), 0.0, 0.0, 0.0, outcome::NOT_HELD, 0.0, 0.0],
                Outcome::Error(err) => {
                    let (cause, method) = match &err {
                        LockError::StoreFailed { method, failure, .. } => (cause_of(failure), method_code(*method)),
                        _ => (0.0, 0.0),
                    };
                    let at = text(strings, err.message());
                    text(strings, err.key().unwrap_or_default().to_owned());
                    [kind::SETTLED, exec.into(), 0.0, cause, method, outcome::ERROR, error_code(&err), at]
                }
            },
            Effect::Extended { exec, ok } => {
                [kind::EXTENDED, exec.into(), 0.0, 0.0, 0.0, f64::from(u8::from(ok)), 0.0, 0.0]
            }
            Effect::Watch { store, key, watch } => {
                let at = text(strings, key);
                [kind::WATCH, 0.0, 0.0, 0.0, store.into(), f64::from(u8::from(watch)), 0.0, at]
            }
            Effect::Event { exec, layer, event } => {
                let (code, waited, token, cause, message) = match event {
                    Event::Acquired { waited, token } => (ev::ACQUIRED, waited as f64, token as f64, 0.0, None),
                    Event::Rejected { waited } => (ev::REJECTED, waited as f64, 0.0, 0.0, None),
                    Event::AcquireFailed { waited, failure } => {
                        (ev::ACQUIRE_FAILED, waited as f64, 0.0, cause_of(&failure), failure_message(&failure))
                    }
                    Event::Cancelled { waited } => (ev::CANCELLED, waited as f64, 0.0, 0.0, None),
                    // A renewal's lag rides in the waited slot; a loss's refusal in the token's.
                    Event::Renewed { token, lag } => (ev::RENEWED, lag as f64, token as f64, 0.0, None),
                    Event::RenewalFailed { failure } => {
                        (ev::RENEWAL_FAILED, 0.0, 0.0, cause_of(&failure), failure_message(&failure))
                    }
                    Event::Lost { refused } => (ev::LOST, 0.0, f64::from(u8::from(refused)), 0.0, None),
                    Event::Released => (ev::RELEASED, 0.0, 0.0, 0.0, None),
                    Event::ReleaseFailed { failure } => {
                        (ev::RELEASE_FAILED, 0.0, 0.0, cause_of(&failure), failure_message(&failure))
                    }
                };
                let message_at = message.map_or(-1.0, |m| text(strings, m));
                [kind::EVENT, exec.into(), layer.into(), cause, message_at, code, waited, token]
            }
        };
        numbers.extend_from_slice(&record);
    }
    numbers[0] = strings.len() as f64;
}

/// The number `start` returns, from what [`Engine::start`] (or
/// [`Engine::start_defined`]) returned for `exec`, asked with host option bits
/// `options`: the status word ([`status_flags`] included), plus 256 × the innermost token
/// when every lock was granted in the call (tokens of in-process stores stay far below
/// 2^45, so the sum is an exact JavaScript number). With [`DIRECT`], when the only effect
/// is the first acquire of lock 0 on a host store, that call is taken and returned
/// instead ([`status::STORE_CALL`], 256 × its request id).
pub fn start_word(engine: &mut Engine, exec: u32, options: u32, start: crate::Start, arm_at: &mut f64) -> f64 {
    let call = match start {
        crate::Start::Pending if options & DIRECT != 0 => take_sole_call(engine, exec, StoreMethod::Acquire),
        _ => None,
    };
    let flags = status_flags(engine, arm_at);
    match (start, call) {
        (crate::Start::Running { token }, _) => {
            f64::from(status::RUNNING | flags) + status::PAYLOAD_UNIT * token as f64
        }
        (crate::Start::Pending, Some((code, request))) => {
            f64::from(code | flags) + status::PAYLOAD_UNIT * f64::from(request)
        }
        (crate::Start::Pending, None) => f64::from(flags),
    }
}

/// Takes the only pending effect when it is `exec`'s call of `method` on lock 0; the
/// [`status::STORE_CALL`] code and the request id.
fn take_sole_call(engine: &mut Engine, exec: u32, method: StoreMethod) -> Option<(u32, u32)> {
    let found = match engine.sole_effect()? {
        Effect::StoreCall { request, exec: e, layer: 0, method: m, queue, handed_over: false, .. }
            if *e == exec && *m == method =>
        {
            (if *queue { status::STORE_CALL_QUEUED } else { status::STORE_CALL }, *request)
        }
        _ => return None,
    };
    engine.take_effect();
    Some(found)
}

/// [`Engine::finish`] as hosts call it: the status word ([`finish_status`] and the
/// flags of [`status_flags`]). With `handoff`, when the release granted the lock to a
/// waiter and that is the only effect, the waiter's `run` effect is taken
/// ([`Engine::take_sole_run`]) and returned instead: [`status::HANDOFF`] plus 256 × its
/// execution id (an exact JavaScript number, ids being 32-bit); and when the only effect
/// is the release of `exec`'s lock 0 on a host store, that call is:
/// [`status::STORE_CALL`] plus 256 × its request id. A host passes `handoff` only where
/// it can run that execution, or call that store, at once.
///
/// # Errors
/// Those of [`Engine::finish`].
pub fn finish_call(
    engine: &mut Engine,
    exec: u32,
    ok: bool,
    handoff: bool,
    arm_at: &mut f64,
) -> Result<f64, LockError> {
    let finish = engine.finish(exec, ok)?;
    let next = if handoff { engine.take_sole_run() } else { None };
    let call = match finish {
        crate::Finish::Pending if handoff && next.is_none() => take_sole_call(engine, exec, StoreMethod::Release),
        _ => None,
    };
    let status = finish_status(finish) | status_flags(engine, arm_at);
    Ok(match (next, call) {
        (Some(next), _) => f64::from(status | status::HANDOFF) + status::PAYLOAD_UNIT * f64::from(next),
        (None, Some((code, request))) => f64::from(status | code) + status::PAYLOAD_UNIT * f64::from(request),
        (None, None) => f64::from(status),
    })
}

/// [`Engine::answer`] as hosts call it for a store's answer to `acquire` or `release`:
/// the status word ([`status_flags`]). With `direct`, when no effect was pending and the
/// answer leaves exactly one, the common one for the execution that made the request,
/// that effect is taken and returned instead: its `run` as [`status::RUNNING`] when the
/// answer granted its innermost lock (its token is the one just answered: JS stores'
/// tokens may be too large to ride above the status bits), or its `settled` with the
/// callback's value or error (or a manual lease "not held") as [`finish_status`] does.
/// Anything else (telemetry events, other executions' effects, an error, a run under
/// an inner lock's token) comes as effects. A host passes `direct` only where it can
/// run or settle that execution at once: not while it applies effects, which would then
/// run out of order.
pub fn answer_call(engine: &mut Engine, request: u32, answer: Answer, direct: bool, arm_at: &mut f64) -> u32 {
    let exec = if direct && !engine.has_effects() { engine.request_exec(request) } else { None };
    let granted = match answer {
        Answer::Acquired(token) => token,
        _ => None,
    };
    engine.answer(request, answer);
    let answered = exec.and_then(|exec| take_sole_answer(engine, exec, granted)).unwrap_or(0);
    answered | status_flags(engine, arm_at)
}

/// Takes the only effect when it is `exec`'s `run` under the `granted` token or its plain
/// `settled`; its status bits.
fn take_sole_answer(engine: &mut Engine, exec: u32, granted: Option<u64>) -> Option<u32> {
    let status = match engine.sole_effect()? {
        Effect::Run { exec: e } if *e == exec && granted.is_some() && engine.token(exec) == granted => status::RUNNING,
        Effect::Settled { exec: e, outcome } if *e == exec => match outcome {
            Outcome::Value => status::SETTLED_VALUE,
            Outcome::CallbackError => status::SETTLED_CALLBACK_ERROR,
            Outcome::NotHeld => status::SETTLED_NOT_HELD,
            Outcome::Error(_) => return None,
        },
        _ => return None,
    };
    engine.take_effect();
    Some(status)
}

/// The status word for what [`Engine::finish`] returned.
pub fn finish_status(finish: crate::Finish) -> u32 {
    match finish {
        crate::Finish::Pending => 0,
        crate::Finish::Settled(Outcome::Value) => status::SETTLED_VALUE,
        crate::Finish::Settled(Outcome::CallbackError) => status::SETTLED_CALLBACK_ERROR,
        crate::Finish::Settled(Outcome::Error(_)) => status::SETTLED_LOST,
        crate::Finish::Settled(Outcome::NotHeld) => status::SETTLED_NOT_HELD,
    }
}

/// The status word for what [`Engine::extend`] returned.
pub fn extend_status(extend: crate::Extend) -> u32 {
    match extend {
        crate::Extend::Pending => 0,
        crate::Extend::Done(true) => status::EXTENDED,
        crate::Extend::Done(false) => status::NOT_EXTENDED,
    }
}

/// A panic's message, from its payload (`panic!` with a literal gives a `&str`, with
/// arguments a `String`), for the Error a binding throws in its place.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic in the engine".to_owned())
}
