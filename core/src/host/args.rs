//! Lock arguments and options from host numbers, checked: a bad one is an argument
//! error that names it, never a panic.

use super::{exec_option, status, store_kind, LINGER_UNIT};
use crate::duration;
use crate::engine::Engine;
use crate::error::{ArgError, LockError};
use crate::text::text;
use crate::types::{LockSpec, StoreRef, Wake};
use crate::Millis;

/// Execution options from the host's bits ([`exec_option`]).
pub fn exec_options(bits: u32) -> crate::ExecOptions {
    crate::ExecOptions {
        renew: bits & exec_option::RENEW != 0,
        telemetry: bits & exec_option::TELEMETRY != 0,
        manual: bits & exec_option::MANUAL != 0,
    }
}

/// A store reference from the host's kind and id.
///
/// # Errors
/// An argument error for an unknown store kind.
pub fn store_ref(kind: u32, store: u32) -> Result<StoreRef, LockError> {
    Ok(match kind {
        store_kind::MEMORY => StoreRef::Memory(store),
        store_kind::POLLED => StoreRef::External { id: store, wake: Wake::Poll },
        store_kind::ANNOUNCING => StoreRef::External { id: store, wake: Wake::Announce },
        store_kind::GRANTING => StoreRef::External { id: store, wake: Wake::Grant },
        other => return Err(ArgError::type_error("store", text!("store kind ", other, " is unknown")).into()),
    })
}

/// Hands a store's grant ([`Engine::granted`]) to the engine, from host numbers, and
/// returns [`status::GRANT_CLAIMED`] when the engine claimed it (else 0): the
/// token must be a non-negative safe integer, the age a number of milliseconds (rounded
/// up: the lease is taken to be older, never younger; negative: unknown).
///
/// # Errors
/// An argument error for an unknown store kind, a bad token or a bad age.
pub fn granted(
    engine: &mut Engine,
    kind: u32,
    store: u32,
    key: &str,
    owner: &str,
    token: f64,
    age: f64,
) -> Result<u32, LockError> {
    let store = store_ref(kind, store)?;
    if !((0.0..=MAX_SAFE_INTEGER).contains(&token) && token.fract() == 0.0) {
        return Err(ArgError::range(
            "fencingToken",
            "a grant's fencingToken must be a non-negative safe integer".into(),
        )
        .into());
    }
    if age.is_nan() {
        return Err(ArgError::range("age", "a grant's age must be a number of milliseconds".into()).into());
    }
    let age = (age >= 0.0).then(|| age.ceil().min(u64::MAX as f64) as Millis);
    let claimed = engine.granted(store, key, owner, token as u64, age);
    Ok(if claimed { status::GRANT_CLAIMED } else { 0 })
}

/// 2^53 - 1: the largest integer every JavaScript number holds exactly.
const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

/// Builds a lock from host numbers. `wait` is milliseconds, or negative for "as long as
/// it takes".
///
/// `limit` and `weight`: the lock's permits (1 and 1 for an exclusive lock; the host
/// gives a lock with a `mode` [`crate::permits::SHARED_LIMIT`] permits).
///
/// # Errors
/// An argument error for an unknown store kind, an empty key, a ttl of zero, or a
/// weight outside 1..=limit.
#[allow(clippy::too_many_arguments)]
pub fn lock_spec(
    kind: u32,
    store: u32,
    key: String,
    ttl: f64,
    wait: f64,
    name: String,
    limit: u32,
    weight: u32,
) -> Result<LockSpec, LockError> {
    let (kind, linger) = (kind % LINGER_UNIT, Millis::from(kind / LINGER_UNIT));
    let store = store_ref(kind, store)?;
    let ttl = duration::from_millis(ttl, "ttl")?;
    if ttl == 0 {
        return Err(ArgError::range("ttl", "ttl must be positive, got 0".into()).into());
    }
    let wait = if wait < 0.0 { None } else { Some(duration::from_millis(wait, "wait")?) };
    if limit == 0 {
        return Err(ArgError::range("limit", "limit must be at least 1, got 0".into()).into());
    }
    if weight == 0 || weight > limit {
        return Err(
            ArgError::range("weight", text!("weight must be from 1 to the limit (", limit, "), got ", weight)).into()
        );
    }
    Ok(LockSpec { store, key, ttl, wait, linger, name, limit, weight })
}

/// The outer locks of an execution being started, which hosts pass one call at a time
/// (`addLock` for each outer lock, then `start` with the innermost one).
#[derive(Debug, Default)]
pub struct PendingLocks {
    outer: Vec<LockSpec>,
}

impl PendingLocks {
    /// Adds an outer lock for the next [`PendingLocks::start`].
    ///
    /// # Errors
    /// The argument errors of [`lock_spec`]; the locks added so far are then forgotten,
    /// so a pipeline whose locks failed to convert starts nothing.
    #[allow(clippy::too_many_arguments)]
    pub fn add(
        &mut self,
        kind: u32,
        store: u32,
        key: String,
        ttl: f64,
        wait: f64,
        name: String,
        limit: u32,
        weight: u32,
    ) -> Result<(), LockError> {
        match lock_spec(kind, store, key, ttl, wait, name, limit, weight) {
            Ok(spec) => {
                self.outer.push(spec);
                Ok(())
            }
            Err(err) => {
                self.outer.clear();
                Err(err)
            }
        }
    }

    /// Starts `exec` under the outer locks added so far plus this innermost one, with
    /// host option bits ([`exec_options`]).
    ///
    /// # Errors
    /// The argument errors of [`lock_spec`] and [`Engine::start`].
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        &mut self,
        engine: &mut Engine,
        exec: u32,
        options: u32,
        kind: u32,
        store: u32,
        key: String,
        ttl: f64,
        wait: f64,
        name: String,
        limit: u32,
        weight: u32,
    ) -> Result<crate::Start, LockError> {
        let mut locks = std::mem::take(&mut self.outer);
        locks.push(lock_spec(kind, store, key, ttl, wait, name, limit, weight)?);
        engine.start(exec, locks, exec_options(options))
    }
}

/// Validates a duration the host already knows is a number or a string. `Infinity` is
/// accepted only when `infinite_ok` (waiting forever), and comes back as -1.
///
/// # Errors
/// An argument error naming `arg`.
pub fn duration_arg(ms: Option<f64>, text: Option<&str>, arg: &str, infinite_ok: bool) -> Result<f64, LockError> {
    let millis: Millis = match (ms, text) {
        (Some(ms), _) if ms == f64::INFINITY && infinite_ok => return Ok(-1.0),
        (Some(ms), _) => duration::from_millis(ms, arg)?,
        (None, Some(text)) => duration::parse(text, arg)?,
        (None, None) => return Err(ArgError::type_error(arg, text!(arg, " must be a number or a string")).into()),
    };
    Ok(millis as f64)
}
