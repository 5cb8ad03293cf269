//! The open-file cache: each core keeps the files it served lately open,
//! with their metadata, as nginx's `open_file_cache` does.
//!
//! A request path as sent is the key. An entry holds what a miss paid
//! for: the path checked for links and resolved under the root, the
//! open file and its `fstat`. A hit pays for none of it, and touches
//! nothing shared with other cores.
//!
//! Three bounds keep it honest:
//!
//! - **Validity.** An entry is used for `valid` after it was made, then
//!   dropped and made again by the next request: the path is resolved
//!   and the file opened anew. A file replaced (by rename, the usual way
//!   to publish) is thus served at most `valid` late, and a link swapped
//!   into the tree is looked at again within `valid`. The cached
//!   metadata is the file's at open time: a file edited in place within
//!   the period keeps its old length and validators until the entry is
//!   made again. A file that shrank is cut short as without the cache.
//! - **Capacity.** At most `capacity` entries per core. A full table
//!   evicts by the clock algorithm (second chance): an entry hit since
//!   the hand last passed it is spared once. A new entry starts unmarked,
//!   so a scan of files asked for once evicts itself before the hot set.
//! - **Idle entries.** An entry past its period is of no use, and
//!   holding a deleted file open keeps its disk space, so expired
//!   entries are dropped even when nobody asks for them again. Every
//!   lookup looks at one entry in turn; and while a core's table holds
//!   entries, a task of the core's sweeps it every period (at most
//!   [`SWEEP_BATCH`] entries a tick), so a file deleted or replaced on
//!   disk is closed within about twice the period of its last opening.
//!   The task ends when the table empties and starts again with the
//!   next entry: an idle core with an empty table wakes for nothing.
//!
//! Misses are not cached: a file published under a name that was
//! missing is served at once, and a flood of requests for names that
//! do not exist cannot evict the files that do.
//!
//! Each core's table lives in a thread-local, found by the settings it
//! was made for: [`StaticFiles`](super::StaticFiles) is `Send + Sync`
//! and cloned into every core, and the files a table holds must stay on
//! the core that opened them.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use percore::fs::{File, Metadata};

/// A file as a request left it: what a cache hit serves.
#[derive(Debug)]
pub(crate) struct Open {
    /// The file's resolved path, free of links: its name gives the
    /// content type.
    pub(crate) path: PathBuf,
    /// The open file, read at explicit offsets (shared by the responses
    /// that stream it; an evicted entry closes when the last one ends).
    pub(crate) file: File,
    /// The open file's own metadata at open time.
    pub(crate) meta: Metadata,
}

/// The cache's counters, summed over all cores (see
/// [`StaticFiles::cache_stats`](super::StaticFiles::cache_stats)).
///
/// Only misses and evictions write them, never a hit: cores do not
/// contend for them on the common path.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CacheStats {
    /// Files opened into the cache since the start (one per miss that
    /// found a file).
    pub opened: u64,
    /// Entries held now, on all cores together: each holds a file open.
    pub held: u64,
}

/// One cache's settings and counters, shared by every clone of its
/// `StaticFiles` and every core's table.
#[derive(Debug)]
struct Settings {
    capacity: usize,
    valid: Duration,
    opened: AtomicU64,
    held: AtomicU64,
}

/// The handle a [`StaticFiles`](super::StaticFiles) holds: cheap to
/// clone, `Send + Sync`. Its tables are per core.
#[derive(Debug, Clone)]
pub(crate) struct Cache {
    settings: Arc<Settings>,
}

impl Cache {
    /// A cache of `capacity` entries per core, each used for `valid`;
    /// `None` (no cache) if either is zero.
    pub(crate) fn new(capacity: usize, valid: Duration) -> Option<Cache> {
        if capacity == 0 || valid.is_zero() {
            return None;
        }
        let settings = Settings {
            capacity,
            valid,
            opened: AtomicU64::new(0),
            held: AtomicU64::new(0),
        };
        Some(Cache {
            settings: Arc::new(settings),
        })
    }

    /// The counters now.
    pub(crate) fn stats(&self) -> CacheStats {
        CacheStats {
            opened: self.settings.opened.load(Ordering::Relaxed),
            held: self.settings.held.load(Ordering::Relaxed),
        }
    }

    /// This core's entry for `key`, if it is still within its period.
    pub(crate) fn get(&self, key: &str) -> Option<Rc<Open>> {
        let now = percore::time::now();
        self.with_table(false, |table| {
            let table = table?;
            table.sweep_one(now);
            table.get(key, now)
        })
    }

    /// Keeps `open` as this core's entry for `key`, and starts the
    /// table's sweep if it is not running.
    pub(crate) fn insert(&self, key: &str, open: &Rc<Open>) {
        let now = percore::time::now();
        self.settings.opened.fetch_add(1, Ordering::Relaxed);
        let start_sweep = self.with_table(true, |table| {
            let table = table?;
            table.insert(key, open, now);
            Some(!std::mem::replace(&mut table.sweeping, true))
        });
        if start_sweep == Some(true) {
            let period = self.settings.valid.max(MIN_SWEEP_PERIOD);
            // Detached: it ends by itself, or with the core.
            drop(percore::spawn_local(sweep(
                Arc::downgrade(&self.settings),
                period,
            )));
        }
    }

