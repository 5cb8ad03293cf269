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
//! use percore::net::TcpStream;
//! use percore::time::timeout;
//! use percore::{Connection, Handler};
//!
//! struct Relay {
//!     backend: SocketAddr,
//! }
//!
//! /// Copies `from` to `to` until `from` ends, then passes the end on.
//! async fn pump(from: &TcpStream, to: &TcpStream) -> io::Result<()> {
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
use std::pin::{pin, Pin};
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
pub async fn join<A: Future, B: Future>(a: A, b: B) -> (A::Output, B::Output) {
    match try_join(infallible(a), infallible(b)).await {
        Ok(both) => both,
        Err(never) => match never {},
    }
}

/// `future`'s output as a success that cannot fail, for [`join`].
async fn infallible<F: Future>(future: F) -> Result<F::Output, Infallible> {
    Ok(future.await)
}

/// Runs both futures until both succeed, or until one fails: then the
/// other is dropped (its I/O cancelled) and that error is returned.
///
/// The [module docs](self) show a TCP relay built on it.
pub async fn try_join<A, B, T, U, E>(a: A, b: B) -> Result<(T, U), E>
where
    A: Future<Output = Result<T, E>>,
    B: Future<Output = Result<U, E>>,
{
    let (mut a, mut b) = (pin!(a), pin!(b));
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
pub async fn select<A: Future, B: Future>(a: A, b: B) -> Either<A::Output, B::Output> {
    let (mut a, mut b) = (pin!(a), pin!(b));
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
