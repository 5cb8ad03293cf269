//! [`Service`]: the trait an HTTP application implements.

use std::future::Future;
use std::io;

use super::proto::{error_text, HttpError, RequestHead, ERROR_TEXT_TYPE};
use super::request::Request;
use super::response::Response;

/// An HTTP application: answers one request at a time.
///
/// The server does the framing (parsing, body decoding, keep-alive,
/// pipelining, `Expect`, `HEAD`, limits, timeouts, error responses); the
/// service only looks at the [`Request`] and fills in the [`Response`].
/// One value serves every connection of a core (the factory given to
/// [`percore::ServerBuilder::start`] makes one per core), so it may keep
/// per-core state in `Cell`s and `RefCell`s without locks.
///
/// Implement it with `async fn call`. Returning `Err` ends the exchange:
/// if the error wraps an [`HttpError`](super::HttpError) (as errors from
/// [`Request::body`] do, and as `HttpError`'s `Into<io::Error>` makes
/// them), the client gets that status with its reason as the body,
/// otherwise a bare 500. The connection then closes, except after an
/// `HttpError` with a 4xx status (the service refusing the request): when
/// the request's body was read to its end, or the server could read and
/// drop what the service left of it (within the body limit and timeout,
/// and not from a client still waiting for `100 Continue`, which may
/// never send it), the connection is kept, as after any answer; the
/// error answer, which comes after that read, then says so. An error
/// answered with a 500 is logged at WARN with the request's method and
/// target (at most one line a second per core, the next saying how many
/// were left out); one answered with a 4xx, the client's doing, at debug.
///
/// The future of `call` lives in an allocation the core lends for the
/// requests of each read, not in the connection: an idle connection does
/// not hold it (an idle `http_echo` connection is about 1.2 KB in all),
/// and a core keeps as many such allocations as it has busy connections.
/// A route whose future keeps a large value across an `.await` (say, a
/// 16 KiB array) makes each of them that large; boxed
/// (`Box::pin(async { .. }).await`), only the requests that take it pay
/// for it.
///
/// A panic in `call` is answered with a bare 500 too (unless the response
/// head was already sent by [`Response::flush`]; the body then ends
/// incomplete) and closes the connection; the core counts it (`panics` in
/// its stats) and goes on.
///
/// When the server stops, a call in progress may finish until shortly
/// before the drain deadline ([`percore::drain_deadline`]; a tenth of the
/// drain time before it, at most 500 ms). A call still running then is
/// dropped, as any future may be at an `.await`, and the client is
/// answered `503 Service Unavailable: the server is stopping` with
/// `Connection: close` (or, if [`Response::flush`] already sent the head,
/// the body ends incomplete), rather than seeing its connection close
/// without an answer when the drain cancels it. A service that counts its
/// requests can notice with a guard whose `Drop` sees it was not finished.
///
/// # Examples
///
/// ```no_run
/// use std::io;
/// use percore_handlers::http::{HttpHandler, Request, Response, Service};
///
/// struct Hello;
///
/// impl Service for Hello {
///     async fn call(&self, req: &mut Request<'_>, res: &mut Response<'_>) -> io::Result<()> {
///         if req.path() == "/" {
///             res.send(200, Some(b"text/plain"), b"hello\n")?;
///         } else {
///             res.send(404, None, b"")?;
///         }
///         Ok(())
///     }
/// }
///
/// fn main() -> io::Result<()> {
///     percore::Server::builder()
///         .address("127.0.0.1:8080".parse().unwrap())
///         .serve(|_core| HttpHandler::new(Hello))
/// }
/// ```
pub trait Service: 'static {
    /// Answers `req` by filling in `res`.
    fn call(
        &self,
        req: &mut Request<'_>,
        res: &mut Response<'_>,
    ) -> impl Future<Output = io::Result<()>>;

    /// The most body bytes the request of `head` may carry, asked once per
    /// request that has a body, before [`call`](Self::call).
    /// `configured` is the handler's [`Limits::max_body`](super::Limits)
    /// (1 MiB by default), which the default keeps. A `Content-Length` over
    /// the answer is refused with 413 before `call`, and a chunked body
    /// that grows past it fails its read with 413. So one route can take
    /// large uploads (streamed with [`Request::chunk`]) while every other
    /// keeps the small limit, or one can take less:
    ///
    /// ```
    /// use percore_handlers::http::{RequestHead, Service};
    /// # use percore_handlers::http::{Request, Response};
    /// # struct Uploads;
    /// impl Service for Uploads {
    ///     # async fn call(&self, _: &mut Request<'_>, _: &mut Response<'_>) -> std::io::Result<()> { Ok(()) }
    ///     fn body_limit(&self, head: &RequestHead<'_, '_>, configured: u64) -> u64 {
    ///         if head.path().starts_with("/upload") { 1 << 30 } else { configured }
    ///     }
    /// }
    /// ```
    fn body_limit(&self, head: &RequestHead<'_, '_>, configured: u64) -> u64 {
        let _ = head;
        configured
    }

    /// The body of an error answer, written into `body` (empty), and its
    /// content type: for every answer the server gives itself (a refused
    /// request, 400–505; a timed-out head or body, 408; a 503 at a stop)
    /// and for an error returned by [`call`](Self::call) (its
    /// [`HttpError`]'s status, or 500; a panic too). An error without a
    /// reason of its own (a 500, the router's 404) comes with its status's
    /// phrase as reason (`Internal Server Error`). The status line,
    /// `Connection` and the length are the server's; a `HEAD`
    /// request gets the head alone. The default writes [`error_text`]'s
    /// one line (`Bad Request: duplicate Content-Length`) as
    /// [`ERROR_TEXT_TYPE`]. An API that answers JSON everywhere can say
    /// so here:
    ///
    /// ```
    /// use percore_handlers::http::proto::reason_phrase;
    /// use percore_handlers::http::{HttpError, Service};
    /// # use percore_handlers::http::{Request, Response};
    /// # struct Api;
    /// impl Service for Api {
    ///     # async fn call(&self, _: &mut Request<'_>, _: &mut Response<'_>) -> std::io::Result<()> { Ok(()) }
    ///     fn error_body(&self, error: &HttpError, body: &mut Vec<u8>) -> &'static str {
    ///         // The server's reasons are short ASCII texts without quotes
    ///         // or backslashes; escape them if your own `HttpError`s may
    ///         // hold either.
    ///         let text = format!(
    ///             r#"{{"status":{},"error":"{}","detail":"{}"}}"#,
    ///             error.status,
    ///             reason_phrase(error.status),
    ///             error.reason
    ///         );
    ///         body.extend_from_slice(text.as_bytes());
    ///         "application/json"
    ///     }
    /// }
    /// ```
    ///
    /// An empty content type, or one that is not a valid field value (a
    /// control byte), or a panic here, gets the default answer instead.
    ///
    /// [`error_text`]: error_text
    /// [`ERROR_TEXT_TYPE`]: ERROR_TEXT_TYPE
    fn error_body(&self, error: &HttpError, body: &mut Vec<u8>) -> &'static str {
        error_text(error, body);
        ERROR_TEXT_TYPE
    }
}
