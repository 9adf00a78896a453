//! Executions as the host drives them: start, finish, cancel, store answers, queries.

use super::handoff::is_parked;
use super::state::TryResult;
use super::state::{at, at_mut, Exec, Layer, LayerState, Origin, Phase};
use super::Engine;
use crate::error::{ArgError, LockError, StoreFailure, StoreMethod};
use crate::text::text;
use crate::types::{Answer, Effect, Event, ExecOptions, Finish, LockSpec, Outcome, Start, StoreRef};

impl Engine {
    /// Starts execution `exec` (an id the host chooses, unique among live executions and
    /// below 2^31: the engine numbers its own above) under `locks`, outermost first.
    ///
    /// # Errors
    /// An argument error for no locks, an empty key, a zero ttl, an unknown memory
    /// store, or an id already in use. Nothing is started then.
    pub fn start(&mut self, exec: u32, locks: Vec<LockSpec>, options: ExecOptions) -> Result<Start, LockError> {
        self.tick();
        if locks.is_empty() {
            return Err(
                ArgError::type_error("locks", "locks must name at least one lock for an execution".into()).into()
            );
        }
        if self.execs.contains_key(&exec) || is_parked(exec) {
            return Err(ArgError::range("exec", text!("execution id ", exec, " is already in use")).into());
        }
        for spec in &locks {
            self.check_spec(spec)?;
        }
        let layers = locks.into_iter().map(Layer::new).collect();
        Ok(self.start_layers(exec, layers, options))
    }

    /// Starts `exec` on checked layers, fresh or reused.
    pub(super) fn start_layers(&mut self, exec: u32, layers: Vec<Layer>, options: ExecOptions) -> Start {
        if layers.len() > 1 {
            self.reserve_inner_locks(&layers, true);
        }
        self.execs.insert(exec, Exec { layers, options, phase: Phase::Acquiring, lost: None, completion: None });
        self.begin_layer(exec, 0);
        // Granted in the call: on a memory store, or a JS store's lease parked here,
        // whose token (too large to ride in a status word) comes with the `run` effect.
        let in_memory = self.holders.is_empty()
            || self
                .execs
                .get(&exec)
                .and_then(|e| e.layers.last())
                .is_some_and(|l| matches!(l.spec.store, StoreRef::Memory(_)));
        if in_memory && matches!(self.effects.back(), Some(Effect::Run { exec: e, .. }) if *e == exec) {
            let Some(Effect::Run { token, .. }) = self.effects.pop_back() else { return Start::Pending };
            return Start::Running { token };
        }
        Start::Pending
    }

    /// Defines a lock once, so that executions on it pass only its id
    /// ([`Engine::start_defined`]) instead of its key and options every time. Defining
    /// the same lock again gives the same id. `None` while
    /// [`MAX_DEFINED_LOCKS`](crate::MAX_DEFINED_LOCKS) other locks are defined: pass the
    /// lock to [`Engine::start`] then. Each definition holds the lock (its key's memory
    /// included) until it is let go of with [`Engine::undefine_lock`].
    ///
    /// # Errors
    /// The argument errors of [`Engine::start`].
    pub fn define_lock(&mut self, spec: LockSpec) -> Result<Option<u32>, LockError> {
        self.check_spec(&spec)?;
        Ok(self.defined.define(spec))
    }

    /// Lets go of one definition of lock `id` (its holder, a pipeline, is gone); the last
    /// one frees the lock and its id. Executions already started on it are not touched.
    /// False for an id that is not defined.
    pub fn undefine_lock(&mut self, id: u32) -> bool {
        self.defined.undefine(id)
    }

    /// How many distinct locks are defined, for memory tests.
    pub fn defined_locks(&self) -> usize {
        self.defined.len()
    }

    /// [`Engine::start`] under one lock defined by [`Engine::define_lock`].
    ///
    /// # Errors
    /// An argument error for an unknown lock id, and those of [`Engine::start`].
    pub fn start_defined(&mut self, exec: u32, lock: u32, options: ExecOptions) -> Result<Start, LockError> {
        self.tick();
        if self.execs.contains_key(&exec) || is_parked(exec) {
            return Err(ArgError::range("exec", text!("execution id ", exec, " is already in use")).into());
        }
        let Some(spec) = self.defined.get(lock) else {
            return Err(ArgError::range("lock", text!("lock ", lock, " is not defined")).into());
        };
        // A defined lock was checked when it was defined (a memory store is dropped only
        // once nothing uses it, the pipeline of this lock included). The layer of a
        // finished execution is reused: its key and owner strings keep their memory.
        let layers = match self.spare_layers.pop() {
            Some(mut layers) => {
                at_mut(&mut layers, 0).reset(spec);
                layers
            }
            None => vec![Layer::new(spec.clone())],
        };
        Ok(self.start_layers(exec, layers, options))
    }

