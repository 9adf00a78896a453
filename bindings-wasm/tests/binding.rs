//! The wasm binding as JavaScript sees it: status words, effect objects, error objects and
//! the clocks. Runs in Node by default and in headless Chromium with
//! `WASM_BINDGEN_USE_BROWSER=1` (`scripts/test-wasm-bindgen.sh` runs both).
#![cfg(target_arch = "wasm32")]

use js_sys::Reflect;
use leasehold_core::host::{status, store_kind};
use leasehold_wasm::{check_duration, WasmEngine};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_test::wasm_bindgen_test;

const RENEW: u32 = 1;
const JS_STORE: u32 = 1;

fn get(object: &JsValue, name: &str) -> JsValue {
    Reflect::get(object, &JsValue::from_str(name)).expect("a readable property")
}

fn fake_engine() -> WasmEngine {
    WasmEngine::new(true, 0.0, &[7; 32]).expect("a fake-clock engine")
}

/// `start`'s status word (the low byte) and, when running, the token (× 256 above it).
fn started(value: f64) -> (u32, u64) {
    ((value % 256.0) as u32, (value / 256.0) as u64)
}

/// The error's `code`, after checking it is a real JS `Error`.
fn code_of(error: JsValue) -> String {
    assert!(error.is_instance_of::<js_sys::Error>(), "{error:?} is not an Error");
    get(&error, "code").as_string().expect("a string code")
}

#[wasm_bindgen_test]
fn start_and_finish_on_the_memory_store_are_synchronous() {
    let mut engine = fake_engine();
    let (first, token) = started(engine.start(1, RENEW, store_kind::MEMORY, 0, "k".into(), 30_000.0, 0.0).unwrap());
    assert_eq!(first & 0x0f, status::RUNNING);
    assert_eq!(engine.token(1), Some(token as f64), "start returns the token it granted");
    assert_eq!(engine.mem_size(0).unwrap(), 1);

    // A second execution on the key fails fast (wait 0): held.
    let (second, _) = started(engine.start(2, RENEW, store_kind::MEMORY, 0, "k".into(), 30_000.0, 0.0).unwrap());
    assert_eq!(second & 0x0f, 0);
    let effects = engine.take_effects();
    let settled = effects.iter().find(|e| get(e, "kind") == "settled").expect("a settled effect");
    assert_eq!(get(&settled, "exec").as_f64(), Some(2.0));
    assert_eq!(get(&settled, "outcome"), "error");
    assert_eq!(get(&settled, "code"), "LOCK_NOT_ACQUIRED");
    assert_eq!(get(&settled, "key"), "k");

    let finished = engine.finish(1, true).unwrap();
    assert_eq!(finished & 0x0f, status::SETTLED_VALUE);
    assert_eq!(engine.token(1), None);
    assert_eq!(engine.mem_size(0).unwrap(), 0);
    assert_eq!(engine.live_executions(), 0);

    // Tokens only increase.
    let (third, next) = started(engine.start(3, RENEW, store_kind::MEMORY, 0, "k".into(), 30_000.0, 0.0).unwrap());
    assert_eq!(third & 0x0f, status::RUNNING);
    assert!(next > token);
}

#[wasm_bindgen_test]
fn effects_are_plain_objects_with_every_field() {
    let mut engine = fake_engine();
    let (pending, _) = started(engine.start(1, RENEW, store_kind::POLLED, JS_STORE, "k".into(), 1_000.0, 0.0).unwrap());
    assert_ne!(pending & status::EFFECTS, 0);
    assert_eq!(pending & 0x0f, 0);
    let effects = engine.take_effects();
    assert!(js_sys::Array::is_array(&effects));
    assert_eq!(effects.length(), 1);
    let call = effects.get(0);
    let plain = js_sys::Object::get_prototype_of(&js_sys::Object::new());
    assert_eq!(js_sys::Object::get_prototype_of(&call), plain, "a plain object, not a class instance");
    for field in [
        "kind", "exec", "layer", "request", "store", "method", "key", "owner", "ttl", "watch", "outcome", "code",
        "message", "cause", "waited", "token",
    ] {
        assert!(Reflect::has(&call, &JsValue::from_str(field)).unwrap(), "missing field {field}");
    }
    assert_eq!(get(&call, "kind"), "call");
    assert_eq!(get(&call, "method"), "acquire");
    assert_eq!(get(&call, "key"), "k");
    assert_eq!(get(&call, "store").as_f64(), Some(f64::from(JS_STORE)));
    assert_eq!(get(&call, "ttl").as_f64(), Some(1_000.0));
    assert_eq!(get(&call, "watch"), JsValue::FALSE);
    assert!(get(&call, "owner").as_string().is_some_and(|owner| !owner.is_empty()));
    // Absent strings are `undefined`, never null or "".
    for absent in ["outcome", "code", "message"] {
        assert!(get(&call, absent).is_undefined(), "{absent} should be undefined");
    }

    let request = get(&call, "request").as_f64().unwrap() as u32;
    let answered = engine.answer_acquire(request, Some(41.0));
    assert_ne!(answered & status::EFFECTS, 0);
    let run = engine.take_effects().get(0);
    assert_eq!(get(&run, "kind"), "run");
    assert_eq!(get(&run, "exec").as_f64(), Some(1.0));
    assert_eq!(engine.token(1), Some(41.0));
    assert_eq!(engine.layer_token(1, 0), Some(41.0));
    assert!(engine.layer_held(1, 0));
    assert!(engine.layer_owner(1, 0).is_some());
    assert_eq!(engine.token(99), None);
}

