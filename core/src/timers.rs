//! The engine's timers: one queue per engine, at most one live timer per lock layer.
//! Each live timer says whether it keeps the process alive: whether something anyone
//! waits for (a waiter's try or deadline, a store's answer) happens when it fires.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::Millis;

/// What a timer wakes: layer `layer` of execution `exec`, if it still carries `generation`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct TimerTarget {
    pub exec: u32,
    pub layer: u32,
    pub generation: u32,
}

/// A min-heap of deadlines with lazy cancellation: a layer that re-arms or disarms its
/// timer bumps its generation, and entries with an old generation are skipped when
/// they come out. The heap is rebuilt when stale entries outnumber live ones, so it
/// stays proportional to the number of live timers however many come and go.
#[derive(Debug, Default)]
pub(crate) struct TimerQueue {
    heap: BinaryHeap<Reverse<(Millis, u64, TimerTarget)>>,
    sequence: u64,
    live: usize,
    /// Live timers that keep the process alive.
    keeping_alive: usize,
}

impl TimerQueue {
    pub fn push(&mut self, at: Millis, target: TimerTarget, keeps_alive: bool) {
        self.sequence += 1;
        self.heap.push(Reverse((at, self.sequence, target)));
        self.live += 1;
        self.keeping_alive += usize::from(keeps_alive);
    }

    /// A live timer now keeps the process alive, or no longer does.
    pub fn keep_alive_changed(&mut self, keeps_alive: bool) {
        if keeps_alive {
            self.keeping_alive += 1;
        } else {
            self.keeping_alive -= 1;
        }
    }

    /// A live timer was cancelled (its generation bumped) without being popped.
    pub fn cancelled(&mut self, kept_alive: bool, is_live: impl Fn(&TimerTarget) -> bool) {
        self.live -= 1;
        self.keeping_alive -= usize::from(kept_alive);
        if self.live == 0 {
            self.heap.clear();
        } else if self.heap.len() > 2 * self.live + 32 {
            self.heap.retain(|Reverse((_, _, target))| is_live(target));
        }
    }

    /// The earliest entry, live or stale.
    pub fn peek(&self) -> Option<(Millis, TimerTarget)> {
        self.heap.peek().map(|Reverse((at, _, target))| (*at, *target))
    }

    /// Removes the earliest entry; `was_live` says whether it counted as live, and
    /// `kept_alive` whether it kept the process alive.
    pub fn pop(&mut self, was_live: bool, kept_alive: bool) {
        self.heap.pop();
        if was_live {
            self.live -= 1;
            self.keeping_alive -= usize::from(kept_alive);
        }
    }

    pub fn live(&self) -> usize {
        self.live
    }

    /// Whether any live timer keeps the process alive.
    pub fn keeps_alive(&self) -> bool {
        self.keeping_alive > 0
    }
}
