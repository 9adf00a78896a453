//! Permits: several holders of one key within its limit, on a fake clock.

use leasehold_core::{
    Answer, Effect, Engine, ExecOptions, Finish, LockError, LockSpec, Millis, Outcome, Start, StoreMethod, StoreRef,
    Wake, DEFAULT_MEMORY_STORE, SHARED_LIMIT,
};

const MEM: StoreRef = StoreRef::Memory(DEFAULT_MEMORY_STORE);
const EXT: StoreRef = StoreRef::External { id: 7, wake: Wake::Poll };

fn engine() -> Engine {
    Engine::with_fake_clock(0, [9; 32])
}

fn permits(store: StoreRef, limit: u32, weight: u32, wait: Option<Millis>) -> LockSpec {
    LockSpec { store, key: "k".into(), ttl: 30_000, wait, linger: 0, name: String::new(), limit, weight }
}

fn start(e: &mut Engine, exec: u32, spec: LockSpec) -> bool {
    matches!(e.start(exec, vec![spec], ExecOptions::default()).unwrap(), Start::Running { .. })
}

/// The executions the effects say to run, in order.
fn runs(e: &mut Engine) -> Vec<u32> {
    std::iter::from_fn(|| e.take_effect())
        .filter_map(|eff| match eff {
            Effect::Run { exec, .. } => Some(exec),
            _ => None,
        })
        .collect()
}

fn finish(e: &mut Engine, exec: u32) {
    assert_eq!(e.finish(exec, true).unwrap(), Finish::Settled(Outcome::Value));
}

#[test]
fn at_most_limit_holders_run_and_each_release_lets_the_next_in() {
    let mut e = engine();
    let started: Vec<bool> = (1..=5).map(|exec| start(&mut e, exec, permits(MEM, 3, 1, None))).collect();
    assert_eq!(started, [true, true, true, false, false]);
    let tokens: Vec<u64> = (1..=3).map(|exec| e.token(exec).unwrap()).collect();
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "every grant a larger token: {tokens:?}");
    finish(&mut e, 2);
    assert_eq!(runs(&mut e), [4], "one permit back, one waiter in");
    assert!(e.token(4).unwrap() > tokens[2]);
    finish(&mut e, 1);
    assert_eq!(runs(&mut e), [5]);
}

#[test]
fn a_heavy_waiter_at_the_head_is_not_overtaken_by_a_light_one_that_fits() {
    let mut e = engine();
    assert!(start(&mut e, 1, permits(MEM, 4, 3, None)));
    assert!(!start(&mut e, 2, permits(MEM, 4, 2, None)), "2 does not fit beside 3");
    assert!(!start(&mut e, 3, permits(MEM, 4, 1, None)), "1 would fit, but 2 came first");
    finish(&mut e, 1);
    assert_eq!(runs(&mut e), [2, 3], "both fit now, in arrival order");
}

#[test]
fn readers_run_together_and_a_writer_alone_first_come_first_served() {
    let mut e = engine();
    let read = |e: &mut Engine, exec| start(e, exec, permits(MEM, SHARED_LIMIT, 1, None));
    let write = |e: &mut Engine, exec| start(e, exec, permits(MEM, SHARED_LIMIT, SHARED_LIMIT, None));
    assert!(read(&mut e, 1) && read(&mut e, 2));
    assert!(!write(&mut e, 3), "a writer waits for the readers");
    assert!(!read(&mut e, 4), "a reader after a waiting writer waits: no writer starvation");
    finish(&mut e, 1);
    assert!(runs(&mut e).is_empty());
    finish(&mut e, 2);
    assert_eq!(runs(&mut e), [3]);
    finish(&mut e, 3);
    assert_eq!(runs(&mut e), [4]);
}

#[test]
fn a_holder_that_lapses_gives_its_permits_back_at_its_expiry() {
    let mut e = engine();
    let manual = ExecOptions { renew: false, telemetry: false, manual: true };
    let spec = LockSpec { ttl: 1_000, ..permits(MEM, 2, 2, None) };
    assert!(matches!(e.start(1, vec![spec], manual).unwrap(), Start::Running { .. }));
    assert!(!start(&mut e, 2, permits(MEM, 2, 1, None)));
    e.advance(999).unwrap();
    assert!(runs(&mut e).is_empty());
    e.advance(1).unwrap();
    assert_eq!(runs(&mut e), [2]);
}

#[test]
fn a_key_is_held_with_one_limit_and_a_lock_asking_another_is_told() {
    let mut e = engine();
    assert!(start(&mut e, 1, permits(MEM, 1, 1, None)));
    e.start(2, vec![permits(MEM, 3, 1, Some(5_000))], ExecOptions::default()).unwrap();
    let settled: Vec<Outcome> = std::iter::from_fn(|| e.take_effect())
        .filter_map(|eff| match eff {
            Effect::Settled { outcome, .. } => Some(outcome),
            _ => None,
        })
        .collect();
    let mismatch = LockError::LimitMismatch { key: "k".into(), limit: 3, held_with: 1 };
    assert_eq!(settled, [Outcome::Error(mismatch.clone())], "at once, not after the wait");
    assert!(mismatch.message().contains("limit 3"), "{}", mismatch.message());
    finish(&mut e, 1);
    assert!(start(&mut e, 3, permits(MEM, 3, 1, None)));
    e.start(4, vec![permits(MEM, 1, 1, None)], ExecOptions::default()).unwrap();
    let told = std::iter::from_fn(|| e.take_effect()).any(|eff| {
        matches!(
            eff,
            Effect::Settled { outcome: Outcome::Error(LockError::LimitMismatch { limit: 1, held_with: 3, .. }), .. }
        )
    });
    assert!(told, "a plain lock on a key held with permits is told too");
}

