//! Holding a listener's accepts while its core is overloaded (see
//! [`Handler::overload_bound`](crate::Handler::overload_bound)).
//!
//! A core that cannot keep up and still accepts takes on more than it
//! can serve, and a client it refused comes straight back into its next
//! turn. Left in the kernel's queue instead, a new connection costs the
//! core nothing until a turn ends within the bound; past the queue's
//! length the kernel drops new SYNs, and clients retry later by
//! themselves.

use std::cell::Cell;
use std::time::{Duration, Instant};

use crate::core::context;

/// The longest hold, in bounds.
const HOLD_BOUNDS: u32 = 10;

/// Least time between two "accepting held" warnings of a core.
const WARNING_EVERY: Duration = Duration::from_secs(60);

thread_local! {
    static LAST_WARNING: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// Whether this core is overloaded for `bound`: its last loop turn, or
/// the one under way, ran longer.
pub(super) fn overloaded(bound: Duration) -> bool {
    context::try_with_core(|core| {
        core.track_queue_delay();
        core.queue_delay() > bound || core.waited() > bound
    })
    .unwrap_or(false)
}

/// Waits until a loop turn of this core ends within `bound` (checked
/// every `bound`), or for ten bounds at most: a core kept busy by the
/// connections it has may never run a short turn, and a newcomer then
/// waits a few bounds, not for good.
pub(super) async fn hold(bound: Duration) {
    let now = Instant::now();
    if LAST_WARNING
        .get()
        .is_none_or(|t| now.duration_since(t) >= WARNING_EVERY)
    {
        LAST_WARNING.set(Some(now));
        tracing::warn!(
            bound = ?bound,
            turn = ?context::try_with_core(|core| core.queue_delay()).unwrap_or_default(),
            "core overloaded: new connections wait in the listen queue until a loop turn \
             ends within the bound (`accept_held` in the stats counts the holds)"
        );
    }
    let bound = bound.max(Duration::from_micros(100));
    let until = now + bound * HOLD_BOUNDS;
    loop {
        crate::time::sleep(bound).await;
        if !overloaded(bound) || Instant::now() >= until {
            return;
        }
    }
}
