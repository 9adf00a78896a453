//! Random interleavings of executions, direct store calls, cancellations and time,
//! checked against a simple model of what a lock must be.

use std::collections::{BTreeMap, HashMap, HashSet};

use leasehold_core::{Effect, Engine, ExecOptions, LockSpec, Outcome, Start, StoreRef, DEFAULT_MEMORY_STORE};
use proptest::prelude::*;

const KEYS: [&str; 3] = ["a", "b", "c"];

#[derive(Debug, Clone)]
enum Op {
    Start { key: usize, ttl: u64, wait: Option<u64>, renew: bool },
    Finish { nth: usize, ok: bool },
    Cancel { nth: usize },
    Advance(u64),
    DirectAcquire { key: usize, ttl: u64 },
    DirectRelease { nth: usize },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..3usize, 1..500u64, prop::option::of(0..800u64), any::<bool>())
            .prop_map(|(key, ttl, wait, renew)| Op::Start { key, ttl, wait, renew }),
        3 => (any::<usize>(), any::<bool>()).prop_map(|(nth, ok)| Op::Finish { nth, ok }),
        1 => any::<usize>().prop_map(|nth| Op::Cancel { nth }),
        3 => (0..400u64).prop_map(Op::Advance),
        1 => (0..3usize, 1..300u64).prop_map(|(key, ttl)| Op::DirectAcquire { key, ttl }),
        1 => any::<usize>().prop_map(|nth| Op::DirectRelease { nth }),
    ]
}

#[derive(Default)]
struct Model {
    running: BTreeMap<u32, (usize, u64)>, // exec -> (key, token)
    waiting: BTreeMap<u32, usize>,
    direct: Vec<(usize, String)>,
    last_token: HashMap<usize, u64>,
    manual: HashSet<u32>,
}

impl Model {
    fn granted(&mut self, exec: u32, key: usize, token: u64) {
        let last = self.last_token.insert(key, token).unwrap_or(0);
        assert!(token > last, "token {token} after {last} on key {key}");
        self.waiting.remove(&exec);
        self.running.insert(exec, (key, token));
    }
}

fn apply_effects(engine: &mut Engine, model: &mut Model) {
    while let Some(effect) = engine.take_effect() {
        match effect {
            Effect::Run { exec, token } => {
                let key = model.waiting[&exec];
                // The token comes with the grant: a manual lease over before the grant was
                // taken is no longer in the engine.
                assert!(engine.token(exec).is_none_or(|t| t == token));
                model.granted(exec, key, token);
            }
            Effect::Settled { exec, outcome } => {
                if model.running.contains_key(&exec) {
                    // A manual lease that lapsed unreleased is wound down by the engine.
                    assert!(model.manual.contains(&exec), "settled while running: {outcome:?}");
                    assert_eq!(outcome, Outcome::NotHeld);
                    assert!(!engine.layer_held(exec, 0));
                    model.running.remove(&exec);
                    continue;
                }
                assert!(model.waiting.remove(&exec).is_some(), "settled twice or unknown");
                assert!(matches!(outcome, Outcome::Error(_)), "{outcome:?}");
            }
            Effect::StoreCall { .. } | Effect::Watch { .. } | Effect::Extended { .. } => {
                panic!("no external store here")
            }
            Effect::Lost { .. } | Effect::Event { .. } => {}
        }
    }
}

fn check(engine: &mut Engine, model: &Model) {
    let now = engine.now();
    // Never two live holders of one key: the engine's runners whose leases are live,
    // plus direct owners with live leases, at most one per key.
    for (k, key) in KEYS.iter().enumerate() {
        let live_runners: Vec<_> =
            model.running.iter().filter(|(exec, (kk, _))| *kk == k && engine.layer_held(**exec, 0)).collect();
        assert!(live_runners.len() <= 1, "two holders of {key} at {now}: {live_runners:?}");
        let held = engine.memory_ttl(DEFAULT_MEMORY_STORE, key).unwrap().is_some();
        if !live_runners.is_empty() {
            assert!(held, "a runner holds {key} but the store says it is free");
        }
    }
    let expected_size = KEYS
        .iter()
        .enumerate()
        .filter(|(k, key)| {
            engine.memory_ttl(DEFAULT_MEMORY_STORE, key).unwrap().is_some() || model.waiting.values().any(|w| w == k)
        })
        .count();
    assert_eq!(engine.memory_size(DEFAULT_MEMORY_STORE).unwrap(), expected_size);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn random_interleavings_keep_the_lock_rules(ops in prop::collection::vec(op(), 1..120)) {
        let mut engine = Engine::with_fake_clock(0, [9; 32]);
        let mut model = Model::default();
        let mut next_exec = 0u32;
        let mut owners = 0u32;
        for op in ops {
            match op {
                Op::Start { key, ttl, wait, renew } => {
                    next_exec += 1;
                    let spec = LockSpec { store: StoreRef::Memory(DEFAULT_MEMORY_STORE), key: KEYS[key].into(), ttl, wait, linger: 0, name: String::new(), limit: 1, weight: 1 };
                    model.waiting.insert(next_exec, key);
                    let options = ExecOptions { renew, telemetry: false, manual: !renew };
                    if !renew {
                        model.manual.insert(next_exec);
                    }
                    if let Start::Running { token } = engine.start(next_exec, vec![spec], options).unwrap() {
                        model.granted(next_exec, key, token);
                    }
                }
                Op::Finish { nth, ok } => {
                    if let Some(&exec) = model.running.keys().nth(nth % model.running.len().max(1)) {
                        model.running.remove(&exec);
                        // The engine settles synchronously on the memory store.
                        let finish = engine.finish(exec, ok).unwrap();
                        prop_assert!(matches!(finish, leasehold_core::Finish::Settled(_)));
                    }
                }
                Op::Cancel { nth } => {
                    if let Some(&exec) = model.waiting.keys().nth(nth % model.waiting.len().max(1)) {
                        prop_assert!(engine.cancel(exec));
                    }
                }
                Op::Advance(ms) => engine.advance(ms).unwrap(),
                Op::DirectAcquire { key, ttl } => {
                    owners += 1;
                    let owner = format!("direct-{owners}");
                    if let leasehold_core::TryAcquire::Acquired(token) = engine.memory_acquire(DEFAULT_MEMORY_STORE, KEYS[key], &owner, ttl, 1, 1).unwrap() {
                        let last = model.last_token.insert(key, token).unwrap_or(0);
                        prop_assert!(token > last);
                        // A direct owner never coexists with a live runner.
                        prop_assert!(!model.running.iter().any(|(e, (k, _))| *k == key && engine.layer_held(*e, 0)));
                        model.direct.push((key, owner));
                    }
                }
                Op::DirectRelease { nth } => {
                    if !model.direct.is_empty() {
                        let (key, owner) = model.direct.remove(nth % model.direct.len());
                        engine.memory_release(DEFAULT_MEMORY_STORE, KEYS[key], &owner).unwrap();
                    }
                }
            }
            apply_effects(&mut engine, &mut model);
            check(&mut engine, &model);
        }
    }
}
