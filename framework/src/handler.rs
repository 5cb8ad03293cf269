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
}
