//! The memory stores' fast path, as the engine sees it: the words it shares with the
//! host (`crate::fast_words`), and the fast holds the host hands over.
//!
//! The host grants a memory-store key on its own when the key's bucket of busy words
//! reads 0 (the engine keeps no record of it and no execution under way will acquire
//! it), taking its token from the shared token word. Before any call that could touch that key (another execution on it, a direct
//! store call, a manual lease), it hands the hold over with [`Engine::adopt`]: from
//! then on the hold is an ordinary running execution of the engine, renewed, released
//! and handed to waiters like any other.

use std::rc::Rc;

use super::state::{at_mut, Exec, Held, Layer, LayerState, Phase};
use super::Engine;
use crate::error::{ArgError, LockError};
use crate::fast_words::FastWords;
use crate::polling::{renew_after, Backoff};
use crate::text::text;
use crate::types::{ExecOptions, LockSpec, StoreRef};
use crate::Millis;

impl Engine {
    /// The words shared with the host's fast path: the memory stores' token counter and
    /// the busy count of each bucket of keys.
    pub fn fast_words(&self) -> Rc<FastWords> {
        Rc::clone(&self.words)
    }

    /// Counts (`reserve`) or stops counting the keys on memory stores of every lock of
    /// an execution but its outermost, from its start to its end. The engine acquires
    /// those later, inside a call that names no key (the outer lock's grant, a timer, a
    /// store's answer), where the host could not hand a fast hold over first: their
    /// buckets must read busy, so that the host does not grant them meanwhile.
    pub(super) fn reserve_inner_locks(&self, layers: &[Layer], reserve: bool) {
        for layer in layers.iter().skip(1) {
            if let StoreRef::Memory(store) = layer.spec.store {
                if reserve {
                    self.words.mark(store, &layer.spec.key);
                } else {
                    self.words.unmark(store, &layer.spec.key);
                }
            }
        }
    }