    /// Runs `f` on this core's table for these settings, made first if
    /// `make` (and `None` if not). No await happens under the borrow.
    fn with_table<R>(&self, make: bool, f: impl FnOnce(Option<&mut Table>) -> R) -> R {
        TABLES.with(|tables| {
            let mut tables = tables.borrow_mut();
            let mine = Arc::downgrade(&self.settings);
            let found = tables.iter().position(|t| t.settings.ptr_eq(&mine));
            let index = match found {
                Some(index) => Some(index),
                None if make => {
                    // The tables of caches whose every clone is gone
                    // close their files now.
                    tables.retain(|t| t.settings.strong_count() > 0);
                    tables.push(Table::new(
                        mine,
                        self.settings.capacity,
                        self.settings.valid,
                    ));
                    Some(tables.len() - 1)
                }
                None => None,
            };
            f(index.map(|i| &mut tables[i]))
        })
    }
}

/// Entries one tick of the sweep looks at, at most: a table larger
/// than this is swept over several ticks, and a tick stays a few
/// microseconds of the core's time.
const SWEEP_BATCH: usize = 4096;

/// The shortest time between two ticks of the sweep, for a cache whose
/// entries are valid for less.
const MIN_SWEEP_PERIOD: Duration = Duration::from_millis(10);

/// A core's sweep of its table for `settings`: every `period`, drops the
/// entries past their period (closing their files, once no response
/// still sends them). Ends when the table is empty, or its cache gone
/// (the table then goes too).
async fn sweep(settings: Weak<Settings>, period: Duration) {
    loop {
        percore::time::sleep(period).await;
        let now = percore::time::now();
        let go_on = TABLES.with(|tables| {
            let mut tables = tables.borrow_mut();
            let Some(i) = tables.iter().position(|t| t.settings.ptr_eq(&settings)) else {
                return false;
            };
            if settings.strong_count() == 0 {
                tables.swap_remove(i);
                return false;
            }
            let table = &mut tables[i];
            table.sweep(now, SWEEP_BATCH);
            table.sweeping = !table.slots.is_empty();
            table.sweeping
        });
        if !go_on {
            return;
        }
    }
}

thread_local! {
    /// This core's tables, one per cache used here (most often one).
    static TABLES: RefCell<Vec<Table>> = const { RefCell::new(Vec::new()) };
}

/// One core's entries for one cache.
struct Table {
    /// Whose table this is; also where the counters live.
    settings: Weak<Settings>,
    capacity: usize,
    valid: Duration,
    /// Key to its index in `slots`.
    index: HashMap<Rc<str>, usize>,
    slots: Vec<Slot>,
    /// The clock hand: where the search for an entry to evict resumes.
    hand: usize,
    /// The next entry the sweep looks at.
    sweep: usize,
    /// A task sweeps this table on a timer (see [`sweep`]).
    sweeping: bool,
}

struct Slot {
    key: Rc<str>,
    open: Rc<Open>,
    /// When the entry was made: it is used until `made + valid`.
    made: Instant,
    /// Hit since the hand last passed: spared once.
    marked: bool,
}

impl Table {
    fn new(settings: Weak<Settings>, capacity: usize, valid: Duration) -> Table {
        Table {
            settings,
            capacity,
            valid,
            index: HashMap::new(),
            slots: Vec::new(),
            hand: 0,
            sweep: 0,
            sweeping: false,
        }
    }

    fn fresh(&self, slot: &Slot, now: Instant) -> bool {
        now.saturating_duration_since(slot.made) < self.valid
    }

    fn get(&mut self, key: &str, now: Instant) -> Option<Rc<Open>> {
        let i = *self.index.get(key)?;
        if !self.fresh(&self.slots[i], now) {
            self.remove(i);
            return None;
        }
        let slot = &mut self.slots[i];
        slot.marked = true;
        Some(slot.open.clone())
    }

    fn insert(&mut self, key: &str, open: &Rc<Open>, now: Instant) {
        // Two misses for one key on one core: the later file wins.
        if let Some(&i) = self.index.get(key) {
            let slot = &mut self.slots[i];
            (slot.open, slot.made, slot.marked) = (open.clone(), now, false);
            return;
        }
        let key: Rc<str> = key.into();
        let slot = Slot {
            key: key.clone(),
            open: open.clone(),
            made: now,
            marked: false,
        };
        if self.slots.len() < self.capacity {
            self.index.insert(key, self.slots.len());
            self.slots.push(slot);
            self.count_held(1);
            return;
        }
        let victim = self.evict_at();
        self.index.remove(&self.slots[victim].key);
        self.index.insert(key, victim);
        self.slots[victim] = slot;
    }

