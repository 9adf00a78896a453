//! # leasehold-core
//!
//! The lock engine of leasehold, with no runtime of its own: the Node addon and the
//! wasm module both drive this crate, so every runtime gets the same decisions.
//!
//! ## What it does
//! An execution runs a callback while it holds a *lease* on one or more keys. The
//! engine asks a store for each lease under a fresh random owner id; when the key is
//! held it waits (polling at 50 ms, doubling up to 1 s, with a last try exactly at the
//! `wait` deadline; or, for stores that announce releases, woken at once and in
//! arrival order); while the callback runs it renews every ttl/3; it declares the lease
//! lost when the store refuses a renewal or the lease runs out first; and it releases
//! the lease when the callback settles.
//!
//! ## What a lease guarantees, and what it does not
//! - While the engine says a lease is held, no other owner was granted the key by the
//!   store — *as judged by the holder's clock*, counting the lease from the moment its
//!   acquire or renew request was sent. A holder whose process pauses (GC, a stopped
//!   VM) longer than the ttl cannot notice its loss while paused, and may act on a
//!   lease that has already passed to another owner.
//! - That is what *fencing tokens* are for: every grant of a key carries a number
//!   larger than every earlier grant of that key, across releases and expiries. A
//!   resource that remembers the largest token it has seen and refuses smaller ones
//!   turns a paused holder's late write into a rejected write. The lease alone does not.
//! - Leases are not reentrant: an execution that asks again for a key it holds waits
//!   for itself, and fails at its `wait`.
//! - Clocks are assumed to run at about the same rate on the holder and on the store;
//!   a holder whose clock runs slow may believe in a lease longer than the store does.
//!
//! ## Shape
//! [`Engine`] is sans-I/O: the host calls in when something happens and carries out
//! the [`Effect`]s it reads back. Time comes in through [`Clock`], randomness as a seed
//! for [`OwnerIds`], and stores either live inside the engine ([`MemoryStore`],
//! answered synchronously) or are called by the host ([`StoreRef::External`]).
//! Nothing here is `Send`, and nothing needs to be: one engine lives on one event loop.

#![deny(missing_docs)]

mod binding_surface;
mod clock;
mod defined;
pub mod duration;
mod engine;
mod error;
mod fast_hash;
pub mod fast_words;
pub mod fencing;
pub mod host;
mod inspection;
mod memory_permits;
mod memory_store;
mod owner_ids;
mod permits;
pub mod polling;
mod text;
mod timers;
mod types;
mod waiters;

pub use clock::{Clock, FakeClock};
pub use defined::MAX_DEFINED_LOCKS;
pub use engine::{Engine, DEFAULT_MEMORY_STORE, MAX_FAKE_TIME};
pub use error::{ArgError, ArgErrorKind, LockError, StoreFailure, StoreMethod};
pub use inspection::{InspectedHolder, InspectedWaiter, Inspection};
pub use memory_store::{Holder, MemoryStore};
pub use owner_ids::{OwnerIds, MAX_OWNER_PREFIX};
pub use permits::{TryAcquire, SHARED_LIMIT};
pub use types::{
    Answer, Effect, Event, ExecOptions, Extend, Finish, HostTimer, LockSpec, Outcome, Start, StoreRef, Wake,
};

/// Time in whole milliseconds.
pub type Millis = u64;
