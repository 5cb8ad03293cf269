//! A future in a per-core pooled allocation, for the parts of a
//! connection that only run while it is busy.
//!
//! A connection's task holds its future for as long as the connection is
//! open, and a future is as large as its largest state: the states of an
//! exchange (the request, the response, the service's own future) made an
//! idle keep-alive connection cost about 2 KiB. Put in a [`Pooled`]
//! future instead, those states take room only while a read's requests
//! are served; the task keeps a pointer. The allocations are kept per
//! core and per layout, so a steady state allocates nothing.

use std::alloc::{self, Layout};
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::ptr::{self, NonNull};
use std::task::{Context, Poll};

/// Allocations of one layout a core keeps: as many as were in use at
/// once, up to this many. Few: those made for a spike would pin the
/// pages they are spread on.
const KEEP: usize = 32;

/// The kept allocations of one layout.
struct Bucket {
    layout: Layout,
    free: Vec<NonNull<u8>>,
}

impl Drop for Bucket {
    fn drop(&mut self) {
        for raw in self.free.drain(..) {
            // SAFETY: every pointer kept here came from `alloc::alloc` with
            // this bucket's layout and is owned by the bucket alone.
            unsafe { alloc::dealloc(raw.as_ptr(), self.layout) };
        }
    }
}

/// The last allocation given back, freed with its thread.
struct Last(Cell<Option<(Layout, NonNull<u8>)>>);

impl Drop for Last {
    fn drop(&mut self) {
        if let Some((layout, raw)) = self.0.take() {
            // SAFETY: as for a bucket's: from `alloc::alloc` with
            // `layout`, owned by this slot alone.
            unsafe { alloc::dealloc(raw.as_ptr(), layout) };
        }
    }
}

thread_local! {
    /// The last allocation given back: the next turn of a connection
    /// takes it with a compare and a swap, where the buckets cost a
    /// borrow and a search.
    static LAST: Last = const { Last(Cell::new(None)) };
    /// A handful of layouts per core: one per busy-part type in use.
    static BUCKETS: RefCell<Vec<Bucket>> = const { RefCell::new(Vec::new()) };
}

/// A future in an allocation taken from the core's pool, given back when
/// the future is dropped.
pub(crate) struct Pooled<F> {
    ptr: NonNull<F>,
}

impl<F: Future> Pooled<F> {
    #[cfg(test)]
    pub(crate) fn new(future: F) -> Self {
        Self::with(|| future)
    }

    /// The future `make` returns, made once its room is taken: inlined,
    /// the future is then built in place, where a future made first would
    /// be copied in whole (most of it uninitialised states).
    #[inline(always)]
    pub(crate) fn with(make: impl FnOnce() -> F) -> Self {
        let layout = Layout::new::<F>();
        let raw = if layout.size() == 0 {
            NonNull::<F>::dangling().cast::<u8>()
        } else {
            take(layout).unwrap_or_else(|| allocate(layout))
        };
        let ptr = raw.cast::<F>();
        // SAFETY: `ptr` is valid for a write of `F` (an allocation of its
        // layout, or dangling and well aligned for a zero-sized one), and
        // holds nothing yet. Should `make` panic, the allocation leaks.
        unsafe { ptr.as_ptr().write(make()) };
        Pooled { ptr }
    }
}

impl<F: Future> Future for Pooled<F> {
    type Output = F::Output;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: the `F` at `ptr` is live and owned by this `Pooled`,
        // which never moves it: it stays where it is until dropped in
        // place, so pinning it is sound whether or not `self` moves.
        let future = unsafe { Pin::new_unchecked(&mut *self.ptr.as_ptr()) };
        future.poll(cx)
    }
}

impl<F> Drop for Pooled<F> {
    fn drop(&mut self) {
        let layout = Layout::new::<F>();
        // SAFETY: `ptr` holds a live `F`, dropped here once. If its drop
        // panics, the allocation leaks, which is safe.
        unsafe { ptr::drop_in_place(self.ptr.as_ptr()) };
        if layout.size() != 0 {
            give_back(self.ptr.cast::<u8>(), layout);
        }
    }
}

