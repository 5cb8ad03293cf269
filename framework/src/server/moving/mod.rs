//! Moving a live connection to another core at a request boundary.
//!
//! `SO_REUSEPORT` places connections by a hash, and steering places new
//! ones by load, but a connection stays where it was accepted: a few
//! busy long-lived connections can keep one core hot while another
//! idles. A handler that can move its connections asks
//! [`move_wanted`] at each request boundary (one relaxed load while no
//! move is ordered) and, when told a core, hands its connection over
//! with [`move_connection`]:
//!
//! 1. **Detach** (source core): the stream's standing receive is ended
//!    and awaited (io_uring) or the socket leaves the epoll set; the
//!    bytes received and not yet read, the handler's unread bytes and a
//!    TLS session travel with the descriptor (`net::moved`).
//! 2. **Message**: the detached connection goes in a [`Handoff`] inside a
//!    message to the target's mailbox, the path of [`submit_to`].
//! 3. **Adopt** (target core): unless it is stopping, at its connection
//!    limit or has no such listener, the target registers the descriptor
//!    with its own driver and runs its handler's
//!    [`serve_moved`](crate::Handler::serve_moved) on it, counted among
//!    its connections (drained at its stop, in its stats).
//! 4. **Answer**: the source learns that the connection was taken, or
//!    gets it back (refused, or dropped unrun when the target's mailbox
//!    closed at its stop) and serves on. A full mailbox refuses at once:
//!    a hot core does not wait for a busy one. The hand-off's reply is
//!    model-checked with loom (`loom-tests/tests/models/handoff.rs`).
//!
//! The policy that orders moves is in [`policy`]; the orders in
//! `core::moves`; a connection's count of its boundaries, which decides
//! which connections fit the policy's budget, in [`meter`].
//!
//! [`submit_to`]: crate::submit_to

mod meter;
mod policy;

use std::cell::RefCell;
use std::fmt;
use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;

use super::listen::{Arrival, ListenerCounters, Spawner};
use super::serve::{ConnGuard, CoreListener, ServeLimits, Tracker};
use crate::core::context;
use crate::core::shared::Message;
use crate::handler::MovedState;
use crate::net::moved::Detached;
use crate::net::Stream;
use crate::sync::handoff::{self, Handoff, Reply};
use crate::sync::PushError;
use crate::Connection;
pub use meter::MoveMeter;
pub(super) use policy::spawn as spawn_policy;
pub use policy::MovePolicy;

/// Why a connection did not move.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum MoveRefusal {
    /// No core with that index in this server.
    NoSuchCore,
    /// The target is the connection's own core.
    SameCore,
    /// Not a connection a server's TCP listener accepted (an outbound
    /// connection, a Unix socket's, or one outside a server).
    NotServed,
    /// A TLS write was on its way: the session cannot move mid-write.
    Busy,
    /// The target's mailbox was full: it is too busy to take more now.
    MailboxFull,
    /// The target is stopping (or its listener is closed).
    Stopping,
    /// The target is at its connection limit.
    AtLimit,
    /// The connection could not leave this core or join the target's
    /// (an `epoll_ctl` failed); it stays, as it was.
    Failed(io::ErrorKind),
}

impl fmt::Display for MoveRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MoveRefusal::NoSuchCore => f.write_str("no core with that index"),
            MoveRefusal::SameCore => f.write_str("the connection is on that core already"),
            MoveRefusal::NotServed => f.write_str("not a connection of a server's TCP listener"),
            MoveRefusal::Busy => f.write_str("a TLS write is on its way"),
            MoveRefusal::MailboxFull => f.write_str("the target core's mailbox is full"),
            MoveRefusal::Stopping => f.write_str("the target core is stopping"),
            MoveRefusal::AtLimit => f.write_str("the target core is at its connection limit"),
            MoveRefusal::Failed(kind) => write!(f, "the move failed: {kind}"),
        }
    }
}

/// What became of a [`move_connection`].
#[must_use = "a connection that stayed must be served on"]
pub enum MoveOutcome<T> {
    /// The target core serves the connection now; nothing is left here.
    Moved,
    /// The connection stays: serve it on. Its reads return the unread
    /// bytes given to the move first, then what followed them.
    Stayed {
        /// The connection, registered with this core again.
        conn: Connection,
        /// The state given to the move.
        state: T,
        /// Why it stayed.
        why: MoveRefusal,
    },
    /// The connection was closed on the way: the one case is a process
    /// out of descriptors for the duplicate a move needs when an
    /// operation still holds the socket, or a panic on the target while
    /// it took it. Logged and counted as an I/O error.
    Closed(io::Error),
}

impl<T> fmt::Debug for MoveOutcome<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MoveOutcome::Moved => f.write_str("Moved"),
            MoveOutcome::Stayed { conn, why, .. } => f
                .debug_struct("Stayed")
                .field("conn", conn)
                .field("why", why)
                .finish_non_exhaustive(),
            MoveOutcome::Closed(e) => f.debug_tuple("Closed").field(e).finish(),
        }
    }
}