    /// Checks a lock: a key, a positive ttl, a live memory store.
    pub(super) fn check_spec(&mut self, spec: &LockSpec) -> Result<(), LockError> {
        if spec.key.is_empty() {
            return Err(ArgError::type_error("key", "key must be a non-empty string, got ''".into()).into());
        }
        if spec.ttl == 0 {
            return Err(ArgError::range("ttl", "ttl must be positive, got 0".into()).into());
        }
        if let StoreRef::Memory(id) = spec.store {
            self.memory_store(id)?;
        }
        Ok(())
    }

    /// The callback of `exec` settled (`ok`: it succeeded), or a manual lease is
    /// released. Releases every lease, innermost first, then settles.
    ///
    /// # Errors
    /// An argument error when `exec` is not running.
    pub fn finish(&mut self, exec: u32, ok: bool) -> Result<Finish, LockError> {
        self.tick();
        let now = self.time;
        let not_running = || LockError::from(ArgError::range("exec", text!("execution ", exec, " is not running")));
        let Some(e) = self.execs.get(&exec) else { return Err(not_running()) };
        // A manual lease lost or lapsed is wound down on its own (see `lose`): a release()
        // that comes meanwhile waits for that settlement.
        if e.options.manual && e.phase == Phase::Releasing {
            return Ok(Finish::Pending);
        }
        if e.phase != Phase::Running {
            return Err(not_running());
        }
        // A callback that kept the host busy past its lease's expiry settles before the
        // expiry timer can fire: the loss is found here instead, as that timer would have.
        // (A manual lease's release() after a lapse answers false without this: its
        // release finds the lease lapsed.)
        let lapsed = |state: &LayerState| matches!(state, LayerState::Held(h) if h.expires_at <= now);
        if !e.options.manual && e.layers.iter().any(|l| lapsed(&l.state)) {
            // Losing one lock leaves the others' states as they are.
            for layer in 0..e.layers.len() as u32 {
                if self.layer_mut(exec, layer).is_some_and(|l| lapsed(&l.state)) {
                    self.lose(exec, layer, false);
                }
            }
        }
        let outcome = {
            let Some(e) = self.execs.get(&exec) else { return Err(not_running()) };
            match (ok, e.lost) {
                (true, _) => Outcome::Value,
                (false, Some(layer)) => Outcome::Error(LockError::Lost { key: at(&e.layers, layer).spec.key.clone() }),
                (false, None) => Outcome::CallbackError,
            }
        };
        self.wind_down(exec, outcome);
        if matches!(self.effects.back(), Some(Effect::Settled { exec: e, .. }) if *e == exec) {
            if let Some(Effect::Settled { outcome, .. }) = self.effects.pop_back() {
                return Ok(Finish::Settled(outcome));
            }
        }
        Ok(Finish::Pending)
    }

    /// The caller cancelled `exec` before its callback started. While it waits or
    /// acquires, and once granted until the host starts its callback (only the host
    /// knows when that is: it must not cancel after), it leaves the queue, releases what
    /// it holds and settles with [`LockError::Cancelled`], whatever befell its leases
    /// meanwhile (a loss included): its callback never runs. Returns false (and does
    /// nothing) once it is releasing; passing an abort on to a running callback is the
    /// host's part.
    pub fn cancel(&mut self, exec: u32) -> bool {
        self.tick();
        match self.execs.get(&exec) {
            Some(e) if e.phase != Phase::Releasing => {
                let now = self.time;
                let acquiring = e.layers.iter().position(|l| matches!(l.state, LayerState::Acquiring(_)));
                if let Some(layer) = acquiring {
                    let waited = now.saturating_sub(at(&e.layers, layer as u32).started_at);
                    self.event(exec, layer as u32, Event::Cancelled { waited });
                }
                self.wind_down(exec, Outcome::Error(LockError::Cancelled));
                true
            }
            _ => false,
        }
    }

