//! A core's TLS handshakes in progress: at most a set number, and when
//! they are all taken a newcomer takes the place of the oldest one that
//! has not sent a byte yet, or else of the oldest one.
//!
//! Refusing the newcomer instead would let anyone lock TLS clients out:
//! a thousand connections that never send a byte would hold every place
//! until the handshake timeout, and reopened as they close, for ever.
//! Taking the oldest silent connection's place costs a real client
//! nothing (its ClientHello follows its connect at once, so it leaves the
//! silent ones within a round trip), and an attacker's connections
//! then only push out each other. When none is silent (a flood that
//! sends the start of a ClientHello, or a whole one, and stalls), the
//! oldest handshake goes: a client is then pushed out only after the
//! limit's worth of newer connections came while it was shaking hands,
//! which a real handshake (two round trips) outlasts, where refusing
//! would lock it out for the whole timeout.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::future::{poll_fn, Future};
use std::pin::pin;
use std::rc::Rc;
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use crate::core::context;

/// One handshake's place, as its task and the eviction see it.
#[derive(Default)]
struct Place {
    /// Set when a newcomer took this place: the task ends at its next
    /// poll, closing the connection.
    evicted: Cell<bool>,
    /// The handshake task's waker, to end it at once.
    waker: RefCell<Option<Waker>>,
}

/// The places of one core, by age (the sequence number of their arrival).
#[derive(Default)]
struct Places {
    next: u64,
    /// Connections that have not sent a byte yet: evicted first.
    silent: BTreeMap<u64, Rc<Place>>,
    /// Connections whose handshake has begun.
    started: BTreeMap<u64, Rc<Place>>,
    /// Evictions since the last debug line, and when it was written.
    unlogged: u64,
    last_log: Option<Instant>,
}

thread_local! {
    static PLACES: RefCell<Places> = RefCell::default();
}

/// Least time between two debug lines about evictions of a core: under a
/// flood there is one per connection.
const LOG_EVERY: Duration = Duration::from_secs(1);

/// One of this core's handshakes in progress, counted until dropped.
pub(super) struct Handshaking {
    seq: u64,
    place: Rc<Place>,
}

impl Handshaking {
    /// Takes a place among at most `max` handshakes, evicting the oldest
    /// silent one (else the oldest) when they are all taken.
    pub(super) fn enter(max: usize) -> Handshaking {
        PLACES.with(|places| {
            let mut places = places.borrow_mut();
            if places.silent.len() + places.started.len() >= max {
                places.evict_oldest(max);
            }
            let seq = places.next;
            places.next += 1;
            let place = Rc::new(Place::default());
            places.silent.insert(seq, place.clone());
            Handshaking { seq, place }
        })
    }

    /// The client has sent its first bytes: this place is evicted only
    /// when no silent one is left.
    pub(super) fn started(&self) {
        PLACES.with(|places| {
            let mut places = places.borrow_mut();
            if let Some(place) = places.silent.remove(&self.seq) {
                places.started.insert(self.seq, place);
            }
        });
    }

    /// Runs `work` unless this place is evicted first (`None`).
    pub(super) async fn unless_evicted<F: Future>(&self, work: F) -> Option<F::Output> {
        let mut work = pin!(work);
        poll_fn(|cx| {
            if self.place.evicted.get() {
                return Poll::Ready(None);
            }
            if let Poll::Ready(out) = work.as_mut().poll(cx) {
                return Poll::Ready(Some(out));
            }
            let mut waker = self.place.waker.borrow_mut();
            match &*waker {
                Some(w) if w.will_wake(cx.waker()) => {}
                _ => *waker = Some(cx.waker().clone()),
            }
            Poll::Pending
        })
        .await
    }
}

impl Drop for Handshaking {
    fn drop(&mut self) {
        // A thread that is ending has no places left to free.
        let _ = PLACES.try_with(|places| {
            let mut places = places.borrow_mut();
            if places.silent.remove(&self.seq).is_none() {
                places.started.remove(&self.seq);
            }
        });
    }
}

impl Places {
    /// Frees the place of the oldest silent handshake, or of the oldest
    /// one when none is silent, and wakes its task to close it.
    fn evict_oldest(&mut self, max: usize) {
        let (place, silent) = match self.silent.pop_first() {
            Some((_, place)) => (place, true),
            None => match self.started.pop_first() {
                Some((_, place)) => (place, false),
                None => return,
            },
        };
        place.evicted.set(true);
        if let Some(w) = place.waker.borrow_mut().take() {
            w.wake();
        }
        context::try_with_core(|core| core.shared.stats.tls_evicted.add(1));
        self.unlogged += 1;
        let now = Instant::now();
        if self
            .last_log
            .is_none_or(|t| now.duration_since(t) >= LOG_EVERY)
        {
            self.last_log = Some(now);
            tracing::debug!(
                max,
                evicted = self.unlogged,
                last_was_silent = silent,
                "TLS handshake places full: closed the oldest waiting connections \
                 (`tls_evicted` in the stats counts them)"
            );
            self.unlogged = 0;
        }
    }
}