fn allocate(layout: Layout) -> NonNull<u8> {
    // SAFETY: `layout` has a non-zero size (checked by the caller).
    let raw = unsafe { alloc::alloc(layout) };
    NonNull::new(raw).unwrap_or_else(|| alloc::handle_alloc_error(layout))
}

#[inline]
fn take(layout: Layout) -> Option<NonNull<u8>> {
    let last = LAST.try_with(|last| match last.0.take() {
        Some((kept, raw)) if kept == layout => Some(raw),
        other => {
            last.0.set(other);
            None
        }
    });
    if let Ok(Some(raw)) = last {
        return Some(raw);
    }
    BUCKETS
        .try_with(|buckets| {
            let mut buckets = buckets.borrow_mut();
            let bucket = buckets.iter_mut().find(|b| b.layout == layout)?;
            bucket.free.pop()
        })
        .ok()
        .flatten()
}

#[inline]
fn give_back(raw: NonNull<u8>, layout: Layout) {
    let Ok(older) = LAST.try_with(|last| last.0.replace(Some((layout, raw)))) else {
        // The thread is ending.
        // SAFETY: `raw` came from `alloc::alloc` with `layout`, its value
        // was dropped, and no one else holds it.
        unsafe { alloc::dealloc(raw.as_ptr(), layout) };
        return;
    };
    let Some((layout, raw)) = older else {
        return;
    };
    let kept = BUCKETS.try_with(|buckets| {
        let mut buckets = buckets.borrow_mut();
        let index = match buckets.iter().position(|b| b.layout == layout) {
            Some(index) => index,
            None => {
                // Room for all it keeps at once: a new high-water mark of
                // busy connections later allocates nothing for the list.
                buckets.reserve(4);
                buckets.push(Bucket {
                    layout,
                    free: Vec::with_capacity(KEEP),
                });
                buckets.len() - 1
            }
        };
        let free = &mut buckets[index].free;
        if free.len() < KEEP {
            free.push(raw);
            true
        } else {
            false
        }
    });
    if kept != Ok(true) {
        // SAFETY: `raw` came from `alloc::alloc` with `layout`, its value
        // was dropped, and no one else holds it.
        unsafe { alloc::dealloc(raw.as_ptr(), layout) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;
    use std::task::Waker;

    fn poll<F: Future>(f: &mut Pooled<F>) -> Poll<F::Output> {
        Pin::new(f).poll(&mut Context::from_waker(Waker::noop()))
    }

    #[test]
    fn runs_drops_and_reuses_its_allocation() {
        let make = |held: Option<Rc<()>>| async move {
            let _held = held;
            [7u8; 1000]
        };
        let dropped = Rc::new(());
        let mut first = Pooled::new(make(Some(dropped.clone())));
        let first_at = first.ptr.cast::<u8>();
        assert_eq!(poll(&mut first).map(|a| a[999]), Poll::Ready(7));
        drop(first);
        assert_eq!(
            Rc::strong_count(&dropped),
            1,
            "the future's captures dropped"
        );
        let second = Pooled::new(make(None));
        assert_eq!(
            second.ptr.cast::<u8>(),
            first_at,
            "the same allocation again"
        );
    }

    #[test]
    fn an_unpolled_future_is_dropped_too() {
        let dropped = Rc::new(());
        let held = dropped.clone();
        drop(Pooled::new(async move { drop(held) }));
        assert_eq!(Rc::strong_count(&dropped), 1);
    }

    #[test]
    fn keeps_a_bounded_number() {
        let make = || async { [1u64; 33] };
        let layout = Layout::for_value(&make());
        let many: Vec<_> = (0..KEEP + 10).map(|_| Pooled::new(make())).collect();
        drop(many);
        let kept = BUCKETS.with(|b| {
            let buckets = b.borrow();
            buckets
                .iter()
                .find(|b| b.layout == layout)
                .map(|b| b.free.len())
        });
        assert_eq!(kept, Some(KEEP));
    }
}