    /// The clock: the first unmarked entry from the hand on, unmarking
    /// the marked ones it passes. Ends within two turns.
    fn evict_at(&mut self) -> usize {
        loop {
            let i = self.hand % self.slots.len();
            self.hand = i + 1;
            let slot = &mut self.slots[i];
            if !slot.marked {
                return i;
            }
            slot.marked = false;
        }
    }

    /// Drops the entry under the sweep if it has outlived its period,
    /// and moves the sweep on.
    fn sweep_one(&mut self, now: Instant) {
        if self.slots.is_empty() {
            return;
        }
        let i = self.sweep % self.slots.len();
        if self.fresh(&self.slots[i], now) {
            self.sweep = i + 1;
        } else {
            // The last entry moves into `i`: the sweep stays to see it.
            self.remove(i);
            self.sweep = i;
        }
    }

    /// Looks at up to `batch` entries from the sweep on, dropping those
    /// that have outlived their period.
    fn sweep(&mut self, now: Instant, batch: usize) {
        for _ in 0..batch.min(self.slots.len()) {
            self.sweep_one(now);
        }
    }

    fn remove(&mut self, i: usize) {
        let slot = self.slots.swap_remove(i);
        self.index.remove(&slot.key);
        if let Some(moved) = self.slots.get(i) {
            self.index.insert(moved.key.clone(), i);
        }
        self.count_held(-1);
    }

    fn count_held(&self, delta: i64) {
        if let Some(settings) = self.settings.upgrade() {
            if delta > 0 {
                settings.held.fetch_add(delta as u64, Ordering::Relaxed);
            } else {
                settings
                    .held
                    .fetch_sub(delta.unsigned_abs(), Ordering::Relaxed);
            }
        }
    }
}

impl Drop for Table {
    fn drop(&mut self) {
        self.count_held(-(self.slots.len() as i64));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(capacity: usize) -> (Arc<Settings>, Table) {
        let cache = Cache::new(capacity, Duration::from_secs(3600)).expect("on");
        let table = Table::new(
            Arc::downgrade(&cache.settings),
            capacity,
            Duration::from_secs(3600),
        );
        (cache.settings, table)
    }

    fn open() -> Rc<Open> {
        let (file, meta) = percore::block_on(percore::Backend::Epoll, async {
            let file = percore::fs::File::open("/dev/null").await.expect("open");
            let meta = file.metadata().await.expect("fstat");
            (file, meta)
        })
        .expect("a core");
        Rc::new(Open {
            path: "/dev/null".into(),
            file,
            meta,
        })
    }

    #[test]
    fn the_clock_spares_hit_entries_and_stays_bounded() {
        let (settings, mut t) = table(3);
        let now = Instant::now();
        let file = open();
        for key in ["a", "b", "c"] {
            t.insert(key, &file, now);
        }
        assert!(t.get("a", now).is_some());
        // Full: `b`, the first unmarked from the hand, goes; `a` is spared.
        t.insert("d", &file, now);
        assert!(t.get("b", now).is_none());
        assert!(t.get("a", now).is_some());
        for key in ["e", "f", "g", "h"] {
            t.insert(key, &file, now);
        }
        assert_eq!(t.slots.len(), 3);
        assert_eq!(t.index.len(), 3);
        assert_eq!(settings.held.load(Ordering::Relaxed), 3);
        for (key, &i) in &t.index {
            assert_eq!(&t.slots[i].key, key);
        }
    }

    #[test]
    fn entries_past_their_period_are_swept() {
        let (settings, mut t) = table(4);
        let file = open();
        let then = Instant::now();
        for key in ["a", "b", "c"] {
            t.insert(key, &file, then);
        }
        let later = then + Duration::from_secs(7200);
        for _ in 0..3 {
            t.sweep_one(later);
        }
        assert!(t.slots.is_empty() && t.index.is_empty());
        assert_eq!(settings.held.load(Ordering::Relaxed), 0);
        t.insert("a", &file, then);
        assert!(t.get("a", later).is_none(), "an old entry is not served");
    }

    #[test]
    fn a_sweep_drops_only_expired_entries_within_its_batch() {
        let (settings, mut t) = table(8);
        let file = open();
        let then = Instant::now();
        let later = then + Duration::from_secs(7200);
        for key in ["a", "b", "c", "d", "e"] {
            t.insert(key, &file, then);
        }
        t.sweep(later, 2);
        assert_eq!(t.slots.len(), 3, "two looked at, both expired");
        t.insert("fresh", &file, later);
        t.sweep(later, SWEEP_BATCH);
        assert_eq!(t.slots.len(), 1);
        assert!(t.get("fresh", later).is_some());
        assert_eq!(settings.held.load(Ordering::Relaxed), 1);
        for (key, &i) in &t.index {
            assert_eq!(&t.slots[i].key, key);
        }
    }
}