#[wasm_bindgen_test]
fn bad_arguments_are_errors_with_a_code() {
    let mut engine = fake_engine();
    let negative = engine.start(1, RENEW, store_kind::MEMORY, 0, "k".into(), -5.0, 0.0).unwrap_err();
    assert_eq!(code_of(negative.clone()), "ERR_OUT_OF_RANGE");
    assert!(get(&negative, "message").as_string().unwrap().contains("ttl"));
    assert_eq!(code_of(engine.add_lock(9, 0, "k".into(), 1_000.0, 0.0).unwrap_err()), "ERR_INVALID_ARG_TYPE");
    assert_eq!(
        code_of(engine.start(1, RENEW, store_kind::MEMORY, 0, String::new(), 1.0, 0.0).unwrap_err()),
        "ERR_INVALID_ARG_TYPE"
    );
    assert_eq!(code_of(engine.finish(77, true).unwrap_err()), "ERR_OUT_OF_RANGE");
    assert_eq!(code_of(WasmEngine::new(true, 0.0, &[1; 3]).unwrap_err()), "ERR_INVALID_ARG_TYPE");

    assert_eq!(check_duration(None, Some("1m30s".into()), "ttl".into(), false).unwrap(), 90_000.0);
    assert_eq!(check_duration(Some(f64::INFINITY), None, "wait".into(), true).unwrap(), -1.0);
    assert_eq!(
        code_of(check_duration(None, Some("soon".into()), "ttl".into(), false).unwrap_err()),
        "ERR_INVALID_ARG_TYPE"
    );
    assert_eq!(code_of(check_duration(Some(f64::NAN), None, "ttl".into(), false).unwrap_err()), "ERR_OUT_OF_RANGE");
    assert_eq!(code_of(check_duration(None, None, "ttl".into(), false).unwrap_err()), "ERR_INVALID_ARG_TYPE");
}

#[wasm_bindgen_test]
fn the_fake_clock_runs_polls_when_advanced() {
    let mut engine = fake_engine();
    engine.start(1, RENEW, store_kind::POLLED, JS_STORE, "k".into(), 1_000.0, 500.0).unwrap();
    let first = engine.take_effects().get(0);
    let request = get(&first, "request").as_f64().unwrap() as u32;
    // Held: the engine polls again 50 ms later.
    engine.answer_acquire(request, None);
    assert_eq!(engine.take_effects().length(), 0);
    assert_eq!(engine.next_deadline(), Some(50.0));

    engine.advance(49.0).unwrap();
    assert_eq!(engine.now(), 49.0);
    assert_eq!(engine.take_effects().length(), 0);
    let status = engine.advance(1.0).unwrap();
    assert_ne!(status & status::EFFECTS, 0);
    let retry = engine.take_effects().get(0);
    assert_eq!(get(&retry, "kind"), "call");
    assert_eq!(get(&retry, "method"), "acquire");
    assert_eq!(engine.now(), 50.0);

    assert_eq!(code_of(engine.advance(-1.0).unwrap_err()), "ERR_OUT_OF_RANGE");
}

#[wasm_bindgen_test]
fn the_real_clock_is_performance_now() {
    let mut engine = WasmEngine::new(false, 0.0, &[9; 32]).unwrap();
    let now = engine.now();
    assert!((0.0..1_000.0).contains(&now), "a fresh engine's clock starts near 0, got {now}");
    assert_eq!(code_of(engine.advance(10.0).unwrap_err()), "ERR_INVALID_ARG_TYPE");
}
