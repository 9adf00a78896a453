//! The engine's rules, each on a fake clock: no test here sleeps.

use std::cell::Cell;
use std::rc::Rc;

use leasehold_core::{
    Answer, Clock, Effect, Engine, Event, ExecOptions, Extend, Finish, LockError, LockSpec, Millis, Outcome, Start,
    StoreFailure, StoreMethod, StoreRef, TryAcquire, Wake, DEFAULT_MEMORY_STORE, MAX_FAKE_TIME,
};

const MEM: StoreRef = StoreRef::Memory(DEFAULT_MEMORY_STORE);
const EXT: StoreRef = StoreRef::External { id: 7, wake: Wake::Poll };

fn engine() -> Engine {
    Engine::with_fake_clock(0, [42; 32])
}

fn lock(store: StoreRef, key: &str, ttl: Millis, wait: Option<Millis>) -> LockSpec {
    LockSpec { store, key: key.into(), ttl, wait, linger: 0, name: String::new(), limit: 1, weight: 1 }
}

fn drain(engine: &mut Engine) -> Vec<Effect> {
    std::iter::from_fn(|| engine.take_effect()).collect()
}

/// A store call the host was asked to make, with the time it was asked.
#[derive(Debug, Clone)]
struct Call {
    at: Millis,
    request: u32,
    method: StoreMethod,
    owner: String,
}

/// Takes the effects, splitting out store calls.
fn split(engine: &mut Engine) -> (Vec<Call>, Vec<Effect>) {
    let now = engine.now();
    let mut calls = Vec::new();
    let mut rest = Vec::new();
    for effect in drain(engine) {
        match effect {
            Effect::StoreCall { request, method, owner, .. } => calls.push(Call { at: now, request, method, owner }),
            other => rest.push(other),
        }
    }
    (calls, rest)
}

fn only_call(engine: &mut Engine, method: StoreMethod) -> Call {
    let (calls, rest) = split(engine);
    assert!(rest.iter().all(|e| matches!(e, Effect::Event { .. })), "unexpected effects {rest:?}");
    assert_eq!(calls.len(), 1, "expected one {method:?} call, got {calls:?}");
    assert_eq!(calls[0].method, method);
    calls[0].clone()
}

fn settled(effects: &[Effect], exec: u32) -> Option<&Outcome> {
    effects.iter().find_map(|e| match e {
        Effect::Settled { exec: x, outcome } if *x == exec => Some(outcome),
        _ => None,
    })
}

fn ran(effects: &[Effect], exec: u32) -> bool {
    effects.iter().any(|e| matches!(e, Effect::Run { exec: x, .. } if *x == exec))
}

// ---- the fast path -------------------------------------------------------------------

#[test]
fn uncontended_memory_execution_is_two_calls_and_no_effects() {
    let mut e = engine();
    let start = e.start(1, vec![lock(MEM, "k", 30_000, None)], ExecOptions::default()).unwrap();
    let Start::Running { token } = start else { panic!("{start:?}") };
    assert_eq!(token, 1);
    assert!(!e.has_effects());
    assert_eq!(e.finish(1, true).unwrap(), Finish::Settled(Outcome::Value));
    assert!(!e.has_effects());
    assert_eq!(e.live_executions(), 0);
    assert_eq!(e.next_deadline(), None, "no timer left behind");
    assert_eq!(e.memory_size(DEFAULT_MEMORY_STORE).unwrap(), 0);
}

#[test]
fn a_memory_handoff_is_handed_back_by_finish_without_effects() {
    use leasehold_core::host::{finish_call, status};
    let mut e = engine();
    let mut arm_at = 0.0;
    e.start(1, vec![lock(MEM, "k", 30_000, None)], ExecOptions::default()).unwrap();
    assert_eq!(e.start(2, vec![lock(MEM, "k", 30_000, None)], ExecOptions::default()).unwrap(), Start::Pending);
    assert_eq!(e.start(3, vec![lock(MEM, "k", 30_000, None)], ExecOptions::default()).unwrap(), Start::Pending);
    drain(&mut e);
    let word = finish_call(&mut e, 1, true, true, &mut arm_at).unwrap();
    assert_eq!(word, f64::from(status::FINISHED_VALUE | status::FINISHED_HANDOFF) + 256.0 * 2.0);
    assert!(!e.has_effects(), "the run effect was handed back");
    assert_eq!(e.token(2), Some(2));
    // Without `handoff` the run stays an effect.
    assert_eq!(
        finish_call(&mut e, 2, true, false, &mut arm_at).unwrap(),
        f64::from(status::FINISHED_VALUE | status::EFFECTS)
    );
    assert!(ran(&drain(&mut e), 3));
    assert_eq!(finish_call(&mut e, 3, true, true, &mut arm_at).unwrap(), f64::from(status::FINISHED_VALUE));
}

#[test]
fn fail_fast_rejects_with_not_acquired_and_never_runs() {
    let mut e = engine();
    e.start(1, vec![lock(MEM, "k", 30_000, Some(0))], ExecOptions::default()).unwrap();
    assert_eq!(e.start(2, vec![lock(MEM, "k", 30_000, Some(0))], ExecOptions::default()).unwrap(), Start::Pending);
    let effects = drain(&mut e);
    assert!(!ran(&effects, 2));
    assert_eq!(settled(&effects, 2), Some(&Outcome::Error(LockError::NotAcquired { key: "k".into() })));
    // Right after the holder settles, a fail-fast call finds the key free.
    e.finish(1, true).unwrap();
    assert!(matches!(
        e.start(3, vec![lock(MEM, "k", 30_000, Some(0))], ExecOptions::default()).unwrap(),
        Start::Running { .. }
    ));
}

// ---- waiting -------------------------------------------------------------------------

#[test]
fn polls_at_50ms_doubling_to_1s_with_a_last_try_at_the_deadline() {
    let mut e = engine();
    assert_eq!(e.start(1, vec![lock(EXT, "k", 30_000, Some(2_000))], ExecOptions::default()).unwrap(), Start::Pending);
    let mut tries = Vec::new();
    loop {
        let call = only_call(&mut e, StoreMethod::Acquire);
        tries.push(call.at);
        e.answer(call.request, Answer::Acquired(None));
        let effects = drain(&mut e);
        if let Some(outcome) = settled(&effects, 1) {
            assert_eq!(outcome, &Outcome::Error(LockError::NotAcquired { key: "k".into() }));
            break;
        }
        let next = e.next_deadline().expect("a poll is scheduled");
        assert!(next <= 2_000, "never sleeps past the deadline: {next}");
        e.advance(next - e.now()).unwrap();
    }
    assert_eq!(tries, [0, 50, 150, 350, 750, 1550, 2000]);
}

#[test]
fn a_waiter_on_the_memory_store_is_woken_by_the_release_not_a_poll() {
    let mut e = engine();
    e.start(1, vec![lock(MEM, "k", 30_000, None)], ExecOptions::default()).unwrap();
    assert_eq!(e.start(2, vec![lock(MEM, "k", 30_000, Some(60_000))], ExecOptions::default()).unwrap(), Start::Pending);
    assert!(drain(&mut e).is_empty());
    e.advance(7).unwrap();
    assert!(drain(&mut e).is_empty(), "no polling while held");
    assert_eq!(e.memory_size(DEFAULT_MEMORY_STORE).unwrap(), 1);
    assert_eq!(e.finish(1, true).unwrap(), Finish::Settled(Outcome::Value));
    let effects = drain(&mut e);
    assert!(ran(&effects, 2), "woken at once: {effects:?}");
    assert_eq!(e.now(), 7);
    assert_eq!(e.token(2), Some(2));
}

#[test]
fn waiters_are_woken_in_arrival_order() {
    let mut e = engine();
    e.start(100, vec![lock(MEM, "k", 30_000, None)], ExecOptions::default()).unwrap();
    for exec in 1..=20 {
        e.start(exec, vec![lock(MEM, "k", 30_000, None)], ExecOptions::default()).unwrap();
        e.advance(1).unwrap();
    }
    let mut order = Vec::new();
    let mut holder = 100;
    for _ in 0..20 {
        e.finish(holder, true).unwrap();
        let runs: Vec<u32> = drain(&mut e)
            .into_iter()
            .filter_map(|eff| match eff {
                Effect::Run { exec, .. } => Some(exec),
                _ => None,
            })
            .collect();
        assert_eq!(runs.len(), 1, "one waiter per release");
        holder = runs[0];
        order.push(holder);
    }
    assert_eq!(order, (1..=20).collect::<Vec<_>>());
}

#[test]
fn a_lease_that_lapses_hands_over_to_the_first_waiter_at_expiry() {
    let mut e = engine();
    // A manual lease with no renewal: it lapses at 1000.
    let manual = ExecOptions { renew: false, telemetry: false, manual: true };
    e.start(1, vec![lock(MEM, "k", 1_000, None)], manual).unwrap();
    e.start(2, vec![lock(MEM, "k", 1_000, None)], ExecOptions::default()).unwrap();
    e.start(3, vec![lock(MEM, "k", 1_000, None)], ExecOptions::default()).unwrap();
    e.advance(999).unwrap();
    assert!(drain(&mut e).is_empty());
    e.advance(1).unwrap();
    let effects = drain(&mut e);
    assert!(ran(&effects, 2) && !ran(&effects, 3), "{effects:?}");
}

#[test]
fn a_waiter_that_gives_up_passes_its_turn_on() {
    let mut e = engine();
    e.start(1, vec![lock(MEM, "k", 30_000, None)], ExecOptions::default()).unwrap();
    e.start(2, vec![lock(MEM, "k", 30_000, Some(100))], ExecOptions::default()).unwrap();
    e.start(3, vec![lock(MEM, "k", 30_000, Some(500))], ExecOptions::default()).unwrap();
    e.advance(100).unwrap();
    let effects = drain(&mut e);
    assert_eq!(settled(&effects, 2), Some(&Outcome::Error(LockError::NotAcquired { key: "k".into() })));
    e.finish(1, true).unwrap();
    assert!(ran(&drain(&mut e), 3));
}

// ---- cancellation --------------------------------------------------------------------

#[test]
fn cancelling_a_waiter_removes_it_from_the_queue_and_it_never_runs() {
    let mut e = engine();
    e.start(1, vec![lock(MEM, "k", 30_000, None)], ExecOptions::default()).unwrap();
    e.start(2, vec![lock(MEM, "k", 30_000, None)], ExecOptions::default()).unwrap();
    e.start(3, vec![lock(MEM, "k", 30_000, None)], ExecOptions::default()).unwrap();
    assert!(e.cancel(2));
    let effects = drain(&mut e);
    assert_eq!(settled(&effects, 2), Some(&Outcome::Error(LockError::Cancelled)));
    e.finish(1, true).unwrap();
    let effects = drain(&mut e);
    assert!(ran(&effects, 3) && !ran(&effects, 2));
    // Granted, its callback not started yet (only the host knows): still cancelled.
    assert!(e.cancel(3));
    assert_eq!(settled(&drain(&mut e), 3), Some(&Outcome::Error(LockError::Cancelled)));
    assert!(!e.cancel(3), "settled: nothing left to cancel");
}

#[test]
fn cancelling_before_the_callback_starts_wins_over_a_loss_meanwhile() {
    let mut e = engine();
    e.start(1, vec![lock(EXT, "k", 3_000, None)], ExecOptions { renew: true, telemetry: false, manual: false })
        .unwrap();
    let acquire = only_call(&mut e, StoreMethod::Acquire);
    e.answer(acquire.request, Answer::Acquired(Some(1)));
    assert!(ran(&drain(&mut e), 1));
    e.advance(1_000).unwrap();
    let renew = only_call(&mut e, StoreMethod::Renew);
    e.answer(renew.request, Answer::Renewed(false));
    assert!(drain(&mut e).contains(&Effect::Lost { exec: 1, layer: 0 }));
    // The host had not started the callback: the caller's abort is the outcome, not the loss.
    assert!(e.cancel(1));
    assert_eq!(settled(&drain(&mut e), 1), Some(&Outcome::Error(LockError::Cancelled)));
    assert_eq!(e.live_executions(), 0);
}

#[test]
fn cancelling_during_an_acquire_in_flight_releases_a_late_grant() {
    let mut e = engine();
    e.start(1, vec![lock(EXT, "k", 30_000, None)], ExecOptions::default()).unwrap();
    let call = only_call(&mut e, StoreMethod::Acquire);
    assert!(e.cancel(1));
    assert_eq!(settled(&drain(&mut e), 1), Some(&Outcome::Error(LockError::Cancelled)));
    e.answer(call.request, Answer::Acquired(Some(9)));
    let release = only_call(&mut e, StoreMethod::Release);
    assert_eq!(release.owner, call.owner, "the late lease is released as its owner");
    e.answer(release.request, Answer::Released(None));
    assert!(drain(&mut e).is_empty());
    assert_eq!(e.open_requests(), 0);
    assert_eq!(e.live_executions(), 0);
}

// ---- renewal and loss ----------------------------------------------------------------

