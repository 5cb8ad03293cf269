//! The server-wide stop signal.
//!
//! Whoever stops the server sets the flag, then unparks every core. A core
//! checks the flag inside [`Parker::prepare_park`](super::Parker::prepare_park)
//! after announcing its park, so a stop that races a core going to sleep is
//! either seen by the check or answered with a notification.

use super::{AtomicBool, Ordering};

/// A latch that goes from running to stopping once.
#[derive(Debug, Default)]
pub struct Shutdown {
    stopping: AtomicBool,
}

impl Shutdown {
    /// A latch in the running state.
    pub fn new() -> Self {
        Shutdown {
            stopping: AtomicBool::new(false),
        }
    }

    /// Flips the latch; returns `true` for the call that flipped it. The
    /// caller then unparks every core.
    pub fn trigger(&self) -> bool {
        !self.stopping.swap(true, Ordering::SeqCst)
    }

    /// Whether a stop was requested.
    pub fn is_triggered(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }
}
