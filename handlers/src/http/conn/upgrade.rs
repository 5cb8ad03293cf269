//! The switch of an upgraded exchange: once a service that accepted an
//! upgrade returns, its `101 Switching Protocols` head goes in the output
//! and the connection loop hands the stream over (see
//! [`Response::upgrade`]).

use std::io;

use super::state::Conn;
use crate::http::proto::{Framing, HttpError, ResponseHead};
use crate::http::request::Request;
use crate::http::response::Response;
use crate::http::service::Service;
use crate::http::upgrade::OnUpgrade;

impl<S: Service> Conn<'_, S> {
    /// After a service that called [`Response::upgrade`] returned
    /// `result`: puts the 101 head in the output and gives what takes the
    /// connection. `Err` holds the result the exchange ends with instead,
    /// answered as any other: the service's error, a 500 for an upgrade
    /// of a request that asked for none (or a response already streamed),
    /// or `Ok` for a service that set another status after all (it
    /// changed its mind; the connection stays HTTP).
    pub(super) fn switch(
        &self,
        req: &Request<'_>,
        res: &mut Response<'_>,
        result: io::Result<()>,
    ) -> Result<OnUpgrade, io::Result<()>> {
        let Some(then) = res.upgrade.take() else {
            return Err(result);
        };
        result.map_err(Err)?;
        if res.status != 101 {
            return Err(Ok(()));
        }
        if req.upgrade_protocol().is_none() || res.streaming.is_some() {
            let refused = HttpError::new(500, "upgrade of a request that cannot be upgraded");
            return Err(Err(refused.into()));
        }
        res.headers.extend_from_slice(b"Connection: Upgrade\r\n");
        let head = ResponseHead::new(101, Framing::Empty);
        let headers = &*res.headers;
        self.layer
            .date
            .with(|date| {
                self.wire
                    .with_out(|out| head.encode_raw(date, headers, out))
            })
            .map_err(|e| Err(e.into()))?;
        Ok(then)
    }
}
