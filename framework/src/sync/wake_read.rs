//! The read an io_uring core keeps on its eventfd, so that a notification
//! ends its wait in the kernel.
//!
//! The read is a one-shot operation: when it completes (a peer wrote the
//! eventfd, the read consumed the counter) it is gone, and it is submitted
//! again only before the next wait. Notifications in between are not lost:
//! they add to the eventfd counter, and the new read completes at once.
//! The state is one flag, owned by the core's thread; what makes it
//! cross-thread is the kernel's counter, which the loom models stand in for
//! with a `Doorbell`.
//!
//! The protocol, per trip to the kernel:
//!
//! 1. before waiting, if [`needs_arm`](WakeRead::needs_arm), submit a read
//!    and record whether that worked ([`submitted`](WakeRead::submitted));
//! 2. wait at most [`bound`](WakeRead::bound) of the timeout: without a read
//!    in flight, a notification cannot end the wait;
//! 3. when the read's completion is reaped, [`completed`](WakeRead::completed).

use std::time::Duration;

/// How long a core waits at most while its read could not be submitted: a
/// notification cannot end such a wait, so it is cut short and the next
/// trip to the kernel tries to submit the read again.
pub const UNARMED_WAIT: Duration = Duration::from_millis(1);

/// Whether the core's eventfd read is in flight.
#[derive(Debug, Default)]
pub struct WakeRead {
    armed: bool,
}

impl WakeRead {
    /// No read in flight yet.
    pub const fn new() -> Self {
        WakeRead { armed: false }
    }

    /// Whether a read must be submitted before the next wait.
    pub fn needs_arm(&self) -> bool {
        !self.armed
    }

    /// Records the submission of a read: `ok` when it is queued for the
    /// kernel (it is in flight from the next `io_uring_enter` on).
    pub fn submitted(&mut self, ok: bool) {
        self.armed = ok;
    }

    /// The read's completion was reaped: the notification (or several,
    /// summed in the counter) is consumed, and the next wait needs a new
    /// read.
    pub fn completed(&mut self) {
        self.armed = false;
    }

    /// The longest the core may wait, given the `timeout` its loop asks for
    /// (`None`: no limit): unchanged with a read in flight, at most
    /// [`UNARMED_WAIT`] without one.
    pub fn bound(&self, timeout: Option<Duration>) -> Option<Duration> {
        if self.armed {
            timeout
        } else {
            Some(timeout.map_or(UNARMED_WAIT, |t| t.min(UNARMED_WAIT)))
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_completed_read_is_armed_again() {
        let mut read = WakeRead::new();
        assert!(read.needs_arm());
        assert_eq!(read.bound(None), Some(UNARMED_WAIT));
        read.submitted(true);
        assert!(!read.needs_arm());
        assert_eq!(read.bound(None), None);
        read.completed();
        assert!(read.needs_arm());
    }

    #[test]
    fn a_failed_submission_bounds_the_wait() {
        let mut read = WakeRead::new();
        read.submitted(false);
        assert!(read.needs_arm());
        let long = Some(Duration::from_secs(5));
        assert_eq!(read.bound(long), Some(UNARMED_WAIT));
        assert_eq!(read.bound(Some(Duration::ZERO)), Some(Duration::ZERO));
    }
}
