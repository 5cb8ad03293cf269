//! The connection's I/O plumbing shared by the loop, the request body
//! reader and the response: the socket, the output buffer, one reusable
//! timer, and the per-core stop notification.

use std::cell::{Cell, RefCell};
use std::future::{poll_fn, Future};
use std::io;
use std::pin::{pin, Pin};
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use percore::time::Sleep;
use percore::Connection;

/// Output kept between flushes is freed above this capacity, so a
/// connection that once sent a large response does not hold it while idle.
pub(crate) const KEEP_CAPACITY: usize = 64 * 1024;

/// `start + timeout`, saturating: a configured `Duration::MAX` means "no
/// deadline" rather than an overflow panic. (A century is past the timer
/// wheel's span, which clamps it further.)
pub(crate) fn after(start: Instant, timeout: std::time::Duration) -> Instant {
    const CENTURY: std::time::Duration = std::time::Duration::from_secs(100 * 365 * 86_400);
    start.checked_add(timeout.min(CENTURY)).unwrap_or(start)
}

/// Output up to this size is written behind (see [`Wire::write_behind`]);
/// a larger one is awaited, its write timeout running from its last
/// progress, as a slow reader's large answer needs.
pub(crate) const BEHIND_MAX: usize = 64 * 1024;

/// What ended a [`Wire::wait`].
#[derive(Debug)]
pub(crate) enum Waited<T> {
    /// The future completed.
    Done(T),
    /// The deadline passed first; the future was dropped.
    TimedOut,
    /// The server began to stop first; the future was dropped.
    Stopped,
}

/// A connection's socket, its pending output, and its timer.
///
/// Everything takes `&self` so that the loop, the [`Request`] body reader
/// and the [`Response`] can share it; no borrow of a cell is held across an
/// await, so sharing cannot panic.
///
/// [`Request`]: super::Request
/// [`Response`]: super::Response
pub(crate) struct Wire {
    pub(crate) conn: Connection,
    /// Responses (and a `100 Continue`) not yet written, in order.
    out: Cell<Vec<u8>>,
    /// One timer for the connection's whole life. Deadlines are applied
    /// lazily (see [`Wire::wait`]), so a request costs no timer-wheel work.
    sleep: RefCell<Sleep>,
    /// In milliseconds, rounded up; `u32::MAX` is no bound. A `Duration`
    /// would be 16 bytes in every connection, idle ones too.
    write_timeout_ms: u32,
    /// Why a flush failed (the client left or stopped reading), if one did.
    write_failed: Cell<Option<io::ErrorKind>>,
    /// The current response's head went out before its service returned
    /// ([`Response::flush`]): no interim `100 Continue` may follow it.
    ///
    /// [`Response::flush`]: super::Response::flush
    head_out: Cell<bool>,
}

impl Wire {
    pub(crate) fn new(
        conn: Connection,
        first: Instant,
        write_timeout: std::time::Duration,
    ) -> Self {
        Self {
            conn,
            out: Cell::new(Vec::new()),
            sleep: RefCell::new(percore::time::sleep_until(first)),
            write_timeout_ms: u32::try_from(write_timeout.as_micros().div_ceil(1000))
                .unwrap_or(u32::MAX),
            write_failed: Cell::new(None),
            head_out: Cell::new(false),
        }
    }

    /// The stream, for a connection leaving HTTP (an upgrade); what is
    /// pending in the output is dropped (the caller flushed it).
    pub(crate) fn into_conn(self) -> Connection {
        self.conn
    }

    fn write_timeout(&self) -> std::time::Duration {
        match self.write_timeout_ms {
            u32::MAX => std::time::Duration::MAX,
            ms => std::time::Duration::from_millis(u64::from(ms)),
        }
    }

    /// Whether the current response's head is out (see `head_out`).
    pub(crate) fn head_out(&self) -> bool {
        self.head_out.get()
    }

    /// Marks the current response's head as out, or (`false`) a new
    /// response as begun.
    pub(crate) fn set_head_out(&self, out: bool) {
        self.head_out.set(out);
    }

    /// Whether a [`flush`](Self::flush) failed, so that a service error
    /// that passed its error on can be told from the service's own.
    pub(crate) fn write_failed(&self) -> bool {
        self.write_failed.get().is_some()
    }

