//! The TLS handshake of a [`Stream`], server side and client side, over
//! its plain reads and writes; then the stream reads and writes through
//! the session.

use std::io;
use std::sync::Arc;
use std::time::Instant;

use rustls::pki_types::ServerName;

use super::session::Session;
use crate::buf::RecvBuf;
use crate::driver::current;
use crate::net::Stream;

impl Stream {
    /// Runs a server's side of the TLS handshake on this connection and
    /// returns it encrypted: its reads lend plaintext and its writes
    /// encrypt. Bound it with [`timeout`](crate::time::timeout): a client
    /// that opens a connection and stalls would hold it forever.
    ///
    /// # Errors
    ///
    /// `InvalidData` when the client's records are not a handshake rustls
    /// accepts (garbage, no shared protocol version or cipher, a bad
    /// certificate); `UnexpectedEof` when it leaves midway. The alert
    /// rustls prepared is sent first, as far as the socket takes it.
    pub async fn accept_tls(self, config: Arc<rustls::ServerConfig>) -> io::Result<Stream> {
        let conn = rustls::ServerConnection::new(config)
            .map_err(|e| io::Error::other(format!("TLS: {e}")))?;
        self.handshake(Session::new(conn.into()), None).await
    }

    /// [`accept_tls`](Self::accept_tls) with the connection's first
    /// bytes, read already (to tell a silent connection from one that has
    /// begun its handshake).
    pub(crate) async fn accept_tls_from(
        self,
        config: Arc<rustls::ServerConfig>,
        first: RecvBuf,
    ) -> io::Result<Stream> {
        let conn = rustls::ServerConnection::new(config)
            .map_err(|e| io::Error::other(format!("TLS: {e}")))?;
        self.handshake(Session::new(conn.into()), Some(first)).await
    }

    /// Runs a client's side of the TLS handshake with `server_name` (the
    /// name sent in SNI and checked against the server's certificate).
    ///
    /// # Errors
    ///
    /// `InvalidInput` for a name that is not a DNS name or an IP address;
    /// otherwise as [`accept_tls`](Self::accept_tls), including a server
    /// certificate that does not verify.
    pub async fn connect_tls(
        self,
        config: Arc<rustls::ClientConfig>,
        server_name: &str,
    ) -> io::Result<Stream> {
        let name = ServerName::try_from(server_name.to_owned()).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("TLS server name {server_name:?}: {e}"),
            )
        })?;
        let conn = rustls::ClientConnection::new(config, name)
            .map_err(|e| io::Error::other(format!("TLS: {e}")))?;
        self.handshake(Session::new(conn.into()), None).await
    }

    /// Exchanges handshake records until the session is established;
    /// `first` holds records received already.
    async fn handshake(
        mut self,
        session: Session,
        mut first: Option<RecvBuf>,
    ) -> io::Result<Stream> {
        if self.secure().is_some() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the stream is TLS already",
            ));
        }
        let mut out = Vec::new();
        loop {
            timed(|| session.flush(&mut out))?;
            if !out.is_empty() {
                let (res, sent) = self.write_all(out).await;
                res?;
                out = sent;
                out.clear();
            }
            if !session.is_handshaking() {
                break;
            }
            let fed = match first.take().map_or_else(
                || timed(|| session.feed_pending()),
                |records| timed(|| session.receive(records)).map(|()| true),
            ) {
                Ok(true) => Ok(()),
                Ok(false) => match self.read().await? {
                    Some(records) => timed(|| session.receive(records)),
                    None => {
                        return Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "the peer closed the connection during the TLS handshake",
                        ))
                    }
                },
                Err(e) => Err(e),
            };
            if let Err(e) = fed {
                // The alert says why, to a peer that still listens.
                if timed(|| session.flush(&mut out)).is_ok() && !out.is_empty() {
                    let _ = self.write_all(out).await;
                }
                return Err(e);
            }
        }
        self.set_secure(Box::new(session));
        Ok(self)
    }

    /// Whether this stream is encrypted with TLS.
    pub fn is_tls(&self) -> bool {
        self.secure().is_some()
    }

    /// The protocol agreed on by ALPN (say `b"http/1.1"`), on a TLS stream.
    pub fn tls_alpn(&self) -> Option<Vec<u8>> {
        self.secure().and_then(|session| session.alpn())
    }

    /// The server name a TLS client asked for (SNI), on a server's stream.
    pub fn tls_server_name(&self) -> Option<String> {
        self.secure().and_then(|session| session.server_name())
    }
}

/// Runs one step of a handshake's cryptography and adds the time it took
/// to the core's stats (`tls_handshake_time`).
fn timed<T>(step: impl FnOnce() -> T) -> T {
    let start = Instant::now();
    let out = step();
    let spent = start.elapsed().as_nanos() as u64;
    current::try_with_io(|io| io.stats.tls_handshake_ns.add(spent));
    out
}
