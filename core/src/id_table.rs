//! Values by engine id (executions, store requests): the values in one dense list, and
//! a map from id to place that is the same `IdMap<u32, u32>` for every value type. Each
//! hash map of a new value type would bring its own insert, probe and rehash code into
//! the wasm module; this one brings a list's.

use crate::fast_hash::IdMap;

#[derive(Debug)]
pub(crate) struct IdTable<V> {
    /// The place of each id's value in `items`.
    places: IdMap<u32, u32>,
    /// The values with their ids, without gaps: a removal moves the last one into its place.
    items: Vec<(u32, V)>,
}

impl<V> Default for IdTable<V> {
    fn default() -> Self {
        IdTable { places: IdMap::default(), items: Vec::new() }
    }
}

impl<V> IdTable<V> {
    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    pub(crate) fn contains_key(&self, id: &u32) -> bool {
        self.places.contains_key(id)
    }

    pub(crate) fn get(&self, id: &u32) -> Option<&V> {
        let &at = self.places.get(id)?;
        self.items.get(at as usize).map(|(_, v)| v)
    }

    pub(crate) fn get_mut(&mut self, id: &u32) -> Option<&mut V> {
        let &at = self.places.get(id)?;
        self.items.get_mut(at as usize).map(|(_, v)| v)
    }

    /// Sets the value of `id`, replacing any it had.
    pub(crate) fn insert(&mut self, id: u32, value: V) {
        if let Some(old) = self.get_mut(&id) {
            *old = value;
            return;
        }
        self.places.insert(id, self.items.len() as u32);
        self.items.push((id, value));
    }

    pub(crate) fn remove(&mut self, id: &u32) -> Option<V> {
        let at = self.places.remove(id)? as usize;
        if at >= self.items.len() {
            return None;
        }
        let (_, value) = self.items.swap_remove(at);
        if let Some((moved, _)) = self.items.get(at) {
            if let Some(place) = self.places.get_mut(moved) {
                *place = at as u32;
            }
        }
        Some(value)
    }

    /// Every id with its value, in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&u32, &V)> {
        self.items.iter().map(|(id, v)| (id, v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removals_keep_every_other_id_at_its_value() {
        let mut table = IdTable::default();
        for id in [5, 9, 2, 7] {
            table.insert(id, id * 10);
        }
        table.insert(9, 91);
        assert_eq!(table.len(), 4);
        assert_eq!(table.remove(&5), Some(50));
        assert_eq!(table.remove(&5), None);
        assert!(!table.contains_key(&5));
        assert_eq!((table.get(&9), table.get(&2), table.get(&7)), (Some(&91), Some(&20), Some(&70)));
        *table.get_mut(&7).unwrap() += 1;
        assert_eq!(table.remove(&7), Some(71));
        assert_eq!(table.remove(&2), Some(20));
        let left: Vec<_> = table.iter().collect();
        assert_eq!(left, [(&9, &91)]);
    }
}
