//! A hierarchical timing wheel with millisecond ticks.
//!
//! Six levels of 64 slots: level `n` slots are `64^n` ms wide, so the wheel
//! spans 64^6 ms (about 2.2 years; later deadlines are clamped). Insert and
//! cancel are O(1) (a slot is a `Vec` of keys; cancel swaps the entry out),
//! which matters because HTTP arms and cancels a deadline per request. The
//! vectors keep their capacity, so a steady state allocates nothing.
//! Expiry walks to the earliest occupied slot; entries of a higher-level
//! slot that are not due yet cascade down a level.

use std::task::Waker;

use crate::slab::Slab;

const LEVELS: usize = 6;
const SLOT_BITS: u32 = 6;
const SLOTS: usize = 1 << SLOT_BITS;
const MAX_SPAN: u64 = 1 << (SLOT_BITS as usize * LEVELS);
/// Keys each slot has room for before it must grow.
const SLOT_CAPACITY: usize = 4;

/// Names one armed timer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TimerKey(u32);

impl TimerKey {
    /// A `u32` keeps every connection's `Sleep` 8 bytes smaller. The slab
    /// never holds 2^32 entries: that would be hundreds of GiB of timers.
    fn of(index: usize) -> TimerKey {
        TimerKey(index as u32)
    }

    fn index(self) -> usize {
        self.0 as usize
    }
}

struct Entry {
    /// Deadline in ticks (ms since the wheel started).
    when: u64,
    waker: Option<Waker>,
    /// Where the key sits: (level, slot, index in the slot), or `None` once
    /// it fired.
    place: Option<(u8, u8, u32)>,
}

pub(crate) struct Wheel {
    entries: Slab<Entry>,
    levels: [[Vec<TimerKey>; SLOTS]; LEVELS],
    occupied: [u64; LEVELS],
    /// Ticks processed so far; every armed deadline is after this.
    elapsed: u64,
    scratch: Vec<TimerKey>,
}

impl Wheel {
    pub(crate) fn new() -> Self {
        Wheel {
            entries: Slab::with_capacity(256),
            // Every slot starts with room for a few keys, so the first timer
            // to land in a never-used slot does not allocate (6 × 64 × 4 keys
            // = 12 KiB per core). Slot vectors only trade places with
            // `scratch` afterwards, so capacity is never lost.
            levels: std::array::from_fn(|_| {
                std::array::from_fn(|_| Vec::with_capacity(SLOT_CAPACITY))
            }),
            occupied: [0; LEVELS],
            elapsed: 0,
            scratch: Vec::with_capacity(SLOT_CAPACITY),
        }
    }

    /// Arms a timer for tick `when`. A deadline that has already passed
    /// fires at the next [`Wheel::advance`].
    pub(crate) fn insert(&mut self, when: u64, waker: Waker) -> TimerKey {
        let key = TimerKey::of(self.entries.insert(Entry {
            when,
            waker: Some(waker),
            place: None,
        }));
        self.place(key);
        key
    }

    /// Whether the timer fired (then it stays fired until removed).
    pub(crate) fn has_fired(&self, key: TimerKey) -> bool {
        self.entries
            .get(key.index())
            .is_none_or(|entry| entry.place.is_none())
    }

    pub(crate) fn set_waker(&mut self, key: TimerKey, waker: &Waker) {
        if let Some(entry) = self.entries.get_mut(key.index()) {
            match &entry.waker {
                Some(w) if w.will_wake(waker) => {}
                _ => entry.waker = Some(waker.clone()),
            }
        }
    }

    /// Disarms and forgets a timer, fired or not.
    pub(crate) fn remove(&mut self, key: TimerKey) {
        self.unplace(key);
        self.entries.remove(key.index());
    }

