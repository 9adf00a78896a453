//! The one error type of the engine. Every binding maps it to JavaScript once, keyed on
//! [`LockError::code`].

use crate::text::text;
use std::fmt;

/// Which store method an error or an event concerns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StoreMethod {
    /// `acquire(key, owner, ttlMs)`.
    Acquire,
    /// `renew(key, owner, ttlMs)`.
    Renew,
    /// `release(key, owner)`.
    Release,
}

impl StoreMethod {
    /// The method's name as JavaScript stores spell it.
    pub fn name(self) -> &'static str {
        match self {
            StoreMethod::Acquire => "acquire",
            StoreMethod::Renew => "renew",
            StoreMethod::Release => "release",
        }
    }
}

/// Why a store call failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreFailure {
    /// The store threw or rejected. The host keeps the thrown value under this request
    /// id and hands it to the user as the error's `cause`.
    Threw(u32),
    /// The store did not answer before the lease it would produce was worthless.
    TimedOut {
        /// How long the engine waited, in milliseconds.
        after_ms: u64,
    },
    /// The store answered with something that is not what its contract says; the
    /// message says what was expected and what came.
    BadAnswer(String),
}

/// Whether an argument was of the wrong type or out of range. Bindings map these to
/// `TypeError` and `RangeError`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgErrorKind {
    /// Wrong type or unparsable: `TypeError`.
    Type,
    /// Right type, value out of range: `RangeError`.
    Range,
}

/// A bad argument, found when the option is given, never later.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgError {
    /// Type or range.
    pub kind: ArgErrorKind,
    /// The argument's name, e.g. `ttl`.
    pub arg: String,
    /// A sentence that names the argument, what it must be and what it got.
    pub message: String,
}

impl ArgError {
    /// A `TypeError`-kind argument error.
    pub fn type_error(arg: &str, message: String) -> Self {
        ArgError { kind: ArgErrorKind::Type, arg: arg.to_owned(), message }
    }

    /// A `RangeError`-kind argument error.
    pub fn range(arg: &str, message: String) -> Self {
        ArgError { kind: ArgErrorKind::Range, arg: arg.to_owned(), message }
    }
}

/// How an execution, or a call into the engine, failed.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LockError {
    /// The lock stayed held for longer than `wait`. The callback never ran.
    NotAcquired {
        /// The key that was held.
        key: String,
    },
    /// The lease was lost while the callback ran, and the callback failed.
    Lost {
        /// The key whose lease was lost.
        key: String,
    },
    /// An outer lease was lost while an inner lock was still being acquired. The
    /// callback never ran.
    LostBeforeStart {
        /// The key whose lease was lost.
        key: String,
    },
    /// The store failed on `acquire` (or answered badly). The callback never ran.
    StoreFailed {
        /// The key being locked.
        key: String,
        /// The store method that failed.
        method: StoreMethod,
        /// What went wrong.
        failure: StoreFailure,
    },
    /// The key's holders use another limit (a plain lock is a limit of 1): permits of
    /// different limits never share a key. The callback never ran.
    LimitMismatch {
        /// The key.
        key: String,
        /// The limit this lock asked for.
        limit: u32,
        /// The limit the key is held or waited for with.
        held_with: u32,
    },
    /// The caller cancelled while the execution waited. The host rejects with the
    /// caller's own abort reason.
    Cancelled,
    /// An argument was wrong.
    InvalidArgument(ArgError),
}

impl LockError {
    /// A stable code for the binding's error classes.
    pub fn code(&self) -> &'static str {
        match self {
            LockError::NotAcquired { .. } => "LOCK_NOT_ACQUIRED",
            LockError::Lost { .. } | LockError::LostBeforeStart { .. } => "LOCK_LOST",
            LockError::StoreFailed { .. } => "LOCK_STORE_FAILED",
            LockError::LimitMismatch { .. } => "LOCK_LIMIT_MISMATCH",
            LockError::Cancelled => "ABORT_ERR",
            LockError::InvalidArgument(ArgError { kind: ArgErrorKind::Type, .. }) => "ERR_INVALID_ARG_TYPE",
            LockError::InvalidArgument(ArgError { kind: ArgErrorKind::Range, .. }) => "ERR_OUT_OF_RANGE",
        }
    }

    /// The key the error concerns, where there is one.
    pub fn key(&self) -> Option<&str> {
        match self {
            LockError::NotAcquired { key }
            | LockError::Lost { key }
            | LockError::LostBeforeStart { key }
            | LockError::StoreFailed { key, .. }
            | LockError::LimitMismatch { key, .. } => Some(key),
            LockError::Cancelled | LockError::InvalidArgument(_) => None,
        }
    }
}

impl LockError {
    /// The message a user sees: what [`Display`](fmt::Display) shows.
    pub fn message(&self) -> String {
        match self {
            LockError::NotAcquired { key } => text!("lock '", key, "' is held by another owner"),
            LockError::Lost { key } => text!("lease on lock '", key, "' was lost while the callback ran"),
            LockError::LostBeforeStart { key } => {
                text!("lease on lock '", key, "' was lost before the callback started")
            }
            LockError::StoreFailed { key, method, failure } => {
                let method = method.name();
                match failure {
                    StoreFailure::Threw(_) => text!("lock store failed on ", method, "('", key, "')"),
                    StoreFailure::TimedOut { after_ms } => {
                        text!("lock store did not answer ", method, "('", key, "') within ", after_ms, " ms")
                    }
                    StoreFailure::BadAnswer(what) => {
                        text!("lock store answered ", method, "('", key, "') badly: ", what)
                    }
                }
            }
            LockError::LimitMismatch { key, limit, held_with } => text!(
                "lock '",
                key,
                "' is used with ",
                limit_text(*held_with),
                " by its holders; this lock asks for ",
                limit_text(*limit)
            ),
            LockError::Cancelled => "the operation was aborted".into(),
            LockError::InvalidArgument(arg) => arg.message.clone(),
        }
    }
}

/// How a key's limit reads in a message: the modes' limit as the modes.
fn limit_text(limit: u32) -> String {
    match limit {
        crate::permits::SHARED_LIMIT => "mode 'shared'/'exclusive'".into(),
        1 => "no limit (an exclusive lock)".into(),
        n => text!("limit ", n),
    }
}

impl fmt::Display for LockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message())
    }
}

impl std::error::Error for LockError {}

impl From<ArgError> for LockError {
    fn from(err: ArgError) -> Self {
        LockError::InvalidArgument(err)
    }
}