    /// Runs `f` on the pending output.
    #[inline]
    pub(crate) fn with_out<R>(&self, f: impl FnOnce(&mut Vec<u8>) -> R) -> R {
        let mut out = self.out.take();
        if out.capacity() == 0 && self.conn.takes_write_behind() {
            // The output buffer went out in the last write behind: one the
            // core kept (an idle connection holds none).
            out = self.conn.write_buf();
        }
        let r = f(&mut out);
        self.out.set(out);
        r
    }

    /// Bytes waiting to be written.
    pub(crate) fn pending(&self) -> usize {
        let out = self.out.take();
        let pending = out.len();
        self.out.set(out);
        pending
    }

    /// Hands all pending output to a write behind, where the stream takes
    /// one (on io_uring: the connection's task is then not woken by the
    /// send's completion, a poll per request); `false` when the caller
    /// must [`flush`](Self::flush) instead: on epoll, after a write error,
    /// while an earlier write behind is out, and for output over
    /// [`BEHIND_MAX`]. The next flush, the next answer and the
    /// connection's end collect it, so no write overtakes it; a write
    /// behind's own error comes from whatever collects it.
    #[inline]
    pub(crate) fn write_behind(&self) -> bool {
        if !self.conn.takes_write_behind() || self.write_failed.get().is_some() {
            return false;
        }
        let out = self.out.take();
        if out.is_empty() {
            self.out.set(out);
            return true;
        }
        if out.len() > BEHIND_MAX {
            self.out.set(out);
            return false;
        }
        match self.conn.write_behind(out) {
            Ok(()) => true,
            Err(out) => {
                self.out.set(out);
                false
            }
        }
    }

    /// Waits for the write behind that is out (if one is), within the
    /// write timeout from now, and keeps its buffer for the next answers.
    ///
    /// # Errors
    ///
    /// As [`flush`](Self::flush).
    pub(crate) async fn settle(&self) -> io::Result<()> {
        if !self.conn.writing_behind() {
            return Ok(());
        }
        let deadline = after(percore::time::now(), self.write_timeout());
        match self.wait(self.conn.written_behind(), deadline, None).await {
            Waited::Done(Ok(buf)) => {
                self.keep(buf);
                Ok(())
            }
            Waited::Done(Err(e)) => {
                self.write_failed.set(Some(e.kind()));
                Err(e)
            }
            Waited::TimedOut | Waited::Stopped => Err(self.timed_out()),
        }
    }

    /// Keeps the emptied buffer of a write behind as the output buffer,
    /// unless output has begun in another one meanwhile.
    fn keep(&self, buf: Option<Vec<u8>>) {
        let Some(buf) = buf.filter(|b| b.capacity() <= KEEP_CAPACITY) else {
            return;
        };
        let out = self.out.take();
        self.out.set(if out.capacity() == 0 { buf } else { out });
    }

    /// Marks the connection's writes as timed out and makes its close a
    /// reset (see `flush`).
    fn timed_out(&self) -> io::Error {
        self.write_failed.set(Some(io::ErrorKind::TimedOut));
        let _ = self.conn.set_linger(Some(std::time::Duration::ZERO));
        io::Error::new(
            io::ErrorKind::TimedOut,
            "write timed out: the client stopped reading",
        )
    }

