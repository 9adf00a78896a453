//! What permits share below the engine and its stores: the limit of a key used with
//! modes, and what a try of a memory-store key comes to (the plain store and its keys
//! held with permits answer alike).

use crate::Millis;

/// The limit of a key used with modes: a reader takes 1 permit, a writer all of them,
/// so readers run together and a writer alone, under the one rule of permits.
pub const SHARED_LIMIT: u32 = 2_147_483_647;

/// What a try of a memory-store key found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TryAcquire {
    /// The key was free: the lease is the caller's, with this fencing token.
    Acquired(u64),
    /// Another owner holds the key until the given instant (unless it renews).
    Held {
        /// When the current lease runs out.
        until: Millis,
    },
    /// The key is held with another limit (1: a plain lease), given here.
    Mismatch {
        /// The limit its holders use.
        limit: u32,
    },
}
