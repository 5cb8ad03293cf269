//! Header slots lent per exchange from a per-core pool, so that an idle
//! connection's future holds none, and a request waiting for its body
//! holds few.
//!
//! `parse_head` needs room for up to 100 headers (3.2 KiB). Held in the
//! connection's future, that room was part of every connection, idle or
//! not: a future is as large as its largest state. Now the future holds a
//! pointer, the slots are taken when a request's bytes have come and go
//! back when its exchange ends, and a core keeps the ones it has used, so
//! a steady state allocates nothing.
//!
//! A head is parsed into 24 slots first (768 bytes: a browser sends 10 to
//! 20 fields), and into 100 only when it has more: a client that sends a
//! head and then its body slowly holds a quarter of the room for as long
//! as it takes.

use std::cell::{Cell, RefCell};

use crate::http::proto::{
    header_storage, parse_head, too_many_fields, HeaderSlot, HttpError, Limits, RequestHead,
};

/// Header storage per request. [`Limits::max_headers`](crate::http::Limits)
/// above this is capped to it.
const HEADER_SLOTS: usize = 100;

/// The slots a head is parsed into first.
const SMALL_SLOTS: usize = 24;

/// Small slot arrays a core keeps for the next exchanges: as many as
/// exchanges were in progress at once on it, up to this many (768 bytes
/// each).
const KEEP_SMALL: usize = 128;

/// Large ones, for the rare heads with more than [`SMALL_SLOTS`] fields
/// (3.2 KiB each). Few: those made for a spike would pin their pages.
const KEEP_LARGE: usize = 8;

type Small = Box<[HeaderSlot<'static>; SMALL_SLOTS]>;
type Large = Box<[HeaderSlot<'static>; HEADER_SLOTS]>;

thread_local! {
    /// The last small slots given back: the next exchange takes them with a
    /// load and a store, where the list below costs a borrow and a length
    /// check.
    static LAST: Cell<Option<Small>> = const { Cell::new(None) };
    static FREE_SMALL: RefCell<Vec<Small>> = const { RefCell::new(Vec::new()) };
    static FREE_LARGE: RefCell<Vec<Large>> = const { RefCell::new(Vec::new()) };
}

enum Held {
    Small(Small),
    Large(Large),
}

/// One exchange's header slots, back in the core's pool when dropped.
pub(crate) struct Slots(Option<Held>);

impl Slots {
    /// Small slots from the pool, or new ones when it has none.
    pub(crate) fn take() -> Slots {
        let kept = LAST.try_with(Cell::take).ok().flatten().or_else(|| {
            FREE_SMALL
                .try_with(|free| free.borrow_mut().pop())
                .ok()
                .flatten()
        });
        Slots(Some(Held::Small(
            kept.unwrap_or_else(|| Box::new(header_storage())),
        )))
    }

    /// Parses the head at the start of `buf` (see [`parse_head`]): into
    /// the small slots, and again into large ones if it has more fields
    /// than they hold and `limits` allows more.
    pub(crate) fn parse<'s, 'b>(
        &'s mut self,
        buf: &'b [u8],
        limits: &Limits,
    ) -> Result<Option<RequestHead<'s, 'b>>, HttpError> {
        if matches!(self.0, Some(Held::Small(_))) && limits.max_headers > SMALL_SLOTS {
            // The borrow checker keeps a borrow that is returned on one
            // path alive on all of them; the error path holds none.
            let this: *mut Slots = self;
            // SAFETY: `this` is `self`; past the match only the owned
            // too-many-fields error was made from it, so no reference from
            // `this` is alive when `self` is used again.
            let first = unsafe { &mut *this };
            match parse_head(buf, first.get(), limits) {
                Err(e) if too_many_fields(&e) => {}
                parsed => return parsed,
            }
            self.grow();
        }
        parse_head(buf, self.get(), limits)
    }

    /// Trades the small slots for large ones.
    fn grow(&mut self) {
        let large = FREE_LARGE
            .try_with(|free| free.borrow_mut().pop())
            .ok()
            .flatten()
            .unwrap_or_else(|| Box::new(header_storage()));
        // The small ones go back to the pool as this drops them.
        drop(Slots(self.0.replace(Held::Large(large))));
    }

    /// The slots, for headers that borrow bytes living `'b`.
    pub(crate) fn get<'b>(&mut self) -> &mut [HeaderSlot<'b>] {
        let slots: *mut [HeaderSlot<'static>] = match self.0.as_mut() {
            Some(Held::Small(small)) => &mut small[..],
            Some(Held::Large(large)) => &mut large[..],
            None => return &mut [],
        };
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
        match self.0.take() {
            Some(Held::Small(small)) => keep_small(small),
            Some(Held::Large(large)) => {
                // A thread that is ending frees them instead.
                let _ = FREE_LARGE.try_with(|free| keep(&mut free.borrow_mut(), large, KEEP_LARGE));
            }
            None => {}
        }
    }
}

fn keep_small(small: Small) {
    // A thread that is ending frees them instead.
    let Ok(previous) = LAST.try_with(|last| last.replace(Some(small))) else {
        return;
    };
    if let Some(previous) = previous {
        let _ = FREE_SMALL.try_with(|free| keep(&mut free.borrow_mut(), previous, KEEP_SMALL));
    }
}

/// Keeps `item` in `free` unless it holds `most` already.
fn keep<T>(free: &mut Vec<T>, item: T, most: usize) {
    if free.len() < most {
        if free.capacity() == 0 {
            // All the room it will need, at once: a new high-water mark of
            // exchanges later allocates nothing for the list.
            free.reserve_exact(most);
        }
        free.push(item);
    }
}