#[test]
fn renews_every_third_of_the_ttl_counting_from_when_the_request_was_sent() {
    let mut e = engine();
    e.start(1, vec![lock(EXT, "k", 3_000, None)], ExecOptions::default()).unwrap();
    let acquire = only_call(&mut e, StoreMethod::Acquire);
    e.advance(40).unwrap(); // the store takes 40 ms to answer
    e.answer(acquire.request, Answer::Acquired(Some(1)));
    assert!(ran(&drain(&mut e), 1));
    let mut renewals = Vec::new();
    for _ in 0..4 {
        let next = e.next_deadline().unwrap();
        e.advance(next - e.now()).unwrap();
        let renew = only_call(&mut e, StoreMethod::Renew);
        renewals.push(renew.at);
        e.advance(25).unwrap();
        e.answer(renew.request, Answer::Renewed(true));
    }
    // Sent at 0, renewed at 1000; each renewal sent at t schedules the next at t + 1000.
    assert_eq!(renewals, [1_000, 2_000, 3_000, 4_000]);
}

#[test]
fn renew_false_is_a_loss_at_once() {
    let mut e = engine();
    e.start(1, vec![lock(EXT, "k", 3_000, None)], ExecOptions { renew: true, telemetry: true, manual: false }).unwrap();
    let acquire = only_call(&mut e, StoreMethod::Acquire);
    e.answer(acquire.request, Answer::Acquired(Some(1)));
    drain(&mut e);
    e.advance(1_000).unwrap();
    let renew = only_call(&mut e, StoreMethod::Renew);
    e.answer(renew.request, Answer::Renewed(false));
    let effects = drain(&mut e);
    assert!(effects.contains(&Effect::Lost { exec: 1, layer: 0 }), "{effects:?}");
    assert!(effects.contains(&Effect::Event { exec: 1, layer: 0, event: Event::Lost { refused: true } }));
    assert_eq!(e.next_deadline(), None, "a lost lease is not renewed again");
    // The callback then fails: the execution rejects with LockLostError.
    assert_eq!(e.finish(1, false).unwrap(), Finish::Settled(Outcome::Error(LockError::Lost { key: "k".into() })));
    assert!(drain(&mut e).iter().all(|eff| !matches!(eff, Effect::StoreCall { .. })), "no release of a lost lease");
}

#[test]
fn a_callback_that_succeeds_after_a_loss_keeps_its_value() {
    let mut e = engine();
    e.start(1, vec![lock(EXT, "k", 3_000, None)], ExecOptions::default()).unwrap();
    let acquire = only_call(&mut e, StoreMethod::Acquire);
    e.answer(acquire.request, Answer::Acquired(Some(1)));
    drain(&mut e);
    e.advance(1_000).unwrap();
    let renew = only_call(&mut e, StoreMethod::Renew);
    e.answer(renew.request, Answer::Renewed(false));
    drain(&mut e);
    assert_eq!(e.finish(1, true).unwrap(), Finish::Settled(Outcome::Value));
}

#[test]
fn a_failing_renewal_is_retried_while_valid_then_the_lease_is_lost_at_expiry() {
    let mut e = engine();
    e.start(1, vec![lock(EXT, "k", 3_000, None)], ExecOptions::default()).unwrap();
    let acquire = only_call(&mut e, StoreMethod::Acquire);
    e.answer(acquire.request, Answer::Acquired(Some(1)));
    drain(&mut e);
    let mut attempts = Vec::new();
    loop {
        let next = e.next_deadline().unwrap();
        e.advance(next - e.now()).unwrap();
        let (calls, effects) = split(&mut e);
        if effects.contains(&Effect::Lost { exec: 1, layer: 0 }) {
            assert!(calls.is_empty());
            break;
        }
        assert_eq!(calls.len(), 1);
        attempts.push(calls[0].at);
        e.answer(calls[0].request, Answer::Failed(StoreFailure::Threw(calls[0].request)));
    }
    assert_eq!(attempts, [1_000, 1_050, 1_150, 1_350, 1_750, 2_550]);
    assert_eq!(e.now(), 3_000, "lost exactly when the lease ran out");
}

#[test]
fn a_renewal_that_succeeds_after_a_failure_keeps_the_lease() {
    let mut e = engine();
    e.start(1, vec![lock(EXT, "k", 3_000, None)], ExecOptions::default()).unwrap();
    let acquire = only_call(&mut e, StoreMethod::Acquire);
    e.answer(acquire.request, Answer::Acquired(Some(1)));
    drain(&mut e);
    e.advance(1_000).unwrap();
    let first = only_call(&mut e, StoreMethod::Renew);
    e.answer(first.request, Answer::Failed(StoreFailure::Threw(first.request)));
    e.advance(50).unwrap();
    let second = only_call(&mut e, StoreMethod::Renew);
    e.answer(second.request, Answer::Renewed(true));
    // The next renewal is due a third of the ttl after the successful one was sent.
    assert_eq!(e.next_deadline(), Some(2_050));
    for _ in 0..10 {
        let next = e.next_deadline().unwrap();
        e.advance(next - e.now()).unwrap();
        let renew = only_call(&mut e, StoreMethod::Renew);
        e.answer(renew.request, Answer::Renewed(true));
    }
    assert!(e.layer_held(1, 0));
    assert!(!drain(&mut e).iter().any(|eff| matches!(eff, Effect::Lost { .. })));
}

#[test]
fn a_renewal_unanswered_by_expiry_is_a_loss() {
    let mut e = engine();
    e.start(1, vec![lock(EXT, "k", 3_000, None)], ExecOptions::default()).unwrap();
    let acquire = only_call(&mut e, StoreMethod::Acquire);
    e.answer(acquire.request, Answer::Acquired(Some(1)));
    drain(&mut e);
    e.advance(1_000).unwrap();
    let renew = only_call(&mut e, StoreMethod::Renew);
    e.advance(1_999).unwrap();
    assert!(drain(&mut e).is_empty());
    e.advance(1).unwrap();
    assert!(drain(&mut e).contains(&Effect::Lost { exec: 1, layer: 0 }));
    // The answer, when it comes, changes nothing.
    e.answer(renew.request, Answer::Renewed(true));
    assert!(drain(&mut e).is_empty());
    assert!(!e.layer_held(1, 0));
}

#[test]
fn an_acquire_unanswered_after_ttl_is_abandoned_and_a_late_grant_released() {
    let mut e = engine();
    e.start(1, vec![lock(EXT, "k", 1_000, Some(5_000))], ExecOptions::default()).unwrap();
    let acquire = only_call(&mut e, StoreMethod::Acquire);
    e.advance(1_000).unwrap();
    let effects = drain(&mut e);
    let Some(Outcome::Error(LockError::StoreFailed { method, failure, .. })) = settled(&effects, 1) else {
        panic!("{effects:?}")
    };
    assert_eq!((*method, failure), (StoreMethod::Acquire, &StoreFailure::TimedOut { after_ms: 1_000 }));
    e.answer(acquire.request, Answer::Acquired(Some(3)));
    assert_eq!(only_call(&mut e, StoreMethod::Release).owner, acquire.owner);
}

// ---- release -------------------------------------------------------------------------

#[test]
fn releases_once_as_owner_after_success_and_after_failure_and_settles_after_the_release() {
    for ok in [true, false] {
        let mut e = engine();
        e.start(1, vec![lock(EXT, "k", 30_000, None)], ExecOptions::default()).unwrap();
        let acquire = only_call(&mut e, StoreMethod::Acquire);
        e.answer(acquire.request, Answer::Acquired(Some(1)));
        drain(&mut e);
        assert_eq!(e.finish(1, ok).unwrap(), Finish::Pending, "settles only after the release");
        let release = only_call(&mut e, StoreMethod::Release);
        assert_eq!(release.owner, acquire.owner);
        e.answer(release.request, Answer::Released(None));
        let effects = drain(&mut e);
        let expected = if ok { Outcome::Value } else { Outcome::CallbackError };
        assert_eq!(settled(&effects, 1), Some(&expected));
        e.advance(100_000).unwrap();
        assert!(drain(&mut e).is_empty(), "nothing after the release");
    }
}

#[test]
fn a_failed_release_is_ignored_and_reported() {
    let mut e = engine();
    e.start(1, vec![lock(EXT, "k", 30_000, None)], ExecOptions { renew: true, telemetry: true, manual: false })
        .unwrap();
    let acquire = only_call(&mut e, StoreMethod::Acquire);
    e.answer(acquire.request, Answer::Acquired(Some(1)));
    drain(&mut e);
    e.finish(1, true).unwrap();
    let release = only_call(&mut e, StoreMethod::Release);
    e.answer(release.request, Answer::Failed(StoreFailure::Threw(release.request)));
    let effects = drain(&mut e);
    assert_eq!(settled(&effects, 1), Some(&Outcome::Value));
    assert!(effects.iter().any(|eff| matches!(eff, Effect::Event { event: Event::ReleaseFailed { .. }, .. })));
}

#[test]
fn a_release_that_never_answers_settles_when_the_lease_would_have_lapsed() {
    let mut e = engine();
    e.start(1, vec![lock(EXT, "k", 3_000, None)], ExecOptions::default()).unwrap();
    let acquire = only_call(&mut e, StoreMethod::Acquire);
    e.answer(acquire.request, Answer::Acquired(Some(1)));
    drain(&mut e);
    e.advance(500).unwrap();
    e.finish(1, true).unwrap();
    only_call(&mut e, StoreMethod::Release);
    e.advance(2_499).unwrap();
    assert!(settled(&drain(&mut e), 1).is_none());
    e.advance(1).unwrap();
    assert_eq!(settled(&drain(&mut e), 1), Some(&Outcome::Value));
}

// ---- stores that fail ----------------------------------------------------------------

#[test]
fn a_store_error_on_acquire_rejects_naming_key_and_method() {
    let mut e = engine();
    e.start(1, vec![lock(EXT, "acct:1", 30_000, Some(10_000))], ExecOptions::default()).unwrap();
    let acquire = only_call(&mut e, StoreMethod::Acquire);
    e.answer(acquire.request, Answer::Failed(StoreFailure::Threw(acquire.request)));
    let effects = drain(&mut e);
    assert!(!ran(&effects, 1));
    assert_eq!(
        settled(&effects, 1),
        Some(&Outcome::Error(LockError::StoreFailed {
            key: "acct:1".into(),
            method: StoreMethod::Acquire,
            failure: StoreFailure::Threw(acquire.request),
        }))
    );
}

// ---- fencing tokens ------------------------------------------------------------------

#[test]
fn tokens_increase_per_key_across_release_and_expiry() {
    let mut e = engine();
    let mut tokens = Vec::new();
    for round in 0..3 {
        let Start::Running { token } = e.start(1, vec![lock(MEM, "k", 1_000, None)], ExecOptions::default()).unwrap()
        else {
            panic!()
        };
        tokens.push(token);
        e.finish(1, true).unwrap();
        // Another key in between takes tokens from the same counter.
        e.start(2, vec![lock(MEM, &format!("other{round}"), 1_000, None)], ExecOptions::default()).unwrap();
        e.finish(2, true).unwrap();
    }
    // Expiry: a manual lease that lapses, then a new grant.
    e.start(3, vec![lock(MEM, "k", 1_000, None)], ExecOptions { renew: false, telemetry: false, manual: true })
        .unwrap();
    tokens.push(e.token(3).unwrap());
    e.advance(1_000).unwrap();
    let Start::Running { token } = e.start(4, vec![lock(MEM, "k", 1_000, None)], ExecOptions::default()).unwrap()
    else {
        panic!()
    };
    tokens.push(token);
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{tokens:?}");
}

/// Runs one execution on `EXT` whose acquire the store answers with `token`; the effects
/// after the answer, and the acquire's owner.
fn granted_with(e: &mut Engine, exec: u32, options: ExecOptions, token: u64) -> (Vec<Effect>, String) {
    e.start(exec, vec![lock(EXT, "acct:1", 30_000, Some(10_000))], options).unwrap();
    let acquire = only_call(e, StoreMethod::Acquire);
    e.answer(acquire.request, Answer::Acquired(Some(token)));
    (drain(e), acquire.owner)
}

