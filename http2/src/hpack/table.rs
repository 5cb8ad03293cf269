//! The static table (Appendix A) and the dynamic table (§2.3.2, §4).
//!
//! The dynamic table keeps every entry's name and value in one byte
//! buffer, oldest first, and a 12-byte record per entry. Eviction only
//! moves a start offset; when an insert finds no room at the end, the live
//! bytes are moved to the front once. The buffer therefore never holds
//! more than the table's maximum size, and nothing is allocated before
//! the first insert.

use std::collections::VecDeque;

use super::tables::STATIC_TABLE;

/// Entries in the static table; dynamic indexes start after it.
pub const STATIC_LEN: usize = 61;

/// The overhead RFC 7541 §4.1 counts per entry on top of its bytes.
pub const ENTRY_OVERHEAD: usize = 32;

/// The static entry at `index` (1 to 61).
pub(super) fn static_entry(index: usize) -> Option<(&'static [u8], &'static [u8])> {
    STATIC_TABLE.get(index.checked_sub(1)?).copied()
}

/// The first static index whose name is `name`, for literals with an
/// indexed name; names must be lowercase, as HTTP/2 requires (§8.2.1).
pub(super) fn static_name(name: &[u8]) -> Option<usize> {
    // Grouped by length first, so a miss costs one comparison of lengths.
    let candidates: &[usize] = match name.len() {
        3 => &[21, 60],
        4 => &[33, 34, 37, 38, 45, 59],
        5 => &[4, 22, 50],
        6 => &[19, 32, 35, 54],
        7 => &[2, 6, 8, 36, 51, 52],
        8 => &[39, 42, 46],
        10 => &[1, 55, 58],
        11 => &[53],
        12 => &[31, 47],
        13 => &[18, 23, 24, 30, 41, 44],
        14 => &[15, 28],
        15 => &[16, 17],
        16 => &[26, 27, 29, 61],
        17 => &[40, 57],
        18 => &[48],
        19 => &[25, 43, 49],
        25 => &[56],
        27 => &[20],
        _ => return None,
    };
    candidates
        .iter()
        .copied()
        .find(|&i| STATIC_TABLE[i - 1].0 == name)
}

/// The static index of the whole field `name: value`, if there is one.
pub(super) fn static_field(name_index: usize, value: &[u8]) -> Option<usize> {
    let name = STATIC_TABLE[name_index - 1].0;
    (name_index..=STATIC_LEN)
        .take_while(|&i| STATIC_TABLE[i - 1].0 == name)
        .find(|&i| STATIC_TABLE[i - 1].1 == value)
}

/// Where one entry's bytes are: name then value, from `offset`.
#[derive(Clone, Copy, Debug)]
struct Record {
    /// Position in the table's byte stream (wrapping), not in the buffer.
    offset: u32,
    name_len: u32,
    value_len: u32,
}

/// An HPACK dynamic table, as a decoder keeps it.
#[derive(Debug, Default)]
pub struct DynamicTable {
    /// Live entries' bytes in `bytes[head..]`, oldest first.
    bytes: Vec<u8>,
    head: usize,
    /// Stream position of `bytes[0]`.
    base: u32,
    /// Oldest first; index 1 (the newest) is the back.
    records: VecDeque<Record>,
    /// The size of the entries as RFC 7541 counts it (§4.1).
    size: usize,
    /// The maximum size in force (§4.2).
    max_size: usize,
}

impl DynamicTable {
    /// An empty table of `max_size` octets, holding no allocation.
    pub fn new(max_size: usize) -> DynamicTable {
        DynamicTable {
            max_size,
            ..DynamicTable::default()
        }
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// The table's size as RFC 7541 §4.1 counts it.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The maximum size in force.
    pub fn max_size(&self) -> usize {
        self.max_size
    }

    /// Bytes allocated (capacity, not length) by the table.
    pub fn allocated(&self) -> usize {
        self.bytes.capacity() + self.records.capacity() * std::mem::size_of::<Record>()
    }

    /// The entry at dynamic index `index`, 1 being the newest.
    pub fn get(&self, index: usize) -> Option<(&[u8], &[u8])> {
        if index == 0 {
            return None;
        }
        let record = self.records.get(self.records.len().checked_sub(index)?)?;
        let start = record.offset.wrapping_sub(self.base) as usize;
        let name_end = start + record.name_len as usize;
        let end = name_end + record.value_len as usize;
        Some((&self.bytes[start..name_end], &self.bytes[name_end..end]))
    }

    /// Sets a new maximum size, evicting what no longer fits (§4.3).
    /// A maximum of 0 empties the table and frees its memory.
    pub fn set_max_size(&mut self, max_size: usize) {
        self.max_size = max_size;
        self.evict_to(max_size);
        if self.records.is_empty() {
            *self = DynamicTable::new(max_size);
        } else if self.bytes.capacity() > max_size {
            self.compact();
            self.bytes.shrink_to(max_size);
        }
    }

    /// Adds an entry (§4.4): older entries are evicted until it fits; an
    /// entry larger than the maximum size empties the table and is not
    /// added.
    pub fn insert(&mut self, name: &[u8], value: &[u8]) {
        let needed = name.len() + value.len();
        if needed + ENTRY_OVERHEAD > self.max_size {
            self.evict_to(0);
            *self = DynamicTable::new(self.max_size);
            return;
        }
        self.evict_to(self.max_size - needed - ENTRY_OVERHEAD);
        if self.bytes.len() + needed > self.bytes.capacity() {
            if self.head > 0 {
                self.compact();
            }
            if self.bytes.len() + needed > self.bytes.capacity() {
                let want = (self.bytes.capacity() * 2)
                    .max(self.bytes.len() + needed)
                    .max(64)
                    .min(self.max_size);
                self.bytes.reserve_exact(want - self.bytes.len());
            }
        }
        let offset = self.base.wrapping_add(self.bytes.len() as u32);
        self.bytes.extend_from_slice(name);
        self.bytes.extend_from_slice(value);
        self.records.push_back(Record {
            offset,
            name_len: name.len() as u32,
            value_len: value.len() as u32,
        });
        self.size += needed + ENTRY_OVERHEAD;
    }

    /// Evicts the oldest entries until the size is at most `target`.
    fn evict_to(&mut self, target: usize) {
        while self.size > target {
            let Some(old) = self.records.pop_front() else {
                break;
            };
            let len = (old.name_len + old.value_len) as usize;
            self.size -= len + ENTRY_OVERHEAD;
            self.head += len;
        }
        if self.records.is_empty() {
            self.base = self.base.wrapping_add(self.bytes.len() as u32);
            self.bytes.clear();
            self.head = 0;
        }
    }

    /// Moves the live bytes to the front of the buffer.
    fn compact(&mut self) {
        self.bytes.drain(..self.head);
        self.base = self.base.wrapping_add(self.head as u32);
        self.head = 0;
    }
}
