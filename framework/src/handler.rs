//! [`Handler`]: the plug-in point for code that serves connections.

use std::future::Future;
use std::io;

use crate::net::Stream;

/// An accepted connection, handed to [`Handler::serve`]: TCP or Unix,
/// whichever listener accepted it (see [`Stream`]).
pub type Connection = Stream;

/// Serves the connections a core accepts.
///
/// A server makes one handler per core with its factory (see
/// [`ServerBuilder::start`](crate::ServerBuilder::start)), on that core's
/// thread, so a handler may hold per-core state (a cache, a pool of
/// upstream connections) in `Cell`s and `RefCell`s with no locks. `serve`
/// runs as its own task for each connection; the futures it returns need
/// not be `Send`.
///
/// Returning `Err` closes the connection and counts an I/O error in the
/// core's stats; a panic in `serve` closes the connection, is logged and
/// counted, and the core goes on serving the others.
///
/// # Examples
///
/// ```no_run
/// use percore::{Connection, Handler};
///
/// struct Echo;
///
/// impl Handler for Echo {
///     async fn serve(&self, conn: Connection) -> std::io::Result<()> {
///         while let Some(buf) = conn.read().await? {
///             let (res, _buf) = conn.write_all(buf).await;
///             res?;
///         }
///         Ok(())
///     }
/// }
///
/// fn main() -> std::io::Result<()> {
///     percore::Server::builder().serve(|_core| Echo)
/// }
/// ```
pub trait Handler: 'static {
    /// Serves one accepted connection on this core until it ends.
    fn serve(&self, conn: Connection) -> impl Future<Output = io::Result<()>>;

    /// Serves a connection that another core of this server moved here
    /// ([`move_connection`](crate::move_connection)), with the state its
    /// handler there carried. Its reads return the bytes that handler
    /// had read and not consumed first, then the bytes that followed:
    /// the connection goes on where it left off. It is counted among
    /// this core's connections, drained at this core's stop.
    ///
    /// Only a handler that moves its connections gets any: the default
    /// drops the state and serves the connection as a new one, which is
    /// right for a handler with no state across requests.
    ///
    /// # Examples
    ///
    /// An echo that moves its connection when its core asks, between two
    /// echoes, and goes on echoing on the other core:
    ///
    /// ```no_run
    /// use percore::{move_connection, Connection, Handler, MoveMeter, MoveOutcome, MovedState};
    ///
    /// struct Echo;
    ///
    /// impl Handler for Echo {
    ///     async fn serve(&self, mut conn: Connection) -> std::io::Result<()> {
    ///         // Counts the connection's echoes, for the policy's budget.
    ///         let mut meter = MoveMeter::new();
    ///         while let Some(buf) = conn.read().await? {
    ///             let (res, _) = conn.write_all(buf).await;
    ///             res?;
    ///             if let Some(core) = meter.move_wanted() {
    ///                 match move_connection(conn, core, Vec::new(), ()).await {
    ///                     MoveOutcome::Moved => return Ok(()),
    ///                     MoveOutcome::Stayed { conn: stayed, .. } => conn = stayed,
    ///                     MoveOutcome::Closed(e) => return Err(e),
    ///                 }
    ///             }
    ///         }
    ///         Ok(())
    ///     }
    ///
    ///     async fn serve_moved(&self, conn: Connection, _: MovedState) -> std::io::Result<()> {
    ///         self.serve(conn).await
    ///     }
    /// }
    ///
    /// fn main() -> std::io::Result<()> {
    ///     percore::Server::builder()
    ///         .move_connections(percore::MovePolicy::default())
    ///         .serve(|_core| Echo)
    /// }
    /// ```
    fn serve_moved(
        &self,
        conn: Connection,
        state: MovedState,
    ) -> impl Future<Output = io::Result<()>> {
        drop(state);
        self.serve(conn)
    }

    /// The queue delay past which this core is overloaded for this
    /// handler: while the core's last [`queue_delay`](crate::queue_delay),
    /// or what the work under way has [`waited`](crate::waited), is
    /// longer than this,
    /// the listener accepts no new connection. They wait in the kernel's
    /// queue, costing the core nothing, until a turn ends within the
    /// bound (or for ten bounds at most, so that a core kept busy by the
    /// connections it has does not shut newcomers out); a client the
    /// handler refused and closed comes back there, not into the core's
    /// turn. Each hold
    /// counts in `accept_held` of the core's stats and is logged (at
    /// most once a minute). `None`, the default, never holds: the core
    /// accepts whatever its turns cost.
    ///
    /// Asked once per core, when the handler is made. The HTTP layer of
    /// `percore-handlers` returns its `Config::shed_queue_delay`.
    fn overload_bound(&self) -> Option<std::time::Duration> {
        None
    }
}