#[test]
fn a_js_store_token_not_larger_than_the_last_one_seen_for_the_key_fails_the_acquire_and_is_released() {
    for (first, second) in [(5, 3), (7, 7)] {
        let mut e = engine();
        let (effects, _) = granted_with(&mut e, 1, ExecOptions::default(), first);
        assert!(ran(&effects, 1));
        e.finish(1, true).unwrap();
        let release = only_call(&mut e, StoreMethod::Release);
        e.answer(release.request, Answer::Released(Some(true)));
        drain(&mut e);

        let (effects, owner) = granted_with(&mut e, 2, ExecOptions::default(), second);
        assert!(!ran(&effects, 2), "{first} then {second}: the callback must not run");
        let Some(Outcome::Error(err @ LockError::StoreFailed { method: StoreMethod::Acquire, failure, .. })) =
            settled(&effects, 2)
        else {
            panic!("{first} then {second}: {effects:?}")
        };
        let StoreFailure::BadAnswer(what) = failure else { panic!("{failure:?}") };
        assert!(what.contains(&format!("fencing token {second} is not larger than {first}")), "{what}");
        assert!(err.to_string().contains("acct:1"), "{err}");
        let releases: Vec<_> = effects
            .iter()
            .filter_map(|fx| match fx {
                Effect::StoreCall { method: StoreMethod::Release, owner, key, .. } => {
                    Some((key.clone(), owner.clone()))
                }
                _ => None,
            })
            .collect();
        assert_eq!(releases, [("acct:1".to_owned(), owner)], "the lease it was answered with is released");

        // The floor stays: a larger token is taken again.
        let (effects, _) = granted_with(&mut e, 3, ExecOptions::default(), first + 1);
        assert!(ran(&effects, 3));
    }
}

#[test]
fn a_token_that_went_back_is_caught_for_a_lease_still_held_and_for_a_grant() {
    // A manual lease still held, then a store that grants the same key again, lower.
    let mut e = engine();
    let (effects, _) = granted_with(&mut e, 1, MANUAL, 10);
    assert!(ran(&effects, 1));
    let (effects, _) = granted_with(&mut e, 2, MANUAL, 9);
    assert!(matches!(settled(&effects, 2), Some(Outcome::Error(LockError::StoreFailed { .. }))), "{effects:?}");

    // A grant on release is checked the same way.
    let mut e = engine();
    let granting = StoreRef::External { id: 7, wake: Wake::Grant };
    e.start(1, vec![lock(granting, "g", 30_000, None)], ExecOptions::default()).unwrap();
    let acquire = only_call(&mut e, StoreMethod::Acquire);
    e.answer(acquire.request, Answer::Acquired(Some(20)));
    drain(&mut e);
    e.start(2, vec![lock(granting, "g", 30_000, None)], ExecOptions::default()).unwrap();
    let waiter = only_call(&mut e, StoreMethod::Acquire);
    e.answer(waiter.request, Answer::Acquired(None));
    drain(&mut e);
    assert!(e.granted(granting, "g", &waiter.owner, 20, Some(0)));
    let effects = drain(&mut e);
    assert!(!ran(&effects, 2));
    assert!(matches!(settled(&effects, 2), Some(Outcome::Error(LockError::StoreFailed { .. }))), "{effects:?}");
}

#[test]
fn memory_store_tokens_are_not_checked_against_js_store_tokens() {
    let mut e = engine();
    let (effects, _) = granted_with(&mut e, 1, MANUAL, 1_000);
    assert!(ran(&effects, 1));
    // The same key on the memory store: its own counter, far below.
    let Start::Running { token } = e.start(2, vec![lock(MEM, "acct:1", 1_000, None)], MANUAL).unwrap() else {
        panic!()
    };
    assert!(token < 1_000);
}

// ---- nesting -------------------------------------------------------------------------

#[test]
fn nested_locks_acquire_outermost_first_release_innermost_first_and_expose_the_inner_token() {
    let mut e = engine();
    let outer = lock(EXT, "outer", 30_000, None);
    let inner = lock(StoreRef::External { id: 8, wake: Wake::Poll }, "inner", 30_000, None);
    e.start(1, vec![outer, inner], ExecOptions::default()).unwrap();
    let first = drain(&mut e);
    assert!(matches!(&first[..], [Effect::StoreCall { store: 7, method: StoreMethod::Acquire, .. }]), "{first:?}");
    let Effect::StoreCall { request, .. } = first[0] else { unreachable!() };
    e.answer(request, Answer::Acquired(Some(10)));
    let second = drain(&mut e);
    let [Effect::StoreCall { store: 8, method: StoreMethod::Acquire, request, .. }] = second[..] else {
        panic!("{second:?}")
    };
    e.answer(request, Answer::Acquired(Some(20)));
    assert!(ran(&drain(&mut e), 1));
    assert_eq!(e.token(1), Some(20), "the innermost token");
    assert_eq!(e.layer_token(1, 0), Some(10));
    e.finish(1, true).unwrap();
    let rel = drain(&mut e);
    let [Effect::StoreCall { store: 8, method: StoreMethod::Release, request, .. }] = rel[..] else {
        panic!("{rel:?}")
    };
    e.answer(request, Answer::Released(None));
    let rel = drain(&mut e);
    let [Effect::StoreCall { store: 7, method: StoreMethod::Release, request, .. }] = rel[..] else {
        panic!("{rel:?}")
    };
    e.answer(request, Answer::Released(None));
    assert_eq!(settled(&drain(&mut e), 1), Some(&Outcome::Value));
}

#[test]
fn when_an_inner_lock_is_not_acquired_the_outer_one_is_released() {
    let mut e = engine();
    e.start(9, vec![lock(MEM, "inner", 30_000, None)], ExecOptions::default()).unwrap();
    e.start(1, vec![lock(MEM, "outer", 30_000, None), lock(MEM, "inner", 30_000, Some(0))], ExecOptions::default())
        .unwrap();
    let effects = drain(&mut e);
    assert_eq!(settled(&effects, 1), Some(&Outcome::Error(LockError::NotAcquired { key: "inner".into() })));
    assert!(e.memory_ttl(DEFAULT_MEMORY_STORE, "outer").unwrap().is_none(), "outer released");
}

#[test]
fn locks_are_not_reentrant() {
    let mut e = engine();
    e.start(1, vec![lock(MEM, "k", 30_000, None)], ExecOptions::default()).unwrap();
    e.start(2, vec![lock(MEM, "k", 30_000, Some(1_000))], ExecOptions::default()).unwrap();
    e.advance(1_000).unwrap();
    assert_eq!(settled(&drain(&mut e), 2), Some(&Outcome::Error(LockError::NotAcquired { key: "k".into() })));
}

#[test]
fn an_outer_lock_lost_while_waiting_for_an_inner_one_fails_the_execution() {
    let mut e = engine();
    e.start(9, vec![lock(MEM, "inner", 30_000, None)], ExecOptions::default()).unwrap();
    e.start(1, vec![lock(EXT, "outer", 3_000, None), lock(MEM, "inner", 30_000, None)], ExecOptions::default())
        .unwrap();
    let acquire = only_call(&mut e, StoreMethod::Acquire);
    e.answer(acquire.request, Answer::Acquired(Some(1)));
    assert!(drain(&mut e).is_empty());
    e.advance(1_000).unwrap();
    let renew = only_call(&mut e, StoreMethod::Renew);
    e.answer(renew.request, Answer::Renewed(false));
    let effects = drain(&mut e);
    let lost = LockError::LostBeforeStart { key: "outer".into() };
    assert_eq!(lost.message(), "lease on lock 'outer' was lost before the callback started");
    assert_eq!(lost.code(), "LOCK_LOST");
    assert_eq!(settled(&effects, 1), Some(&Outcome::Error(lost)));
    e.finish(9, true).unwrap();
    assert!(!ran(&drain(&mut e), 1));
}

// ---- validation ----------------------------------------------------------------------

#[test]
fn start_rejects_bad_arguments_naming_them() {
    let mut e = engine();
    let cases = [
        (vec![], "locks"),
        (vec![lock(MEM, "", 1_000, None)], "key"),
        (vec![lock(MEM, "k", 0, None)], "ttl"),
        (vec![lock(StoreRef::Memory(99), "k", 1_000, None)], "store"),
    ];
    for (locks, arg) in cases {
        let Err(LockError::InvalidArgument(err)) = e.start(1, locks, ExecOptions::default()) else { panic!("{arg}") };
        assert_eq!(err.arg, arg);
        assert!(err.message.starts_with(arg), "{}", err.message);
    }
    e.start(1, vec![lock(MEM, "k", 1_000, None)], ExecOptions::default()).unwrap();
    assert!(e.start(1, vec![lock(MEM, "j", 1_000, None)], ExecOptions::default()).is_err(), "id in use");
    assert!(e.finish(5, true).is_err());
    let mut real = Engine::new(Box::new(leasehold_core::FakeClock::new(0)), [1; 32]);
    assert!(real.advance(5).is_err(), "only fake engines advance");
}

// ---- stores that announce ------------------------------------------------------------

#[test]
fn an_announcing_store_is_watched_while_it_has_waiters_and_wakes_the_first() {
    let mut e = engine();
    let store = StoreRef::External { id: 3, wake: Wake::Announce };
    e.start(1, vec![lock(store, "k", 30_000, None)], ExecOptions::default()).unwrap();
    let a = only_call(&mut e, StoreMethod::Acquire);
    e.answer(a.request, Answer::Acquired(None));
    let effects = drain(&mut e);
    assert!(effects.contains(&Effect::Watch { store: 3, key: "k".into(), watch: true }), "{effects:?}");
    e.advance(10).unwrap();
    assert!(drain(&mut e).is_empty());
    e.released(store, "k");
    let b = only_call(&mut e, StoreMethod::Acquire);
    assert_eq!(e.now(), 10, "tried at once, not at the 50 ms poll");
    e.answer(b.request, Answer::Acquired(Some(5)));
    let effects = drain(&mut e);
    assert!(ran(&effects, 1));
    assert!(effects.contains(&Effect::Watch { store: 3, key: "k".into(), watch: false }));
}

// ---- stores that grant on release -------------------------------------------------------

const GRANTING: StoreRef = StoreRef::External { id: 4, wake: Wake::Grant };

/// Starts `exec` on the granting store; its first try finds the key held.
fn waiting_on_granting_store(e: &mut Engine, exec: u32, ttl: Millis, wait: Option<Millis>) -> Call {
    e.start(exec, vec![lock(GRANTING, "k", ttl, wait)], ExecOptions::default()).unwrap();
    let a = only_call(e, StoreMethod::Acquire);
    e.answer(a.request, Answer::Acquired(None));
    let effects = drain(e);
    assert!(effects.contains(&Effect::Watch { store: 4, key: "k".into(), watch: true }) || exec != 1, "{effects:?}");
    a
}

#[test]
fn a_grant_runs_the_first_waiter_without_a_try_and_its_lease_counts_from_the_grant() {
    let mut e = engine();
    let a = waiting_on_granting_store(&mut e, 1, 3_000, None);
    e.advance(20).unwrap();
    assert!(drain(&mut e).is_empty(), "no poll before 50 ms");
    assert!(e.granted(GRANTING, "k", &a.owner, 77, Some(5)));
    let (calls, effects) = split(&mut e);
    assert!(calls.is_empty(), "no try after a grant: {calls:?}");
    assert!(ran(&effects, 1));
    assert_eq!(e.token(1), Some(77));
    assert!(effects.contains(&Effect::Watch { store: 4, key: "k".into(), watch: false }));
    // Granted 5 ms before the engine heard of it (at 20): renewed ttl/3 after 15.
    e.advance(994).unwrap();
    assert!(drain(&mut e).is_empty(), "not renewed before 1015");
    e.advance(1).unwrap();
    assert_eq!(only_call(&mut e, StoreMethod::Renew).owner, a.owner);
}

#[test]
fn a_grant_crossing_a_try_in_flight_wins_and_the_try_is_ignored() {
    let mut e = engine();
    let first = waiting_on_granting_store(&mut e, 1, 3_000, None);
    e.advance(50).unwrap();
    let poll = only_call(&mut e, StoreMethod::Acquire);
    assert_eq!(poll.owner, first.owner);
    e.granted(GRANTING, "k", &first.owner, 9, Some(0));
    assert!(ran(&drain(&mut e), 1));
    // The poll reached the store after the grant: the store says the lease is this
    // owner's. Nothing may be released or tried because of it.
    e.answer(poll.request, Answer::Acquired(Some(9)));
    assert!(drain(&mut e).is_empty());
    assert!(e.layer_held(1, 0));
    // And a duplicate of the grant (the message after the try) is claimed and changes
    // nothing either.
    assert!(e.granted(GRANTING, "k", &first.owner, 9, Some(0)));
    assert!(drain(&mut e).is_empty());
    assert!(e.layer_held(1, 0));
}

#[test]
fn a_waiter_cancelled_while_another_waits_is_released_so_the_store_dequeues_it() {
    let mut e = engine();
    let first = waiting_on_granting_store(&mut e, 1, 3_000, None);
    let second = waiting_on_granting_store(&mut e, 2, 3_000, None);
    assert!(e.cancel(1));
    let (calls, effects) = split(&mut e);
    assert_eq!(settled(&effects, 1), Some(&Outcome::Error(LockError::Cancelled)));
    assert!(!effects.iter().any(|x| matches!(x, Effect::Watch { watch: false, .. })), "still watched: {effects:?}");
    let released: Vec<_> = calls.iter().filter(|c| c.method == StoreMethod::Release).collect();
    assert_eq!(released.len(), 1, "{calls:?}");
    assert_eq!(released[0].owner, first.owner, "the owner that left is released, as a dequeue");
    e.answer(released[0].request, Answer::Released(Some(false)));
    // The new head tries at once (the key may be free).
    let retry = calls.iter().find(|c| c.method == StoreMethod::Acquire).expect("the new head tries");
    assert_eq!(retry.owner, second.owner);
    e.answer(retry.request, Answer::Acquired(None));
    // The last waiter leaves by the unwatch, which takes every owner out: no release.
    assert!(e.cancel(2));
    let (calls, effects) = split(&mut e);
    assert!(calls.is_empty(), "{calls:?}");
    assert!(effects.contains(&Effect::Watch { store: 4, key: "k".into(), watch: false }));
    assert_eq!(e.open_requests(), 0);
    assert_eq!(e.live_executions(), 0);
}

