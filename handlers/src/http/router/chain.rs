//! The routes' handlers as a chain of types, one link per route, so that
//! calling route *i* is a static call whose future lives inline in the
//! connection's own: no box, no allocation, whatever each handler's future
//! type is.

use std::future::{ready, Future};
use std::io;

use percore::future::Either;

use super::super::error::RouteResult;
use super::super::{HttpError, Response};
use super::Routed;

/// An async function that answers a routed request: `async fn(&S,
/// &mut Routed, &mut Response) -> R`, or an async closure of that shape,
/// where `R` is `http::Result` (any error, see [`Error`](super::super::Error))
/// or `io::Result<()>`.
pub trait RouteFn<S> {
    /// The future of one call, its result as the server layer answers it.
    fn call<'a>(
        &'a self,
        state: &'a S,
        req: &'a mut Routed<'_, '_>,
        res: &'a mut Response<'_>,
    ) -> impl Future<Output = io::Result<()>> + 'a;
}

impl<S, F, R> RouteFn<S> for F
where
    F: AsyncFn(&S, &mut Routed<'_, '_>, &mut Response<'_>) -> R,
    R: RouteResult,
{
    #[inline]
    fn call<'a>(
        &'a self,
        state: &'a S,
        req: &'a mut Routed<'_, '_>,
        res: &'a mut Response<'_>,
    ) -> impl Future<Output = io::Result<()>> + 'a {
        let call = self(state, req, res);
        async move { call.await.into_io() }
    }
}

/// The handlers of a router, reached by route index.
pub trait Chain<S> {
    /// The future of route `index`'s handler.
    fn call<'a>(
        &'a self,
        index: usize,
        state: &'a S,
        req: &'a mut Routed<'_, '_>,
        res: &'a mut Response<'_>,
    ) -> impl Future<Output = io::Result<()>> + 'a;
}

/// The empty chain: a router with no routes.
#[derive(Debug, Clone, Copy, Default)]
pub struct End;

impl<S> Chain<S> for End {
    fn call<'a>(
        &'a self,
        _: usize,
        _: &'a S,
        _: &'a mut Routed<'_, '_>,
        _: &'a mut Response<'_>,
    ) -> impl Future<Output = io::Result<()>> + 'a {
        // Not reached: the table only hands out indices of added routes.
        ready(Err(HttpError::new(500, "no such route").into()))
    }
}

/// One route's handler, then the routes added before it.
#[derive(Debug, Clone, Copy)]
pub struct Link<F, T> {
    pub(super) index: usize,
    pub(super) handler: F,
    pub(super) rest: T,
}

impl<S, F: RouteFn<S>, T: Chain<S>> Chain<S> for Link<F, T> {
    fn call<'a>(
        &'a self,
        index: usize,
        state: &'a S,
        req: &'a mut Routed<'_, '_>,
        res: &'a mut Response<'_>,
    ) -> impl Future<Output = io::Result<()>> + 'a {
        if index == self.index {
            Either::Left(self.handler.call(state, req, res))
        } else {
            Either::Right(self.rest.call(index, state, req, res))
        }
    }
}