    /// Moves an armed (or fired) timer to a new deadline.
    pub(crate) fn reset(&mut self, key: TimerKey, when: u64) {
        self.unplace(key);
        if let Some(entry) = self.entries.get_mut(key.index()) {
            entry.when = when;
            self.place(key);
        }
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The earliest tick at which [`Wheel::advance`] has work: a lower bound
    /// on the next deadline (a high-level slot may only cascade).
    pub(crate) fn next_deadline(&self) -> Option<u64> {
        (0..LEVELS)
            .filter_map(|level| self.next_in_level(level))
            .map(|(deadline, _)| deadline)
            .min()
    }

    /// Fires every timer due at or before tick `now`, waking its task.
    pub(crate) fn advance(&mut self, now: u64) {
        loop {
            let next = (0..LEVELS)
                .filter_map(|level| self.next_in_level(level).map(|(d, s)| (d, level, s)))
                .min();
            let Some((deadline, level, slot)) = next else {
                break;
            };
            if deadline > now {
                break;
            }
            self.elapsed = deadline.max(self.elapsed);
            let mut due = std::mem::take(&mut self.scratch);
            std::mem::swap(&mut due, &mut self.levels[level][slot]);
            self.occupied[level] &= !(1u64 << slot);
            for &key in &due {
                let Some(entry) = self.entries.get_mut(key.index()) else {
                    continue;
                };
                entry.place = None;
                if entry.when <= now {
                    if let Some(waker) = entry.waker.take() {
                        // A user waker's panic must not lose the timers
                        // due after it.
                        crate::unwind::wake(waker);
                    }
                } else {
                    self.place(key);
                }
            }
            due.clear();
            self.scratch = due;
        }
        self.elapsed = self.elapsed.max(now);
    }

    fn place(&mut self, key: TimerKey) {
        let Some(entry) = self.entries.get_mut(key.index()) else {
            return;
        };
        // A past deadline goes into the current level-0 slot: `advance`
        // fires it on its next call.
        let when = entry.when.max(self.elapsed);
        let level = level_for(self.elapsed, when);
        let slot = ((when >> (level as u32 * SLOT_BITS)) as usize) & (SLOTS - 1);
        let bucket = &mut self.levels[level][slot];
        // A full slot takes the larger spare vector rather than growing:
        // deadlines a fixed time ahead (a request's, a drain's) move into
        // a new slot every slot-width, and without this each one grew to
        // the peak in its turn, allocating for minutes (hours at the
        // higher levels) after the load had settled. Moved in order, so
        // the keys' indices stand.
        if bucket.len() == bucket.capacity() && self.scratch.capacity() > bucket.capacity() {
            self.scratch.append(bucket);
            std::mem::swap(bucket, &mut self.scratch);
        }
        entry.place = Some((level as u8, slot as u8, bucket.len() as u32));
        bucket.push(key);
        self.occupied[level] |= 1u64 << slot;
    }

    fn unplace(&mut self, key: TimerKey) {
        let Some(entry) = self.entries.get_mut(key.index()) else {
            return;
        };
        let Some((level, slot, index)) = entry.place.take() else {
            return;
        };
        let (level, slot, index) = (level as usize, slot as usize, index as usize);
        let bucket = &mut self.levels[level][slot];
        bucket.swap_remove(index);
        if let Some(&moved) = bucket.get(index) {
            if let Some(moved_entry) = self.entries.get_mut(moved.index()) {
                moved_entry.place = Some((level as u8, slot as u8, index as u32));
            }
        }
        if bucket.is_empty() {
            self.occupied[level] &= !(1u64 << slot);
            // The spare keeps the largest empty vector, for the next slot
            // that fills up (see `place`).
            if bucket.capacity() > self.scratch.capacity() {
                std::mem::swap(bucket, &mut self.scratch);
            }
        }
    }

    /// The deadline of level `level`'s next occupied slot, and that slot.
    fn next_in_level(&self, level: usize) -> Option<(u64, usize)> {
        let occupied = self.occupied[level];
        if occupied == 0 {
            return None;
        }
        let shift = level as u32 * SLOT_BITS;
        let slot_span = 1u64 << shift;
        let level_span = slot_span << SLOT_BITS;
        let now_slot = ((self.elapsed >> shift) as u32) & (SLOTS as u32 - 1);
        let rotated = occupied.rotate_right(now_slot);
        let slot = (rotated.trailing_zeros() + now_slot) as usize % SLOTS;
        let level_start = self.elapsed & !(level_span - 1);
        let mut deadline = level_start + slot as u64 * slot_span;
        // Armed entries never sit behind the current slot, so a lower slot
        // number means the next lap of this level.
        if (slot as u32) < now_slot {
            deadline += level_span;
        }
        Some((deadline.max(self.elapsed), slot))
    }
}

/// The level whose slot width separates `elapsed` from `when`.
fn level_for(elapsed: u64, when: u64) -> usize {
    let mut masked = (elapsed ^ when) | (SLOTS as u64 - 1);
    if masked >= MAX_SPAN {
        masked = MAX_SPAN - 1;
    }
    let significant = 63 - masked.leading_zeros() as usize;
    significant / SLOT_BITS as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::Wake;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn waker() -> (Arc<Count>, Waker) {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        (count.clone(), Waker::from(count))
    }

    #[test]
    fn fires_each_deadline_at_its_tick_and_not_before() {
        let mut wheel = Wheel::new();
        let deadlines = [0u64, 1, 5, 63, 64, 65, 4095, 4096, 300_000, 5_000_000];
        let mut armed = Vec::new();
        for &d in &deadlines {
            let (count, w) = waker();
            armed.push((d, count, wheel.insert(d, w)));
        }
        let mut now = 0;
        while now <= 5_000_001 {
            wheel.advance(now);
            for (d, count, key) in &armed {
                let fired = count.0.load(Ordering::SeqCst);
                assert_eq!(fired == 1, *d <= now, "deadline {d} at tick {now}");
                assert_eq!(wheel.has_fired(*key), *d <= now);
            }
            // Jump to the next interesting tick, as the core's loop would.
            now = match wheel.next_deadline() {
                Some(next) if next > now => next,
                _ => now + 1,
            };
        }
    }

    #[test]
    fn removed_and_reset_timers() {
        let mut wheel = Wheel::new();
        let (a_count, a) = waker();
        let (b_count, b) = waker();
        let ka = wheel.insert(100, a);
        let kb = wheel.insert(100, b);
        wheel.remove(ka);
        wheel.reset(kb, 10_000);
        wheel.advance(5_000);
        assert_eq!(a_count.0.load(Ordering::SeqCst), 0);
        assert_eq!(b_count.0.load(Ordering::SeqCst), 0);
        wheel.advance(10_000);
        assert_eq!(b_count.0.load(Ordering::SeqCst), 1);
        wheel.remove(kb);
        assert_eq!(wheel.len(), 0);
        assert_eq!(wheel.next_deadline(), None);
    }

    #[test]
    fn random_deadlines_fire_in_a_coarse_walk() {
        let mut wheel = Wheel::new();
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut armed = Vec::new();
        for _ in 0..2000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let d = seed % 200_000;
            let (count, w) = waker();
            wheel.insert(d, w);
            armed.push((d, count));
        }
        let mut now = 0;
        while now < 200_000 {
            now += 37;
            wheel.advance(now);
            for (d, count) in &armed {
                assert_eq!(
                    count.0.load(Ordering::SeqCst) == 1,
                    *d <= now,
                    "{d} at {now}"
                );
            }
        }
    }

