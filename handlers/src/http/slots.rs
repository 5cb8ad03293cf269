//! Header slots lent per exchange from a per-core pool, so that an idle
//! connection's future holds none.
//!
//! `parse_head` needs room for 100 headers (3.2 KiB). Held in the
//! connection's future, that room was part of every connection, idle or
//! not: a future is as large as its largest state. Now the future holds a
//! pointer, the slots are taken when a request's bytes have come and go
//! back when its exchange ends, and a core keeps the ones it has used, so
//! a steady state allocates nothing.

use std::cell::{Cell, RefCell};

use super::proto::{header_storage, HeaderSlot};

/// Header storage per request. [`Limits::max_headers`](super::Limits)
/// above this is capped to it.
const HEADER_SLOTS: usize = 100;

/// Slot arrays a core keeps for the next exchanges: as many as exchanges
/// were in progress at once on it, up to this many (3.2 KiB each). Few:
/// those made for a spike of slow requests are spread over the heap, and
/// each kept one would pin its pages after the spike.
const KEEP: usize = 32;

type Storage = Box<[HeaderSlot<'static>; HEADER_SLOTS]>;

thread_local! {
    /// The last slots given back: the next exchange takes them with a load
    /// and a store, where the list below costs a borrow and a length check.
    static LAST: Cell<Option<Storage>> = const { Cell::new(None) };
    static FREE: RefCell<Vec<Storage>> = const { RefCell::new(Vec::new()) };
}

/// One exchange's header slots, back in the core's pool when dropped.
pub(crate) struct Slots(Option<Storage>);

impl Slots {
    /// Slots from the pool, or new ones when it has none.
    pub(crate) fn take() -> Slots {
        let kept = LAST
            .try_with(Cell::take)
            .ok()
            .flatten()
            .or_else(|| FREE.try_with(|free| free.borrow_mut().pop()).ok().flatten());
        Slots(Some(kept.unwrap_or_else(|| Box::new(header_storage()))))
    }

    /// The slots, for headers that borrow bytes living `'b`.
    pub(crate) fn get<'b>(&mut self) -> &mut [HeaderSlot<'b>] {
        let Some(storage) = self.0.as_deref_mut() else {
            return &mut [];
        };
        let slots: *mut [HeaderSlot<'static>] = &mut storage[..];
        #[allow(
            clippy::unnecessary_cast,
            reason = "the cast shortens the lifetime, which clippy does not count"
        )]
        let slots = slots as *mut [HeaderSlot<'b>];
        // The slots are `MaybeUninit`: only what this borrow's parse writes
        // is read, so a header an earlier exchange left (its bytes maybe
        // gone) never is, and the borrow cannot outlive `'b`.
        // SAFETY: `slots` is this `Slots`' own live array, borrowed only
        // through `self`; a lifetime does not change the layout.
        unsafe { &mut *slots }
    }
}

impl Drop for Slots {
    fn drop(&mut self) {
        let Some(storage) = self.0.take() else {
            return;
        };
        // A thread that is ending frees them instead.
        let Ok(storage) = LAST.try_with(|last| last.replace(Some(storage))) else {
            return;
        };
        let Some(storage) = storage else {
            return;
        };
        let _ = FREE.try_with(|free| {
            let mut free = free.borrow_mut();
            if free.len() < KEEP {
                if free.capacity() == 0 {
                    // All the room it will need, at once: a new high-water
                    // mark of exchanges later allocates nothing for the list.
                    free.reserve_exact(KEEP);
                }
                free.push(storage);
            }
        });
    }
}
