//! Effects in flat form, the way both bindings hand them to JavaScript: one array of
//! numbers (a header, then [`EFFECT_WIDTH`] numbers per effect) and, only when an effect
//! carries text, an array of strings the numbers point into. Building one array of numbers
//! costs far less than building an object per effect. (The Node addon hands over a plain
//! array: for a handful of numbers it is cheaper, and lighter on the collector, than a
//! typed array with its own backing store; wasm-bindgen hands over a `Float64Array`.)
//!
//! Header: `numbers[0]` is how many strings there are. Then per effect:
//! `[kind, exec, layer, request, store, a, b, c]`, by kind:
//!
//! | kind | fields |
//! | --- | --- |
//! | 1 call | `request`, `exec` (0: none waits), `layer` (of `exec`), `store`; a = method; b = ttl; c = string index of the key (the owner follows it), or -1 for a renew or release of a lock (`exec` not 0): no text, the key and owner are those of the acquire of that same lock, which always comes first (and [`Engine::layer_key`], [`Engine::layer_owner`]) |
//! | 2 run | `exec`; b = the innermost token, as granted |
//! | 3 lost | `exec`, `layer` |
//! | 4 settled | `exec`; a = outcome; for an error: b = error code, `request` = the request whose thrown value is the cause (0: none), `store` = the failed method, c = string index of the message (the key follows it, or is empty); for a limit mismatch `request` = the key's limit, `store` = the lock's |
//! | 5 extended | `exec`; a = 1 if extended |
//! | 6 watch | `store`; a = 1 to start watching; c = string index of the key |
//! | 7 event | `exec`, `layer`; a = event; b = waited ms (a renewal's: its lag); c = token (a loss's: 1 when the store refused); `request` = the cause's request; `store` = string index of a failure message, or -1 |
//!
//! The codes are named in the modules below; lib/host/protocol.cjs decodes them, and
//! core/tests/protocol.rs checks that both sides agree.

use crate::engine::Engine;
use crate::error::{LockError, StoreFailure, StoreMethod};
use crate::text::text;
use crate::types::{Effect, Event, Outcome};

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
    pub const LIMIT_MISMATCH: f64 = 7.0;
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

fn method_code(method: StoreMethod) -> f64 {
    match method {
        StoreMethod::Acquire => method::ACQUIRE,
        StoreMethod::Renew => method::RENEW,
        StoreMethod::Release => method::RELEASE,
    }
}

fn error_code(err: &LockError) -> f64 {
    match err.code() {
        "LOCK_NOT_ACQUIRED" => error::NOT_ACQUIRED,
        "LOCK_LOST" => error::LOST,
        "LOCK_STORE_FAILED" => error::STORE_FAILED,
        "ABORT_ERR" => error::ABORTED,
        "ERR_INVALID_ARG_TYPE" => error::TYPE,
        "LOCK_LIMIT_MISMATCH" => error::LIMIT_MISMATCH,
        _ => error::RANGE,
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
        use {event as ev, kind, outcome};
        let record: [f64; EFFECT_WIDTH] = match effect {
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
                let method = if queue { method::QUEUED_ACQUIRE } else { method_code(method) };
                [kind::CALL, exec.into(), layer.into(), request.into(), store.into(), method, ttl as f64, at]
            }
            Effect::Run { exec, token } => {
                // The innermost token comes along, saving the host a call per handover.
                [kind::RUN, exec.into(), 0.0, 0.0, 0.0, 0.0, token as f64, 0.0]
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
                        // The two limits ride where a store failure's cause and method would.
                        LockError::LimitMismatch { limit, held_with, .. } => (f64::from(*held_with), f64::from(*limit)),
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
