//! HTTP/2 to origins (feature `h2`): one connection per origin per core,
//! which carries every request of the core to that origin at once.
//!
//! An origin's [`Origin`] says what is known of it: nothing yet, a
//! connection being made (requests that come meanwhile wait for it
//! rather than open their own), HTTP/1.1 (an `https://` origin whose
//! ALPN chose it: the keep-alive pool serves it), or the live HTTP/2
//! connection. The connection's frames are the `h2` crate's client over
//! [`Io`], the stream as tokio's I/O traits, driven by a task of the
//! core ([`drive`]), which also closes it once idle for the pool's idle
//! timeout, or when the server stops.
//!
//! A connection that the server is closing (GOAWAY), or that failed, is
//! retired: the next request makes a new one. Each request's exchange
//! is [`exchange`].

mod exchange;
mod live;
mod send;

use std::cell::{Cell, RefCell};
use std::future::{poll_fn, Future};
use std::pin::pin;
use std::rc::{Rc, Weak};
use std::sync::Arc;
use std::task::{Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use h2::client::Connection;
use percore::net::Stream;
use percore::time::now;
use percore::tls::rustls;

use crate::http::H2Io as Io;

pub(crate) use exchange::{exchange, Again, H2Body, H2Request, Outcome};
pub(crate) use live::Live;
use live::Usage;

/// The ALPN name of HTTP/2 over TLS (RFC 9113 §3.2).
const ALPN_H2: &[u8] = b"h2";

/// The client's two TLS configs, made from the one given: one that
/// offers `h2` first, and one that does not offer it.
#[derive(Debug)]
pub(crate) struct TlsConfigs {
    pub(crate) h2: Arc<rustls::ClientConfig>,
    pub(crate) h1: Arc<rustls::ClientConfig>,
}

impl TlsConfigs {
    /// From `given`: `h2` put first in its ALPN list (which, empty,
    /// becomes `h2, http/1.1`), and taken out of it for the other.
    pub(crate) fn new(given: &Arc<rustls::ClientConfig>) -> Self {
        let others: Vec<Vec<u8>> = given
            .alpn_protocols
            .iter()
            .filter(|p| p.as_slice() != ALPN_H2)
            .cloned()
            .collect();
        let h1 = if others.len() == given.alpn_protocols.len() {
            Arc::clone(given)
        } else {
            let mut config = (**given).clone();
            config.alpn_protocols.clone_from(&others);
            Arc::new(config)
        };
        let mut h2 = (**given).clone();
        h2.alpn_protocols = vec![ALPN_H2.to_vec()];
        if others.is_empty() {
            h2.alpn_protocols.push(b"http/1.1".to_vec());
        } else {
            h2.alpn_protocols.extend(others);
        }
        Self {
            h2: Arc::new(h2),
            h1,
        }
    }
}

/// Whether a TLS connection agreed on `h2`.
pub(crate) fn chose_h2(conn: &Stream) -> bool {
    conn.tls_alpn().as_deref() == Some(ALPN_H2)
}

/// What is known of one origin's HTTP/2 on this core.
#[derive(Debug, Default)]
pub(crate) struct Origin {
    state: RefCell<State>,
    /// Requests waiting for the connection being made.
    waiters: RefCell<Vec<Waker>>,
    /// The generation of the next connection.
    next: Cell<u64>,
}

#[derive(Debug, Default)]
enum State {
    /// Nothing: the next request that needs a connection makes it.
    #[default]
    Unknown,
    /// A request is making the connection.
    Connecting,
    /// The origin chose HTTP/1.1 by ALPN.
    Http1,
    /// The connection.
    Live(Live),
}

/// What a request gets from [`Origin::join`].
pub(crate) enum Joined {
    /// The live connection.
    Live(Live),
    /// The origin speaks HTTP/1.1 only.
    Http1,
    /// The request makes the connection; dropped without
    /// [`Claim::install`] or [`Claim::http1`], the next request will.
    Claim(Claim),
}

/// The duty of making an origin's connection (`None` once done).
pub(crate) struct Claim(Option<Rc<Origin>>);

impl Origin {
    /// The live connection, else the duty to make it, once no other
    /// request is making it.
    pub(crate) async fn join(self: &Rc<Self>) -> Joined {
        poll_fn(|cx| {
            let mut state = self.state.borrow_mut();
            match &*state {
                State::Live(live) => Poll::Ready(Joined::Live(live.clone())),
                State::Http1 => Poll::Ready(Joined::Http1),
                State::Unknown => {
                    *state = State::Connecting;
                    Poll::Ready(Joined::Claim(Claim(Some(Rc::clone(self)))))
                }
                State::Connecting => {
                    let mut waiters = self.waiters.borrow_mut();
                    if !waiters.iter().any(|w| w.will_wake(cx.waker())) {
                        waiters.push(cx.waker().clone());
                    }
                    Poll::Pending
                }
            }
        })
        .await
    }

    /// Forgets the connection of `generation`, if it is still the
    /// origin's: the server is closing it, it failed, or it is idle. It
    /// ends once its streams have (the `h2` crate closes a connection
    /// that no one can send on).
    pub(crate) fn retire(&self, generation: u64) {
        let mut state = self.state.borrow_mut();
        if matches!(&*state, State::Live(live) if live.generation == generation) {
            *state = State::Unknown;
        }
    }

    fn settle(&self, state: State) {
        *self.state.borrow_mut() = state;
        for waker in self.waiters.take() {
            waker.wake();
        }
    }
}

impl Claim {
    /// Makes `conn` (HTTP/2 agreed on, by ALPN or prior knowledge) the
    /// origin's connection, its driver a task of the core closing it
    /// once idle for `idle_timeout`; `None` if `h2`'s handshake failed.
    pub(crate) async fn install(mut self, conn: Stream, idle_timeout: Duration) -> Option<Live> {
        let mut builder = h2::client::Builder::new();
        // Wide enough windows that a fast origin is not held to a round
        // trip per 64 KiB (the protocol's default window).
        builder
            .initial_window_size(1 << 20)
            .initial_connection_window_size(4 << 20);
        let (send, mut connection) = match builder.handshake(Io::client(conn)).await {
            Ok(pair) => pair,
            Err(e) => {
                tracing::debug!(error = %e, "HTTP/2 handshake with an origin failed");
                return None;
            }
        };
        let pings = connection.ping_pong();
        let origin = self.0.as_ref()?;
        let generation = origin.next.get();
        origin.next.set(generation + 1);
        let live = Live {
            send,
            generation,
            usage: Rc::new(Usage {
                streams: Cell::new(0),
                idle_since: Cell::new(now()),
            }),
            used: Rc::new(Cell::new(false)),
        };
        let driver = percore::spawn_local(drive(
            connection,
            Rc::downgrade(origin),
            generation,
            Rc::clone(&live.usage),
            idle_timeout,
        ));
        // Until the server's SETTINGS come, its limit on streams is not
        // known, and `h2` would open as many as asked: the ones past it
        // would be refused. The server's SETTINGS is its first frame, so
        // the answer to a PING comes after it.
        if let Some(mut pings) = pings {
            if let Err(e) = pings.ping(h2::Ping::opaque()).await {
                tracing::debug!(error = %e, "HTTP/2 origin did not answer its first PING");
                driver.abort();
                return None;
            }
        }
        let origin = self.0.take()?;
        origin.settle(State::Live(live.clone()));
        Some(live)
    }

    /// The origin chose HTTP/1.1.
    pub(crate) fn http1(mut self) {
        if let Some(origin) = self.0.take() {
            origin.settle(State::Http1);
        }
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        // The connect failed or was given up: the next request tries.
        if let Some(origin) = self.0.take() {
            origin.settle(State::Unknown);
        }
    }
}

/// Drives one connection's frames until it ends, retiring it from its
/// origin when it has had no stream for `idle_timeout` (checked every
/// half of it, at least 100 ms apart), when the server stops, and when
/// it ends.
async fn drive(
    connection: Connection<Io<'static>, Bytes>,
    origin: Weak<Origin>,
    generation: u64,
    usage: Rc<Usage>,
    idle_timeout: Duration,
) {
    let every = (idle_timeout / 2).clamp(Duration::from_millis(100), Duration::from_secs(60));
    let retire = || {
        if let Some(origin) = origin.upgrade() {
            origin.retire(generation);
        }
    };
    let mut connection = pin!(connection);
    let mut tick = pin!(percore::time::sleep(every));
    let ended = poll_fn(|cx| {
        if let Poll::Ready(result) = connection.as_mut().poll(cx) {
            return Poll::Ready(result);
        }
        while tick.as_mut().poll(cx).is_ready() {
            let at = now();
            let idle = usage.streams.get() == 0
                && at.saturating_duration_since(usage.idle_since.get()) >= idle_timeout;
            if idle || percore::is_shutting_down() {
                retire();
            }
            tick.as_mut().reset(at + every);
        }
        Poll::Pending
    })
    .await;
    retire();
    if let Err(e) = ended {
        tracing::debug!(error = %e, "HTTP/2 connection to an origin ended");
    }
}
