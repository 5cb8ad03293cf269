//! [`HttpEcho`]: the io_perfomance workload as a [`Service`].

use std::io;

use super::{Request, Response, Service};

/// The fixed body answered to `GET` and `HEAD`: 20 bytes of JSON.
pub const HELLO: &[u8] = br#"{"message":"Hello!"}"#;

/// The methods [`HttpEcho`] answers, for `Allow` on a 405.
const ALLOW: &[u8] = b"GET, HEAD, POST, PUT";

/// HTTP echo: `GET`/`HEAD` on any path answer 200 with [`HELLO`] as
/// `application/json`; `POST`/`PUT` answer 200 with the request body and
/// its `Content-Type`; any other method gets 405 with `Allow`.
///
/// Stateless, so one value serves a core; everything it writes goes into
/// the connection's reused buffers (no allocation per request).
#[derive(Debug, Clone, Copy, Default)]
pub struct HttpEcho;

impl Service for HttpEcho {
    async fn call(&self, req: &mut Request<'_>, res: &mut Response<'_>) -> io::Result<()> {
        match req.method() {
            "GET" | "HEAD" => res.send(200, Some(b"application/json"), HELLO)?,
            "POST" | "PUT" => {
                let content_type = req.content_type();
                let body = req.body().await?;
                res.send(200, content_type, body)?;
            }
            _ => {
                res.header("Allow", ALLOW)?;
                res.send(
                    405,
                    Some(b"text/plain; charset=utf-8"),
                    b"Method Not Allowed\n",
                )?;
            }
        }
        Ok(())
    }
}
