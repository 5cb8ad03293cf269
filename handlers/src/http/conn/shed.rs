//! Refusing requests while the core is overloaded
//! ([`Config::shed_queue_delay`](crate::http::Config::shed_queue_delay)),
//! and holding the refusals of a client that asks again at once.
//!
//! A refusal says `Retry-After: 1`. A client that asks again on the same
//! connection before that second is over, while the core still refuses,
//! gets its next 503 when the second ends (and up to a second more, see
//! [`spread`]), not at once: it sends nothing meanwhile (it waits for its
//! answer), so a client that ignores the advice costs the core one
//! refusal a second at most instead of keeping it refusing as fast as it
//! can ask. A client or balancer that honours it
//! (or goes to another server) gets every refusal at once. The held
//! answer waits in the turn's future, with the receive buffer given back
//! (see `serve_turn`), so a held connection keeps only its output.

use std::time::Duration;

use super::moment::Moment;
use super::state::{Conn, State};
use crate::http::proto::{BodyKind, RequestHead};
use crate::http::service::Service;
use crate::http::wire::Waited;

/// The wait a refusal asks for (its `Retry-After`), and how long a client
/// that asks again sooner waits for its next refusal.
pub(super) const RETRY_AFTER: Duration = Duration::from_secs(1);

/// What a refusal left the connection to do.
pub(super) enum Refused {
    /// The connection goes on after the 503, from the next request.
    Kept,
    /// The 503 closes the connection (its body was not read).
    Close,
}

/// Whether the core is too far behind to take a new request: the work it
/// runs has waited longer than `bound` (`percore::waited`: since this
/// loop turn began, as its requests were read then, or since an earlier
/// turn whose ready tasks are still queued). A turn that merely followed
/// a long one is not refused whole: the requests at the head of a turn
/// are served, so a core that fell behind still serves what fits in
/// the bound and refuses the rest, instead of refusing whole turns while
/// the refusals themselves keep its turns long. The first call on a core
/// makes its turns measure themselves (a cell set again on each call:
/// cheaper than asking whether it was), for `percore::queue_delay` and
/// the accept hold (`Handler::overload_bound`).
#[inline]
pub(super) fn overloaded(bound: Duration) -> bool {
    percore::track_queue_delay();
    percore::waited() > bound
}

/// A share of [`RETRY_AFTER`] added to each held refusal, a different one
/// each time: clients refused in the same turn (all those that came at
/// once) come back spread over a second, not together, where they would
/// make one long turn that refuses them again with the requests of the
/// clients being served. A Weyl sequence: consecutive values are as far
/// apart as they can be, at the cost of an add.
fn spread() -> Duration {
    thread_local! {
        static NEXT: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    }
    // 2^32 divided by the golden ratio.
    const STEP: u32 = 2_654_435_769;
    let share = NEXT.with(|next| {
        let share = next.get();
        next.set(share.wrapping_add(STEP));
        share
    });
    RETRY_AFTER.mul_f64(f64::from(share) / 4_294_967_296.0)
}

impl<S: Service> Conn<'_, S> {
    /// Answers `head` 503 as shed, and notes in `hold` when that answer
    /// may go out if the connection was refused less than
    /// [`RETRY_AFTER`] before this turn (the latest such time, if the
    /// turn refuses several requests).
    pub(super) fn refuse(
        &self,
        state: &mut State,
        head: &RequestHead<'_, '_>,
        hold: &mut Option<Moment>,
    ) -> Refused {
        // A request without a body is over with its head: the connection
        // stays, as the client asked, so a refusal costs a parse and a
        // short write, not a close, an accept and a handshake when the
        // client comes back.
        let bodiless = matches!(head.body, BodyKind::None | BodyKind::Length(0));
        let keep = state.begin(&self.layer.config, head.keep_alive) && bodiless;
        self.answer_overloaded(head.method == "HEAD", keep);
        if !keep {
            return Refused::Close;
        }
        let held = self.layer.config.shed_hold.then_some(state.refused_at);
        if let Some(Some(last)) = held {
            if Moment::now() < last.after(RETRY_AFTER) {
                let due = last.after(RETRY_AFTER + spread());
                *hold = Some(hold.map_or(due, |h| h.max(due)));
            }
        }
        Refused::Kept
    }

    /// Waits until `until` before a held refusal goes out, or until the
    /// server begins to stop (the next read sees the stop too); then
    /// notes when the connection was last refused.
    pub(super) async fn hold_refusal(&self, state: &mut State, until: Option<Moment>) {
        if let Some(until) = until {
            let stop = (!state.stopping).then_some(&self.stop);
            let pause = std::future::pending::<()>();
            let _: Waited<()> = self.wire.wait(pause, until.instant(), stop).await;
            self.layer.counters.shed_held();
        }
        state.refused_at = Some(Moment::now());
        state.idle_from_now(self.layer.config.idle_timeout);
    }
}