#[test]
fn a_grant_to_a_waiter_that_gave_up_is_not_claimed() {
    let mut e = engine();
    let a = waiting_on_granting_store(&mut e, 1, 3_000, Some(100));
    e.advance(100).unwrap();
    let last = only_call(&mut e, StoreMethod::Acquire);
    e.answer(last.request, Answer::Acquired(None));
    let effects = drain(&mut e);
    assert!(matches!(settled(&effects, 1), Some(Outcome::Error(LockError::NotAcquired { .. }))), "{effects:?}");
    assert!(!e.granted(GRANTING, "k", &a.owner, 12, Some(0)), "not claimed: the store passes it on");
    assert!(drain(&mut e).is_empty());
}

#[test]
fn a_grant_older_than_its_ttl_is_not_run_and_the_waiter_asks_again() {
    let mut e = Engine::with_fake_clock(10_000, [42; 32]);
    let a = waiting_on_granting_store(&mut e, 1, 1_000, None);
    assert!(e.granted(GRANTING, "k", &a.owner, 12, Some(1_000)), "claimed: it was for this waiter");
    let (calls, effects) = split(&mut e);
    assert!(!ran(&effects, 1));
    // Nothing is released (by owner alone, a release could hit a later grant to the same
    // owner); the try gets the lease back, counted from the try, if it is still ours.
    let methods: Vec<_> = calls.iter().map(|c| (c.method, c.owner == a.owner)).collect();
    assert_eq!(methods, vec![(StoreMethod::Acquire, true)]);
    e.answer(calls[0].request, Answer::Acquired(Some(12)));
    assert!(ran(&drain(&mut e), 1));
    assert!(e.layer_held(1, 0));
}

#[test]
fn a_late_copy_of_a_grant_for_a_lease_being_released_is_not_claimed() {
    let mut e = engine();
    let a = waiting_on_granting_store(&mut e, 1, 3_000, None);
    e.advance(50).unwrap();
    let poll = only_call(&mut e, StoreMethod::Acquire);
    e.answer(poll.request, Answer::Acquired(Some(9)));
    assert!(ran(&drain(&mut e), 1));
    assert!(e.granted(GRANTING, "k", &a.owner, 9, Some(0)), "held: a duplicate, claimed");
    assert_eq!(e.finish(1, true).unwrap(), Finish::Pending);
    assert_eq!(only_call(&mut e, StoreMethod::Release).owner, a.owner);
    assert!(!e.granted(GRANTING, "k", &a.owner, 9, Some(0)), "being released: left to the store");
    assert!(drain(&mut e).is_empty());
}

#[test]
fn a_grant_for_someone_else_is_not_claimed_and_runs_nobody() {
    let mut e = engine();
    waiting_on_granting_store(&mut e, 1, 3_000, None);
    assert!(!e.granted(GRANTING, "k", "a-stranger", 12, Some(0)));
    assert!(drain(&mut e).is_empty(), "another listener's grant is none of this engine's business");
    assert!(!e.layer_held(1, 0));
}

#[test]
fn a_grant_without_an_age_counts_from_the_try_in_flight_or_is_asked_for_again() {
    let mut e = engine();
    let a = waiting_on_granting_store(&mut e, 1, 3_000, None);
    e.advance(50).unwrap();
    let poll = only_call(&mut e, StoreMethod::Acquire);
    e.advance(10).unwrap();
    // The message overtook the answer to the try sent at 50: the lease counts from 50.
    assert!(e.granted(GRANTING, "k", &a.owner, 9, None));
    assert!(ran(&drain(&mut e), 1));
    e.answer(poll.request, Answer::Acquired(None));
    assert!(drain(&mut e).is_empty(), "the overtaken answer is ignored");
    e.advance(989).unwrap();
    assert!(drain(&mut e).is_empty(), "not renewed before 1050");
    e.advance(1).unwrap();
    only_call(&mut e, StoreMethod::Renew);

    // No try in flight: nothing to count from, so the waiter asks (and is answered with
    // the lease if it is its own).
    let b = waiting_on_granting_store(&mut e, 2, 3_000, None);
    assert!(e.granted(GRANTING, "k", &b.owner, 10, None));
    let retry = only_call(&mut e, StoreMethod::Acquire);
    assert_eq!(retry.owner, b.owner);
}

#[test]
fn a_grant_for_a_waiter_behind_the_first_runs_that_waiter() {
    let mut e = engine();
    waiting_on_granting_store(&mut e, 1, 3_000, None);
    let second = waiting_on_granting_store(&mut e, 2, 3_000, None);
    assert!(e.granted(GRANTING, "k", &second.owner, 12, Some(0)));
    let effects = drain(&mut e);
    assert!(ran(&effects, 2), "{effects:?}");
    assert!(!ran(&effects, 1));
    assert!(!e.layer_held(1, 0));
}

#[test]
fn only_an_acquire_that_will_wait_asks_a_granting_store_to_queue_it() {
    // The queue flags of the acquires asked for, each answered "held".
    let queued = |e: &mut Engine| -> Vec<bool> {
        let calls: Vec<(u32, bool)> = drain(e)
            .into_iter()
            .filter_map(|eff| match eff {
                Effect::StoreCall { method: StoreMethod::Acquire, request, queue, .. } => Some((request, queue)),
                _ => None,
            })
            .collect();
        for &(request, _) in &calls {
            e.answer(request, Answer::Acquired(None));
        }
        drain(e);
        calls.into_iter().map(|(_, queue)| queue).collect()
    };
    let mut e = engine();
    e.start(1, vec![lock(GRANTING, "k", 3_000, Some(0))], ExecOptions::default()).unwrap();
    assert_eq!(queued(&mut e), vec![false], "wait 0: fail fast, never queued");
    e.start(2, vec![lock(GRANTING, "j", 3_000, Some(100))], ExecOptions::default()).unwrap();
    assert_eq!(queued(&mut e), vec![true], "the first try of an execution that waits");
    e.advance(50).unwrap();
    assert_eq!(queued(&mut e), vec![true], "a poll before the deadline");
    e.advance(50).unwrap();
    assert_eq!(queued(&mut e), vec![false], "the last try, at the deadline");
    e.start(3, vec![lock(EXT, "k", 3_000, None)], ExecOptions::default()).unwrap();
    assert_eq!(queued(&mut e), vec![false], "a store that does not grant");
}

#[test]
fn on_a_granting_store_the_next_waiter_asks_as_soon_as_it_is_first() {
    let mut e = engine();
    let a = waiting_on_granting_store(&mut e, 1, 3_000, None);
    waiting_on_granting_store(&mut e, 2, 3_000, None);
    e.advance(500).unwrap();
    let polls = split(&mut e).0;
    assert!(polls.iter().all(|c| c.owner == a.owner), "only the first waiter polls: {polls:?}");
    for poll in polls {
        e.answer(poll.request, Answer::Acquired(None));
    }
    drain(&mut e);
    e.granted(GRANTING, "k", &a.owner, 12, Some(0));
    let (calls, effects) = split(&mut e);
    assert!(ran(&effects, 1));
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0].method, StoreMethod::Acquire);
    assert_ne!(calls[0].owner, a.owner, "the second execution asks, to be queued by the store");
}

// ---- timers and the host -------------------------------------------------------------

#[test]
fn a_real_clock_engine_asks_the_host_for_one_timer_and_lets_it_go_when_idle() {
    use leasehold_core::HostTimer;
    let (mut e, time) = hand_engine();
    // A JS store: the acquire's answer, then its renewals, are waited for.
    e.start(1, vec![lock(EXT, "k", 3_000, None)], ExecOptions::default()).unwrap();
    let acquire = only_call(&mut e, StoreMethod::Acquire);
    assert_eq!(e.host_timer(), HostTimer::Arm { at: 3_000, keep_alive: true }, "the acquire times out at ttl");
    assert_eq!(e.host_timer(), HostTimer::Keep);
    e.answer(acquire.request, Answer::Acquired(Some(1)));
    drain(&mut e);
    assert_eq!(e.host_timer(), HostTimer::Arm { at: 1_000, keep_alive: true }, "renewal at ttl/3");
    time.set(1_000);
    e.on_timer();
    let renew = only_call(&mut e, StoreMethod::Renew);
    assert_eq!(e.host_timer(), HostTimer::Arm { at: 3_000, keep_alive: true }, "the renewal is bounded by the lease");
    e.answer(renew.request, Answer::Renewed(true));
    e.finish(1, true).unwrap();
    let release = only_call(&mut e, StoreMethod::Release);
    e.answer(release.request, Answer::Released(Some(true)));
    drain(&mut e);
    assert_eq!(e.host_timer(), HostTimer::Unref, "nothing left: the armed timer must not hold the process");
    assert_eq!(e.host_timer(), HostTimer::Keep);
}

#[test]
fn memory_renewals_and_unrenewed_expiries_never_keep_the_process_alive_waiters_do() {
    use leasehold_core::HostTimer;
    let (mut e, time) = hand_engine();
    // A callback on the memory store that never settles: renewing it is unobservable.
    e.start(1, vec![lock(MEM, "k", 3_000, None)], ExecOptions::default()).unwrap();
    assert_eq!(e.host_timer(), HostTimer::Arm { at: 1_000, keep_alive: false });
    // A waiter with a deadline is waited for: the same armed timer now holds the process.
    e.start(2, vec![lock(MEM, "k", 3_000, Some(5_000))], ExecOptions::default()).unwrap();
    assert_eq!(e.host_timer(), HostTimer::Ref);
    assert!(e.cancel(2));
    drain(&mut e);
    assert_eq!(e.host_timer(), HostTimer::Unref, "the waiter left");
    time.set(1_000);
    e.on_timer();
    assert_eq!(e.host_timer(), HostTimer::Arm { at: 2_000, keep_alive: false }, "renewed, still not held for");
    e.finish(1, true).unwrap();
    assert_eq!(e.host_timer(), HostTimer::Keep, "already unref'd");

    // Manual leases that nothing renews: their expiry, on either store, holds nothing.
    e.start(3, vec![lock(MEM, "m", 3_600_000, None)], MANUAL).unwrap();
    assert_eq!(e.host_timer(), HostTimer::Keep, "the unref'd timer at 2000 is early enough");
    e.start(4, vec![lock(EXT, "j", 3_600_000, None)], MANUAL).unwrap();
    let acquire = only_call(&mut e, StoreMethod::Acquire);
    assert_eq!(e.host_timer(), HostTimer::Ref, "an acquire in flight is waited for");
    e.answer(acquire.request, Answer::Acquired(Some(1)));
    drain(&mut e);
    assert_eq!(e.host_timer(), HostTimer::Unref);
    // An extend in flight is waited for.
    assert_eq!(e.extend(4, None).unwrap(), Extend::Pending);
    let renew = only_call(&mut e, StoreMethod::Renew);
    assert_eq!(e.host_timer(), HostTimer::Ref);
    e.answer(renew.request, Answer::Renewed(true));
    drain(&mut e);
    assert_eq!(e.host_timer(), HostTimer::Unref);
    // An auto-renewed manual lease on the memory store: still nothing to wait for.
    e.start(5, vec![lock(MEM, "r", 3_000, None)], ExecOptions { renew: true, ..MANUAL }).unwrap();
    assert_eq!(e.host_timer(), HostTimer::Keep);
}

#[test]
fn a_host_timer_that_never_fires_does_not_stall_the_engine() {
    use leasehold_core::HostTimer;
    let (mut e, time) = hand_engine();
    e.start(1, vec![lock(MEM, "k", 300, None)], ExecOptions::default()).unwrap();
    assert_eq!(e.host_timer(), HostTimer::Arm { at: 100, keep_alive: false });
    // That timer is swallowed (global fake timers): it never fires. The renewal due at 100
    // runs on the next call into the engine, and the host is asked for a new timer.
    time.set(250);
    e.start(2, vec![lock(MEM, "k", 300, Some(1_000))], ExecOptions::default()).unwrap();
    assert_eq!(e.host_timer(), HostTimer::Arm { at: 300, keep_alive: true }, "the waiter's next try");
    assert_eq!(e.memory_ttl(DEFAULT_MEMORY_STORE, "k").unwrap(), Some(300), "renewed at 250, by the call");
    // A timer still in the future is trusted.
    assert_eq!(e.host_timer(), HostTimer::Keep);
    // Overdue again, with nothing due (the waiter left): the timer is armed anew.
    assert!(e.cancel(2));
    drain(&mut e);
    time.set(400);
    e.memory_ttl(DEFAULT_MEMORY_STORE, "k").unwrap();
    assert_eq!(e.host_timer(), HostTimer::Arm { at: 500, keep_alive: false }, "the renewal due at 350 ran at 400");
    assert_eq!(e.memory_ttl(DEFAULT_MEMORY_STORE, "k").unwrap(), Some(300));
}

