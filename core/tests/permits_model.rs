//! Random interleavings of executions holding permits (weights on a key of limit 4,
//! readers and writers on a key used with modes), cancellations and time, checked
//! against what permits must be: never more weight inside than the limit, tokens that
//! rise with every grant, and waiters let in in arrival order.

use std::collections::{BTreeMap, HashMap};

use leasehold_core::{
    Effect, Engine, ExecOptions, LockSpec, Outcome, Start, StoreRef, DEFAULT_MEMORY_STORE, SHARED_LIMIT,
};
use proptest::prelude::*;

/// The keys: (name, limit).
const KEYS: [(&str, u32); 2] = [("sem", 4), ("rw", SHARED_LIMIT)];

#[derive(Debug, Clone)]
enum Op {
    /// `heavy` picks the weight: 1 to 4 on "sem"; a writer (all permits) on "rw".
    Start {
        key: usize,
        heavy: u32,
        ttl: u64,
        wait: Option<u64>,
        renew: bool,
    },
    Finish {
        nth: usize,
    },
    Cancel {
        nth: usize,
    },
    Advance(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..2usize, 0..4u32, 1..500u64, prop::option::of(0..800u64), any::<bool>())
            .prop_map(|(key, heavy, ttl, wait, renew)| Op::Start { key, heavy, ttl, wait, renew }),
        3 => any::<usize>().prop_map(|nth| Op::Finish { nth }),
        1 => any::<usize>().prop_map(|nth| Op::Cancel { nth }),
        3 => (0..400u64).prop_map(Op::Advance),
    ]
}

fn weight_of(key: usize, heavy: u32) -> u32 {
    match key {
        0 => heavy + 1,
        _ if heavy == 3 => SHARED_LIMIT,
        _ => 1,
    }
}

#[derive(Default)]
struct Model {
    /// exec -> (key, weight)
    running: BTreeMap<u32, (usize, u32)>,
    /// exec -> (key, weight), in arrival order (exec ids rise).
    waiting: BTreeMap<u32, (usize, u32)>,
    last_token: HashMap<usize, u64>,
}

impl Model {
    fn granted(&mut self, exec: u32, token: u64) -> Result<(), TestCaseError> {
        let (key, weight) = self.waiting.remove(&exec).expect("granted a waiter");
        // Nobody who came earlier for the key still waits: first come, first in.
        let earlier = self.waiting.iter().find(|(e, (k, _))| **e < exec && *k == key);
        prop_assert!(earlier.is_none(), "{exec} let in before {earlier:?}");
        let last = self.last_token.insert(key, token).unwrap_or(0);
        prop_assert!(token > last, "token {token} after {last} on key {key}");
        self.running.insert(exec, (key, weight));
        Ok(())
    }
}

fn apply_effects(engine: &mut Engine, model: &mut Model) -> Result<(), TestCaseError> {
    let effects: Vec<Effect> = std::iter::from_fn(|| engine.take_effect()).collect();
    // A waiter that gave up left its queue in the same step as the grant it let through:
    // its settlement may come after that run.
    for effect in &effects {
        if let Effect::Settled { exec, outcome: Outcome::Error(_) } = effect {
            model.waiting.remove(exec);
        }
    }
    for effect in effects {
        match effect {
            Effect::Run { exec, token } => model.granted(exec, token)?,
            Effect::Settled { exec, outcome } => {
                if model.running.remove(&exec).is_some() {
                    // A manual lease that lapsed unreleased is wound down by the engine.
                    prop_assert_eq!(outcome, Outcome::NotHeld);
                    continue;
                }
                prop_assert!(matches!(outcome, Outcome::Error(_)), "{:?}", outcome);
            }
            Effect::StoreCall { .. } | Effect::Watch { .. } | Effect::Extended { .. } => {
                panic!("no external store here")
            }
            Effect::Lost { .. } | Effect::Event { .. } => {}
        }
    }
    Ok(())
}

/// The weight the live runners of each key hold together stays within its limit.
fn check(engine: &Engine, model: &Model) -> Result<(), TestCaseError> {
    for (k, (name, limit)) in KEYS.iter().enumerate() {
        let inside: u64 = model
            .running
            .iter()
            .filter(|(exec, (key, _))| *key == k && engine.layer_held(**exec, 0))
            .map(|(_, (_, w))| u64::from(*w))
            .sum();
        prop_assert!(inside <= u64::from(*limit), "{} holds {} of {}", name, inside, limit);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn random_interleavings_keep_the_permit_rules(ops in prop::collection::vec(op(), 1..120)) {
        let mut engine = Engine::with_fake_clock(0, [5; 32]);
        let mut model = Model::default();
        let mut next_exec = 0u32;
        for op in ops {
            match op {
                Op::Start { key, heavy, ttl, wait, renew } => {
                    next_exec += 1;
                    let (name, limit) = KEYS[key];
                    let weight = weight_of(key, heavy);
                    let spec = LockSpec {
                        store: StoreRef::Memory(DEFAULT_MEMORY_STORE),
                        key: name.into(),
                        ttl,
                        wait,
                        linger: 0,
                        name: String::new(),
                        limit,
                        weight,
                    };
                    model.waiting.insert(next_exec, (key, weight));
                    let options = ExecOptions { renew, telemetry: false, manual: !renew };
                    if let Start::Running { token } = engine.start(next_exec, vec![spec], options).unwrap() {
                        model.granted(next_exec, token)?;
                    }
                }
                Op::Finish { nth } => {
                    if let Some(&exec) = model.running.keys().nth(nth % model.running.len().max(1)) {
                        model.running.remove(&exec);
                        let finish = engine.finish(exec, true).unwrap();
                        prop_assert!(matches!(finish, leasehold_core::Finish::Settled(_)));
                    }
                }
                Op::Cancel { nth } => {
                    if let Some(&exec) = model.waiting.keys().nth(nth % model.waiting.len().max(1)) {
                        prop_assert!(engine.cancel(exec));
                        // Out of the queue at once; settled in a later effect.
                        model.waiting.remove(&exec);
                    }
                }
                Op::Advance(ms) => engine.advance(ms).unwrap(),
            }
            apply_effects(&mut engine, &mut model)?;
            check(&engine, &model)?;
        }
    }
}
