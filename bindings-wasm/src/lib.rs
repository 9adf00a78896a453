//! The wasm module: the core's [`Engine`] as a class, for browsers, edge workers, Deno
//! and any runtime without the native addon.
//!
//! Every method converts its arguments, calls the core and converts the result. The
//! shared JavaScript host (`lib/host.cjs`) drives it exactly as it drives the Node addon,
//! so this file lists the same methods, under the same JavaScript names, as
//! `bindings-node/src/lib.rs`.
//!
//! A Rust panic here aborts: the runtime throws a `WebAssembly.RuntimeError` to the
//! caller, which the host turns into an `Error`, with the panic's message from
//! `takePanic()`. The process lives; the engine instance that panicked is unusable
//! afterwards (every later call on it throws).

use js_sys::Reflect;
use leasehold_core::host;
use leasehold_core::{Answer, ArgError, Clock, Engine, LockError, Millis, StoreFailure};
use wasm_bindgen::prelude::*;

#[wasm_bindgen]
extern "C" {
    /// `performance.now()`: monotonic milliseconds, in Node, browsers, workerd, Deno and Bun.
    #[wasm_bindgen(js_namespace = performance, js_name = now)]
    fn performance_now() -> f64;
}

/// The one place where core errors become JavaScript errors: an `Error` whose `code` is
/// [`LockError::code`]. The package's JS entry turns the code into the right class
/// (`TypeError`, `RangeError`, …).
fn to_js_error(err: LockError) -> JsValue {
    let error = js_sys::Error::new(&err.to_string());
    // Setting a property on a fresh Error cannot fail.
    let _ = Reflect::set(&error, &JsValue::from_str("code"), &JsValue::from_str(err.code()));
    error.into()
}

/// The host's monotonic clock, counted from the engine's creation.
struct PerformanceClock(f64);

impl Clock for PerformanceClock {
    fn now(&self) -> Millis {
        (performance_now() - self.0).max(0.0) as Millis
    }
}

/// One engine (one time source) with its memory stores.
#[wasm_bindgen]
#[derive(Debug)]
pub struct WasmEngine {
    inner: Engine,
    outer_locks: host::PendingLocks,
    arm_at: f64,
    strings: Vec<String>,
    /// The error of the last `*Fast` call that failed, for `takeError`.
    error: Option<JsValue>,
}

#[wasm_bindgen]
impl WasmEngine {
    /// `fake`: run on a fake clock starting at `start`; otherwise on `performance.now()`.
    /// `seed`: 32 bytes of entropy for owner ids.
    #[wasm_bindgen(constructor)]
    pub fn new(fake: bool, start: f64, seed: &[u8]) -> Result<WasmEngine, JsValue> {
        let bytes: [u8; 32] = seed
            .try_into()
            .map_err(|_| to_js_error(ArgError::type_error("seed", "seed must be 32 bytes".to_owned()).into()))?;
        let inner = if fake {
            Engine::with_fake_clock(start.max(0.0) as Millis, bytes)
        } else {
            Engine::new(Box::new(PerformanceClock(performance_now())), bytes)
        };
        Ok(WasmEngine {
            inner,
            outer_locks: host::PendingLocks::default(),
            arm_at: 0.0,
            strings: Vec::new(),
            error: None,
        })
    }

    fn flags(&mut self) -> u32 {
        host::status_flags(&mut self.inner, &mut self.arm_at)
    }

    /// The engine's time in milliseconds.
    pub fn now(&self) -> f64 {
        self.inner.now() as f64
    }

    /// When to fire the host timer, after a status with `TIMER_ARM`.
    #[wasm_bindgen(js_name = armAt)]
    pub fn arm_at(&self) -> f64 {
        self.arm_at
    }

    /// The next engine deadline, if any.
    #[wasm_bindgen(js_name = nextDeadline)]
    pub fn next_deadline(&mut self) -> Option<f64> {
        self.inner.next_deadline().map(|t| t as f64)
    }

    /// A new memory store of this engine; its id.
    #[wasm_bindgen(js_name = createMemoryStore)]
    pub fn create_memory_store(&mut self) -> u32 {
        self.inner.create_memory_store()
    }

    /// Forgets a memory store nothing uses any more; whether it was dropped.
    #[wasm_bindgen(js_name = dropMemoryStore)]
    pub fn drop_memory_store(&mut self, id: u32) -> bool {
        self.inner.drop_memory_store(id)
    }

    /// The fencing token, or `undefined` when the key is held.
    #[wasm_bindgen(js_name = memAcquire)]
    pub fn mem_acquire(&mut self, store: u32, key: String, owner: String, ttl: f64) -> Result<Option<f64>, JsValue> {
        let token = self.inner.memory_acquire(store, &key, &owner, ttl as Millis).map_err(to_js_error)?;
        Ok(token.map(|t| t as f64))
    }