// ---- manual leases -------------------------------------------------------------------

const MANUAL: ExecOptions = ExecOptions { renew: false, telemetry: false, manual: true };

#[test]
fn a_manual_release_says_whether_the_owner_still_held_the_lease() {
    let mut e = engine();
    e.start(1, vec![lock(MEM, "k", 1_000, None)], MANUAL).unwrap();
    assert_eq!(e.finish(1, true).unwrap(), Finish::Settled(Outcome::Value));
    // Released after a lapse its timer has not seen yet (a busy host), and taken over
    // meanwhile: the release is false and deletes nothing.
    e.start(2, vec![lock(MEM, "k", 1_000, None)], MANUAL).unwrap();
    e.advance_clock_only_for_tests(1_000);
    e.start(3, vec![lock(MEM, "k", 1_000, None)], MANUAL).unwrap();
    assert_eq!(e.finish(2, true).unwrap(), Finish::Settled(Outcome::NotHeld));
    assert!(e.memory_ttl(DEFAULT_MEMORY_STORE, "k").unwrap().is_some(), "the new owner's lease is untouched");
    // Left to lapse: wound down at its expiry, not held; nothing stays behind.
    e.advance(1_000).unwrap();
    assert_eq!(settled(&drain(&mut e), 3), Some(&Outcome::NotHeld));
    assert_eq!(e.live_executions(), 0);
    assert!(e.finish(3, true).is_err(), "the host answers a later release() itself");
}

#[test]
fn a_manual_lease_granted_and_over_before_the_host_took_the_grant_is_handed_out_over() {
    let mut e = engine();
    e.start(1, vec![lock(MEM, "k", 10, None)], MANUAL).unwrap();
    e.start(2, vec![lock(MEM, "k", 10, None)], MANUAL).unwrap(); // granted at 10, over at 20
    e.advance(20).unwrap();
    let effects = drain(&mut e);
    // Granted (never "the key stayed held"), its token with the grant, lost, wound down.
    let run = effects.iter().position(|fx| *fx == Effect::Run { exec: 2, token: 2 });
    let lost = effects.iter().position(|fx| *fx == Effect::Lost { exec: 2, layer: 0 });
    assert!(run.is_some() && lost.is_some() && run < lost, "{effects:?}");
    assert_eq!(settled(&effects, 2), Some(&Outcome::NotHeld));
    assert_eq!(e.live_executions(), 0);
}

#[test]
fn an_auto_renewed_manual_lease_that_is_lost_tells_its_holder_and_is_wound_down() {
    let mut e = engine();
    let auto = ExecOptions { renew: true, telemetry: false, manual: true };
    held_external(&mut e, 3_000, auto);
    e.advance(1_000).unwrap();
    let renew = only_call(&mut e, StoreMethod::Renew);
    e.answer(renew.request, Answer::Renewed(false));
    let effects = drain(&mut e);
    assert!(effects.contains(&Effect::Lost { exec: 1, layer: 0 }), "{effects:?}");
    assert_eq!(settled(&effects, 1), Some(&Outcome::NotHeld));
    assert_eq!(e.live_executions(), 0);
}

#[test]
fn a_memory_lease_shortened_by_its_holder_goes_to_the_first_waiter_at_its_new_end() {
    let mut e = engine();
    e.start(1, vec![lock(MEM, "k", 1_000, None)], MANUAL).unwrap();
    e.start(2, vec![lock(MEM, "k", 1_000, Some(5_000))], ExecOptions::default()).unwrap();
    e.advance(50).unwrap();
    assert_eq!(e.extend(1, Some(100)).unwrap(), Extend::Done(true), "the lease now ends at 150");
    e.advance(100).unwrap();
    assert!(ran(&drain(&mut e), 2), "the waiter takes the key at 150, not at the old end (1000)");
    // The same through the store itself, and a newcomer meanwhile waits its turn.
    let mut e = engine();
    assert!(matches!(
        e.memory_acquire(DEFAULT_MEMORY_STORE, "k", "direct", 1_000, 1, 1).unwrap(),
        TryAcquire::Acquired(_)
    ));
    e.start(2, vec![lock(MEM, "k", 1_000, Some(5_000))], ExecOptions::default()).unwrap();
    assert!(e.memory_renew(DEFAULT_MEMORY_STORE, "k", "direct", 100).unwrap());
    e.advance(100).unwrap();
    assert!(ran(&drain(&mut e), 2));
}

#[test]
fn a_newcomer_on_a_key_that_ended_unseen_lets_the_first_waiter_take_it() {
    let (mut e, time) = hand_engine();
    e.start(1, vec![lock(MEM, "k", 1_000, None)], MANUAL).unwrap();
    e.start(2, vec![lock(MEM, "k", 1_000, None)], ExecOptions::default()).unwrap();
    // The lease lapsed at 1 000; the host timer has not fired (a busy event loop).
    time.set(1_005);
    let newcomer = e.start(3, vec![lock(MEM, "k", 1_000, Some(0))], ExecOptions::default()).unwrap();
    assert_eq!(newcomer, Start::Pending);
    let effects = drain(&mut e);
    assert!(ran(&effects, 2), "the first waiter took the key at the newcomer's try: {effects:?}");
    assert_eq!(settled(&effects, 3), Some(&Outcome::Error(LockError::NotAcquired { key: "k".into() })));
}

#[test]
fn a_manual_lease_that_lapses_is_wound_down_and_a_release_meanwhile_waits_for_it() {
    let mut e = engine();
    held_external(&mut e, 1_000, MANUAL);
    e.advance(1_000).unwrap();
    let (calls, effects) = split(&mut e);
    assert!(effects.is_empty(), "a lease without renewals lapses, as its holder was told: {effects:?}");
    assert_eq!(calls.len(), 1, "the store may still hold it for a moment: released as its owner");
    assert_eq!(calls[0].method, StoreMethod::Release);
    assert_eq!(e.finish(1, true).unwrap(), Finish::Pending, "release() while that release is in flight");
    e.answer(calls[0].request, Answer::Released(Some(true)));
    assert_eq!(settled(&drain(&mut e), 1), Some(&Outcome::NotHeld));
    assert_eq!((e.live_executions(), e.open_requests(), e.next_deadline()), (0, 0, None));
}

#[test]
fn a_manual_release_on_a_store_uses_its_answer_or_the_engine_clock() {
    for (said, advance, expected) in [
        (Some(true), 0, Outcome::Value),
        (Some(false), 0, Outcome::NotHeld),
        (None, 0, Outcome::Value),
        (None, 1_000, Outcome::NotHeld),
    ] {
        let mut e = engine();
        e.start(1, vec![lock(EXT, "k", 1_000, None)], MANUAL).unwrap();
        let acquire = only_call(&mut e, StoreMethod::Acquire);
        e.answer(acquire.request, Answer::Acquired(Some(1)));
        assert!(ran(&drain(&mut e), 1));
        // Released before its expiry timer ran (a busy host) when it comes after the lapse.
        e.advance_clock_only_for_tests(advance);
        assert_eq!(e.finish(1, true).unwrap(), Finish::Pending);
        let release = only_call(&mut e, StoreMethod::Release);
        e.answer(release.request, Answer::Released(said));
        assert_eq!(settled(&drain(&mut e), 1), Some(&expected), "{said:?} after {advance}");
    }
}

#[test]
fn extend_pushes_a_manual_lease_out_and_is_false_once_it_is_gone() {
    let mut e = engine();
    e.start(1, vec![lock(MEM, "k", 1_000, None)], MANUAL).unwrap();
    e.advance(900).unwrap();
    assert_eq!(e.extend(1, Some(5_000)).unwrap(), Extend::Done(true));
    assert_eq!(e.memory_ttl(DEFAULT_MEMORY_STORE, "k").unwrap(), Some(5_000));
    assert_eq!(e.next_deadline(), Some(5_900), "no renewal for a plain manual lease: only its expiry");
    e.advance(5_000).unwrap();
    assert_eq!(e.extend(1, None).unwrap(), Extend::Done(false), "lapsed");
    assert_eq!(e.extend(99, None).unwrap(), Extend::Done(false), "unknown");
    assert!(e.extend(1, Some(0)).is_err());
}

#[test]
fn extend_through_a_store_answers_with_an_effect_and_false_after_a_loss() {
    let mut e = engine();
    let auto = ExecOptions { renew: true, telemetry: false, manual: true };
    e.start(1, vec![lock(EXT, "k", 3_000, None)], auto).unwrap();
    let acquire = only_call(&mut e, StoreMethod::Acquire);
    e.answer(acquire.request, Answer::Acquired(Some(1)));
    drain(&mut e);
    assert_eq!(e.extend(1, Some(6_000)).unwrap(), Extend::Pending);
    let renew = only_call(&mut e, StoreMethod::Renew);
    e.answer(renew.request, Answer::Renewed(true));
    assert!(drain(&mut e).contains(&Effect::Extended { exec: 1, ok: true }));
    assert_eq!(e.next_deadline(), Some(2_000), "auto renewal now on the new ttl's schedule");
    assert_eq!(e.extend(1, None).unwrap(), Extend::Pending);
    let renew = only_call(&mut e, StoreMethod::Renew);
    e.answer(renew.request, Answer::Renewed(false));
    let effects = drain(&mut e);
    assert!(effects.contains(&Effect::Extended { exec: 1, ok: false }));
    assert!(effects.contains(&Effect::Lost { exec: 1, layer: 0 }));
    assert_eq!(effects.iter().filter(|x| matches!(x, Effect::Extended { .. })).count(), 1);
    assert_eq!(e.extend(1, None).unwrap(), Extend::Done(false));
}

#[test]
fn a_release_announced_while_a_try_is_in_flight_is_not_lost() {
    let mut e = engine();
    let store = StoreRef::External { id: 3, wake: Wake::Announce };
    e.start(1, vec![lock(store, "k", 30_000, None)], ExecOptions::default()).unwrap();
    let first = only_call(&mut e, StoreMethod::Acquire);
    e.answer(first.request, Answer::Acquired(None));
    drain(&mut e);
    e.advance(50).unwrap();
    let second = only_call(&mut e, StoreMethod::Acquire);
    // The store answered "held" just before the release, and the answer arrives after it.
    e.released(store, "k");
    assert!(drain(&mut e).is_empty(), "no second try while one is in flight");
    e.answer(second.request, Answer::Acquired(None));
    let third = only_call(&mut e, StoreMethod::Acquire);
    assert_eq!(third.at, 50, "tried again at once, not at the next poll");
}

// ---- review findings -----------------------------------------------------------------

fn held_external(e: &mut Engine, ttl: Millis, options: ExecOptions) -> Call {
    e.start(1, vec![lock(EXT, "k", ttl, None)], options).unwrap();
    let acquire = only_call(e, StoreMethod::Acquire);
    e.answer(acquire.request, Answer::Acquired(Some(1)));
    drain(e);
    acquire
}

#[test]
fn an_extend_to_a_new_ttl_during_a_renewal_asks_again_with_that_ttl() {
    let mut e = engine();
    let auto = ExecOptions { renew: true, telemetry: false, manual: true };
    held_external(&mut e, 300, auto);
    e.advance(100).unwrap();
    let renewal = only_call(&mut e, StoreMethod::Renew);
    assert_eq!(e.extend(1, Some(30_000)).unwrap(), Extend::Pending);
    e.answer(renewal.request, Answer::Renewed(true));
    let (calls, effects) = split(&mut e);
    assert!(!effects.iter().any(|x| matches!(x, Effect::Extended { .. })), "not yet: the store granted 300 ms");
    let [again] = &calls[..] else { panic!("{calls:?}") };
    assert_eq!(again.method, StoreMethod::Renew);
    e.answer(again.request, Answer::Renewed(true));
    assert!(drain(&mut e).contains(&Effect::Extended { exec: 1, ok: true }));
}

#[test]
fn every_pending_extend_is_answered() {
    let mut e = engine();
    held_external(&mut e, 3_000, MANUAL);
    assert_eq!(e.extend(1, None).unwrap(), Extend::Pending);
    assert_eq!(e.extend(1, None).unwrap(), Extend::Pending);
    let renew = only_call(&mut e, StoreMethod::Renew);
    e.answer(renew.request, Answer::Renewed(true));
    let answered = drain(&mut e).iter().filter(|x| matches!(x, Effect::Extended { ok: true, .. })).count();
    assert_eq!(answered, 2);
}

