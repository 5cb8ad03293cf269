//! gRPC deadlines on the server: the `grpc-timeout` a client sends ends
//! the call when it passes, as gRPC's servers do.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::header::{HeaderMap, HeaderValue, CONTENT_TYPE};
use hyper::{Request, Response};
use pin_project_lite::pin_project;

/// A tower service that answers `DEADLINE_EXCEEDED` (gRPC status 4) when
/// a call outlives its deadline: the client's `grpc-timeout` header, or
/// the server's own limit if that is shorter. The inner call is dropped
/// then, so what it awaits is cancelled.
///
/// The deadline covers the call up to its response's headers, as in gRPC's
/// own servers: a server-streaming reply already under way is not cut. A
/// `grpc-timeout` that does not parse (gRPC's grammar: up to 8 digits and
/// a unit, one of `H M S m u n`) is answered with `INTERNAL`, as gRPC's
/// servers answer it.
///
/// Its timers are the core's, so calls are made on a core thread, as a
/// [`HyperHandler`](super::HyperHandler)'s connections make them.
///
/// Needs the `hyper` feature.
#[derive(Debug, Clone)]
pub struct GrpcTimeout<S> {
    inner: S,
    limit: Option<Duration>,
}

impl<S> GrpcTimeout<S> {
    /// Deadlines from the client's `grpc-timeout`, else none.
    pub fn new(inner: S) -> Self {
        GrpcTimeout { inner, limit: None }
    }

    /// Also ends every call after `limit`, whatever the client asked.
    pub fn with_limit(inner: S, limit: Duration) -> Self {
        GrpcTimeout {
            inner,
            limit: Some(limit),
        }
    }
}

impl<S, B, R> tower_service::Service<Request<B>> for GrpcTimeout<S>
where
    S: tower_service::Service<Request<B>, Response = Response<R>>,
    R: Default,
{
    type Response = Response<R>;
    type Error = S::Error;
    type Future = Deadline<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let asked = match req.headers().get("grpc-timeout").map(parse) {
            None => None,
            Some(Some(asked)) => Some(asked),
            Some(None) => {
                return Deadline {
                    call: None,
                    sleep: None,
                    answer: Some(Status::BAD_TIMEOUT),
                }
            }
        };
        let deadline = match (asked, self.limit) {
            (Some(a), Some(l)) => Some(a.min(l)),
            (a, l) => a.or(l),
        };
        Deadline {
            call: Some(self.inner.call(req)),
            sleep: deadline.map(percore::time::sleep),
            answer: Some(Status::DEADLINE),
        }
    }
}

/// A gRPC status answered without calling the service: its code and
/// message.
#[derive(Debug, Clone, Copy)]
struct Status(&'static str, &'static str);

impl Status {
    const DEADLINE: Status = Status("4", "Timeout expired");
    const BAD_TIMEOUT: Status = Status("13", "malformed grpc-timeout header");

    /// A trailers-only answer: HTTP 200 and the status in the headers.
    fn answer<R: Default>(self) -> Response<R> {
        let mut resp = Response::new(R::default());
        let headers: &mut HeaderMap = resp.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
        headers.insert("grpc-status", HeaderValue::from_static(self.0));
        headers.insert("grpc-message", HeaderValue::from_static(self.1));
        resp
    }
}

pin_project! {
    /// The future of a [`GrpcTimeout`] call.
    pub struct Deadline<F> {
        // The service's call; `None` when answered without one.
        #[pin]
        call: Option<F>,
        sleep: Option<percore::time::Sleep>,
        // What to answer when the call is cut short, or made at all.
        answer: Option<Status>,
    }
}

impl<F, R, E> Future for Deadline<F>
where
    F: Future<Output = Result<Response<R>, E>>,
    R: Default,
{
    type Output = Result<Response<R>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Some(call) = this.call.as_pin_mut() {
            if let Poll::Ready(out) = call.poll(cx) {
                return Poll::Ready(out);
            }
            let expired = match this.sleep {
                Some(sleep) => Pin::new(sleep).poll(cx).is_ready(),
                None => false,
            };
            if !expired {
                return Poll::Pending;
            }
        }
        let status = this.answer.take().expect("polled after it was answered");
        Poll::Ready(Ok(status.answer()))
    }
}

/// The duration a `grpc-timeout` value says: up to 8 digits, then `H`,
/// `M`, `S`, `m`, `u` or `n`; `None` if it says none.
fn parse(value: &HeaderValue) -> Option<Duration> {
    let value = value.to_str().ok()?;
    let (digits, unit) = value.split_at(value.len().checked_sub(1)?);
    if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n * 3600),
        "M" => Duration::from_secs(n * 60),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(s: &str) -> Option<Duration> {
        parse(&HeaderValue::from_str(s).unwrap())
    }

    #[test]
    fn grpc_timeout_values() {
        assert_eq!(parsed("1H"), Some(Duration::from_secs(3600)));
        assert_eq!(parsed("2M"), Some(Duration::from_secs(120)));
        assert_eq!(parsed("3S"), Some(Duration::from_secs(3)));
        assert_eq!(parsed("250m"), Some(Duration::from_millis(250)));
        assert_eq!(parsed("99999999u"), Some(Duration::from_micros(99_999_999)));
        assert_eq!(parsed("7n"), Some(Duration::from_nanos(7)));
        for bad in ["", "m", "100", "100x", "123456789m", "-1S", "1.5S", " 1S"] {
            assert_eq!(parsed(bad), None, "{bad:?}");
        }
    }
}