    /// Whether `owner`'s live lease was extended.
    #[wasm_bindgen(js_name = memRenew)]
    pub fn mem_renew(&mut self, store: u32, key: String, owner: String, ttl: f64) -> Result<bool, JsValue> {
        self.inner.memory_renew(store, &key, &owner, ttl as Millis).map_err(to_js_error)
    }

    /// Status word; bit 1 set when `owner` held a live lease that ended.
    #[wasm_bindgen(js_name = memRelease)]
    pub fn mem_release(&mut self, store: u32, key: String, owner: String) -> Result<u32, JsValue> {
        let released = self.inner.memory_release(store, &key, &owner).map_err(to_js_error)?;
        Ok(u32::from(released) | self.flags())
    }

    /// Milliseconds left on the live lease of `key`, `undefined` when free.
    #[wasm_bindgen(js_name = memTtl)]
    pub fn mem_ttl(&mut self, store: u32, key: String) -> Result<Option<f64>, JsValue> {
        Ok(self.inner.memory_ttl(store, &key).map_err(to_js_error)?.map(|t| t as f64))
    }

    /// Keys held or waited for.
    #[wasm_bindgen(js_name = memSize)]
    pub fn mem_size(&mut self, store: u32) -> Result<u32, JsValue> {
        Ok(self.inner.memory_size(store).map_err(to_js_error)? as u32)
    }

    /// Entries kept in memory (for tests of boundedness).
    #[wasm_bindgen(js_name = memEntries)]
    pub fn mem_entries(&mut self, store: u32) -> Result<u32, JsValue> {
        Ok(self.inner.memory_entries(store).map_err(to_js_error)? as u32)
    }

    /// Defines a lock once (`Engine::define_lock`): its id, or -1 when the engine keeps
    /// no more; executions on it then start with `startDefined`.
    #[wasm_bindgen(js_name = defineLock)]
    pub fn define_lock(&mut self, kind: u32, store: u32, key: String, ttl: f64, wait: f64) -> Result<i32, JsValue> {
        let spec = host::lock_spec(kind, store, key, ttl, wait).map_err(to_js_error)?;
        Ok(self.inner.define_lock(spec).map_err(to_js_error)?.map_or(-1, |id| id as i32))
    }

    /// Lets go of one definition of a lock (`Engine::undefine_lock`): its pipeline is gone.
    #[wasm_bindgen(js_name = undefineLock)]
    pub fn undefine_lock(&mut self, lock: u32) -> bool {
        self.inner.undefine_lock(lock)
    }

    /// How many distinct locks are defined (for tests of boundedness).
    #[wasm_bindgen(js_name = definedLocks)]
    pub fn defined_locks(&self) -> u32 {
        self.inner.defined_locks() as u32
    }

    /// `start` under one defined lock: the same status, with the token above it.
    #[wasm_bindgen(js_name = startDefined)]
    pub fn start_defined(&mut self, exec: u32, options: u32, lock: u32) -> Result<f64, JsValue> {
        let started = self.inner.start_defined(exec, lock, host::exec_options(options)).map_err(to_js_error)?;
        Ok(host::start_word(&mut self.inner, exec, options, started, &mut self.arm_at))
    }

    /// Adds an outer lock for the next `start`.
    #[wasm_bindgen(js_name = addLock)]
    pub fn add_lock(&mut self, kind: u32, store: u32, key: String, ttl: f64, wait: f64) -> Result<(), JsValue> {
        self.outer_locks.add(kind, store, key, ttl, wait).map_err(to_js_error)
    }

