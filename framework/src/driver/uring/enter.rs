//! `io_uring_enter` with a registered ring fd.
//!
//! The `io-uring` crate cannot keep a registered ring index across calls
//! to `IoUring::submitter()`, so percore registers the ring fd itself and
//! makes the one enter per loop turn here: submit what is queued, run
//! deferred task work, and wait (with an `EXT_ARG` timeout) when asked.

use std::io;
use std::os::fd::AsRawFd;
use std::time::Duration;

use io_uring::IoUring;

const ENTER_GETEVENTS: u32 = 1 << 0;
const ENTER_SQ_WAKEUP: u32 = 1 << 1;
const ENTER_EXT_ARG: u32 = 1 << 3;
const ENTER_REGISTERED_RING: u32 = 1 << 4;
const ENTER_NO_IOWAIT: u32 = 1 << 7;
const REGISTER_RING_FDS: u32 = 20;
const UNREGISTER_RING_FDS: u32 = 21;

/// `struct io_uring_getevents_arg`.
#[repr(C)]
struct GetEventsArg {
    sigmask: u64,
    sigmask_sz: u32,
    min_wait_usec: u32,
    ts: u64,
}

/// `struct io_uring_rsrc_update`.
#[repr(C)]
struct RsrcUpdate {
    offset: u32,
    resv: u32,
    data: u64,
}

/// How this core enters its ring.
#[derive(Debug)]
pub(crate) struct Enter {
    /// The registered ring index, or the ring fd when registration failed.
    fd: i32,
    registered: bool,
    no_iowait: bool,
    sqpoll: bool,
    /// Wait batching (`IORING_FEAT_MIN_TIMEOUT`): a batched wait holds out
    /// this many µs for [`BATCH_COMPLETIONS`] completions; 0 is off.
    batch_usec: u32,
    /// Enters with submissions so far, for the `enter_error` fault.
    submitting_enters: std::cell::Cell<u32>,
}

/// Under the `enter_error` fault, one enter with submissions in this many
/// fails before the kernel sees its submissions.
const FAULT_EVERY: u32 = 8;

/// Completions a batched wait asks for before its time bound.
const BATCH_COMPLETIONS: u32 = 64;

/// `io_uring_register` with one ring-fd update: `op` is
/// [`REGISTER_RING_FDS`] or [`UNREGISTER_RING_FDS`]; 1 on success.
fn update_ring_fds(ring: &IoUring, op: u32, update: &mut RsrcUpdate) -> libc::c_long {
    // Checked: another opcode would read `update` as something else.
    assert!(op == REGISTER_RING_FDS || op == UNREGISTER_RING_FDS);
    // SAFETY: both opcodes (asserted above) read, and registering writes
    // back, one io_uring_rsrc_update, which `update` is, for the call.
    unsafe {
        libc::syscall(
            libc::SYS_io_uring_register,
            ring.as_raw_fd(),
            op,
            update as *mut RsrcUpdate,
            1u32,
        )
    }
}

impl Enter {
    /// Registers the ring fd (saving the kernel an fd lookup per enter).
    pub(crate) fn new(ring: &IoUring, no_iowait: bool, sqpoll: bool, batch_usec: u32) -> Enter {
        let mut update = RsrcUpdate {
            offset: u32::MAX,
            resv: 0,
            data: ring.as_raw_fd() as u64,
        };
        let res = update_ring_fds(ring, REGISTER_RING_FDS, &mut update);
        let (fd, registered) = if res == 1 {
            (update.offset as i32, true)
        } else {
            (ring.as_raw_fd(), false)
        };
        Enter {
            fd,
            registered,
            no_iowait,
            sqpoll,
            batch_usec,
            submitting_enters: std::cell::Cell::new(0),
        }
    }

    pub(crate) fn is_registered(&self) -> bool {
        self.registered
    }

    /// Gives up the registered ring fd. The registration holds a reference
    /// to the ring of its own: without this, closing the ring's fd does not
    /// free it, and the ring (its registered buffers pinned) lives on until
    /// the thread exits.
    pub(crate) fn unregister(&mut self, ring: &IoUring) {
        if !std::mem::take(&mut self.registered) {
            return;
        }
        let mut update = RsrcUpdate {
            offset: self.fd as u32,
            resv: 0,
            data: 0,
        };
        self.fd = ring.as_raw_fd();
        let res = update_ring_fds(ring, UNREGISTER_RING_FDS, &mut update);
        if res != 1 {
            tracing::warn!(
                error = %io::Error::last_os_error(),
                "could not unregister the ring fd; the ring is freed when this thread exits"
            );
        }
    }

