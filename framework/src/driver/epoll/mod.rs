//! The epoll driver of one core: readiness plus non-blocking syscalls.
//!
//! Every socket is registered once, edge-triggered, for input, output and
//! peer hang-up, when it is created; nothing is re-armed afterwards, so a
//! connection costs one `epoll_ctl` in its life. Edge-triggered works
//! because operations are speculative: a read or write is tried first, and
//! only an `EAGAIN` clears the readiness bit and parks the task until the
//! next edge. A stream read that returns less than it asked for clears the
//! bit as well: the receive queue was empty when it returned, and anything
//! that arrives later raises a new edge, so the `EAGAIN` read that would
//! confirm it is skipped (one syscall less per request-response exchange).
//! Peer hang-up is kept in a bit of its own that only `EAGAIN` clears, so a
//! hang-up reported together with the data is not lost by that shortcut.
//! Level-triggered would wake `epoll_wait` again for every
//! socket with unread data that a busy task has not got to yet.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use crate::slab::Slab;
use crate::stats::CoreStats;
use crate::sys::cvt;

/// `epoll_event.u64` of the core's wake-up eventfd.
const WAKE_TOKEN: u64 = u64::MAX;

/// Names one registered fd.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SourceKey(usize);

/// Which direction an operation waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Interest {
    Read,
    Write,
}

const READABLE: u8 = 1;
const WRITABLE: u8 = 2;
/// The peer hung up (or the socket failed): reads end at once from now on.
const READ_CLOSED: u8 = 4;

struct Source {
    ready: u8,
    read_waker: Option<Waker>,
    write_waker: Option<Waker>,
}

pub(crate) struct Driver {
    epfd: OwnedFd,
    events: Vec<libc::epoll_event>,
    sources: Slab<Source>,
    wake_fd: Arc<OwnedFd>,
    stats: Arc<CoreStats>,
}

