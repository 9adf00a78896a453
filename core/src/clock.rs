//! Time comes into the engine through [`Clock`]; the engine never reads a system clock.

use std::cell::Cell;
use std::fmt;
use std::rc::Rc;

use crate::Millis;

/// A source of monotonic time in whole milliseconds.
///
/// Hosts implement it over their own clock (`Instant` natively, `performance.now()` in
/// a browser). The engine asks for the time whenever it makes a decision; it never
/// sleeps. When to wake it up again is the host's business: it reads
/// [`Engine::next_deadline`](crate::Engine::next_deadline) and calls
/// [`Engine::run_due`](crate::Engine::run_due) at that time.
pub trait Clock {
    /// The current time. Must never go backwards.
    fn now(&self) -> Millis;

    /// The current time in microseconds, on the same clock as [`Clock::now`]. It bounds
    /// how many fencing tokens a process hands out locally (see `engine/handoff.rs`), so
    /// it must never run faster than real time; a clock of whole milliseconds keeps this
    /// default, which only hands out fewer.
    fn now_micros(&self) -> u64 {
        self.now().saturating_mul(1000)
    }
}

/// A clock that moves only when told to, for deterministic tests of locking code.
///
/// Clones share one time. An engine built with
/// [`Engine::with_fake_clock`](crate::Engine::with_fake_clock) runs every timer (polls,
/// renewals, expiries) on it as [`Engine::advance`](crate::Engine::advance) moves it.
#[derive(Clone, Default)]
pub struct FakeClock {
    now: Rc<Cell<Millis>>,
}

impl FakeClock {
    /// A fake clock that reads `start`.
    pub fn new(start: Millis) -> Self {
        FakeClock { now: Rc::new(Cell::new(start)) }
    }

    /// Moves the clock to `to`; a time in the past is ignored, so time never goes back.
    pub(crate) fn set(&self, to: Millis) {
        if to > self.now.get() {
            self.now.set(to);
        }
    }
}

impl Clock for FakeClock {
    fn now(&self) -> Millis {
        self.now.get()
    }
}

impl fmt::Debug for FakeClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FakeClock").field("now", &self.now.get()).finish()
    }
}