    /// Starts `exec` under the outer locks added so far plus this innermost one.
    /// `options`: bit 0 renew, bit 1 telemetry, bit 2 manual lease, bit 3 direct
    /// (`host::DIRECT`). Returns the status word of `host::start_word`: above it, 256 ×
    /// the innermost token when bit `RUNNING` says to run now, or 256 × the request of a
    /// store call handed back.
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
    ) -> Result<f64, JsValue> {
        let started =
            self.outer_locks.start(&mut self.inner, exec, options, kind, store, key, ttl, wait).map_err(to_js_error)?;
        Ok(host::start_word(&mut self.inner, exec, options, started, &mut self.arm_at))
    }

    /// The callback of `exec` settled (`ok`: with a value). With `handoff`, a waiter
    /// granted in the call comes back above the status bits (`host::finish_call`).
    pub fn finish(&mut self, exec: u32, ok: bool, handoff: bool) -> Result<f64, JsValue> {
        host::finish_call(&mut self.inner, exec, ok, handoff, &mut self.arm_at).map_err(to_js_error)
    }

    /// `startDefined` answering a plain number: wasm-bindgen returns a `Result` or an
    /// `Option` to JavaScript as an array, one allocation per call, and these calls are
    /// made for every execution. -1 on error, which `takeError` then returns. The host
    /// (lib/host.cjs) installs them as `startDefined`, `finish` and `token`.
    #[wasm_bindgen(js_name = startDefinedFast)]
    pub fn start_defined_fast(&mut self, exec: u32, options: u32, lock: u32) -> f64 {
        let result = self.start_defined(exec, options, lock);
        self.number_or_error(result)
    }

    /// `finish` answering a plain number (see `startDefinedFast`): -1 on error.
    #[wasm_bindgen(js_name = finishFast)]
    pub fn finish_fast(&mut self, exec: u32, ok: bool, handoff: bool) -> f64 {
        let result = self.finish(exec, ok, handoff);
        self.number_or_error(result)
    }

    /// `token` answering a plain number (see `startDefinedFast`): -1 when none.
    #[wasm_bindgen(js_name = tokenFast)]
    pub fn token_fast(&self, exec: u32) -> f64 {
        self.inner.token(exec).map_or(-1.0, |t| t as f64)
    }

    /// The error of the last `*Fast` call that answered -1.
    #[wasm_bindgen(js_name = takeError)]
    pub fn take_error(&mut self) -> JsValue {
        self.error.take().unwrap_or(JsValue::UNDEFINED)
    }

    fn number_or_error(&mut self, result: Result<f64, JsValue>) -> f64 {
        result.unwrap_or_else(|err| {
            self.error = Some(err);
            -1.0
        })
    }

    /// Status word; bit 1 set when the execution was still acquiring and is cancelled.
    pub fn cancel(&mut self, exec: u32) -> u32 {
        u32::from(self.inner.cancel(exec)) | self.flags()
    }

    /// The fencing token of the innermost lock of `exec`, `undefined` when none.
    pub fn token(&self, exec: u32) -> Option<f64> {
        self.inner.token(exec).map(|t| t as f64)
    }

    /// The fencing token of lock `layer` of `exec`.
    #[wasm_bindgen(js_name = layerToken)]
    pub fn layer_token(&self, exec: u32, layer: u32) -> Option<f64> {
        self.inner.layer_token(exec, layer).map(|t| t as f64)
    }

    /// Whether lock `layer` of `exec` is held.
    #[wasm_bindgen(js_name = layerHeld)]
    pub fn layer_held(&self, exec: u32, layer: u32) -> bool {
        self.inner.layer_held(exec, layer)
    }

    /// A store answered `acquire` (`undefined`: held). With `direct`, the execution's
    /// `run` may come back in the status word instead of as an effect
    /// (`host::answer_call`).
    #[wasm_bindgen(js_name = answerAcquire)]
    pub fn answer_acquire_call(&mut self, request: u32, token: Option<f64>, direct: bool) -> u32 {
        let answer = Answer::Acquired(token.map(|t| t as u64));
        host::answer_call(&mut self.inner, request, answer, direct, &mut self.arm_at)
    }

    /// A store answered `renew`.
    #[wasm_bindgen(js_name = answerRenew)]
    pub fn answer_renew(&mut self, request: u32, renewed: bool) -> u32 {
        self.inner.answer(request, Answer::Renewed(renewed));
        self.flags()
    }

    /// A store answered `release`; `released`: what it resolved to, when it was a boolean.
    /// With `direct`, the execution's `settled` may come back in the status word
    /// (`host::answer_call`).
    #[wasm_bindgen(js_name = answerRelease)]
    pub fn answer_release_call(&mut self, request: u32, released: Option<bool>, direct: bool) -> u32 {
        host::answer_call(&mut self.inner, request, Answer::Released(released), direct, &mut self.arm_at)
    }

    /// Extends manual lease `exec` now, to `ttl` ms (or its own ttl).
    pub fn extend(&mut self, exec: u32, ttl: Option<f64>) -> Result<u32, JsValue> {
        let ttl = ttl
            .map(|t| leasehold_core::duration::from_millis(t, "ttl"))
            .transpose()
            .map_err(|e| to_js_error(e.into()))?;
        let extend = self.inner.extend(exec, ttl).map_err(to_js_error)?;
        Ok(host::extend_status(extend) | self.flags())
    }

    /// The owner id of lock `layer` of `exec`, `undefined` when none.
    #[wasm_bindgen(js_name = layerOwner)]
    pub fn layer_owner(&self, exec: u32, layer: u32) -> Option<String> {
        self.inner.layer_owner(exec, layer).map(str::to_owned)
    }

    /// The key of lock `layer` of `exec`, `undefined` when none.
    #[wasm_bindgen(js_name = layerKey)]
    pub fn layer_key(&self, exec: u32, layer: u32) -> Option<String> {
        self.inner.layer_key(exec, layer).map(str::to_owned)
    }

    /// The store threw (`bad` is `undefined`; the host keeps the thrown value under
    /// `request`) or answered with a wrong shape (`bad` says what was expected).
    #[wasm_bindgen(js_name = answerFailed)]
    pub fn answer_failed(&mut self, request: u32, bad: Option<String>) -> u32 {
        let failure = match bad {
            Some(message) => StoreFailure::BadAnswer(message),
            None => StoreFailure::Threw(request),
        };
        self.inner.answer(request, Answer::Failed(failure));
        self.flags()
    }

    /// A store announced that `key` was released.
    pub fn released(&mut self, kind: u32, store: u32, key: String) -> Result<u32, JsValue> {
        self.inner.released(host::store_ref(kind, store).map_err(to_js_error)?, &key);
        Ok(self.flags())
    }

    /// A store that grants on release handed `key` to `owner`, `age` ms ago at most.
    pub fn granted(
        &mut self,
        kind: u32,
        store: u32,
        key: String,
        owner: String,
        token: f64,
        age: f64,
    ) -> Result<u32, JsValue> {
        let claimed = host::granted(&mut self.inner, kind, store, &key, &owner, token, age).map_err(to_js_error)?;
        Ok(claimed | self.flags())
    }

    /// The host timer fired.
    #[wasm_bindgen(js_name = onTimer)]
    pub fn on_timer(&mut self) -> u32 {
        self.inner.on_host_timer();
        self.flags()
    }

    /// Moves a fake clock forward by `ms`, running every due timer.
    pub fn advance(&mut self, ms: f64) -> Result<u32, JsValue> {
        let ms = leasehold_core::duration::clock_step(ms, "ms").map_err(|e| to_js_error(e.into()))?;
        self.inner.advance(ms).map_err(to_js_error)?;
        Ok(self.flags())
    }

    /// Every pending effect, flat (`host::take_flat_effects`); `takeStrings()` then
    /// gives the text they point to, when the header says there is some.
    #[wasm_bindgen(js_name = takeEffects)]
    pub fn take_effects(&mut self) -> Vec<f64> {
        let mut numbers = Vec::new();
        host::take_flat_effects(&mut self.inner, &mut numbers, &mut self.strings);
        numbers
    }

    #[wasm_bindgen(js_name = takeStrings)]
    pub fn take_strings(&mut self) -> Vec<String> {
        std::mem::take(&mut self.strings)
    }

    /// Executions not yet settled.
    #[wasm_bindgen(js_name = liveExecutions)]
    pub fn live_executions(&self) -> u32 {
        self.inner.live_executions() as u32
    }

    /// Store calls not yet answered.
    #[wasm_bindgen(js_name = openRequests)]
    pub fn open_requests(&self) -> u32 {
        self.inner.open_requests() as u32
    }

    /// Panics on purpose, so tests can prove a panic becomes an Error.
    #[wasm_bindgen(js_name = panicForTests)]
    pub fn panic_for_tests(&self) {
        panic!("leasehold: a panic forced by a test");
    }
}

