//! The driver's side of a write behind (see `op::send_behind`): its
//! slot, its SQE, what its completions do, and the spare buffers of
//! those that went out.

use std::task::{Poll, Waker};

use io_uring::{opcode, types};

use super::ops::{self, Op, OpKind, OpState, BEHIND_DONE, BEHIND_ZERO};
use super::{Cqe, Driver, OpKey, Retained, SPARE_WRITES, SPARE_WRITE_MAX};

impl Driver {
    /// Queues a write behind of the whole of `buf` to `fd`, in `slot` if
    /// that is `fd`'s write behind that went out (a connection's slot
    /// serves all its writes behind), in a new slot otherwise: the driver
    /// sends the rest after a partial send, and tells its end to
    /// [`poll_behind`](Self::poll_behind). Nobody is woken when it
    /// succeeds.
    ///
    /// # Safety
    ///
    /// `fd` stays open while the slot is `Behind`: its owner releases the
    /// slot ([`release_behind`](Self::release_behind), which cancels a
    /// send under way) before it closes the socket, and keeps the socket
    /// open until the SQE is submitted.
    pub(crate) unsafe fn push_behind(
        &mut self,
        slot: Option<OpKey>,
        fd: std::os::fd::RawFd,
        buf: Vec<u8>,
    ) -> OpKey {
        let sqe = opcode::Send::new(types::Fd(fd), buf.as_ptr(), buf.len() as u32)
            .flags(libc::MSG_NOSIGNAL)
            .build();
        let state = OpState::Behind {
            waker: None,
            fd,
            sent: 0,
            end: 0,
        };
        let reused = slot.filter(|key| self.behind_over(*key, fd) == Some(ops::BEHIND_DONE));
        let key = match reused.and_then(|key| Some((key, self.ops.get_mut(key.0)?))) {
            Some((key, op)) => {
                op.state = state;
                op.retained = Retained::Behind(buf);
                key
            }
            None => OpKey(self.ops.insert(Op {
                kind: OpKind::Send,
                state,
                retained: Retained::Behind(buf),
            })),
        };
        // SAFETY: the SQE points at the slot's buffer, whose heap bytes
        // stay in place to the final completion; the fd is this function's
        // contract.
        if let Err(errno) = unsafe { self.push_sqe(&sqe.user_data(key.0 as u64)) } {
            let failed = Cqe {
                res: -errno,
                flags: 0,
            };
            // SAFETY: a negative result with no flags carries nothing.
            unsafe { self.dispatch(key.0 as u64, failed) };
        }
        key
    }

    /// The end of `fd`'s write behind in slot `key`: an emptied buffer
    /// for the next one (a spare, or a new one) once every byte went out,
    /// or the error that ended it (its slot then removed); `Pending` while
    /// it is under way, with `waker` (if given) woken when it ends. The
    /// slot of one that went out stays, for the socket's next.
    pub(crate) fn poll_behind(
        &mut self,
        key: OpKey,
        fd: std::os::fd::RawFd,
        waker: Option<&Waker>,
    ) -> Poll<std::io::Result<Vec<u8>>> {
        let Some(Op {
            state: OpState::Behind {
                waker: held, end, ..
            },
            ..
        }) = self
            .ops
            .get_mut(key.0)
            .filter(|op| matches!(op.state, OpState::Behind { fd: owner, .. } if owner == fd))
        else {
            // Gone with the core's drain, which ended every operation.
            return Poll::Ready(Ok(Vec::new()));
        };
        match *end {
            0 => {
                if let Some(waker) = waker {
                    match held {
                        Some(w) if w.will_wake(waker) => {}
                        _ => *held = Some(waker.clone()),
                    }
                }
                Poll::Pending
            }
            ops::BEHIND_DONE => Poll::Ready(Ok(self.spare_write_buf())),
            end => {
                drop(self.remove_op(key.0));
                Poll::Ready(Err(if end == ops::BEHIND_ZERO {
                    std::io::ErrorKind::WriteZero.into()
                } else {
                    std::io::Error::from_raw_os_error(-end)
                }))
            }
        }
    }

