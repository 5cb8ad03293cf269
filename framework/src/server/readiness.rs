//! [`Readiness`]: whether a server wants traffic, for a balancer's health
//! check (`/readyz`): not before every core listens, and not once a stop
//! has begun, so that a balancer stops sending before connections are
//! refused.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Whether a server wants traffic: readable from any thread, cheap to
/// clone. Give one to [`ServerBuilder::readiness`](super::ServerBuilder::readiness)
/// and keep a clone in whatever answers the health check (a handler made
/// by the factory, on the cores); or read
/// [`ServerHandle::readiness`](super::ServerHandle::readiness).
///
/// It is not ready while the server starts, ready once every core serves
/// all its listeners ([`start`](super::ServerBuilder::start) returned),
/// and not ready again from the moment a stop is asked for, for good: a
/// stop or the end of a take-over (the old server's stop). With
/// [`ServerBuilder::unready_delay`](super::ServerBuilder::unready_delay)
/// the server goes on serving, unready, for that long before it stops
/// accepting, so that a balancer's checks see it leave first.
#[derive(Debug, Clone, Default)]
pub struct Readiness(Arc<State>);

#[derive(Debug, Default)]
struct State {
    serving: AtomicBool,
    leaving: AtomicBool,
}

impl Readiness {
    /// Not ready: a server that has not started.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether the server wants traffic now.
    pub fn is_ready(&self) -> bool {
        self.is_serving() && !self.is_leaving()
    }

    /// Whether every core has served its listeners (true from then on,
    /// through the stop).
    pub fn is_serving(&self) -> bool {
        self.0.serving.load(Ordering::Acquire)
    }

    /// Whether a stop has been asked for.
    pub fn is_leaving(&self) -> bool {
        self.0.leaving.load(Ordering::Acquire)
    }

    pub(super) fn set_serving(&self) {
        self.0.serving.store(true, Ordering::Release);
    }

    /// Marks the stop; `true` for the call that did.
    pub(super) fn leave(&self) -> bool {
        !self.0.leaving.swap(true, Ordering::AcqRel)
    }
}

#[cfg(test)]
mod tests {
    use super::Readiness;

    #[test]
    fn ready_only_between_serving_and_leaving() {
        let r = Readiness::new();
        assert!(!r.is_ready());
        r.set_serving();
        assert!(r.is_ready() && r.clone().is_ready());
        assert!(r.leave());
        assert!(!r.leave());
        assert!(!r.is_ready() && r.is_serving());
    }
}