    /// Writes all pending output, within the write timeout, after the
    /// write behind that is out, if one is.
    ///
    /// # Errors
    ///
    /// The send error, or `TimedOut` when the peer stopped reading (the
    /// connection is then set to reset when closed). The connection cannot
    /// be used after an error (the output is lost): later flushes fail at
    /// once.
    pub(crate) async fn flush(&self) -> io::Result<()> {
        if self.write_failed.get().is_none() && self.conn.writing_behind() {
            self.settle().await?;
        }
        if let Some(kind) = self.write_failed.get() {
            // What follows a lost write must not go out after it, nor be
            // kept (a service that ignores the error and goes on writing
            // would hold its whole body); and such a service must not wait
            // out another write timeout for each flush. The first
            // failure's kind: a timeout stays a timeout.
            drop(self.out.take());
            return Err(io::Error::new(
                kind,
                "an earlier write on this connection failed",
            ));
        }
        let buf = self.out.take();
        if buf.is_empty() {
            self.out.set(buf);
            return Ok(());
        }
        // The write ends with this block: a timed-out one is dropped
        // (cancelled) before the linger below is set.
        let waited = {
            let mut write = pin!(self.conn.write_all(buf));
            // The timeout runs from the write's last progress, as nginx's
            // `send_timeout`: a large answer to a slow but steady reader
            // goes out whole, one to a client that stopped reading is cut
            // off. Most sends complete on their first poll: only one that
            // has to wait reads the clock.
            let mut progress: Option<(usize, Instant)> = None;
            poll_fn(|cx| {
                if let Poll::Ready(done) = write.as_mut().poll(cx) {
                    return Poll::Ready(Waited::Done(done));
                }
                let sent = write.sent();
                let deadline = match progress {
                    Some((at, deadline)) if at == sent => deadline,
                    _ => {
                        let deadline = after(percore::time::now(), self.write_timeout());
                        progress = Some((sent, deadline));
                        deadline
                    }
                };
                self.poll_deadline(deadline, cx).map(|()| Waited::TimedOut)
            })
            .await
        };
        match waited {
            Waited::Done((Ok(()), mut buf)) => {
                buf.clear();
                if buf.capacity() > KEEP_CAPACITY {
                    buf = Vec::new();
                }
                // Anything queued meanwhile (only possible if a service
                // overlapped a body read with a flush) goes after it.
                let queued = self.out.take();
                buf.extend_from_slice(&queued);
                self.out.set(buf);
                Ok(())
            }
            Waited::Done((Err(e), _)) => {
                self.write_failed.set(Some(e.kind()));
                Err(e)
            }
            // Make the coming close a reset: a graceful close would leave
            // the unsent output queued on an orphaned socket, trickled out
            // for minutes to a client that barely reads (nginx's
            // `reset_timedout_connection`). Best effort: if it fails, the
            // close is merely graceful.
            Waited::TimedOut | Waited::Stopped => Err(self.timed_out()),
        }
    }

    /// Sends bytes `pos..pos + len` of `file` with `sendfile`, after the
    /// pending output (which the caller flushed), within the write
    /// timeout from each piece's progress, as [`flush`](Self::flush).
    ///
    /// # Errors
    ///
    /// As `flush`; `UnexpectedEof` if the file ends first (it shrank).
    pub(crate) async fn send_file(
        &self,
        file: &percore::fs::File,
        pos: u64,
        len: u64,
    ) -> io::Result<()> {
        if self.write_failed.get().is_none() && self.conn.writing_behind() {
            self.settle().await?;
        }
        if let Some(kind) = self.write_failed.get() {
            return Err(io::Error::new(
                kind,
                "an earlier write on this connection failed",
            ));
        }
        let (mut pos, end) = (pos, pos.saturating_add(len));
        while pos < end {
            let want = usize::try_from(end - pos).unwrap_or(usize::MAX);
            let deadline = after(percore::time::now(), self.write_timeout());
            let send = pin!(self.conn.send_file(file, pos, want));
            match self.wait(send, deadline, None).await {
                Waited::Done(Ok(0)) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the file shrank while it was sent",
                    ))
                }
                Waited::Done(Ok(n)) => pos += n as u64,
                Waited::Done(Err(e)) => {
                    // Refused before any byte went out (a TLS stream):
                    // the caller may still send another way.
                    if e.kind() != io::ErrorKind::Unsupported {
                        self.write_failed.set(Some(e.kind()));
                    }
                    return Err(e);
                }
                Waited::TimedOut | Waited::Stopped => {
                    self.write_failed.set(Some(io::ErrorKind::TimedOut));
                    let _ = self.conn.set_linger(Some(std::time::Duration::ZERO));
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "write timed out: the client stopped reading",
                    ));
                }
            }
        }
        Ok(())
    }

    /// Polls `fut` until it completes, `deadline` passes, or (with `stop`)
    /// the server begins to stop.
    ///
    /// The timer is lazy: it stays armed at whatever instant it was set to
    /// as long as that is not later than `deadline`, and when it fires for
    /// an older, earlier deadline it is moved to the current one. Keep-alive
    /// deadlines only move forward, so a steady stream of requests never
    /// touches the timer wheel; it fires about once per timeout period.
    pub(crate) fn wait<'w, F: Future + Unpin>(
        &'w self,
        fut: F,
        deadline: Instant,
        stop: Option<&'w StopSlot>,
    ) -> Wait<'w, F> {
        Wait {
            wire: self,
            fut,
            deadline,
            stop,
        }
    }

    fn poll_deadline(&self, deadline: Instant, cx: &mut Context<'_>) -> Poll<()> {
        let mut sleep = self.sleep.borrow_mut();
        if sleep.deadline() > deadline {
            sleep.reset(deadline);
        }
        // Bounded: after a reset to a future deadline the sleep is pending.
        for _ in 0..2 {
            if Pin::new(&mut *sleep).poll(cx).is_pending() {
                return Poll::Pending;
            }
            if percore::time::now() >= deadline {
                return Poll::Ready(());
            }
            sleep.reset(deadline);
        }
        Poll::Pending
    }
}

