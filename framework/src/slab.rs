//! A vector of slots with a free list: stable `usize` keys, O(1) insert and
//! remove, and no allocation once it has grown to its working size.

/// Slots addressed by the key `insert` returned.
#[derive(Debug)]
pub(crate) struct Slab<T> {
    entries: Vec<Entry<T>>,
    next_free: usize,
    len: usize,
}

#[derive(Debug)]
enum Entry<T> {
    Occupied(T),
    /// Index of the next free slot (`entries.len()` ends the list).
    Vacant(usize),
}

impl<T> Slab<T> {
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        Slab {
            entries: Vec::with_capacity(capacity),
            next_free: 0,
            len: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The key the next `insert` will return.
    pub(crate) fn vacant_key(&self) -> usize {
        self.next_free
    }

    pub(crate) fn insert(&mut self, value: T) -> usize {
        let key = self.next_free;
        if key == self.entries.len() {
            self.entries.push(Entry::Occupied(value));
            self.next_free = key + 1;
        } else {
            match std::mem::replace(&mut self.entries[key], Entry::Occupied(value)) {
                Entry::Vacant(next) => self.next_free = next,
                Entry::Occupied(_) => unreachable!("slab free list points at an occupied slot"),
            }
        }
        self.len += 1;
        key
    }

    pub(crate) fn get(&self, key: usize) -> Option<&T> {
        match self.entries.get(key) {
            Some(Entry::Occupied(v)) => Some(v),
            _ => None,
        }
    }

    pub(crate) fn get_mut(&mut self, key: usize) -> Option<&mut T> {
        match self.entries.get_mut(key) {
            Some(Entry::Occupied(v)) => Some(v),
            _ => None,
        }
    }

    pub(crate) fn remove(&mut self, key: usize) -> Option<T> {
        let entry = self.entries.get_mut(key)?;
        if matches!(entry, Entry::Vacant(_)) {
            return None;
        }
        match std::mem::replace(entry, Entry::Vacant(self.next_free)) {
            Entry::Occupied(v) => {
                self.next_free = key;
                self.len -= 1;
                Some(v)
            }
            Entry::Vacant(_) => unreachable!("checked above"),
        }
    }

    /// Keys of every occupied slot, for shutdown sweeps.
    pub(crate) fn keys(&self) -> impl Iterator<Item = usize> + '_ {
        self.entries
            .iter()
            .enumerate()
            .filter(|(_, e)| matches!(e, Entry::Occupied(_)))
            .map(|(k, _)| k)
    }
}

#[cfg(test)]
mod tests {
    use super::Slab;

    #[test]
    fn reuses_freed_keys_and_tracks_len() {
        let mut slab = Slab::with_capacity(2);
        let a = slab.insert("a");
        let b = slab.insert("b");
        assert_eq!(slab.len(), 2);
        assert_eq!(slab.remove(a), Some("a"));
        assert_eq!(slab.remove(a), None);
        assert_eq!(slab.vacant_key(), a);
        let c = slab.insert("c");
        assert_eq!(c, a);
        assert_eq!(slab.get(b), Some(&"b"));
        assert_eq!(slab.keys().collect::<Vec<_>>(), vec![a, b]);
    }
}