    /// The fencing token of the innermost lock `exec` holds.
    pub fn token(&self, exec: u32) -> Option<u64> {
        let e = self.execs.get(&exec)?;
        e.layers.iter().rev().find_map(|l| l.token)
    }

    /// The fencing token of lock `layer` of `exec`, once granted.
    pub fn layer_token(&self, exec: u32, layer: u32) -> Option<u64> {
        self.execs.get(&exec)?.layers.get(layer as usize)?.token
    }

    /// The owner id under which lock `layer` of `exec` is (being) acquired.
    pub fn layer_owner(&self, exec: u32, layer: u32) -> Option<&str> {
        let l = self.execs.get(&exec)?.layers.get(layer as usize)?;
        (!l.owner.is_empty()).then_some(l.owner.as_str())
    }

    /// The key of lock `layer` of `exec`.
    pub fn layer_key(&self, exec: u32, layer: u32) -> Option<&str> {
        Some(self.execs.get(&exec)?.layers.get(layer as usize)?.spec.key.as_str())
    }

    /// Whether lock `layer` of a live execution is held now: granted, not lost, and
    /// not lapsed (a lease without renewal lapses at its expiry).
    pub fn layer_held(&self, exec: u32, layer: u32) -> bool {
        let now = self.clock.now().max(self.time);
        self.execs
            .get(&exec)
            .and_then(|e| e.layers.get(layer as usize))
            .is_some_and(|l| matches!(&l.state, LayerState::Held(h) if h.expires_at > now))
    }

    /// Executions the engine is tracking.
    pub fn live_executions(&self) -> usize {
        self.execs.len()
    }

    /// Store requests still awaiting an answer (including abandoned ones).
    pub fn open_requests(&self) -> usize {
        self.requests.len()
    }

    /// A store answered `request`. Answers to unknown requests are ignored; answers to
    /// abandoned ones are ignored too, except that a lease granted too late is released.
    pub fn answer(&mut self, request: u32, answer: Answer) {
        self.tick();
        let Some(req) = self.requests.remove(&request) else { return };
        let (exec, layer) = match req.origin {
            Origin::Layer { exec, layer } => (exec, layer),
            Origin::Abandoned { .. } => {
                // A lease in the answer, or a failure that may hide one (see `on_try`).
                if let Answer::Acquired(Some(_)) | Answer::Failed(_) = answer {
                    self.release_late_grant(req);
                }
                return;
            }
        };
        match req.method {
            StoreMethod::Acquire => {
                if let Some(a) = self.acquiring_mut(exec, layer) {
                    a.in_flight = None;
                }
                // Answered after the lease it would give ran out (the host was busy and
                // the timeout timer has not run yet): as worthless as no answer.
                if self.time >= req.sent_at.saturating_add(req.ttl) {
                    let (sent_at, ttl) = (req.sent_at, req.ttl);
                    if let Answer::Acquired(Some(_)) = answer {
                        self.requests.insert(request, req);
                        self.abandon(request);
                        if let Some(late) = self.requests.remove(&request) {
                            self.release_late_grant(late);
                        }
                    }
                    self.on_try(exec, layer, sent_at, TryResult::Failed(StoreFailure::TimedOut { after_ms: ttl }));
                    return;
                }
                let result = match answer {
                    Answer::Acquired(Some(token)) => TryResult::Granted(token),
                    Answer::Acquired(None) => TryResult::Held { until: None },
                    Answer::LimitMismatch(limit) => TryResult::Mismatch { limit },
                    Answer::Failed(failure) => TryResult::Failed(failure),
                    other => TryResult::Failed(StoreFailure::BadAnswer(text!(
                        "expected an acquire answer, got ",
                        other.kind()
                    ))),
                };
                self.on_try(exec, layer, req.sent_at, result);
            }
            StoreMethod::Renew => {
                let result = match answer {
                    Answer::Renewed(ok) => Ok(ok),
                    Answer::Failed(failure) => Err(failure),
                    other => Err(StoreFailure::BadAnswer(text!("expected a renew answer, got ", other.kind()))),
                };
                self.on_renew(exec, layer, req.sent_at, req.ttl, result);
            }
            StoreMethod::Release => {
                let result = match answer {
                    Answer::Failed(failure) => Err(failure),
                    Answer::Released(said) => Ok(said),
                    _ => Ok(None),
                };
                self.on_release(exec, layer, result);
            }
        }
    }
}
