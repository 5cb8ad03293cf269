//! [`Live`]: an origin's HTTP/2 connection as its requests hold it, and
//! the count of its requests in flight ([`InFlight`]) by which its
//! driver tells that it is idle.

use std::cell::Cell;
use std::rc::Rc;
use std::time::Instant;

use bytes::Bytes;
use h2::client::SendRequest;
use percore::time::now;

/// The live connection of an origin: cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct Live {
    pub(crate) send: SendRequest<Bytes>,
    pub(super) generation: u64,
    pub(crate) usage: Rc<Usage>,
    /// Whether it carried a request before.
    pub(super) used: Rc<Cell<bool>>,
}

impl Live {
    /// Whether a request ran on it before this one: a failure on it may
    /// be the server closing an idle connection.
    pub(crate) fn reused(&self) -> bool {
        self.used.replace(true)
    }

    /// Which of its origin's connections it is, for
    /// [`Origin::retire`](super::Origin::retire).
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }
}

/// How busy a connection is, for its idle close.
#[derive(Debug)]
pub(crate) struct Usage {
    pub(super) streams: Cell<usize>,
    pub(super) idle_since: Cell<Instant>,
}

/// A request in flight on a connection: counted from its start to the
/// end of its response (or its drop).
#[derive(Debug)]
pub(crate) struct InFlight(Rc<Usage>);

impl InFlight {
    pub(crate) fn new(usage: &Rc<Usage>) -> Self {
        usage.streams.set(usage.streams.get() + 1);
        Self(Rc::clone(usage))
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.streams.set(self.0.streams.get() - 1);
        self.0.idle_since.set(now());
    }
}
