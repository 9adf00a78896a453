//! The wasm module: the core's [`Engine`] as a class, for browsers, edge workers, Deno
//! and any runtime without the native addon.
//!
//! Every method converts its arguments, calls the core and converts the result. The
//! shared JavaScript host (`lib/host/api.cjs`) drives it exactly as it drives the Node addon,
//! so both list the same methods under the same JavaScript names: those they share come
//! from one table (`leasehold_core::binding_surface!`); this file adds the constructor
//! and the calls every execution makes, in forms that answer a plain number.
//!
//! A Rust panic here aborts: the runtime throws a `WebAssembly.RuntimeError` to the
//! caller, which the host turns into an `Error`, with the panic's message from
//! `takePanic()`. The process lives; the engine instance that panicked is unusable
//! afterwards (every later call on it throws).

use leasehold_core::host;
use leasehold_core::{Answer, ArgError, Clock, Engine, LockError, Millis};
use wasm_bindgen::prelude::*;

#[wasm_bindgen]
extern "C" {
    /// `performance.now()`: monotonic milliseconds, in Node, browsers, workerd, Deno and Bun.
    #[wasm_bindgen(js_namespace = performance, js_name = now)]
    fn performance_now() -> f64;

    /// JavaScript's `Error`, declared here rather than taken from js-sys: these two calls
    /// are all the module needs of it, and js-sys would bring code of its own.
    #[wasm_bindgen(js_name = Error)]
    type JsError;

    #[wasm_bindgen(constructor, js_class = "Error")]
    fn new(message: &str) -> JsError;

    /// `error.code = code`.
    #[wasm_bindgen(method, structural, setter = code)]
    fn set_code(this: &JsError, code: &str);

    /// The module's `WebAssembly.Memory` ([`wasm_bindgen::memory`]).
    type WasmMemory;

    /// `memory.buffer`: the memory's current `ArrayBuffer`.
    #[wasm_bindgen(method, structural, getter)]
    fn buffer(this: &WasmMemory) -> JsValue;

    /// JavaScript's `Float64Array`.
    #[wasm_bindgen(js_name = Float64Array)]
    pub type Float64Array;

    /// `new Float64Array(buffer, byteOffset, length)`: a view, not a copy.
    #[wasm_bindgen(constructor, js_class = "Float64Array")]
    fn view(buffer: &JsValue, byte_offset: u32, length: u32) -> Float64Array;
}

/// The one place where core errors become JavaScript errors: an `Error` whose `code` is
/// [`LockError::code`]. The package's JS entry turns the code into the right class
/// (`TypeError`, `RangeError`, …).
fn to_js_error(err: LockError) -> JsValue {
    let error = JsError::new(&err.message());
    error.set_code(err.code());
    error.into()
}

/// The host's monotonic clock, counted from the engine's creation.
struct PerformanceClock(f64);

impl Clock for PerformanceClock {
    fn now(&self) -> Millis {
        (performance_now() - self.0).max(0.0) as Millis
    }

    fn now_micros(&self) -> u64 {
        ((performance_now() - self.0) * 1000.0).max(0.0) as u64
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

/// Emits the rows of the shared method table (`leasehold_core::binding_surface!`) as
/// wasm-bindgen methods under their JavaScript names. The rows' docs stay out of the
/// glue: wasm-bindgen copies a doc written in a macro into it as a raw string (`r"…`).
macro_rules! wasm_methods {
    ($(
        $(#[doc = $doc:literal])*
        $(#[allow($($lint:tt)*)])?
        $js:ident => fn $name:ident ($($args:tt)*) $(-> [$($ret:tt)*])? { $($body:tt)* }
    )*) => {
        #[wasm_bindgen]
        impl WasmEngine {
            $(
                $(#[allow($($lint)*)])?
                #[wasm_bindgen(js_name = $js)]
                pub fn $name($($args)*) $(-> $($ret)*)? { $($body)* }
            )*
        }
    };
}

/// What a fallible method of the table throws: an `Error` with a `code`.
type Thrown = JsValue;

leasehold_core::binding_surface!(wasm_methods);

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

    /// `start` under one defined lock: the same status, with the token above it.
    #[wasm_bindgen(js_name = startDefined)]
    pub fn start_defined(&mut self, exec: u32, options: u32, lock: u32) -> Result<f64, JsValue> {
        let started = self.inner.start_defined(exec, lock, host::exec_options(options)).map_err(to_js_error)?;
        Ok(host::start_word(&mut self.inner, exec, options, started, &mut self.arm_at))
    }

    /// The callback of `exec` settled (`ok`: with a value). With `handoff`, a waiter
    /// granted in the call comes back above the status bits (`host::finish_call`).
    pub fn finish(&mut self, exec: u32, ok: bool, handoff: bool) -> Result<f64, JsValue> {
        host::finish_call(&mut self.inner, exec, ok, handoff, &mut self.arm_at).map_err(to_js_error)
    }

    /// `startDefined` answering a plain number: wasm-bindgen returns a `Result` or an
    /// `Option` to JavaScript as an array, one allocation per call, and these calls are
    /// made for every execution. -1 on error, which `takeError` then returns.
    /// `lib/host/fast-calls.cjs` installs them as `startDefined`, `finish` and `token`.
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

    /// The fencing token of the innermost lock of `exec`, `undefined` when none.
    pub fn token(&self, exec: u32) -> Option<f64> {
        self.inner.token(exec).map(|t| t as f64)
    }

    /// A store answered `acquire` (`undefined`: held). With `direct`, the execution's
    /// `run` may come back in the status word instead of as an effect
    /// (`host::answer_call`).
    #[wasm_bindgen(js_name = answerAcquire)]
    pub fn answer_acquire_call(&mut self, request: u32, token: Option<f64>, direct: bool) -> u32 {
        let answer = Answer::Acquired(token.map(|t| t as u64));
        host::answer_call(&mut self.inner, request, answer, direct, &mut self.arm_at)
    }

    /// A store answered `release`; `released`: what it resolved to, when it was a boolean.
    /// With `direct`, the execution's `settled` may come back in the status word
    /// (`host::answer_call`).
    #[wasm_bindgen(js_name = answerRelease)]
    pub fn answer_release_call(&mut self, request: u32, released: Option<bool>, direct: bool) -> u32 {
        host::answer_call(&mut self.inner, request, Answer::Released(released), direct, &mut self.arm_at)
    }

    /// The owner id of lock `layer` of `exec`, `undefined` when none.
    #[wasm_bindgen(js_name = layerOwner)]
    pub fn layer_owner(&self, exec: u32, layer: u32) -> Option<String> {
        self.inner.layer_owner(exec, layer).map(str::to_owned)
    }

    /// The words shared with the host's fast path (`leasehold_core::fast_words`): a
    /// `Float64Array` view of linear memory, which a growth of the memory detaches (its
    /// length reads 0 then): the host asks again. The engine keeps the words, at this
    /// address, for as long as it lives; the view is read and written only between calls
    /// into the module.
    #[wasm_bindgen(js_name = fastWords)]
    pub fn fast_words(&self) -> Float64Array {
        let words = self.inner.fast_words();
        let memory: WasmMemory = wasm_bindgen::memory().unchecked_into();
        // A wasm32 address is a byte offset into the memory's buffer.
        Float64Array::view(&memory.buffer(), words.as_ptr() as usize as u32, words.len() as u32)
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
/// have, and keeping it would bring its formatting code into the module.
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
