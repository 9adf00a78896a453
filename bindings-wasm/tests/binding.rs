//! The wasm binding as JavaScript sees it: status words, flat effects, error objects and
//! the clocks. Runs in Node by default and in headless Chromium with
//! `WASM_BINDGEN_USE_BROWSER=1` (`scripts/test-wasm-bindgen.sh` runs both).
#![cfg(target_arch = "wasm32")]

use js_sys::Reflect;
use leasehold_core::host::{status, store_kind};
use leasehold_wasm::WasmEngine;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_test::wasm_bindgen_test;

const RENEW: u32 = 1;
const JS_STORE: u32 = 1;

fn get(object: &JsValue, name: &str) -> JsValue {
    Reflect::get(object, &JsValue::from_str(name)).expect("a readable property")
}

/// One flat effect: `[kind, exec, layer, request, store, a, b, c]`.
fn effects(engine: &mut WasmEngine) -> (Vec<[f64; 8]>, Vec<String>) {
    let numbers = engine.take_effects();
    let strings = if numbers[0] > 0.0 { engine.take_strings() } else { Vec::new() };
    assert_eq!(numbers[0] as usize, strings.len(), "the header counts the strings");
    assert_eq!((numbers.len() - 1) % 8, 0, "8 numbers per effect");
    let records = numbers[1..].chunks(8).map(|c| <[f64; 8]>::try_from(c).expect("8 numbers")).collect();
    (records, strings)
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
    let (first, token) =
        started(engine.start(1, RENEW, store_kind::MEMORY, 0, "k".into(), 30_000.0, 0.0, String::new(), 1, 1).unwrap());
    assert_eq!(first & 0x0f, status::STARTED_RUNNING);
    assert_eq!(engine.token(1), Some(token as f64), "start returns the token it granted");
    assert_eq!(engine.mem_size(0).unwrap(), 1);

    // A second execution on the key fails fast (wait 0): held.
    let (second, _) =
        started(engine.start(2, RENEW, store_kind::MEMORY, 0, "k".into(), 30_000.0, 0.0, String::new(), 1, 1).unwrap());
    assert_eq!(second & 0x0f, 0);
    let (records, strings) = effects(&mut engine);
    let settled = records.iter().find(|e| e[0] == 4.0).expect("a settled effect");
    assert_eq!(settled[1], 2.0, "execution 2");
    assert_eq!((settled[5], settled[6]), (4.0, 1.0), "an error: LOCK_NOT_ACQUIRED");
    assert!(strings[settled[7] as usize].contains("held"), "the message");
    assert_eq!(strings[settled[7] as usize + 1], "k", "the key");

    let finished = engine.finish(1, true, true).unwrap();
    assert_eq!(finished, f64::from(status::FINISHED_VALUE), "no waiter: no handoff");
    assert_eq!(engine.token(1), None);
    assert_eq!(engine.mem_size(0).unwrap(), 0);
    assert_eq!(engine.live_executions(), 0);

    // Tokens only increase.
    let (third, next) =
        started(engine.start(3, RENEW, store_kind::MEMORY, 0, "k".into(), 30_000.0, 0.0, String::new(), 1, 1).unwrap());
    assert_eq!(third & 0x0f, status::STARTED_RUNNING);
    assert!(next > token);
}

#[wasm_bindgen_test]
fn effects_come_flat_with_their_text_apart() {
    let mut engine = fake_engine();
    let (pending, _) = started(
        engine.start(1, RENEW, store_kind::POLLED, JS_STORE, "k".into(), 1_000.0, 0.0, String::new(), 1, 1).unwrap(),
    );
    assert_ne!(pending & status::EFFECTS, 0);
    assert_eq!(pending & 0x0f, 0);
    let (records, strings) = effects(&mut engine);
    let [call] = records[..] else { panic!("one effect: {records:?}") };
    assert_eq!(call[0], 1.0, "a store call");
    assert_eq!(call[1], 1.0, "for execution 1");
    assert_eq!(call[4], f64::from(JS_STORE));
    assert_eq!(call[5], 1.0, "acquire");
    assert_eq!(call[6], 1_000.0, "ttl");
    assert_eq!(strings[call[7] as usize], "k");
    assert_eq!(strings[call[7] as usize + 1].len(), 32, "the owner id");

    let answered = engine.answer_acquire(call[3] as u32, Some(41.0));
    assert_ne!(answered & status::EFFECTS, 0);
    let (records, strings) = effects(&mut engine);
    assert_eq!(records, vec![[2.0, 1.0, 0.0, 0.0, 0.0, 0.0, 41.0, 0.0]], "run execution 1, token 41");
    assert!(strings.is_empty());
    assert_eq!(engine.token(1), Some(41.0));
    assert_eq!(engine.layer_token(1, 0), Some(41.0));
    assert!(engine.layer_owner(1, 0).is_some());
    assert_eq!(engine.token(99), None);
}

#[wasm_bindgen_test]
fn bad_arguments_are_errors_with_a_code() {
    let mut engine = fake_engine();
    let negative =
        engine.start(1, RENEW, store_kind::MEMORY, 0, "k".into(), -5.0, 0.0, String::new(), 1, 1).unwrap_err();
    assert_eq!(code_of(negative.clone()), "ERR_OUT_OF_RANGE");
    assert!(get(&negative, "message").as_string().unwrap().contains("ttl"));
    assert_eq!(
        code_of(engine.add_lock(9, 0, "k".into(), 1_000.0, 0.0, String::new(), 1, 1).unwrap_err()),
        "ERR_INVALID_ARG_TYPE"
    );
    assert_eq!(
        code_of(
            engine.start(1, RENEW, store_kind::MEMORY, 0, String::new(), 1.0, 0.0, String::new(), 1, 1).unwrap_err()
        ),
        "ERR_INVALID_ARG_TYPE"
    );
    assert_eq!(code_of(engine.finish(77, true, false).unwrap_err()), "ERR_OUT_OF_RANGE");
    assert_eq!(code_of(WasmEngine::new(true, 0.0, &[1; 3]).unwrap_err()), "ERR_INVALID_ARG_TYPE");
}

#[wasm_bindgen_test]
fn the_fake_clock_runs_polls_when_advanced() {
    let mut engine = fake_engine();
    engine.start(1, RENEW, store_kind::POLLED, JS_STORE, "k".into(), 1_000.0, 500.0, String::new(), 1, 1).unwrap();
    let (first, _) = effects(&mut engine);
    let request = first[0][3] as u32;
    // Held: the engine polls again 50 ms later (not before: below).
    engine.answer_acquire(request, None);
    assert!(effects(&mut engine).0.is_empty());

    engine.advance(49.0).unwrap();
    assert_eq!(engine.now(), 49.0);
    assert!(effects(&mut engine).0.is_empty());
    let status = engine.advance(1.0).unwrap();
    assert_ne!(status & status::EFFECTS, 0);
    let (retry, _) = effects(&mut engine);
    assert_eq!((retry[0][0], retry[0][5]), (1.0, 1.0), "an acquire call");
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
