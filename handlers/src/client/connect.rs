//! Opening a connection to a server: TCP or a Unix socket, with the TLS
//! handshake when asked, all within one timeout.

use std::sync::Arc;
use std::time::Duration;

use percore::net::{Endpoint, Stream};
use percore::tls::rustls;

use super::exchange::{tls_reason, Failure, IoFailure};

/// The client side of TLS: the rustls config and the name the server's
/// certificate must be for.
pub(crate) type TlsTo<'a> = (&'a Arc<rustls::ClientConfig>, &'a str);

/// A new connection to `addr`, with its TLS handshake done when `tls` is
/// given: both within `within`, which the handshake shares so that a
/// server that accepts and then says nothing fails as a connect timeout.
pub(crate) async fn connect(
    addr: &Endpoint,
    tls: Option<TlsTo<'_>>,
    within: Duration,
) -> Result<Stream, Failure> {
    let connect = async {
        let conn = Stream::connect(addr)
            .await
            .map_err(|e| Failure::Connect(IoFailure::from(&e)))?;
        match tls {
            None => Ok(conn),
            Some((config, name)) => conn
                .connect_tls(Arc::clone(config), name)
                .await
                .map_err(|e| Failure::Tls(tls_reason(&e))),
        }
    };
    match percore::time::timeout(within, connect).await {
        Ok(result) => result,
        Err(_) => Err(Failure::ConnectTimeout),
    }
}