    /// Takes over, as running execution `exec`, the lease on `spec` (a memory store's
    /// key) that the host granted on its fast path `held_for` milliseconds ago with
    /// `token`. The lease is where an engine-run execution's would be now: renewed every
    /// ttl/3 since it began (with `options.renew`), so its expiry and `ttl` read as if
    /// the engine had held it all along. The host settles the execution with
    /// [`Engine::finish`] as usual.
    ///
    /// # Errors
    /// An argument error for an id in use, a lock that is not on a live memory store, or
    /// a key the engine keeps a record of (the host broke the fast path's rule). Nothing
    /// is taken over then.
    pub fn adopt(
        &mut self,
        exec: u32,
        spec: LockSpec,
        options: ExecOptions,
        token: u64,
        held_for: Millis,
    ) -> Result<(), LockError> {
        self.tick();
        let now = self.time;
        if self.execs.contains_key(&exec) {
            return Err(ArgError::range("exec", text!("execution id ", exec, " is already in use")).into());
        }
        self.check_spec(&spec)?;
        let StoreRef::Memory(store) = spec.store else {
            return Err(ArgError::type_error("store", "only a memory store's lease can be adopted".into()).into());
        };
        if token > self.words.last_token() {
            return Err(ArgError::range("token", text!("token ", token, " was never granted")).into());
        }
        let since = now.saturating_sub(held_for);
        let ttl = spec.ttl;
        // The last renewal an engine-run execution would have made by now, and the next.
        let (renewed_at, renew_at) = if options.renew {
            let every = renew_after(ttl);
            let last = since + (now - since) / every * every;
            (last, Some(last.saturating_add(every)))
        } else {
            (since, None)
        };
        let expires_at = renewed_at.saturating_add(ttl);
        let mut layer = Layer::new(spec);
        self.owners.write_id(&mut layer.owner, &layer.spec.name);
        if !at_mut(&mut self.memory, store).adopt(&layer.spec.key, &layer.owner, token, expires_at, now) {
            return Err(ArgError::range(
                "key",
                text!(
                    "lock '",
                    layer.spec.key.as_str(),
                    "' has a lease in the engine: it was not granted on the fast path"
                ),
            )
            .into());
        }
        layer.token = Some(token);
        layer.started_at = since;
        layer.state = LayerState::Held(Held {
            expires_at,
            renew_at,
            in_flight: None,
            retry: Backoff::default(),
            extend_pending: 0,
            grant: None,
            linger_until: None,
        });
        self.execs
            .insert(exec, Exec { layers: vec![layer], options, phase: Phase::Running, lost: None, completion: None });
        self.arm_held(exec, 0);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::permits::TryAcquire;
    use crate::types::{Finish, Outcome, Start};

    fn lock(key: &str, ttl: Millis, wait: Option<Millis>) -> LockSpec {
        LockSpec {
            store: StoreRef::Memory(0),
            key: key.into(),
            ttl,
            wait,
            linger: 0,
            name: String::new(),
            limit: 1,
            weight: 1,
        }
    }

    const RENEW: ExecOptions = ExecOptions { renew: true, telemetry: false, manual: false };

    #[test]
    fn an_adopted_hold_reads_as_renewed_since_it_began_and_hands_over_in_order() {
        let mut e = Engine::with_fake_clock(0, [7; 32]);
        let words = e.fast_words();
        // The host's fast path: the key's bucket is free; it takes the next token.
        assert!(!words.is_busy(0, "k"));
        let fast = words.next_token();
        e.advance(2_500).unwrap();
        e.adopt(1, lock("k", 3_000, None), RENEW, fast, 2_500).unwrap();
        assert!(words.is_busy(0, "k"));
        // Renewed at 1000 and 2000: the lease runs to 5000.
        assert_eq!(e.memory_ttl(0, "k").unwrap(), Some(2_500));
        assert_eq!(e.start(2, vec![lock("k", 3_000, Some(10_000))], RENEW).unwrap(), Start::Pending);
        e.advance(1_000).unwrap();
        assert_eq!(e.memory_ttl(0, "k").unwrap(), Some(2_500), "renewed by the engine's timer at 3000");
        assert!(matches!(e.finish(1, true).unwrap(), Finish::Settled(Outcome::Value)));
        let granted = e.token(2).unwrap();
        assert!(granted > fast, "the engine's grant ({granted}) comes after the fast one ({fast})");
        assert!(matches!(e.finish(2, true).unwrap(), Finish::Settled(Outcome::Value)));
        assert!(!words.is_busy(0, "k"), "released and no waiter: the fast path may take it");
    }

    #[test]
    fn the_inner_locks_of_an_execution_read_busy_from_its_start_to_its_end() {
        let mut e = Engine::with_fake_clock(0, [7; 32]);
        let words = e.fast_words();
        assert!(matches!(e.memory_acquire(0, "outer", "someone", 1_000, 1, 1).unwrap(), TryAcquire::Acquired(_)));
        let locks = vec![lock("outer", 1_000, Some(5_000)), lock("inner", 1_000, Some(5_000))];
        assert_eq!(e.start(1, locks, RENEW).unwrap(), Start::Pending);
        assert!(words.is_busy(0, "inner"), "acquired later, in a call that names no key: the host must not grant it");
        assert!(e.cancel(1));
        assert!(!words.is_busy(0, "inner"), "the execution ended");
        let locks = vec![lock("a", 1_000, None), lock("b", 1_000, None)];
        assert!(matches!(e.start(2, locks, RENEW).unwrap(), Start::Running { .. }));
        assert!(matches!(e.finish(2, true).unwrap(), Finish::Settled(Outcome::Value)));
        assert!(!words.is_busy(0, "a") && !words.is_busy(0, "b"), "granted, released: nothing counts");
    }

    #[test]
    fn a_key_with_an_engine_lease_is_not_adopted() {
        let mut e = Engine::with_fake_clock(0, [7; 32]);
        assert!(matches!(e.memory_acquire(0, "k", "someone", 1_000, 1, 1).unwrap(), TryAcquire::Acquired(_)));
        let token = e.fast_words().next_token();
        assert!(e.adopt(1, lock("k", 1_000, None), RENEW, token, 0).is_err());
        assert!(e.adopt(1, lock("k2", 1_000, None), RENEW, token + 1, 0).is_err(), "a token never granted");
        assert_eq!(e.live_executions(), 0);
    }
}
