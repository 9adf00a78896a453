//! The calls of every execution (`startDefined`, `finish`, `token`, and for a JS store
//! `layerOwner` and its answers: `answerAcquire`, `answerRelease`) as plain N-API
//! callbacks. napi-rs wraps each class method in borrow tracking, class-identity checks
//! and argument conversions that cost more than the engine's own work on this path;
//! these callbacks read up to three arguments, call the engine and return one value.
//! `lib/entries/native.cjs` installs them on the class's prototype under the names the host
//! calls, so both bindings still list the same methods.
//!
//! Safety: the receiver is found with `napi_unwrap` and accepted only if it is a live
//! `NativeEngine` registered by `enableFast()` (the set is per thread, as engines
//! are), so no other wrapped object can be mistaken for an engine. The engine never
//! calls JavaScript, so no other borrow of it can be live during a call.
//!
//! The one module of the workspace allowed `unsafe`: raw N-API calls need it.

#![allow(unsafe_code)]

use std::cell::RefCell;
use std::ffi::{c_char, c_void, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

use leasehold_core::{host, Answer, LockError};
use napi::sys;

use crate::NativeEngine;

thread_local! {
    /// Addresses of the live engines of this thread that accept fast calls.
    static LIVE: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

pub(crate) fn register(engine: *mut NativeEngine) {
    LIVE.with(|live| {
        let mut live = live.borrow_mut();
        if !live.contains(&(engine as usize)) {
            live.push(engine as usize);
        }
    });
}

pub(crate) fn unregister(engine: *mut NativeEngine) {
    // During thread teardown the set may be gone already; nothing is left to call then.
    let _ = LIVE.try_with(|live| live.borrow_mut().retain(|&e| e != engine as usize));
}

unsafe fn throw(env: sys::napi_env, code: &str, message: &str) -> sys::napi_value {
    let code = CString::new(code).unwrap_or_default();
    let message = CString::new(message.replace('\0', " ")).unwrap_or_default();
    sys::napi_throw_error(env, code.as_ptr(), message.as_ptr());
    ptr::null_mut()
}

unsafe fn throw_lock_error(env: sys::napi_env, err: &LockError) -> sys::napi_value {
    throw(env, err.code(), &err.to_string())
}

/// The receiver and up to three arguments; `None` (with a JS error thrown) when the
/// receiver is not a live engine.
unsafe fn receiver<'a>(
    env: sys::napi_env,
    info: sys::napi_callback_info,
    args: &mut [sys::napi_value; 3],
) -> Option<&'a mut NativeEngine> {
    let mut argc = args.len();
    let mut this = ptr::null_mut();
    let status = sys::napi_get_cb_info(env, info, &mut argc, args.as_mut_ptr(), &mut this, ptr::null_mut());
    let mut wrapped: *mut c_void = ptr::null_mut();
    if status != sys::Status::napi_ok || sys::napi_unwrap(env, this, &mut wrapped) != sys::Status::napi_ok {
        throw(env, "ERR_INVALID_ARG_TYPE", "this must be a leasehold engine");
        return None;
    }
    let engine = wrapped.cast::<NativeEngine>();
    if !LIVE.with(|live| live.borrow().contains(&(engine as usize))) {
        throw(env, "ERR_INVALID_ARG_TYPE", "this must be a leasehold engine");
        return None;
    }
    Some(&mut *engine)
}

unsafe fn u32_arg(env: sys::napi_env, value: sys::napi_value) -> Option<u32> {
    let mut out = 0u32;
    (sys::napi_get_value_uint32(env, value, &mut out) == sys::Status::napi_ok).then_some(out)
}

unsafe fn bool_arg(env: sys::napi_env, value: sys::napi_value) -> bool {
    let mut out = false;
    sys::napi_get_value_bool(env, value, &mut out);
    out
}

/// A number, or `None` for anything else (`undefined`).
unsafe fn optional_number(env: sys::napi_env, value: sys::napi_value) -> Option<f64> {
    let mut out = 0f64;
    (sys::napi_get_value_double(env, value, &mut out) == sys::Status::napi_ok).then_some(out)
}

/// A boolean, or `None` for anything else (`undefined`).
unsafe fn optional_bool(env: sys::napi_env, value: sys::napi_value) -> Option<bool> {
    let mut out = false;
    (sys::napi_get_value_bool(env, value, &mut out) == sys::Status::napi_ok).then_some(out)
}

unsafe fn number(env: sys::napi_env, value: f64) -> sys::napi_value {
    let mut out = ptr::null_mut();
    sys::napi_create_double(env, value, &mut out);
    out
}

unsafe fn undefined(env: sys::napi_env) -> sys::napi_value {
    let mut out = ptr::null_mut();
    sys::napi_get_undefined(env, &mut out);
    out
}

/// Runs `f` with a panic caught and thrown as an Error (as `catch_unwind` does for the
/// napi-rs methods).
unsafe fn guarded(env: sys::napi_env, f: impl FnOnce() -> sys::napi_value) -> sys::napi_value {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(value) => value,
        Err(panic) => throw(env, "GenericFailure", &leasehold_core::host::panic_message(&*panic)),
    }
}

macro_rules! arg_or_throw {
    ($env:expr, $value:expr, $name:literal) => {
        match u32_arg($env, $value) {
            Some(v) => v,
            None => return throw($env, "ERR_INVALID_ARG_TYPE", concat!($name, " must be a number")),
        }
    };
}