/// Calls for Rust callers (the binding's tests) that take every outcome as effects.
impl WasmEngine {
    /// `answerAcquire` without `direct`: the status word, every outcome as effects.
    pub fn answer_acquire(&mut self, request: u32, token: Option<f64>) -> u32 {
        self.answer_acquire_call(request, token, false)
    }

    /// `answerRelease` without `direct`: the status word, every outcome as effects.
    pub fn answer_release(&mut self, request: u32, released: Option<bool>) -> u32 {
        self.answer_release_call(request, released, false)
    }
}

thread_local! {
    /// The message of the panic that last aborted a call, until `takePanic()` reads it.
    static PANIC: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// A panic aborts with a trap that says only "unreachable": from this call on, the
/// module's panic hook keeps a panic's message for the host, which reads it with
/// `takePanic()` when it catches the trap. The package's loaders call it once; Rust code
/// that embeds this crate (the binding's tests) keeps its own hook unless it calls it.
/// The hook it replaces, std's, writes to a stderr that wasm32-unknown-unknown does not
/// have (and keeping it would cost about 3 KB of the gzipped module).
#[wasm_bindgen(js_name = keepPanics)]
pub fn keep_panics() {
    std::panic::set_hook(Box::new(|info| {
        let message = host::panic_message(info.payload());
        PANIC.with(|panic| *panic.borrow_mut() = Some(message));
    }));
}

/// The message of the panic behind the last trap, once; `undefined` when there was none.
#[wasm_bindgen(js_name = takePanic)]
pub fn take_panic() -> Option<String> {
    PANIC.with(|panic| panic.borrow_mut().take())
}
