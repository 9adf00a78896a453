//! A fast hasher for the engine's own small integer keys (execution and request ids,
//! store references). They are chosen by the host, not by users, so the protection of
//! the standard SipHash against crafted collisions is not needed there; keys that users
//! choose (lock keys) stay on the standard hasher ([`KeyMap`]), except in the wasm
//! module, where std has no randomness to key SipHash with (so it protects nothing) and
//! its code would cost the download.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Multiply-rotate hashing (as in rustc's FxHash).
#[derive(Default, Clone, Copy, Debug)]
pub(crate) struct IdHasher(u64);

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.add(u64::from(b));
        }
    }

    fn write_u8(&mut self, n: u8) {
        self.add(u64::from(n));
    }

    fn write_u32(&mut self, n: u32) {
        self.add(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }
}

impl IdHasher {
    fn add(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(SEED);
    }
}

/// A map keyed by engine ids.
pub(crate) type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

/// A map keyed by what users choose (lock keys): std's randomly keyed SipHash.
#[cfg(not(target_arch = "wasm32"))]
pub(crate) type KeyMap<K, V> = HashMap<K, V>;
/// A map keyed by what users choose (lock keys); see the module's docs for the wasm module.
#[cfg(target_arch = "wasm32")]
pub(crate) type KeyMap<K, V> = IdMap<K, V>;