/// Whether this core wants one of its connections to move now, and to
/// which core: `Some(core)` takes one of the moves the policy (see
/// [`ServerBuilder::move_connections`](crate::ServerBuilder::move_connections))
/// or [`ServerHandle::move_connections`](crate::ServerHandle::move_connections)
/// ordered, and the caller should then [`move_connection`]. `None` while
/// none is ordered, which costs one relaxed load, and always once the
/// server is stopping or outside a core.
///
/// It takes any order, heavy connection or light: a handler that keeps a
/// [`MoveMeter`] per connection asks [`MoveMeter::move_wanted`] instead,
/// which moves the connections that fit the policy's budget of load.
#[inline]
pub fn move_wanted() -> Option<usize> {
    context::try_with_core(|core| {
        core.count_boundary();
        if core.is_shutting_down() || core.shared.moves.peek().left == 0 {
            return None;
        }
        core.shared.moves.take(0)
    })
    .flatten()
}

/// Moves `conn`, a connection this core's server accepted, to core `core`
/// of the same server, where its listener's handler goes on with it in
/// [`Handler::serve_moved`](crate::Handler::serve_moved), given `state`.
///
/// Call it at a request boundary: every answer written, no write or read
/// of the connection in flight, and `unread` holding the bytes the
/// handler read and did not consume (a partial request). The target's
/// reads return `unread` first, then the bytes the socket had received
/// and not yet delivered here, then the socket's next bytes: none lost,
/// duplicated or reordered. A TLS connection moves with its session.
///
/// The move does not wait for a busy target: a full mailbox, a stopping
/// target or one at its connection limit leaves the connection here
/// ([`MoveOutcome::Stayed`]), and so does a target that stops before it
/// took the message. The move and its outcome are counted in both
/// cores' stats (`moved_in`, `moved_out`, `moves_refused`) and logged at
/// debug.
///
/// # Panics
///
/// Outside a percore core thread.
pub async fn move_connection<T: Send + 'static>(
    conn: Connection,
    core: usize,
    unread: Vec<u8>,
    state: T,
) -> MoveOutcome<T> {
    let here = context::with_core(|c| c.shared.index());
    let target = context::with_core(|c| c.shared.peer(core));
    let listener = listener_of(&conn);
    let (target, listener) = match (target, listener) {
        (None, _) => return stayed(conn, unread, state, MoveRefusal::NoSuchCore),
        _ if core == here => return stayed(conn, unread, state, MoveRefusal::SameCore),
        (_, None) => return stayed(conn, unread, state, MoveRefusal::NotServed),
        (Some(target), Some(listener)) => (target, listener),
    };
    let mut detached = match conn.detach().await {
        Ok(detached) => detached,
        Err((Some(conn), e)) => {
            let why = match e.kind() {
                io::ErrorKind::WouldBlock => MoveRefusal::Busy,
                kind => MoveRefusal::Failed(kind),
            };
            return stayed(conn, unread, state, why);
        }
        Err((None, e)) => return closed(e),
    };
    detached.push_unread(unread);
    let fd = detached.raw_fd();
    let parcel = Parcel {
        detached,
        listener,
        from: here,
        state,
        why: MoveRefusal::Stopping,
    };
    let (handoff, reply) = handoff::handoff(parcel);
    let message: Message = Box::new(move || adopt(handoff));
    // A message that is not queued is dropped here, unrun: its hand-off
    // answers with the connection at once.
    let unsent = match target.side().send(message, None) {
        Ok(()) => None,
        Err(PushError::Full(_)) => Some(MoveRefusal::MailboxFull),
        Err(PushError::Closed(_)) => Some(MoveRefusal::Stopping),
    };
    drop(target);
    match poll_fn(|cx| reply.poll_recv(cx)).await {
        Some(Reply::Taken) => {
            context::with_core(|c| c.shared.stats.moved_out.add(1));
            tracing::debug!(fd, from = here, to = core, "connection moved");
            MoveOutcome::Moved
        }
        Some(Reply::Returned(mut parcel)) => {
            if let Some(why) = unsent {
                parcel.why = why;
            }
            back(parcel, core)
        }
        None => closed(io::Error::other(
            "the target core panicked while it took a moved connection",
        )),
    }
}

/// A connection on its way, with where it goes and why it came back.
struct Parcel<T> {
    detached: Detached,
    /// The listener's index: the same on every core.
    listener: usize,
    from: usize,
    state: T,
    /// Why it came back, if it does: set by a target that refuses it.
    why: MoveRefusal,
}

/// A move that came back: the connection is registered here again.
fn back<T>(parcel: Parcel<T>, to: usize) -> MoveOutcome<T> {
    let Parcel {
        detached,
        state,
        why,
        ..
    } = parcel;
    context::with_core(|c| c.shared.stats.moves_refused.add(1));
    match detached.attach() {
        Ok(conn) => {
            tracing::debug!(to, %why, "connection not moved; it stays");
            MoveOutcome::Stayed { conn, state, why }
        }
        Err((_, e)) => closed(e),
    }
}

