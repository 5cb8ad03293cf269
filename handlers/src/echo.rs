//! Raw TCP echo: every byte that arrives goes back, in order, until the
//! peer closes its write side; then the server closes its own.
//!
//! Two flavours differ only at the server's graceful stop. [`Echo`] goes on
//! serving until each client closes (the drain deadline ends the rest),
//! so a transfer under way when the stop came finishes whole. [`EchoUntilStop`]
//! ends a connection at the stop as soon as nothing it sent is still owed,
//! as an interactive server stopped with Ctrl-C should.

use std::io;

use percore::{until_stopped, Connection, Handler};

/// The echo handler. It holds no state, so one value serves a core.
#[derive(Debug, Clone, Copy, Default)]
pub struct Echo;

impl Handler for Echo {
    async fn serve(&self, conn: Connection) -> io::Result<()> {
        // Each received buffer is sent back as is: no copy, and the buffer
        // returns to the core's pool when the send completes. The next
        // receive is already queued by the kernel meanwhile.
        while let Some(buf) = conn.read().await? {
            let (res, _buf) = conn.write_all(buf).await;
            res?;
        }
        finish(&conn)
    }
}

/// Echo that stops with the server: once the stop begins, a connection
/// waiting for its client's next bytes closes instead of holding the
/// stop until the drain deadline. Bytes received are always echoed whole;
/// bytes the client sends after the stop may not be.
#[derive(Debug, Clone, Copy, Default)]
pub struct EchoUntilStop;

impl Handler for EchoUntilStop {
    async fn serve(&self, conn: Connection) -> io::Result<()> {
        // `None`: the server is stopping; `Some(Ok(None))`: the client left.
        while let Some(read) = until_stopped(conn.read()).await {
            let Some(buf) = read? else { break };
            let (res, _buf) = conn.write_all(buf).await;
            res?;
        }
        finish(&conn)
    }
}

/// Half-close: everything received has been echoed, so finish our side.
fn finish(conn: &Connection) -> io::Result<()> {
    match conn.shutdown_write() {
        Ok(()) => Ok(()),
        // The peer reset the connection first: nothing left to finish.
        Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(()),
        Err(e) => Err(e),
    }
}