/// `startDefined(exec, options, lock)`: as `start`, under a lock from `defineLock`.
unsafe extern "C" fn start_defined(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    guarded(env, || {
        let mut args = [ptr::null_mut(); 3];
        let Some(engine) = receiver(env, info, &mut args) else { return ptr::null_mut() };
        let exec = arg_or_throw!(env, args[0], "exec");
        let options = arg_or_throw!(env, args[1], "options");
        let lock = arg_or_throw!(env, args[2], "lock");
        match engine.inner.start_defined(exec, lock, host::exec_options(options)) {
            Ok(started) => number(env, host::start_word(&mut engine.inner, exec, options, started, &mut engine.arm_at)),
            Err(err) => throw_lock_error(env, &err),
        }
    })
}

/// `finish(exec, ok, handoff)`: the status word of `host::finish_call`.
unsafe extern "C" fn finish(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    guarded(env, || {
        let mut args = [ptr::null_mut(); 3];
        let Some(engine) = receiver(env, info, &mut args) else { return ptr::null_mut() };
        let exec = arg_or_throw!(env, args[0], "exec");
        let (ok, handoff) = (bool_arg(env, args[1]), bool_arg(env, args[2]));
        match host::finish_call(&mut engine.inner, exec, ok, handoff, &mut engine.arm_at) {
            Ok(status) => number(env, status),
            Err(err) => throw_lock_error(env, &err),
        }
    })
}

/// `token(exec)`: the fencing token of the innermost lock of `exec`, or undefined.
unsafe extern "C" fn token(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    guarded(env, || {
        let mut args = [ptr::null_mut(); 3];
        let Some(engine) = receiver(env, info, &mut args) else { return ptr::null_mut() };
        let exec = arg_or_throw!(env, args[0], "exec");
        match engine.inner.token(exec) {
            Some(t) => number(env, t as f64),
            None => undefined(env),
        }
    })
}

/// A store's answer `(request, value, direct)`, the value read by `answer`; the status
/// word of `host::answer_call`.
unsafe fn answer_with(
    env: sys::napi_env,
    info: sys::napi_callback_info,
    answer: unsafe fn(sys::napi_env, sys::napi_value) -> Answer,
) -> sys::napi_value {
    guarded(env, || {
        let mut args = [ptr::null_mut(); 3];
        let Some(engine) = receiver(env, info, &mut args) else { return ptr::null_mut() };
        let request = arg_or_throw!(env, args[0], "request");
        let answer = answer(env, args[1]);
        let direct = bool_arg(env, args[2]);
        number(env, f64::from(host::answer_call(&mut engine.inner, request, answer, direct, &mut engine.arm_at)))
    })
}

/// `answerAcquire(request, token, direct)`: a store answered `acquire` (`token`
/// undefined: held).
unsafe extern "C" fn answer_acquire(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    answer_with(env, info, |env, token| Answer::Acquired(unsafe { optional_number(env, token) }.map(|t| t as u64)))
}

/// `answerRelease(request, released, direct)`: a store answered `release` (`released`:
/// what it resolved to, when a boolean).
unsafe extern "C" fn answer_release(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    answer_with(env, info, |env, released| Answer::Released(unsafe { optional_bool(env, released) }))
}

/// `layerOwner(exec, layer)`: the owner of a lock of `exec` (the first acquire of a JS
/// store comes back in `start`'s status word, and the host needs its owner), or
/// undefined.
unsafe extern "C" fn layer_owner(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    guarded(env, || {
        let mut args = [ptr::null_mut(); 3];
        let Some(engine) = receiver(env, info, &mut args) else { return ptr::null_mut() };
        let exec = arg_or_throw!(env, args[0], "exec");
        let layer = arg_or_throw!(env, args[1], "layer");
        match engine.inner.layer_owner(exec, layer) {
            Some(owner) => {
                let mut out = ptr::null_mut();
                sys::napi_create_string_utf8(env, owner.as_ptr().cast::<c_char>(), owner.len() as isize, &mut out);
                out
            }
            None => undefined(env),
        }
    })
}

type Callback = unsafe extern "C" fn(sys::napi_env, sys::napi_callback_info) -> sys::napi_value;

/// Puts the fast callbacks on `exports` as `fastStartDefined`, `fastFinish`, `fastToken`,
/// `fastLayerOwner`, `fastAnswerAcquire`, `fastAnswerRelease`.
pub(crate) unsafe fn export(env: sys::napi_env, exports: sys::napi_value) -> napi::Result<()> {
    let callbacks: [(&str, Callback); 6] = [
        ("fastStartDefined", start_defined),
        ("fastFinish", finish),
        ("fastToken", token),
        ("fastLayerOwner", layer_owner),
        ("fastAnswerAcquire", answer_acquire),
        ("fastAnswerRelease", answer_release),
    ];
    for (name, callback) in callbacks {
        let mut function = ptr::null_mut();
        let status = sys::napi_create_function(
            env,
            name.as_ptr().cast::<c_char>(),
            name.len() as isize,
            Some(callback),
            ptr::null_mut(),
            &mut function,
        );
        if status != sys::Status::napi_ok {
            return Err(napi::Error::from_reason(format!("cannot create {name}")));
        }
        let cname = CString::new(name).unwrap_or_default();
        let status = sys::napi_set_named_property(env, exports, cname.as_ptr(), function);
        if status != sys::Status::napi_ok {
            return Err(napi::Error::from_reason(format!("cannot export {name}")));
        }
    }
    Ok(())
}
