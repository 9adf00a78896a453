//! Locks defined ahead ([`crate::Engine::define_lock`]): executions on them pass an id
//! instead of the key and options. A definition belongs to whoever asked for it (a
//! pipeline): it lives until each of its holders lets go of it, so the engine keeps no
//! lock's key longer than something that can still start it.

use crate::types::LockSpec;

/// How many locks an engine keeps defined at once ([`crate::Engine::define_lock`]);
/// beyond that, locks are passed whole with every start.
pub const MAX_DEFINED_LOCKS: usize = 4096;

#[derive(Debug)]
struct Definition {
    spec: LockSpec,
    /// How many definitions of this same lock are not yet let go of.
    holders: u32,
}

/// The defined locks of one engine, by id. Ids of locks let go of are given to the next
/// locks defined. A lock is found by value with a scan, not a map: a pipeline defines
/// its lock once, and a map keyed by lock would be code of its own in the wasm module.
#[derive(Debug, Default)]
pub(crate) struct DefinedLocks {
    slots: Vec<Option<Definition>>,
    free: Vec<u32>,
    /// How many slots hold a definition.
    live: usize,
}

impl DefinedLocks {
    /// The id of `spec`, defined once more (the same lock gets the same id); `None` when
    /// [`MAX_DEFINED_LOCKS`] other locks are defined.
    pub fn define(&mut self, spec: LockSpec) -> Option<u32> {
        for (id, slot) in self.slots.iter_mut().enumerate() {
            if let Some(definition) = slot {
                if definition.spec == spec {
                    definition.holders += 1;
                    return Some(id as u32);
                }
            }
        }
        if self.live >= MAX_DEFINED_LOCKS {
            return None;
        }
        self.live += 1;
        let definition = Definition { spec, holders: 1 };
        let id = match self.free.pop() {
            Some(id) => {
                if let Some(slot) = self.slots.get_mut(id as usize) {
                    *slot = Some(definition);
                }
                id
            }
            None => {
                self.slots.push(Some(definition));
                (self.slots.len() - 1) as u32
            }
        };
        Some(id)
    }

    /// One holder of lock `id` lets go of it; the last one frees it. False for an id that
    /// is not defined.
    pub fn undefine(&mut self, id: u32) -> bool {
        let Some(slot) = self.slots.get_mut(id as usize) else { return false };
        let Some(definition) = slot else { return false };
        definition.holders -= 1;
        if definition.holders == 0 {
            *slot = None;
            self.live -= 1;
            self.free.push(id);
            if self.live == 0 {
                // Nothing defined: the tables' memory goes too (4,096 locks' worth at most).
                *self = DefinedLocks::default();
            }
        }
        true
    }

    /// The lock defined under `id`.
    pub fn get(&self, id: u32) -> Option<&LockSpec> {
        self.slots.get(id as usize)?.as_ref().map(|d| &d.spec)
    }

    /// How many distinct locks are defined.
    pub fn len(&self) -> usize {
        self.live
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::StoreRef;

    fn spec(key: &str) -> LockSpec {
        LockSpec {
            store: StoreRef::Memory(0),
            key: key.into(),
            ttl: 1_000,
            wait: None,
            linger: 0,
            name: String::new(),
            limit: 1,
            weight: 1,
        }
    }

    #[test]
    fn a_lock_defined_twice_lives_until_both_let_go_and_its_id_is_reused() {
        let mut defined = DefinedLocks::default();
        let a = defined.define(spec("a")).unwrap();
        let b = defined.define(spec("b")).unwrap();
        assert_eq!(defined.define(spec("a")), Some(a));
        assert!(defined.undefine(a));
        assert_eq!(defined.get(a), Some(&spec("a")), "one holder is left");
        assert!(defined.undefine(a));
        assert_eq!(defined.get(a), None);
        assert!(!defined.undefine(a), "not defined any more");
        assert_eq!(defined.len(), 1);
        assert_eq!(defined.define(spec("c")), Some(a), "the id is reused");
        assert_eq!(defined.get(b), Some(&spec("b")));
    }

    #[test]
    fn at_most_max_defined_locks_live_at_once() {
        let mut defined = DefinedLocks::default();
        let ids: Vec<u32> = (0..MAX_DEFINED_LOCKS).map(|i| defined.define(spec(&i.to_string())).unwrap()).collect();
        assert_eq!(defined.define(spec("one too many")), None);
        assert!(defined.undefine(ids[7]));
        assert_eq!(defined.define(spec("one too many")), Some(ids[7]));
        for id in ids {
            defined.undefine(id);
        }
        assert_eq!(defined.len(), 0);
        assert!(defined.slots.is_empty() && defined.free.capacity() == 0, "the tables' memory goes with the last lock");
    }
}
