//! The `Date` value of a core's responses, kept per core and refreshed at
//! most once a second ([`DateCache`] does the formatting).

use std::cell::{Cell, RefCell};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use super::proto::DateCache;

/// The core's `Date` value, refreshed at most once a second.
///
/// The refresh check uses the core's per-turn clock ([`percore::time::now`],
/// no syscall); only when a second boundary may have passed is the wall
/// clock read and, if the second changed, the date reformatted.
#[derive(Debug, Default)]
pub(crate) struct SharedDate {
    cache: RefCell<Option<DateCache>>,
    /// Core-clock instant at which the cached second ends.
    next: Cell<Option<Instant>>,
}

impl SharedDate {
    /// Runs `f` with the current date. Must not await (it holds a borrow).
    pub(crate) fn with<R>(&self, f: impl FnOnce(&DateCache) -> R) -> R {
        let now = percore::time::now();
        let mut cache = self.cache.borrow_mut();
        if self.next.get().is_none_or(|next| now >= next) || cache.is_none() {
            let wall = SystemTime::now();
            match cache.as_mut() {
                Some(c) => {
                    c.update(wall);
                }
                None => *cache = Some(DateCache::new(wall)),
            }
            let into_second = wall.duration_since(UNIX_EPOCH).unwrap_or_default();
            let left = std::time::Duration::from_secs(1).saturating_sub(
                std::time::Duration::from_nanos(u64::from(into_second.subsec_nanos())),
            );
            self.next.set(Some(now + left));
        }
        match cache.as_ref() {
            Some(date) => f(date),
            // Just filled in above.
            None => f(&DateCache::new(SystemTime::now())),
        }
    }
}