/// What a connection's handler carried to the core it moved to: its own
/// state (a request count, a deadline), handed to
/// [`Handler::serve_moved`].
pub struct MovedState {
    state: Box<dyn std::any::Any + Send>,
    from: usize,
}

impl MovedState {
    pub(crate) fn new(state: Box<dyn std::any::Any + Send>, from: usize) -> MovedState {
        MovedState { state, from }
    }

    /// The state the handler gave
    /// [`move_connection`](crate::move_connection), if it is a `T`.
    pub fn take<T: 'static>(self) -> Option<T> {
        self.state.downcast::<T>().ok().map(|state| *state)
    }

    /// The index of the core the connection came from.
    pub fn from_core(&self) -> usize {
        self.from
    }
}

impl std::fmt::Debug for MovedState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MovedState")
            .field("from", &self.from)
            .finish_non_exhaustive()
    }
}

/// Serves a UDP address on every core (see
/// [`ServerBuilder::add_udp`](crate::ServerBuilder::add_udp)).
///
/// A server makes one per core with its factory, on that core's thread,
/// and calls [`serve`](Self::serve) once, on a task of its own, with the
/// core's socket: one of a `SO_REUSEPORT` group bound on the address, so
/// the kernel spreads senders over the cores. Per-core state needs no
/// locks, as for a [`Handler`].
///
/// `serve` runs until it returns or the server stops. A stop lets it
/// finish until the drain deadline, then cancels it: wrap its receives
/// in [`until_stopped`](crate::until_stopped) to end at the stop. An
/// `Err` is logged and counted in the core's I/O errors; it does not
/// stop the server, and the socket is not served again.
///
/// # Examples
///
/// ```no_run
/// use percore::net::UdpSocket;
/// use percore::{until_stopped, DatagramHandler, Server};
///
/// struct Echo;
///
/// impl DatagramHandler for Echo {
///     async fn serve(&self, socket: UdpSocket) -> std::io::Result<()> {
///         let mut buf = Vec::with_capacity(65_536);
///         while let Some((res, got)) = until_stopped(socket.recv_from(buf)).await {
///             let meta = res?;
///             let (_sent, mut got) = match meta.peer {
///                 // A send error (say, the sender is gone) is the
///                 // datagram's, not the socket's.
///                 Some(peer) => socket.send_to(got, peer).await,
///                 None => (Ok(0), got),
///             };
///             got.clear();
///             buf = got;
///         }
///         Ok(())
///     }
/// }
///
/// // A TCP listener serves beside it: here one that says hello.
/// struct Hello;
///
/// impl percore::Handler for Hello {
///     async fn serve(&self, conn: percore::Connection) -> std::io::Result<()> {
///         conn.write_all(b"hello\n".to_vec()).await.0
///     }
/// }
///
/// fn main() -> std::io::Result<()> {
///     Server::builder()
///         .add_udp("0.0.0.0:7001".parse().unwrap(), |_core| Echo)
///         .serve(|_core| Hello)
/// }
/// ```
pub trait DatagramHandler: 'static {
    /// Serves this core's socket until the server stops.
    fn serve(&self, socket: crate::net::UdpSocket) -> impl Future<Output = io::Result<()>>;
}
