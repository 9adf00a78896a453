//! The status word each mutating call returns: its result, what the host does next,
//! and a payload above them; a call whose only effect is the common one returns that
//! effect in the word instead of as an effect record.

use super::{status, status_flags, DIRECT};
use crate::engine::Engine;
use crate::error::{LockError, StoreMethod};
use crate::types::{Answer, Effect, Outcome};

/// The number `start` returns, from what [`Engine::start`] (or
/// [`Engine::start_defined`]) returned for `exec`, asked with host option bits
/// `options`: the status word ([`status_flags`] included), plus 256 × the innermost token
/// when every lock was granted in the call (tokens of in-process stores stay far below
/// 2^45, so the sum is an exact JavaScript number). With [`DIRECT`], when the only effect
/// is the first acquire of lock 0 on a host store, that call is taken and returned
/// instead ([`status::STARTED_STORE_CALL`], 256 × its request id).
pub fn start_word(engine: &mut Engine, exec: u32, options: u32, start: crate::Start, arm_at: &mut f64) -> f64 {
    let call = match start {
        crate::Start::Pending if options & DIRECT != 0 => take_sole_call(engine, exec, StoreMethod::Acquire),
        _ => None,
    };
    let flags = status_flags(engine, arm_at);
    match (start, call) {
        (crate::Start::Running { token }, _) => {
            f64::from(status::STARTED_RUNNING | flags) + status::PAYLOAD_UNIT * token as f64
        }
        (crate::Start::Pending, Some((queue, request))) => {
            let code = if queue { status::STARTED_STORE_CALL_QUEUED } else { status::STARTED_STORE_CALL };
            f64::from(code | flags) + status::PAYLOAD_UNIT * f64::from(request)
        }
        (crate::Start::Pending, None) => f64::from(flags),
    }
}

/// Takes the only pending effect when it is `exec`'s call of `method` on lock 0: whether
/// it asks the store to queue the owner, and its request id.
fn take_sole_call(engine: &mut Engine, exec: u32, method: StoreMethod) -> Option<(bool, u32)> {
    let found = match engine.sole_effect()? {
        Effect::StoreCall { request, exec: e, layer: 0, method: m, queue, handed_over: false, .. }
            if *e == exec && *m == method =>
        {
            (*queue, *request)
        }
        _ => return None,
    };
    engine.take_effect();
    Some(found)
}

/// [`Engine::finish`] as hosts call it: the status word ([`finish_status`] and the
/// flags of [`status_flags`]). With `handoff`, when the release granted the lock to a
/// waiter and that is the only effect, the waiter's `run` effect is taken
/// ([`Engine::take_sole_run`]) and returned instead: [`status::FINISHED_HANDOFF`] plus 256 × its
/// execution id (an exact JavaScript number, ids being 32-bit); and when the only effect
/// is the release of `exec`'s lock 0 on a host store, that call is:
/// [`status::FINISHED_STORE_CALL`] plus 256 × its request id. A host passes `handoff` only where
/// it can run that execution, or call that store, at once.
///
/// # Errors
/// Those of [`Engine::finish`].
pub fn finish_call(
    engine: &mut Engine,
    exec: u32,
    ok: bool,
    handoff: bool,
    arm_at: &mut f64,
) -> Result<f64, LockError> {
    let finish = engine.finish(exec, ok)?;
    let next = if handoff { engine.take_sole_run() } else { None };
    let call = match finish {
        crate::Finish::Pending if handoff && next.is_none() => take_sole_call(engine, exec, StoreMethod::Release),
        _ => None,
    };
    let status = finish_status(finish) | status_flags(engine, arm_at);
    Ok(match (next, call) {
        (Some(next), _) => f64::from(status | status::FINISHED_HANDOFF) + status::PAYLOAD_UNIT * f64::from(next),
        (None, Some((_, request))) => {
            f64::from(status | status::FINISHED_STORE_CALL) + status::PAYLOAD_UNIT * f64::from(request)
        }
        (None, None) => f64::from(status),
    })
}

/// [`Engine::answer`] as hosts call it for a store's answer to `acquire` or `release`:
/// the status word ([`status_flags`]). With `direct`, when no effect was pending and the
/// answer leaves exactly one, the common one for the execution that made the request,
/// that effect is taken and returned instead: its `run` as [`status::ANSWERED_RUNNING`] when the
/// answer granted its innermost lock (its token is the one just answered: JS stores'
/// tokens may be too large to ride above the status bits), or its `settled` with the
/// callback's value or error (or a manual lease "not held") as [`finish_status`] does.
/// Anything else (telemetry events, other executions' effects, an error, a run under
/// an inner lock's token) comes as effects. A host passes `direct` only where it can
/// run or settle that execution at once: not while it applies effects, which would then
/// run out of order.
pub fn answer_call(engine: &mut Engine, request: u32, answer: Answer, direct: bool, arm_at: &mut f64) -> u32 {
    let exec = if direct && !engine.has_effects() { engine.request_exec(request) } else { None };
    let granted = match answer {
        Answer::Acquired(token) => token,
        _ => None,
    };
    engine.answer(request, answer);
    let answered = exec.and_then(|exec| take_sole_answer(engine, exec, granted)).unwrap_or(0);
    answered | status_flags(engine, arm_at)
}

/// Takes the only effect when it is `exec`'s `run` under the `granted` token or its plain
/// `settled`; its status bits.
fn take_sole_answer(engine: &mut Engine, exec: u32, granted: Option<u64>) -> Option<u32> {
    let status = match engine.sole_effect()? {
        Effect::Run { exec: e, token } if *e == exec && granted == Some(*token) => status::ANSWERED_RUNNING,
        Effect::Settled { exec: e, outcome } if *e == exec => match outcome {
            Outcome::Value => status::ANSWERED_VALUE,
            Outcome::CallbackError => status::ANSWERED_CALLBACK_ERROR,
            Outcome::NotHeld => status::ANSWERED_NOT_HELD,
            Outcome::Error(_) => return None,
        },
        _ => return None,
    };
    engine.take_effect();
    Some(status)
}

/// The status word for what [`Engine::finish`] returned.
pub fn finish_status(finish: crate::Finish) -> u32 {
    match finish {
        crate::Finish::Pending => 0,
        crate::Finish::Settled(Outcome::Value) => status::FINISHED_VALUE,
        crate::Finish::Settled(Outcome::CallbackError) => status::FINISHED_CALLBACK_ERROR,
        crate::Finish::Settled(Outcome::Error(_)) => status::FINISHED_LOST,
        crate::Finish::Settled(Outcome::NotHeld) => status::FINISHED_NOT_HELD,
    }
}

/// The status word for what [`Engine::extend`] returned.
pub fn extend_status(extend: crate::Extend) -> u32 {
    match extend {
        crate::Extend::Pending => 0,
        crate::Extend::Done(true) => status::EXTENDED,
        crate::Extend::Done(false) => status::NOT_EXTENDED,
    }
}
