//! The HTTP/2 baseline: hyper's HTTP/2 server (`hyper::server::conn::http2`
//! with its defaults) answering every request as `http_echo` answers a GET,
//! 200 with the 20-byte JSON body. Served by `hyper_h2` (the baseline of
//! `benches/h2.sh`) and by the tokio servers of the harness's `h2_server`
//! cells.
//!
//! What it measures: nothing by itself; it is the comparison point, hyper
//! as a user gets it (each stream a task of the runtime, spawned with
//! `TokioExecutor`). What it does not: speak HTTP/1.1 (a connection must
//! begin with the HTTP/2 preface, or have chosen `h2` by ALPN).

use std::convert::Infallible;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncRead, AsyncWrite};

use crate::http::BODY;

async fn answer(_: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let mut res = Response::new(Full::new(Bytes::from_static(BODY)));
    res.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    Ok(res)
}

/// Serves one connection as HTTP/2 until the client leaves; errors (a
/// client gone mid-stream) just end it. Its streams are tasks of the
/// current tokio runtime.
pub async fn serve<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(io: S) {
    let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
        .serve_connection(TokioIo::new(io), hyper::service::service_fn(answer))
        .await;
}
