//! Local handoff on a JS store that opts in (`Engine::set_store_handoff`), on a fake
//! clock: which releases hand the lease to a waiter here without a store call, the
//! tokens they get, and when the lease goes back to the store instead.

use leasehold_core::{
    Answer, Effect, Engine, ExecOptions, Finish, LockSpec, Millis, Outcome, Start, StoreMethod, StoreRef, Wake,
};

const STORE: u32 = 7;
const EXT: StoreRef = StoreRef::External { id: STORE, wake: Wake::Grant };
const TURN: Millis = 10;
const OPTIONS: ExecOptions = ExecOptions { renew: true, telemetry: false, manual: false };

fn engine() -> Engine {
    let mut e = Engine::with_fake_clock(0, [9; 32]);
    e.set_store_handoff(STORE, Some(TURN));
    e
}

fn lock(key: &str) -> LockSpec {
    LockSpec {
        store: EXT,
        key: key.into(),
        ttl: 30_000,
        wait: None,
        linger: 0,
        name: String::new(),
        limit: 1,
        weight: 1,
    }
}

/// The store calls among the pending effects: (request, method, owner, handed over).
fn calls(e: &mut Engine) -> Vec<(u32, StoreMethod, String, bool)> {
    std::iter::from_fn(|| e.take_effect())
        .filter_map(|fx| match fx {
            Effect::StoreCall { request, method, owner, handed_over, exec, .. } if exec != 0 => {
                Some((request, method, owner, handed_over))
            }
            _ => None,
        })
        .collect()
}

/// Starts `exec` on `key`; the request of its acquire, when it asked the store.
fn start(e: &mut Engine, exec: u32, key: &str) -> Option<u32> {
    assert_eq!(e.start(exec, vec![lock(key)], OPTIONS).unwrap(), Start::Pending);
    let asked = calls(e);
    asked.first().map(|c| {
        assert_eq!(c.1, StoreMethod::Acquire);
        c.0
    })
}

/// `exec` takes `key` from the store with `token`.
fn take(e: &mut Engine, exec: u32, key: &str, token: u64) {
    let request = start(e, exec, key).expect("a store call");
    e.answer(request, Answer::Acquired(Some(token)));
    assert_eq!(e.token(exec), Some(token));
    calls(e);
}

#[test]
fn a_release_hands_the_lease_to_a_waiter_here_with_the_next_token_and_no_store_call() {
    let mut e = engine();
    take(&mut e, 1, "k", 1_000);
    assert_eq!(start(&mut e, 2, "k"), None, "a waiter behind a holder here asks the store nothing");
    e.advance(1).unwrap();
    assert_eq!(e.finish(1, true).unwrap(), Finish::Settled(Outcome::Value), "settles at once");
    assert_eq!(e.token(2), Some(1_001));
    let effects: Vec<Effect> = std::iter::from_fn(|| e.take_effect()).collect();
    assert!(effects.contains(&Effect::Run { exec: 2, token: 1_001 }), "{effects:?}");
    assert!(!effects.iter().any(|fx| matches!(fx, Effect::StoreCall { .. })), "no store call: {effects:?}");
    // The lease keeps the first acquire's owner; its release names it and carries text.
    let owner = e.layer_owner(2, 0).unwrap().to_owned();
    assert_eq!(e.finish(2, true).unwrap(), Finish::Pending);
    let released = calls(&mut e);
    assert_eq!(released.len(), 1);
    assert_eq!((released[0].1, released[0].2.as_str(), released[0].3), (StoreMethod::Release, owner.as_str(), true));
}

#[test]
fn no_local_token_is_handed_out_faster_than_one_per_microsecond_since_the_grant() {
    let mut e = engine();
    take(&mut e, 1, "k", 1_000);
    start(&mut e, 2, "k");
    // No time since the grant: the lease goes back to the store.
    assert_eq!(e.finish(1, true).unwrap(), Finish::Pending);
    let released = calls(&mut e);
    assert_eq!(released.iter().map(|c| c.1).collect::<Vec<_>>(), vec![StoreMethod::Release]);
    assert!(!released[0].3, "the first acquire's own lease");
    assert_eq!(e.token(2), None);
}

#[test]
fn the_turn_ends_local_handoffs_and_the_next_waiter_asks_the_store_after_the_release() {
    let mut e = engine();
    take(&mut e, 1, "k", 1_000);
    start(&mut e, 2, "k");
    start(&mut e, 3, "k");
    e.advance(5).unwrap();
    e.finish(1, true).unwrap();
    assert_eq!(e.token(2), Some(1_001));
    calls(&mut e);
    e.advance(TURN).unwrap();
    assert_eq!(e.finish(2, true).unwrap(), Finish::Pending, "the turn is over: released to the store");
    let released = calls(&mut e);
    assert_eq!(released.len(), 1);
    assert_eq!(released[0].1, StoreMethod::Release);
    assert_eq!(e.token(3), None);
    e.answer(released[0].0, Answer::Released(Some(true)));
    let asked = calls(&mut e);
    assert_eq!(asked.iter().map(|c| c.1).collect::<Vec<_>>(), vec![StoreMethod::Acquire], "the waiter asks now");
    e.answer(asked[0].0, Answer::Acquired(Some(5_000)));
    assert_eq!(e.token(3), Some(5_000));
}

