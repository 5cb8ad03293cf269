//! Running a few futures at once inside one task: [`join`], [`try_join`]
//! and [`select`].
//!
//! A handler that talks to other servers often has two or three things to
//! do at the same time: ask two backends and combine the answers, relay
//! bytes both ways between a client and a backend, wait for an answer or
//! a signal. [`spawn_local`](crate::spawn_local) runs such work as tasks of
//! their own, but a task needs `'static` futures (streams shared through
//! `Rc`s), and it outlives the handler that spawned it: when the handler
//! returns, fails or is cancelled, the task runs on, holding its sockets.
//!
//! These combinators run their futures inside the calling task instead.
//! The futures may borrow the handler's streams and state; a future that is
//! no longer needed (the loser of a [`select`], the rest of a
//! [`try_join`] after an error, everything when the caller itself is
//! dropped) is dropped, which cancels its I/O as percore's operations
//! always are: the kernel's buffers stay alive until the kernel is done
//! with them, and a dropped read loses no data.
//!
//! A wake-up of any one future polls both (for two or three futures that
//! is cheaper than a waker each), each first on every other poll: a task
//! may complete only so much I/O per poll before it yields, and a future
//! whose I/O is always ready (a bulk stream) would otherwise spend all of
//! it every time and starve the other. Nest them for more
//! (`join(a, join(b, c))`).
//!
//! The futures take turns on one thread, so they may share the handler's
//! per-core state in `Cell`s and `RefCell`s, but a `RefCell` borrow must
//! not be held across an `.await`: the other future runs in the pause and
//! its own borrow panics. A borrow in a `match` scrutinee lives until the
//! end of the `match`; take the value out first:
//!
//! ```no_run
//! # use std::cell::RefCell;
//! # use std::net::SocketAddr;
//! # use percore::net::TcpStream;
//! # #[allow(dead_code)]
//! # async fn f(pool: &RefCell<Vec<TcpStream>>, addr: SocketAddr) -> std::io::Result<TcpStream> {
//! let pooled = pool.borrow_mut().pop(); // the borrow ends here
//! let conn = match pooled {
//!     Some(conn) => conn,
//!     None => TcpStream::connect(addr).await?,
//! };
//! # Ok(conn)
//! # }
//! ```
//!
//! A TCP relay, both directions at once, ending as soon as either side
//! fails:
//!
//! ```no_run
//! use std::io;
//! use std::net::SocketAddr;
//! use std::time::Duration;
//!
//! use percore::future::try_join;
//! use percore::net::{Stream, TcpStream};
//! use percore::time::timeout;
//! use percore::{Connection, Handler};
//!
//! struct Relay {
//!     backend: SocketAddr,
//! }
//!
//! /// Copies `from` to `to` until `from` ends, then passes the end on.
//! async fn pump(from: &Stream, to: &Stream) -> io::Result<()> {
//!     while let Some(buf) = from.read().await? {
//!         let (res, _) = to.write_all(buf).await;
//!         res?;
//!     }
//!     to.shutdown_write()
//! }
//!
//! impl Handler for Relay {
//!     async fn serve(&self, client: Connection) -> io::Result<()> {
//!         let backend = timeout(Duration::from_secs(1), TcpStream::connect(self.backend)).await??;
//!         // A reset on either side ends both directions (the other pump is
//!         // dropped) and closes both sockets when `serve` returns.
//!         try_join(pump(&client, &backend), pump(&backend, &client)).await?;
//!         Ok(())
//!     }
//! }
//!
//! fn main() -> io::Result<()> {
//!     let backend = "127.0.0.1:6379".parse().unwrap();
//!     percore::Server::builder().serve(move |_core| Relay { backend })
//! }
//! ```

use std::convert::Infallible;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::task::{Context, Poll};

