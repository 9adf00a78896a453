//! The schedules: how often a waiter polls, when a holder renews, how a failed renewal
//! is retried.

use crate::Millis;

/// The first poll delay for a held lock.
pub const FIRST_POLL_MS: Millis = 50;
/// The longest poll delay: the delay doubles from [`FIRST_POLL_MS`] up to this.
pub const MAX_POLL_MS: Millis = 1_000;

/// A delay that starts at 50 ms and doubles on every use, up to 1 s. Waiters poll on
/// it; holders retry a failed renewal on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    next: Millis,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff { next: FIRST_POLL_MS }
    }
}

impl Backoff {
    /// The delay to use now; the following one is twice as long, up to the cap.
    pub fn next_delay(&mut self) -> Millis {
        let delay = self.next;
        self.next = (self.next * 2).min(MAX_POLL_MS);
        delay
    }
}

/// When a lease of length `ttl` is renewed: every ttl/3 (at least 1 ms after the last
/// grant, so a tiny ttl cannot make the engine spin).
pub fn renew_after(ttl: Millis) -> Millis {
    (ttl / 3).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_50ms_to_1s() {
        let mut b = Backoff::default();
        let delays: Vec<_> = (0..8).map(|_| b.next_delay()).collect();
        assert_eq!(delays, [50, 100, 200, 400, 800, 1000, 1000, 1000]);
    }

    #[test]
    fn renewal_is_a_third_of_the_ttl_and_never_zero() {
        assert_eq!(renew_after(30_000), 10_000);
        assert_eq!(renew_after(3_000), 1_000);
        assert_eq!(renew_after(2), 1);
    }
}