    /// Whether batched waits are on (configured and supported).
    pub(crate) fn batches(&self) -> bool {
        self.batch_usec > 0
    }

    /// Submits the queued SQEs; waits for one completion when `wait` is
    /// set, up to `timeout` (forever when `None`). Returns `Ok(false)`
    /// without a syscall when there was nothing to do.
    ///
    /// `busy` says the last wake-up brought many completions. With wait
    /// batching on, the wait then holds out for a batch. Without it, a busy
    /// core waits as any other: asking for a batch with a zero timeout
    /// (to have the kernel run more of the completions already due) cost a
    /// high-resolution timer armed and fired per enter, which on a VM is a
    /// trip to the hypervisor, and 4 % of requests per CPU-second at c=100.
    // Long on purpose: every flag of the one syscall a loop turn makes is
    // decided here, in the order the kernel reads them.
    pub(crate) fn enter(
        &self,
        ring: &mut IoUring,
        wait: bool,
        busy: bool,
        timeout: Option<Duration>,
    ) -> io::Result<bool> {
        let (to_submit, taskrun, overflow, need_wakeup) = {
            let mut sq = ring.submission();
            sq.sync();
            (
                sq.len() as u32,
                sq.taskrun(),
                sq.cq_overflow(),
                sq.need_wakeup(),
            )
        };
        let mut flags = 0;
        if wait || taskrun || overflow {
            flags |= ENTER_GETEVENTS;
        }
        if self.sqpoll {
            if need_wakeup {
                flags |= ENTER_SQ_WAKEUP;
            } else if !wait && !taskrun && !overflow {
                return Ok(false);
            }
        } else if to_submit == 0 && flags == 0 {
            return Ok(false);
        }
        if self.registered {
            flags |= ENTER_REGISTERED_RING;
        }
        if wait && self.no_iowait {
            flags |= ENTER_NO_IOWAIT;
        }
        let batch = wait && busy && self.batch_usec > 0;
        let ts = timeout.map(|t| libc::timespec {
            tv_sec: t.as_secs() as libc::time_t,
            tv_nsec: t.subsec_nanos() as libc::c_long,
        });
        let arg = GetEventsArg {
            sigmask: 0,
            sigmask_sz: 8,
            min_wait_usec: if batch { self.batch_usec } else { 0 },
            ts: ts
                .as_ref()
                .map_or(0, |ts| ts as *const libc::timespec as u64),
        };
        let (arg_ptr, arg_len) = if wait && (ts.is_some() || batch) {
            flags |= ENTER_EXT_ARG;
            (
                &arg as *const GetEventsArg as *const libc::c_void,
                std::mem::size_of::<GetEventsArg>(),
            )
        } else {
            (std::ptr::null(), 0)
        };
        // Batched: hold out for many completions, but once the time bound
        // passes the kernel returns with whatever is there (at least one).
        let min_complete = if batch {
            BATCH_COMPLETIONS
        } else {
            u32::from(wait)
        };
        let res = match self.injected_failure(to_submit) {
            Some(err) => Err(err),
            // SAFETY: `fd` is this ring's (registered) fd; the argument
            // struct and the timespec it points to live until the call
            // returns.
            None => match unsafe {
                libc::syscall(
                    libc::SYS_io_uring_enter,
                    self.fd,
                    to_submit,
                    min_complete,
                    flags,
                    arg_ptr,
                    arg_len,
                )
            } {
                res if res < 0 => Err(io::Error::last_os_error()),
                _ => Ok(()),
            },
        };
        if let Err(err) = res {
            return match err.raw_os_error() {
                // Timed out, interrupted, or completions must be reaped
                // before more can be posted: all normal, the loop goes on.
                Some(libc::ETIME) | Some(libc::EINTR) | Some(libc::EBUSY) | Some(libc::EAGAIN) => {
                    Ok(true)
                }
                _ => Err(err),
            };
        }
        Ok(true)
    }

    /// The `enter_error` fault: one enter with submissions in
    /// [`FAULT_EVERY`] fails as a failed submission would, its SQEs left in
    /// the queue for the next enter.
    fn injected_failure(&self, to_submit: u32) -> Option<io::Error> {
        let errno = super::fault::enter_error()?;
        if to_submit == 0 {
            return None;
        }
        let n = self.submitting_enters.get().wrapping_add(1);
        self.submitting_enters.set(n);
        (n % FAULT_EVERY == 0).then(|| io::Error::from_raw_os_error(errno))
    }
}