#[test]
fn a_lease_lapsed_by_this_engine_clock_is_not_handed_over() {
    let mut e = engine();
    let request = start(&mut e, 1, "k").unwrap();
    e.answer(request, Answer::Acquired(Some(1_000)));
    start(&mut e, 2, "k");
    e.advance_clock_only_for_tests(30_000);
    e.finish(1, true).unwrap();
    assert_eq!(e.token(2), None, "a lease past its expiry is never handed over");
}

#[test]
fn a_fail_fast_try_behind_a_holder_here_fails_without_a_store_call() {
    let mut e = engine();
    take(&mut e, 1, "k", 1_000);
    let spec = LockSpec { wait: Some(0), ..lock("k") };
    assert_eq!(e.start(2, vec![spec], OPTIONS).unwrap(), Start::Pending);
    let effects: Vec<Effect> = std::iter::from_fn(|| e.take_effect()).collect();
    assert!(matches!(effects.as_slice(), [Effect::Settled { exec: 2, outcome: Outcome::Error(_) }]), "{effects:?}");
}

#[test]
fn a_waiter_the_store_queued_leaves_that_queue_when_handed_the_lease_here() {
    let mut e = engine();
    // Both ask the store before either holds.
    let first = start(&mut e, 1, "k").unwrap();
    let second = start(&mut e, 2, "k").unwrap();
    let queued_owner = e.layer_owner(2, 0).unwrap().to_owned();
    e.answer(first, Answer::Acquired(Some(1_000)));
    e.answer(second, Answer::Acquired(None));
    e.advance(1).unwrap();
    e.finish(1, true).unwrap();
    assert_eq!(e.token(2), Some(1_001));
    let cleanups: Vec<(String, StoreMethod)> = std::iter::from_fn(|| e.take_effect())
        .filter_map(|fx| match fx {
            Effect::StoreCall { exec: 0, owner, method, .. } => Some((owner, method)),
            _ => None,
        })
        .collect();
    assert_eq!(cleanups, vec![(queued_owner, StoreMethod::Release)], "its own queued owner is released");
}

#[test]
fn a_waiter_whose_try_is_on_its_way_to_the_store_is_not_handed_the_lease() {
    let mut e = engine();
    let first = start(&mut e, 1, "k").unwrap();
    start(&mut e, 2, "k").unwrap();
    e.answer(first, Answer::Acquired(Some(1_000)));
    e.advance(1).unwrap();
    assert_eq!(e.finish(1, true).unwrap(), Finish::Pending, "released to the store");
    assert_eq!(e.token(2), None, "the store may still grant that try the key");
}

#[test]
fn a_store_without_a_turn_never_hands_over() {
    let mut e = Engine::with_fake_clock(0, [9; 32]);
    take(&mut e, 1, "k", 1_000);
    assert!(start(&mut e, 2, "k").is_some(), "the waiter asks the store");
    e.advance(1).unwrap();
    assert_eq!(e.finish(1, true).unwrap(), Finish::Pending);
    assert_eq!(e.token(2), None);
}

fn lingering(key: &str, linger: Millis) -> LockSpec {
    LockSpec { linger, ..lock(key) }
}

#[test]
fn a_lingering_lease_goes_to_the_next_execution_that_asks_with_no_store_call() {
    let mut e = engine();
    assert_eq!(e.start(1, vec![lingering("k", 5)], OPTIONS).unwrap(), Start::Pending);
    let request = calls(&mut e)[0].0;
    e.answer(request, Answer::Acquired(Some(1_000)));
    calls(&mut e);
    e.advance(1).unwrap();
    assert_eq!(e.finish(1, true).unwrap(), Finish::Settled(Outcome::Value), "settles at once");
    assert!(calls(&mut e).is_empty(), "the lease stays here");
    e.advance(2).unwrap();
    assert_eq!(e.start(2, vec![lingering("k", 5)], OPTIONS).unwrap(), Start::Pending);
    let effects: Vec<Effect> = std::iter::from_fn(|| e.take_effect()).collect();
    assert_eq!(effects, vec![Effect::Run { exec: 2, token: 1_001 }], "granted in the call, no store call");
    assert_eq!(e.token(2), Some(1_001));
    assert_eq!(e.live_executions(), 1, "nothing kept besides");
}