#[test]
fn a_js_store_is_asked_for_permits_and_its_limit_answer_fails_the_execution() {
    let mut e = engine();
    assert_eq!(e.start(1, vec![permits(EXT, 3, 2, Some(1_000))], ExecOptions::default()).unwrap(), Start::Pending);
    let request = std::iter::from_fn(|| e.take_effect())
        .find_map(|eff| match eff {
            Effect::StoreCall { request, method: StoreMethod::Acquire, .. } => Some(request),
            _ => None,
        })
        .expect("an acquire");
    e.answer(request, Answer::LimitMismatch(5));
    let outcome = std::iter::from_fn(|| e.take_effect()).find_map(|eff| match eff {
        Effect::Settled { outcome, .. } => Some(outcome),
        _ => None,
    });
    assert_eq!(outcome, Some(Outcome::Error(LockError::LimitMismatch { key: "k".into(), limit: 3, held_with: 5 })));
}

#[test]
fn weights_outside_one_to_the_limit_are_refused() {
    let mut e = engine();
    for (limit, weight) in [(3, 0), (3, 4), (0, 0)] {
        let err = leasehold_core::host::lock_spec(0, 0, "k".into(), 1_000.0, 0.0, String::new(), limit, weight);
        assert!(matches!(err, Err(LockError::InvalidArgument(_))), "{limit}/{weight}");
    }
    assert!(e.memory_acquire(DEFAULT_MEMORY_STORE, "k", "o", 1_000, 2, 3).is_err());
}

#[test]
fn a_lock_of_another_limit_is_told_also_while_others_wait_here() {
    let mut e = engine();
    assert!(start(&mut e, 1, permits(MEM, 2, 2, None)));
    assert!(!start(&mut e, 2, permits(MEM, 2, 1, None)), "waits: the key is full");
    e.start(3, vec![permits(MEM, 1, 1, Some(5_000))], ExecOptions::default()).unwrap();
    let told = std::iter::from_fn(|| e.take_effect()).any(|eff| {
        matches!(
            eff,
            Effect::Settled {
                exec: 3,
                outcome: Outcome::Error(LockError::LimitMismatch { limit: 1, held_with: 2, .. })
            }
        )
    });
    assert!(told, "not a wait for a key it could never share");
}

#[test]
fn on_a_js_store_a_newcomer_waits_behind_the_waiters_here_without_asking() {
    let mut e = engine();
    let acquires = |e: &mut Engine| -> Vec<u32> {
        std::iter::from_fn(|| e.take_effect())
            .filter_map(|eff| match eff {
                Effect::StoreCall { exec, method: StoreMethod::Acquire, .. } => Some(exec),
                _ => None,
            })
            .collect()
    };
    // A writer asks and is told "held": it waits, first in this process.
    e.start(1, vec![permits(EXT, SHARED_LIMIT, SHARED_LIMIT, None)], ExecOptions::default()).unwrap();
    let request = std::iter::from_fn(|| e.take_effect())
        .find_map(|eff| match eff {
            Effect::StoreCall { request, .. } => Some(request),
            _ => None,
        })
        .unwrap();
    e.answer(request, Answer::Acquired(None));
    let _ = acquires(&mut e);
    // A reader that comes after it does not ask the store (it would fit beside readers).
    e.start(2, vec![permits(EXT, SHARED_LIMIT, 1, None)], ExecOptions::default()).unwrap();
    assert!(acquires(&mut e).is_empty(), "the reader waits its turn");
}

#[test]
fn holders_granted_together_may_be_answered_in_any_order() {
    let mut e = engine();
    let mut requests = Vec::new();
    for exec in 1..=2 {
        e.start(exec, vec![permits(EXT, 3, 1, None)], ExecOptions::default()).unwrap();
        requests.extend(std::iter::from_fn(|| e.take_effect()).filter_map(|eff| match eff {
            Effect::StoreCall { request, method: StoreMethod::Acquire, .. } => Some(request),
            _ => None,
        }));
    }
    assert_eq!(requests.len(), 2, "both asked: neither waited when the other came");
    // The store granted 11 then 12; the answers come back the other way round.
    e.answer(requests[1], Answer::Acquired(Some(12)));
    e.answer(requests[0], Answer::Acquired(Some(11)));
    assert_eq!(runs(&mut e), [2, 1], "11 was above every token seen when it was asked");
    // A token at or below what was seen before a try was sent is still refused.
    e.start(3, vec![permits(EXT, 3, 1, None)], ExecOptions::default()).unwrap();
    let third = std::iter::from_fn(|| e.take_effect())
        .find_map(|eff| match eff {
            Effect::StoreCall { request, method: StoreMethod::Acquire, .. } => Some(request),
            _ => None,
        })
        .expect("the third asks");
    e.answer(third, Answer::Acquired(Some(12)));
    let refused = std::iter::from_fn(|| e.take_effect())
        .any(|eff| matches!(eff, Effect::Settled { exec: 3, outcome: Outcome::Error(LockError::StoreFailed { .. }) }));
    assert!(refused, "12 was seen before the third asked");
}