    /// Deadlines a fixed time ahead, more of them at once than a slot has
    /// room for, moving from slot to slot as time goes on: past the first
    /// slot none grows (the spare vector goes where the timers are), and
    /// the keys moved with it are still found when disarmed.
    #[test]
    fn a_moving_crowd_of_deadlines_grows_one_slot_only() {
        let mut wheel = Wheel::new();
        let capacity = |wheel: &Wheel| -> usize {
            let slots: usize = wheel.levels.iter().flatten().map(Vec::capacity).sum();
            slots + wheel.scratch.capacity()
        };
        let crowd = 4 * SLOT_CAPACITY as u64;
        let mut grown = None;
        // Every 100 ms for 20 s, a crowd of deadlines 15 s ahead (level 2,
        // 4 s slots), disarmed soon after, odd ones first.
        for round in 0..200u64 {
            let now = round * 100;
            wheel.advance(now);
            let keys: Vec<_> = (0..crowd)
                .map(|i| wheel.insert(now + 15_000 + i, waker().1))
                .collect();
            let total = *grown.get_or_insert_with(|| capacity(&wheel));
            assert_eq!(capacity(&wheel), total, "round {round}: a slot grew");
            for key in keys.iter().skip(1).step_by(2).chain(keys.iter().step_by(2)) {
                wheel.remove(*key);
            }
            assert_eq!(wheel.len(), 0, "round {round}");
            assert_eq!(
                wheel.next_deadline(),
                None,
                "round {round}: a key left behind"
            );
        }
        assert!(grown.is_some_and(|total| total > capacity(&Wheel::new())));
    }
}