/// A move refused before it began: `unread` goes back in front.
fn stayed<T>(conn: Connection, unread: Vec<u8>, state: T, why: MoveRefusal) -> MoveOutcome<T> {
    conn.push_unread(unread);
    tracing::debug!(%why, "connection not moved; it stays");
    MoveOutcome::Stayed { conn, state, why }
}

fn closed<T>(e: io::Error) -> MoveOutcome<T> {
    context::with_core(|c| c.shared.stats.errors_io.add(1));
    tracing::warn!(error = %e, "a connection was closed while it moved");
    MoveOutcome::Closed(e)
}

/// Runs on the target core: takes the connection, or lets the hand-off
/// carry it back with the reason.
fn adopt<T: Send + 'static>(mut handoff: Handoff<Parcel<T>>) {
    let Some(parcel) = handoff.get_mut() else {
        return;
    };
    let home = HOME.with(|home| {
        let home = home.borrow();
        let home = home.as_ref()?;
        let entry = home.listeners.get(parcel.listener)?;
        Some((
            entry.spawn.clone(),
            entry.counters.clone(),
            home.tracker.clone(),
            home.max,
        ))
    });
    let Some((spawn, counters, tracker, max)) = home else {
        parcel.why = MoveRefusal::Stopping;
        return;
    };
    if context::with_core(|c| c.is_shutting_down()) {
        parcel.why = MoveRefusal::Stopping;
        return;
    }
    if tracker.active() >= max {
        parcel.why = MoveRefusal::AtLimit;
        return;
    }
    let taken = handoff.accept(|mut parcel| match parcel.detached.attach() {
        Ok(stream) => Ok((stream, parcel.state, parcel.from)),
        Err((detached, e)) => {
            parcel.detached = detached;
            parcel.why = MoveRefusal::Failed(e.kind());
            Err(parcel)
        }
    });
    let Some((stream, state, from)) = taken else {
        return;
    };
    let guard = ConnGuard::adopted(&tracker, &counters);
    tracing::debug!(fd = %stream_fd(&stream), from, "connection moved in");
    let state = MovedState::new(Box::new(state), from);
    spawn(stream, guard, Arrival::Moved(state));
}

fn stream_fd(stream: &Stream) -> i32 {
    std::os::fd::AsRawFd::as_raw_fd(stream)
}

// ===== the core's listeners, for connections moved here =====

thread_local! {
    /// This core's listeners while it serves them, for `adopt`; `None`
    /// outside a server and from the moment the core's stop begins. Set
    /// before the core reports itself started, so that every move that
    /// reaches it (in a loop turn, after that) finds it.
    static HOME: RefCell<Option<Home>> = const { RefCell::new(None) };
}

/// What a core serves moved connections with: each listener's handler
/// and counters (in the listeners' order, the same on every core), and
/// the core's count of connections.
pub(super) struct Home {
    listeners: Vec<Entry>,
    tracker: Rc<Tracker>,
    max: usize,
}

struct Entry {
    /// Where it listens (`None` for a Unix socket: its connections do not
    /// move).
    addr: Option<SocketAddr>,
    spawn: Rc<Spawner>,
    counters: Arc<ListenerCounters>,
}

/// Closes this core's home when dropped: moves to it are refused.
pub(super) struct HomeGuard(());

impl Home {
    /// Opens this core to moved connections, until the guard is dropped.
    pub(super) fn open(
        listeners: &[CoreListener],
        tracker: &Rc<Tracker>,
        limits: ServeLimits,
    ) -> HomeGuard {
        let home = Home {
            listeners: listeners
                .iter()
                .map(|l| Entry {
                    addr: l
                        .acceptor
                        .is_tcp()
                        .then(|| crate::sys::local_addr(l.acceptor.borrow_fd()).ok())
                        .flatten(),
                    spawn: l.spawn.clone(),
                    counters: l.counters.clone(),
                })
                .collect(),
            tracker: tracker.clone(),
            max: limits.max_connections,
        };
        HOME.with(|slot| *slot.borrow_mut() = Some(home));
        HomeGuard(())
    }
}

impl Drop for HomeGuard {
    fn drop(&mut self) {
        let home = HOME.try_with(|slot| slot.borrow_mut().take());
        // Dropped outside the borrow: a handler's destructor is user code.
        drop(home);
    }
}

/// The index of the listener that accepted `conn` on this core, by its
/// local address: `None` for a connection no TCP listener of this
/// core's server accepted.
fn listener_of(conn: &Stream) -> Option<usize> {
    let local = conn.local_addr().ok()?;
    HOME.with(|home| {
        let home = home.borrow();
        let listeners = &home.as_ref()?.listeners;
        let matches = |exact: bool| {
            listeners.iter().position(|entry| {
                entry.addr.is_some_and(|addr| {
                    addr.port() == local.port()
                        && (addr.ip() == local.ip() || (!exact && addr.ip().is_unspecified()))
                })
            })
        };
        matches(true).or_else(|| matches(false))
    })
}
