//! What both bindings share at their boundary: the flat form of effects, the status
//! word returned by every call, and the decoding of lock arguments. Keeping it here
//! means the napi and wasm bindings only convert types.

use crate::duration;
use crate::engine::{Effect, Engine, Event, HostTimer, LockSpec, Outcome, StoreRef};
use crate::error::{ArgError, LockError, StoreFailure};
use crate::Millis;

/// Bits of the status word every mutating binding call returns.
pub mod status {
    /// Effects wait: call `takeEffects()`.
    pub const EFFECTS: u32 = 16;
    /// Ref the host timer (it is armed early enough).
    pub const TIMER_REF: u32 = 32;
    /// Unref the host timer: no engine timer is live.
    pub const TIMER_UNREF: u32 = 64;
    /// (Re)arm the host timer at `armAt()`.
    pub const TIMER_ARM: u32 = 128;
    /// `start`: every lock was granted in the call; run the callback now.
    pub const RUNNING: u32 = 1;
    /// `finish`: settled in the call with the callback's value.
    pub const SETTLED_VALUE: u32 = 2;
    /// `finish`: settled in the call with the callback's error.
    pub const SETTLED_CALLBACK_ERROR: u32 = 3;
    /// `finish`: settled in the call with a `LockLostError` (the callback failed after
    /// a loss).
    pub const SETTLED_LOST: u32 = 4;
    /// `finish` of a manual lease: released, but it had lapsed or been taken over.
    pub const SETTLED_NOT_HELD: u32 = 5;
    /// `extend`: the lease was pushed out.
    pub const EXTENDED: u32 = 1;
    /// `extend`: the lease is gone (released, lost or lapsed) or the store refused.
    pub const NOT_EXTENDED: u32 = 2;
}

/// Folds the engine's pending work into a status word: the host timer action (arming
/// time in `arm_at`) and whether effects wait.
pub fn status_flags(engine: &mut Engine, arm_at: &mut f64) -> u32 {
    let mut flags = 0;
    match engine.host_timer() {
        HostTimer::Keep => {}
        HostTimer::Ref => flags |= status::TIMER_REF,
        HostTimer::Unref => flags |= status::TIMER_UNREF,
        HostTimer::Arm(at) => {
            *arm_at = at as f64;
            flags |= status::TIMER_ARM;
        }
    }
    if engine.has_effects() {
        flags |= status::EFFECTS;
    }
    flags
}

/// Execution options from the host's bits: 1 renew, 2 telemetry, 4 manual lease.
pub fn exec_options(bits: u32) -> crate::ExecOptions {
    crate::ExecOptions { renew: bits & 1 != 0, telemetry: bits & 2 != 0, manual: bits & 4 != 0 }
}

/// Store kinds as hosts number them.
pub mod store_kind {
    /// A memory store of this engine.
    pub const MEMORY: u32 = 0;
    /// A host store that does not announce releases: polled.
    pub const POLLED: u32 = 1;
    /// A host store that announces releases.
    pub const ANNOUNCING: u32 = 2;
}

/// Builds a lock from host numbers. `wait` is milliseconds, or negative for "as long as
/// it takes".
///
/// # Errors
/// An argument error for an unknown store kind, an empty key, or a ttl of zero.
pub fn lock_spec(kind: u32, store: u32, key: String, ttl: f64, wait: f64) -> Result<LockSpec, LockError> {
    let store = match kind {
        store_kind::MEMORY => StoreRef::Memory(store),
        store_kind::POLLED => StoreRef::External { id: store, announces: false },
        store_kind::ANNOUNCING => StoreRef::External { id: store, announces: true },
        other => return Err(ArgError::type_error("store", format!("store kind {other} is unknown")).into()),
    };
    let ttl = duration::from_millis(ttl, "ttl")?;
    if ttl == 0 {
        return Err(ArgError::range("ttl", "ttl must be positive, got 0".into()).into());
    }
    let wait = if wait < 0.0 { None } else { Some(duration::from_millis(wait, "wait")?) };
    Ok(LockSpec { store, key, ttl, wait })
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
        (None, None) => return Err(ArgError::type_error(arg, format!("{arg} must be a number or a string")).into()),
    };
    Ok(millis as f64)
}

