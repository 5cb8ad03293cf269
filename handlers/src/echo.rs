//! Raw TCP echo: every byte that arrives goes back, in order, until the
//! peer closes its write side; then the server closes its own.

use std::io;

use percore::{Connection, Handler};

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
        // Half-close: the peer shut its write side; everything it sent has
        // been echoed, so finish ours.
        match conn.shutdown_write() {
            Ok(()) => Ok(()),
            // The peer reset the connection first: nothing left to finish.
            Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(()),
            Err(e) => Err(e),
        }
    }
}