impl Driver {
    pub(crate) fn new(wake_fd: Arc<OwnedFd>, stats: Arc<CoreStats>) -> io::Result<Driver> {
        // SAFETY: epoll_create1(2) takes no pointers and only creates a
        // descriptor.
        let epfd = cvt(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        // SAFETY: epoll_create1 just returned this fd and nothing else owns it.
        let epfd = unsafe { OwnedFd::from_raw_fd(epfd) };
        let mut event = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLET) as u32,
            u64: WAKE_TOKEN,
        };
        // SAFETY: both fds are open (owned here and in `wake_fd`); the
        // kernel reads `event`, a live local.
        cvt(unsafe {
            libc::epoll_ctl(
                epfd.as_raw_fd(),
                libc::EPOLL_CTL_ADD,
                wake_fd.as_raw_fd(),
                &mut event,
            )
        })?;
        tracing::info!("epoll ready (edge-triggered)");
        Ok(Driver {
            epfd,
            events: Vec::with_capacity(1024),
            sources: Slab::with_capacity(1024),
            wake_fd,
            stats,
        })
    }

    pub(crate) fn register(&mut self, fd: BorrowedFd<'_>) -> io::Result<SourceKey> {
        let key = self.sources.insert(Source {
            // Optimistic: the first operation tries its syscall straight away.
            ready: READABLE | WRITABLE,
            read_waker: None,
            write_waker: None,
        });
        let mut event = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | libc::EPOLLET) as u32,
            u64: key as u64,
        };
        self.stats.syscalls.add(1);
        // SAFETY: `epfd` is ours and `fd` borrowed, so both are open; the
        // kernel reads `event`, a live local.
        if let Err(e) = cvt(unsafe {
            libc::epoll_ctl(
                self.epfd.as_raw_fd(),
                libc::EPOLL_CTL_ADD,
                fd.as_raw_fd(),
                &mut event,
            )
        }) {
            self.sources.remove(key);
            return Err(e);
        }
        Ok(SourceKey(key))
    }

    /// Forgets a source. The caller closes the fd right after, which removes
    /// it from the epoll set without an `epoll_ctl` once no other descriptor
    /// refers to the same open socket (a `dup`, or a child between `fork`
    /// and `exec`, keeps it registered until it closes too). Until then its
    /// events may still come, under a key that a new source may have taken.
    /// They only mark that source ready, and readiness only lets an
    /// operation try its syscall: a read, write or accept that was not
    /// really ready gets `EAGAIN` and waits again. (A connect in progress
    /// may take such an event for its completion; its `SO_ERROR` is then
    /// still 0, and a failure shows at the first read or write instead.)
    pub(crate) fn deregister(&mut self, key: SourceKey) {
        self.sources.remove(key.0);
    }

    /// Takes `fd` out of the epoll set now (`EPOLL_CTL_DEL`), for a socket
    /// that leaves this core while it stays open: its events must stop
    /// coming here. Its source is forgotten later, by `deregister`.
    pub(crate) fn remove_fd(&mut self, fd: BorrowedFd<'_>) -> io::Result<()> {
        self.stats.syscalls.add(1);
        // SAFETY: `epfd` is ours and `fd` borrowed, so both are open; a
        // deletion reads no event (null is allowed since Linux 2.6.9).
        cvt(unsafe {
            libc::epoll_ctl(
                self.epfd.as_raw_fd(),
                libc::EPOLL_CTL_DEL,
                fd.as_raw_fd(),
                std::ptr::null_mut(),
            )
        })?;
        Ok(())
    }

    /// `Ready` when the last known state allows trying the syscall.
    pub(crate) fn poll_ready(
        &mut self,
        key: SourceKey,
        interest: Interest,
        cx: &mut Context<'_>,
    ) -> Poll<()> {
        let Some(source) = self.sources.get_mut(key.0) else {
            return Poll::Ready(());
        };
        let (bit, slot) = match interest {
            Interest::Read => (READABLE | READ_CLOSED, &mut source.read_waker),
            Interest::Write => (WRITABLE, &mut source.write_waker),
        };
        if source.ready & bit != 0 {
            return Poll::Ready(());
        }
        match slot {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => *slot = Some(cx.waker().clone()),
        }
        Poll::Pending
    }

    /// The syscall said `EAGAIN`: wait for the next edge.
    pub(crate) fn clear_ready(&mut self, key: SourceKey, interest: Interest) {
        if let Some(source) = self.sources.get_mut(key.0) {
            source.ready &= !match interest {
                Interest::Read => READABLE | READ_CLOSED,
                Interest::Write => WRITABLE,
            };
        }
    }

    /// A stream read returned less than it asked for: the receive queue was
    /// empty, so wait for the next edge without confirming with `EAGAIN`.
    /// A hang-up already seen stays readable (see the module docs).
    pub(crate) fn read_drained(&mut self, key: SourceKey) {
        if let Some(source) = self.sources.get_mut(key.0) {
            source.ready &= !READABLE;
        }
    }

    pub(crate) fn count_syscall(&self) {
        self.stats.syscalls.add(1);
    }

    pub(crate) fn in_flight(&self) -> usize {
        0
    }

    /// Waits for readiness up to `timeout` (forever when `None`) and wakes
    /// the tasks whose sockets became ready; returns how many events
    /// came.
    pub(crate) fn park(&mut self, timeout: Option<Duration>) -> u32 {
        let timeout_ms = match timeout {
            None => -1,
            // Round up: waking early would only spin back into the wait.
            Some(t) => t.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as i32,
        };
        self.events.clear();
        self.stats.enters.add(1);
        // SAFETY: `epfd` is ours; the kernel writes at most `capacity`
        // events into the vector's buffer, which has room for that many.
        let res = cvt(unsafe {
            libc::epoll_wait(
                self.epfd.as_raw_fd(),
                self.events.as_mut_ptr(),
                self.events.capacity() as i32,
                timeout_ms,
            )
        });
        let n = match res {
            Ok(n) => n as usize,
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => 0,
            Err(e) => {
                self.stats.errors_driver.add(1);
                tracing::error!(error = %e, "epoll_wait failed");
                std::thread::sleep(Duration::from_millis(1));
                0
            }
        };
        // SAFETY: epoll_wait initialised the first `n` events, n ≤ capacity.
        unsafe { self.events.set_len(n) };
        for i in 0..n {
            let event = self.events[i];
            let (bits, token) = (event.events, event.u64);
            if token == WAKE_TOKEN {
                crate::sys::eventfd_drain(self.wake_fd.as_fd());
                continue;
            }
            let Some(source) = self.sources.get_mut(token as usize) else {
                continue;
            };
            let hup = (libc::EPOLLHUP | libc::EPOLLERR) as u32;
            if bits & (libc::EPOLLRDHUP as u32 | hup) != 0 {
                source.ready |= READ_CLOSED;
            }
            if bits & (libc::EPOLLIN as u32 | libc::EPOLLRDHUP as u32 | hup) != 0 {
                source.ready |= READABLE;
                if let Some(w) = source.read_waker.take() {
                    // A user waker's panic must not lose the events after it.
                    crate::unwind::wake(w);
                }
            }
            if bits & (libc::EPOLLOUT as u32 | hup) != 0 {
                source.ready |= WRITABLE;
                if let Some(w) = source.write_waker.take() {
                    crate::unwind::wake(w);
                }
            }
        }
        // Lossless: at most the vector's capacity, an `i32`.
        n as u32
    }

    /// Whether the last wait may have left ready events in the kernel:
    /// it filled the events buffer.
    pub(crate) fn more_due(&self) -> bool {
        self.events.len() == self.events.capacity()
    }
}