    /// The `end` of `fd`'s write behind in slot `key` (see
    /// `OpState::Behind`): `None` for a slot that is not `fd`'s.
    pub(crate) fn behind_over(&self, key: OpKey, fd: std::os::fd::RawFd) -> Option<i32> {
        match self.ops.get(key.0) {
            Some(Op {
                state: OpState::Behind { fd: owner, end, .. },
                ..
            }) if *owner == fd => Some(*end),
            _ => None,
        }
    }

    /// An emptied buffer for the next write behind: a spare, or a new one.
    pub(crate) fn spare_write_buf(&mut self) -> Vec<u8> {
        self.spare_writes.pop().unwrap_or_default()
    }

    /// `fd` lets go of its write behind in slot `key` (see
    /// [`poll_behind`](Self::poll_behind)): cancelled if it is under way.
    pub(crate) fn release_behind(
        &mut self,
        key: OpKey,
        fd: std::os::fd::RawFd,
    ) -> Option<Retained> {
        match self.ops.get(key.0) {
            Some(Op {
                state: OpState::Behind { fd: owner, .. },
                ..
            }) if *owner == fd => self.release(key, Retained::None),
            _ => None,
        }
    }

    /// Keeps the emptied buffer of a write behind that succeeded for the
    /// next one, up to [`SPARE_WRITES`] of them of at most
    /// [`SPARE_WRITE_MAX`] bytes; frees it otherwise.
    fn spare_write(&mut self, mut buf: Vec<u8>) {
        if self.spare_writes.len() < SPARE_WRITES && buf.capacity() <= SPARE_WRITE_MAX {
            buf.clear();
            self.spare_writes.push(buf);
        }
    }

    /// A write behind's completion: the rest is sent again after a partial
    /// send, with no one woken. Once every byte went out its buffer is kept
    /// as a spare, and the slot waits for the socket's next write behind;
    /// a failure stays in the slot. Either way an owner waiting for the
    /// end is woken.
    pub(super) fn behind_done(&mut self, key: usize, cqe: Cqe) {
        let Some(op) = self.ops.get_mut(key) else {
            return;
        };
        let (OpState::Behind { fd, sent, .. }, Retained::Behind(buf)) =
            (&mut op.state, &op.retained)
        else {
            return;
        };
        let (fd, len, base) = (*fd, buf.len(), buf.as_ptr());
        let done = *sent as usize + usize::try_from(cqe.res).unwrap_or(0);
        let end = if cqe.res < 0 {
            cqe.res
        } else if done >= len {
            0
        } else if cqe.res == 0 {
            BEHIND_ZERO
        } else {
            // Partial: the rest goes out from where the kernel stopped.
            *sent = u32::try_from(done).unwrap_or(u32::MAX);
            let sqe = opcode::Send::new(
                types::Fd(fd),
                base.wrapping_add(done),
                u32::try_from(len - done).unwrap_or(u32::MAX),
            )
            .flags(libc::MSG_NOSIGNAL)
            .build()
            .user_data(key as u64);
            // SAFETY: the SQE points into the slot's buffer, kept to the final
            // completion; the fd stays open while the slot is `Behind`.
            let pushed = unsafe { self.push_sqe(&sqe) };
            match pushed {
                Ok(()) => return,
                Err(errno) => -errno,
            }
        };
        let Some(Op {
            state: OpState::Behind {
                waker, end: ended, ..
            },
            retained,
            ..
        }) = self.ops.get_mut(key)
        else {
            return;
        };
        let waker = waker.take();
        if end == 0 {
            *ended = BEHIND_DONE;
            let sent = std::mem::replace(retained, Retained::None);
            self.stats.bytes_out.add(len as u64);
            if let Retained::Behind(buf) = sent {
                self.spare_write(buf);
            }
        } else {
            *ended = end;
        }
        if let Some(w) = waker {
            // Last, as in `dispatch`.
            w.wake();
        }
    }
}