/// An effect in flat form: every field a host may read, unused ones zero or `None`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EffectRecord {
    /// `call`, `run`, `lost`, `settled`, `extended`, `watch` or `event`.
    pub kind: &'static str,
    /// The execution (`call`: the one waiting for the answer, 0 for none).
    pub exec: u32,
    /// The lock of the execution, outermost first.
    pub layer: u32,
    /// `call`: the request id to answer.
    pub request: u32,
    /// `call`, `watch`: the host's store id.
    pub store: u32,
    /// `call`: `acquire`, `renew` or `release`; `settled` with a store failure: the
    /// method that failed.
    pub method: Option<&'static str>,
    /// `call`, `watch`, errors: the key.
    pub key: Option<String>,
    /// `call`: the owner id.
    pub owner: Option<String>,
    /// `call`: the ttl asked for.
    pub ttl: f64,
    /// `watch`: start (true) or stop.
    pub watch: bool,
    /// `extended`: whether the lease was pushed out.
    pub ok: bool,
    /// `settled`: `value`, `callbackError` or `error`; `event`: the event name.
    pub outcome: Option<&'static str>,
    /// An error's code (`settled` with `error`, failed events).
    pub code: Option<&'static str>,
    /// An error's message.
    pub message: Option<String>,
    /// The request whose thrown error is the cause (0 when none).
    pub cause: u32,
    /// `event`: milliseconds waited.
    pub waited: f64,
    /// `event`: the fencing token.
    pub token: f64,
}

fn failure_fields(record: &mut EffectRecord, failure: &StoreFailure) {
    if let StoreFailure::Threw(request) = failure {
        record.cause = *request;
    }
    record.message = Some(match failure {
        StoreFailure::Threw(_) => "the store threw".to_owned(),
        StoreFailure::TimedOut { after_ms } => format!("the store did not answer within {after_ms} ms"),
        StoreFailure::BadAnswer(what) => what.clone(),
    });
}

fn error_fields(record: &mut EffectRecord, err: &LockError) {
    record.code = Some(err.code());
    record.message = Some(err.to_string());
    record.key = err.key().map(str::to_owned);
    if let LockError::StoreFailed { method, failure, .. } = err {
        record.method = Some(method.name());
        if let StoreFailure::Threw(request) = failure {
            record.cause = *request;
        }
    }
}

impl From<Effect> for EffectRecord {
    fn from(effect: Effect) -> Self {
        let mut r = EffectRecord::default();
        match effect {
            Effect::StoreCall { request, exec, store, method, key, owner, ttl } => {
                r.kind = "call";
                r.request = request;
                r.exec = exec;
                r.store = store;
                r.method = Some(method.name());
                r.key = Some(key);
                r.owner = Some(owner);
                r.ttl = ttl as f64;
            }
            Effect::Run { exec } => {
                r.kind = "run";
                r.exec = exec;
            }
            Effect::Lost { exec, layer } => {
                r.kind = "lost";
                r.exec = exec;
                r.layer = layer;
            }
            Effect::Settled { exec, outcome } => {
                r.kind = "settled";
                r.exec = exec;
                r.outcome = Some(match outcome {
                    Outcome::Value => "value",
                    Outcome::CallbackError => "callbackError",
                    Outcome::NotHeld => "notHeld",
                    Outcome::Error(err) => {
                        error_fields(&mut r, &err);
                        "error"
                    }
                });
            }
            Effect::Extended { exec, ok } => {
                r.kind = "extended";
                r.exec = exec;
                r.ok = ok;
            }
            Effect::Watch { store, key, watch } => {
                r.kind = "watch";
                r.store = store;
                r.key = Some(key);
                r.watch = watch;
            }
            Effect::Event { exec, layer, event } => {
                r.kind = "event";
                r.exec = exec;
                r.layer = layer;
                r.outcome = Some(match event {
                    Event::Acquired { waited, token } => {
                        r.waited = waited as f64;
                        r.token = token as f64;
                        "acquired"
                    }
                    Event::Rejected { waited } => {
                        r.waited = waited as f64;
                        "rejected"
                    }
                    Event::Renewed { token } => {
                        r.token = token as f64;
                        "renewed"
                    }
                    Event::RenewalFailed { failure } => {
                        failure_fields(&mut r, &failure);
                        "renewalFailed"
                    }
                    Event::Lost => "lost",
                    Event::Released => "released",
                    Event::ReleaseFailed { failure } => {
                        failure_fields(&mut r, &failure);
                        "releaseFailed"
                    }
                });
            }
        }
        r
    }
}

/// The number `start` returns: the status word, plus 256 × the innermost token when
/// every lock was granted in the call (tokens of in-process stores stay far below 2^45,
/// so the sum is an exact JavaScript number).
pub fn start_status(start: crate::Start, flags: u32) -> f64 {
    match start {
        crate::Start::Running { token } => f64::from(status::RUNNING | flags) + 256.0 * token as f64,
        crate::Start::Pending => f64::from(flags),
    }
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