/// Runs both futures until both complete; returns both outputs.
///
/// # Examples
///
/// Two backend requests at once, under one deadline:
///
/// ```no_run
/// # #[allow(dead_code)]
/// # async fn ask(_: &str) -> std::io::Result<Vec<u8>> { Ok(Vec::new()) }
/// # #[allow(dead_code)]
/// # async fn f() -> std::io::Result<()> {
/// use std::time::Duration;
/// use percore::future::join;
/// use percore::time::timeout;
///
/// let (user, cart) = timeout(Duration::from_millis(200), join(ask("user"), ask("cart"))).await?;
/// # let _ = (user?, cart?);
/// # Ok(())
/// # }
/// ```
#[expect(
    clippy::manual_async_fn,
    reason = "an `async fn` would hold each future twice: its arguments move into locals"
)]
pub fn join<A: Future, B: Future>(
    mut a: A,
    mut b: B,
) -> impl Future<Output = (A::Output, B::Output)> {
    async move {
        // Not `pin!`, which would move each into a local: rustc then keeps
        // the future twice in the state, beside the captured one.
        // SAFETY: `a` and `b` live in this block's state, pinned while it
        // runs, and are shadowed here, so nothing can move them again.
        let (a, b) = unsafe { (Pin::new_unchecked(&mut a), Pin::new_unchecked(&mut b)) };
        match try_join_pinned(Pin::new(&mut NeverFails(a)), Pin::new(&mut NeverFails(b))).await {
            Ok(both) => both,
            Err(never) => match never {},
        }
    }
}

/// A future's output as a success that cannot fail, for [`join`].
struct NeverFails<'a, F>(Pin<&'a mut F>);

impl<F: Future> Future for NeverFails<'_, F> {
    type Output = Result<F::Output, Infallible>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.0.as_mut().poll(cx).map(Ok)
    }
}

/// Runs both futures until both succeed, or until one fails: then the
/// other is dropped (its I/O cancelled) and that error is returned.
///
/// The [module docs](self) show a TCP relay built on it.
#[expect(
    clippy::manual_async_fn,
    reason = "an `async fn` would hold each future twice: its arguments move into locals"
)]
pub fn try_join<A, B, T, U, E>(mut a: A, mut b: B) -> impl Future<Output = Result<(T, U), E>>
where
    A: Future<Output = Result<T, E>>,
    B: Future<Output = Result<U, E>>,
{
    async move {
        // SAFETY: as in `join`: pinned in this block's state, shadowed.
        let (a, b) = unsafe { (Pin::new_unchecked(&mut a), Pin::new_unchecked(&mut b)) };
        try_join_pinned(a, b).await
    }
}

/// [`try_join`] of futures pinned by the caller.
async fn try_join_pinned<A, B, T, U, E>(mut a: Pin<&mut A>, mut b: Pin<&mut B>) -> Result<(T, U), E>
where
    A: Future<Output = Result<T, E>>,
    B: Future<Output = Result<U, E>>,
{
    let (mut out_a, mut out_b) = (None, None);
    let mut b_first = false;
    poll_fn(|cx| {
        b_first = !b_first;
        if b_first {
            try_poll_into(b.as_mut(), &mut out_b, cx)?;
            try_poll_into(a.as_mut(), &mut out_a, cx)?;
        } else {
            try_poll_into(a.as_mut(), &mut out_a, cx)?;
            try_poll_into(b.as_mut(), &mut out_b, cx)?;
        }
        both(&mut out_a, &mut out_b).map(Ok)
    })
    .await
}

/// The output of [`select`]: which future finished first, and its output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Either<A, B> {
    /// The first future finished first.
    Left(A),
    /// The second future finished first.
    Right(B),
}

/// Either of two futures is a future of their common output: code that
/// picks one of two futures at run time (a router choosing a route) holds
/// the one it picked inline, with no box.
impl<A, B> Future for Either<A, B>
where
    A: Future,
    B: Future<Output = A::Output>,
{
    type Output = A::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<A::Output> {
        // `Either` has no `Drop` that could move it, and is `Unpin` only
        // when both futures are: its variants are pinned structurally.
        // SAFETY: the pinned `Either` is never moved out of here; only its
        // live variant is pinned in place, below.
        let this = unsafe { self.get_unchecked_mut() };
        match this {
            // SAFETY: see above; `a` stays where the pinned `Either` is.
            Either::Left(a) => unsafe { Pin::new_unchecked(a) }.poll(cx),
            // SAFETY: as for `Left`.
            Either::Right(b) => unsafe { Pin::new_unchecked(b) }.poll(cx),
        }
    }
}

