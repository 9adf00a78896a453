//! The Node addon: the core's [`Engine`] as a class, called on the JS thread.
//!
//! Every method converts its arguments, calls the core and converts the result. The
//! shared JavaScript host (`lib/host.cjs`) drives it exactly as it drives the wasm
//! build, so this file and `bindings-wasm/src/lib.rs` list the same methods.

use leasehold_core::host;
use leasehold_core::{Answer, Clock, Engine, LockError, Millis, StoreFailure};
use napi::bindgen_prelude::*;
use napi_derive::napi;
use std::time::Instant;

mod fast;

/// The error code as JavaScript reads it (`error.code`).
#[derive(Debug)]
pub struct Code(&'static str);

impl AsRef<str> for Code {
    fn as_ref(&self) -> &str {
        self.0
    }
}

/// The one place where core errors become JavaScript errors. The package's JS entry
/// turns the code into the right class (`TypeError`, `RangeError`, …).
fn to_js_error(err: LockError) -> napi::Error<Code> {
    napi::Error::new(Code(err.code()), err.to_string())
}

struct MonotonicClock(Instant);

impl Clock for MonotonicClock {
    fn now(&self) -> Millis {
        self.0.elapsed().as_millis() as Millis
    }
}

/// One engine (one time source) with its memory stores.
#[napi]
#[derive(Debug)]
pub struct NativeEngine {
    pub(crate) inner: Engine,
    outer_locks: host::PendingLocks,
    pub(crate) arm_at: f64,
    strings: Vec<String>,
}

impl Drop for NativeEngine {
    fn drop(&mut self) {
        // Run by the garbage collector, where no caller catches a panic: one would end
        // the process, so it is reported.
        uncaught(|| fast::unregister(self));
    }
}

thread_local! {
    /// Set while code runs where a panic is not caught (it aborts the process).
    static UNCAUGHT: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` with its panics reported, since nothing catches them there.
fn uncaught<T>(f: impl FnOnce() -> T) -> T {
    let before = UNCAUGHT.with(|flag| flag.replace(true));
    let value = f();
    UNCAUGHT.with(|flag| flag.set(before));
    value
}

/// Every call catches a panic and throws it as an Error carrying its message; std's
/// default panic hook would print it to stderr as well, and a library prints nothing of
/// its own. So the default hook runs only when `RUST_BACKTRACE` asks for Rust's report,
/// or for a panic nothing catches (it ends the process: its report must not be lost).
/// The hook is this addon's alone: its copy of std is linked into it.
fn quiet_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let report = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let asked = std::env::var_os("RUST_BACKTRACE").is_some_and(|v| !v.is_empty() && v != "0");
            if asked || UNCAUGHT.with(std::cell::Cell::get) {
                report(info);
            }
        }));
    });
}

/// Adds the fast calls of `fast.rs` to the exports.
#[napi(module_exports)]
#[allow(unsafe_code)]
pub fn init(exports: Object, env: Env) -> napi::Result<()> {
    quiet_panics();
    // SAFETY: called once at load, on the JS thread, with the exports object.
    uncaught(|| unsafe { fast::export(env.raw(), exports.raw()) })
}

#[napi]
impl NativeEngine {
    /// `fake`: run on a fake clock starting at `start`; otherwise on a monotonic clock.
    /// `seed`: 32 bytes of entropy for owner ids.
    #[napi(constructor, catch_unwind)]
    pub fn new(fake: bool, start: f64, seed: Uint8Array) -> Result<Self, Code> {
        let mut bytes = [0u8; 32];
        if seed.len() != 32 {
            return Err(napi::Error::new(Code("ERR_INVALID_ARG_TYPE"), "seed must be 32 bytes".to_owned()));
        }
        bytes.copy_from_slice(&seed);
        let inner = if fake {
            Engine::with_fake_clock(start.max(0.0) as Millis, bytes)
        } else {
            Engine::new(Box::new(MonotonicClock(Instant::now())), bytes)
        };
        Ok(NativeEngine { inner, outer_locks: host::PendingLocks::default(), arm_at: 0.0, strings: Vec::new() })
    }

    pub(crate) fn flags(&mut self) -> u32 {
        host::status_flags(&mut self.inner, &mut self.arm_at)
    }

    #[napi(catch_unwind)]
    pub fn now(&self) -> f64 {
        self.inner.now() as f64
    }

    #[napi(catch_unwind)]
    pub fn arm_at(&self) -> f64 {
        self.arm_at
    }

    #[napi(catch_unwind)]
    pub fn next_deadline(&mut self) -> Option<f64> {
        self.inner.next_deadline().map(|t| t as f64)
    }

    #[napi(catch_unwind)]
    pub fn create_memory_store(&mut self) -> u32 {
        self.inner.create_memory_store()
    }

    /// Forgets a memory store nothing uses any more; whether it was dropped.
    #[napi(catch_unwind)]
    pub fn drop_memory_store(&mut self, id: u32) -> bool {
        self.inner.drop_memory_store(id)
    }

    #[napi(catch_unwind)]
    pub fn mem_acquire(&mut self, store: u32, key: String, owner: String, ttl: f64) -> Result<Option<f64>, Code> {
        let token = self.inner.memory_acquire(store, &key, &owner, ttl as Millis).map_err(to_js_error)?;
        Ok(token.map(|t| t as f64))
    }

    #[napi(catch_unwind)]
    pub fn mem_renew(&mut self, store: u32, key: String, owner: String, ttl: f64) -> Result<bool, Code> {
        self.inner.memory_renew(store, &key, &owner, ttl as Millis).map_err(to_js_error)
    }

    /// Status word; bit 1 set when `owner` held a live lease that ended.
    #[napi(catch_unwind)]
    pub fn mem_release(&mut self, store: u32, key: String, owner: String) -> Result<u32, Code> {
        let released = self.inner.memory_release(store, &key, &owner).map_err(to_js_error)?;
        Ok(u32::from(released) | self.flags())
    }

    #[napi(catch_unwind)]
    pub fn mem_ttl(&mut self, store: u32, key: String) -> Result<Option<f64>, Code> {
        Ok(self.inner.memory_ttl(store, &key).map_err(to_js_error)?.map(|t| t as f64))
    }

    #[napi(catch_unwind)]
    pub fn mem_size(&mut self, store: u32) -> Result<u32, Code> {
        Ok(self.inner.memory_size(store).map_err(to_js_error)? as u32)
    }

    #[napi(catch_unwind)]
    pub fn mem_entries(&mut self, store: u32) -> Result<u32, Code> {
        Ok(self.inner.memory_entries(store).map_err(to_js_error)? as u32)
    }

    /// Defines a lock once (`Engine::define_lock`): its id, or -1 when the engine keeps
    /// no more; executions on it then start with `startDefined`.
    #[napi(catch_unwind)]
    pub fn define_lock(&mut self, kind: u32, store: u32, key: String, ttl: f64, wait: f64) -> Result<i32, Code> {
        let spec = host::lock_spec(kind, store, key, ttl, wait).map_err(to_js_error)?;
        Ok(self.inner.define_lock(spec).map_err(to_js_error)?.map_or(-1, |id| id as i32))
    }

    /// Lets go of one definition of a lock (`Engine::undefine_lock`): its pipeline is gone.
    #[napi(catch_unwind)]
    pub fn undefine_lock(&mut self, lock: u32) -> bool {
        self.inner.undefine_lock(lock)
    }

    /// How many distinct locks are defined (for tests of boundedness).
    #[napi(catch_unwind)]
    pub fn defined_locks(&self) -> u32 {
        self.inner.defined_locks() as u32
    }

    /// Adds an outer lock for the next `start`.
    #[napi(catch_unwind)]
    pub fn add_lock(&mut self, kind: u32, store: u32, key: String, ttl: f64, wait: f64) -> Result<(), Code> {
        self.outer_locks.add(kind, store, key, ttl, wait).map_err(to_js_error)
    }

    /// Starts `exec` under the outer locks added so far plus this innermost one.
    /// `options`: bit 0 renew, bit 1 telemetry, bit 2 manual lease, bit 3 direct
    /// (`host::DIRECT`). Returns the status word of `host::start_word`: above it, 256 ×
    /// the innermost token when bit `RUNNING` says to run now, or 256 × the request of a
    /// store call handed back.
    #[napi(catch_unwind)]
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        &mut self,
        exec: u32,
        options: u32,
        kind: u32,
        store: u32,
        key: String,
        ttl: f64,
        wait: f64,
    ) -> Result<f64, Code> {
        let started =
            self.outer_locks.start(&mut self.inner, exec, options, kind, store, key, ttl, wait).map_err(to_js_error)?;
        Ok(host::start_word(&mut self.inner, exec, options, started, &mut self.arm_at))
    }

    /// Status word; bit 1 set when the execution was still acquiring and is cancelled.
    #[napi(catch_unwind)]
    pub fn cancel(&mut self, exec: u32) -> u32 {
        u32::from(self.inner.cancel(exec)) | self.flags()
    }

    #[napi(catch_unwind)]
    pub fn layer_token(&self, exec: u32, layer: u32) -> Option<f64> {
        self.inner.layer_token(exec, layer).map(|t| t as f64)
    }

    #[napi(catch_unwind)]
    pub fn layer_held(&self, exec: u32, layer: u32) -> bool {
        self.inner.layer_held(exec, layer)
    }

    #[napi(catch_unwind)]
    pub fn answer_renew(&mut self, request: u32, renewed: bool) -> u32 {
        self.inner.answer(request, Answer::Renewed(renewed));
        self.flags()
    }

    /// Extends manual lease `exec` now, to `ttl` ms (or its own ttl).
    #[napi(catch_unwind)]
    pub fn extend(&mut self, exec: u32, ttl: Option<f64>) -> Result<u32, Code> {
        let ttl = ttl
            .map(|t| leasehold_core::duration::from_millis(t, "ttl"))
            .transpose()
            .map_err(|e| to_js_error(e.into()))?;
        let extend = self.inner.extend(exec, ttl).map_err(to_js_error)?;
        Ok(host::extend_status(extend) | self.flags())
    }

    // `layerOwner` is a plain N-API callback (fast.rs).

    #[napi(catch_unwind)]
    pub fn layer_key(&self, exec: u32, layer: u32) -> Option<String> {
        self.inner.layer_key(exec, layer).map(str::to_owned)
    }

    /// The store threw (`bad` is `None`; the host keeps the thrown value under
    /// `request`) or answered with a wrong shape (`bad` says what was expected).
    #[napi(catch_unwind)]
    pub fn answer_failed(&mut self, request: u32, bad: Option<String>) -> u32 {
        let failure = match bad {
            Some(message) => StoreFailure::BadAnswer(message),
            None => StoreFailure::Threw(request),
        };
        self.inner.answer(request, Answer::Failed(failure));
        self.flags()
    }

    #[napi(catch_unwind)]
    pub fn released(&mut self, kind: u32, store: u32, key: String) -> Result<u32, Code> {
        self.inner.released(host::store_ref(kind, store).map_err(to_js_error)?, &key);
        Ok(self.flags())
    }

    /// A store that grants on release handed `key` to `owner`, `age` ms ago at most.
    #[napi(catch_unwind)]
    pub fn granted(
        &mut self,
        kind: u32,
        store: u32,
        key: String,
        owner: String,
        token: f64,
        age: f64,
    ) -> Result<u32, Code> {
        let claimed = host::granted(&mut self.inner, kind, store, &key, &owner, token, age).map_err(to_js_error)?;
        Ok(claimed | self.flags())
    }

    #[napi(catch_unwind)]
    pub fn on_timer(&mut self) -> u32 {
        self.inner.on_host_timer();
        self.flags()
    }

    #[napi(catch_unwind)]
    pub fn advance(&mut self, ms: f64) -> Result<u32, Code> {
        let ms = leasehold_core::duration::clock_step(ms, "ms").map_err(|e| to_js_error(e.into()))?;
        self.inner.advance(ms).map_err(to_js_error)?;
        Ok(self.flags())
    }

    /// Every pending effect, flat (`host::take_flat_effects`); `takeStrings()` then
    /// gives the text they point to, when the header says there is some.
    #[napi(catch_unwind)]
    pub fn take_effects(&mut self) -> Vec<f64> {
        let mut numbers = Vec::new();
        host::take_flat_effects(&mut self.inner, &mut numbers, &mut self.strings);
        numbers
    }

    #[napi(catch_unwind)]
    pub fn take_strings(&mut self) -> Vec<String> {
        std::mem::take(&mut self.strings)
    }

    #[napi(catch_unwind)]
    pub fn live_executions(&self) -> u32 {
        self.inner.live_executions() as u32
    }

    #[napi(catch_unwind)]
    pub fn open_requests(&self) -> u32 {
        self.inner.open_requests() as u32
    }

    /// Panics on purpose, so tests can prove a panic becomes an Error.
    #[napi(catch_unwind)]
    pub fn panic_for_tests(&self) {
        panic!("leasehold: a panic forced by a test");
    }
}

/// Lets `engine` take the fast calls (`fast.rs`: `startDefined`, `finish`, `token`,
/// `layerOwner`, `answerAcquire`, `answerRelease`), which `lib/native.cjs` installs on
/// the prototype.
#[napi(catch_unwind)]
pub fn enable_fast(engine: &mut NativeEngine) {
    fast::register(engine);
}

/// Validates a duration: a number of milliseconds or a string like `'30s'`. Returns
/// milliseconds, or -1 for `Infinity` where `infinite_ok`.
#[napi(catch_unwind)]
pub fn check_duration(ms: Option<f64>, text: Option<String>, arg: String, infinite_ok: bool) -> Result<f64, Code> {
    host::duration_arg(ms, text.as_deref(), &arg, infinite_ok).map_err(to_js_error)
}
