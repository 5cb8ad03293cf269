//! Whether this kernel takes a byte limit on a multishot receive
//! (`IORING_RECV_MSHOT_LIM`, Linux 6.17), found out once per core at
//! start-up on a socket pair of its own.
//!
//! Asked of the kernel, not inferred from a connection: an `EINVAL` that
//! ends one connection's receive may have other causes, and must not turn
//! the limit off for every connection of the core.

use std::os::fd::{AsFd, AsRawFd};
use std::time::{Duration, Instant};

use io_uring::{cqueue, opcode, types};

use super::buf_ring::BUF_GROUP;
use super::{fault, sqe_fields, Driver, LIMIT_PROBE_TOKEN};

/// How long the probe waits for its receive before it gives up (no limit).
const PROBE_WAIT: Duration = Duration::from_secs(2);

impl Driver {
    /// Whether a multishot receive limited to one byte ends by itself after
    /// that byte. `false` also when the probe cannot run.
    pub(super) fn probe_recv_limit(&mut self) -> bool {
        let Some(ring) = self.buf_ring.clone() else {
            return false;
        };
        let Ok((a, b)) = crate::sys::socket_pair() else {
            return false;
        };
        // SAFETY: one byte from a live buffer, to a socket this owns.
        let sent = unsafe { libc::send(a.as_raw_fd(), b"x".as_ptr().cast(), 1, 0) };
        // The end of stream after it ends the receive, whatever the kernel
        // does with the limit.
        if sent != 1 || crate::sys::shutdown(a.as_fd(), libc::SHUT_WR).is_err() {
            return false;
        }
        let mut sqe = opcode::RecvMulti::new(types::Fd(b.as_raw_fd()), BUF_GROUP).build();
        sqe_fields::limit_multishot(&mut sqe, 1);
        if fault::recv_limit_refused() {
            sqe_fields::poison_recv(&mut sqe);
        }
        // SAFETY: the receive writes only into ring buffers, which the
        // driver owns until its teardown, and `b` stays open until the
        // receive's last completion (waited for below, or `b` is leaked).
        if unsafe { self.push_sqe(&sqe.user_data(LIMIT_PROBE_TOKEN)) }.is_err() {
            self.keep_open_until_submitted(std::rc::Rc::new(b));
            return false;
        }
        let mut first = None;
        let ended = self.await_probe(LIMIT_PROBE_TOKEN, PROBE_WAIT, |cqe| {
            if let Some(bid) = cqueue::buffer_select(cqe.flags) {
                ring.taken();
                // SAFETY: the completion took `bid` out of the ring for this
                // receive, whose data nobody reads.
                unsafe { ring.recycle(bid) };
            }
            first.get_or_insert((cqe.res, cqueue::more(cqe.flags)));
            !cqueue::more(cqe.flags)
        });
        drop(a);
        if !ended {
            // The receive may still complete into a ring buffer: its socket
            // stays open for the life of the process rather than hand its
            // number to another socket that the receive would then read.
            tracing::warn!("the multishot receive limit probe did not end; no limit");
            std::mem::forget(b);
            return false;
        }
        drop(b);
        let limited = first == Some((1, false));
        if !limited {
            self.refuse_recv_limit();
        }
        tracing::debug!(?first, limited, "multishot receive limit probe");
        limited
    }
}

impl Driver {
    /// Waits, for at most `wait`, for the completions of a start-up probe
    /// that carry `token`, handing each to `take` until it says the probe
    /// is over; returns whether it did. Other completions are dropped:
    /// nothing else is in flight while a core starts.
    pub(super) fn await_probe(
        &mut self,
        token: u64,
        wait: Duration,
        mut take: impl FnMut(super::Cqe) -> bool,
    ) -> bool {
        let deadline = Instant::now() + wait;
        loop {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            if self
                .enter
                .enter(&mut self.ring, true, false, Some(deadline - now))
                .is_err()
            {
                return false;
            }
            let mut over = false;
            for cqe in self.ring.completion() {
                if cqe.user_data() == token && !over {
                    over = take(super::Cqe {
                        res: cqe.result(),
                        flags: cqe.flags(),
                    });
                }
            }
            if over {
                return true;
            }
        }
    }
}