/// Runs both futures until one completes; returns its output and drops
/// the other (its I/O cancelled). When both are ready, either may win
/// (see the [module docs](self) for the order of polls).
///
/// # Examples
///
/// A hedged request: the first of two replicas to answer wins, and the
/// slower one's exchange is dropped (its connection closed):
///
/// ```no_run
/// # #[allow(dead_code)]
/// # async fn ask(_: std::net::SocketAddr) -> std::io::Result<Vec<u8>> { Ok(Vec::new()) }
/// # #[allow(dead_code)]
/// # async fn f(primary: std::net::SocketAddr, replica: std::net::SocketAddr) -> std::io::Result<()> {
/// use percore::future::{select, Either};
///
/// let answer = match select(ask(primary), ask(replica)).await {
///     Either::Left(answer) | Either::Right(answer) => answer?,
/// };
/// # let _ = answer;
/// # Ok(())
/// # }
/// ```
#[expect(
    clippy::manual_async_fn,
    reason = "an `async fn` would hold each future twice: its arguments move into locals"
)]
pub fn select<A: Future, B: Future>(
    mut a: A,
    mut b: B,
) -> impl Future<Output = Either<A::Output, B::Output>> {
    async move {
        // SAFETY: as in `join`: pinned in this block's state, shadowed.
        let (a, b) = unsafe { (Pin::new_unchecked(&mut a), Pin::new_unchecked(&mut b)) };
        select_pinned(a, b).await
    }
}

/// [`select`] of futures pinned by the caller.
async fn select_pinned<A: Future, B: Future>(
    mut a: Pin<&mut A>,
    mut b: Pin<&mut B>,
) -> Either<A::Output, B::Output> {
    let mut b_first = false;
    poll_fn(|cx| {
        b_first = !b_first;
        if b_first {
            if let Poll::Ready(out) = b.as_mut().poll(cx) {
                return Poll::Ready(Either::Right(out));
            }
        }
        if let Poll::Ready(out) = a.as_mut().poll(cx) {
            return Poll::Ready(Either::Left(out));
        }
        if b_first {
            Poll::Pending
        } else {
            b.as_mut().poll(cx).map(Either::Right)
        }
    })
    .await
}

/// Polls `future` unless it has already given its output; its error, if
/// it fails.
fn try_poll_into<F, T, E>(
    future: Pin<&mut F>,
    out: &mut Option<T>,
    cx: &mut Context<'_>,
) -> Result<(), E>
where
    F: Future<Output = Result<T, E>>,
{
    if out.is_none() {
        if let Poll::Ready(value) = future.poll(cx) {
            *out = Some(value?);
        }
    }
    Ok(())
}

/// Both outputs once both are in; until then they stay where they are.
fn both<T, U>(a: &mut Option<T>, b: &mut Option<U>) -> Poll<(T, U)> {
    match (a.take(), b.take()) {
        (Some(a), Some(b)) => Poll::Ready((a, b)),
        (left_a, left_b) => {
            *a = left_a;
            *b = left_b;
            Poll::Pending
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A future that keeps 4 KiB across an await.
    async fn holds_4k() -> Result<u8, ()> {
        let state = [1u8; 4096];
        std::future::ready(()).await;
        Ok(std::hint::black_box(&state)[0])
    }

    /// Each combinator holds its two futures once, not a copy beside
    /// each (which `pin!` on an argument gives).
    #[test]
    fn the_combinators_hold_each_future_once() {
        let one = std::mem::size_of_val(&holds_4k());
        let at_most = 2 * one + 256;
        let sizes = [
            std::mem::size_of_val(&join(holds_4k(), holds_4k())),
            std::mem::size_of_val(&try_join(holds_4k(), holds_4k())),
            std::mem::size_of_val(&select(holds_4k(), holds_4k())),
        ];
        assert!(
            sizes.iter().all(|&s| s <= at_most),
            "{sizes:?} for two of {one}"
        );
    }
}
