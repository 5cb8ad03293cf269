//! [`HttpHandler`]: the [`Handler`] that serves a [`Service`] on a core's
//! percore connections; the connection itself is `conn/`'s.

use std::future::Future;
use std::io;
use std::sync::Arc;

use percore::{Connection, Handler};

use super::config::Config;
use super::layer::Layer;
use super::service::Service;
use super::stats::{Counters, HttpStats, HttpStatsReader};

/// Serves a [`Service`] over HTTP/1.1 on percore connections: the
/// [`Handler`] to give to the server.
///
/// Make one per core in the server's factory; it holds the service, the
/// [`Config`], the core's cached `Date` value and its shutdown watcher.
#[derive(Debug)]
pub struct HttpHandler<S> {
    /// The service and what the core's connections share.
    layer: Layer<S>,
}

impl<S: Service> HttpHandler<S> {
    /// A handler with the default [`Config`].
    pub fn new(service: S) -> Self {
        Self::with_config(service, Config::default())
    }

    /// A handler with `config`.
    pub fn with_config(service: S, config: Config) -> Self {
        Self::with_stats(config, |_| service)
    }

    /// A handler with `config`, whose service `make` builds from a reader
    /// of the handler's own counters: for a service that reports them
    /// itself (a metrics or status endpoint; the core's own counters are
    /// [`percore::core_stats`]).
    ///
    /// ```
    /// use std::io;
    /// use percore_handlers::http::{Config, HttpHandler, HttpStatsReader, Request, Response, Service};
    ///
    /// struct Status(HttpStatsReader);
    ///
    /// impl Service for Status {
    ///     async fn call(&self, _: &mut Request<'_>, res: &mut Response<'_>) -> io::Result<()> {
    ///         let core = percore::core_stats();
    ///         let body = format!("accepted={} {}\n", core.accepted, self.0.snapshot());
    ///         res.send(200, Some(b"text/plain"), body.as_bytes())?;
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let handler = HttpHandler::with_stats(Config::default(), Status);
    /// # drop(handler);
    /// ```
    pub fn with_stats(config: Config, make: impl FnOnce(HttpStatsReader) -> S) -> Self {
        let counters = Arc::<Counters>::default();
        let service = make(counters.reader());
        Self {
            layer: Layer::new(service, config, counters),
        }
    }

    /// The service.
    pub fn service(&self) -> &S {
        &self.layer.service
    }

    /// The settings.
    pub fn config(&self) -> &Config {
        &self.layer.config
    }

    /// This core's HTTP counters now: responses by status class, and why
    /// the layer answered requests itself.
    pub fn stats(&self) -> HttpStats {
        self.layer.counters.snapshot()
    }

    /// A reader of this core's HTTP counters for other threads (a stats
    /// line, a metrics exporter); take it in the server's factory.
    pub fn stats_reader(&self) -> HttpStatsReader {
        self.layer.counters.reader()
    }
}

/// The core's counters, logged once at the server's stop (when the core
/// drops its handler), if it sent anything.
impl<S> Drop for HttpHandler<S> {
    fn drop(&mut self) {
        let stats = self.layer.counters.snapshot();
        if stats != HttpStats::default() {
            tracing::info!("http {stats}");
        }
    }
}

impl<S: Service> Handler for HttpHandler<S> {
    /// A connection another core moved here (see
    /// [`ServerBuilder::move_connections`](percore::ServerBuilder::move_connections))
    /// goes on as HTTP/1.1, with its count of requests and its age: only
    /// that loop moves connections, after each read's answers are written.
    fn serve_moved(
        &self,
        conn: Connection,
        state: percore::MovedState,
    ) -> impl Future<Output = io::Result<()>> {
        super::conn::serve_moved(&self.layer, conn, state.take())
    }

    /// [`Config::shed_queue_delay`](super::Config::shed_queue_delay): a
    /// core that sheds requests accepts no new connection either, so a
    /// shed client waits in the listen queue instead of coming straight
    /// back.
    fn overload_bound(&self) -> Option<std::time::Duration> {
        self.layer.config.shed_queue_delay
    }

    fn serve(&self, conn: Connection) -> impl Future<Output = io::Result<()>> {
        #[cfg(feature = "h2")]
        {
            let layer = &self.layer;
            // A TLS connection that chose `h2` by ALPN is served by the
            // HTTP/2 loop from its first byte; a clear-text one that
            // begins with the preface is handed over by the HTTP/1 loop.
            async move {
                if super::h2::chosen_by_alpn(&conn) {
                    super::h2::serve_alpn(layer, conn).await
                } else {
                    super::conn::serve(layer, conn).await
                }
            }
        }
        #[cfg(not(feature = "h2"))]
        super::conn::serve(&self.layer, conn)
    }
}
