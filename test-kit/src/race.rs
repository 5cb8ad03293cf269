//! Racing a future against a deadline, to drop it with its operation in
//! flight at a random point.

use std::time::Duration;

use crate::{within_polls, Rng};

/// A random deadline for a race: a number of polls (0–699) or a timer of
/// 0–2 ms.
#[derive(Debug, Clone, Copy)]
pub enum Deadline {
    /// After this many polls.
    Polls(usize),
    /// After this long.
    Timer(Duration),
}

impl Deadline {
    /// One of either kind, drawn from `rng`.
    pub fn random(rng: &mut Rng) -> Deadline {
        if rng.between(0, 3) == 0 {
            Deadline::Timer(Duration::from_micros(rng.between(0, 2000) as u64))
        } else {
            Deadline::Polls(rng.between(0, 699))
        }
    }

    /// Runs `fut` until it finishes (`Some`) or the deadline passes
    /// (`None`, and `fut` is dropped with its operation in flight).
    pub async fn race<F: std::future::Future>(self, fut: F) -> Option<F::Output> {
        match self {
            Deadline::Polls(n) => within_polls(n, fut).await,
            Deadline::Timer(d) => percore::time::timeout(d, fut).await.ok(),
        }
    }
}

/// Runs two futures concurrently on the current task; both outputs.
pub async fn join2<A: std::future::Future, B: std::future::Future>(
    a: A,
    b: B,
) -> (A::Output, B::Output) {
    let (mut a, mut b) = (std::pin::pin!(a), std::pin::pin!(b));
    let (mut ra, mut rb) = (None, None);
    std::future::poll_fn(|cx| {
        if ra.is_none() {
            if let std::task::Poll::Ready(v) = a.as_mut().poll(cx) {
                ra = Some(v);
            }
        }
        if rb.is_none() {
            if let std::task::Poll::Ready(v) = b.as_mut().poll(cx) {
                rb = Some(v);
            }
        }
        if ra.is_some() && rb.is_some() {
            std::task::Poll::Ready((ra.take().expect("set"), rb.take().expect("set")))
        } else {
            std::task::Poll::Pending
        }
    })
    .await
}