/// The future of [`Wire::wait`]: written out by hand rather than as an
/// `async fn`, because it is polled twice per request and each layer of
/// generated state machine costs instructions on every poll.
#[must_use = "futures do nothing unless polled"]
pub(crate) struct Wait<'w, F> {
    wire: &'w Wire,
    fut: F,
    deadline: Instant,
    stop: Option<&'w StopSlot>,
}

impl<F: Future + Unpin> Future for Wait<'_, F> {
    type Output = Waited<F::Output>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if let Poll::Ready(v) = Pin::new(&mut this.fut).poll(cx) {
            return Poll::Ready(Waited::Done(v));
        }
        if this.stop.is_some_and(|s| s.poll_stopped(cx)) {
            return Poll::Ready(Waited::Stopped);
        }
        this.wire
            .poll_deadline(this.deadline, cx)
            .map(|()| Waited::TimedOut)
    }
}

/// Per-core registry of connections waiting idle, woken together when the
/// server begins to stop.
///
/// One task per core awaits [`percore::shutdown_signal`] and wakes every
/// registered slot. Connections register here rather than each awaiting
/// `shutdown_signal` themselves because they ask on every pending read and
/// every pending service call: a slot answers a poll by the task it
/// already holds with a flag and a waker comparison, without touching the
/// core's table of shutdown waiters.
#[derive(Debug, Default)]
pub(crate) struct StopWatch {
    stopping: Cell<bool>,
    watching: Cell<bool>,
    slots: RefCell<Slots>,
}

#[derive(Debug, Default)]
struct Slots {
    wakers: Vec<Option<Waker>>,
    free: Vec<usize>,
}

impl StopWatch {
    /// A slot for one connection, freed when dropped. Starts the core's
    /// watcher task on first use (it needs a running core).
    pub(crate) fn register(self: &Rc<Self>) -> StopSlot {
        if !self.watching.replace(true) {
            let watch = self.clone();
            // Detached: it ends at the stop, or is dropped with the core.
            drop(percore::spawn_local(async move {
                percore::shutdown_signal().await;
                watch.stopping.set(true);
                // Waking only queues the task on this core's run queue; no
                // task runs inside `wake`, so holding the borrow is safe.
                for waker in watch.slots.borrow_mut().wakers.iter_mut() {
                    if let Some(w) = waker.take() {
                        w.wake();
                    }
                }
            }));
        }
        let mut slots = self.slots.borrow_mut();
        let index = match slots.free.pop() {
            Some(i) => i,
            None => {
                slots.wakers.push(None);
                slots.wakers.len() - 1
            }
        };
        StopSlot {
            watch: self.clone(),
            index,
            registered: Cell::new(None),
        }
    }
}

/// One connection's registration in the [`StopWatch`].
pub(crate) struct StopSlot {
    watch: Rc<StopWatch>,
    index: usize,
    /// The waker last put in the slot, kept here too: a poll by the same
    /// task then leaves the per-core slot table alone (its line is a cache
    /// miss per request when a core serves many connections).
    /// A `Cell`, not a `RefCell`: its borrow flag would be 8 bytes more in
    /// every connection.
    registered: Cell<Option<Waker>>,
}

impl std::fmt::Debug for StopSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StopSlot")
            .field("index", &self.index)
            .finish_non_exhaustive()
    }
}

impl StopSlot {
    /// Whether the server is stopping; if not, wakes `cx` when it does.
    pub(crate) fn poll_stopped(&self, cx: &mut Context<'_>) -> bool {
        if self.watch.stopping.get() {
            return true;
        }
        let registered = self.registered.take();
        if registered.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            self.registered.set(registered);
            return false;
        }
        let mut slots = self.watch.slots.borrow_mut();
        if let Some(slot) = slots.wakers.get_mut(self.index) {
            *slot = Some(cx.waker().clone());
            self.registered.set(Some(cx.waker().clone()));
        }
        drop(slots);
        // The waker replaced is dropped last, outside the table's borrow.
        drop(registered);
        false
    }
}

impl Drop for StopSlot {
    fn drop(&mut self) {
        let mut slots = self.watch.slots.borrow_mut();
        if let Some(slot) = slots.wakers.get_mut(self.index) {
            *slot = None;
            slots.free.push(self.index);
        }
    }
}
