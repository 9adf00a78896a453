//! Times the uncontended memory-store path of the engine alone, without any binding:
//! `cargo run --release -p leasehold-core --example hot_path`.
use std::time::Instant;

use leasehold_core::{Clock, Engine, ExecOptions, LockSpec, Millis, StoreRef, DEFAULT_MEMORY_STORE};

struct Monotonic(Instant);
impl Clock for Monotonic {
    fn now(&self) -> Millis {
        self.0.elapsed().as_millis() as Millis
    }
}

fn main() {
    let mut engine = Engine::new(Box::new(Monotonic(Instant::now())), [7; 32]);
    let n = 2_000_000u32;
    for round in 0..3 {
        let started = Instant::now();
        for exec in 1..=n {
            let spec = LockSpec {
                store: StoreRef::Memory(DEFAULT_MEMORY_STORE),
                key: "k".into(),
                ttl: 30_000,
                wait: Some(0),
                linger: 0,
                name: String::new(),
                limit: 1,
                weight: 1,
            };
            engine.start(exec, vec![spec], ExecOptions::default()).expect("starts");
            let _ = engine.host_timer();
            engine.finish(exec, true).expect("finishes");
            let _ = engine.host_timer();
        }
        let per = started.elapsed().as_nanos() as f64 / f64::from(n);
        #[allow(clippy::print_stdout)]
        {
            println!("round {round}: {per:.0} ns per start+finish");
        }
    }
}
