//! The Node addon: the core's [`Engine`] as a class, called on the JS thread.
//!
//! Every method converts its arguments, calls the core and converts the result. The
//! shared JavaScript host (`lib/host/api.cjs`) drives it exactly as it drives the wasm
//! build, so both list the same methods: those they share come from one table
//! (`leasehold_core::binding_surface!`); this file adds the constructor, and `fast.rs`
//! the calls every execution makes.

use leasehold_core::host;
use leasehold_core::{Clock, Engine, LockError, Millis};
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

    fn now_micros(&self) -> u64 {
        self.0.elapsed().as_micros() as u64
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

/// Emits the rows of the shared method table (`leasehold_core::binding_surface!`) as
/// napi methods; napi names each by the camel case of its Rust name.
macro_rules! napi_methods {
    ($($(#[$($attr:tt)*])* $js:ident => fn $name:ident ($($args:tt)*) $(-> [$($ret:tt)*])? { $($body:tt)* })*) => {
        #[napi]
        impl NativeEngine {
            $(
                $(#[$($attr)*])*
                #[napi(catch_unwind)]
                pub fn $name($($args)*) $(-> $($ret)*)? { $($body)* }
            )*
        }
    };
}

/// What a fallible method of the table throws: an `Error` with a `code`.
type Thrown = Code;

leasehold_core::binding_surface!(napi_methods);

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

    /// The words shared with the host's fast path (`leasehold_core::fast_words`): a
    /// `Float64Array` over the engine's own memory, which never moves. The host asks
    /// once per engine.
    #[napi(catch_unwind)]
    #[allow(unsafe_code)]
    pub fn fast_words(&self) -> Float64Array {
        let words = self.inner.fast_words();
        let (data, len) = (words.as_ptr(), words.len());
        // SAFETY: the memory lives while `words` does, which the array's finalizer drops;
        // JavaScript and the engine use it on this one thread, never at once.
        unsafe { Float64Array::with_external_data(data, len, move |_, _| drop(words)) }
    }

    /// Panics on purpose, so tests can prove a panic becomes an Error.
    #[napi(catch_unwind)]
    pub fn panic_for_tests(&self) {
        panic!("leasehold: a panic forced by a test");
    }
}

/// Lets `engine` take the fast calls (`fast.rs`: `startDefined`, `finish`, `token`,
/// `layerOwner`, `answerAcquire`, `answerRelease`), which `lib/entries/native.cjs` installs on
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