#[test]
fn an_extend_the_store_never_answers_ends_at_the_lease_expiry() {
    let mut e = engine();
    held_external(&mut e, 1_000, MANUAL);
    assert_eq!(e.extend(1, None).unwrap(), Extend::Pending);
    only_call(&mut e, StoreMethod::Renew);
    e.advance(999).unwrap();
    assert!(drain(&mut e).is_empty());
    e.advance(1).unwrap();
    let (calls, effects) = split(&mut e);
    assert!(effects.contains(&Effect::Extended { exec: 1, ok: false }));
    // The abandoned renewal is forgotten; only the lapsed lease's clean-up release is open.
    assert_eq!(calls.iter().map(|c| c.method).collect::<Vec<_>>(), [StoreMethod::Release]);
    assert_eq!(e.open_requests(), 1);
}

#[test]
fn a_grant_answered_after_its_ttl_is_released_and_the_execution_fails() {
    let mut e = engine();
    e.start(1, vec![lock(EXT, "k", 50, Some(1_000))], ExecOptions::default()).unwrap();
    let acquire = only_call(&mut e, StoreMethod::Acquire);
    // The host was busy: the answer is handled at 80 ms, before the timeout timer ran.
    e.advance_clock_only_for_tests(80);
    e.answer(acquire.request, Answer::Acquired(Some(1)));
    let (calls, effects) = split(&mut e);
    assert!(!ran(&effects, 1));
    assert!(matches!(settled(&effects, 1), Some(Outcome::Error(LockError::StoreFailed { .. }))));
    assert_eq!(calls.len(), 1);
    assert_eq!((calls[0].method, calls[0].owner.as_str()), (StoreMethod::Release, acquire.owner.as_str()));
}

#[test]
fn a_lease_lost_by_timeout_is_released_after_the_callback_one_refused_is_not() {
    for (refuse, expect_release) in [(false, true), (true, false)] {
        let mut e = engine();
        held_external(&mut e, 3_000, ExecOptions::default());
        e.advance(1_000).unwrap();
        let renew = only_call(&mut e, StoreMethod::Renew);
        if refuse {
            e.answer(renew.request, Answer::Renewed(false));
        } else {
            e.advance(2_000).unwrap();
        }
        assert!(drain(&mut e).contains(&Effect::Lost { exec: 1, layer: 0 }));
        let finish = e.finish(1, false).unwrap();
        let (calls, _) = split(&mut e);
        assert_eq!(calls.iter().any(|c| c.method == StoreMethod::Release), expect_release, "refused: {refuse}");
        if expect_release {
            assert_eq!(finish, Finish::Pending);
            e.answer(calls[0].request, Answer::Released(Some(true)));
            assert_eq!(settled(&drain(&mut e), 1), Some(&Outcome::Error(LockError::Lost { key: "k".into() })));
        }
    }
}

#[test]
fn abandoned_acquires_are_bounded() {
    let mut e = engine();
    for exec in 1..=3_000 {
        e.start(exec, vec![lock(EXT, &format!("k{exec}"), 10, None)], ExecOptions::default()).unwrap();
        drain(&mut e);
    }
    e.advance(10).unwrap();
    drain(&mut e);
    assert_eq!(e.live_executions(), 0);
    assert!(e.open_requests() <= 1_024, "{}", e.open_requests());
}

#[test]
fn defined_locks_start_by_id_are_deduplicated_and_bounded() {
    let mut e = engine();
    let a = e.define_lock(lock(MEM, "k", 30_000, Some(0))).unwrap().unwrap();
    assert_eq!(e.define_lock(lock(MEM, "k", 30_000, Some(0))).unwrap(), Some(a), "same lock, same id");
    assert!(e.define_lock(lock(MEM, "", 30_000, None)).is_err(), "validated like start");
    assert!(matches!(e.start_defined(1, a, ExecOptions::default()).unwrap(), Start::Running { .. }));
    assert_eq!(e.start_defined(2, a, ExecOptions::default()).unwrap(), Start::Pending, "the same key: held");
    assert!(matches!(settled(&drain(&mut e), 2), Some(Outcome::Error(LockError::NotAcquired { .. }))));
    assert!(e.start_defined(3, 999, ExecOptions::default()).is_err());
    for i in 1..leasehold_core::MAX_DEFINED_LOCKS {
        assert!(e.define_lock(lock(MEM, &format!("k{i}"), 1_000, None)).unwrap().is_some());
    }
    assert_eq!(e.define_lock(lock(MEM, "one too many", 1_000, None)).unwrap(), None);
}

#[test]
fn a_defined_lock_lives_until_every_definition_is_let_go_of() {
    let mut e = engine();
    let big = "x".repeat(64 * 1024);
    let a = e.define_lock(lock(MEM, &big, 30_000, None)).unwrap().unwrap();
    assert_eq!(e.define_lock(lock(MEM, &big, 30_000, None)).unwrap(), Some(a), "a second pipeline, the same lock");
    assert!(matches!(e.start_defined(1, a, ExecOptions::default()).unwrap(), Start::Running { .. }));
    assert!(e.undefine_lock(a));
    assert!(e.undefine_lock(a));
    assert_eq!(e.defined_locks(), 0);
    assert!(e.start_defined(2, a, ExecOptions::default()).is_err(), "not defined any more");
    // An execution started before keeps its own lock.
    assert_eq!(e.finish(1, true).unwrap(), Finish::Settled(Outcome::Value));
    assert!(!e.undefine_lock(a));
    // Defined and let go of over and over, the engine keeps none of them.
    for i in 0..200 {
        let id = e.define_lock(lock(MEM, &format!("{i}{big}"), 30_000, None)).unwrap().unwrap();
        assert!(matches!(e.start_defined(3, id, ExecOptions::default()).unwrap(), Start::Running { .. }));
        e.finish(3, true).unwrap();
        assert!(e.undefine_lock(id));
    }
    assert_eq!(e.defined_locks(), 0);
}

// ---- store calls in flat form -------------------------------------------------------

#[test]
fn renewals_and_releases_of_a_lock_come_without_text() {
    use leasehold_core::host::take_flat_effects;
    let mut e = engine();
    let (mut numbers, mut strings) = (Vec::new(), Vec::new());
    e.start(1, vec![lock(GRANTING, "k", 3_000, None)], ExecOptions::default()).unwrap();
    take_flat_effects(&mut e, &mut numbers, &mut strings);
    // [header, kind, exec, layer, request, store, method, ttl, text]
    assert_eq!(numbers[0], 2.0, "an acquire carries its key and owner");
    assert_eq!((numbers[1], numbers[2], numbers[3], numbers[6]), (1.0, 1.0, 0.0, 4.0), "a queued acquire");
    assert_eq!(strings[numbers[8] as usize], "k");
    let owner = strings[numbers[8] as usize + 1].clone();
    e.answer(numbers[4] as u32, Answer::Acquired(Some(1)));
    drain(&mut e);
    e.advance(1_000).unwrap();
    take_flat_effects(&mut e, &mut numbers, &mut strings);
    assert_eq!(numbers[..], [0.0, 1.0, 1.0, 0.0, numbers[4], 4.0, 2.0, 3_000.0, -1.0], "a renewal, no text");
    assert!(strings.is_empty());
    e.finish(1, true).unwrap();
    take_flat_effects(&mut e, &mut numbers, &mut strings);
    assert_eq!(numbers[..], [0.0, 1.0, 1.0, 0.0, numbers[4], 4.0, 3.0, 3_000.0, -1.0], "a release, no text");
    assert_eq!(e.layer_key(1, 0), Some("k"));
    assert_eq!(e.layer_owner(1, 0), Some(owner.as_str()));

    // The release of a late grant belongs to no execution: it carries its text.
    e.start(2, vec![lock(EXT, "j", 30_000, None)], ExecOptions::default()).unwrap();
    let acquire = only_call(&mut e, StoreMethod::Acquire);
    e.cancel(2);
    drain(&mut e);
    e.answer(acquire.request, Answer::Acquired(Some(2)));
    take_flat_effects(&mut e, &mut numbers, &mut strings);
    assert_eq!((numbers[0], numbers[2], numbers[6]), (2.0, 0.0, 3.0), "exec 0, a release, with text");
    assert_eq!((strings[0].as_str(), strings[1].as_str()), ("j", acquire.owner.as_str()));
}

// ---- a JS store's answers in the status word -----------------------------------------

mod answers {
    use super::*;
    use leasehold_core::host::{answer_call, status};

    const TELEMETRY: ExecOptions = ExecOptions { renew: true, telemetry: true, manual: false };
    /// A token as large as a Redis store's (time-based): too large to ride above the
    /// status bits, which is why a run's token is the one just answered.
    const BIG_TOKEN: u64 = 1_795_999_229_586_969;

    fn acquired(e: &mut Engine, request: u32, token: Option<u64>) -> u32 {
        answer_call(e, request, Answer::Acquired(token), true, &mut 0.0)
    }

    fn released(e: &mut Engine, request: u32, said: Option<bool>) -> u32 {
        answer_call(e, request, Answer::Released(said), true, &mut 0.0)
    }

    /// Starts `exec` on `store`/`key` and answers its acquire with `token`, directly.
    fn running(e: &mut Engine, exec: u32, key: &str, options: ExecOptions, token: u64) -> Call {
        e.start(exec, vec![lock(EXT, key, 30_000, None)], options).unwrap();
        let acquire = only_call(e, StoreMethod::Acquire);
        assert_eq!(acquired(e, acquire.request, Some(token)), status::ANSWERED_RUNNING);
        acquire
    }

    #[test]
    fn an_uncontended_execution_runs_and_settles_from_status_words_alone() {
        for (ok, settled_as) in [(true, status::ANSWERED_VALUE), (false, status::ANSWERED_CALLBACK_ERROR)] {
            let mut e = engine();
            let acquire = running(&mut e, 1, "k", ExecOptions::default(), BIG_TOKEN);
            assert!(!e.has_effects(), "the run was handed back");
            assert_eq!(e.token(1), Some(BIG_TOKEN));
            assert_eq!(e.finish(1, ok).unwrap(), Finish::Pending);
            let release = only_call(&mut e, StoreMethod::Release);
            assert_eq!(release.owner, acquire.owner);
            assert_eq!(released(&mut e, release.request, Some(true)), settled_as);
            assert!(!e.has_effects(), "the settlement was handed back");
            assert_eq!(e.live_executions(), 0);
            assert_eq!(e.open_requests(), 0);
            assert_eq!(e.next_deadline(), None, "no timer left behind");
        }
    }

    #[test]
    fn a_manual_release_not_held_is_handed_back_too() {
        let mut e = engine();
        running(&mut e, 1, "k", MANUAL, 3);
        assert_eq!(e.finish(1, true).unwrap(), Finish::Pending);
        let release = only_call(&mut e, StoreMethod::Release);
        assert_eq!(released(&mut e, release.request, Some(false)), status::ANSWERED_NOT_HELD);
        assert!(!e.has_effects());
    }

    #[test]
    fn without_direct_every_outcome_comes_as_effects() {
        let mut e = engine();
        e.start(1, vec![lock(EXT, "k", 30_000, None)], ExecOptions::default()).unwrap();
        let acquire = only_call(&mut e, StoreMethod::Acquire);
        let word = answer_call(&mut e, acquire.request, Answer::Acquired(Some(4)), false, &mut 0.0);
        assert_eq!(word, status::EFFECTS);
        assert_eq!(drain(&mut e), vec![Effect::Run { exec: 1, token: 4 }]);
        e.finish(1, true).unwrap();
        let release = only_call(&mut e, StoreMethod::Release);
        let word = answer_call(&mut e, release.request, Answer::Released(None), false, &mut 0.0);
        assert_eq!(word, status::EFFECTS);
        assert_eq!(drain(&mut e), vec![Effect::Settled { exec: 1, outcome: Outcome::Value }]);
    }

    #[test]
    fn with_telemetry_the_events_and_the_outcome_come_as_effects_in_order() {
        let mut e = engine();
        e.start(1, vec![lock(EXT, "k", 30_000, None)], TELEMETRY).unwrap();
        let acquire = only_call(&mut e, StoreMethod::Acquire);
        e.advance(5).unwrap();
        assert_eq!(acquired(&mut e, acquire.request, Some(BIG_TOKEN)), status::EFFECTS);
        assert_eq!(
            drain(&mut e),
            vec![
                Effect::Event { exec: 1, layer: 0, event: Event::Acquired { waited: 5, token: BIG_TOKEN } },
                Effect::Run { exec: 1, token: BIG_TOKEN },
            ]
        );
        e.finish(1, true).unwrap();
        let release = only_call(&mut e, StoreMethod::Release);
        assert_eq!(released(&mut e, release.request, None), status::EFFECTS);
        assert_eq!(
            drain(&mut e),
            vec![
                Effect::Event { exec: 1, layer: 0, event: Event::Released },
                Effect::Settled { exec: 1, outcome: Outcome::Value },
            ]
        );
    }

