//! The engine↔host protocol is defined twice, in core/src/host/mod.rs and in
//! lib/host/protocol.cjs (which decodes it for the JavaScript host): this test fails when the
//! two disagree, or when either gains a constant the other lacks.

use leasehold_core::host::{exec_option, flat, status, store_kind, DIRECT, LINGER_UNIT};
use std::collections::BTreeMap;

/// Every constant of the protocol, by its name in lib/host/protocol.cjs.
fn rust_constants() -> BTreeMap<&'static str, f64> {
    let u = f64::from;
    let z = |n: usize| n as f64;
    BTreeMap::from([
        ("STATUS_EFFECTS", u(status::EFFECTS)),
        ("STATUS_TIMER_REF", u(status::TIMER_REF)),
        ("STATUS_TIMER_UNREF", u(status::TIMER_UNREF)),
        ("STATUS_TIMER_ARM", u(status::TIMER_ARM)),
        ("STATUS_RESULT_BITS", u(status::RESULT_BITS)),
        ("STATUS_PAYLOAD_UNIT", status::PAYLOAD_UNIT),
        ("STARTED_RUNNING", u(status::STARTED_RUNNING)),
        ("STARTED_STORE_CALL", u(status::STARTED_STORE_CALL)),
        ("STARTED_STORE_CALL_QUEUED", u(status::STARTED_STORE_CALL_QUEUED)),
        ("FINISHED_VALUE", u(status::FINISHED_VALUE)),
        ("FINISHED_CALLBACK_ERROR", u(status::FINISHED_CALLBACK_ERROR)),
        ("FINISHED_LOST", u(status::FINISHED_LOST)),
        ("FINISHED_NOT_HELD", u(status::FINISHED_NOT_HELD)),
        ("FINISHED_HANDOFF", u(status::FINISHED_HANDOFF)),
        ("FINISHED_STORE_CALL", u(status::FINISHED_STORE_CALL)),
        ("ANSWERED_RUNNING", u(status::ANSWERED_RUNNING)),
        ("ANSWERED_VALUE", u(status::ANSWERED_VALUE)),
        ("ANSWERED_CALLBACK_ERROR", u(status::ANSWERED_CALLBACK_ERROR)),
        ("ANSWERED_NOT_HELD", u(status::ANSWERED_NOT_HELD)),
        ("GRANT_CLAIMED", u(status::GRANT_CLAIMED)),
        ("EXTENDED", u(status::EXTENDED)),
        ("NOT_EXTENDED", u(status::NOT_EXTENDED)),
        ("MEMORY_RELEASED", u(status::MEMORY_RELEASED)),
        ("OPTION_RENEW", u(exec_option::RENEW)),
        ("OPTION_TELEMETRY", u(exec_option::TELEMETRY)),
        ("OPTION_MANUAL", u(exec_option::MANUAL)),
        ("OPTION_DIRECT", u(DIRECT)),
        ("STORE_MEMORY", u(store_kind::MEMORY)),
        ("STORE_POLLED", u(store_kind::POLLED)),
        ("STORE_ANNOUNCING", u(store_kind::ANNOUNCING)),
        ("STORE_GRANTING", u(store_kind::GRANTING)),
        ("LOCK_LINGER_UNIT", u(LINGER_UNIT)),
        ("SHARED_LIMIT", u(leasehold_core::SHARED_LIMIT)),
        ("EFFECT_WIDTH", z(flat::EFFECT_WIDTH)),
        ("EFFECT_FIRST", z(flat::EFFECT_FIRST)),
        ("SLOT_KIND", z(flat::slot::KIND)),
        ("SLOT_EXEC", z(flat::slot::EXEC)),
        ("SLOT_LAYER", z(flat::slot::LAYER)),
        ("SLOT_REQUEST", z(flat::slot::REQUEST)),
        ("SLOT_STORE", z(flat::slot::STORE)),
        ("SLOT_A", z(flat::slot::A)),
        ("SLOT_B", z(flat::slot::B)),
        ("SLOT_C", z(flat::slot::C)),
        ("EFFECT_CALL", flat::kind::CALL),
        ("EFFECT_RUN", flat::kind::RUN),
        ("EFFECT_LOST", flat::kind::LOST),
        ("EFFECT_SETTLED", flat::kind::SETTLED),
        ("EFFECT_EXTENDED", flat::kind::EXTENDED),
        ("EFFECT_WATCH", flat::kind::WATCH),
        ("EFFECT_EVENT", flat::kind::EVENT),
        ("METHOD_ACQUIRE", flat::method::ACQUIRE),
        ("METHOD_RENEW", flat::method::RENEW),
        ("METHOD_RELEASE", flat::method::RELEASE),
        ("METHOD_QUEUED_ACQUIRE", flat::method::QUEUED_ACQUIRE),
        ("OUTCOME_VALUE", flat::outcome::VALUE),
        ("OUTCOME_CALLBACK_ERROR", flat::outcome::CALLBACK_ERROR),
        ("OUTCOME_NOT_HELD", flat::outcome::NOT_HELD),
        ("OUTCOME_ERROR", flat::outcome::ERROR),
        ("ERROR_NOT_ACQUIRED", flat::error::NOT_ACQUIRED),
        ("ERROR_LOST", flat::error::LOST),
        ("ERROR_STORE_FAILED", flat::error::STORE_FAILED),
        ("ERROR_ABORTED", flat::error::ABORTED),
        ("ERROR_TYPE", flat::error::TYPE),
        ("ERROR_RANGE", flat::error::RANGE),
        ("ERROR_LIMIT_MISMATCH", flat::error::LIMIT_MISMATCH),
        ("EVENT_ACQUIRED", flat::event::ACQUIRED),
        ("EVENT_REJECTED", flat::event::REJECTED),
        ("EVENT_RENEWED", flat::event::RENEWED),
        ("EVENT_RENEWAL_FAILED", flat::event::RENEWAL_FAILED),
        ("EVENT_LOST", flat::event::LOST),
        ("EVENT_RELEASED", flat::event::RELEASED),
        ("EVENT_RELEASE_FAILED", flat::event::RELEASE_FAILED),
        ("EVENT_ACQUIRE_FAILED", flat::event::ACQUIRE_FAILED),
        ("EVENT_CANCELLED", flat::event::CANCELLED),
    ])
}

