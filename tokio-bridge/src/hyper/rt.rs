//! hyper's executor and timer on a percore core.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// hyper's executor: spawns on the current core ([`percore::spawn_local`]),
/// so the futures need not be `Send`, inside [`Compat`](crate::Compat), so
/// they may use tokio resources as the connection's own task does. Only
/// HTTP/2 (a task a stream) and client connections spawn; a server's
/// HTTP/1 connection runs in its handler's task.
///
/// Needs the `hyper` feature.
#[derive(Debug, Clone, Copy, Default)]
pub struct Exec;

impl<F> hyper::rt::Executor<F> for Exec
where
    F: Future + 'static,
    F::Output: 'static,
{
    fn execute(&self, future: F) {
        // Detached: the task runs to its end, or until the core stops.
        drop(percore::spawn_local(crate::Compat::new(future)));
    }
}

/// hyper's timer: the current core's timers ([`percore::time`]), for
/// hyper's header-read and keep-alive deadlines.
///
/// Needs the `hyper` feature.
///
/// Its sleeps must be created and polled on a core thread, as hyper does
/// with a connection that a handler serves.
#[derive(Debug, Clone, Copy, Default)]
pub struct Timer;

impl hyper::rt::Timer for Timer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(Sleep(percore::time::sleep(duration)))
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(Sleep(percore::time::sleep_until(deadline)))
    }
}

/// A percore sleep as hyper's.
struct Sleep(percore::time::Sleep);

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        Pin::new(&mut self.0).poll(cx)
    }
}

impl hyper::rt::Sleep for Sleep {}