    #[test]
    fn effects_already_waiting_keep_their_place_before_the_answer() {
        let mut e = engine();
        e.start(1, vec![lock(EXT, "a", 30_000, None)], ExecOptions::default()).unwrap();
        let first = only_call(&mut e, StoreMethod::Acquire);
        // A second execution's acquire is not taken yet when the first one's answer comes.
        e.start(2, vec![lock(EXT, "b", 30_000, None)], ExecOptions::default()).unwrap();
        assert_eq!(acquired(&mut e, first.request, Some(1)), status::EFFECTS);
        let effects = drain(&mut e);
        assert!(matches!(effects[..], [Effect::StoreCall { exec: 2, .. }, Effect::Run { exec: 1, .. }]), "{effects:?}");
        // And a release answered while another execution's effects wait.
        e.finish(1, true).unwrap();
        let release = only_call(&mut e, StoreMethod::Release);
        e.start(3, vec![lock(EXT, "c", 30_000, None)], ExecOptions::default()).unwrap();
        assert_eq!(released(&mut e, release.request, Some(true)), status::EFFECTS);
        let effects = drain(&mut e);
        assert!(
            matches!(
                effects[..],
                [Effect::StoreCall { exec: 3, .. }, Effect::Settled { exec: 1, outcome: Outcome::Value }]
            ),
            "{effects:?}"
        );
    }

    #[test]
    fn an_answer_that_also_moves_another_execution_comes_as_effects() {
        // Execution 2 waits on a granting store behind execution 1's try: when 1 is
        // granted, 2 becomes first and asks to be queued; 1's run is not alone.
        let mut e = engine();
        e.start(9, vec![lock(GRANTING, "k", 3_000, None)], ExecOptions::default()).unwrap();
        let holder = only_call(&mut e, StoreMethod::Acquire);
        e.answer(holder.request, Answer::Acquired(Some(1)));
        drain(&mut e);
        let first = waiting_on_granting_store(&mut e, 1, 3_000, None);
        waiting_on_granting_store(&mut e, 2, 3_000, None);
        e.advance(50).unwrap();
        let polls = split(&mut e).0;
        let poll = polls.iter().find(|c| c.owner == first.owner).expect("the first waiter polls");
        assert_eq!(acquired(&mut e, poll.request, Some(2)), status::EFFECTS);
        let (calls, effects) = split(&mut e);
        assert!(ran(&effects, 1));
        assert_eq!(calls.len(), 1, "the next waiter asks: {calls:?}");
    }

    #[test]
    fn a_run_under_an_inner_lock_s_token_comes_as_an_effect() {
        let mut e = engine();
        e.start(1, vec![lock(EXT, "outer", 30_000, None), lock(MEM, "inner", 30_000, None)], ExecOptions::default())
            .unwrap();
        let acquire = only_call(&mut e, StoreMethod::Acquire);
        assert_eq!(acquired(&mut e, acquire.request, Some(BIG_TOKEN)), status::EFFECTS);
        assert_eq!(drain(&mut e), vec![Effect::Run { exec: 1, token: 1 }]);
        assert_eq!(e.token(1), Some(1), "the memory store's token");
    }

    #[test]
    fn nested_js_store_locks_run_and_settle_from_the_innermost_and_outermost_answers() {
        let mut e = engine();
        let inner_store = StoreRef::External { id: 8, wake: Wake::Poll };
        e.start(1, vec![lock(EXT, "outer", 30_000, None), lock(inner_store, "inner", 30_000, None)], TELEMETRY)
            .unwrap_or_else(|err| panic!("{err}"));
        let outer = only_call(&mut e, StoreMethod::Acquire);
        assert_eq!(acquired(&mut e, outer.request, Some(10)), status::EFFECTS, "the inner acquire follows");
        let inner = only_call(&mut e, StoreMethod::Acquire);
        assert_eq!(acquired(&mut e, inner.request, Some(20)), status::EFFECTS, "telemetry: an event first");
        assert!(ran(&drain(&mut e), 1));

        let mut e = engine();
        e.start(
            1,
            vec![lock(EXT, "outer", 30_000, None), lock(inner_store, "inner", 30_000, None)],
            ExecOptions::default(),
        )
        .unwrap();
        let outer = only_call(&mut e, StoreMethod::Acquire);
        assert_eq!(acquired(&mut e, outer.request, Some(10)), status::EFFECTS);
        let inner = only_call(&mut e, StoreMethod::Acquire);
        assert_eq!(acquired(&mut e, inner.request, Some(20)), status::ANSWERED_RUNNING);
        assert_eq!(e.token(1), Some(20));
        e.finish(1, true).unwrap();
        let release_inner = only_call(&mut e, StoreMethod::Release);
        assert_eq!(released(&mut e, release_inner.request, None), status::EFFECTS, "the outer release follows");
        let release_outer = only_call(&mut e, StoreMethod::Release);
        assert_eq!(release_outer.owner, outer.owner);
        assert_eq!(released(&mut e, release_outer.request, None), status::ANSWERED_VALUE);
        assert_eq!(e.live_executions(), 0);
    }

    #[test]
    fn a_release_answered_after_a_loss_settles_with_the_loss_as_an_effect() {
        let mut e = engine();
        running(&mut e, 1, "k", ExecOptions::default(), 1);
        e.advance(10_000).unwrap();
        let renew = only_call(&mut e, StoreMethod::Renew);
        // The renewal never comes back: the lease is lost at its expiry.
        e.advance(20_000).unwrap();
        assert_eq!(drain(&mut e), vec![Effect::Lost { exec: 1, layer: 0 }]);
        e.answer(renew.request, Answer::Renewed(true));
        assert_eq!(e.finish(1, false).unwrap(), Finish::Pending, "a best-effort release first");
        let release = only_call(&mut e, StoreMethod::Release);
        assert_eq!(released(&mut e, release.request, Some(true)), status::EFFECTS);
        assert_eq!(
            drain(&mut e),
            vec![Effect::Settled { exec: 1, outcome: Outcome::Error(LockError::Lost { key: "k".into() }) }]
        );
    }

    #[test]
    fn held_failed_and_abandoned_answers_come_as_effects_or_nothing() {
        let mut e = engine();
        e.start(1, vec![lock(EXT, "k", 30_000, Some(0))], ExecOptions::default()).unwrap();
        let acquire = only_call(&mut e, StoreMethod::Acquire);
        assert_eq!(acquired(&mut e, acquire.request, None), status::EFFECTS, "held, fail fast");
        assert!(matches!(settled(&drain(&mut e), 1), Some(Outcome::Error(LockError::NotAcquired { .. }))));

        e.start(2, vec![lock(EXT, "k", 30_000, None)], ExecOptions::default()).unwrap();
        let acquire = only_call(&mut e, StoreMethod::Acquire);
        assert!(e.cancel(2));
        drain(&mut e);
        assert_eq!(acquired(&mut e, acquire.request, Some(5)), status::EFFECTS, "a late grant is released");
        let release = only_call(&mut e, StoreMethod::Release);
        assert_eq!(released(&mut e, release.request, Some(true)), 0, "nobody waits for it");
        assert_eq!(acquired(&mut e, 999, Some(1)), 0, "an unknown request");
    }
}

// ---- a JS store's first acquire and last release in the status word ------------------

mod store_calls {
    use super::*;
    use leasehold_core::host::{answer_call, finish_call, start_word, status, DIRECT};

    /// The low status bits and the number above them.
    fn split_word(word: f64) -> (u32, u32) {
        ((word % 256.0) as u32, (word / 256.0).floor() as u32)
    }

    fn start(e: &mut Engine, exec: u32, locks: Vec<LockSpec>, options: u32) -> (u32, u32) {
        let started = e.start(exec, locks, ExecOptions::default()).unwrap();
        split_word(start_word(e, exec, options, started, &mut 0.0))
    }

    #[test]
    fn an_uncontended_execution_on_a_js_store_takes_no_effect_at_all() {
        let mut e = engine();
        let (code, acquire) = start(&mut e, 1, vec![lock(EXT, "k", 30_000, None)], DIRECT);
        assert_eq!(code, status::STARTED_STORE_CALL);
        assert!(!e.has_effects(), "the acquire was handed back, not left as an effect");
        assert!(e.layer_owner(1, 0).is_some());
        assert_eq!(answer_call(&mut e, acquire, Answer::Acquired(Some(9)), true, &mut 0.0), status::ANSWERED_RUNNING);
        let (code, release) = split_word(finish_call(&mut e, 1, true, true, &mut 0.0).unwrap());
        assert_eq!(code, status::FINISHED_STORE_CALL);
        assert_ne!(release, acquire);
        assert!(!e.has_effects(), "the release was handed back");
        assert_eq!(answer_call(&mut e, release, Answer::Released(Some(true)), true, &mut 0.0), status::ANSWERED_VALUE);
        assert_eq!(e.live_executions(), 0);
        assert_eq!(e.open_requests(), 0);
    }

    #[test]
    fn an_acquire_that_will_wait_on_a_granting_store_asks_to_queue() {
        let mut e = engine();
        let (code, _) = start(&mut e, 1, vec![lock(GRANTING, "k", 30_000, Some(1_000))], DIRECT);
        assert_eq!(code, status::STARTED_STORE_CALL_QUEUED);
        let (code, _) = start(&mut e, 2, vec![lock(GRANTING, "j", 30_000, Some(0))], DIRECT);
        assert_eq!(code, status::STARTED_STORE_CALL, "a fail-fast try does not queue");
    }

    #[test]
    fn without_direct_the_calls_stay_effects() {
        let mut e = engine();
        let (code, above) = start(&mut e, 1, vec![lock(EXT, "k", 30_000, None)], 0);
        assert_eq!((code, above), (status::EFFECTS, 0));
        let acquire = only_call(&mut e, StoreMethod::Acquire);
        e.answer(acquire.request, Answer::Acquired(Some(3)));
        drain(&mut e);
        let (code, above) = split_word(finish_call(&mut e, 1, true, false, &mut 0.0).unwrap());
        assert_eq!((code, above), (status::EFFECTS, 0));
        only_call(&mut e, StoreMethod::Release);
    }

    #[test]
    fn only_lock_zero_and_only_a_sole_effect_is_handed_back() {
        let mut e = engine();
        // Two locks: the outer one's acquire comes first and alone; the inner one's
        // release comes first at the end, and stays an effect.
        let (code, outer) = start(&mut e, 1, vec![lock(EXT, "a", 30_000, None), lock(EXT, "b", 30_000, None)], DIRECT);
        assert_eq!(code, status::STARTED_STORE_CALL);
        e.answer(outer, Answer::Acquired(Some(1)));
        let inner = only_call(&mut e, StoreMethod::Acquire);
        e.answer(inner.request, Answer::Acquired(Some(2)));
        drain(&mut e);
        let (code, above) = split_word(finish_call(&mut e, 1, true, true, &mut 0.0).unwrap());
        assert_eq!((code, above), (status::EFFECTS, 0));
        only_call(&mut e, StoreMethod::Release);
        // Effects already pending: the new call joins them.
        let mut e = engine();
        e.start(1, vec![lock(EXT, "a", 30_000, None)], ExecOptions::default()).unwrap();
        let (code, above) = start(&mut e, 2, vec![lock(EXT, "b", 30_000, None)], DIRECT);
        assert_eq!((code, above), (status::EFFECTS, 0));
        let (calls, _) = split(&mut e);
        assert_eq!(calls.len(), 2);
    }

    #[test]
    fn a_memory_lock_still_runs_with_its_token_above_the_status() {
        let mut e = engine();
        let (code, token) = start(&mut e, 1, vec![lock(MEM, "k", 30_000, None)], DIRECT);
        assert_eq!((code, token), (status::STARTED_RUNNING, 1));
        assert!(!e.has_effects());
    }
}

// ---- edges: lapses the host did not see, old grants, a clock at its limit, FIFO at one
// instant, a burst of waiters giving up, memory after a burst --------------------------

/// The store calls among `effects`: (request, method, owner).
fn calls(effects: &[Effect]) -> Vec<(u32, StoreMethod, String)> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::StoreCall { request, method, owner, .. } => Some((*request, *method, owner.clone())),
            _ => None,
        })
        .collect()
}

/// A real-clock host: time moves, but the host timer fires only when the test says so.
struct HandClock(Rc<Cell<Millis>>);

impl Clock for HandClock {
    fn now(&self) -> Millis {
        self.0.get()
    }
}

fn hand_engine() -> (Engine, Rc<Cell<Millis>>) {
    let time = Rc::new(Cell::new(0));
    (Engine::new(Box::new(HandClock(time.clone())), [3; 32]), time)
}