/// The `const NAME = <integer>;` lines of lib/host/protocol.cjs (derived constants, written
/// as expressions, are left out: they follow from these).
fn js_constants() -> BTreeMap<String, f64> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../lib/host/protocol.cjs");
    let source = std::fs::read_to_string(path).expect("lib/host/protocol.cjs is readable");
    let mut found = BTreeMap::new();
    for line in source.lines() {
        let Some(rest) = line.strip_prefix("const ") else { continue };
        let Some((name, value)) = rest.split_once(" = ") else { continue };
        let Some(value) = value.strip_suffix(';') else { continue };
        let Ok(value) = value.parse::<i64>() else { continue };
        assert!(
            name.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'),
            "lib/host/protocol.cjs: constant {name} is not named in capitals"
        );
        let previous = found.insert(name.to_owned(), value as f64);
        assert!(previous.is_none(), "lib/host/protocol.cjs defines {name} twice");
    }
    found
}

#[test]
fn js_and_rust_define_the_same_protocol() {
    let rust = rust_constants();
    let js = js_constants();
    let mut wrong = Vec::new();
    for (name, value) in &rust {
        match js.get(*name) {
            None => wrong.push(format!("{name} = {value} is missing from lib/host/protocol.cjs")),
            Some(v) if v != value => wrong.push(format!("{name} is {v} in lib/host/protocol.cjs but {value} in Rust")),
            Some(_) => {}
        }
    }
    for name in js.keys() {
        if !rust.contains_key(name.as_str()) {
            wrong.push(format!("lib/host/protocol.cjs defines {name}, which core/tests/protocol.rs does not check"));
        }
    }
    assert!(wrong.is_empty(), "the protocol disagrees:\n{}", wrong.join("\n"));
}

#[test]
fn status_results_fit_below_the_host_bits() {
    for code in [
        status::STARTED_RUNNING,
        status::STARTED_STORE_CALL,
        status::STARTED_STORE_CALL_QUEUED,
        status::FINISHED_NOT_HELD,
    ] {
        assert_eq!(code & status::HOST_BITS, 0, "result {code} overlaps the host bits");
    }
    assert_eq!(status::FINISHED_HANDOFF & status::RESULT_BITS, status::FINISHED_HANDOFF);
    assert_eq!(f64::from(status::HOST_BITS | status::RESULT_BITS) + 1.0, status::PAYLOAD_UNIT);
}