#[test]
fn a_lingering_lease_nobody_asks_for_goes_back_to_the_store_after_the_linger() {
    let mut e = engine();
    assert_eq!(e.start(1, vec![lingering("k", 5)], OPTIONS).unwrap(), Start::Pending);
    let request = calls(&mut e)[0].0;
    e.answer(request, Answer::Acquired(Some(1_000)));
    calls(&mut e);
    let owner = e.layer_owner(1, 0).unwrap().to_owned();
    e.advance(1).unwrap();
    e.finish(1, true).unwrap();
    e.advance(4).unwrap();
    assert!(calls(&mut e).is_empty(), "kept for the linger");
    e.advance(1).unwrap();
    let released: Vec<(StoreMethod, String)> = std::iter::from_fn(|| e.take_effect())
        .filter_map(|fx| match fx {
            Effect::StoreCall { method, owner, handed_over: true, .. } => Some((method, owner)),
            _ => None,
        })
        .collect();
    assert_eq!(released, vec![(StoreMethod::Release, owner)], "released under its owner, at the linger's end");
    assert!(e.next_deadline().is_some(), "the release is awaited");
}

#[test]
fn a_linger_ends_with_the_turn() {
    let mut e = engine();
    assert_eq!(e.start(1, vec![lingering("k", TURN)], OPTIONS).unwrap(), Start::Pending);
    let request = calls(&mut e)[0].0;
    e.answer(request, Answer::Acquired(Some(1_000)));
    calls(&mut e);
    e.advance(8).unwrap();
    e.finish(1, true).unwrap();
    assert!(calls(&mut e).is_empty());
    e.advance(2).unwrap();
    assert_eq!(calls(&mut e).iter().map(|c| c.1).collect::<Vec<_>>(), vec![StoreMethod::Release], "at the turn's end");
}

#[test]
fn host_execution_ids_stay_below_the_engines_own() {
    let mut e = engine();
    assert!(e.start(1 << 31, vec![lock("k")], OPTIONS).is_err());
}

#[test]
fn the_first_waiter_behind_a_holder_here_still_polls_the_store() {
    let mut e = engine();
    take(&mut e, 1, "k", 1_000);
    assert_eq!(start(&mut e, 2, "k"), None);
    assert_eq!(start(&mut e, 3, "k"), None);
    e.advance(49).unwrap();
    assert!(calls(&mut e).is_empty());
    e.advance(1).unwrap();
    let polls = calls(&mut e);
    assert_eq!(polls.len(), 1, "only the first waiter polls: {polls:?}");
    assert_eq!(polls[0].1, StoreMethod::Acquire);
    assert_eq!(e.request_exec(polls[0].0), Some(2), "so a store that went away is found");
}

const MANUAL: ExecOptions = ExecOptions { renew: false, telemetry: false, manual: true };

/// A manual lease of `ttl` on "k" for `exec`, waiting; its acquire's request, if it asked.
fn start_manual(e: &mut Engine, exec: u32, ttl: Millis) -> Vec<(u32, StoreMethod, String, bool)> {
    let spec = LockSpec {
        store: EXT,
        key: "k".into(),
        ttl,
        wait: Some(5_000),
        linger: 0,
        name: String::new(),
        limit: 1,
        weight: 1,
    };
    e.start(exec, vec![spec], MANUAL).unwrap();
    calls(e)
}

#[test]
fn a_manual_lease_handed_over_renews_the_store_lease_to_its_own_ttl_at_once() {
    for (first_ttl, second_ttl) in [(30, 5_000), (3_000, 20)] {
        let mut e = engine();
        let asked = start_manual(&mut e, 1, first_ttl);
        e.answer(asked[0].0, Answer::Acquired(Some(1_000)));
        calls(&mut e);
        assert!(start_manual(&mut e, 2, second_ttl).is_empty(), "waits behind the holder here");
        e.advance(1).unwrap();
        assert_eq!(e.finish(1, true).unwrap(), Finish::Settled(Outcome::Value));
        assert_eq!(e.token(2), Some(1_001));
        // The store's lease is the first holder's: the new holder renews it to its own ttl.
        let renewed = calls(&mut e);
        assert_eq!(renewed.len(), 1, "{renewed:?}");
        let (request, method, _, handed_over) = renewed[0].clone();
        assert_eq!((method, handed_over), (StoreMethod::Renew, true));
        e.answer(request, Answer::Renewed(true));
        // Held for its own ttl from the handover, not the first holder's.
        e.advance(second_ttl - 1).unwrap();
        assert!(e.layer_held(2, 0), "{first_ttl} -> {second_ttl}: held to its own end");
        e.advance(1).unwrap();
        assert!(!e.layer_held(2, 0), "{first_ttl} -> {second_ttl}: over at its own end");
    }
}

#[test]
fn a_pipeline_handed_a_lease_of_its_own_ttl_makes_no_store_call() {
    let mut e = engine();
    take(&mut e, 1, "k", 1_000);
    assert_eq!(start(&mut e, 2, "k"), None);
    e.advance(1).unwrap();
    e.finish(1, true).unwrap();
    assert!(calls(&mut e).is_empty(), "same ttl, renewed every ttl/3 anyway: no store call");
}