/// A grant older than the engine's clock (which starts at 0 when the engine is created)
/// cannot be placed on it: it is not run as a lease counted from 0, the waiter asks again.
#[test]
fn a_grant_older_than_its_ttl_is_not_run_even_early_in_the_engine_s_life() {
    let mut e = engine();
    e.start(1, vec![lock(GRANTING, "k", 3_000, None)], ExecOptions::default()).unwrap();
    let try1 = calls(&drain(&mut e)).remove(0);
    e.answer(try1.0, Answer::Acquired(None));
    drain(&mut e);
    e.advance(10).unwrap();
    assert!(e.granted(GRANTING, "k", &try1.2, 12, Some(5_000)), "claimed: it is this waiter's owner");
    let effects = drain(&mut e);
    assert!(!ran(&effects, 1), "a grant 5000 ms old on a 3000 ms lease ran: {effects:?}");
    assert!(!e.layer_held(1, 0), "the engine believes in a lease the store granted 5000 ms ago");
}

/// A fake clock starts at most at MAX_FAKE_TIME: near `u64::MAX`, `now + ttl` would
/// saturate into `now`, every lease would lapse as it is taken, and two executions would
/// hold one key. (The host refuses such a start; the engine does not rely on it.)
#[test]
fn a_fake_clock_near_u64_max_still_excludes() {
    // What both bindings compute for `new FakeTimeProvider(1e300)`: `start.max(0.0) as Millis`.
    let start = 1e300_f64.max(0.0) as Millis;
    let mut e = Engine::with_fake_clock(start, [42; 32]);
    assert!(matches!(
        e.start(1, vec![lock(MEM, "k", 30_000, None)], ExecOptions::default()).unwrap(),
        Start::Running { .. }
    ));
    let second = e.start(2, vec![lock(MEM, "k", 30_000, Some(0))], ExecOptions::default()).unwrap();
    assert_eq!(second, Start::Pending, "a second holder of 'k' while the first one runs");
    assert_eq!(e.now(), MAX_FAKE_TIME);
    assert!(matches!(e.advance(1), Err(LockError::InvalidArgument(_))), "advancing past the limit is refused");
}

/// A callback that blocks the event loop past its ttl settles before the expiry timer can
/// fire; meanwhile another execution took the key. The loss is found at `finish`, as the
/// timer would have found it: the execution rejects with LockLostError, and the host is
/// told of the loss (signal, onLockLost).
#[test]
fn finish_after_the_lease_ran_out_reports_the_loss() {
    let (mut e, time) = hand_engine();
    let telemetry = ExecOptions { renew: true, telemetry: true, manual: false };
    assert!(matches!(e.start(1, vec![lock(MEM, "k", 3_000, None)], telemetry).unwrap(), Start::Running { .. }));
    drain(&mut e);
    // The callback runs synchronously for 5 s: no timer fires, the renewal at 1 000 never goes.
    time.set(5_000);
    // Meanwhile (same tick, another request) the lapsed key is taken by someone else.
    assert!(matches!(
        e.start(2, vec![lock(MEM, "k", 3_000, Some(0))], ExecOptions::default()).unwrap(),
        Start::Running { .. }
    ));
    let finish = e.finish(1, false).unwrap();
    let effects = drain(&mut e);
    assert!(
        finish == Finish::Settled(Outcome::Error(LockError::Lost { key: "k".into() })),
        "expected LockLostError, got {finish:?} with {effects:?}"
    );
    assert!(effects.contains(&Effect::Lost { exec: 1, layer: 0 }), "{effects:?}");
}

/// Body of `many_waiters_timing_out_at_once_do_not_overflow_the_stack`, run in a child
/// process: a stack overflow aborts the whole process (it is not a panic to catch).
#[test]
#[ignore = "run by many_waiters_timing_out_at_once_do_not_overflow_the_stack in a child process"]
fn child_many_waiters_timing_out_at_once() {
    // 8 MiB: the main-thread stack of a Linux process (where the Node addon runs).
    let worker = std::thread::Builder::new().stack_size(8 << 20).spawn(|| {
        let mut e = engine();
        e.start(1, vec![lock(MEM, "k", 30_000, None)], ExecOptions::default()).unwrap();
        // A burst on a hot key: 20 000 requests in one millisecond, each with wait '1s'.
        for exec in 0..20_000 {
            e.start(10 + exec, vec![lock(MEM, "k", 30_000, Some(1_000))], ExecOptions::default()).unwrap();
        }
        // At 1 000 the head gives up and the next one tries at once, gives up too, and so
        // on down the queue.
        e.advance(1_000).unwrap();
        drain(&mut e).len()
    });
    assert_eq!(worker.unwrap().join().unwrap(), 20_000);
}

#[test]
fn many_waiters_timing_out_at_once_do_not_overflow_the_stack() {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "child_many_waiters_timing_out_at_once", "--test-threads=1"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child died: {:?}\n{}", out.status, stderr.lines().last().unwrap_or(""));
}

/// The holder's deadline counts from when the request was sent: `extend(100)` sent at 0 and
/// answered at 200 renewed a lease that ended at 100. That is a loss, not a success.
#[test]
fn an_extend_answered_after_its_own_ttl_is_not_a_success() {
    let mut e = engine();
    e.start(1, vec![lock(EXT, "k", 30_000, None)], MANUAL).unwrap();
    let acquire = calls(&drain(&mut e)).remove(0);
    e.answer(acquire.0, Answer::Acquired(Some(1)));
    drain(&mut e);
    assert_eq!(e.extend(1, Some(100)).unwrap(), Extend::Pending);
    let renew = calls(&drain(&mut e)).remove(0);
    assert_eq!(renew.1, StoreMethod::Renew);
    e.advance(200).unwrap();
    e.answer(renew.0, Answer::Renewed(true));
    let effects = drain(&mut e);
    let held = e.layer_held(1, 0);
    assert!(
        !effects.contains(&Effect::Extended { exec: 1, ok: true }),
        "extend() resolved true for a lease that ran out at 100 (answered at 200; layer_held = {held}): {effects:?}"
    );
}

/// The memory store hands its key over in arrival order, also when a later waiter's last
/// try (at its wait deadline) falls on the instant the first waiter is due to take the
/// lapsed key, and its timer was set first.
#[test]
fn a_later_waiter_s_last_try_does_not_overtake_the_first_waiter() {
    let mut e = engine();
    e.start(1, vec![lock(MEM, "k", 100, None)], MANUAL).unwrap(); // lapses at 100
    e.start(2, vec![lock(MEM, "k", 1_000, None)], MANUAL).unwrap(); // first waiter
    e.start(3, vec![lock(MEM, "k", 1_000, None)], ExecOptions::default()).unwrap(); // second, waits forever
    e.start(4, vec![lock(MEM, "k", 1_000, Some(1_100))], ExecOptions::default()).unwrap(); // third, until 1100
    e.advance(100).unwrap();
    assert!(ran(&drain(&mut e), 2), "exec 2 takes the lapsed key at 100; its own lease lapses at 1100");
    e.advance(1_000).unwrap();
    let effects = drain(&mut e);
    assert!(
        ran(&effects, 3) && !ran(&effects, 4),
        "at 1100 the key went to exec 4 (arrived third) instead of exec 3 (arrived second): {effects:?}"
    );
}

/// Same rule for a newcomer that comes after the lease lapsed (at 1 000) but before the
/// host timer that hands the key to the waiting exec 2 fired (a busy event loop): it does
/// not jump the queue; with `wait: 0` it fails fast.
#[test]
fn a_newcomer_does_not_overtake_a_waiter_when_a_lease_lapses() {
    let (mut e, time) = hand_engine();
    e.start(1, vec![lock(MEM, "k", 1_000, None)], MANUAL).unwrap();
    assert_eq!(e.start(2, vec![lock(MEM, "k", 1_000, None)], ExecOptions::default()).unwrap(), Start::Pending);
    time.set(1_005);
    let newcomer = e.start(3, vec![lock(MEM, "k", 1_000, Some(0))], ExecOptions::default()).unwrap();
    e.on_timer();
    let effects = drain(&mut e);
    assert!(
        !matches!(newcomer, Start::Running { .. }) && ran(&effects, 2),
        "exec 3 (arrived later) got {newcomer:?}; exec 2 ran: {}",
        ran(&effects, 2)
    );
    assert_eq!(settled(&effects, 3), Some(&Outcome::Error(LockError::NotAcquired { key: "k".into() })));
}

/// The memory store's memory follows its live leases back down after a burst (10 000
/// keys held at once, then released), also when only keys seen before come back: no new
/// key comes in to trigger a sweep then.
#[test]
fn memory_returns_to_live_leases_after_a_burst_without_new_keys() {
    let mut e = engine();
    // A burst: 10 000 executions on distinct keys at once, then all of them finish.
    for i in 0..10_000u32 {
        e.start(100 + i, vec![lock(MEM, &format!("key-{i}"), 1_000, None)], ExecOptions::default()).unwrap();
    }
    for i in 0..10_000u32 {
        e.finish(100 + i, true).unwrap();
    }
    // From now on: one execution at a time, always on keys seen before.
    for round in 0..1_000u32 {
        e.advance(1_000).unwrap();
        let key = format!("key-{}", round % 10);
        e.start(1, vec![lock(MEM, &key, 1_000, None)], ExecOptions::default()).unwrap();
        e.finish(1, true).unwrap();
    }
    assert_eq!(e.memory_size(DEFAULT_MEMORY_STORE).unwrap(), 0);
    let entries = e.memory_entries(DEFAULT_MEMORY_STORE).unwrap();
    assert!(entries <= 66, "{entries} entries kept for 0 live leases, 1000 s after the burst");
}

#[test]
fn a_dropped_memory_store_is_emptied_and_its_id_reused_unless_something_still_uses_it() {
    let mut e = engine();
    let a = e.create_memory_store();
    assert_eq!(e.memory_acquire(a, "k", "o", 60_000, 1, 1).unwrap(), TryAcquire::Acquired(1));
    assert!(e.drop_memory_store(a));
    assert!(!e.drop_memory_store(a), "dropped once");
    let b = e.create_memory_store();
    assert_eq!(b, a, "the id is reused");
    assert_eq!(e.memory_size(b).unwrap(), 0, "nothing of the dropped store's leases");
    assert_eq!(
        e.memory_acquire(b, "k", "p", 60_000, 1, 1).unwrap(),
        TryAcquire::Acquired(2),
        "tokens come from the engine's one counter: a reused id does not start them over"
    );
    assert_ne!(e.create_memory_store(), b, "a live store's id is not handed out");

    // Not while an execution waits on it (the host holds a store its executions use;
    // this guards the engine's queues), nor the default store.
    let store = StoreRef::Memory(b);
    assert!(matches!(
        e.start(1, vec![lock(store, "x", 1000, None)], ExecOptions::default()).unwrap(),
        Start::Running { .. }
    ));
    assert!(matches!(
        e.start(2, vec![lock(store, "x", 1000, Some(5000))], ExecOptions::default()).unwrap(),
        Start::Pending
    ));
    assert!(!e.drop_memory_store(b), "a waiter");
    e.finish(1, true).unwrap();
    drain(&mut e);
    e.finish(2, true).unwrap();
    drain(&mut e);
    assert!(e.drop_memory_store(b));
    assert!(!e.drop_memory_store(DEFAULT_MEMORY_STORE));
    assert!(!e.drop_memory_store(99), "an unknown id");
}

#[test]
fn a_manual_release_the_store_fails_is_a_store_error_and_one_unanswered_by_the_lease_end_is_not_held() {
    for (failure, expected) in [
        (
            Some(StoreFailure::Threw(9)),
            Outcome::Error(LockError::StoreFailed {
                key: "k".into(),
                method: StoreMethod::Release,
                failure: StoreFailure::Threw(9),
            }),
        ),
        (None, Outcome::NotHeld),
    ] {
        let mut e = engine();
        e.start(1, vec![lock(EXT, "k", 2_000, None)], MANUAL).unwrap();
        let acquire = only_call(&mut e, StoreMethod::Acquire);
        e.answer(acquire.request, Answer::Acquired(Some(1)));
        drain(&mut e);
        e.finish(1, true).unwrap();
        let release = only_call(&mut e, StoreMethod::Release);
        match failure {
            Some(failure) => e.answer(release.request, Answer::Failed(failure)),
            // Unanswered: at the lease's end the engine stops waiting.
            None => {
                e.advance(2_000).unwrap();
            }
        }
        assert_eq!(settled(&drain(&mut e), 1), Some(&expected));
    }
}

#[test]
fn an_acquire_that_fails_is_followed_by_a_release_by_its_owner_also_when_abandoned() {
    for abandon_first in [false, true] {
        let mut e = engine();
        e.start(1, vec![lock(EXT, "k", 30_000, Some(5_000))], ExecOptions::default()).unwrap();
        let acquire = only_call(&mut e, StoreMethod::Acquire);
        if abandon_first {
            e.cancel(1);
            drain(&mut e);
        }
        e.answer(acquire.request, Answer::Failed(StoreFailure::Threw(acquire.request)));
        let (calls, _) = split(&mut e);
        assert_eq!(calls.len(), 1, "abandoned first: {abandon_first}");
        assert_eq!((calls[0].method, calls[0].owner.as_str()), (StoreMethod::Release, acquire.owner.as_str()));
        // Timing out is not failing: a late answer says whether there is a lease.
        assert_eq!(e.live_executions(), 0);
    }
}
